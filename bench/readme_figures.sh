#!/bin/sh
# readme_figures.sh: makes the README's figures, so none can drift from what the code prints. Each block of
# README.md between `<!-- readme_figures: ID -->` and `<!-- /readme_figures -->` is the output of the
# recipe ID below: the command it shows, run with its kernel level pinned (AMPC_ISA and
# AMPC_KERNEL_CHOICE=rule, so every CPU that runs that level prints the same bits) and with fixed --threads,
# then a line naming the CPU, the level and the threads. `--check` (the default) runs the recipes and fails
# when a README number they own differs; timing figures (ms, tokens/s, GFLOP/s, % of peak, speed-ups,
# the CPU's name and the date) are left out of the comparison, since they are the machine's. `--update`
# writes the blocks into README.md instead (timings included: the machine line then names this CPU).
#
#   bench/readme_figures.sh [--check | --update] [--short] [--list] [ID ...]
#
# --short runs the recipes marked short (under a minute on two cores: what CI runs); without it the long
# ones run too (Fashion-MNIST, the fortunes text, GPT-2's shapes: about 25 minutes on two cores). A recipe
# whose kernel level this CPU lacks (amx on the EPYC), or whose data is not installed, is skipped with a
# line saying why and does not fail. AMPC (default build/ampc) and EXAMPLES (build/examples) name the
# binaries; README (default README.md) the file. What the README gives that no recipe owns says where it
# comes from: bench/fp16_accuracy.sh (accuracy over seeds), bench/vs_pytorch.sh (PyTorch's columns) and
# other machines' measurements, each named where it stands.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

AMPC=${AMPC:-build/ampc}
EXAMPLES=${EXAMPLES:-build/examples}
README=${README:-README.md}
mode=check short=0 list=0 only=""
for a in "$@"; do
    case $a in
    --check) mode=check ;;
    --update) mode=update ;;
    --short) short=1 ;;
    --list) list=1 ;;
    -h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "readme_figures.sh: unknown option $a (--check, --update, --short, --list)" >&2; exit 2 ;;
    *) only="$only $a" ;;
    esac
done

# id:size:level:needs (level: the pinned kernel level, "any" when the output does not depend on it).
RECIPES="quickstart:short:avx512:-
quickstart_amx:short:amx:-
sr:short:avx512:-
formats:short:any:-
simple_amp:short:avx512:-
step_memory:short:avx512:-
grad_accum:short:amx:-
sample:short:avx512:-
fashion:long:avx512:fashion-mnist
doctor:long:avx512:fashion-mnist
fortunes:long:avx512:fortunes
gpt2:long:amx:-
dist:long:amx:mpirun
pytorch_load:long:avx512:torch"

if [ "$list" = 1 ]; then
    printf '%s\n' "$RECIPES" | tr ':' ' ' | awk '{ printf "%-15s %-6s level %-7s needs %s\n", $1, $2, $3, $4 }'
    exit 0
fi
[ -x "$AMPC" ] || { echo "readme_figures.sh: $AMPC is not built (cmake --build build)" >&2; exit 1; }
[ -f "$README" ] || { echo "readme_figures.sh: $README not found" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
unset COLUMNS # tables at full width, as on a pipe
AMPC_ABS=$(cd "$(dirname "$AMPC")" && pwd)/$(basename "$AMPC")
EXAMPLES_ABS=$(cd "$EXAMPLES" 2>/dev/null && pwd || echo "$EXAMPLES")
BRAND=$("$AMPC" info | sed -n 's/^  brand *//p')
BEST=$("$AMPC" info | sed -n 's/^kernel level *best \([a-z0-9]*\);.*/\1/p')
FASHION_DIR=/usr/share/datasets/fashion-mnist
FORTUNES_DIR=/usr/share/games/fortunes

# ---- helpers -------------------------------------------------------------------------------------------

# Runs ampc in the recipe's folder with the level pinned: pinned LEVEL ARGS...
pinned() {
    lv=$1
    shift
    (cd "$WORK/run" && AMPC_ISA=$lv AMPC_KERNEL_CHOICE=rule AMPC_KERNEL_CACHE=off "$AMPC_ABS" "$@")
}

# The line under every block: which CPU, level and threads made it.
machine() { # LEVEL THREADS [EXTRA]
    th="$2 threads"
    [ "$2" = 1 ] && th="1 thread"
    printf '<sub>Made by `bench/readme_figures.sh %s` on %s, kernel level %s (pinned: `AMPC_ISA=%s AMPC_KERNEL_CHOICE=rule`), %s, %s%s.</sub>\n' \
        "$ID" "$BRAND" "$1" "$1" "$th" "$(date -u +%Y-%m-%d)" "${3:-}"
}

# A JSON number or string of one `--json` line: jget KEY < line
jget() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# compare's table and verdicts, from its header on.
compare_table() { sed -n '/^precision /,$p' | grep -v '^ampc compare: report written'; }

# "fp32 12%, bf16 7%": each precision's fraction of the measured peak for one `bench step --json` output.
peak_fractions() {
    sep=""
    while read -r line; do
        printf '%s%s %.0f%% of %s' "$sep" "$(echo "$line" | jget precision)" \
            "$(awk -v f="$(echo "$line" | jget peak_fraction)" 'BEGIN { print 100 * f }')" "$(echo "$line" | jget peak_unit)"
        sep=", "
    done
}

# The README's fortunes.txt: Debian's fortunes files, one after another.
fortunes_text() { cat $(ls -d "$FORTUNES_DIR"/* | grep -v '\.'); }

MiB() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# ---- recipes: each prints its block ---------------------------------------------------------------------

QS="--layers 2 --d-model 128 --heads 4 --context 64 --steps 300"
recipe_quickstart() { # the quick start's table, at the level every AVX-512 CPU runs
    lv=${1:-avx512}
    echo '```'
    pinned "$lv" compare $QS --threads 2 | compare_table
    echo '```'
    fr=$(pinned "$lv" bench step $QS --batch 16 --steps 3 --untimed 2 --threads 2 --json | peak_fractions)
    machine "$lv" 2 "; a training step of this model runs its matrix products at $fr (\`ampc bench step\`)"
}
recipe_quickstart_amx() { recipe_quickstart amx; }

recipe_sr() {
    echo '```'
    echo "\$ ampc compare --layers 2 --d-model 64 --heads 4 --context 32 --batch 8 --steps 200 --precisions \\"
    echo "  'fp32,bf16,half:bf16{param-dtype=bf16,master=none},sr:bf16{param-dtype=bf16,master=none,stochastic-rounding}'"
    pinned avx512 compare --layers 2 --d-model 64 --heads 4 --context 32 --batch 8 --steps 200 --threads 2 --precisions \
        'fp32,bf16,half:bf16{param-dtype=bf16,master=none},sr:bf16{param-dtype=bf16,master=none,stochastic-rounding}' |
        compare_table | sed -n '1,6p'
    echo '```'
    machine avx512 2
}

recipe_formats() {
    echo '```'
    "$AMPC" formats | sed -n '/^format  *max finite/,/^$/p' | grep -E '^(format|FP32|BF16|FP16) '
    echo '```'
}

recipe_simple_amp() {
    [ -x "$EXAMPLES_ABS/simple_amp" ] || { echo "readme_figures.sh: $EXAMPLES/simple_amp is not built" >&2; return 1; }
    echo '```'
    echo '$ LD_LIBRARY_PATH=/opt/ampc/lib ./simple_amp'
    (cd "$WORK/run" && AMPC_ISA=avx512 AMPC_KERNEL_CHOICE=rule "$EXAMPLES_ABS/simple_amp")
    echo '```'
    machine avx512 1
}

# One markdown row per precision of a `bench step --json` run: precision | ms | tok/s | GFLOP/s | % peak |
# peak MiB | state MiB | activations MiB | host syncs per step.
step_rows() {
    while read -r line; do
        printf '| %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s |\n' "$(echo "$line" | jget precision)" \
            "$(echo "$line" | jget ms_per_step)" "$(echo "$line" | jget tokens_per_s)" "$(echo "$line" | jget gflops)" \
            "$(echo "$line" | peak_fractions | sed 's/^[a-z0-9]* //')" "$(MiB "$(echo "$line" | jget peak_bytes)")" \
            "$(MiB "$(echo "$line" | jget state_bytes)")" "$(MiB "$(echo "$line" | jget activation_bytes)")" \
            "$(echo "$line" | jget syncs_per_step)"
    done
}

recipe_step_memory() { # the default GPT's step: memory and host synchronisation points per precision
    echo '`ampc bench step --precisions fp32,bf16,fp16,fp8 --threads 2` (default GPT: 6 layers, d 384, context 256, batch 8):'
    echo
    echo '| precision | ms/step | tokens/s | GFLOP/s | of the peak | peak MiB | state MiB | activations MiB | host syncs/step |'
    echo '|:--|--:|--:|--:|:--|--:|--:|--:|--:|'
    pinned avx512 bench step --precisions fp32,bf16,fp16,fp8 --threads 2 --steps 3 --untimed 1 --json | step_rows
    echo
    machine avx512 2
}

recipe_grad_accum() { # the same 2,048 tokens per optimizer step as one batch and as 2 and 4 micro-batches
    rounds=3
    [ "$short" = 1 ] && rounds=1
    for r in $(seq "$rounds"); do
        for cfg in "8 1" "4 2" "2 4"; do
            set -- $cfg
            pinned amx bench step --precisions bf16 --threads 2 --steps 5 --untimed 1 --batch "$1" --grad-accum "$2" \
                --json | sed "s/^/$1 $2 /" >>"$WORK/ga"
        done
    done
    echo "| per step | ms/step (median of $rounds) | tokens/s | of the peak | peak MiB | vs one batch |"
    echo '|---|--:|--:|:--|--:|--:|'
    base=""
    for cfg in "8 1" "4 2" "2 4"; do
        set -- $cfg
        ms=$(grep "^$1 $2 " "$WORK/ga" | jget ms_per_step | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        line=$(grep "^$1 $2 " "$WORK/ga" | tail -1)
        [ -n "$base" ] || base=$ms
        label="\`--batch $1\`"
        [ "$2" = 1 ] || label="\`--batch $1 --grad-accum $2\`"
        printf '| %s | %.0f | %.0f | %s | %s | %s |\n' "$label" "$ms" "$(awk -v m="$ms" 'BEGIN { print 2048000 / m }')" \
            "$(echo "$line" | peak_fractions | sed 's/^bf16 //')" "$(MiB "$(echo "$line" | jget peak_bytes)")" \
            "$(awk -v m="$ms" -v b="$base" 'BEGIN { d = 100 * (m / b - 1); if (d < 0.05 && d > -0.05) print "1.00"; else printf "%+.1f%%", d }')"
    done
    echo
    machine amx 2 "; \`ampc bench step --precisions bf16 --threads 2 --steps 5 --untimed 1\` and the batch options, interleaved"
}

recipe_sample() {
    pinned avx512 train --layers 2 --d-model 64 --heads 4 --context 64 --batch 8 --steps 300 --precision fp32 \
        --threads 2 --checkpoint arith.st --quiet >/dev/null
    echo '```'
    echo "\$ ampc sample --checkpoint arith.st --prompt '12+34=' --tokens 4 --temperature 0"
    pinned avx512 sample --checkpoint arith.st --prompt '12+34=' --tokens 4 --temperature 0 --threads 2
    echo "\$ ampc sample --checkpoint arith.st --prompt '7*8=' --tokens 60 --seed 5"
    pinned avx512 sample --checkpoint arith.st --prompt '7*8=' --tokens 60 --seed 5 --threads 2
    echo '```'
    machine avx512 2
}

recipe_fashion() { # the CNN and the MLP, 3 epochs each in three precisions
    echo '```'
    for m in cnn mlp; do
        echo "\$ ampc compare --model $m --data fashion-mnist --epochs 3"
        pinned avx512 compare --model $m --data fashion-mnist --epochs 3 --threads 2 | compare_table | sed -n '1,5p'
    done
    echo '```'
    machine avx512 2
}

recipe_doctor() { # the first rows and the verdict (the full output has one row per module, op and role)
    echo '```'
    echo '$ ampc doctor --model mlp --data fashion-mnist --steps 5'
    pinned avx512 doctor --model mlp --data fashion-mnist --steps 5 --threads 2 | sed 's/ --threads 2//' |
        awk '/^ampc doctor:/ || /^module op role/ || /^layers\.\* linear out/ || /^- relu grad/ { sub(/ +$/, ""); print }
             /^- relu grad/ { print "..." } /^FP16: / { on = 1 } on && /^or / { exit } on { print }'
    echo '```'
    machine avx512 2
}

recipe_fortunes() {
    fortunes_text >"$WORK/run/fortunes.txt"
    echo '```'
    echo '$ ampc compare --data text:fortunes.txt --layers 4 --d-model 256 --heads 4 --context 128 --steps 1000'
    pinned avx512 compare --data text:fortunes.txt --layers 4 --d-model 256 --heads 4 --context 128 --steps 1000 \
        --threads 2 | compare_table
    echo '```'
    machine avx512 2
}

recipe_gpt2() { # GPT-2's shapes on random tokens: one timed step each (the memory columns are exact)
    echo '| GPT-2 shape (1024 tokens a row) | precision | batch | ms/step | tokens/s | of the peak | peak MiB | state MiB | MiB/token |'
    echo '|:--|:--|--:|--:|--:|:--|--:|--:|--:|'
    for cfg in "small bf16 1" "small fp32 1" "small bf16 4" "medium bf16 1"; do
        set -- $cfg
        line=$(pinned amx bench step --preset "gpt2-$1" --batch "$3" --precisions "$2" --steps 1 --untimed 1 --threads 2 --json)
        printf '| %s | %s | %s | %.0f | %.0f | %s | %.0f | %.0f | %.2f |\n' "$1" "$2" "$3" "$(echo "$line" | jget ms_per_step)" \
            "$(echo "$line" | jget tokens_per_s)" "$(echo "$line" | peak_fractions | sed "s/^$2 //")" \
            "$(MiB "$(echo "$line" | jget peak_bytes)")" "$(MiB "$(echo "$line" | jget state_bytes)")" \
            "$(echo "$line" | awk -v p="$(echo "$line" | jget peak_bytes_per_token)" 'BEGIN { print p / 1048576 }')"
    done
    echo
    machine amx 2 "; \`ampc bench step --preset gpt2-SHAPE --batch B --precisions P --steps 1 --untimed 1\`"
}

# ampc's checkpoint evaluated by PyTorch (examples/pytorch_load.py): both validation losses.
TORCH_PYTHON=${TORCH_PYTHON:-}
if [ -z "$TORCH_PYTHON" ]; then
    for py in "$ROOT/.venv-torch/bin/python" python3; do
        if "$py" -c 'import torch, safetensors' 2>/dev/null; then TORCH_PYTHON=$py && break; fi
    done
fi
recipe_pytorch_load() {
    fortunes_text | head -c 60000 >"$WORK/run/text60k.txt"
    pinned avx512 train --data text:text60k.txt --layers 2 --d-model 64 --heads 4 --context 64 --steps 200 \
        --precision fp32 --threads 2 --checkpoint m.st --log m.jsonl --quiet >/dev/null
    echo '```'
    echo '$ head -c 60000 fortunes.txt > text60k.txt'
    echo '$ ampc train --data text:text60k.txt --layers 2 --d-model 64 --heads 4 --context 64 --steps 200 --precision fp32 --checkpoint m.st --log m.jsonl'
    echo "\$ grep -o '\"eval_loss\":[^,]*' m.jsonl"
    grep -o '"eval_loss":[^,]*' "$WORK/run/m.jsonl"
    echo '$ python3 examples/pytorch_load.py m.st text60k.txt'
    (cd "$WORK/run" && "$TORCH_PYTHON" "$ROOT/examples/pytorch_load.py" m.st text60k.txt 2>/dev/null)
    echo '```'
    machine avx512 2 "; PyTorch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
}

# Data parallel on two ranks: bench step on 1 rank x 1 thread, 2 ranks x 1 thread and 1 rank x 2 threads,
# then the largest rank's peak memory of a small model whose state outweighs its activations per --shard.
two_ranks() { (cd "$WORK/run" && AMPC_ISA=amx AMPC_KERNEL_CHOICE=rule AMPC_KERNEL_CACHE=off \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    mpirun -np 2 "$AMPC_ABS" "$@"); }
recipe_dist() {
    echo '| precision | 1 rank x 1 thread | 2 ranks x 1 thread | speed-up | 1 rank x 2 threads | speed-up | allreduce hidden | MiB reduced a step | peak MiB: 1 rank / rank 0 of 2 |'
    echo '|:--|--:|--:|--:|--:|--:|--:|--:|--:|'
    for p in bf16 fp32 fp16; do
        a=$(pinned amx bench step --precisions $p --threads 1 --json)
        b=$(two_ranks bench step --precisions $p --threads 1 --json)
        c=$(pinned amx bench step --precisions $p --threads 2 --json)
        ma=$(echo "$a" | jget ms_per_step) mb=$(echo "$b" | jget ms_per_step) mc=$(echo "$c" | jget ms_per_step)
        printf '| %s | %.1f ms | %.1f ms | %.2fx | %.1f ms | %.2fx | %.0f%% of %.1f ms | %s | %s / %s |\n' "$p" "$ma" "$mb" \
            "$(awk -v a="$ma" -v b="$mb" 'BEGIN { print a / b }')" "$mc" "$(awk -v a="$ma" -v b="$mc" 'BEGIN { print a / b }')" \
            "$(echo "$b" | awk -v h="$(echo "$b" | jget reduce_hidden_fraction)" 'BEGIN { print 100 * h }')" \
            "$(echo "$b" | jget reduce_alone_ms)" "$(MiB "$(echo "$b" | jget bytes_reduced_per_step)")" \
            "$(MiB "$(echo "$a" | jget peak_bytes)")" "$(MiB "$(echo "$b" | jget peak_bytes)")"
    done
    echo
    for sh in none optimizer full; do
        two_ranks train --layers 4 --d-model 128 --heads 4 --context 16 --batch 2 --steps 3 --threads 1 --quiet \
            --eval-batches 1 --param-dtype bf16 --shard $sh --log $sh.jsonl >/dev/null
    done
    printf '| `--layers 4 --d-model 128 --context 16 --batch 2 --param-dtype bf16` | `--shard none` | `optimizer` | `full` |\n'
    echo '|:--|--:|--:|--:|'
    printf '| the largest rank'"'"'s peak MiB |'
    for sh in none optimizer full; do printf ' %s |' "$(MiB "$(grep '"final"' "$WORK/run/$sh.jsonl" | jget peak_bytes)")"; done
    echo
    echo
    machine amx "2 ranks x 1 and 1 rank x 1 or 2" "; \`ampc bench step --threads 1\` against \`mpirun -np 2 ampc bench step --threads 1\`, Open MPI $(mpirun --version 2>/dev/null | sed -n '1s/.* \([0-9.]*\)$/\1/p')"
}

# ---- masks: what --check compares (timing and machine fields become ~) ---------------------------------

mask_common() {
    sed -E 's/^(<sub>Made by `[^`]*` on ).*(, kernel level [a-z0-9]+ )/\1~\2/; s/, [0-9]{4}-[0-9]{2}-[0-9]{2}([;.])/, ~\1/' |
        sed -E 's/[0-9.]+% of (fma32|bf16dp|amx)/~ of \1/g'
}
# compare's tables: the last three columns (tokens/s, time s, speed-up) and the verdicts' speed ("1.26x faster",
# "about as fast as fp32 (1.01x)", "speed not compared (...)") and throughput.
mask_compare() {
    awk 'NF >= 11 && $1 !~ /^(precision|---------)$/ && $(NF) ~ /x$/ { $(NF) = "~"; $(NF - 1) = "~"; $(NF - 2) = "~"; $1 = $1 } { print }' |
        sed -E 's/ — [^,]*, final loss/ — ~, final loss/; s/[0-9]+ (tokens|samples)\/s/~ \1\/s/'
}
# markdown tables: the columns named by index (1 = the first cell).
mask_md() { # COLS...
    awk -v cols="$*" 'BEGIN { n = split(cols, c, " ") }
        /^\|/ && !/^\|[-:|]+$/ { m = split($0, f, "|"); for (i = 1; i <= n; i++) f[c[i] + 1] = " ~ ";
                     s = f[1]; for (i = 2; i <= m; i++) s = s "|" f[i]; print s; next } { print }'
}
mask_quickstart() { mask_compare; }
mask_quickstart_amx() { mask_compare; }
mask_sr() { mask_compare; }
mask_fashion() { mask_compare; }
mask_fortunes() { mask_compare; }
mask_formats() { cat; }
mask_doctor() { sed -E 's/statistics added [0-9.]+%/statistics added ~%/'; }
mask_simple_amp() { cat; }
mask_sample() { cat; }
mask_step_memory() { mask_md 2 3 4 5; }
mask_grad_accum() { sed -E 's/median of [0-9]+/median of ~/' | mask_md 2 3 4 6; }
mask_gpt2() { mask_md 4 5 6; }
mask_pytorch_load() { sed -E 's/(validation loss in PyTorch [0-9]+\.[0-9]{4})[0-9]*/\1~/; s/; PyTorch [^.]*[.0-9a-z+]*/; PyTorch ~/'; }
mask_dist() { mask_md 2 3 4 5 6 7; }

# ---- driver ---------------------------------------------------------------------------------------------

# The block of ID as README.md holds it (without the markers); status 1 when there is none.
readme_block() {
    awk -v id="$1" '$0 == "<!-- readme_figures: " id " -->" { on = 1; found = 1; next }
        on && $0 == "<!-- /readme_figures -->" { on = 0; next } on { print } END { exit !found }' "$README"
}

# Replaces ID's block in README.md with FILE.
write_block() {
    awk -v id="$1" -v f="$2" '$0 == "<!-- readme_figures: " id " -->" { print; while ((getline l < f) > 0) print l; on = 1; next }
        on && $0 == "<!-- /readme_figures -->" { on = 0 } !on { print }' "$README" >"$WORK/readme.new"
    cat "$WORK/readme.new" >"$README"
}

# Markers in the README without a recipe are an error: a block nobody makes.
for id in $(sed -n 's/^<!-- readme_figures: \([a-z0-9_]*\) -->$/\1/p' "$README"); do
    printf '%s\n' "$RECIPES" | grep -q "^$id:" || { echo "readme_figures.sh: $README has a block $id that no recipe makes" >&2; exit 1; }
done

failed=0 ran=0 skipped=0
for r in $RECIPES; do
    IFS=: read -r ID size level needs <<EOF
$r
EOF
    if [ -n "$only" ]; then case " $only " in *" $ID "*) ;; *) continue ;; esac; fi
    why=""
    if [ "$short" = 1 ] && [ "$size" = long ]; then why="long (run without --short)"; fi
    case $level:$BEST in
    avx512:avx512 | avx512:amx | amx:amx | any:*) ;;
    *) [ -n "$why" ] || why="needs kernel level $level; this CPU's best is ${BEST:-unknown}" ;;
    esac
    case $needs in
    fashion-mnist) [ -n "$why" ] || [ -e "$FASHION_DIR/train-images-idx3-ubyte.gz" ] || [ -e "$FASHION_DIR/train-images-idx3-ubyte" ] ||
        why="needs Debian's dataset-fashion-mnist" ;;
    fortunes) [ -n "$why" ] || [ -d "$FORTUNES_DIR" ] || why="needs Debian's fortunes" ;;
    torch) [ -n "$why" ] || [ -d "$FORTUNES_DIR" ] || why="needs Debian's fortunes"
        [ -n "$why" ] || [ -n "$TORCH_PYTHON" ] || why="needs a python with torch and safetensors (TORCH_PYTHON, .venv-torch)" ;;
    mpirun) [ -n "$why" ] || command -v mpirun >/dev/null || why="needs mpirun (Debian's openmpi-bin)" ;;
    esac
    readme_block "$ID" >"$WORK/old" || { echo "readme_figures.sh: $README has no block $ID" >&2; failed=$((failed + 1)); continue; }
    if [ -n "$why" ]; then
        echo "skip  $ID: $why"
        skipped=$((skipped + 1))
        continue
    fi
    rm -rf "$WORK/run" "$WORK/ga" && mkdir "$WORK/run"
    t0=$(date +%s)
    if ! "recipe_$ID" >"$WORK/new" 2>"$WORK/err"; then
        echo "FAIL  $ID: the recipe failed:" && cat "$WORK/err"
        failed=$((failed + 1))
        continue
    fi
    ran=$((ran + 1))
    secs=$(($(date +%s) - t0))
    if [ "$mode" = update ]; then
        write_block "$ID" "$WORK/new"
        if cmp -s "$WORK/old" "$WORK/new"; then echo "same  $ID (${secs} s)"; else echo "wrote $ID (${secs} s)"; fi
    elif "mask_$ID" <"$WORK/old" | mask_common >"$WORK/old.m" && "mask_$ID" <"$WORK/new" | mask_common >"$WORK/new.m" &&
        diff -u "$WORK/old.m" "$WORK/new.m" >"$WORK/diff"; then
        echo "ok    $ID (${secs} s)"
    else
        echo "DRIFT $ID: $README's figures (-) against this build's (+), timing fields as ~:"
        sed '1,2d' "$WORK/diff"
        failed=$((failed + 1))
    fi
done
echo "readme_figures.sh: $ran made, $skipped skipped, $failed failed ($mode)"
[ "$failed" = 0 ]
