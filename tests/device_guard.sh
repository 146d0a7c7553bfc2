#!/bin/sh
# device_guard.sh: the CLI's flows on the guard device (the CPU's kernels on memory the host may not touch
# outside the device's own calls) must give the CPU device's bits exactly: every JSONL field but the
# timings and memory figures, the checkpoints' tensors, the doctor's statistics, a resume across devices
# (a checkpoint written on one loads on the other and continues bit for bit), and mpirun -np 2. Any host
# access to tensor memory that bypasses the device crashes the guard run, and the comparison fails.
#
#   sh tests/device_guard.sh AMPC MAKE_FASHION ST_DIFF [MPIEXEC]
set -u
. "$(dirname "$0")/test_lib.sh"
AMPC=${1:?usage: device_guard.sh AMPC MAKE_FASHION ST_DIFF [MPIEXEC]}
MAKE_FASHION=${2:?}
ST_DIFF=${3:?}
MPIEXEC=${4:-}
test_tmpdir guard
test_kernel_cache # both devices must run the same kernels: one measurement for every process
TMP=$TEST_TMP

# The JSONL lines without the fields that measure time or memory (the only ones allowed to differ).
strip() { strip_timing <"$1" | sed -E 's/,"seconds":[^,}]*//'; }

# pair NAME ARGS...: `ampc ARGS --device cpu|guard --log FILE`, both must succeed and log the same lines.
pair() {
    name=$1
    shift
    for dev in cpu guard; do
        if ! "$AMPC" "$@" --device "$dev" --log "$TMP/$name.$dev.jsonl" --quiet >"$TMP/$name.$dev.out" 2>&1; then
            fail "$name on $dev: ampc $* exited $?"
            sed 's/^/    /' "$TMP/$name.$dev.out" | tail -5
            return
        fi
    done
    strip "$TMP/$name.cpu.jsonl" >"$TMP/$name.cpu.s"
    strip "$TMP/$name.guard.jsonl" >"$TMP/$name.guard.s"
    if ! cmp -s "$TMP/$name.cpu.s" "$TMP/$name.guard.s"; then
        fail "$name: the guard device's log differs from the CPU's"
        diff "$TMP/$name.cpu.s" "$TMP/$name.guard.s" | head -6 | sed 's/^/    /'
        return
    fi
    ok "$name ($(lines "$TMP/$name.cpu.jsonl") log lines equal)"
}

GPT="train --layers 2 --d-model 32 --heads 2 --context 16 --batch 4 --steps 4 --threads 2 --seed 5"
FM="$TMP/fm"
mkdir -p "$FM" && "$MAKE_FASHION" "$FM" 256 64 || fail "make_fashion"
MLP="train --model mlp --data fashion-mnist:$FM --hidden 64,32 --batch 16 --steps 4 --threads 2 --seed 5"
CNN="train --model cnn --data fashion-mnist:$FM --batch 8 --steps 3 --threads 2 --seed 5"

# ---- the models in every precision, with the GradScaler and clipping ----
for p in fp32 bf16 fp16 fp8; do pair "gpt-$p" $GPT --precision "$p" --clip 1.0; done
pair gpt-fp16-overflow $GPT --precision fp16 --init-scale 1e30 --clip 0.5
pair gpt-fp8-current $GPT --precision fp8 --fp8-scaling current
pair gpt-sr $GPT --precision bf16 --param-dtype bf16 --master none --stochastic-rounding
pair gpt-modules $GPT --precision fp16 --module-precision 'blocks.*.attn=fp32' --optimizer sgd --momentum 0.9
pair gpt-anomaly $GPT --precision bf16 --check-finite
pair gpt-accum $GPT --precision fp16 --batch 2 --grad-accum 3
for p in fp32 bf16 fp16 fp8; do pair "mlp-$p" $MLP --precision "$p" --clip 1.0; done
for p in fp32 bf16 fp16 fp8; do pair "cnn-$p" $CNN --precision "$p" --clip 1.0; done
pair mlp-f16-params $MLP --precision fp16 --param-dtype f16 --optimizer sgd --momentum 0.9

# section_ok MESSAGE: "ok: MESSAGE" when the section since the last mark added no failure.
MARK=0
section_ok() {
    [ "$FAILS" -eq "$MARK" ] && ok "$1"
    MARK=$FAILS
}

# ---- checkpoints: written on either device, resumed on either, the same bits ----
MARK=$FAILS
for dev in cpu guard; do
    "$AMPC" $GPT --precision fp16 --steps 2 --device "$dev" --checkpoint "$TMP/ck-$dev.st" --quiet >/dev/null 2>&1 ||
        fail "checkpoint on $dev"
done
"$ST_DIFF" --all 0 "$TMP/ck-cpu.st" "$TMP/ck-guard.st" >"$TMP/stdiff.out" 2>&1 ||
    { fail "the checkpoints written on cpu and guard differ"; head -5 "$TMP/stdiff.out"; }
for from in cpu guard; do
    for to in cpu guard; do
        cp "$TMP/ck-$from.st" "$TMP/r-$from-$to.st"
        "$AMPC" $GPT --precision fp16 --device "$to" --resume "$TMP/r-$from-$to.st" --checkpoint "$TMP/r-$from-$to.st" \
            --log "$TMP/r-$from-$to.jsonl" --quiet >/dev/null 2>&1 || fail "resume of a $from checkpoint on $to"
    done
done
for r in cpu-guard guard-cpu guard-guard; do
    strip "$TMP/r-$r.jsonl" >"$TMP/r.s"
    strip "$TMP/r-cpu-cpu.jsonl" | cmp -s - "$TMP/r.s" || fail "resume $r: its log differs from cpu-cpu's"
    "$ST_DIFF" --all 0 "$TMP/r-cpu-cpu.st" "$TMP/r-$r.st" >/dev/null 2>&1 || fail "resume $r: its checkpoint differs"
done
section_ok "checkpoints and resume across devices"

# ---- compare and doctor ----
for dev in cpu guard; do
    "$AMPC" compare --layers 1 --d-model 32 --heads 2 --context 16 --batch 4 --steps 3 --threads 2 --device "$dev" \
        --report "$TMP/cmp-$dev" --quiet >/dev/null 2>&1 || fail "compare on $dev"
    "$AMPC" doctor --layers 1 --d-model 32 --heads 2 --context 16 --batch 4 --steps 2 --threads 2 --device "$dev" \
        --json >"$TMP/doc-$dev.json" 2>"$TMP/doc-$dev.err" || fail "doctor on $dev"
done
for f in $(cd "$TMP/cmp-cpu" && ls ./*.jsonl 2>/dev/null); do
    strip "$TMP/cmp-cpu/$f" >"$TMP/c1" && strip "$TMP/cmp-guard/$f" >"$TMP/c2" && cmp -s "$TMP/c1" "$TMP/c2" ||
        fail "compare: $f differs between the devices"
done
# timings, memory and the device itself (the suggested commands repeat --device) may differ
undevice() {
    sed -E 's/"([a-z_]*seconds|[a-z_]*per_s|stats_overhead|peak_bytes|device)":[^,}]*,?//g; s/ --device (cpu|guard)//g' "$1"
}
undevice "$TMP/doc-cpu.json" >"$TMP/d1"
undevice "$TMP/doc-guard.json" >"$TMP/d2"
cmp -s "$TMP/d1" "$TMP/d2" || { fail "doctor: the statistics differ between the devices"; diff "$TMP/d1" "$TMP/d2" | head -4; }
section_ok "compare and doctor"

# ---- data parallel ----
if [ -n "$MPIEXEC" ]; then
    for dev in cpu guard; do
        for shard in none optimizer full; do
            $MPIEXEC -np 2 "$AMPC" $GPT --precision bf16 --grad-accum 2 --shard "$shard" --device "$dev" --log "$TMP/mpi-$dev-$shard.jsonl" \
                --quiet >"$TMP/mpi.out" 2>&1 || { fail "mpirun -np 2 on $dev, shard $shard"; tail -3 "$TMP/mpi.out"; }
        done
    done
    for shard in none optimizer full; do
        strip "$TMP/mpi-cpu-$shard.jsonl" >"$TMP/m1" && strip "$TMP/mpi-guard-$shard.jsonl" >"$TMP/m2" &&
            cmp -s "$TMP/m1" "$TMP/m2" || fail "mpirun -np 2, shard $shard: the logs differ between the devices"
    done
    section_ok "mpirun -np 2 with --grad-accum 2 (shard none, optimizer and full)"
fi

test_summary "every flow gives the CPU's bits on the guard device"
