#!/bin/sh
# doctor_targets.sh: the doctor's figures (reported, not asserted). For each model (the default GPT on
# the built-in data, the MLP and the CNN on Fashion-MNIST) it runs `ampc doctor` (20 FP32 steps with
# statistics), prints the statistics' cost per step and the recommended command line, then trains
# FP32 and the recommendation side by side for 300 steps with `ampc compare` (same seed, weights and
# batches) and prints the comparison table: its "end Δ" column is the FP32-vs-recommended difference of
# the final training loss (mean of the last 20 steps), "max Δ" the largest per-step difference.
#
# usage: bench/doctor_targets.sh PATH/TO/ampc [OUTDIR] [STEPS]   (Fashion-MNIST: Debian's
#        dataset-fashion-mnist; without it the MLP and CNN are skipped)
set -eu
AMPC=${1:?usage: doctor_targets.sh PATH/TO/ampc [OUTDIR] [STEPS]}
OUT=${2:-doctor-targets}
STEPS=${3:-300}
mkdir -p "$OUT"

one() { # NAME OPTIONS...
    name=$1
    shift
    echo "== $name: ampc doctor $*"
    "$AMPC" doctor "$@" --quiet --report "$OUT/$name-doctor" >"$OUT/$name-doctor.txt"
    head -1 "$OUT/$name-doctor.txt"
    grep -A1 '^recommended:' "$OUT/$name-doctor.txt" | tail -1
    grep '^FP16:' "$OUT/$name-doctor.txt"
    # the recommendation as a comparison against FP32: `ampc train ... --precision fp16 ...` becomes
    # `ampc compare ... --precisions fp32,fp16 ...`
    rec=$(grep -A1 '^recommended:' "$OUT/$name-doctor.txt" | tail -1 | sed -e 's/^ *ampc train//' \
        -e 's/--precision fp16/--precisions fp32,fp16/')
    echo "-- ampc compare$rec --steps $STEPS"
    eval "\"\$AMPC\" compare $rec --steps $STEPS --quiet --report \"\$OUT/\$name-compare\"" | tee "$OUT/$name-compare.txt"
}

one gpt
if "$AMPC" doctor --model mlp --data fashion-mnist --steps 1 --quiet >/dev/null 2>&1; then
    one mlp --model mlp --data fashion-mnist
    one cnn --model cnn --data fashion-mnist
else
    echo "Fashion-MNIST not found: MLP and CNN skipped (apt-get install dataset-fashion-mnist)"
fi
