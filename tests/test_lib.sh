# shellcheck shell=sh
# test_lib.sh: the prologue of the test scripts, sourced first thing from the script's own folder
#     . "$(dirname "$0")/test_lib.sh"
# by every tests/*.sh and, for the CLI scripts, by tools/ampc/cli_lib.sh. It defines once what they all
# did for themselves: the check results (ok, fail counted in FAILS, fail_now, die, skip, test_summary),
# a private temporary folder removed at exit (test_tmpdir), the kernel cache the processes of one script
# share (test_kernel_cache) and the readers of a run's files (lines, records, content, now_ms). POSIX sh
# (the scripts run under dash; kill_resume.sh, a bash script, sources it too); it sets no shell options.

TEST_NAME=$(basename "$0" .sh) # "checkpoint_cli"
FAILS=0

# ---- results ----

# ok MESSAGE / fail MESSAGE: one check passed / failed, "ok: MESSAGE" / "FAIL: MESSAGE" on stdout; fail
# counts it (test_summary reports the count at the end).
ok() { printf 'ok: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*"
    FAILS=$((FAILS + 1))
}
# fail_now MESSAGE: a failure the script cannot go on after: "FAIL: MESSAGE", exit 1.
fail_now() {
    printf 'FAIL: %s\n' "$*"
    exit 1
}
# die MESSAGE: the same, said as "NAME: MESSAGE" on stderr (install_test.sh's form).
die() {
    printf '%s: %s\n' "$TEST_NAME" "$*" >&2
    exit 1
}
# skip MESSAGE: this machine cannot run the test: "SKIP: MESSAGE", exit 77 (the tests' SKIP_RETURN_CODE).
skip() {
    printf 'SKIP: %s\n' "$*"
    exit 77
}
# test_summary [PASSED]: the last line of a script that counts with fail: "NAME: all passed" (or
# "NAME: PASSED") and status 0 when nothing failed, else "NAME: N failed" and exit 1.
test_summary() {
    if [ "$FAILS" -eq 0 ]; then
        echo "$TEST_NAME: ${1:-all passed}"
    else
        echo "$TEST_NAME: $FAILS failed"
        exit 1
    fi
}

# ---- the temporary folder ----

# test_tmpdir TAG: TEST_TMP = a new folder ${TMPDIR:-/tmp}/ampc_TAG_XXXXXX, removed when the script
# exits; HUP, INT and TERM end the script (status 1), so it goes then too. A script with more to undo
# (background processes, network namespaces) redefines test_exit_hook, which runs first.
test_exit_hook() { :; }
test_tmpdir() {
    TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ampc_$1_XXXXXX") || exit 1
    trap 'test_exit_hook; rm -rf "$TEST_TMP"' EXIT
    trap 'exit 1' HUP INT TERM
}

# test_kernel_cache: kernels are chosen by measurement and a run's bits depend on the choice, so every
# process of the script must choose alike: they share one cache (ctest's XDG_CACHE_HOME, else a folder
# in TEST_TMP), which the first fills.
test_kernel_cache() {
    XDG_CACHE_HOME=${XDG_CACHE_HOME:-$TEST_TMP/cache}
    AMPC_KERNEL_CACHE=on
    export XDG_CACHE_HOME AMPC_KERNEL_CACHE
}

# ---- reading a run's files ----

# lines FILE: how many complete lines FILE has (0 when it does not exist yet).
lines() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }
# strip_timing: JSONL records on stdin without the fields that differ between processes (throughput, peak
# memory), on stdout.
strip_timing() { sed -E 's/,"(tokens_per_s|samples_per_s|peak_bytes)":[^,}]*//g'; }
# records LOG: the step records of a JSONL log, timing aside.
records() { grep -v '"final"' "$1" | strip_timing; }
# content CHECKPOINT: `$AMPC inspect --json` of it but its recorded cadence (and the file name inspect
# prints).
content() { "$AMPC" inspect --json "$1" | grep -v '"file"\|"train.checkpoint_every"\|"train.keep"'; }
# now_ms: the wall clock in milliseconds.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# check_resume PRECISION [FLAGS...]: with the caller's $COMMON (train options) in $DIR/PRECISION, 24 steps
# in one run against 12 + --resume + 12 from a periodic checkpoint: the final checkpoint files identical,
# steps 12..23 logged identically, and the periodic checkpoints changing nothing but the cadence.
check_resume() {
    p=$1
    shift
    d="$DIR/$p"
    mkdir -p "$d/a" "$d/b" "$d/c"
    # shellcheck disable=SC2086
    "$AMPC" train $COMMON --precision "$p" "$@" --steps 24 --log "$d/a.jsonl" --checkpoint "$d/a/x.st" >/dev/null ||
        { fail "$p: uninterrupted run"; return; }
    # shellcheck disable=SC2086
    "$AMPC" train $COMMON --precision "$p" "$@" --steps 24 --checkpoint "$d/b/x.st" --checkpoint-every 12 --keep 3 \
        --log "$d/b.jsonl" >/dev/null || { fail "$p: run with periodic checkpoints"; return; }
    [ -f "$d/b/x-step00000012.st" ] || { fail "$p: no numbered checkpoint at step 12"; return; }
    "$AMPC" train --resume "$d/b/x-step00000012.st" --checkpoint "$d/c/x.st" --checkpoint-every 0 --keep 1 \
        --log "$d/c.jsonl" --quiet >/dev/null || { fail "$p: resume"; return; }
    if cmp -s "$d/a/x.st" "$d/c/x.st"; then ok "$p: 24 steps == 12 + resume + 12 (checkpoint files identical)"
    else fail "$p: final checkpoints differ after resume"; fi
    records "$d/a.jsonl" | tail -n 12 >"$d/a.tail"
    records "$d/c.jsonl" >"$d/c.rec"
    if [ "$(wc -l <"$d/c.rec")" -eq 12 ] && cmp -s "$d/a.tail" "$d/c.rec"; then ok "$p: steps 12..23 logged identically"
    else
        fail "$p: resumed log differs"
        diff "$d/a.tail" "$d/c.rec" | head -5
    fi
    [ "$(content "$d/a/x.st")" = "$(content "$d/b/x.st")" ] || fail "$p: periodic checkpoints changed the run"
}
