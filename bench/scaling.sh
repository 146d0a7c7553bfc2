#!/bin/sh
# scaling.sh: how ampc's training step scales with threads, against PyTorch on the same machine in the same
# invocation. For each batch and thread count, ROUNDS rounds of `ampc bench step` then pytorch_step.py
# (each Python that can import torch), alternating so both see the same machine state; then one
# `ampc bench step --threads LIST --profile` per precision, whose table names the operations that do not
# scale. Prints, per precision and batch: median ms per step at each thread count, the speed-up over the
# first count and the parallel efficiency for both, and ampc's speed-up over PyTorch. A benchmark: it
# reports, it never fails on speed.
#
#   bench/scaling.sh [AMPC_BINARY]                       (default build/ampc)
#   THREADS_LIST="1 2 4 8 16" BATCHES="8 32" PRECISIONS="bf16 fp32 fp16" ROUNDS=2 STEPS=4 \
#     TORCH_PYTHONS=/usr/bin/python3 PROFILE_DIR=/tmp/prof bench/scaling.sh
#
# THREADS_LIST defaults to 1, 2, 4, ... up to this machine's online CPUs (and that count itself). The
# profile tables go to PROFILE_DIR (default: a temporary folder, printed at the end); PROFILE=0 skips them.
set -u
AMPC=${1:-build/ampc}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-4}
BATCHES=${BATCHES:-8}
PRECISIONS=${PRECISIONS:-bf16 fp32 fp16}
PROFILE=${PROFILE:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$AMPC" ] || { echo "scaling.sh: $AMPC is not an executable (build first, or pass its path)" >&2; exit 2; }
cpus=$(nproc)
if [ -z "${THREADS_LIST:-}" ]; then
    THREADS_LIST="" t=1
    while [ "$t" -lt "$cpus" ]; do THREADS_LIST="$THREADS_LIST $t"; t=$((t * 2)); done
    THREADS_LIST="$THREADS_LIST $cpus"
fi
. "$HERE/torch_pythons.sh"
find_torch_pythons "${TORCH_PYTHONS:-/usr/bin/python3}"
echo "thread counts:$THREADS_LIST; batches: $BATCHES; $ROUNDS rounds of $STEPS timed steps"

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for b in $BATCHES; do
        for prec in $PRECISIONS; do
            for t in $THREADS_LIST; do
                run_pair "$OUT" gpt builtin "$prec" "$b" "$t" "$STEPS"
            done
        done
    done
    round=$((round + 1))
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
impls = list(dict.fromkeys(r["impl"] for r in rows))
others = [i for i in impls if i != "ampc"]
def med(impl, b, prec, t):
    v = [r["ms_per_step"] for r in rows if r["impl"] == impl and r.get("batch") == b and r["precision"] == prec
         and r.get("threads") == t and r.get("ms_per_step") is not None]
    return statistics.median(v) if v else None
a0 = next((r for r in rows if r["impl"] == "ampc" and "cpu" in r), {})
print(f"\ncpu: {a0.get('cpu', '?')}, ampc's kernel level {a0.get('kernel_level', '?')}; default GPT (6 x 384, context 256)")
threads = list(dict.fromkeys(r["threads"] for r in rows if r["impl"] == "ampc"))
for b in dict.fromkeys(r["batch"] for r in rows if r["impl"] == "ampc"):
    for prec in dict.fromkeys(r["precision"] for r in rows if r["impl"] == "ampc"):
        print(f"\nbatch {b}, {prec}")
        head = f"{'threads':>7} {'ampc ms':>9} {'speed-up':>8} {'eff':>5}"
        for o in others:
            head += f" | {'PyTorch ms':>10} {'speed-up':>8} {'eff':>5} {'ampc x':>7}"
        print(head)
        a1 = med("ampc", b, prec, threads[0])
        p1 = {o: med(o, b, prec, threads[0]) for o in others}
        for t in threads:
            a = med("ampc", b, prec, t)
            if a is None:
                continue
            s = a1 / a if a1 else 0
            line = f"{t:7d} {a:9.1f} {s:7.2f}x {100 * s * threads[0] / t:4.0f}%"
            for o in others:
                p = med(o, b, prec, t)
                if p is None:
                    line += f" | {'-':>10} {'-':>8} {'-':>5} {'-':>7}"
                else:
                    ps = p1[o] / p if p1[o] else 0
                    line += f" | {p:10.1f} {ps:7.2f}x {100 * ps * threads[0] / t:4.0f}% {p / a:6.2f}x"
            print(line)
print(f"\nms: median per training step over the rounds; speed-up: over {threads[0]} thread(s); eff: speed-up over")
print("the ratio of thread counts; ampc x: PyTorch's time / ampc's (above 1: ampc faster).")
for o in others:
    errs = sorted({r["error"] for r in rows if r["impl"] == o and "error" in r})
    if errs:
        print(f"{o}: {', '.join(errs)} (those runs are left out)")
EOF

[ "$PROFILE" = 1 ] || exit 0
DIR=${PROFILE_DIR:-$(mktemp -d)}
mkdir -p "$DIR"
list=$(echo $THREADS_LIST | tr ' ' ',')
for b in $BATCHES; do
    for prec in $PRECISIONS; do
        f="$DIR/profile-batch$b-$prec.txt"
        "$AMPC" bench step --batch "$b" --precisions "$prec" --steps "$STEPS" --threads "$list" --profile >"$f" 2>&1 ||
            echo "ampc bench step --profile failed: batch $b $prec (see $f)" >&2
    done
done
echo "per-operation profiles (ampc bench step --threads $list --profile): $DIR"
