#!/bin/sh
# run_safety.sh AMPC: a run of `ampc train` is not lost to a path it cannot write, an interrupt, a resume
# from another place or a resume on other data.
#  - An unwritable --checkpoint or --log (missing folder, a file where a folder should be, a folder
#    where the file should be) and an unwritable --report file stop the command before the first step,
#    in under a second, with one line naming the path.
#  - A checkpoint folder that disappears mid-run does not lose the run: it trains to the end, evaluates,
#    prints its summary, and the checkpoint goes to a rescue file in $TMPDIR that the message names and
#    that equals the uninterrupted run's checkpoint; the exit status is 1.
#  - SIGINT (Ctrl-C) finishes the step, saves, prints one line with the resume command and exits 130;
#    `ampc train --resume` without --checkpoint, from another directory, with a relative --data, then
#    ends byte-identical to an uninterrupted run, with the same JSONL step records.
#  - Data that changed since the checkpoint is refused (unless --allow-data-change), and a data file
#    that is gone is reported as the path recorded in the checkpoint.
#  - Extending a run says that the learning-rate schedule changes, and --schedule-steps keeps it.
#  - A fresh run refuses another run's checkpoint, numbered copies, log, and a file that is no checkpoint,
#    with one line and nothing touched; compare refuses a folder holding another report; --overwrite
#    replaces them; --resume appends to its own log.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, lines, records, now_ms, ...
AMPC=$1
case $AMPC in /*) ;; *) AMPC=$PWD/$AMPC ;; esac   # the runs below change directory
test_tmpdir safety
DIR=$TEST_TMP
test_kernel_cache
"$AMPC" info > /dev/null || fail_now "ampc info"
# wait_lines FILE N PID: until FILE has N lines or PID has ended
wait_lines() { while [ "$(lines "$1")" -lt "$2" ] && kill -0 "$3" 2> /dev/null; do sleep 0.01; done; }

for i in $(seq 0 199); do echo "$i: a stitch in time saves nine, $((i * 37 % 101))"; done | head -c 6000 > "$DIR/c.txt"
SMALL="--data text:$DIR/c.txt --layers 1 --d-model 32 --heads 2 --context 16 --batch 8 --threads 2"
# ~10 ms a step on two cores: long enough to be interrupted on purpose
MID="--layers 2 --d-model 64 --heads 4 --context 32 --batch 8 --threads 2 --dropout 0.1 --precision fp16
     --init-scale 1e7 --growth-interval 4 --steps 120 --quiet"

# ---- 1. unwritable destinations: refused before the first step, in under a second ----
printf 'x' > "$DIR/afile"
refused() {   # NEEDLE ARGS...: exit 1, one stderr line holding NEEDLE, fast, no log written
    needle=$1; shift
    rm -f "$DIR/pre.jsonl"
    t0=$(now_ms)
    # shellcheck disable=SC2086
    timeout 5 "$AMPC" train $SMALL --steps 100000 "$@" > /dev/null 2> "$DIR/err"
    rc=$? t=$(($(now_ms) - t0))
    if [ $rc -eq 1 ] && [ "$(wc -l < "$DIR/err")" -eq 1 ] && grep -qF -- "$needle" "$DIR/err" && [ $t -lt 1000 ] &&
        [ ! -s "$DIR/pre.jsonl" ]; then ok "refused in $t ms: $(cat "$DIR/err")"
    else fail "train $* -> exit $rc after $t ms: $(head -c 300 "$DIR/err")"; fi
}
refused "$DIR/nodir/x.st" --checkpoint "$DIR/nodir/x.st" --log "$DIR/pre.jsonl"
refused "$DIR/afile/x.st" --checkpoint "$DIR/afile/x.st" --log "$DIR/pre.jsonl"
refused "is a directory" --checkpoint "$DIR" --log "$DIR/pre.jsonl"
refused "$DIR/nodir/x.jsonl" --log "$DIR/nodir/x.jsonl"
refused "$DIR/no?dir/x.jsonl" --log "$DIR/no
dir/x.jsonl"   # a line break in the path: still one line
mkdir -p "$DIR/rep/report.md"
t0=$(now_ms)
# shellcheck disable=SC2086
timeout 5 "$AMPC" compare $SMALL --steps 100000 --report "$DIR/rep" > /dev/null 2> "$DIR/err"
rc=$? t=$(($(now_ms) - t0))
[ $rc -eq 1 ] && grep -qF "$DIR/rep/report.md" "$DIR/err" && [ $t -lt 1000 ] && ok "compare: report refused in $t ms" ||
    fail "compare --report with report.md a folder: exit $rc after $t ms: $(cat "$DIR/err")"

# ---- reference: the uninterrupted run (relative --data, run from $DIR) ----
mkdir -p "$DIR/ref" "$DIR/int" "$DIR/gone" "$DIR/rescue" "$DIR/elsewhere"
# shellcheck disable=SC2086
(cd "$DIR" && "$AMPC" train --data text:c.txt $MID --checkpoint ref/x.st --log ref.jsonl > /dev/null) ||
    fail "reference run"

# ---- 2. the checkpoint folder disappears mid-run: rescue file, summary, exit 1 ----
# shellcheck disable=SC2086
(cd "$DIR" && TMPDIR="$DIR/rescue" exec "$AMPC" train --data text:c.txt $MID --checkpoint gone/x.st \
    --log gone.jsonl > gone.out 2> gone.err) &
pid=$!
wait_lines "$DIR/gone.jsonl" 3 $pid
rm -rf "$DIR/gone"
wait $pid
rc=$?
rescue=$(ls "$DIR"/rescue/ampc-rescue-*-x.st 2> /dev/null | head -n 1)
if [ $rc -eq 1 ] && [ -n "$rescue" ] && grep -qF "$rescue" "$DIR/gone.err" && grep -q "120 steps" "$DIR/gone.out" &&
    cmp -s "$rescue" "$DIR/ref/x.st"; then
    ok "lost checkpoint folder: trained to the end, saved to $(basename "$rescue"), identical to the reference"
else
    fail "lost checkpoint folder: exit $rc, rescue '$rescue', stdout $(cat "$DIR/gone.out"), stderr $(cat "$DIR/gone.err")"
fi

# ---- 3. SIGINT: finish the step, save, say how to resume, exit 130; resume elsewhere is exact ----
# A shell starts background jobs with SIGINT ignored (and ampc leaves an ignored SIGINT alone, as it
# should); GNU env can restore it. Without that, SIGTERM takes the same path (exit 143).
sig=INT want=130
env --default-signal=INT true 2> /dev/null && START="env --default-signal=INT" || { START=""; sig=TERM want=143; }
# shellcheck disable=SC2086
(cd "$DIR" && exec $START "$AMPC" train --data text:c.txt $MID --checkpoint int/x.st --log int.jsonl \
    > /dev/null 2> int.err) &
pid=$!
wait_lines "$DIR/int.jsonl" 10 $pid
kill -$sig $pid
wait $pid
rc=$?
# two lines: the signal handler's (what will happen), then what happened
if [ $rc -eq $want ] && [ "$(wc -l < "$DIR/int.err")" -eq 2 ] &&
    head -n 1 "$DIR/int.err" | grep -q "^ampc train: stopping after step [0-9]* (in progress), then saving int/x.st; if killed before that, the run keeps no checkpoint$" &&
    tail -n 1 "$DIR/int.err" | grep -q "stopped by SIG$sig after [0-9]* of 120 steps; the checkpoint is saved to int/x.st ([0-9]* ms after the signal); resume with: ampc train --resume int/x.st --log int.jsonl$"; then
    ok "SIG$sig: $(cat "$DIR/int.err")"
else
    fail "SIG$sig: exit $rc (want $want): $(cat "$DIR/int.err")"
fi
done_steps=$("$AMPC" inspect "$DIR/int/x.st" | sed -n 's/^step: *//p')
[ "${done_steps:-0}" -ge 10 ] && [ "$done_steps" -lt 120 ] || fail "the interrupted checkpoint is at step '$done_steps'"
# from another directory, without --checkpoint: the recorded destination, the recorded (absolute) data
(cd "$DIR/elsewhere" && "$AMPC" train --resume ../int/x.st --log ../int.jsonl > /dev/null 2> resume.err) ||
    fail "resume after SIG$sig: $(cat "$DIR/elsewhere/resume.err")"
if cmp -s "$DIR/ref/x.st" "$DIR/int/x.st"; then ok "interrupted at step $done_steps + resume == uninterrupted (byte for byte)"
else fail "the resumed run's checkpoint differs from the uninterrupted run's"; fi
records "$DIR/ref.jsonl" > "$DIR/ref.rec"
records "$DIR/int.jsonl" > "$DIR/int.rec"
[ -s "$DIR/ref.rec" ] && cmp -s "$DIR/ref.rec" "$DIR/int.rec" && ok "interrupted + resumed log == uninterrupted log" ||
    { fail "logs differ"; diff "$DIR/ref.rec" "$DIR/int.rec" | head -4; }
[ ! -e "$DIR/elsewhere/x.st" ] || fail "the resume saved into the current directory"

# ---- 4. data identity ----
cp "$DIR/c.txt" "$DIR/d.txt"
# shellcheck disable=SC2086
"$AMPC" train $SMALL --data "text:$DIR/d.txt" --steps 10 --checkpoint "$DIR/d.st" --quiet > /dev/null || fail "data run"
cp "$DIR/d.st" "$DIR/d0.st"
sed -i 's/stitch/STITCH/' "$DIR/d.txt"   # other bytes, the same length: nothing else would notice
"$AMPC" train --resume "$DIR/d.st" --steps 20 --quiet > /dev/null 2> "$DIR/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "data differs from the data .*d.st was trained on: text:$DIR/d.txt is 6000 bytes with CRC-32 [0-9a-f]*, the checkpoint recorded text:$DIR/d.txt: 6000 bytes with CRC-32 7c8db4c1" "$DIR/err" &&
    grep -qF -- "--allow-data-change" "$DIR/err" && cmp -s "$DIR/d.st" "$DIR/d0.st"; then ok "changed data refused: $(cat "$DIR/err")"
else fail "changed data: exit $rc: $(cat "$DIR/err")"; fi
printf 'one more line\n' >> "$DIR/d.txt"   # and another length: the loader takes over the recorded position
"$AMPC" train --resume "$DIR/d.st" --steps 20 --allow-data-change --quiet > /dev/null 2> "$DIR/err" &&
    grep -q "note: the data has 338 samples per epoch, the checkpoint's had 337" "$DIR/err" &&
    ok "--allow-data-change: $(tail -n 1 "$DIR/err")" || fail "--allow-data-change: $(cat "$DIR/err")"
mv "$DIR/d.txt" "$DIR/d.moved"
"$AMPC" train --resume "$DIR/d0.st" --steps 20 --quiet > /dev/null 2> "$DIR/err"
rc=$?
[ $rc -eq 1 ] && grep -qF "as recorded in $DIR/d0.st" "$DIR/err" && ok "missing data: $(cat "$DIR/err")" ||
    fail "missing data: exit $rc: $(cat "$DIR/err")"

# ---- 5. extending a run: the schedule change is announced, --schedule-steps keeps the recorded one ----
# shellcheck disable=SC2086
"$AMPC" train $SMALL --steps 30 --checkpoint "$DIR/s.st" --quiet > /dev/null || fail "schedule run"
"$AMPC" train --resume "$DIR/s.st" --steps 40 --checkpoint "$DIR/s2.st" --quiet > /dev/null 2> "$DIR/err"
grep -q "note: the learning-rate schedule changes here.*--schedule-steps 30 keeps it" "$DIR/err" &&
    ok "extension announced: $(cat "$DIR/err")" || fail "extension not announced: $(cat "$DIR/err")"
"$AMPC" train --resume "$DIR/s.st" --steps 40 --schedule-steps 30 --checkpoint "$DIR/s3.st" --log "$DIR/s3.jsonl" \
    --quiet > /dev/null 2> "$DIR/err"
lrs=$(grep -v final "$DIR/s3.jsonl" | sed -E 's/.*"lr":([^,]*),.*/\1/' | sort -u)
if [ ! -s "$DIR/err" ] && [ "$(echo "$lrs" | wc -l)" -eq 1 ]; then ok "--schedule-steps 30: lr held at $lrs"
else fail "--schedule-steps 30: lrs '$lrs', stderr $(cat "$DIR/err")"; fi

# ---- 6. another run's files: a fresh run refuses them (untouched), --overwrite replaces them ----
O="$DIR/other"; mkdir -p "$O"
# shellcheck disable=SC2086
"$AMPC" train $SMALL --d-model 64 --steps 6 --checkpoint "$O/keep.st" --log "$O/l.jsonl" --quiet > /dev/null ||
    fail "the other run"
# shellcheck disable=SC2086
"$AMPC" train $SMALL --steps 4 --checkpoint "$O/num.st" --checkpoint-every 2 --keep 3 --quiet > /dev/null &&
    rm "$O/num.st" || fail "the numbered run"
cp "$O/keep.st" "$O/keep.0" && cp "$O/l.jsonl" "$O/l.0" && printf 'notes\n' > "$O/junk.st"
refused_other() { # NEEDLE ARGS...: exit 1, one line holding NEEDLE and the three ways forward, nothing touched
    needle=$1; shift
    # shellcheck disable=SC2086
    "$AMPC" train $SMALL --steps 2 --quiet "$@" > /dev/null 2> "$O/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(lines "$O/err")" -eq 1 ] && grep -qF -- "$needle" "$O/err" &&
        grep -q "write to another path, or pass --overwrite to replace it" "$O/err" && cmp -s "$O/keep.st" "$O/keep.0" &&
        cmp -s "$O/l.jsonl" "$O/l.0" && [ -f "$O/num-step00000002.st" ] && [ -f "$O/num-step00000004.st" ]; then
        ok "refused: $(cat "$O/err")"
    else fail "not refused as expected (exit $rc): $(cat "$O/err")"; fi
}
refused_other "--checkpoint $O/keep.st holds another run (after 6 steps, gpt (1 layer, d 64, 2 heads, context 16, vocab 256)): continue it with --resume $O/keep.st" \
    --checkpoint "$O/keep.st"
refused_other "--log $O/l.jsonl holds another run's log" --log "$O/l.jsonl"
refused_other "--checkpoint $O/num.st has 2 numbered checkpoints of another run beside it (the newest $O/num-step00000004.st), which --keep would prune" \
    --checkpoint "$O/num.st" --keep 2
refused_other "--checkpoint $O/junk.st exists and is not an ampc checkpoint (6 bytes): move it away" --checkpoint "$O/junk.st"
# shellcheck disable=SC2086
"$AMPC" train $SMALL --steps 2 --quiet --checkpoint "$O/keep.st" --log "$O/l.jsonl" --overwrite > /dev/null 2> "$O/err" &&
    "$AMPC" inspect "$O/keep.st" | grep -q "^step: *2$" && [ "$(records "$O/l.jsonl" | wc -l)" -eq 2 ] &&
    ok "--overwrite replaces the checkpoint and the log" || fail "--overwrite: $(cat "$O/err")"
"$AMPC" train --resume "$O/keep.st" --steps 4 --log "$O/l.jsonl" --quiet > /dev/null 2> "$O/err" &&
    [ "$(records "$O/l.jsonl" | wc -l)" -eq 4 ] && ok "--resume appends to its own log" || fail "resume: $(cat "$O/err")"
mkdir -p "$O/rep" && printf '# a report\n' > "$O/rep/report.md"
# shellcheck disable=SC2086
"$AMPC" compare $SMALL --steps 2 --quiet --report "$O/rep" > /dev/null 2> "$O/err"
rc=$?
[ $rc -eq 1 ] && grep -q "^ampc compare: --report $O/rep holds another report ($O/rep/report.md): write to another folder, or pass --overwrite to replace it$" "$O/err" &&
    [ "$(cat "$O/rep/report.md")" = "# a report" ] && ok "compare: $(cat "$O/err")" || fail "compare --report: exit $rc: $(cat "$O/err")"
# shellcheck disable=SC2086
"$AMPC" compare $SMALL --steps 2 --quiet --report "$O/rep" --overwrite > /dev/null 2> "$O/err" &&
    grep -q "^# " "$O/rep/report.md" && [ "$(cat "$O/rep/report.md")" != "# a report" ] &&
    ok "compare --overwrite replaces the report" || fail "compare --overwrite: $(cat "$O/err")"

test_summary
