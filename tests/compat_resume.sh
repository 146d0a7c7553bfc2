#!/bin/sh
# compat_resume.sh AMPC FIXTURES: a checkpoint written by an earlier release loads in this one and the
# run continues exactly as it did there. FIXTURES (tests/fixtures/v0.1.0) holds what ampc 0.1.0 wrote:
#   gpt     1 layer, d 16, FP16 autocast + GradScaler (skipped steps and growth on both sides of step 12),
#           dropout 0.1, AdamW, 1 thread
#   simple  the tutorials' SimpleModel, BF16 parameters with F32 masters, SGD with momentum, 1 thread
# as a checkpoint at step 12 (*-step00000012.st) and, resumed from it by 0.1.0 for the remaining 12
# steps, the JSONL log (*-resumed*.jsonl) and the step-24 checkpoint (*-step00000024*.st). This build
# resumes each step-12 file; its step records and final evaluation must equal 0.1.0's (all fields but the
# timing ones and peak_bytes), and its step-24 checkpoint must hold the same tensors (the payload
# checksum) and metadata as 0.1.0's, but for the library version and the keys 0.1.0 did not write.
# The GPT's bits depend on the kernel level (other GEMM and attention kernels), so it has one expectation
# per level: ref, avx512 and amx; the avx2 level adds only conversions, which are bit-identical to ref's
# by contract, so it shares ref's. The SimpleModel's are the same at every level. docs/TESTING.md says how
# the fixtures were made; a change that alters numerics on purpose regenerates them and says so.
# 0.1.0 chose its kernels by the fixed rule and its checkpoints record none (no ampc.kernels), so the
# resumed runs here choose by that rule too (AMPC_KERNEL_CHOICE=rule), not by this machine's measurement.
set -u
. "$(dirname "$0")/test_lib.sh" # ok, fail, test_tmpdir, ...
export AMPC_KERNEL_CHOICE=rule
AMPC=$1
FIX=$2
test_tmpdir compat
DIR=$TEST_TMP

# JSONL records, the final one included, without the fields that differ between processes.
all_records() { sed -E 's/,"(tokens_per_s|samples_per_s|peak_bytes|seconds)":[^,}]*//g' "$1"; }
# `ampc inspect --json` without the library version, the file name (which differs) and the keys 0.1.0 did
# not write (the commas at line ends go too: which line is last in an object depends on those keys).
summary() {
    "$AMPC" inspect --json "$1" |
        grep -v '"ampc.version"\|"file"\|"train.checkpoint\|"train.keep"\|"train.data\|"ampc.kernels"' |
        sed 's/,$//'
}

# The kernel level this process runs (AMPC_ISA may have lowered it).
level=$("$AMPC" info --json | sed -n '/"kernel_level"/,/}/s/.*"chosen": "\([a-z0-9]*\)".*/\1/p')
case "$level" in
ref | avx2) gpt_level=.ref ;;
avx512 | amx) gpt_level=.$level ;;
*) echo "compat_resume: unknown kernel level '$level'"; exit 1 ;;
esac

for run in gpt simple; do
    want=""
    [ "$run" = gpt ] && want=$gpt_level
    "$AMPC" train --resume "$FIX/$run-step00000012.st" --checkpoint "$DIR/$run.st" --log "$DIR/$run.jsonl" \
        --quiet > "$DIR/$run.out" 2>&1 || { fail "$run: resume of the 0.1.0 checkpoint: $(cat "$DIR/$run.out")"; continue; }
    all_records "$FIX/$run-resumed$want.jsonl" > "$DIR/$run.want"
    all_records "$DIR/$run.jsonl" > "$DIR/$run.got"
    if [ "$(wc -l < "$DIR/$run.got")" -eq 13 ] && cmp -s "$DIR/$run.want" "$DIR/$run.got"; then
        ok "$run: steps 12..23 and the final evaluation equal 0.1.0's (kernel level $level)"
    else
        fail "$run: the resumed run differs from 0.1.0's"
        diff "$DIR/$run.want" "$DIR/$run.got" | head -6
    fi
    summary "$FIX/$run-step00000024$want.st" > "$DIR/$run.want.st"
    summary "$DIR/$run.st" > "$DIR/$run.got.st"
    if cmp -s "$DIR/$run.want.st" "$DIR/$run.got.st"; then ok "$run: the step-24 checkpoint equals 0.1.0's"
    else fail "$run: the step-24 checkpoint differs from 0.1.0's"; diff "$DIR/$run.want.st" "$DIR/$run.got.st" | head -6; fi
done
test_summary passed
