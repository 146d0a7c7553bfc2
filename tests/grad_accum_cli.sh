#!/bin/sh
# grad_accum_cli.sh AMPC [MPIEXEC]: gradient accumulation through `ampc train`.
#  - --batch 4 --grad-accum 4 against --batch 16, the same seed, 20 steps: FP32 losses within 1e-6 of each
#    other (relative; another summation order), BF16 and FP16 within 2e-3 (activations of other GEMM shapes
#    round differently; AdamW amplifies); the log counts optimizer steps, throughput every micro-batch.
#  - --total-batch 16 --batch 4 is --grad-accum 4, bit for bit.
#  - FP16 whose scale overflows every micro-batch: every step skipped, the scale halved once per step.
#  - A checkpoint of an accumulating run resumes bit for bit (it records --grad-accum).
#  - Under mpirun -np 2 (when given) the result equals one process's, and shard full works.
#  - Bad input: --grad-accum 0, a --total-batch that is not whole micro-batches, both disagreeing: one line,
#    exit 2.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, records, ...
AMPC=$1
MPIEXEC=${2:-}
test_tmpdir grad_accum
DIR=$TEST_TMP
test_kernel_cache
COMMON="--layers 2 --d-model 32 --heads 2 --context 16 --threads 2 --seed 7 --quiet"

losses() { grep -v '"final"' "$1" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }

# close A B TOL: every loss of log A within TOL (relative) of log B's, 20 of them
close() {
    losses "$1" >"$DIR/la"
    losses "$2" >"$DIR/lb"
    paste "$DIR/la" "$DIR/lb" |
        awk -v tol="$3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r; n++ }
                         END { if (n != 20 || m > tol) { printf "%d steps, max relative difference %g\n", n, m; exit 1 } }'
}

for p in fp32 bf16 fp16; do
    tol=2e-3
    [ "$p" = fp32 ] && tol=1e-6
    # shellcheck disable=SC2086
    "$AMPC" train $COMMON --precision "$p" --batch 16 --steps 20 --log "$DIR/big-$p.jsonl" >/dev/null &&
        "$AMPC" train $COMMON --precision "$p" --batch 4 --grad-accum 4 --steps 20 --log "$DIR/acc-$p.jsonl" >/dev/null ||
        { fail "$p: a run failed"; continue; }
    if why=$(close "$DIR/big-$p.jsonl" "$DIR/acc-$p.jsonl" "$tol"); then ok "$p: --batch 4 --grad-accum 4 ~ --batch 16 ($tol)"
    else fail "$p: --batch 4 --grad-accum 4 against --batch 16: $why"; fi
done
grep -q '"final":true,.*"steps":20' "$DIR/acc-fp32.jsonl" || fail "the final record does not count 20 optimizer steps"
[ "$(grep -c '"step"' "$DIR/acc-fp32.jsonl")" -eq 20 ] || fail "the log has not one record per optimizer step"

# --total-batch: the same run as --grad-accum
# shellcheck disable=SC2086
"$AMPC" train $COMMON --batch 4 --total-batch 16 --steps 20 --precision fp32 --log "$DIR/tot.jsonl" >/dev/null
records "$DIR/tot.jsonl" >"$DIR/t1" && records "$DIR/acc-fp32.jsonl" >"$DIR/t2"
cmp -s "$DIR/t1" "$DIR/t2" && ok "--total-batch 16 --batch 4 is --grad-accum 4" || fail "--total-batch differs"

# an overflow in the micro-batches skips the whole step; the scale backs off once per step
# shellcheck disable=SC2086
"$AMPC" train $COMMON --precision fp16 --batch 4 --grad-accum 3 --steps 3 --init-scale 1e38 --log "$DIR/ov.jsonl" >/dev/null
sk=$(grep -c '"skipped":true' "$DIR/ov.jsonl")
s3=$(grep '"step":2,' "$DIR/ov.jsonl" | sed -E 's/.*"scale":([^,]*),.*/\1/')
[ "$sk" -eq 3 ] && awk -v s="$s3" 'BEGIN { exit !(s > 2.4e37 && s < 2.6e37) }' &&
    ok "fp16: overflowing micro-batches skip each step, the scale halves once per step" ||
    fail "fp16 overflow: $sk steps skipped, step 2's scale $s3 (want 3, 2.5e37)"

# checkpoints of an accumulating run resume bit for bit (as checkpoint_cli.sh: the same checkpoint settings)
mkdir -p "$DIR/a" "$DIR/b" "$DIR/c"
# shellcheck disable=SC2086
"$AMPC" train $COMMON --precision bf16 --batch 4 --grad-accum 3 --steps 8 --checkpoint "$DIR/a/x.st" \
    --log "$DIR/a.jsonl" >/dev/null &&
    "$AMPC" train $COMMON --precision bf16 --batch 4 --grad-accum 3 --steps 8 --checkpoint "$DIR/b/x.st" \
        --checkpoint-every 4 --keep 3 >/dev/null &&
    "$AMPC" train --resume "$DIR/b/x-step00000004.st" --checkpoint "$DIR/c/x.st" --checkpoint-every 0 --keep 1 \
        --log "$DIR/c.jsonl" --quiet >/dev/null || fail "the resume runs failed"
records "$DIR/a.jsonl" | tail -n 4 >"$DIR/ra" && records "$DIR/c.jsonl" >"$DIR/rc"
cmp -s "$DIR/ra" "$DIR/rc" && cmp -s "$DIR/a/x.st" "$DIR/c/x.st" &&
    "$AMPC" inspect "$DIR/c/x.st" | grep -q -- "--grad-accum 3" && ok "resume of an accumulating run is exact" ||
    fail "resume with --grad-accum differs (or the checkpoint does not record it)"

# data parallel: the last micro-batch reduces, the others accumulate locally
if [ -n "$MPIEXEC" ]; then
    for shard in none full; do
        # shellcheck disable=SC2086
        $MPIEXEC -np 2 "$AMPC" train $COMMON --threads 1 --precision fp32 --batch 4 --grad-accum 4 --steps 20 \
            --shard "$shard" --log "$DIR/mpi-$shard.jsonl" >/dev/null 2>"$DIR/mpi.err" || { fail "mpirun ($shard)"; continue; }
        if why=$(close "$DIR/acc-fp32.jsonl" "$DIR/mpi-$shard.jsonl" 1e-6); then ok "mpirun -np 2, shard $shard: as one process"
        else fail "mpirun -np 2, shard $shard against one process: $why"; fi
    done
fi

# bad input: one line, exit 2
expect2() {
    needle=$1
    shift
    "$AMPC" "$@" >/dev/null 2>"$DIR/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(lines "$DIR/err")" -eq 1 ] && grep -qF -- "$needle" "$DIR/err"; then ok "exit 2: $(cat "$DIR/err")"
    else fail "ampc $* -> exit $rc, stderr: $(cat "$DIR/err")"; fi
}
expect2 "--grad-accum" train --grad-accum 0
expect2 "is not a multiple of --batch 4" train --batch 4 --total-batch 10
expect2 "is not --grad-accum x --batch 4" train --batch 4 --total-batch 16 --grad-accum 2

test_summary
