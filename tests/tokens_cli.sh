#!/bin/sh
# tokens_cli.sh AMPC MAKE_TOKENS: token files through `ampc train` (--data tokens:TRAIN[,VAL], --vocab).
#  - A small GPT trains on a raw uint16 training file and an llm.c validation file; the first line names
#    the data (files, formats, token counts, largest id, vocabulary); inspect shows the vocabulary and the
#    token count; one file alone validates on its last 10%.
#  - Resume is exact: 24 steps in one run and 12 + --resume + 12 give the same checkpoint file byte for byte
#    and the same JSONL step records (timing aside), across the epoch boundary, in bf16 and fp16.
#  - Other token files are refused on --resume unless --allow-data-change; another vocabulary is refused
#    with both named and what would resume.
#  - Usage errors exit 2 (a bad spec, --vocab outside its range, below 256 for bytes, too small for the
#    ids, on another model), bad files exit 1 (odd length, empty, llm.c headers of another format or with
#    a wrong count, missing), each with one line naming the thing.
#  - The guard device gives the CPU's bits on the same flow.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, records, strip_timing, ...
AMPC=${1:?usage: tokens_cli.sh AMPC MAKE_TOKENS}
MK=${2:?usage: tokens_cli.sh AMPC MAKE_TOKENS}
test_tmpdir tokens_cli
DIR=$TEST_TMP
test_kernel_cache
"$AMPC" info >/dev/null || fail_now "ampc info"

# 3000 training tokens (raw), 600 validation tokens (llm.c), largest id 300 -> vocab 320. With context 16
# the training file has 187 windows: 23 steps of batch 8 an epoch, so steps 12..23 cross into epoch 1.
"$MK" "$DIR/train.bin" raw 3000 300 && "$MK" "$DIR/val.bin" llmc 600 300 && "$MK" "$DIR/one.bin" llmc 3000 300 ||
    fail_now "make_tokens"
[ "$(wc -c <"$DIR/train.bin")" -eq 6000 ] && [ "$(wc -c <"$DIR/val.bin")" -eq 2224 ] || fail_now "token file sizes"
DATA="tokens:$DIR/train.bin,$DIR/val.bin"
GPT="--layers 1 --d-model 32 --heads 2 --context 16 --batch 8 --threads 2"
COMMON="--data $DATA $GPT --quiet --lr 3e-3"

# ---- a run names its data; inspect shows it ----
# shellcheck disable=SC2086
if "$AMPC" train --data "$DATA" $GPT --steps 2 >"$DIR/first.out" 2>"$DIR/first.err"; then
    want="ampc train: data: tokens: $DIR/train.bin (raw uint16, 3000 tokens) for training, $DIR/val.bin (llm.c, 600"
    want="$want tokens) for validation; largest id 300, vocab 320 (largest id + 1, rounded up to a multiple of 64)"
    [ "$(head -n 1 "$DIR/first.err")" = "$want" ] && ok "the first line names the data" ||
        fail "first line: $(head -n 1 "$DIR/first.err")"
else
    fail "train on token files: $(cat "$DIR/first.err")"
fi
# shellcheck disable=SC2086
"$AMPC" train --data "tokens:$DIR/one.bin" $GPT --steps 2 2>"$DIR/one.err" >/dev/null &&
    grep -q "one.bin (llm.c, 3000 tokens, the last 300 for validation); largest id 300, vocab 320" "$DIR/one.err" &&
    grep -q "eval loss" "$DIR/one.err" && ok "one file: the last 10% validates" || fail "one file: $(cat "$DIR/one.err")"

# ---- exact resume ----
check_resume bf16
check_resume fp16 --init-scale 1e6 --growth-interval 3
A="$DIR/bf16/a/x.st"
out=$("$AMPC" inspect "$A")
for want in "context 16, vocab 320)" "trained on: tokens:$DIR/train.bin,$DIR/val.bin, 7200 bytes (3600 tokens)" \
    "data:       epoch 1"; do
    case "$out" in *"$want"*) ;; *) fail "inspect lacks '$want'" ;; esac
done
ok "inspect names the token data"

# expect STATUS NEEDLE CMD...: exit status and one stderr line containing NEEDLE
expect() {
    st=$1 needle=$2
    shift 2
    "$@" >/dev/null 2>"$DIR/err"
    rc=$?
    if [ $rc -eq "$st" ] && [ "$(wc -l <"$DIR/err")" -eq 1 ] && grep -qF -- "$needle" "$DIR/err"; then
        ok "exit $st: $(cat "$DIR/err")"
    else fail "$* -> exit $rc (want $st), stderr: $(cat "$DIR/err")"; fi
}

# ---- other data and other vocabularies on --resume ----
"$MK" "$DIR/val2.bin" llmc 500 300 || fail_now "make_tokens"
expect 1 "pass --allow-data-change" "$AMPC" train --resume "$A" --data "tokens:$DIR/train.bin,$DIR/val2.bin" --steps 26 --quiet
"$AMPC" train --resume "$A" --data "tokens:$DIR/train.bin,$DIR/val2.bin" --steps 26 --quiet --allow-data-change \
    --checkpoint "$DIR/other.st" >/dev/null 2>&1 && ok "--allow-data-change resumes on other token files" ||
    fail "--allow-data-change on other token files"
expect 1 "trained with a vocabulary of 320 ids, this run has 384 (--vocab); pass --vocab 320" \
    "$AMPC" train --resume "$A" --vocab 384 --steps 26 --quiet
"$MK" "$DIR/big.bin" raw 3000 400 || fail_now "make_tokens"
# (--allow-data-change says first that the data differs, then the vocabulary stops it)
"$AMPC" train --resume "$A" --data "tokens:$DIR/big.bin" --allow-data-change --steps 26 --quiet >/dev/null 2>"$DIR/err"
rc=$?
last=$(tail -n 1 "$DIR/err")
case "$rc:$last" in
1:*"this run has 448 (the default for this token data"*"the data has ids up to 400, which it cannot hold") ok "exit 1: $last" ;;
*) fail "resume on data with larger ids -> exit $rc: $(cat "$DIR/err")" ;;
esac

# ---- usage errors (2) and bad files (1): one line each ----
printf 'hello' >"$DIR/t.txt"
printf 'abc' >"$DIR/odd.bin"
: >"$DIR/empty.bin"
"$MK" "$DIR/llama3.bin" llmc 100 300 20240801 7 100 && "$MK" "$DIR/count.bin" llmc 100 300 20240520 1 99 &&
    "$MK" "$DIR/v2.bin" llmc 100 300 20240520 2 100 || fail_now "make_tokens"
# shellcheck disable=SC2086
{
    expect 2 "tokens:TRAIN[,VAL]" "$AMPC" train --data tokens: $GPT
    expect 2 "tokens:TRAIN[,VAL]" "$AMPC" train --data "tokens:$DIR/train.bin,$DIR/val.bin,$DIR/val.bin" $GPT
    expect 2 "--vocab" "$AMPC" train --data "$DATA" --vocab 1 $GPT
    expect 2 "byte-level data has 256 ids" "$AMPC" train --data "text:$DIR/t.txt" --vocab 200 $GPT
    expect 2 "train.bin: token 49 (byte offset 98) is 300, outside vocab 256" "$AMPC" train --data "$DATA" --vocab 256 $GPT
    expect 2 "--vocab applies to --model gpt" "$AMPC" train --model mlp --vocab 300
    expect 1 "odd.bin has an odd length, 3 bytes" "$AMPC" train --data "tokens:$DIR/odd.bin" $GPT
    expect 1 "empty.bin is empty" "$AMPC" train --data "tokens:$DIR/train.bin,$DIR/empty.bin" $GPT
    expect 1 "llama3.bin is an llm.c token file in Llama 3's format" "$AMPC" train --data "tokens:$DIR/llama3.bin" $GPT
    expect 1 "count.bin: its llm.c header counts 99 tokens" "$AMPC" train --data "tokens:$DIR/count.bin" $GPT
    expect 1 "v2.bin is an llm.c token file of version 2" "$AMPC" train --data "tokens:$DIR/v2.bin" $GPT
    expect 1 "nothing.bin" "$AMPC" train --data "tokens:$DIR/nothing.bin" $GPT
    expect 2 "--vocab" "$AMPC" compare --data "$DATA" --vocab 100 $GPT
}
for cmd in train compare doctor "bench step"; do
    # shellcheck disable=SC2086
    "$AMPC" $cmd --help | grep -q -- "--vocab V" || fail "ampc $cmd --help lacks --vocab"
done

# ---- compare and the guard device on token data ----
# shellcheck disable=SC2086
"$AMPC" compare --data "$DATA" $GPT --steps 3 --precisions fp32,bf16 --quiet >"$DIR/cmp.out" 2>&1 &&
    grep -q '^bf16 ' "$DIR/cmp.out" && ok "compare on token data" || fail "compare: $(cat "$DIR/cmp.out")"
for dev in cpu guard; do
    # shellcheck disable=SC2086
    "$AMPC" train --data "$DATA" $GPT --steps 6 --precision bf16 --device "$dev" --log "$DIR/$dev.jsonl" --quiet \
        >/dev/null 2>"$DIR/$dev.err" || fail "--device $dev: $(cat "$DIR/$dev.err")"
    strip_timing <"$DIR/$dev.jsonl" | sed -E 's/,"seconds":[^,}]*//' >"$DIR/$dev.s"
done
[ "$(lines "$DIR/cpu.s")" -eq 7 ] && cmp -s "$DIR/cpu.s" "$DIR/guard.s" &&
    ok "--device guard gives the CPU's bits on token data" || fail "guard and cpu logs differ on token data"

# ---- sampling from a model trained on token files: ids out, the same ids for the same seed ----
"$AMPC" sample --checkpoint "$A" --prompt-ids 1,2,3 --tokens 12 --seed 5 >"$DIR/s1" 2>"$DIR/s.err" &&
    "$AMPC" sample --checkpoint "$A" --prompt-ids 1,2,3 --tokens 12 --seed 5 >"$DIR/s2" 2>>"$DIR/s.err" &&
    cmp -s "$DIR/s1" "$DIR/s2" && [ "$(tr ' ' '\n' <"$DIR/s1" | grep -c '^[0-9][0-9]*$')" -eq 12 ] &&
    [ "$(tr ' ' '\n' <"$DIR/s1" | awk '$1 >= 320' | wc -l)" -eq 0 ] &&
    ok "sample on a token checkpoint: 12 ids below the vocabulary, the same for the same seed" ||
    fail "sample on a token checkpoint: $(cat "$DIR/s1" "$DIR/s.err")"

test_summary
