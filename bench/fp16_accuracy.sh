#!/bin/sh
# fp16_accuracy.sh: does FP16 training lose accuracy, and does the FP16 GEMM path matter? Trains the MLP
# on Fashion-MNIST for EPOCHS epochs, one thread, for seeds 1..SEEDS in four configurations and prints
# each run's test accuracy, the mean per configuration, and each configuration's difference from FP32
# (mean over seeds, standard deviation, t = mean / (sd / sqrt(seeds)): |t| above ~2.3 for 10 seeds is
# unlikely to be seed noise):
#   fp32      --precision fp32 (F32 GEMMs)
#   fp16      --precision fp16 with the kernels this machine chooses (on an AMX CPU: the three-pass BF16
#             split, error <= 2^-16 S per element)
#   fp16w     the same under AMPC_ISA=avx512 (FP16 widened to F32: exact products, F32 sums)
#   fp32x3    --precision fp32 --fp32-matmul high under AMPC_KERNEL_CHOICE=rule (F32 GEMMs as three BF16
#             passes where the CPU has AMX: no 16-bit data anywhere, a GEMM perturbation of the same size
#             as the split's; elsewhere it equals fp32): the control that tells a precision effect from
#             what any change of the GEMM's rounding does to a 3-epoch run
# A benchmark: it reports, it never fails on accuracy.
#
#   bench/fp16_accuracy.sh [AMPC_BINARY]        (default build/ampc)
#   SEEDS=10 EPOCHS=3 bench/fp16_accuracy.sh
set -u
AMPC=${1:-build/ampc}
SEEDS=${SEEDS:-5}
EPOCHS=${EPOCHS:-3}
[ -x "$AMPC" ] || { echo "fp16_accuracy.sh: $AMPC is not an executable (build first, or pass its path)" >&2; exit 2; }
[ -d /usr/share/datasets/fashion-mnist ] || {
    echo "fp16_accuracy.sh: needs Fashion-MNIST (apt-get install dataset-fashion-mnist)" >&2
    exit 2
}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() { # run NAME SEED [env...] -- [train options...]
    name=$1 seed=$2
    shift 2
    acc=$(env "$@" --seed "$seed" 2>&1 | sed -n 's/.*eval accuracy \([0-9.]*\)%.*/\1/p')
    echo "$name $seed ${acc:-failed}" | tee -a "$OUT/acc"
}
train="$AMPC train --model mlp --data fashion-mnist --epochs $EPOCHS --threads 1 --quiet"
seed=1
while [ "$seed" -le "$SEEDS" ]; do
    run fp32 "$seed" $train --precision fp32
    run fp16 "$seed" $train --precision fp16
    run fp16w "$seed" AMPC_ISA=avx512 $train --precision fp16
    run fp32x3 "$seed" AMPC_KERNEL_CHOICE=rule $train --precision fp32 --fp32-matmul high
    seed=$((seed + 1))
done

python3 - "$OUT/acc" <<'EOF'
import math, statistics, sys
acc = {}
for line in open(sys.argv[1]):
    name, seed, a = line.split()
    if a != "failed":
        acc.setdefault(name, {})[int(seed)] = float(a)
print()
for name, runs in acc.items():
    print(f"{name:7} mean {statistics.mean(runs.values()):.2f}%  ({len(runs)} seeds)")
base = acc.get("fp32", {})
for name, runs in acc.items():
    if name == "fp32":
        continue
    d = [runs[s] - base[s] for s in runs if s in base]
    if len(d) < 2:
        continue
    m, sd = statistics.mean(d), statistics.stdev(d)
    t = m / (sd / math.sqrt(len(d))) if sd > 0 else float("inf")
    print(f"{name:7} - fp32: mean {m:+.2f} points, sd {sd:.2f}, t {t:+.1f}  per seed: "
          + " ".join(f"{x:+.2f}" for x in d))
EOF
