#!/bin/sh
# device_scaling.sh: the many-core CPU measurements in one call, for a machine lent for a few minutes
# (the 16-core Xeon beside the GPU). Builds a Release tree with every core, checks that the tests which
# compare thread counts still pass there (they cannot fail on two cores the way they can on sixteen),
# then runs bench/scaling.sh (ampc and PyTorch interleaved at 1, 2, 4, ... threads, batches 8 and 32)
# with the per-operation profiles, and `ampc bench gemm` at all threads. Everything lands under OUT.
#
#   OUT=/tmp/out bench/device_scaling.sh            (the device tool sets OUT; default ./device-out)
#   QUICK=1 ...                                      one round, batch 8 only (about half the time)
#
# A benchmark: it reports; only a failed build or a failed thread-count test makes it exit non-zero.
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
cpus=$(nproc)
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUT/summary.txt"; }
log "device_scaling: $cpus CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 &&
    cmake --build build-device -j"$cpus" >"$OUT/build.log" 2>&1 || {
    log "build failed (see build.log)"
    exit 1
}
./build-device/ampc info >"$OUT/info.txt" 2>&1
# the tests whose results must not depend on the thread count, at this machine's thread counts
if ctest --test-dir build-device -j"$cpus" -R 'test_profile|test_autograd|test_conv_chunks|test_gemm|test_amx|test_attention_fast|test_stochastic_rounding|test_optim_device|test_grad_accum' \
    >"$OUT/ctest.log" 2>&1; then
    log "thread-count tests passed"
else
    log "thread-count tests FAILED (see ctest.log)"
    exit 1
fi
rounds=2 batches="8 32"
[ "${QUICK:-0}" = 1 ] && rounds=1 batches=8
ROUNDS=$rounds STEPS=4 BATCHES=$batches PROFILE_DIR="$OUT/profiles" TORCH_PYTHONS="${TORCH_PYTHONS:-python3}" \
    bench/scaling.sh build-device/ampc >"$OUT/scaling.txt" 2>&1
log "scaling done"
./build-device/ampc bench gemm --threads "$cpus" --max 2048 --no-pack >"$OUT/gemm-$cpus.txt" 2>&1
log "gemm done; files: $(ls "$OUT" | tr '\n' ' ')"
