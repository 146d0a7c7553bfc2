#!/bin/sh
# dist_stop.sh AMPC SLOW_RENAME_SO [MPIRUN]: Ctrl-C under `mpirun -np 2 ampc train`. Open MPI answers a
# SIGINT with SIGCONT to the ranks, SIGTERM odls_base_sigkill_timeout seconds later (default 1) and SIGKILL
# as long again; between SIGTERM and SIGKILL the ranks must finish their step and save. The model is the
# one the defect was found with (GPT 4 x 256, context 128, batch 16, FP8, --shard full, one thread a rank),
# periodic checkpoints every 4 steps, 40 steps in all.
#  1. Twenty interrupts, after 3 to 22 logged steps and a fraction of a second more, so that they land in
#     steps, right after periodic saves and (each rename made 0.1 s slower by the shim) during them: every
#     run prints the stopping line first, then "stopped by SIGTERM after N of 40 steps; the checkpoint is
#     saved to ... (T ms after the signal); resume with: mpirun -np 2 ...", the checkpoint holds step N
#     and the log N records. A machine too slow for the default timeout may instead be killed, but only
#     after the warning of part 2 at its first periodic save, keeping the last periodic checkpoint. Three
#     of them resume to step 40 bit for bit the uninterrupted run (checkpoint file and log records). The
#     number saved and the largest signal-to-file time are printed (stop_ms_max).
#  2. A save slower than the kill timeout (the shim: 0.7 s per rename, two a save; timeout 1 s; periodic
#     saves every 10 steps): the first periodic save prints the warning with the flag to pass; a Ctrl-C
#     after it prints the stopping line, the ranks are killed during the final save, the checkpoint on
#     disk is the periodic one of step 10 and it resumes to step 40 with the uninterrupted run's tensors
#     and values; with the flag the warning names, the same Ctrl-C saves.
#  The resumes need every rank's FP8 scaling state in rank 0's checkpoint: the ranks share their amaxes.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, lines, records, now_ms
abs_path() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
AMPC=$(abs_path "${1:?usage: dist_stop.sh AMPC SLOW_RENAME_SO [MPIRUN]}")
SHIM=$(abs_path "${2:?usage: dist_stop.sh AMPC SLOW_RENAME_SO [MPIRUN]}")
MPIRUN=${3:-mpirun}
BG=""
test_exit_hook() { [ -z "$BG" ] || kill -KILL "$BG" 2> /dev/null; }
test_tmpdir dist_stop
DIR=$TEST_TMP
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-1}"
unset OMPI_MCA_odls_base_sigkill_timeout
command -v "$MPIRUN" > /dev/null 2>&1 || fail_now "no $MPIRUN"
# a sanitizer build checks that its runtime is the first library: the shim comes before it here
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}verify_asan_link_order=0"

M="--model gpt --layers 4 --d-model 256 --heads 4 --context 128 --batch 16 --precision fp8 --shard full --threads 1"
STEPS=40 EVERY=4 # of the runs start() starts
step_of() { "$AMPC" inspect "$1" 2> /dev/null | sed -nE 's/^step: *([0-9]+)$/\1/p'; }

# start D DELAY_MS [MPIRUN_ARGS...]: the run in folder D in the background (BG), renames slowed by DELAY_MS
start() {
    d=$1 delay=$2
    shift 2
    mkdir -p "$d"
    # shellcheck disable=SC2086
    (cd "$d" && exec "$MPIRUN" -np 2 "$@" -x LD_PRELOAD="$SHIM" -x SLOW_RENAME_MS="$delay" -x ASAN_OPTIONS \
        "$AMPC" train $M --steps $STEPS --checkpoint x.st --checkpoint-every $EVERY --keep 2 --log l.jsonl --quiet \
        > out 2> err) &
    BG=$!
}
# interrupt D K FRACTION: once D's log has K records (and FRACTION of a second more), SIGINT to mpirun;
# sets rc to mpirun's exit status
interrupt() {
    t=0
    while [ "$(lines "$1/l.jsonl")" -lt "$2" ] && kill -0 "$BG" 2> /dev/null && [ $t -lt 3000 ]; do
        sleep 0.05
        t=$((t + 1))
    done
    sleep "$3"
    kill -INT "$BG" 2> /dev/null
    wait "$BG"
    rc=$?
    BG=""
}

# ---- the uninterrupted run ----
start "$DIR/ref" 0
wait "$BG" || fail_now "the uninterrupted run: $(tail -n 3 "$DIR/ref/err")"
BG=""
[ "$(step_of "$DIR/ref/x.st")" = 40 ] || fail_now "the uninterrupted run's checkpoint is not at step 40"

# ---- 1. twenty interrupts ----
STOPPING="^ampc train: stopping after step [0-9]* (in progress), then saving x.st; if killed before that, the run keeps"
records "$DIR/ref/l.jsonl" > "$DIR/ref/rec"
max_ms=0 i=0 resumed=0 saved=0
for k in 3 4 4 5 6 7 8 8 9 10 11 12 12 13 15 16 17 19 20 22; do
    i=$((i + 1))
    d="$DIR/i$i" frac=$(((i * 7) % 10))
    start "$d" 100
    interrupt "$d" $k "0.$frac"
    n=$(records "$d/l.jsonl" | wc -l)
    st=$(step_of "$d/x.st")
    line=$(grep "stopped by SIGTERM" "$d/err")
    ms=$(echo "$line" | sed -nE 's/.*\(([0-9]+) ms after the signal\).*/\1/p')
    want="stopped by SIGTERM after $n of 40 steps; the checkpoint is saved to x.st ($ms ms after the signal); resume"
    want="$want with: mpirun -np 2 ampc train --resume x.st --log l.jsonl"
    if ! head -n 1 "$d/err" | grep -q "$STOPPING"; then
        fail "interrupt $i (after $k steps): the first line is not the stopping line: $(cat "$d/err")"
        continue
    elif [ -n "$line" ] && echo "$line" | grep -qF "$want" && [ "$st" = "$n" ]; then
        ok "interrupt $i (after $k steps + 0.$frac s): stopped after $n steps, saved $ms ms after the signal"
        [ "$ms" -gt "$max_ms" ] && max_ms=$ms
        saved=$((saved + 1))
    elif [ -z "$line" ] && [ $rc -ne 0 ] && grep -q "warning: a checkpoint takes" "$d/err" && [ $((st % 4)) -eq 0 ]; then
        # a machine too slow for the default timeout: allowed when it was said at the first periodic save
        ok "interrupt $i (after $k steps): killed before the save, as the start-up warning said; step $st kept"
    else
        fail "interrupt $i (after $k steps): mpirun $rc, $n steps logged, checkpoint at step '$st': $(cat "$d/err")"
        continue
    fi
    # three resumes: early, one near a periodic save, one late
    case $i in 2 | 8 | 16) ;; *) continue ;; esac
    if (cd "$d" && "$MPIRUN" -np 2 "$AMPC" train --resume x.st --log l.jsonl --quiet > rout 2> rerr) &&
        cmp -s "$d/x.st" "$DIR/ref/x.st" && records "$d/l.jsonl" | cmp -s - "$DIR/ref/rec"; then
        ok "interrupt $i resumes to step 40 bit for bit (checkpoint and log)"
        resumed=$((resumed + 1))
    else
        fail "interrupt $i: the resumed run differs from the uninterrupted one: $(cat "$d/rerr")"
    fi
done
[ $resumed -eq 3 ] || fail "$resumed of 3 resumes checked"
echo "saved: $saved of 20; stop_ms_max: $max_ms"

# ---- 2. a save slower than the kill timeout ----
# periodic saves every 10 steps; the Ctrl-C after the save of step 10, so that the stop needs a save of its own
EVERY=10
d="$DIR/slow"
start "$d" 700
interrupt "$d" 11 0
warn=$(grep "warning: a checkpoint takes" "$d/err")
flag=$(echo "$warn" | sed -nE 's/.*pass mpirun --mca odls_base_sigkill_timeout ([0-9]+)$/\1/p')
if [ -n "$flag" ] && [ "$flag" -ge 4 ] &&
    echo "$warn" | grep -q "but Open MPI kills the ranks 1 s after a Ctrl-C (odls_base_sigkill_timeout): a Ctrl-C would lose the steps since the last periodic checkpoint (up to 10)"; then
    ok "the first periodic save warns: $warn"
else
    fail "no warning (or not the one expected) for a save of 1.4 s or more: $(cat "$d/err")"
fi
st=$(step_of "$d/x.st")
if [ $rc -ne 0 ] && grep -q "^ampc train: stopping after step [0-9]* (in progress), then saving x.st; if killed before that, the run keeps the checkpoint of step $st$" "$d/err" &&
    ! grep -q "stopped by" "$d/err" && [ $((st % 10)) -eq 0 ] && [ "$st" -ge 10 ]; then
    ok "killed during the final save: mpirun $rc, the stopping line printed, the checkpoint of step $st kept"
else
    fail "slow save: mpirun $rc, checkpoint at step '$st': $(cat "$d/err")"
fi
(cd "$d" && "$MPIRUN" -np 2 "$AMPC" train --resume x.st --log l2.jsonl --quiet > rout 2> rerr)
# (every tensor and value but the recorded cadence, which is this run's own)
content "$d/x.st" > "$d/c" && content "$DIR/ref/x.st" > "$DIR/ref/c"
if [ "$(step_of "$d/x.st")" = 40 ] && cmp -s "$d/c" "$DIR/ref/c"; then ok "the kept checkpoint resumes to step 40 bit for bit"
else fail "resume after the kill differs: $(cat "$d/rerr")"; fi
if [ -n "$flag" ]; then
    d="$DIR/flag" STEPS=200 # the ranks train on for the timeout's seconds before SIGTERM comes
    start "$d" 700 --mca odls_base_sigkill_timeout "$flag"
    interrupt "$d" 11 0
    n=$(records "$d/l.jsonl" | wc -l)
    grep -q "stopped by SIGTERM after $n of 200 steps; the checkpoint is saved to x.st" "$d/err" &&
        ! grep -q "warning: a checkpoint takes" "$d/err" && [ "$(step_of "$d/x.st")" = "$n" ] &&
        ok "with --mca odls_base_sigkill_timeout $flag the same Ctrl-C saves step $n, and nothing warns" ||
        fail "with the flag: mpirun $rc: $(cat "$d/err")"
fi

test_summary
