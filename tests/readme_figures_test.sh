#!/bin/sh
# readme_figures_test.sh AMPC EXAMPLES_DIR: bench/readme_figures.sh, the checker of the README's figures,
# checks what it should and only that, on copies of README.md: the real blocks pass; a changed figure is
# a drift, shown with the README's line against the build's; a changed timing field, CPU name or date is
# not; a block without a recipe, or a recipe without its block, fails; --update writes a block back as
# the recipe makes it. Cheap recipes only (formats, simple_amp, sr: a few seconds); CI runs the real
# check (`bench/readme_figures.sh --short`).
. "$(dirname "$0")/test_lib.sh"
AMPC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
EXAMPLES=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCRIPT="$ROOT/bench/readme_figures.sh"
test_tmpdir readme_figures
R="$TEST_TMP/README.md"
figures() { AMPC="$AMPC" EXAMPLES="$EXAMPLES" README="$R" sh "$SCRIPT" "$@" >"$TEST_TMP/out" 2>&1; }

# ---- the README as it is ------------------------------------------------------------------------------
cp "$ROOT/README.md" "$R"
if figures formats simple_amp && grep -q '^ok  *formats' "$TEST_TMP/out" && grep -q '^ok  *simple_amp' "$TEST_TMP/out"; then
    ok "the README's formats and simple_amp blocks are what this build prints"
else fail "the README's blocks as they are: $(cat "$TEST_TMP/out")"; fi
if figures --list && [ "$(grep -c 'level' "$TEST_TMP/out")" -ge 10 ]; then ok "--list names the recipes"
else fail "--list: $(cat "$TEST_TMP/out")"; fi

# ---- a changed figure is a drift; the diff shows both lines -------------------------------------------
sed 's/^FP16       6\.55040e+04/FP16       6.55050e+04/' "$ROOT/README.md" >"$R"
if cmp -s "$R" "$ROOT/README.md"; then fail "the formats block has no FP16 row to change"
elif ! figures formats && grep -q '^DRIFT formats' "$TEST_TMP/out" && grep -q '^-FP16 *6.55050e+04' "$TEST_TMP/out" &&
    grep -q '^+FP16 *6.55040e+04' "$TEST_TMP/out"; then
    ok "a changed FP16 max finite is a drift, with both lines shown"
else fail "a changed figure was not caught: $(cat "$TEST_TMP/out")"; fi

# ---- timing fields, the CPU's name and the date are the machine's: not compared -------------------------
awk '/^<!-- readme_figures: sr -->$/ { on = 1 } on && /^fp32 / { $9 = "1"; $10 = "99.99"; $11 = "9.99x" }
     on && /^<sub>Made by/ { sub(/ on [^,]*,/, " on Some Other CPU,"); sub(/20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]/, "1999-01-01") }
     /^<!-- \/readme_figures -->$/ { on = 0 } { print }' "$ROOT/README.md" >"$R"
if cmp -s "$R" "$ROOT/README.md"; then fail "the sr block has no fp32 row to change"
elif figures sr && grep -q '^ok  *sr' "$TEST_TMP/out"; then ok "other timings, CPU and date in the sr block: still ok"
else fail "a timing field was compared: $(cat "$TEST_TMP/out")"; fi
sed '/^<!-- readme_figures: sr -->$/,/^<!-- \/readme_figures -->$/ s/^\(bf16  *\)2\.44/\13.44/' "$ROOT/README.md" >"$R"
if cmp -s "$R" "$ROOT/README.md"; then fail "the sr block has no bf16 row to change"
elif ! figures sr && grep -q '^DRIFT sr' "$TEST_TMP/out"; then ok "a changed bf16 loss in the sr block is a drift"
else fail "a changed loss was not caught: $(cat "$TEST_TMP/out")"; fi

# ---- blocks and recipes must pair up ------------------------------------------------------------------
{ cat "$ROOT/README.md"; printf '<!-- readme_figures: nobody -->\n<!-- /readme_figures -->\n'; } >"$R"
if ! figures formats && grep -q 'block nobody that no recipe makes' "$TEST_TMP/out"; then ok "a block without a recipe fails"
else fail "a block without a recipe: $(cat "$TEST_TMP/out")"; fi
sed '/^<!-- readme_figures: formats -->$/,/^<!-- \/readme_figures -->$/d' "$ROOT/README.md" >"$R"
if ! figures formats && grep -q 'has no block formats' "$TEST_TMP/out"; then ok "a recipe without its block fails"
else fail "a recipe without its block: $(cat "$TEST_TMP/out")"; fi

# ---- --update writes the block the recipe makes ---------------------------------------------------------
sed '/^<!-- readme_figures: formats -->$/,/^<!-- \/readme_figures -->$/ { /^<!--/!d }' "$ROOT/README.md" >"$R"
if figures --update formats && grep -q '^wrote formats' "$TEST_TMP/out" && cmp -s "$R" "$ROOT/README.md"; then
    ok "--update writes the emptied formats block back as it was"
else fail "--update: $(cat "$TEST_TMP/out"; diff "$ROOT/README.md" "$R" | head -5)"; fi
if ! AMPC="$AMPC" README="$R" sh "$SCRIPT" --bogus >"$TEST_TMP/out" 2>&1 && grep -q 'unknown option --bogus' "$TEST_TMP/out"; then
    ok "an unknown option is refused by name"
else fail "an unknown option: $(cat "$TEST_TMP/out")"; fi
test_summary
