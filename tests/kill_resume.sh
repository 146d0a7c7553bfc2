#!/bin/bash
# kill_resume.sh AMPC [KILLS]: crash-safety of checkpoints. Trains a small FP16 GPT (GradScaler, dropout,
# an epoch boundary, skipped steps) with a checkpoint after every step, kills it with SIGKILL at random
# moments KILLS times (default 40) - during steps and, every 4th time, as soon as a save has begun - and resumes it each time from the
# checkpoint file. After every kill the checkpoint must be intact and loadable (`ampc inspect` verifies
# the format and the payload checksum). At the end the checkpoint must equal, byte for byte, that of an
# uninterrupted run, and every logged step (the last record of each step, timing fields aside) must equal
# the uninterrupted run's. Prints how many kills hit a save in progress (a temp file left behind).
# Random delays come from $RANDOM seeded by KILL_SEED (printed), so a failure can be replayed.
set -u
. "$(dirname "$0")/test_lib.sh" # fail_now, test_tmpdir, records, strip_timing, ...
AMPC=$1
KILLS=${2:-40}
SEED=${KILL_SEED:-$$}
RANDOM=$SEED
test_tmpdir kill
DIR=$TEST_TMP
test_kernel_cache
"$AMPC" info > /dev/null || fail_now "ampc info"
echo "kill_resume: seed $SEED, $KILLS kills, in $DIR"

for i in $(seq 0 199); do echo "$i: a stitch in time saves nine, $((i * 37 % 101))"; done | head -c 6000 > "$DIR/c.txt"
RUN=(train --data "text:$DIR/c.txt" --layers 2 --d-model 64 --heads 4 --context 32 --batch 8 --threads 2 --dropout 0.1
     --precision fp16 --init-scale 1e7 --growth-interval 4 --steps 400 --quiet)

start=$(date +%s%N)
# the same checkpoint settings as the killed runs (a checkpoint records its file name and cadence), in a
# folder of its own
mkdir "$DIR/ref"
"$AMPC" "${RUN[@]}" --checkpoint "$DIR/ref/ck.st" --checkpoint-every 1 --log "$DIR/ref.jsonl" > /dev/null ||
    fail_now "reference run"
echo "reference run: $((($(date +%s%N) - start) / 1000000)) ms"
grep -q '"skipped":true' "$DIR/ref.jsonl" || fail_now "the reference run skips no step"

ck="$DIR/ck.st"
kills=0 in_save=0 attempts=0 done=0
while [ $done -eq 0 ]; do
    attempts=$((attempts + 1))
    args=("${RUN[@]}" --checkpoint "$ck" --checkpoint-every 1 --log "$DIR/log.$attempts.jsonl")
    [ -f "$ck" ] && args+=(--resume "$ck")
    "$AMPC" "${args[@]}" > /dev/null 2> "$DIR/err.$attempts" &
    pid=$!
    if [ $kills -lt "$KILLS" ]; then
        if [ $((kills % 4)) -eq 3 ]; then
            # every 4th kill waits for a save in progress (its temp file), then strikes
            for _ in $(seq 20000); do [ -e "$ck.tmp" ] && break; done
        else
            # 0..150 ms: process start, data loading, resume, steps and saves all get hit
            sleep "0.$(printf "%03d" $((RANDOM % 150)))"
        fi
        if kill -9 $pid 2> /dev/null; then
            wait $pid 2> /dev/null
            kills=$((kills + 1))
            # a temp file written by this attempt (not one left by an earlier kill): the kill hit a save
            [ -n "$(find "$ck.tmp" -newer "$DIR/err.$attempts" 2> /dev/null)" ] && in_save=$((in_save + 1))
            if [ -f "$ck" ] && ! "$AMPC" inspect "$ck" > /dev/null 2> "$DIR/inspect.err"; then
                fail_now "after kill $kills the checkpoint is not loadable: $(cat "$DIR/inspect.err")"
            fi
            continue
        fi
    fi
    if wait $pid; then done=1
    else fail_now "attempt $attempts exited with an error: $(cat "$DIR/err.$attempts")"; fi
done
echo "kills: $kills ($in_save during a save), attempts: $attempts"
[ $in_save -gt 0 ] || echo "warning: no kill landed inside a save this time"

cmp "$DIR/ref/ck.st" "$ck" || fail_now "final checkpoint differs from the uninterrupted run"
# the last record of each step over all attempts, in step order, without timing fields
# (attempts in order; a line cut by a kill is dropped: its step was redone by a later attempt)
for a in $(seq 1 $attempts); do cat "$DIR/log.$a.jsonl" 2> /dev/null; done | grep -v '"final"' | grep '}$' | strip_timing |
    awk -F'"step":' '{ split($2, a, ","); last[a[1] + 0] = $0 } END { for (s = 0; s in last; s++) print last[s] }' \
    > "$DIR/merged"
records "$DIR/ref.jsonl" > "$DIR/ref.rec"
if ! cmp -s "$DIR/ref.rec" "$DIR/merged"; then
    echo "FAIL: logged steps differ from the uninterrupted run"; diff "$DIR/ref.rec" "$DIR/merged" | head -5; exit 1
fi
echo "kill_resume: passed: bit-identical to the uninterrupted run after $kills SIGKILLs"
