#!/bin/sh
# checkpoint_cli.sh AMPC JSON_CHECK: checkpoints through `ampc train` and `ampc inspect`.
#  - Resume is exact: for fp32, bf16 and fp16 (GradScaler), 2N steps in one run and N steps + --resume +
#    N steps give the same checkpoint file byte for byte (with the same checkpoint settings: a checkpoint
#    records its file name and cadence, so the runs save to x.st in folders of their own) and the same
#    JSONL step records (all fields but the timing ones and peak_bytes); the second half crosses an epoch
#    boundary, and the fp16 one a skipped step (checked from the log). A periodic save changes nothing
#    but the recorded cadence.
#  - --keep N keeps the newest N numbered checkpoints and FILE is the newest.
#  - Bad input: missing, foreign, corrupt or truncated files, another model shape, flags without
#    --checkpoint, an unwritable directory: one clear line, the right exit status, nothing lost.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, records, content, ...
AMPC=$1
JSON_CHECK=$2
test_tmpdir ckpt_cli
DIR=$TEST_TMP
test_kernel_cache
"$AMPC" info > /dev/null || fail_now "ampc info"

# A small corpus: 2,900 bytes of text -> with context 16 the training split has 163 windows, 20 steps of
# batch 8 per epoch, so steps 12..24 cross the epoch boundary at step 20.
i=0
: > "$DIR/corpus.txt"
while [ $i -lt 100 ]; do echo "line $i: the quick brown fox $((i * 7 % 13))" >> "$DIR/corpus.txt"; i=$((i + 1)); done
head -c 2900 "$DIR/corpus.txt" > "$DIR/c.txt"
COMMON="--data text:$DIR/c.txt --layers 1 --d-model 32 --heads 2 --context 16 --batch 8 --threads 2 --quiet
        --dropout 0.1 --lr 3e-3"

check_resume fp32
check_resume bf16
check_resume fp16 --init-scale 1e7 --growth-interval 2
if grep -v '"step":[0-9],' "$DIR/fp16/a.jsonl" | grep -v '"step":1[01],' | grep -q '"skipped":true'; then
    ok "fp16: the resumed half holds a skipped step"
else
    fail "fp16: no skipped step after step 12 (the test does not cover a resume across a skip)"
fi
# the simple model: no data loader, an RNG and a scaler
mkdir -p "$DIR/s1" "$DIR/s2"
"$AMPC" train --model simple --precision fp16 --steps 10 --checkpoint "$DIR/s1/s.st" --checkpoint-every 5 --keep 2 \
    --quiet > /dev/null &&
"$AMPC" train --resume "$DIR/s1/s-step00000005.st" --checkpoint "$DIR/s2/s.st" --quiet > /dev/null &&
cmp -s "$DIR/s1/s.st" "$DIR/s2/s.st" && ok "simple: resume exact" || fail "simple: resume"

# --keep: the newest N numbered files survive, FILE is the newest
d="$DIR/keep"; mkdir -p "$d"
# shellcheck disable=SC2086
"$AMPC" train $COMMON --steps 10 --checkpoint "$d/k.safetensors" --checkpoint-every 3 --keep 2 > /dev/null
got=$(cd "$d" && ls | tr '\n' ' ')
[ "$got" = "k-step00000009.safetensors k-step00000010.safetensors k.safetensors " ] && ok "--keep 2: $got" ||
    fail "--keep 2 left: $got"
cmp -s "$d/k.safetensors" "$d/k-step00000010.safetensors" || fail "--keep: FILE is not the newest"

# a run length on the command line replaces the recorded one (--epochs 1 = 20 steps, then --steps 25)
# shellcheck disable=SC2086
"$AMPC" train $COMMON --epochs 1 --checkpoint "$DIR/e.st" > /dev/null &&
"$AMPC" train --resume "$DIR/e.st" --steps 25 --checkpoint "$DIR/e2.st" --quiet > /dev/null &&
"$AMPC" inspect "$DIR/e2.st" | grep -q '^step:       25$' && ok "--resume --steps 25 extends an --epochs 1 run" ||
    fail "--resume with a new run length"

# ampc inspect
out=$("$AMPC" inspect "$DIR/fp16/a/x.st") || fail "inspect exit status"
for want in "ampc checkpoint, format version 1" "step:       24" "scaler:     enabled" "optimizer:  adamw" \
            "data:       epoch 1" "options:    --data text:" "optim.wte.weight.exp_avg_sq" "blocks.0.attn.qkv.weight"; do
    case "$out" in *"$want"*) ;; *) fail "inspect output lacks '$want'" ;; esac
done
# the metadata count is the number of entries listed (ampc.kernels one slot a line, under its key); a GPT's
# checkpoint does not list the image models' fields, and says so
n=$(printf '%s\n' "$out" | sed -n 's/^metadata (\([0-9]*\)[;)].*$/\1/p')
listed=$(printf '%s\n' "$out" | sed -n '/^metadata (/,/^$/p' | grep -c '^  [a-z]')
[ -n "$n" ] && [ "$n" -eq "$listed" ] || fail "inspect: metadata ($n) lists $listed entries"
printf '%s\n' "$out" | grep -q '^metadata ([0-9]*; 5 fields that only other kinds of model use not shown):$' &&
    ! printf '%s\n' "$out" | grep -q 'ampc.model.hidden' || fail "inspect: the image models' fields of a GPT"
slots=$("$AMPC" inspect --json "$DIR/fp16/a/x.st" | sed -nE 's/.*"ampc.kernels": *"([^"]*)".*/\1/p' | tr ';' '\n' | grep -c .)
kl=$(printf '%s\n' "$out" | sed -n '/^  ampc.kernels/,/^  [a-z]/p' | grep -cE '(^  ampc.kernels +| {31})[a-z0-9_]+=')
[ "$kl" -eq "$slots" ] || fail "inspect: ampc.kernels not one slot a line ($kl lines, $slots slots)"
"$AMPC" inspect --json "$DIR/fp16/a/x.st" | "$JSON_CHECK" || fail "inspect --json is not valid JSON"
"$AMPC" inspect --json "$DIR/fp16/a/x.st" | grep -q '"ampc.scaler.scale"' || fail "inspect --json lacks the scaler"
ok "inspect"

# expect STATUS NEEDLE CMD...: exit status and one stderr line containing NEEDLE
expect() {
    st=$1 needle=$2; shift 2
    "$@" > /dev/null 2> "$DIR/err"
    rc=$?
    lines=$(wc -l < "$DIR/err")
    if [ $rc -eq "$st" ] && [ "$lines" -eq 1 ] && grep -qF -- "$needle" "$DIR/err"; then ok "exit $st: $(cat "$DIR/err")"
    else fail "$* -> exit $rc (want $st), stderr: $(cat "$DIR/err")"; fi
}
A="$DIR/fp32/a/x.st"
expect 1 "nothing.st" "$AMPC" train --resume "$DIR/nothing.st"
expect 1 "nothing.st" "$AMPC" inspect "$DIR/nothing.st"
expect 2 "--keep needs --checkpoint" "$AMPC" train --keep 3
expect 2 "--checkpoint-every needs --checkpoint" "$AMPC" train --checkpoint-every 3
# shellcheck disable=SC2086
expect 1 "ampc.model.d_model is 32, this model has 64" "$AMPC" train --resume "$A" --d-model 64
printf 'not a safetensors file at all' > "$DIR/junk.st"
expect 1 "junk.st: not a safetensors file" "$AMPC" train --resume "$DIR/junk.st"
expect 1 "junk.st: not a safetensors file" "$AMPC" inspect "$DIR/junk.st"
size=$(wc -c < "$A")
head -c $((size - 7)) "$A" > "$DIR/trunc.st"
expect 1 "trunc.st" "$AMPC" train --resume "$DIR/trunc.st"
# a flipped payload byte
cp "$A" "$DIR/flip.st"
printf '\377' | dd of="$DIR/flip.st" bs=1 seek=$((size - 3)) conv=notrunc 2> /dev/null
expect 1 "checksum" "$AMPC" train --resume "$DIR/flip.st"
expect 1 "checksum" "$AMPC" inspect "$DIR/flip.st"
# an unwritable destination: the error names it, and an existing checkpoint is not touched
cp "$A" "$DIR/keep.st"
# shellcheck disable=SC2086
expect 1 "no/such/dir/x.st" "$AMPC" train $COMMON --steps 2 --checkpoint "$DIR/no/such/dir/x.st"
cmp -s "$A" "$DIR/keep.st" || fail "a failed save changed another file"
# resuming a finished run says so and does nothing: no training, no save, no NaN
cp "$A" "$DIR/done.st"
out=$("$AMPC" train --resume "$DIR/done.st" --checkpoint "$DIR/again.st" 2>&1)
rc=$?
case "$out" in
*"this run is complete after 24 steps; pass --steps N with N > 24"*)
    if [ $rc -ne 0 ] || printf '%s' "$out" | grep -qiw nan; then fail "resume of a finished run: exit $rc, $out"
    elif [ -e "$DIR/again.st" ] || ! cmp -s "$A" "$DIR/done.st"; then fail "resume of a finished run wrote a checkpoint"
    else ok "resume of a finished run: $out"; fi ;;
*) fail "resume of a finished run: $out" ;;
esac
out=$("$AMPC" train --resume "$DIR/done.st" --steps 20 2>&1)
case "$out" in
*"complete after 24 steps (more than the 20 asked for)"*) ok "resume with fewer --steps: $out" ;;
*) fail "resume with fewer --steps: $out" ;;
esac

test_summary
