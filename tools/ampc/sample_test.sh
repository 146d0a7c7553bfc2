#!/bin/sh
# sample_test.sh: `ampc sample` from the outside. A small byte-level GPT learns the built-in arithmetic
# lines for a few seconds and is checkpointed; greedy sampling continues '12+34=' with digits; a seed
# prints the same text twice, on one thread or two and on the guard device (which also proves the logits
# reach the host through the device's copy alone), another seed other text; --top-k 1 is greedy. A model
# with more outputs than bytes (--vocab 320, trained on the same bytes) takes --prompt-ids, prints ids, or
# text through a tokenizer file in llm.c's format (written here, byte by byte). Every bad input (no or a
# missing, corrupt, foreign or non-GPT checkpoint; --tokens, --temperature, --top-k out of range; ids past
# the vocabulary; a tokenizer file with a bad header or truncated entries) is one line and no text; a
# prompt longer than the context is cut with a note.
#
# usage: sample_test.sh PATH/TO/ampc [PATH/TO/ampc_json_check]
set -u

. "$(dirname "$0")/cli_lib.sh" # AMPC, TMP, OUT, ERR, run, expect_*
test_kernel_cache             # the trained checkpoint's kernels are the ones every sample below runs

# one_line_error STATUS TEXT ARGS...: the status, nothing on stdout, one stderr line holding TEXT.
one_line_error() {
    st=$1 text=$2
    shift 2
    run "$@"
    expect_rc "$st"
    expect_lines "$OUT" 0
    expect_lines "$ERR" 1
    expect_has "$ERR" "$text"
}

# same FILE_A FILE_B WHAT: one check that two outputs are byte for byte the same.
same() {
    check
    cmp -s "$1" "$2" || fail "$3: '$(head -c 200 "$1")' and '$(head -c 200 "$2")' differ"
}

# terminal_safe: $OUT is valid UTF-8 without control bytes but line feeds and tabs (what a terminal shows as
# text and nothing else): the model's other bytes must have come out as \xNN.
terminal_safe() {
    check
    iconv -f UTF-8 -t UTF-8 <"$OUT" >/dev/null 2>&1 || fail "$LAST: the text is not valid UTF-8"
    check
    [ "$(LC_ALL=C tr -d '\n\t\040-\176\200-\377' <"$OUT" | wc -c)" -eq 0 ] ||
        fail "$LAST: raw control bytes in the text: $(od -c "$OUT" | head -n 3)"
}

SIZE="--layers 2 --d-model 64 --heads 4 --context 64 --batch 8 --steps 300 --precision fp32 --eval-batches 4 --quiet"
CK=$TMP/arith.st
# shellcheck disable=SC2086 # $SIZE is a list of options
run train $SIZE --checkpoint "$CK"
expect_rc 0
[ -s "$CK" ] || fail_now "ampc train wrote no checkpoint: $(cat "$ERR")"

# ---- help ----
run sample --help
expect_rc 0
expect_has "$OUT" "Usage: ampc sample --checkpoint FILE"
expect_has "$OUT" "--top-k"
expect_lines "$ERR" 0

# ---- the byte-level model continues the arithmetic ----
run sample --checkpoint "$CK" --prompt '12+34=' --tokens 4 --temperature 0
expect_rc 0
expect_lines "$ERR" 0
check
head -n 1 "$OUT" | grep -Eq '^[0-9]+$' || fail "$LAST: '$(cat "$OUT")' does not continue with digits"
cp "$OUT" "$TMP/greedy"
run sample --checkpoint "$CK" --prompt '12+34=' --tokens 4 --top-k 1 --seed 9
same "$OUT" "$TMP/greedy" "--top-k 1 against --temperature 0"

run sample --checkpoint "$CK" --prompt '7*8=' --tokens 60 --seed 5
expect_rc 0
cp "$OUT" "$TMP/seed5"
check
[ -s "$TMP/seed5" ] || fail "$LAST: no text"
run sample --checkpoint "$CK" --prompt '7*8=' --tokens 60 --seed 5
same "$OUT" "$TMP/seed5" "the same seed twice"
run sample --checkpoint "$CK" --prompt '7*8=' --tokens 60 --seed 5 --threads 1
same "$OUT" "$TMP/seed5" "one thread against all"
run sample --checkpoint "$CK" --prompt '7*8=' --tokens 60 --seed 5 --device guard
expect_rc 0
same "$OUT" "$TMP/seed5" "--device guard against cpu"
run sample --checkpoint "$CK" --prompt '7*8=' --tokens 60 --seed 6
expect_rc 0
check
! cmp -s "$OUT" "$TMP/seed5" || fail "seeds 5 and 6 gave the same text: $(cat "$OUT")"
run sample --checkpoint "$CK" --tokens 30 --temperature 0.7 --top-k 5
expect_rc 0
expect_lines "$ERR" 0
terminal_safe

# a high temperature draws nearly every byte value: the control bytes and broken UTF-8 come out escaped
run sample --checkpoint "$CK" --tokens 400 --temperature 50 --seed 3
expect_rc 0
terminal_safe
check
LC_ALL=C grep -q '\\x[0-9a-f][0-9a-f]' "$OUT" || fail "$LAST: no \\xNN escape in $(head -c 300 "$OUT")"

# a model kept in BF16 runs under BF16 autocast: the same text on both devices
run train --layers 1 --d-model 32 --heads 2 --context 16 --batch 4 --steps 20 --param-dtype bf16 --quiet \
    --checkpoint "$TMP/bf16.st"
expect_rc 0
run sample --checkpoint "$TMP/bf16.st" --prompt '1+1=' --tokens 20 --seed 4
expect_rc 0
expect_lines "$ERR" 0
cp "$OUT" "$TMP/bf16_cpu"
run sample --checkpoint "$TMP/bf16.st" --prompt '1+1=' --tokens 20 --seed 4 --device guard
same "$OUT" "$TMP/bf16_cpu" "a BF16 model on --device guard against cpu"

# ---- a prompt longer than the context keeps its end ----
long=$(printf '%080d' 0)
run sample --checkpoint "$CK" --prompt "1+2=3 $long" --tokens 2 --temperature 0
expect_rc 0
expect_lines "$ERR" 1
expect_has "$ERR" "the prompt is 86 tokens, longer than the model's context of 64; it keeps its last 64"
check
[ -s "$OUT" ] || fail "$LAST: no text"

# ---- bad input: one line, no text ----
one_line_error 2 "--checkpoint FILE is required" sample --prompt x
one_line_error 1 "$TMP/none.st" sample --checkpoint "$TMP/none.st"
printf 'not a checkpoint' >"$TMP/text.st"
one_line_error 1 "text.st: not a safetensors file" sample --checkpoint "$TMP/text.st"
cp "$CK" "$TMP/corrupt.st"
size=$(wc -c <"$CK")
printf 'XXXX' | dd of="$TMP/corrupt.st" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
one_line_error 1 "corrupt.st" sample --checkpoint "$TMP/corrupt.st"
expect_has "$ERR" "checksum"
run train --model simple --steps 2 --quiet --checkpoint "$TMP/simple.st"
expect_rc 0
one_line_error 1 "holds a simple model; ampc sample continues text with a GPT" sample --checkpoint "$TMP/simple.st"
usage_error "'0'" "--tokens; expected an integer in 1.." -- sample --checkpoint "$CK" --tokens 0
usage_error "'-3'" "--tokens; expected an integer in 1.." -- sample --checkpoint "$CK" --tokens -3
usage_error "'-0.5'" "--temperature; expected a number in 0.." -- sample --checkpoint "$CK" --temperature -0.5
usage_error "'-1'" "--top-k; expected an integer in 0.." -- sample --checkpoint "$CK" --top-k -1
usage_error "--prompt and --prompt-ids both given" -- sample --checkpoint "$CK" --prompt a --prompt-ids 1
usage_error "id 256 is not below the model's vocabulary; accepted: ids 0..255" -- \
    sample --checkpoint "$CK" --prompt-ids 49,256
for bad in '1,,2' 'a' '1,' '-1' ' 1'; do
    usage_error "--prompt-ids" "comma-separated token ids" -- sample --checkpoint "$CK" --prompt-ids "$bad"
done
usage_error "'--temp'" "--temperature" -- sample --checkpoint "$CK" --temp 1

# ---- a token model: more outputs than bytes, ids in and out, text through llm.c's tokenizer file ----
TOK=$TMP/tok320.st
# shellcheck disable=SC2086
run train $SIZE --vocab 320 --checkpoint "$TOK"
expect_rc 0
run inspect "$TOK"
expect_has "$OUT" "vocab 320"
usage_error "--prompt takes text for a byte-level model (vocabulary 256); this model's vocabulary is 320" \
    "--prompt-ids" -- sample --checkpoint "$TOK" --prompt '12+34='
usage_error "needs a first token" -- sample --checkpoint "$TOK"
usage_error "id 320 is not below the model's vocabulary; accepted: ids 0..319" -- \
    sample --checkpoint "$TOK" --prompt-ids 320
IDS=49,50,43,51,52,61 # '12+34='
run sample --checkpoint "$TOK" --prompt-ids $IDS --tokens 6 --temperature 0
expect_rc 0
expect_lines "$ERR" 0
expect_match "$OUT" '^[0-9]+( [0-9]+){5}$'
cp "$OUT" "$TMP/ids"

# u32 N: N as 4 bytes, little-endian
u32() {
    # shellcheck disable=SC2059 # the format is the bytes
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"
}
# header MAGIC VERSION VOCAB EOT: llm.c's tokenizer header, 256 uint32
header() {
    u32 "$1"
    u32 "$2"
    u32 "$3"
    u32 "$4"
    head -c 1008 /dev/zero
}
# the 320 entries: token i < 256 is the byte i, the others "<tI>"
i=0
while [ $i -lt 320 ]; do
    if [ $i -lt 256 ]; then
        # shellcheck disable=SC2059
        printf "\\001\\$(printf '%03o' $i)"
    else
        s="<t$i>"
        # shellcheck disable=SC2059
        printf "\\$(printf '%03o' ${#s})%s" "$s"
    fi
    i=$((i + 1))
done >"$TMP/entries"
tokenizer() { header "$@" && cat "$TMP/entries"; }
tokenizer 20240328 2 320 256 >"$TMP/tok.bin"
run sample --checkpoint "$TOK" --prompt-ids $IDS --tokens 6 --temperature 0 --tokenizer "$TMP/tok.bin"
expect_rc 0
expect_lines "$ERR" 0
for id in $(cat "$TMP/ids"); do
    # shellcheck disable=SC2059
    printf "\\$(printf '%03o' "$id")"
done >"$TMP/decoded"
check
[ "$(cat "$OUT")" = "$(cat "$TMP/decoded")" ] || fail "$LAST: '$(cat "$OUT")', the ids decode to '$(cat "$TMP/decoded")'"
# without a prompt, a version-2 file's end-of-text token starts the text
run sample --checkpoint "$TOK" --tokens 8 --tokenizer "$TMP/tok.bin"
expect_rc 0
expect_lines "$ERR" 0
# the bad tokenizer files: each one line, before anything is generated
tokenizer 20240329 2 320 256 >"$TMP/magic.bin"
one_line_error 1 "magic 20240329 is not llm.c's tokenizer file's (20240328)" \
    sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/magic.bin"
tokenizer 20240328 3 320 256 >"$TMP/version.bin"
one_line_error 1 "version 3; expected 1 or 2" sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/version.bin"
tokenizer 20240328 2 320 320 >"$TMP/eot.bin"
one_line_error 1 "end-of-text token 320 is not below the vocabulary size 320" \
    sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/eot.bin"
head -c 500 "$TMP/tok.bin" >"$TMP/short.bin"
one_line_error 1 "shorter than the 1024-byte header" sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/short.bin"
head -c $(($(wc -c <"$TMP/tok.bin") - 3)) "$TMP/tok.bin" >"$TMP/cut.bin"
one_line_error 1 "token 319 of 320 is truncated" sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/cut.bin"
head -c $((1024 + 2 * 200)) "$TMP/tok.bin" >"$TMP/missing.bin"
one_line_error 1 "token 200 of 320 is missing" sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/missing.bin"
{ head -c 1024 "$TMP/tok.bin"; printf '\001a\000'; } >"$TMP/empty.bin"
one_line_error 1 "token 1 of 320 is empty" sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/empty.bin"
one_line_error 1 "--tokenizer $TMP/nofile.bin: cannot open" \
    sample --checkpoint "$TOK" --prompt-ids 1 --tokenizer "$TMP/nofile.bin"

cli_summary
