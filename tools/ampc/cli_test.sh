#!/bin/sh
# cli_test.sh: checks the `ampc` command-line contract (the README's) from the outside: --help
# of every command exits 0 with a usage text; unknown commands, options and values exit 2 with exactly
# one stderr line naming the offender and what is accepted; info/formats/bench succeed and their --json
# output is valid JSON (checked by ampc_json_check, so neither python nor jq is needed); an invalid
# AMPC_ISA stops every command with status 2. Exit status: 0 when every check passed, 1 otherwise.
#
# usage: cli_test.sh PATH/TO/ampc [PATH/TO/ampc_json_check]
set -u

. "$(dirname "$0")/cli_lib.sh" # AMPC, JSON_CHECK, TMP, OUT, ERR from the arguments


# ---- the checker itself must be able to say no, or every JSON check below would pass vacuously ----
checks=$((checks + 1))
printf '{"a":[1,2.5e-3,-0,true,null,"\\u00e9"]}\n' | "$JSON_CHECK" || fail "json_check rejects valid JSON"
for bad in '{"a":1,}' '[01]' '{"a":NaN}' '{"a":1} {}' '' '[1,2' '{"a":.5}'; do
    checks=$((checks + 1))
    if printf '%s' "$bad" | "$JSON_CHECK" 2>/dev/null; then fail "json_check accepts invalid JSON: $bad"; fi
done

# ---- help and version ----
for args in "--help" "-h"; do
    run $args
    expect_rc 0
    expect_has "$OUT" "Usage: ampc <command>"
    expect_lines "$ERR" 0
done
run --version
expect_rc 0
expect_lines "$OUT" 1
checks=$((checks + 1))
grep -q -E '^ampc [0-9]+\.[0-9]+\.[0-9]+$' "$OUT" || fail "ampc --version: '$(cat "$OUT")'"

for cmd in train compare doctor info formats inspect sample bench "bench convert" "bench gemm" "bench step"; do
    run $cmd --help
    expect_rc 0
    expect_has "$OUT" "Usage: ampc $cmd"
    expect_has "$OUT" "--help"
    expect_lines "$ERR" 0
done

# ---- usage errors: status 2, one line naming the offender and the accepted values ----
run trian
expect_rc 2
expect_exact_err "ampc: unknown command 'trian'; expected one of: train, compare, doctor, info, formats, inspect, sample, bench"
run info --jsn
expect_rc 2
expect_exact_err "ampc info: unknown option '--jsn' (did you mean --json?); accepted: --device, --json, --help"

usage_error "missing command" "train, compare, doctor, info, formats, inspect, sample, bench" --
usage_error "'trian'" "train, compare, doctor, info, formats, inspect, sample, bench" -- trian
usage_error "'--jsn'" "--help, --version" -- --jsn
usage_error "'--jsn'" "--json, --help" -- info --jsn
# --device: a device that is not a device, not built or not present is refused before anything starts
for cmd in train compare doctor "bench step" info; do
    # shellcheck disable=SC2086 # "bench step" is two words
    usage_error "--device" "'gpu'" "cpu, cuda, cuda:N or guard" -- $cmd --device gpu
    # shellcheck disable=SC2086
    usage_error "--device" "'cuda:1'" "no cuda support" "-DAMPC_CUDA=ON" -- $cmd --device cuda:1
done
usage_error "--device" "'cpu:1'" "cpu, cuda, cuda:N or guard" -- train --device cpu:1
run info --device guard
expect_rc 0
expect_has "$OUT" "* guard   present"
usage_error "--json" "'--json=1'" -- info --json=1
usage_error "'extra'" "--json, --help" -- info extra
usage_error "'--bogus'" "--json, --help" -- formats --bogus
usage_error "'-x'" "--json, --help" -- formats -x
usage_error "expected one FILE" "safetensors" -- inspect
usage_error "'b.st'" "at most 1 (the file)" -- inspect a.st b.st
usage_error "'--jsn'" "--json, --help" -- inspect --jsn x.st
usage_error "missing benchmark kind" "convert, gemm, step" -- bench
usage_error "'gemmm'" "expected one of: convert, gemm, step" -- bench gemmm
usage_error "'convrt'" "expected one of: convert, gemm, step" -- bench convrt
usage_error "'128'" "--max; expected an integer in 256..8192" -- bench gemm --max 128
usage_error "--epochs" "--steps" -- bench step --epochs 1
usage_error "'--json'" "convert" -- bench --json
usage_error "'--jsn'" "--json, --threads, --mib, --help" -- bench convert --jsn
usage_error "'0'" "--threads; expected an integer in 1..1024" -- bench convert --threads 0
usage_error "'abc'" "--threads; expected an integer in 1..1024" -- bench convert --threads abc
usage_error "'2x'" "--threads; expected an integer in 1..1024" -- bench convert --threads=2x
usage_error "'99999'" "--mib; expected an integer in 1..4096" -- bench convert --mib 99999
usage_error "--mib needs a value" "1..4096" -- bench convert --mib
usage_error "--threads needs a value" "1..1024" -- bench convert --threads --json
usage_error "'foo'" "--json, --threads, --mib, --help" -- bench convert foo

# ---- info ----
run info
expect_rc 0
expect_lines "$ERR" 0
for text in "CPUID" "usable" "XCR0" "AMX permission" "kernel level" "GEMM" "conversion" "elementwise" \
            "compute kernels" "gemm_bf16" "attention" "adamw"; do
    expect_has "$OUT" "$text"
done
run info --json
expect_rc 0
expect_lines "$ERR" 0
expect_json "$OUT"
for key in '"features"' '"cpuid"' '"usable"' '"xcr0"' '"amx_permission"' '"kernel_level"' '"support"' \
           '"online_cpus"' '"conversion_kernels"' '"compute_kernels"' '"slot": "softmax"' '"candidates"' \
           '"kernels"' '"name": "ampc_k_gemm_f32f32__ref"'; do
    expect_has "$OUT" "$key"
done
run AMPC_ISA=ref info --json
expect_rc 0
expect_json "$OUT"
expect_has "$OUT" '"chosen": "ref"'
expect_has "$OUT" '"ampc_isa_env": "ref"'
expect_has "$OUT" '"kernel": "ampc_k_softmax_f32__ref"'   # the cap reaches the compute kernels too
expect_has "$OUT" '"slot": "unary_exp"'
checks=$((checks + 1))
# capped at ref, every slot has the ref kernel alone as candidate: no avx512 kernel is chosen
! grep -q '"kernel": "ampc_k_[a-z0-9_]*__avx512' "$OUT" || fail "AMPC_ISA=ref info: an avx512 kernel is chosen"
expect_has "$OUT" '"source": "rule"'   # nothing to measure at the ref level
expect_has "$OUT" '"choices": []'
# how the kernels were chosen: measured (or read from the cache this build's tests share), the switches
run info
expect_has "$OUT" "kernel choice   "
run info --json
for key in '"kernel_choice"' '"mode": "measure"' '"cache_file"' '"measure_seconds"' '"choices"'; do
    expect_has "$OUT" "$key"
done
run AMPC_KERNEL_CHOICE=rule info --json
expect_rc 0
expect_lines "$ERR" 0
expect_json "$OUT"
expect_has "$OUT" '"mode": "rule"'
expect_has "$OUT" '"source": "rule"'
expect_has "$OUT" '"ampc_kernel_choice_env": "rule"'
run AMPC_KERNEL_CHOICE=rule info
expect_has "$OUT" "kernel choice   the fixed rule (AMPC_KERNEL_CHOICE=rule)"
run AMPC_KERNEL_CHOICE=fastest info --json
expect_rc 0
expect_json "$OUT"
expect_exact_err "ampc: warning: AMPC_KERNEL_CHOICE='fastest' ignored: expected measure or rule"
expect_has "$OUT" '"mode": "measure"'
run AMPC_KERNEL_CACHE=sometimes info --json
expect_rc 0
expect_exact_err "ampc: warning: AMPC_KERNEL_CACHE='sometimes' ignored: expected on, off or refresh"

# ---- formats ----
run formats
expect_rc 0
expect_lines "$ERR" 0
for f in FP32 TF32 BF16 FP16 FP8-E4M3 FP8-E5M2; do expect_has "$OUT" "$f"; done
run formats --json
expect_rc 0
expect_json "$OUT"
expect_has "$OUT" '"all_verified": true'
expect_has "$OUT" '"name": "FP8-E5M2"'
expect_has "$OUT" '"max_finite": 448,'

# ---- bench convert (small arrays: this checks the plumbing, not the speed) ----
run bench convert --mib 1
expect_rc 0
expect_lines "$ERR" 0
expect_has "$OUT" "memcpy"
expect_has "$OUT" "ampc_k_cvt_"
for threads in 1 2; do
    run bench convert --mib 1 --threads $threads --json
    expect_rc 0
    expect_lines "$ERR" 0
    expect_json "$OUT" --lines
    n=$(lines "$OUT")
    checks=$((checks + 1))
    [ "$n" -ge 2 ] || fail "$LAST: $n JSON lines, expected memcpy plus at least one kernel"
    for key in '"kind":"convert"' '"kernel":' '"dst":' '"src":' '"n":262144' "\"threads\":$threads," '"gbps":' \
               '"memcpy_gbps":' '"fraction_of_memcpy":' '"matches_ref":true'; do
        checks=$((checks + 1))
        k=$(grep -c -F -e "$key" "$OUT")
        [ "$k" -eq "$n" ] || fail "$LAST: $key in $k of $n lines"
    done
    checks=$((checks + 1))
    [ "$(grep -c -F '"kernel":"memcpy"' "$OUT")" -eq 1 ] || fail "$LAST: expected exactly one memcpy line"
done

# ---- train and compare: bad flags and bad data are one line; a tiny run logs the README's JSONL ----
TINY="--layers 1 --d-model 16 --heads 2 --context 8 --batch 4 --steps 6 --threads 1"
usage_error "'--precison'" "did you mean --precision?" -- train --precison bf16
usage_error "'fp9'" "--precision; accepted: fp32, bf16, fp16, fp8" -- train --precision fp9
usage_error "'fp32,bf32'" "fp32, bf16, fp16" -- compare --precisions fp32,bf32
usage_error "'softmaks'" "softmax" -- train --fp32-ops softmaks
# per-module precision: the form of the rules is checked while parsing (their globs against the model later)
usage_error "'a=fp64'" "--module-precision" -- train --module-precision 'a=fp64'
usage_error "'a b'" "--fp32-modules" -- train --fp32-modules 'a b'
# a newline in a value that the value's own parser quotes again still makes one line
usage_error "--fp32-modules" "'x=?'" -- train --fp32-modules 'x=
'
usage_error "--module-precision" "'a=bf16?'" -- train --module-precision 'a=bf16
'
usage_error "'bf16[x'" "--precisions" -- compare --precisions 'bf16[x'
usage_error "'rnn'" "gpt, mlp, cnn, simple" -- train --model rnn
usage_error "'tf32'" "--fp32-matmul; accepted: highest, high, medium" -- train --fp32-matmul tf32
usage_error "'bogus'" "--shard; accepted: none, optimizer, full" -- train --shard bogus
usage_error "'fp64'" "--reduce-dtype; accepted: fp32, bf16, fp16" -- train --reduce-dtype fp64
usage_error "'0'" "--bucket-mb; expected an integer in 1..4096" -- train --bucket-mb 0
usage_error "'0'" "--dist-timeout; expected a number in 1..86400" -- train --dist-timeout 0
usage_error "'zero3'" "--shard; accepted: none, optimizer, full" -- bench step --shard zero3
usage_error "'0'" "--steps; expected an integer" -- train --steps 0
usage_error "--steps and --epochs" "choose one" -- train --steps 3 --epochs 1
usage_error "'images'" "builtin" -- train --data images
usage_error "--model cnn cannot train on --data builtin" "--model gpt" -- train --model cnn
run train --data text:/nonexistent/corpus.txt $TINY
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "/nonexistent/corpus.txt"
printf 'abc' >"$TMP/short.txt"
run train --data text:"$TMP/short.txt" $TINY
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "short.txt"
run train --model cnn --data fashion-mnist:"$TMP/nodir" --steps 1
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "nodir"
# shellcheck disable=SC2086 # $TINY is a list of options
run train $TINY --precision fp16 --quiet --log "$TMP/run.jsonl"
expect_rc 0
expect_lines "$ERR" 0
expect_has "$OUT" "fp16: 6 steps"
expect_json "$TMP/run.jsonl" --lines
expect_lines "$TMP/run.jsonl" 7
for key in '"step":' '"loss":' '"scale":' '"skipped":' '"inf_tensor":' '"grad_norm":' '"lr":' '"tokens_per_s":' \
           '"peak_bytes":'; do
    checks=$((checks + 1))
    [ "$(head -n 6 "$TMP/run.jsonl" | grep -c -F -e "$key")" -eq 6 ] || fail "train --log: $key missing from a step"
done
checks=$((checks + 1))
tail -n 1 "$TMP/run.jsonl" | grep -q '"final":true.*"eval_loss":' || fail "train --log: no final object with eval_loss"
# the same flags give the same bytes apart from timing (tokens_per_s, seconds)
# shellcheck disable=SC2086
run train $TINY --precision fp16 --quiet --log "$TMP/run2.jsonl"
checks=$((checks + 1))
strip() { sed -e 's/"tokens_per_s":[^,}]*//' -e 's/"seconds":[^,}]*//' "$1"; }
[ "$(strip "$TMP/run.jsonl")" = "$(strip "$TMP/run2.jsonl")" ] || fail "train: two identical runs logged different values"
# a skipped FP16 step names the first overflowing gradient and the scale's backoff
run train --layers 1 --d-model 32 --heads 2 --context 16 --steps 2 --precision fp16 --init-scale 1e30
expect_rc 0
expect_has "$ERR" "fp16 step 0 skipped: non-finite gradient in blocks.0."
expect_has "$ERR" "(loss scale 1e+30 -> 5e+29)"
# the simple model is a regression (MSE): an eval loss, and no accuracy anywhere
run train --model simple --steps 3 --log "$TMP/simple.jsonl"
expect_rc 0
expect_has "$ERR" "eval loss"
checks=$((checks + 1))
! grep -q -i accuracy "$ERR" "$OUT" "$TMP/simple.jsonl" || fail "train --model simple: reports an accuracy"
# compare: table on stdout, report folder, deterministic apart from timing columns
for i in 1 2; do
    # shellcheck disable=SC2086
    run compare $TINY --quiet --report "$TMP/rep$i"
    expect_rc 0
    expect_has "$OUT" "fp32"
    expect_has "$OUT" "fp16"
    for f in report.md loss.svg scale.svg fp32.jsonl bf16.jsonl fp16.jsonl; do
        checks=$((checks + 1))
        [ -s "$TMP/rep$i/$f" ] || fail "compare --report: $f missing or empty"
    done
done
checks=$((checks + 1))
untimed() { sed -e 's/|[^|]*|[^|]*|[^|]*|$/|/' -e '/faster\|slower\|as fast\|not compared\|tokens\/s\|Command\|rep[12]/d' "$1"; }
[ "$(untimed "$TMP/rep1/report.md")" = "$(untimed "$TMP/rep2/report.md")" ] || fail "compare: two reports differ outside timing"
printf 'x' >"$TMP/afile"
run compare $TINY --quiet --report "$TMP/afile"
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "afile"

# ---- output fits the width COLUMNS asks for (display columns: UTF-8 continuation bytes take none) ----
widest() { LC_ALL=C tr -d '\200-\277' <"$1" | awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }'; }
for cols in 80 50; do
    # shellcheck disable=SC2086
    COLUMNS=$cols "$AMPC" compare $TINY --quiet >"$OUT" 2>"$ERR"
    RC=$? LAST="COLUMNS=$cols ampc compare"
    expect_rc 0
    checks=$((checks + 1))
    [ "$(widest "$OUT")" -le $cols ] || fail "$LAST: a line of $(widest "$OUT") columns"
    for p in fp32 bf16 fp16; do
        checks=$((checks + 1))
        [ "$(grep -c "^$p  " "$OUT")" -ge 1 ] || fail "$LAST: no table row for $p"
    done
done
expect_has "$OUT" "speed-up over fp32"   # the key of the compact headers
# the progress lines (not a terminal: plain lines, cut to COLUMNS when it is set)
# shellcheck disable=SC2086
COLUMNS=40 "$AMPC" train $TINY >"$OUT" 2>"$ERR"
RC=$? LAST="COLUMNS=40 ampc train"
expect_rc 0
expect_has "$ERR" "bf16 [6/6] loss"
checks=$((checks + 1))
[ "$(widest "$ERR")" -le 40 ] || fail "$LAST: a progress line of $(widest "$ERR") columns"
# without COLUMNS and without a terminal, lines are not cut
# shellcheck disable=SC2086
run train $TINY
expect_has "$ERR" "bf16 [6/6] loss"
expect_match "$ERR" "tok/s ETA [0-9]+:[0-9]{2}$" # the value is timing: the final evaluation may make it 0:01 when busy

# ---- smaller things: GPT shape checked up front, --threads, not-a-safetensors-file, step numbering ----
usage_error "--heads 5 does not divide --d-model 384 (the default)" "1, 2, 3, 4, 6, 8" -- train --heads 5
checks=$((checks + 1))
! grep -q "classes\|image" "$ERR" || fail "train --heads 5 mentions options a GPT does not have: $(cat "$ERR")"
usage_error "--heads 3 does not divide --d-model 64" "1, 2, 4, 8, 16, 32, 64" -- compare --d-model 64 --heads 3
# --preset fills the GPT's shape where the command line gives none, whatever the order; --vocab
for cmd in train compare doctor "bench step"; do
    # shellcheck disable=SC2086
    usage_error "--heads 5 does not divide --d-model 768 (--preset gpt2-small)" -- $cmd --preset gpt2-small --heads 5
    # shellcheck disable=SC2086
    usage_error "--heads 16 (--preset gpt2-medium) does not divide --d-model 100" -- $cmd --d-model 100 --preset gpt2-medium
done
usage_error "'gpt3'" "--preset; accepted: gpt2-small, gpt2-medium" -- train --preset gpt3
usage_error "--preset gpt2-small sizes a GPT; --model mlp" -- train --model mlp --preset gpt2-small
usage_error "'1'" "--vocab; expected an integer in 2.." -- train --vocab 1
# shellcheck disable=SC2086
usage_error "--vocab: ampc_dataset_open: vocab 100 is too small for the built-in corpus" "at least 256" -- train $TINY --vocab 100
usage_error "--data none (random token ids) is for --model gpt" -- bench step --model mlp --data none
# bench step: random tokens with --data none, and by default for a vocabulary past bytes (a preset's)
# shellcheck disable=SC2086
run bench step $TINY --steps 1 --untimed 0 --precisions fp32 --data none
expect_rc 0
expect_has "$OUT" "gpt (1 layer, d 16, 2 heads, context 8, vocab 256) on random tokens"
expect_has "$OUT" "MiB/token"
expect_has "$OUT" "GFLOP/s  % peak"
expect_has "$OUT" ", kernel level "
# shellcheck disable=SC2086
run bench step --layers 1 --d-model 16 --heads 2 --context 8 --preset gpt2-small --batch 2 --steps 1 --untimed 0 --precisions bf16 --json
expect_rc 0
expect_json "$OUT" --lines
for key in '"data":"random tokens"' '"peak_bytes_per_token":' '"tokens_per_s":' '"batch":2,'; do
    expect_has "$OUT" "$key"
done
# shellcheck disable=SC2086
run bench step $TINY --vocab 300 --steps 1 --untimed 0 --precisions fp32 --data builtin
expect_rc 0
expect_has "$OUT" "vocab 300), batch 4"
# the deepest GPT --layers accepts builds (GPT-2 medium's 24 blocks once hit the model's parameter cap)
run bench step --layers 100 --d-model 16 --heads 2 --context 8 --batch 2 --steps 1 --untimed 0 --precisions fp32
expect_rc 0
expect_has "$OUT" "gpt (100 layers, d 16"
# a checkpoint records the vocabulary with the model (inspect shows it)
# shellcheck disable=SC2086
run train $TINY --vocab 300 --quiet --checkpoint "$TMP/v300.st"
expect_rc 0
run inspect "$TMP/v300.st"
expect_has "$OUT" "context 8, vocab 300)"
# shellcheck disable=SC2086
run train $TINY --threads 0 --quiet
expect_rc 0
expect_lines "$ERR" 0
# shellcheck disable=SC2086
over=$(($(nproc) + 1))
run train $TINY --threads $over --steps 1 --quiet
expect_rc 0
expect_has "$ERR" "warning: --threads $over is more than the $(nproc) CPU"
run inspect "$TMP/run.jsonl"
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "run.jsonl: not a safetensors file"
checks=$((checks + 1))
head -n 1 "$TMP/run.jsonl" | grep -q '^{"step":0,' || fail "the JSONL's first step is not \"step\":0"

# ---- bench gemm and step (small sizes: the plumbing and the JSON contract, not the speed) ----
run bench gemm --max 256 --no-gpt --json
expect_rc 0
expect_lines "$ERR" 0
expect_json "$OUT" --lines
grep -F '"kind":"gemm"' "$OUT" >"$TMP/gemm.jsonl"
n=$(lines "$TMP/gemm.jsonl")
checks=$((checks + 1))
[ "$n" -ge 3 ] || fail "$LAST: $n GEMM lines, expected one per GEMM slot (at least F32, BF16, F16)"
for key in '"dtype":' '"m":256,"n":256,"k":256' '"threads":1,' '"gflops":' '"peak_fraction":' '"above_peak":' \
           '"matches_ref":true'; do
    checks=$((checks + 1))
    k=$(grep -c -F -e "$key" "$TMP/gemm.jsonl")
    [ "$k" -eq "$n" ] || fail "$LAST: $key in $k of $n GEMM lines"
done
# the packing rows (where the level packs with AVX-512): each packer, each stored form, 256 x 256
grep -F '"kind":"pack"' "$OUT" >"$TMP/pack.jsonl"
np=$(lines "$TMP/pack.jsonl")
checks=$((checks + 1))
[ $((n + np)) -eq "$(lines "$OUT")" ] || fail "$LAST: lines of a kind other than gemm and pack"
for key in '"packer":' '"dtype":' '"operand":' '"rows":256,"cols":256' '"threads":1,' '"src_bytes":' '"packed_bytes":' \
           '"gbps":' '"memcpy_gbps":' '"fraction_of_memcpy":' '"isa_level":'; do
    checks=$((checks + 1))
    k=$(grep -c -F -e "$key" "$TMP/pack.jsonl")
    [ "$k" -eq "$np" ] || fail "$LAST: $key in $k of $np pack lines"
done
if [ "$np" -gt 0 ]; then
    for op in '"operand":"A"' '"operand":"A^T"' '"operand":"B"' '"operand":"B^T"'; do
        checks=$((checks + 1))
        k=$(grep -c -F -e "$op" "$TMP/pack.jsonl")
        [ $((k * 4)) -eq "$np" ] || fail "$LAST: $op in $k of $np pack lines, expected a quarter"
    done
fi
run bench gemm --max 256 --no-gpt --no-pack --json
expect_rc 0
checks=$((checks + 1))
[ "$(grep -c -F '"kind":"pack"' "$OUT")" -eq 0 ] || fail "$LAST: pack lines with --no-pack"
# shellcheck disable=SC2086
run bench step $TINY --untimed 1 --precisions fp32,bf16 --json
expect_rc 0
expect_json "$OUT" --lines
expect_lines "$OUT" 2
for key in '"kind":"step"' '"precision":"bf16"' '"ms_per_step":' '"tokens_per_s":' '"peak_bytes":' '"state_bytes":' '"activation_bytes":' '"steps":6' '"gflops":' '"peak_unit":' '"cpu":' '"kernel_level":'; do
    expect_has "$OUT" "$key"
done
# the matrix products' FLOPs of a step, in both precisions: 6 N tokens for the N = 12 d^2 + 256 d weights
# of the linears (32 tokens) plus the causal attention's 3 x 2 BH (T (T + 1) / 2) (D + Dv)
checks=$((checks + 1))
[ "$(grep -c -F '"matmul_flops_per_step":1403904,' "$OUT")" -eq 2 ] || fail "$LAST: expected 1403904 matmul FLOPs per step on both lines"

# bench step over a list of thread counts, with the per-operation profile
TINY_NT="--layers 1 --d-model 16 --heads 2 --context 8 --batch 4 --steps 3"
# shellcheck disable=SC2086
run bench step $TINY_NT --untimed 1 --precisions fp32,bf16 --threads 1,2 --profile
expect_rc 0
for text in 'threads  ms/step' 'speed-up  efficiency' 'op kind, phase: device operation' 'linear forward: gemm' \
    'linear backward: col_sum' 'optimizer: optim_update' 'host, between device calls' 'step (mean)' \
    'speed-up: 1 -> 2 threads' '  2 threads; '; do
    expect_has "$OUT" "$text"
done
expect_match "$OUT" '^bf16 +1 +[0-9.]+ .* 1\.00x +100%$'
expect_match "$OUT" '^bf16 +2 +[0-9.]+ .*x +[0-9]+%$'
checks=$((checks + 1))
[ "$(grep -c -F 'op kind, phase: device operation' "$OUT")" -eq 2 ] || fail "$LAST: expected a profile table per precision"
# shellcheck disable=SC2086
run bench step $TINY_NT --untimed 1 --precisions bf16 --threads 1,2 --profile --json
expect_rc 0
expect_json "$OUT" --lines
expect_lines "$OUT" 2
for key in '"threads":2' '"speedup_over_threads":1' '"speedup":' '"efficiency":' '"profile":[{"kind":' \
    '"phase":"backward"' '"calls_per_step":' '"regions_per_step":' '"host_ms_per_step":' '"mean_ms_per_step":'; do
    expect_has "$OUT" "$key"
done
# shellcheck disable=SC2086
usage_error "--threads" "a thread count from 0 to 1024, or a comma-separated list" -- bench step $TINY_NT --threads 1,x
# shellcheck disable=SC2086
usage_error "--threads" "at most 16 thread counts" -- bench step $TINY_NT --threads 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17

# ---- an invalid AMPC_ISA stops every command ----
for cmd in info "info --json" formats "bench convert --mib 1"; do
    # shellcheck disable=SC2086 # $cmd is a command plus its options
    run AMPC_ISA=bogus $cmd
    expect_rc 2
    expect_lines "$OUT" 0
    expect_lines "$ERR" 1
    expect_has "$ERR" "AMPC_ISA='bogus'"
    expect_has "$ERR" "ref, avx2, avx512, amx"
done

cli_summary
