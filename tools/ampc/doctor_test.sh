#!/bin/sh
# doctor_test.sh: checks `ampc doctor` and per-module precision from the outside (docs/DOCTOR.md): the
# doctor's verdict table, its --json (valid, every site judged in the four formats) and --report files,
# that the command line it recommends runs; --fp32-modules / --module-precision on train, compare, doctor
# and bench step (a glob that matches no module is one line listing the modules, status 2); the rules a
# checkpoint records (ampc.module_precision, kept by --resume); compare's named policies and the JSONL
# files named after them; stochastic rounding (--stochastic-rounding needs --param-dtype bf16 --master none,
# on train and in compare's {...} entry options); the hint a skipped FP16 step prints (not for a routine
# back-off of the scaler). Tiny models only: the
# whole script takes seconds. Exit status: 0 when every check passed, 1 otherwise.
#
# usage: doctor_test.sh PATH/TO/ampc [PATH/TO/ampc_json_check]
# shellcheck disable=SC2086 # $GPT, $SIMPLE and $cmd are lists of words, unquoted on purpose
set -u

. "$(dirname "$0")/cli_lib.sh" # AMPC, JSON_CHECK, TMP, OUT, ERR from the arguments

# module_precision_of FILE: the ampc.module_precision metadata of a checkpoint (empty when absent)
module_precision_of() {
    "$AMPC" inspect "$1" --json 2>/dev/null | sed -n 's/^ *"ampc\.module_precision": "\(.*\)",\{0,1\}$/\1/p'
}


GPT="--layers 1 --d-model 32 --heads 2 --context 16 --batch 4"
SIMPLE="--model simple"

# ---- the verdict table ----
run doctor $GPT --steps 3
expect_rc 0
cp "$OUT" "$TMP/doctor.txt"
expect_has "$OUT" "3 FP32 steps"
expect_match "$OUT" '^module op role +amax +min \|x\|>0 +FP16 +BF16 +FP8-E4M3 +FP8-E5M2 *$'
expect_match "$OUT" '^blocks\.(0|\*)\.attn\.qkv linear out '
expect_match "$OUT" '^blocks\.(0|\*)\.attn\.qkv linear grad '
expect_match "$OUT" '^blocks\.(0|\*)\.attn\.qkv linear grad\(blocks\.(0|\*)\.attn\.qkv\.weight\) '
expect_match "$OUT" '^lm_head matmul out '
# layer norm stays F32 under the default (tutorial) autocast table: every layer_norm row, in every format
grep -E '^[^ ]+ layer_norm ' "$OUT" >"$TMP/ln_rows"
n=$(lines "$TMP/ln_rows")
check
[ "$n" -ge 6 ] || fail "$LAST: $n layer_norm rows, expected out, grad and param grads of ln1, ln2, ln_f"
check
k=$(grep -c -E ' kept fp32 +kept fp32 +kept fp32 +kept fp32 *$' "$TMP/ln_rows")
[ "$k" -eq "$n" ] || fail "$LAST: $k of $n layer_norm rows kept fp32 in all four formats"
# a lowering op's output is judged, not kept: linear outputs of a fresh tiny GPT are safe in FP16 and BF16
check
grep -E '^blocks\.(0|\*)\.attn\.qkv linear out ' "$OUT" | grep -q -E ' safe +safe ' ||
    fail "$LAST: qkv linear out is not safe in FP16 and BF16: $(grep 'attn.qkv linear out' "$OUT")"
expect_match "$OUT" '^FP16: [0-9]+ unsafe sites?; '
expect_match "$OUT" '^recommended:$'
expect_match "$OUT" '^  ampc train .*--precision fp16 --init-scale [0-9]+'
expect_match "$OUT" '^or BF16 '
expect_match "$OUT" '^  ampc train .*--precision bf16'
# the recommendation is built from the user's options, without the doctor's own
check
rec=$(sed -n '/^recommended:$/{n;s/^  //p;}' "$OUT")
case $rec in
"ampc train --layers 1 --d-model 32 --heads 2 --context 16 --batch 4 --precision fp16 --init-scale "*) ;;
*) fail "$LAST: recommended '$rec'" ;;
esac
check
case $rec in *--steps*) fail "$LAST: the recommendation keeps the doctor's --steps: '$rec'" ;; esac
expect_has "$ERR" "doctor [3/3]"

# ---- --json ----
run doctor $GPT --steps 3 --json
expect_rc 0
expect_lines "$ERR" 0   # --json implies --quiet
expect_json "$OUT"
cp "$OUT" "$TMP/doctor.json"
for key in '"sites": [' '"recommended": "ampc train ' '"fp16_loss_scale_log2": ' '"bf16_command": ' \
           '"unsafe_fp16_sites": ' '"fp32_modules": ' '"fp32_ops": ' '"steps": 3,'; do
    expect_has "$OUT" "$key"
done
nsites=$(grep -c '^ *"module": ' "$OUT")
check
[ "$nsites" -ge 20 ] || fail "$LAST: $nsites sites"
for f in fp16 bf16 fp8_e4m3 fp8_e5m2; do
    check
    k=$(grep -c "^ *\"$f\": {" "$OUT")
    [ "$k" -eq "$nsites" ] || fail "$LAST: $k of $nsites sites have a \"$f\" object"
done
check
k=$(grep -c '^ *"verdict": ' "$OUT")
[ "$k" -eq $((4 * nsites)) ] || fail "$LAST: $k verdicts for $nsites sites, expected 4 each"
check
bad=$(grep '^ *"verdict": ' "$OUT" | grep -v -E '"verdict": "(safe|needs scaling|unsafe|kept fp32)",?$' | head -n 3)
[ -z "$bad" ] || fail "$LAST: verdicts outside safe, needs scaling, unsafe, kept fp32: $bad"
for v in safe "needs scaling" "kept fp32"; do expect_has "$OUT" "\"verdict\": \"$v\""; done
# text and JSON recommend the same command (the same run, the same seed)
jrec=$(sed -n 's/^ *"recommended": "\(.*\)",\{0,1\}$/\1/p' "$OUT")
check
[ "$jrec" = "$rec" ] || fail "doctor: --json recommends '$jrec', the table '$rec'"
check
scale=$(sed -n 's/^ *"fp16_loss_scale_log2": \([0-9-]*\),\{0,1\}$/\1/p' "$OUT")
if [ -z "$scale" ] || [ "$scale" -lt 0 ] || [ "$scale" -gt 40 ]; then
    fail "doctor --json: fp16_loss_scale_log2 '$scale'"
fi
expect_has "$TMP/doctor.txt" "--init-scale $(awk -v k="${scale:-0}" 'BEGIN { printf "%.0f", 2 ^ k }')"

# ---- --report ----
run doctor $GPT --steps 3 --quiet --report "$TMP/rep"
expect_rc 0
expect_has "$ERR" "report written to $TMP/rep/report.md"
expect_match "$OUT" '^  ampc train '
expect_file "$TMP/rep/report.md"
expect_file "$TMP/rep/heatmap.svg"
check
[ "$(tail -n 1 "$TMP/rep/heatmap.svg")" = "</svg>" ] || fail "$LAST: heatmap.svg does not end with </svg>"
check
head -c 200 "$TMP/rep/heatmap.svg" | grep -q '<svg' || fail "$LAST: heatmap.svg does not start an <svg>"
expect_has "$TMP/rep/report.md" "--precision fp16 --init-scale"
printf 'x' >"$TMP/afile"
run doctor $GPT --steps 1 --quiet --report "$TMP/afile"
expect_rc 1
expect_lines "$ERR" 1
expect_has "$ERR" "afile"

# ---- the recommended commands run (the first word is `ampc`: this build's binary instead) ----
for which in recommended "or BF16"; do
    cmd=$(sed -n "/^$which/{n;s/^  ampc //p;}" "$TMP/doctor.txt")
    eval "\"\$AMPC\" $cmd --steps 3 --quiet" >"$OUT" 2>"$ERR"
    RC=$? LAST="(doctor's $which) ampc $cmd --steps 3 --quiet"
    expect_rc 0
    expect_has "$OUT" "3 steps"
    expect_has "$OUT" "skipped 0"
done
# with the user's own --fp32-modules and --fp32-ops: merged in, the glob quoted for the shell, and the
# modules kept in FP32 are judged so
run doctor $GPT --steps 3 --json --fp32-modules 'blocks.*.attn' --fp32-ops softmax
expect_rc 0
expect_json "$OUT"
jrec=$(sed -n 's/^ *"recommended": "\(.*\)",\{0,1\}$/\1/p' "$OUT")
check
case $jrec in
"ampc train "*" --precision fp16 --init-scale "*"--fp32-ops softmax"*"--fp32-modules 'blocks.*.attn'"*) ;;
*) fail "$LAST: recommended '$jrec' lacks the user's --fp32-ops softmax / --fp32-modules 'blocks.*.attn'" ;;
esac
cmd=${jrec#ampc }
eval "\"\$AMPC\" $cmd --steps 3 --quiet" >"$OUT" 2>"$ERR"
RC=$? LAST="(doctor --json's recommended) ampc $cmd --steps 3 --quiet"
expect_rc 0
expect_has "$OUT" "fp16: 3 steps"
run doctor $GPT --steps 3 --quiet --fp32-modules 'blocks.*.attn'
expect_rc 0
for site in 'attn\.qkv linear out' 'attn attention out' 'attn\.proj linear grad'; do
    check
    grep -E "^blocks\.(0|\*)\.$site " "$OUT" | grep -q -E ' kept fp32 +kept fp32 +kept fp32 +kept fp32 *$' ||
        fail "$LAST: '$site' is not kept fp32: $(grep -E "$site" "$OUT" | head -n 1)"
done

# ---- --fp32-modules / --module-precision on train, doctor, compare, bench step ----
run train $GPT --fp32-modules 'blocks.*.attn' --precision fp16 --steps 3 --quiet
expect_rc 0
expect_has "$OUT" "fp16: 3 steps"
run train $GPT --module-precision 'blocks.0=bf16,lm_head=fp32' --precision fp32 --steps 3 --quiet
expect_rc 0
expect_has "$OUT" "fp32: 3 steps"
for cmd in train doctor compare "bench step"; do
    usage_error "--fp32-modules" "'blocks.*.atn'" "blocks.N.attn" "blocks.N.mlp.fc" "lm_head" -- \
        $cmd $GPT --steps 2 --fp32-modules 'blocks.*.atn'
done
usage_error "--module-precision" "'blocks.*.atn'" "blocks.N.attn" "lm_head" -- \
    train $GPT --steps 2 --module-precision 'blocks.*.atn=bf16'
usage_error "'nope'" "fc1, fc2" -- train $SIMPLE --steps 1 --fp32-modules nope
usage_error "'a=fp64'" "--module-precision" -- doctor --module-precision 'a=fp64'
usage_error "'lm_head'" "--module-precision" -- train --module-precision 'lm_head'
usage_error "'=fp32'" "--module-precision" -- train --module-precision '=fp32'
usage_error "'a,,b'" "--fp32-modules" -- train --fp32-modules 'a,,b'
usage_error "'a=b'" "--fp32-modules" -- bench step --fp32-modules 'a=b'
# the rules change the numbers: a BF16 run with attention in FP32 logs neither plain BF16's numbers nor
# FP32's; with every module in FP32 ('*': in this GPT every lowering op sits inside a module) a BF16 run
# is an FP32 run, bit for bit
run compare $GPT --steps 2 --quiet --precisions 'fp32,bf16,attn32:bf16[blocks.*.attn=fp32],all32:bf16[*=fp32]' \
    --report "$TMP/rules"
expect_rc 0
# the numbers of a JSONL log: losses, gradient norms, scales, eval loss (not timing, memory or the label)
for other in bf16 fp32; do
    check
    [ "$(numbers "$TMP/rules/attn32.jsonl")" != "$(numbers "$TMP/rules/$other.jsonl")" ] ||
        fail "$LAST: bf16 with blocks.*.attn=fp32 logs the same numbers as $other"
done
check
[ "$(numbers "$TMP/rules/all32.jsonl")" = "$(numbers "$TMP/rules/fp32.jsonl")" ] ||
    fail "$LAST: bf16[*=fp32] does not log fp32's numbers"

# ---- a checkpoint records the rules; --resume keeps them ----
run train $GPT --fp32-modules 'blocks.*.attn' --steps 2 --quiet --checkpoint "$TMP/ck.safetensors"
expect_rc 0
expect_file "$TMP/ck.safetensors"
check
mp=$(module_precision_of "$TMP/ck.safetensors")
[ "$mp" = "blocks.*.attn=fp32" ] || fail "$LAST: ampc.module_precision is '$mp', expected 'blocks.*.attn=fp32'"
run inspect "$TMP/ck.safetensors" --json
expect_rc 0
expect_json "$OUT"
expect_match "$OUT" '"train\.args": ".*--fp32-modules\\nblocks\.\*\.attn'
run inspect "$TMP/ck.safetensors"
expect_rc 0
expect_match "$OUT" 'ampc\.module_precision +blocks\.\*\.attn=fp32$'
run train --resume "$TMP/ck.safetensors" --steps 4 --quiet --checkpoint "$TMP/ck2.safetensors"
expect_rc 0
expect_has "$OUT" "4 steps"
check
mp=$(module_precision_of "$TMP/ck2.safetensors")
[ "$mp" = "blocks.*.attn=fp32" ] || fail "$LAST: the resumed run's ampc.module_precision is '$mp'"
# given options override the recorded ones
run train --resume "$TMP/ck.safetensors" --steps 3 --quiet --fp32-modules lm_head --checkpoint "$TMP/ck3.safetensors"
expect_rc 0
check
mp=$(module_precision_of "$TMP/ck3.safetensors")
[ "$mp" = "lm_head=fp32" ] || fail "$LAST: ampc.module_precision is '$mp', expected 'lm_head=fp32'"
# the canonical string: --module-precision rules first, then --fp32-modules, dtypes spelled fp32/bf16/fp16
run train $GPT --steps 1 --quiet --fp32-modules 'blocks.*.attn,lm_head' --module-precision 'blocks.*=f16' \
    --precision bf16 --checkpoint "$TMP/ck4.safetensors"
expect_rc 0
check
mp=$(module_precision_of "$TMP/ck4.safetensors")
[ "$mp" = "blocks.*=fp16,blocks.*.attn=fp32,lm_head=fp32" ] || fail "$LAST: ampc.module_precision is '$mp'"
# no rules, no key
run train $GPT --steps 1 --quiet --checkpoint "$TMP/plain.safetensors"
expect_rc 0
check
"$AMPC" inspect "$TMP/plain.safetensors" --json >"$OUT" 2>&1
! grep -q 'ampc.module_precision' "$OUT" || fail "train without rules: the checkpoint has ampc.module_precision"

# ---- compare: named policies ----
run compare $GPT --steps 2 --quiet --precisions 'fp32,attn32:bf16[blocks.*.attn=fp32]' --report "$TMP/cmp"
expect_rc 0
expect_match "$OUT" '^attn32 '
expect_has "$OUT" "attn32: "
for f in fp32 attn32; do
    expect_file "$TMP/cmp/$f.jsonl"
    expect_json "$TMP/cmp/$f.jsonl" --lines
    expect_lines "$TMP/cmp/$f.jsonl" 3
done
check
tail -n 1 "$TMP/cmp/attn32.jsonl" | grep -q '"final":true,"precision":"attn32"' ||
    fail "$LAST: attn32.jsonl's final object is not labelled attn32: $(tail -n 1 "$TMP/cmp/attn32.jsonl" | head -c 200)"
expect_has "$TMP/cmp/report.md" "attn32"
# unnamed: the entry itself is the label; the file name is the label with all but [A-Za-z0-9.-] as '_'
run compare $GPT --steps 2 --quiet --precisions 'bf16[lm_head=fp32]' --report "$TMP/cmp2"
expect_rc 0
expect_match "$OUT" '^bf16\[lm_head=fp32\] '
expect_file "$TMP/cmp2/bf16_lm_head_fp32_.jsonl"
expect_json "$TMP/cmp2/bf16_lm_head_fp32_.jsonl" --lines
check
n=$(find "$TMP/cmp2" -name '*.jsonl' | wc -l | tr -d ' ')
[ "$n" -eq 1 ] || fail "$LAST: $n JSONL files, expected 1"
for bad in 'bf16,bf16' 'a:bf16,a:fp16' 'a.b:bf16,a.b:fp32' 'x[y:bf16,fp32' 'x:bf16[a=fp64]' 'x:bf8' ':bf16' \
           'bf16[]' 'x:bf16[a=fp32' 'bf16[a=fp32]x' 'fp32[lm_head=fp32],fp32[lm_head=fp32]'; do
    usage_error "--precisions" "'$bad'" -- compare --precisions "$bad"
done
# labels that differ only in characters a file name cannot hold would share a JSONL file
usage_error "--precisions" "'a_b:bf16,a?b:fp16'" -- compare --precisions 'a_b:bf16,a?b:fp16'
usage_error "--precisions" "'fp16[a=fp32],fp16_a_fp32_:bf16'" -- compare --precisions 'fp16[a=fp32],fp16_a_fp32_:bf16'
# a policy's glob that matches no module: one line, status 2
usage_error "'blocks.*.atn'" "lm_head" -- compare $GPT --steps 1 --precisions 'bf16[blocks.*.atn=fp32]'

# ---- stochastic rounding: BF16 parameters without F32 masters, on train and as compare entries ----
for storage in "" "--param-dtype bf16" "--master none" "--param-dtype f16 --master none"; do
    usage_error "--stochastic-rounding" "--param-dtype bf16 --master none" -- \
        train $GPT --steps 2 $storage --stochastic-rounding
done
run train $GPT --steps 2 --quiet --param-dtype bf16 --master none --stochastic-rounding
expect_rc 0
expect_has "$OUT" "2 steps"
run compare $GPT --steps 3 --quiet --precisions 'fp32,sr:bf16{param-dtype=bf16,master=none,stochastic-rounding}' \
    --report "$TMP/sr"
expect_rc 0
expect_match "$OUT" '^sr '
expect_file "$TMP/sr/sr.jsonl"
expect_json "$TMP/sr/sr.jsonl" --lines
check
tail -n 1 "$TMP/sr/sr.jsonl" | grep -q '"precision":"sr"' ||
    fail "$LAST: sr.jsonl's final object is not labelled sr: $(tail -n 1 "$TMP/sr/sr.jsonl" | head -c 200)"
for bad in 'x:bf16{foo}' 'bf16{param-dtype=bf8}' 'bf16{master=some}' 'bf16{param-dtype=bf16' 'bf16{master=none}x'; do
    usage_error "--precisions" "'$bad'" -- compare $GPT --steps 2 --precisions "$bad"
done
usage_error "stochastic rounding" "--param-dtype bf16 --master none" -- \
    compare $GPT --steps 2 --precisions 'bf16{stochastic-rounding}'
usage_error "stochastic rounding" "--param-dtype bf16 --master none" -- \
    compare $GPT --steps 2 --precisions 'bf16{param-dtype=bf16,stochastic-rounding}'

# ---- bench step: policies with rules on the simple model ----
run bench step $SIMPLE --steps 1 --untimed 0 --precisions 'fp32,bf16[fc1=fp32]'
expect_rc 0
expect_has "$OUT" "bf16[fc1=fp32]"
run bench step $SIMPLE --steps 1 --untimed 0 --precisions 'fp32,h:fp16[fc2=fp32]' --fp32-modules fc1 --json
expect_rc 0
expect_json "$OUT" --lines
expect_lines "$OUT" 2
expect_has "$OUT" '"precision":"h"'

# ---- a skipped FP16 step points at the doctor, once a run ----
# (an initial scale of 1e30 overflows the scaled loss: every step skips)
run train $SIMPLE --precision fp16 --init-scale 1e30 --steps 3
expect_rc 0
expect_has "$ERR" "fp16 step 0 skipped"
expect_has "$ERR" "fp16 step 2 skipped"
check
k=$(grep -c -F 'ampc doctor' "$ERR")
[ "$k" -eq 1 ] || fail "$LAST: 'ampc doctor' on $k stderr lines, expected 1"
run train $GPT --precision fp16 --init-scale 1e30 --steps 2
expect_rc 0
check
k=$(grep -c -F 'ampc doctor' "$ERR")
[ "$k" -eq 1 ] || fail "$LAST: 'ampc doctor' on $k stderr lines, expected 1"
# the scaler probing (it grows every 12 clean steps from 16384 and backs off to 65536 when 131072
# overflows, 13 steps apart): routine, no hint
run train --model simple --precision fp16 --init-scale 16384 --growth-interval 12 --steps 60
expect_rc 0
expect_has "$ERR" "fp16 step 36 skipped: non-finite gradient in fc2.bias (loss scale 131072 -> 65536)"
expect_has "$ERR" "fp16 step 49 skipped"
check
! grep -q -F 'ampc doctor' "$ERR" || fail "$LAST: a hint for the scaler's routine back-off"
# no skipped step, no hint
run train $SIMPLE --precision fp16 --steps 3
expect_rc 0
check
! grep -q -F 'ampc doctor' "$ERR" || fail "$LAST: a hint without a skipped step"

cli_summary
