# shellcheck shell=sh
# cli_lib.sh: what the CLI test scripts share (cli_test.sh, doctor_test.sh, fp8_test.sh), sourced first
# thing with the script's arguments (PATH/TO/ampc [PATH/TO/ampc_json_check]). On top of the test
# scripts' prologue (tests/test_lib.sh: fail, lines, the temporary folder): AMPC, JSON_CHECK, a TMP
# folder removed on exit, OUT and ERR for run's output, AMPC_ISA unset; then the checks. Each expect_*
# counts one check and reports a failure with the command that ran last; the script ends with
# cli_summary.
. "$(dirname "$0")/../../tests/test_lib.sh"
CLI_NAME=$(basename "$0")
AMPC=${1:?usage: $CLI_NAME PATH/TO/ampc [PATH/TO/ampc_json_check]}
JSON_CHECK=${2:-$(dirname "$AMPC")/tools/ampc/ampc_json_check}
test_tmpdir "${CLI_NAME%.sh}"
TMP=$TEST_TMP
OUT=$TMP/out
ERR=$TMP/err
[ -x "$AMPC" ] || { echo "$CLI_NAME: $AMPC is not an executable"; exit 1; }
[ -x "$JSON_CHECK" ] || { echo "$CLI_NAME: $JSON_CHECK is not an executable"; exit 1; }
unset AMPC_ISA
checks=0

# numbers FILE: a JSONL log without its timing, memory and label fields (what a repeated run must repeat)
numbers() { sed -e 's/"tokens_per_s":[^,}]*//' -e 's/"seconds":[^,}]*//' -e 's/"peak_bytes":[^,}]*//' \
                -e 's/"precision":"[^"]*"//' "$1"; }

# run [AMPC_X=VALUE] ARGS...: runs ampc, leaving stdout in $OUT, stderr in $ERR and the status in $RC.
run() {
    case ${1:-} in
    AMPC_*=*) var=$1; shift; env "$var" "$AMPC" "$@" >"$OUT" 2>"$ERR"; RC=$? ;;
    *) "$AMPC" "$@" >"$OUT" 2>"$ERR"; RC=$? ;;
    esac
    LAST="ampc $*"
}

check() { checks=$((checks + 1)); }   # one more check: the caller tests and calls fail

expect_rc() {
    checks=$((checks + 1))
    [ "$RC" -eq "$1" ] || fail "$LAST: exit status $RC, expected $1 (stderr: $(head -c 300 "$ERR"))"
}

expect_lines() {   # FILE N
    checks=$((checks + 1))
    n=$(lines "$1")
    [ "$n" -eq "$2" ] || fail "$LAST: $(basename "$1") has $n lines, expected $2"
}

expect_has() {     # FILE TEXT (fixed string)
    checks=$((checks + 1))
    grep -F -q -e "$2" "$1" || fail "$LAST: $(basename "$1") lacks '$2'"
}

expect_match() {   # FILE REGEX (extended)
    checks=$((checks + 1))
    grep -E -q -e "$2" "$1" || fail "$LAST: $(basename "$1") has no line matching /$2/"
}

expect_exact_err() {   # the one stderr line, verbatim
    checks=$((checks + 1))
    [ "$(cat "$ERR")" = "$1" ] || fail "$LAST: stderr is '$(cat "$ERR")', expected '$1'"
}

expect_json() {    # FILE [--lines]
    checks=$((checks + 1))
    # shellcheck disable=SC2086 # an absent mode must vanish, not become an empty argument
    "$JSON_CHECK" ${2:-} --objects <"$1" 2>"$TMP/jerr" || fail "$LAST: invalid JSON: $(cat "$TMP/jerr")"
}

expect_file() {    # FILE: exists and is not empty
    checks=$((checks + 1))
    [ -s "$1" ] || fail "$LAST: $1 missing or empty"
}

# usage_error TEXT... -- ARGS...: status 2, nothing on stdout, one stderr line holding every text.
usage_error() {
    texts=$TMP/texts
    : >"$texts"
    while [ "$1" != "--" ]; do printf '%s\n' "$1" >>"$texts"; shift; done
    shift
    run "$@"
    expect_rc 2
    expect_lines "$OUT" 0
    expect_lines "$ERR" 1
    while IFS= read -r t; do expect_has "$ERR" "$t"; done <"$texts"
}

# cli_summary: the count; exits 0 when every check passed, 1 otherwise.
cli_summary() {
    if [ "$FAILS" -ne 0 ]; then
        printf '%d of %d checks failed\n' "$FAILS" "$checks"
        exit 1
    fi
    printf 'all %d checks passed\n' "$checks"
    exit 0
}
