#!/bin/sh
# vs_pytorch.sh: ampc against PyTorch on the same machine, in the same invocation, alternating runs so that
# both see the same machine state: for each model (gpt always; mlp and cnn when Fashion-MNIST is
# installed) and each precision, ROUNDS rounds of `ampc bench step` then pytorch_step.py under every
# Python that can import torch. Prints median ms per step over the rounds, ampc's speed-up over each
# PyTorch (time ratio), and peak memory. A benchmark: it reports, it never fails on speed.
#
#   bench/vs_pytorch.sh [AMPC_BINARY]          (default build/ampc)
#   ROUNDS=3 STEPS=5 THREADS=2 MODELS="gpt mlp cnn" TORCH_PYTHONS="/usr/bin/python3 /opt/venv/bin/python" \
#     bench/vs_pytorch.sh
#
# TORCH_PYTHONS defaults to Debian's /usr/bin/python3 (python3-torch, PyTorch 1.13) and, when present,
# the venv python of $TORCH_VENV (default .venv-torch: `python3 -m venv .venv-torch && .venv-torch/bin/pip
# install torch` gives the current release). Pythons without torch are skipped with a note.
set -u
AMPC=${1:-build/ampc}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-5}
THREADS=${THREADS:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
TORCH_VENV=${TORCH_VENV:-.venv-torch}
if [ -z "${TORCH_PYTHONS:-}" ]; then
    TORCH_PYTHONS=/usr/bin/python3
    [ -x "$TORCH_VENV/bin/python" ] && TORCH_PYTHONS="$TORCH_PYTHONS $TORCH_VENV/bin/python"
fi
if [ -z "${MODELS:-}" ]; then
    MODELS=gpt
    [ -d /usr/share/datasets/fashion-mnist ] && MODELS="gpt mlp cnn"
fi
[ -x "$AMPC" ] || { echo "vs_pytorch.sh: $AMPC is not an executable (build first, or pass its path)" >&2; exit 2; }

. "$HERE/torch_pythons.sh"
find_torch_pythons "$TORCH_PYTHONS"

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
batch_of() { case $1 in gpt) echo 8 ;; *) echo 64 ;; esac; }
data_of() { case $1 in gpt) echo builtin ;; *) echo fashion-mnist ;; esac; }

round=1
while [ "$round" -le "$ROUNDS" ]; do
    for model in $MODELS; do
        b=$(batch_of "$model")
        for prec in fp32 bf16 fp16; do
            run_pair "$OUT" "$model" "$(data_of "$model")" "$prec" "$b" "$THREADS" "$STEPS"
        done
    done
    round=$((round + 1))
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
impls = []
for r in rows:
    if r["impl"] not in impls:
        impls.append(r["impl"])
others = [i for i in impls if i != "ampc"]
def med(impl, model, prec, key):
    v = [r[key] for r in rows if r["impl"] == impl and r["model"] == model and r["precision"] == prec and r.get(key) is not None]
    return statistics.median(v) if v else None
def err(impl, model, prec):
    e = [r["error"] for r in rows if r["impl"] == impl and r["model"] == model and r["precision"] == prec and "error" in r]
    return e[0] if e else None
a0 = next((r for r in rows if r["impl"] == "ampc" and "cpu" in r), {})
print(f"\ncpu: {a0.get('cpu', '?')}, ampc's kernel level {a0.get('kernel_level', '?')}, {a0.get('threads', '?')} threads")
head = f"{'model':5} {'prec':5} {'ampc ms':>9} {'% peak':>11} {'MiB':>6}"
for o in others:
    head += f" | {o:>16} {'MiB':>6} {'ampc x':>7}"
print(head)
for model in dict.fromkeys(r["model"] for r in rows):
    for prec in ("fp32", "bf16", "fp16"):
        a = med("ampc", model, prec, "ms_per_step")
        am = med("ampc", model, prec, "peak_bytes")
        pf, unit = med("ampc", model, prec, "peak_fraction"), next((r.get("peak_unit") for r in rows if r["impl"] == "ampc"
                   and r["model"] == model and r["precision"] == prec), None)
        pcol = f"{100 * pf:.0f}% {unit}" if pf is not None and unit else "-"
        line = f"{model:5} {prec:5} {a if a is None else round(a, 1)!s:>9} {pcol:>11} {'-' if am is None else round(am / 2**20)!s:>6}"
        for o in others:
            t = med(o, model, prec, "ms_per_step")
            tm = med(o, model, prec, "peak_bytes")
            if t is None:
                line += f" | {'refused' if err(o, model, prec) else '-':>16} {'-':>6} {'-':>7}"
            else:
                ratio = f"{t / a:.2f}x" if a else "-"
                line += f" | {t:16.1f} {round(tm / 2**20)!s:>6} {ratio:>7}"
        print(line)
print("\nms: median ms per training step over all rounds; MiB: ampc counts the bytes it allocates, PyTorch")
print("its process's peak RSS (interpreter included); ampc x: PyTorch's time / ampc's (above 1: ampc faster);")
print("% peak: ampc's matrix-product FLOPs per second over the peak of the unit its GEMMs run on (ampc bench step).")
for o in others:
    for model in dict.fromkeys(r["model"] for r in rows):
        for prec in ("fp16",):
            e = err(o, model, prec)
            if e:
                print(f"{o} {model} {prec}: {e}")
EOF
