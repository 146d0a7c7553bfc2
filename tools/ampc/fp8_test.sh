#!/bin/sh
# fp8_test.sh: checks `ampc train --precision fp8` from the outside (BF16 autocast with linear and matmul
# layers in FP8, TransformerEngine's recipe): the JSONL log's per-step fp8_min_scale / fp8_max_scale
# (powers of two) and fp8_saturated, no loss scaler by default; each --fp8-* option runs, its bad values
# are one stderr line naming the option (status 2), and the options change the numbers; identical runs log
# the same numbers; --resume continues bit for bit (the checkpoint holds ampc.fp8.recipe and the fp8.*
# tensors); compare and bench step take fp8; --reduce-dtype fp8 is refused. A tiny GPT only: the whole
# script takes seconds. Exit status: 0 when every check passed, 1 otherwise.
#
# usage: fp8_test.sh PATH/TO/ampc [PATH/TO/ampc_json_check]
# shellcheck disable=SC2086 # $GPT and $opt are lists of words, unquoted on purpose
set -u

. "$(dirname "$0")/cli_lib.sh" # AMPC, JSON_CHECK, TMP, OUT, ERR from the arguments


GPT="--layers 1 --d-model 32 --heads 2 --context 16 --batch 4"

# the numbers of a JSONL log: losses, gradient norms, scales, eval loss (not timing, memory or the label)
# steps FILE: the step objects of a JSONL log (not the final summary)
steps() { grep '^{"step":' "$1"; }
# losses FILE: the loss of each step, one a line
losses() { steps "$1" | sed 's/.*"loss":\([^,}]*\).*/\1/'; }
# field FILE STEP KEY: the value of KEY in the object of step STEP
field() { grep "^{\"step\":$2," "$1" | sed -n "s/.*\"$3\":\([^,}]*\).*/\1/p"; }

# fp8_log_problems FILE: one line per problem with the fp8_* keys of every step object (empty: none).
# A scale is a positive power of two (2^k, k of either sign: halving or doubling reaches exactly 1;
# %.17g round-trips, so awk reads the double the run held); saturations are an integer >= 0.
fp8_log_problems() {
    awk '
    function val(line, key,   m) {
        if (!match(line, "\"" key "\":[^,}]*")) return "missing"
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":/, "", m); return m
    }
    function pow2(s,   x, i) {
        if (s !~ /^[0-9.eE+-]+$/) return 0
        x = s + 0; if (!(x > 0)) return 0
        for (i = 0; x >= 2 && i < 2100; i++) x /= 2
        for (i = 0; x < 1 && i < 2100; i++) x *= 2
        return x == 1
    }
    /^\{"step":/ {
        n++
        lo = val($0, "fp8_min_scale"); hi = val($0, "fp8_max_scale"); sat = val($0, "fp8_saturated")
        if (!pow2(lo)) print "line " NR ": fp8_min_scale " lo " is not a power of two"
        if (!pow2(hi)) print "line " NR ": fp8_max_scale " hi " is not a power of two"
        if (pow2(lo) && pow2(hi) && lo + 0 > hi + 0) print "line " NR ": fp8_min_scale " lo " > fp8_max_scale " hi
        if (sat !~ /^[0-9]+$/) print "line " NR ": fp8_saturated " sat " is not an integer >= 0"
    }
    END { if (!n) print "no step objects" }' "$1"
}

# ---- train --precision fp8: the log ----
run train $GPT --precision fp8 --steps 5 --log "$TMP/L.jsonl"
expect_rc 0
expect_has "$OUT" "fp8: 5 steps"
expect_has "$OUT" "skipped 0, final scale 1,"
expect_file "$TMP/L.jsonl"
expect_json "$TMP/L.jsonl" --lines
expect_lines "$TMP/L.jsonl" 6
check
p=$(fp8_log_problems "$TMP/L.jsonl")
[ -z "$p" ] || fail "$LAST: $p"
# no loss scaler for fp8 (auto: on for fp16 only): scale 1, nothing skipped
check
k=$(steps "$TMP/L.jsonl" | grep -c '"scale":1,"skipped":false,"inf_tensor":null,')
[ "$k" -eq 5 ] || fail "$LAST: $k of 5 steps have scale 1 and skipped false"
expect_has "$TMP/L.jsonl" '"final":true,"precision":"fp8","steps":5,'
expect_has "$TMP/L.jsonl" '"skipped_steps":0,"final_scale":1,'
# delayed scaling starts from scale 1 and learns from step 0's amaxes: later steps hold scales above 1
# (a fresh tiny GPT's activations and gradients are far below E4M3/E5M2's largest)
check
[ "$(field "$TMP/L.jsonl" 0 fp8_min_scale) $(field "$TMP/L.jsonl" 0 fp8_max_scale)" = "1 1" ] ||
    fail "$LAST: step 0's scales are $(field "$TMP/L.jsonl" 0 fp8_min_scale)..$(field "$TMP/L.jsonl" 0 fp8_max_scale), expected 1 (delayed: the initial scale)"
check
awk -v s="$(field "$TMP/L.jsonl" 1 fp8_max_scale)" 'BEGIN { exit !(s + 0 > 1) }' ||
    fail "$LAST: step 1's fp8_max_scale $(field "$TMP/L.jsonl" 1 fp8_max_scale), expected above 1"
# a bf16 run logs no fp8_* keys
run train $GPT --precision bf16 --steps 5 --log "$TMP/bf16.jsonl" --quiet
expect_rc 0
expect_json "$TMP/bf16.jsonl" --lines
check
! grep -q '"fp8_' "$TMP/bf16.jsonl" || fail "$LAST: a bf16 log has fp8_* keys: $(grep -o '"fp8_[a-z_]*"' "$TMP/bf16.jsonl" | head -n 1)"
# fp8 is not bf16: the FP8 casts change the losses
check
[ "$(losses "$TMP/L.jsonl")" != "$(losses "$TMP/bf16.jsonl")" ] || fail "$LAST: fp8 logs bf16's losses"

# ---- each option's values run ----
for opt in "--fp8-format hybrid" "--fp8-format e4m3" "--fp8-scaling delayed" "--fp8-scaling current" \
           "--fp8-history 4" "--fp8-history 1" "--fp8-history 65536" "--fp8-amax max" "--fp8-amax most-recent" \
           "--fp8-margin 1" "--fp8-margin 0" "--fp8-margin -1" "--fp8-margin 64" "--fp8-margin -64"; do
    name=$(printf '%s' "$opt" | tr -c 'A-Za-z0-9-' '_')
    run train $GPT --precision fp8 --steps 3 --quiet $opt --log "$TMP/opt$name.jsonl"
    expect_rc 0
    expect_has "$OUT" "fp8: 3 steps"
    expect_json "$TMP/opt$name.jsonl" --lines
    check
    p=$(fp8_log_problems "$TMP/opt$name.jsonl")
    [ -z "$p" ] || fail "$LAST: $p"
done
# ---- bad values: status 2, one stderr line naming the option and the value ----
usage_error "--fp8-format" "'e5m2'" "hybrid, e4m3" -- train $GPT --precision fp8 --steps 2 --fp8-format e5m2
usage_error "--fp8-scaling" "'late'" "delayed, current" -- train $GPT --precision fp8 --steps 2 --fp8-scaling late
usage_error "--fp8-history" "'0'" "1..65536" -- train $GPT --precision fp8 --steps 2 --fp8-history 0
usage_error "--fp8-history" "'65537'" -- train $GPT --precision fp8 --steps 2 --fp8-history 65537
usage_error "--fp8-history" "'x'" -- train $GPT --precision fp8 --steps 2 --fp8-history x
usage_error "--fp8-amax" "'min'" "max, most-recent" -- train $GPT --precision fp8 --steps 2 --fp8-amax min
usage_error "--fp8-margin" "'99'" "-64..64" -- train $GPT --precision fp8 --steps 2 --fp8-margin 99
usage_error "--fp8-margin" "'-65'" -- train $GPT --precision fp8 --steps 2 --fp8-margin -65
for cmd in compare "bench step"; do
    usage_error "--fp8-format" "'e5m2'" -- $cmd $GPT --steps 1 --fp8-format e5m2
    usage_error "--fp8-margin" "'99'" -- $cmd $GPT --steps 1 --fp8-margin 99
done
usage_error "--precision" "'fp9'" "fp8" -- train $GPT --steps 1 --precision fp9

# ---- the options change the numbers ----
o=$TMP/opt
check
[ "$(losses "${o}--fp8-scaling_current.jsonl")" != "$(losses "${o}--fp8-scaling_delayed.jsonl")" ] ||
    fail "train --fp8-scaling current: the losses of delayed scaling"
check
[ "$(losses "${o}--fp8-format_e4m3.jsonl")" != "$(losses "${o}--fp8-format_hybrid.jsonl")" ] ||
    fail "train --fp8-format e4m3: the losses of hybrid"
check
[ "$(numbers "${o}--fp8-amax_most-recent.jsonl")" != "$(numbers "${o}--fp8-amax_max.jsonl")" ] ||
    fail "train --fp8-amax most-recent: the numbers of max"
# the defaults are hybrid, delayed, history 1024, max, margin 0
for opt in --fp8-format_hybrid --fp8-scaling_delayed --fp8-history_65536 --fp8-amax_max --fp8-margin_0; do
    check
    [ "$(numbers "$o$opt.jsonl")" = "$(numbers "${o}--fp8-history_4.jsonl")" ] ||
        fail "train $opt (3 steps): not the numbers of --fp8-history 4 (the defaults, as 3 steps fill no history of 4)"
done
# current scaling takes each tensor's scale from its own amax: already above 1 at step 0, and with a
# margin >= 0 nothing saturates
check
[ "$(field "${o}--fp8-scaling_current.jsonl" 0 fp8_max_scale)" != 1 ] ||
    fail "train --fp8-scaling current: step 0's fp8_max_scale is 1 (the delayed initial scale)"
check
k=$(steps "${o}--fp8-scaling_current.jsonl" | grep -c '"fp8_saturated":0,')
[ "$k" -eq 3 ] || fail "train --fp8-scaling current: $k of 3 steps without saturations"
# the margin divides the delayed scales by 2^margin: step 1's scales come from step 0's amaxes, and
# step 0 (scale 1) is the same whatever the margin
for m in 1 -1 64 -64; do
    for key in fp8_min_scale fp8_max_scale; do
        check
        s0=$(field "${o}--fp8-margin_0.jsonl" 1 $key) sm=$(field "$o--fp8-margin_$m.jsonl" 1 $key)
        awk -v a="$s0" -v b="$sm" -v m="$m" 'BEGIN { exit !(a / b == 2 ^ m) }' ||
            fail "train --fp8-margin $m: step 1's $key $sm, expected $s0 / 2^$m"
    done
done
# a margin of -64 puts every amax far beyond the format's largest: the casts saturate
check
s=$(field "${o}--fp8-margin_-64.jsonl" 1 fp8_saturated)
[ "${s:-0}" -gt 0 ] || fail "train --fp8-margin -64: step 1 saturated '$s' values, expected some"

# ---- deterministic: two identical runs log the same numbers ----
run train $GPT --precision fp8 --steps 5 --log "$TMP/L2.jsonl" --quiet
expect_rc 0
check
[ "$(numbers "$TMP/L.jsonl")" = "$(numbers "$TMP/L2.jsonl")" ] || fail "$LAST: not the numbers of the first fp8 run"
run train $GPT --precision fp8 --fp8-scaling current --steps 3 --log "$TMP/cur2.jsonl" --quiet
expect_rc 0
check
[ "$(numbers "${o}--fp8-scaling_current.jsonl")" = "$(numbers "$TMP/cur2.jsonl")" ] ||
    fail "$LAST: not the numbers of the first run"

# ---- resume, bit for bit ----
# A: 8 steps at once; B: 4 steps, a checkpoint, 4 more from it (the log appended to)
resume_check() {   # NAME FP8-OPTIONS...
    tag=$1
    shift
    run train $GPT --precision fp8 "$@" --schedule-steps 8 --steps 8 --quiet --log "$TMP/$tag-a.jsonl"
    expect_rc 0
    run train $GPT --precision fp8 "$@" --schedule-steps 8 --steps 4 --quiet --log "$TMP/$tag-b.jsonl" \
        --checkpoint "$TMP/$tag.safetensors"
    expect_rc 0
    expect_file "$TMP/$tag.safetensors"
    cp "$TMP/$tag.safetensors" "$TMP/$tag-4.safetensors"
    run train --resume "$TMP/$tag.safetensors" --schedule-steps 8 --steps 8 --quiet --log "$TMP/$tag-b.jsonl"
    expect_rc 0
    expect_has "$OUT" "fp8: 8 steps"
    expect_json "$TMP/$tag-b.jsonl" --lines
    check
    steps "$TMP/$tag-a.jsonl" | tail -n 4 >"$TMP/$tag-a4"
    steps "$TMP/$tag-b.jsonl" | tail -n 4 >"$TMP/$tag-b4"
    if [ "$(lines "$TMP/$tag-a4")" -ne 4 ] || [ "$(numbers "$TMP/$tag-a4")" != "$(numbers "$TMP/$tag-b4")" ]; then
        fail "$LAST: steps 4..7 differ from an uninterrupted run's: $(numbers "$TMP/$tag-b4" | head -n 1 | head -c 300) vs $(numbers "$TMP/$tag-a4" | head -n 1 | head -c 300)"
    fi
    check
    [ "$(steps "$TMP/$tag-b4" | sed -n '1s/^{"step":\([0-9]*\),.*/\1/p')" = 4 ] ||
        fail "$LAST: the resumed log does not continue at step 4"
}
resume_check delayed
# the checkpoint holds the FP8 state: the recipe and each FP8 parameter's scales and amax history
run inspect "$TMP/delayed-4.safetensors" --json
expect_rc 0
expect_json "$OUT"
expect_has "$OUT" '"ampc.fp8.recipe": "0 0 1024 0 0"'
for t in blocks.0.attn.qkv.weight blocks.0.attn.proj.weight blocks.0.mlp.fc.weight blocks.0.mlp.proj.weight; do
    expect_has "$OUT" "\"name\": \"fp8.$t.scale\""
    expect_has "$OUT" "\"name\": \"fp8.$t.amax_history\""
done
run inspect "$TMP/delayed-4.safetensors"
expect_rc 0
expect_match "$OUT" '^ *ampc\.fp8\.recipe +0 0 1024 0 0$'
expect_match "$OUT" '^fp8\.blocks\.0\.attn\.qkv\.weight\.scale +F32 +\[3\] '
expect_match "$OUT" '^fp8\.blocks\.0\.attn\.qkv\.weight\.amax_history +F32 +\[3, 1024\] '
# every option recorded ("format scaling history amax_compute margin"), and restored by --resume
resume_check recipe --fp8-format e4m3 --fp8-history 2 --fp8-amax most-recent --fp8-margin 1
run inspect "$TMP/recipe-4.safetensors" --json
expect_rc 0
expect_has "$OUT" '"ampc.fp8.recipe": "1 0 2 1 1"'
run inspect "$TMP/recipe-4.safetensors"
expect_rc 0
expect_match "$OUT" '^fp8\.blocks\.0\.mlp\.fc\.weight\.amax_history +F32 +\[3, 2\] '
resume_check current --fp8-scaling current
run inspect "$TMP/current-4.safetensors" --json
expect_rc 0
expect_has "$OUT" '"ampc.fp8.recipe": "0 1 1024 0 0"'
# a bf16 run's checkpoint has no FP8 state
run train $GPT --precision bf16 --steps 2 --quiet --checkpoint "$TMP/bf16.safetensors"
expect_rc 0
run inspect "$TMP/bf16.safetensors" --json
expect_rc 0
check
! grep -q -e 'ampc\.fp8\.recipe' -e '"fp8\.' "$OUT" || fail "$LAST: a bf16 checkpoint with FP8 state"

# ---- compare and bench step take fp8 ----
run compare $GPT --precisions fp32,bf16,fp8 --steps 3 --quiet --report "$TMP/cmp"
expect_rc 0
expect_match "$OUT" '^fp8 +[0-9]'
for p in fp32 bf16 fp8; do
    expect_file "$TMP/cmp/$p.jsonl"
    expect_json "$TMP/cmp/$p.jsonl" --lines
    expect_lines "$TMP/cmp/$p.jsonl" 4
done
check
p=$(fp8_log_problems "$TMP/cmp/fp8.jsonl")
[ -z "$p" ] || fail "$LAST: fp8.jsonl: $p"
check
! grep -q '"fp8_' "$TMP/cmp/bf16.jsonl" || fail "$LAST: bf16.jsonl has fp8_* keys"
check
tail -n 1 "$TMP/cmp/fp8.jsonl" | grep -q '"final":true,"precision":"fp8"' ||
    fail "$LAST: fp8.jsonl's final object is not labelled fp8"
# compare's fp8 run is train's (after fp32 and bf16 in the same process), its --fp8-* options too
check
[ "$(numbers "$TMP/cmp/fp8.jsonl")" = "$(numbers "${o}--fp8-format_hybrid.jsonl")" ] ||
    fail "$LAST: fp8.jsonl has not the numbers of train --precision fp8 --steps 3"
run compare $GPT --precisions fp32,fp8 --steps 3 --quiet --fp8-scaling current --report "$TMP/cmp2"
expect_rc 0
check
[ "$(numbers "$TMP/cmp2/fp8.jsonl")" = "$(numbers "${o}--fp8-scaling_current.jsonl")" ] ||
    fail "$LAST: fp8.jsonl has not the numbers of train --precision fp8 --fp8-scaling current --steps 3"
run bench step $GPT --precisions bf16,fp8 --steps 2 --untimed 0
expect_rc 0
expect_match "$OUT" '^bf16 +[0-9]'
expect_match "$OUT" '^fp8 +[0-9]'
run bench step $GPT --precisions fp8 --steps 1 --untimed 0 --fp8-format e4m3 --fp8-scaling current --json
expect_rc 0
expect_json "$OUT" --lines
expect_lines "$OUT" 1
expect_has "$OUT" '"precision":"fp8"'
usage_error "--precisions" "'fp8,fp8'" -- compare $GPT --steps 1 --precisions fp8,fp8

# ---- the GradScaler with FP8: current scaling makes a power-of-two loss scale irrelevant, bit for bit
# (the loss scale shifts every output gradient's amax, and the per-tensor scale shifts back) ----
run train $GPT --steps 6 --precision fp8 --fp8-scaling current --quiet --log "$TMP/ns.jsonl"
expect_rc 0
run train $GPT --steps 6 --precision fp8 --fp8-scaling current --quiet --scaler on --init-scale 1024 \
    --growth-interval 100000 --log "$TMP/sc.jsonl"
expect_rc 0
expect_has "$TMP/sc.jsonl" '"scale":1024'
check
[ "$(grep -o '"loss":[^,]*' "$TMP/ns.jsonl")" = "$(grep -o '"loss":[^,]*' "$TMP/sc.jsonl")" ] ||
    fail "$LAST: a loss scale changed the losses of an FP8 run with current scaling"

# ---- gradients are reduced in fp32, bf16 or fp16, never fp8 ----
usage_error "--reduce-dtype" "'fp8'" "fp32, bf16, fp16" -- train $GPT --steps 2 --reduce-dtype fp8
usage_error "--reduce-dtype" "'fp8'" -- train $GPT --steps 2 --precision fp8 --reduce-dtype fp8

cli_summary
