#!/bin/sh
# dist_train.sh AMPC [JSON_CHECK [ST_DIFF [MPIRUN]]]: `ampc train` data-parallel under `mpirun -np 2`
# against one process. A small GPT (2 layers, d-model 32, context 16) on a 1,800-byte text file: 101
# windows, 12 batches of 8 per epoch, so 20 steps cross an epoch boundary (a reshuffle, then sharded).
#  1. Equivalence: 2 ranks x 4 rows against 1 process x 8 rows, 20 steps, same seed, in fp32, bf16, fp16
#     (the default scaler), and fp32 with --batch 7 (rows 4 + 3: the uneven split must average like one
#     process). Per step: the loss within TOL_LOSS and grad_norm within TOL_NORM (relative), lr, scale and
#     skipped equal; the final eval_loss within TOL_LOSS; the final model tensors of the two checkpoints
#     within TOL_PARAM (st_diff). Tolerances, per precision:
#       fp32  loss 1e-5, grad_norm 1e-5, params 5e-5 as the largest |difference| relative to the tensor's
#             largest |value|. Only the summation order differs (two half-batch sums added, not one);
#             measured 1e-7 (losses, norms) and up to 5e-6 (parameters: AdamW divides by sqrt(v) + eps,
#             so a gradient element near eps passes its rounding difference on magnified).
#       bf16  loss 1e-3, grad_norm 4e-3, params 1e-2 as |difference| / |tensor| (2-norms). Under autocast
#             a weight gradient leaves its GEMM rounded to BF16 (unit roundoff u = 2^-9): 2 ranks round
#             two half sums, one process the whole sum, so every gradient element, and the norm, may
#             differ by ~2u = 4e-3. AdamW's update is nearly sign(g) where g is mostly cancellation
#             (rounding noise), so single elements may differ by up to 2 lr: the largest-element measure
#             says little in 16 bits, the 2-norm of the difference does. Measured: loss 4e-5, norm 4e-4,
#             params 2e-3 (largest element: 7e-3).
#       fp16  loss 1e-4, grad_norm 5e-4, params 2e-3 (2-norms): the same with u = 2^-12. Measured: loss
#             2e-6, norm 9e-5, params 2.4e-4 (largest element: 4e-3).
#     The key third of every attn.qkv.bias is not compared: a key bias adds q.b to every score of a
#     query, which softmax ignores, so its exact gradient is 0 and what it gets is rounding noise, which
#     AdamW turns into updates of up to lr (measured: the key biases of the two runs differ by 100% of
#     their own size, ~1e-6 in fp32, ~1e-2 in bf16). The loss does not depend on them.
#     Not compared against one process: fp16 runs that skip steps. A rank's loss is the mean over its
#     B/N rows, so its backward sees N times one process's gradients at the same loss scale and overflows
#     at 1/N of the scale: near the overflow edge the skipped steps differ (e.g. --seed 7 --init-scale 1e7
#     --growth-interval 2: step 7 skipped on 2 ranks, not by one process), as with PyTorch DDP.
#  2. Determinism: two identical 2-rank runs (bf16, dropout 0.1, periodic checkpoints) give byte-identical
#     JSONL step records (all fields but tokens_per_s/samples_per_s/peak_bytes) and checkpoint files.
#  3. --shard optimizer (ZeRO-1), and --shard full in fp32 and with bf16 parameters, against --shard none: bit-identical step records (loss, scale, skipped,
#     lr; grad_norm within 1e-12: sharded, the norm's sum of squares is added up slice by slice, another
#     order, so its last bits may differ) and checkpoint tensors (optimizer state included; the payload
#     CRC-32 too) in fp32, bf16 with --param-dtype bf16 (sharded F32 masters) and fp16 with
#     --init-scale 1e7 --growth-interval 2 (skipped steps: every rank must skip alike); a sharded
#     checkpoint resumed on 2 ranks with --shard optimizer ends bit-identical. --reduce-dtype bf16 / fp16
#     finish with finite losses that differ from the fp32 reduction's (the option acts) by at most
#     1e-3 / 1e-4 relative (the reduction's own rounding, 2^-9 / 2^-12, once per step; measured 7e-7 /
#     2e-7).
#  4. Resume across world sizes: 1 process 10 steps -> 2 ranks to 20, and 2 ranks 10 steps -> 1 process
#     to 20, match an uninterrupted run of the resumed world size within the fp32 tolerances; 2 -> 2 is
#     bit-identical to an uninterrupted 2-rank run (step records and the final checkpoint file, in fp32
#     and in bf16 with dropout; in fp8 from steps 2, 4 and 6, the ranks sharing their amaxes); a 2-rank
#     checkpoint records ampc.world_size 2, a 1-process one none or 1;
#     periodic saves change nothing but the recorded cadence.
#  5. Faults: (a) SIGKILL of rank 1 (found by OMPI_COMM_WORLD_RANK in /proc/PID/environ among mpirun's
#     descendants) in the middle of a long run: mpirun exits non-zero and every rank is gone within 30 s
#     (the time is printed as sigkill_stop_ms; about 2 s with Open MPI 4.1), and the last periodic
#     checkpoint loads (`ampc inspect`) and resumes for one more step. (b) A stopped rank (SIGSTOP): the other gives up after --dist-timeout 3 s with a message
#     saying so, mpirun exits non-zero within 30 s. (c) --batch abc, --reduce-dtype fp64 and --batch 1
#     under mpirun -np 2: exactly one error line (mpirun's own boxed notices aside), naming the problem,
#     exit non-zero.
#  6. Only rank 0 writes: a 2-rank run in an empty folder leaves exactly the log and the expected
#     checkpoints there; the log holds one record per step, in order, and one final record, all valid
#     JSON; stdout and stderr (progress lines) hold the lines one process prints, numbers aside.
#  7. Memory per rank: the largest rank's peak bytes fall from --shard none to optimizer to full on a model
#     whose state outweighs its activations (BF16 parameters, F32 masters).
# Prints the time the whole script took.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, records, content, now_ms, ...
abs_path() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
AMPC=$(abs_path "$1")
JSON_CHECK=$(abs_path "${2:-$(dirname "$AMPC")/tools/ampc/ampc_json_check}")
ST_DIFF=$(abs_path "${3:-$(dirname "$AMPC")/tests/st_diff}")
MPIRUN=${4:-mpirun}
BG_PIDS=""
# Before the folder goes at exit (test_tmpdir): the runs still in the background.
test_exit_hook() { for p in $BG_PIDS; do kill -KILL "$p" 2> /dev/null; done; }
test_tmpdir dist_train
DIR=$TEST_TMP
test_kernel_cache
# OpenMPI: 2 ranks on fewer cores, and as root (ctest sets these too: AMPC_MPI_ENV)
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-1}"
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
"$AMPC" info > /dev/null || fail_now "ampc info"
command -v "$MPIRUN" > /dev/null 2>&1 || fail_now "no $MPIRUN"
T0=$(now_ms)

i=0
: > "$DIR/corpus.txt"
while [ $i -lt 100 ]; do echo "line $i: the quick brown fox $((i * 7 % 13))" >> "$DIR/corpus.txt"; i=$((i + 1)); done
head -c 1800 "$DIR/corpus.txt" > "$DIR/c.txt"
D=32
COMMON="--data text:$DIR/c.txt --layers 2 --d-model $D --heads 2 --context 16 --batch 8 --threads 1 --quiet"
# attn.qkv.bias is [q | k | v], D each: the key part is rounding noise (see the top)
KEYBIAS="blocks.*.attn.qkv.bias:$D:$((2 * D))"

one() { "$AMPC" train "$@"; }
two() { "$MPIRUN" -np 2 "$AMPC" train "$@"; }

# One field of every step record / of the final record, one value a line.
steps_field() { grep -v '"final"' "$1" | sed -nE "s/.*\"$2\":([^,}]*).*/\1/p"; }
final_field() { grep '"final"' "$1" | sed -nE "s/.*\"$2\":([^,}]*).*/\1/p"; }

# close A B TOL: the two columns of values (files, one a line) have as many rows, and differ by at most TOL
# relative (to the larger magnitude; TOL 0: equal as text). A row that is not a finite number on both
# sides (a skipped step's grad_norm is null) must be the same text on both. Prints the largest difference
# and its row (0-based); status 1 when over.
close() {
    [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] && [ -s "$1" ] || { echo "$(wc -l < "$1") vs $(wc -l < "$2") values"; return 1; }
    paste -d' ' "$1" "$2" | awk -v tol="$3" '
        function abs(x) { return x < 0 ? -x : x }
        function num(x) { return x ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
        !num($1) || !num($2) { if ($1 != $2) { bad = 1; if (!msg) msg = "row " NR - 1 ": " $1 " vs " $2 } next }
        { m = abs($1) > abs($2) ? abs($1) : abs($2); r = m > 0 ? abs($1 - $2) / m : 0
          if (r >= worst + 0) { worst = r; at = NR - 1 }
          if ((tol == 0 && $1 != $2) || r > tol + 0) bad = 1 }
        END { printf "largest relative difference %s at row %d%s\n", worst + 0, at, msg ? "; " msg : ""; exit bad }'
}

# st_diff_check LABEL TOL A B [st_diff flags]: the model tensors of two checkpoints within TOL.
st_diff_check() {
    label=$1 tol=$2 a=$3 b=$4; shift 4
    if [ ! -x "$ST_DIFF" ]; then fail "$label: no st_diff at $ST_DIFF"; return; fi
    if "$ST_DIFF" "$@" "$tol" "$a" "$b" > "$DIR/st_diff.out" 2>&1; then ok "$label: $(tail -n 1 "$DIR/st_diff.out")"
    else fail "$label: $(tail -n 1 "$DIR/st_diff.out")"; grep 'TOL\|only in\|differs\|not handled\|usage\|st_diff:' "$DIR/st_diff.out" | head -8; fi
}

# compare_runs LABEL TOL_LOSS TOL_NORM TOL_PARAM A.jsonl B.jsonl A.st B.st [st_diff flags]: the checks of part 1.
compare_runs() {
    label=$1 tl=$2 tn=$3 tp=$4 la=$5 lb=$6 ca=$7 cb=$8; shift 8
    for f in loss:$tl grad_norm:$tn; do
        t=${f#*:} f=${f%%:*}
        steps_field "$la" "$f" > "$DIR/va"; steps_field "$lb" "$f" > "$DIR/vb"
        if r=$(close "$DIR/va" "$DIR/vb" "$t"); then ok "$label: $f within $t: $r"; else fail "$label: $f: $r (tolerance $t)"; fi
    done
    for f in lr scale skipped step; do
        steps_field "$la" $f > "$DIR/va"; steps_field "$lb" $f > "$DIR/vb"
        cmp -s "$DIR/va" "$DIR/vb" && [ -s "$DIR/va" ] || fail "$label: \"$f\" differs: $(diff "$DIR/va" "$DIR/vb" | head -3 | tr '\n' ' ')"
    done
    final_field "$la" eval_loss > "$DIR/va"; final_field "$lb" eval_loss > "$DIR/vb"
    if r=$(close "$DIR/va" "$DIR/vb" "$tl"); then ok "$label: eval_loss within $tl"; else fail "$label: eval_loss: $r"; fi
    st_diff_check "$label: parameters" "$tp" "$ca" "$cb" --ignore "$KEYBIAS" "$@"
}

# ---- 1. equivalence: 2 ranks x B/2 == 1 process x B ---------------------------------------------------
mkdir -p "$DIR/eq"
run2() { # name flags...: a 20-step 2-rank run into eq/NAME.2
    n=$1; shift
    e="$DIR/eq/$n"; mkdir -p "$e.2"
    # shellcheck disable=SC2086
    two $COMMON --steps 20 "$@" --log "$e.2.jsonl" --checkpoint "$e.2/x.st" > /dev/null 2> "$e.2.err" ||
        { fail "$n: 2 ranks: $(head -3 "$e.2.err")"; return 1; }
    [ "$(records "$e.2.jsonl" | wc -l)" -eq 20 ] || fail "$n: 2 ranks logged $(records "$e.2.jsonl" | wc -l) steps, not 20"
}
eq_run() { # name tol_loss tol_norm tol_param st_diff-metric-flag flags...
    n=$1 tl=$2 tn=$3 tp=$4 m=$5; shift 5
    e="$DIR/eq/$n"; mkdir -p "$e.1"
    # shellcheck disable=SC2086
    one $COMMON --steps 20 "$@" --log "$e.1.jsonl" --checkpoint "$e.1/x.st" > /dev/null 2> "$e.1.err" ||
        { fail "$n: 1 process: $(head -3 "$e.1.err")"; return; }
    run2 "$n" "$@" || return
    compare_runs "$n 1 vs 2 ranks" "$tl" "$tn" "$tp" "$e.1.jsonl" "$e.2.jsonl" "$e.1/x.st" "$e.2/x.st" $m
}
eq_run fp32 1e-5 1e-5 5e-5 "" --precision fp32
eq_run bf16 1e-3 4e-3 1e-2 --l2 --precision bf16
eq_run fp16 1e-4 5e-4 2e-3 --l2 --precision fp16
eq_run fp32-batch7 1e-5 1e-5 5e-5 "" --precision fp32 --batch 7
# 2 ranks only (see the top): skipped steps, for part 3
run2 fp16-skips --precision fp16 --init-scale 1e7 --growth-interval 2
if grep -v '"final"' "$DIR/eq/fp16-skips.2.jsonl" 2> /dev/null | tail -n 10 | grep -q '"skipped":true'; then
    ok "fp16-skips: steps skipped, also after the scale first grew"
else
    fail "fp16-skips: too few skipped steps (the run no longer tests skipping on every rank alike)"
fi

# ---- 2. determinism ------------------------------------------------------------------------------------
DET="$COMMON --precision bf16 --dropout 0.1 --steps 20 --checkpoint-every 10 --keep 2"
mkdir -p "$DIR/det/a" "$DIR/det/b"
# shellcheck disable=SC2086
if two $DET --checkpoint "$DIR/det/a/x.st" --log "$DIR/det/a.jsonl" > /dev/null 2> "$DIR/det/a.err" &&
   two $DET --checkpoint "$DIR/det/b/x.st" --log "$DIR/det/b.jsonl" > /dev/null 2> "$DIR/det/b.err"; then
    records "$DIR/det/a.jsonl" > "$DIR/det/a.rec"; records "$DIR/det/b.jsonl" > "$DIR/det/b.rec"
    if [ "$(wc -l < "$DIR/det/a.rec")" -eq 20 ] && cmp -s "$DIR/det/a.rec" "$DIR/det/b.rec"; then
        ok "determinism: two 2-rank runs (bf16, dropout) log 20 identical step records"
    else fail "determinism: step records differ"; diff "$DIR/det/a.rec" "$DIR/det/b.rec" | head -4; fi
    if cmp -s "$DIR/det/a/x.st" "$DIR/det/b/x.st" && cmp -s "$DIR/det/a/x-step00000010.st" "$DIR/det/b/x-step00000010.st"; then
        ok "determinism: checkpoints at steps 10 and 20 byte-identical"
    else fail "determinism: checkpoint files differ"; fi
else
    fail "determinism runs: $(cat "$DIR/det/a.err" "$DIR/det/b.err" | head -3)"
fi

# ---- 3. --shard optimizer == --shard none; --reduce-dtype --------------------------------------------
shard_check() { # name reference-prefix flags...: a --shard $SHARD (optimizer) run against eq/NAME.2
    n=$1 ref=$2 mode=${SHARD:-optimizer}; shift 2
    s="$DIR/shard/$n"; mkdir -p "$s"
    # shellcheck disable=SC2086
    if ! two $COMMON --steps 20 "$@" --shard "$mode" --log "$s.jsonl" --checkpoint "$s/x.st" \
        --checkpoint-every 10 --keep 2 > /dev/null 2> "$s.err"; then
        fail "$n --shard $mode: $(head -3 "$s.err")"; return 1
    fi
    nonorm() { records "$1" | sed -E 's/,"grad_norm":[^,}]*//'; }
    nonorm "$ref.jsonl" > "$s.ref.rec"; nonorm "$s.jsonl" > "$s.rec"
    if [ -s "$s.rec" ] && cmp -s "$s.ref.rec" "$s.rec"; then ok "$n: --shard $mode logs what --shard none logs, bit for bit (grad_norm aside)"
    else fail "$n: --shard $mode step records differ from --shard none"; diff "$s.ref.rec" "$s.rec" | head -4; fi
    # the clipping norm is summed over the slices when sharded (docs/DISTRIBUTED.md): another order of
    # the same double sum, so the logged grad_norm may differ in its last bits; the clipping coefficient
    # is applied in F32 and the tensors must still be equal (below)
    steps_field "$ref.jsonl" grad_norm > "$s.ref.norm"; steps_field "$s.jsonl" grad_norm > "$s.norm"
    if r=$(close "$s.ref.norm" "$s.norm" 1e-12); then ok "$n: --shard $mode grad_norm within 1e-12: $r"
    else fail "$n: --shard $mode grad_norm: $r (tolerance 1e-12)"; fi
    st_diff_check "$n: --shard $mode checkpoint (all tensors, optimizer state too)" 0 "$ref/x.st" "$s/x.st" --all
    a=$(content "$ref/x.st" | grep -v '"train.args"') b=$(content "$s/x.st" | grep -v '"train.args"')
    if [ "$a" != "$b" ]; then
        printf '%s\n' "$a" > "$DIR/ma"; printf '%s\n' "$b" > "$DIR/mb"
        fail "$n: --shard $mode checkpoint metadata (payload CRC-32 included) differs:" \
            "$(diff "$DIR/ma" "$DIR/mb" | head -4 | tr '\n' ' ')"
    fi
}
mkdir -p "$DIR/shard"
shard_check fp32 "$DIR/eq/fp32.2" --precision fp32
SHARD=full shard_check fp32-full "$DIR/eq/fp32.2" --precision fp32
shard_check fp16-skips "$DIR/eq/fp16-skips.2" --precision fp16 --init-scale 1e7 --growth-interval 2
# bf16 parameters with F32 masters: the masters are what ZeRO-1 shards
mkdir -p "$DIR/eq/bf16p.2"
# shellcheck disable=SC2086
if two $COMMON --steps 20 --precision bf16 --param-dtype bf16 --log "$DIR/eq/bf16p.2.jsonl" --checkpoint "$DIR/eq/bf16p.2/x.st" \
    > /dev/null 2> "$DIR/eq/bf16p.err"; then
    "$AMPC" inspect "$DIR/eq/bf16p.2/x.st" | grep -q '^master\.' ||
        fail "bf16 --param-dtype bf16: no master.* tensors in the checkpoint (the test expects F32 masters)"
    shard_check bf16-params "$DIR/eq/bf16p.2" --precision bf16 --param-dtype bf16
    # shard full (FSDP2-style): the same arithmetic, parameters gathered from the F32 master slices
    SHARD=full shard_check bf16-params-full "$DIR/eq/bf16p.2" --precision bf16 --param-dtype bf16
else
    fail "bf16 --param-dtype bf16, 2 ranks: $(head -3 "$DIR/eq/bf16p.err")"
fi
# a sharded checkpoint resumes, sharded, bit for bit
s="$DIR/shard/fp32"; mkdir -p "$s.r"
if [ -f "$s/x-step00000010.st" ] &&
   two --resume "$s/x-step00000010.st" --checkpoint "$s.r/x.st" --checkpoint-every 0 --keep 1 --log "$s.r.jsonl" \
       --quiet > /dev/null 2> "$s.r.err"; then
    records "$s.jsonl" | tail -n 10 > "$s.tail"; records "$s.r.jsonl" > "$s.r.rec"
    if [ -s "$s.r.rec" ] && cmp -s "$s.tail" "$s.r.rec" && [ "$(content "$s/x.st")" = "$(content "$s.r/x.st")" ]; then
        ok "--shard optimizer: 10 steps + resume on 2 ranks + 10 == 20 steps (records, checkpoint)"
    else fail "--shard optimizer: the resumed run differs"; diff "$s.tail" "$s.r.rec" | head -4; fi
else
    fail "--shard optimizer: resume from step 10: $(cat "$s.r.err" 2> /dev/null | head -3)"
fi
# --reduce-dtype: the 16-bit reductions act, stay finite and close
for rd in bf16:1e-3 fp16:1e-4; do
    r=${rd%%:*} tol=${rd#*:}
    # shellcheck disable=SC2086
    if two $COMMON --steps 20 --precision fp32 --reduce-dtype "$r" --log "$DIR/rd.$r.jsonl" > /dev/null 2> "$DIR/rd.$r.err"; then
        steps_field "$DIR/eq/fp32.2.jsonl" loss > "$DIR/va"; steps_field "$DIR/rd.$r.jsonl" loss > "$DIR/vb"
        if res=$(close "$DIR/va" "$DIR/vb" "$tol"); then ok "--reduce-dtype $r: losses finite, within $tol of the fp32 reduction: $res"
        else fail "--reduce-dtype $r: $res (tolerance $tol)"; fi
        cmp -s "$DIR/va" "$DIR/vb" && fail "--reduce-dtype $r: losses bit-identical to the fp32 reduction (the option does nothing?)"
    else
        fail "--reduce-dtype $r: $(head -3 "$DIR/rd.$r.err")"
    fi
done

# ---- 4. resume across world sizes ----------------------------------------------------------------------
R="$DIR/resume"; mkdir -p "$R/a" "$R/b" "$R/c" "$R/d" "$R/e" "$R/f"
RES="$COMMON --precision fp32 --steps 20 --checkpoint-every 10 --keep 2"
resume_into() { # label, np (1|2), from, into folder, log
    if [ "$2" = 1 ]; then set -- "$1" one "$3" "$4" "$5"; else set -- "$1" two "$3" "$4" "$5"; fi
    "$2" --resume "$3" --checkpoint "$4/x.st" --checkpoint-every 0 --keep 1 --log "$5" --quiet > /dev/null 2> "$4.err" ||
        { fail "$1: $(head -3 "$4.err")"; return 1; }
}
# shellcheck disable=SC2086
one $RES --checkpoint "$R/a/x.st" --log "$R/a.jsonl" > /dev/null 2> "$R/a.err" || fail "resume: 1-process run: $(head -3 "$R/a.err")"
# shellcheck disable=SC2086
two $RES --checkpoint "$R/c/x.st" --log "$R/c.jsonl" > /dev/null 2> "$R/c.err" || fail "resume: 2-rank run: $(head -3 "$R/c.err")"
ws=$("$AMPC" inspect --json "$R/c/x-step00000010.st" | sed -nE 's/.*"ampc.world_size": *"([^"]*)".*/\1/p')
[ "$ws" = 2 ] && ok "a 2-rank checkpoint records ampc.world_size 2" || fail "2-rank checkpoint: ampc.world_size '$ws', not 2"
ws=$("$AMPC" inspect --json "$R/a/x-step00000010.st" | sed -nE 's/.*"ampc.world_size": *"([^"]*)".*/\1/p')
[ -z "$ws" ] || [ "$ws" = 1 ] || fail "1-process checkpoint: ampc.world_size '$ws'"
[ "$(content "$R/c/x.st")" = "$(content "$DIR/eq/fp32.2/x.st")" ] || fail "resume: periodic checkpoints changed a 2-rank run"
# 1 -> 2
if resume_into "resume 1 -> 2" 2 "$R/a/x-step00000010.st" "$R/b" "$R/b.jsonl"; then
    grep -v '"final"' "$DIR/eq/fp32.2.jsonl" | tail -n 10 > "$R/u2.tail"; grep '"final"' "$DIR/eq/fp32.2.jsonl" >> "$R/u2.tail"
    compare_runs "resume 1 -> 2 vs 2 ranks" 1e-5 1e-5 5e-5 "$R/u2.tail" "$R/b.jsonl" "$DIR/eq/fp32.2/x.st" "$R/b/x.st"
fi
# 2 -> 1
if resume_into "resume 2 -> 1" 1 "$R/c/x-step00000010.st" "$R/d" "$R/d.jsonl"; then
    grep -v '"final"' "$DIR/eq/fp32.1.jsonl" | tail -n 10 > "$R/u1.tail"; grep '"final"' "$DIR/eq/fp32.1.jsonl" >> "$R/u1.tail"
    compare_runs "resume 2 -> 1 vs 1 process" 1e-5 1e-5 5e-5 "$R/u1.tail" "$R/d.jsonl" "$DIR/eq/fp32.1/x.st" "$R/d/x.st"
fi
# 2 -> 2: exact (fp32; and bf16 with dropout, from the determinism run)
resume_exact() { # label, from, folder, uninterrupted log, uninterrupted checkpoint, compare files with cmp (1) or content (0)
    resume_into "$1" 2 "$2" "$3" "$3.jsonl" || return
    records "$4" | tail -n 10 > "$3.want"; records "$3.jsonl" > "$3.got"
    if [ "$(wc -l < "$3.got")" -eq 10 ] && cmp -s "$3.want" "$3.got"; then ok "$1: steps 10..19 logged bit-identically"
    else fail "$1: resumed step records differ"; diff "$3.want" "$3.got" | head -4; fi
    if [ "$6" = 1 ]; then
        cmp -s "$5" "$3/x.st" && ok "$1: final checkpoint files identical" || fail "$1: final checkpoint files differ"
    else
        [ "$(content "$5")" = "$(content "$3/x.st")" ] && ok "$1: final checkpoints identical (content, cadence aside)" ||
            fail "$1: final checkpoints differ"
    fi
}
resume_exact "resume 2 -> 2 (fp32)" "$R/c/x-step00000010.st" "$R/e" "$DIR/eq/fp32.2.jsonl" "$DIR/eq/fp32.2/x.st" 1
resume_exact "resume 2 -> 2 (bf16, dropout)" "$DIR/det/a/x-step00000010.st" "$R/f" "$DIR/det/a.jsonl" "$DIR/det/a/x.st" 0
# FP8 delayed scaling: the ranks see other rows, so their amaxes differ; they share the largest, or rank 0's
# checkpoint would resume rank 1 with rank 0's scales (this model on the built-in text differed from step 2)
F="$R/fp8"; mkdir -p "$F/a"
FP8="--layers 2 --d-model 64 --heads 2 --context 32 --batch 8 --threads 1 --quiet --precision fp8 --steps 12"
# shellcheck disable=SC2086
if (cd "$F/a" && two $FP8 --checkpoint x.st --checkpoint-every 2 --keep 6 --log l.jsonl > /dev/null 2>&1); then
    for s in 2 4 6; do
        mkdir -p "$F/r$s" && cp "$F/a/x-step0000000$s.st" "$F/r$s/x.st" && head -n $s "$F/a/l.jsonl" > "$F/r$s/l.jsonl"
        (cd "$F/r$s" && two --resume x.st --log l.jsonl --quiet > /dev/null 2>&1) && cmp -s "$F/a/x.st" "$F/r$s/x.st" &&
            ok "resume 2 -> 2 (fp8) from step $s: final checkpoint files identical" ||
            fail "resume 2 -> 2 (fp8) from step $s: the final checkpoints differ"
    done
else
    fail "the fp8 2-rank run failed"
fi

# ---- 5. faults ------------------------------------------------------------------------------------------
# state PID: the process's state letter, "" once it is gone
state() { s=$(cat "/proc/$1/stat" 2> /dev/null) || return 0; s=${s##*) }; echo "${s%% *}"; }
alive() { st=$(state "$1"); [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
# the descendants of PID (children first), from /proc
descendants() {
    for f in /proc/[0-9]*/stat; do
        s=$(cat "$f" 2> /dev/null) || continue
        s=${s##*) }; s=${s#* }
        [ "${s%% *}" = "$1" ] || continue
        c=${f#/proc/}; c=${c%/stat}
        echo "$c"; descendants "$c"
    done
}
# rank_pid MPIRUN_PID RANK: the pid of that rank of the job (its environment says OMPI_COMM_WORLD_RANK or
# PMI_RANK), waiting up to 20 s for it to start
rank_pid() {
    t=0
    while [ $t -lt 200 ]; do
        for p in $(descendants "$1"); do
            r=$(tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | sed -nE 's/^(OMPI_COMM_WORLD_RANK|PMI_RANK)=//p' | head -n 1)
            [ "$r" = "$2" ] && grep -q ampc "/proc/$p/cmdline" 2> /dev/null && { echo "$p"; return 0; }
        done
        sleep 0.1; t=$((t + 1))
    done
    return 1
}
# wait_all LIMIT_MS PID...: until none of them runs (zombies count as gone) or LIMIT_MS passed; prints ms
wait_all() {
    lim=$1; shift
    t0=$(now_ms)
    while :; do
        any=0
        for p in "$@"; do alive "$p" && any=1; done
        el=$(($(now_ms) - t0))
        [ $any -eq 0 ] || [ $el -ge "$lim" ] && break
        sleep 0.05
    done
    echo $el
    return $any
}
# (a) SIGKILL rank 1
K="$DIR/kill"; mkdir -p "$K"
# shellcheck disable=SC2086
two $COMMON --precision fp32 --steps 1000000 --checkpoint "$K/x.st" --checkpoint-every 20 --dist-timeout 20 \
    --log "$K/l.jsonl" > "$K/out" 2> "$K/err" &
MP=$!
BG_PIDS="$MP"
r0=$(rank_pid $MP 0) r1=$(rank_pid $MP 1)
BG_PIDS="$MP $r0 $r1"
t=0
while [ ! -f "$K/x.st" ] && [ $t -lt 300 ] && alive $MP; do sleep 0.1; t=$((t + 1)); done
sleep 0.3 # a little further: the kill lands between saves, or in one
if [ -z "$r0" ] || [ -z "$r1" ]; then
    fail "SIGKILL: could not find the ranks' pids among mpirun's descendants"
elif ! alive $MP || [ ! -f "$K/x.st" ]; then
    fail "SIGKILL: the long run was not running with a checkpoint written: $(head -3 "$K/err")"
else
    logged=$(grep -c '"step"' "$K/l.jsonl")
    kill -KILL "$r1"
    if ms=$(wait_all 30000 $MP "$r0" "$r1"); then
        wait $MP; rc=$?
        if [ $rc -ne 0 ]; then ok "SIGKILL of rank 1 after $logged steps: mpirun exit $rc, every rank gone after $ms ms"
        else fail "SIGKILL of rank 1: mpirun exited 0"; fi
        echo "sigkill_stop_ms: $ms"
    else
        fail "SIGKILL of rank 1: after $ms ms still running: mpirun $(state $MP), rank 0 $(state "$r0")"
        kill -KILL $MP "$r0" 2> /dev/null; wait $MP
    fi
    BG_PIDS=""
    if "$AMPC" inspect "$K/x.st" > "$K/inspect" 2> "$K/inspect.err"; then
        st=$(sed -nE 's/^step: *([0-9]+)$/\1/p' "$K/inspect")
        ok "after the kill the last checkpoint loads (step $st)"
        mkdir -p "$K/r"
        if one --resume "$K/x.st" --steps $((st + 1)) --checkpoint "$K/r/x.st" --log "$K/r.jsonl" --quiet > /dev/null 2> "$K/r.err" &&
           [ "$(records "$K/r.jsonl" | wc -l)" -eq 1 ]; then ok "it resumes for one more step"
        else fail "resume after the kill: $(head -3 "$K/r.err")"; fi
    else
        fail "after the kill the checkpoint does not load: $(cat "$K/inspect.err")"
    fi
fi
# (b) a rank that stops answering: --dist-timeout bounds the wait
S="$DIR/stop"; mkdir -p "$S"
# shellcheck disable=SC2086
two $COMMON --precision fp32 --steps 1000000 --dist-timeout 3 > "$S/out" 2> "$S/err" &
MP=$!
BG_PIDS="$MP"
r0=$(rank_pid $MP 0) r1=$(rank_pid $MP 1)
BG_PIDS="$MP $r0 $r1"
if [ -z "$r0" ] || [ -z "$r1" ]; then
    fail "SIGSTOP: could not find the ranks' pids"
else
    sleep 1
    kill -STOP "$r1"
    if ms=$(wait_all 30000 $MP "$r0"); then
        wait $MP; rc=$?
        if [ $rc -ne 0 ] && grep -q 'within 3 s' "$S/err"; then
            ok "SIGSTOP of rank 1: mpirun exit $rc after $ms ms: $(grep -m 1 'within 3 s' "$S/err")"
        else fail "SIGSTOP of rank 1: exit $rc, stderr: $(head -3 "$S/err")"; fi
        wait_all 10000 "$r1" > /dev/null || fail "SIGSTOP: rank 1 ($(state "$r1")) outlived mpirun by 10 s"
    else
        fail "SIGSTOP of rank 1: still running after $ms ms (--dist-timeout 3)"
    fi
    kill -CONT "$r1" 2> /dev/null
fi
for p in $BG_PIDS; do kill -KILL "$p" 2> /dev/null; done
wait 2> /dev/null
BG_PIDS=""
# (c) one error line for the job. mpirun adds notices of its own, boxed in lines of dashes, and OpenMPI's
# "[host:pid] N more processes have sent help message" lines: not counted.
ampc_lines() {
    awk '/^-----+$/ { box = !box; next } box { next }
         /^\[[^]]*\] [0-9]+ more process/ || /orte_base_help_aggregate/ { next } { print }' "$1"
}
expect_one() { # needle, train flags...
    needle=$1; shift
    two "$@" > "$DIR/x.out" 2> "$DIR/x.err"
    rc=$?
    ampc_lines "$DIR/x.err" > "$DIR/x.lines"
    n=$(wc -l < "$DIR/x.lines")
    if [ $rc -ne 0 ] && [ "$n" -eq 1 ] && grep -qF -- "$needle" "$DIR/x.lines" && [ ! -s "$DIR/x.out" ]; then
        ok "mpirun -np 2 ampc train $*: exit $rc, one line: $(cat "$DIR/x.lines")"
    else
        fail "mpirun -np 2 ampc train $*: exit $rc, $n lines (want 1 naming '$needle'): $(head -4 "$DIR/x.lines")"
    fi
}
SMALL="--layers 1 --d-model 16 --heads 2 --context 8 --steps 2 --threads 1 --quiet"
# shellcheck disable=SC2086
expect_one "'abc' for --batch" $SMALL --batch abc
# shellcheck disable=SC2086
expect_one "'fp64' for --reduce-dtype" $SMALL --reduce-dtype fp64
# shellcheck disable=SC2086
expect_one "--batch 1 is smaller than the 2 ranks" $SMALL --batch 1

# ---- 6. only rank 0 writes -----------------------------------------------------------------------------
W="$DIR/writes"; mkdir -p "$W/one" "$W/two"
WR="--data text:$DIR/c.txt --layers 2 --d-model $D --heads 2 --context 16 --batch 8 --threads 1 --precision fp32
    --steps 12 --checkpoint x.st --checkpoint-every 5 --keep 2 --log l.jsonl"
# shellcheck disable=SC2086
(cd "$W/one" && one $WR > ../one.out 2> ../one.err) || fail "writes: 1 process: $(head -3 "$W/one.err")"
# shellcheck disable=SC2086
if (cd "$W/two" && two $WR > ../two.out 2> ../two.err); then
    got=$(cd "$W/two" && ls -A | tr '\n' ' ')
    [ "$got" = "l.jsonl x-step00000010.st x-step00000012.st x.st " ] && ok "2 ranks wrote: $got" ||
        fail "2 ranks left in their folder: $got"
    steps=$(grep -v '"final"' "$W/two/l.jsonl" | sed -nE 's/^\{"step":([0-9]+),.*/\1/p' | tr '\n' ' ')
    finals=$(grep -c '"final"' "$W/two/l.jsonl")
    want=$(i=0; while [ $i -lt 12 ]; do printf '%d ' $i; i=$((i + 1)); done)
    if [ "$steps" = "$want" ] && [ "$finals" -eq 1 ] && [ "$(wc -l < "$W/two/l.jsonl")" -eq 13 ]; then
        ok "the 2-rank log holds steps 0..11 once each and one final record"
    else fail "2-rank log: steps '$steps', $finals final records, $(wc -l < "$W/two/l.jsonl") lines"; fi
    if [ -x "$JSON_CHECK" ]; then
        "$JSON_CHECK" --lines --objects < "$W/two/l.jsonl" > /dev/null 2> "$DIR/jerr" || fail "2-rank log: invalid JSON: $(cat "$DIR/jerr")"
    fi
    # what is printed: the lines of one process (numbers aside: rates, peak memory), and the line that says
    # how many ranks run
    grep -q "^ampc train: data parallel over 2 ranks (mpirun -np 2): each takes 4 of the 8 rows of a batch; gradients averaged in fp32, --shard none$" "$W/two.err" &&
        ok "the ranks are named: $(grep "data parallel over" "$W/two.err")" || fail "no line names the ranks"
    grep -v "data parallel over" "$W/two.err" > "$W/two.err.r" && mv "$W/two.err.r" "$W/two.err"
    for o in out err; do
        sed -E 's/[0-9][0-9.:]*/N/g' "$W/one.$o" > "$W/one.$o.shape"; sed -E 's/[0-9][0-9.:]*/N/g' "$W/two.$o" > "$W/two.$o.shape"
        if [ -s "$W/one.$o.shape" ] && cmp -s "$W/one.$o.shape" "$W/two.$o.shape"; then
            ok "std$o: $(wc -l < "$W/two.$o") lines, those of one process"
        else
            fail "std$o: 2 ranks printed $(wc -l < "$W/two.$o") lines, one process $(wc -l < "$W/one.$o"):" \
                "$(diff "$W/one.$o.shape" "$W/two.$o.shape" | head -3 | tr '\n' ' ')"
        fi
    done
else
    fail "writes: 2 ranks: $(head -3 "$W/two.err")"
fi
# ---- 7. memory per rank: ZeRO-1 keeps 1/N of the optimizer state, full sharding the parameters too -----
# A model whose state outweighs its activations (4 layers of width 128, 2 samples of 16 tokens), BF16
# parameters with F32 masters; the final record's peak_bytes is the largest rank's.
M="$DIR/mem"; mkdir -p "$M"
for sh in none optimizer full; do
    two --layers 4 --d-model 128 --heads 4 --context 16 --batch 2 --steps 3 --threads 1 --quiet --eval-batches 1 \
        --param-dtype bf16 --shard $sh --log "$M/$sh.jsonl" > /dev/null 2> "$M/$sh.err" || fail "memory: --shard $sh: $(head -3 "$M/$sh.err")"
    eval "peak_$sh=\$(final_field \"\$M/\$sh.jsonl\" peak_bytes)"
done
# shellcheck disable=SC2154
if [ -n "$peak_none" ] && [ -n "$peak_full" ] && [ "$peak_none" -gt "$peak_optimizer" ] && [ "$peak_optimizer" -gt "$peak_full" ]; then
    ok "memory per rank: none $peak_none > optimizer $peak_optimizer > full $peak_full bytes"
else
    fail "memory per rank: expected none > optimizer > full, got $peak_none, $peak_optimizer, $peak_full"
fi

echo "dist_train: $(($(now_ms) - T0)) ms"
test_summary
