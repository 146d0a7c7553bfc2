#!/bin/sh
# dist_netns.sh AMPC [MPIRUN]: data-parallel training across two "hosts" on one machine.
#
# Two network namespaces joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24, loopback up in each) play
# two hosts. mpirun runs in the first namespace with -H 10.77.0.1,10.77.0.2: it recognises 10.77.0.1 as
# its own address and starts rank 0 itself; for 10.77.0.2 it calls its rsh agent, which here is a small
# script (plm_rsh_agent) that runs `ip netns exec NS sh -c COMMAND` instead of ssh, so no ssh server is
# needed. The MPI traffic is confined to the veth: pml ob1 with the btl tcp,self only (no shared memory),
# btl_tcp_if_include and oob_tcp_if_include set to the subnet.
#
# Checks: the 2-rank run finishes, its log has 5 step records, its losses equal those of the same run with
# 2 ranks on one host over shared memory (btl vader,self) within 1e-6 relative (the same reduction, so in
# practice the same bits, and so the checkpoint payloads' CRC-32), and each veth end sent at least the
# gradient bytes of the 5 all-reduces (for 2 ranks an all-reduce sends at least the buffer from each rank).
# The namespaces are removed on every exit (trap). Exits 77 (SKIP) when the machine does not allow
# namespaces or veths (not root, no `ip`, `ip netns add` or `ip link add type veth` refused) or when
# mpirun is not Open MPI, saying what was refused.
set -u
. "$(dirname "$0")/test_lib.sh" # skip, fail_now, test_tmpdir, ...
AMPC=$1
case $AMPC in /*) ;; *) AMPC=$(pwd)/$AMPC ;; esac   # the runs start in a folder of their own
MPIRUN=${2:-mpirun}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The runs compare bits, so both use the fixed kernel choice (no measurement that could differ between them).
export AMPC_KERNEL_CHOICE=rule

[ "$(id -u)" = 0 ] || skip "not root (uid $(id -u)): creating network namespaces and veth pairs needs root"
command -v ip > /dev/null 2>&1 || skip "no 'ip' command (iproute2) to create network namespaces"
command -v "$MPIRUN" > /dev/null 2>&1 || skip "no mpirun ($MPIRUN)"
"$MPIRUN" --version 2>/dev/null | grep -Eq "Open MPI|OpenRTE" || skip "$MPIRUN is not Open MPI (the test uses its rsh agent and MCA parameters)"

NSA=ampc-a-$$
NSB=ampc-b-$$
VA=ampca$$
VB=ampcb$$
# Before the folder goes at exit (test_tmpdir): anything of this test still running, and the namespaces.
test_exit_hook() {
    for ns in "$NSA" "$NSB"; do
        # Anything of this test still running in its namespaces (only this test's processes are there).
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null    # removes the veth end inside it, and so the pair
    done
    ip link del "$VA" 2>/dev/null         # a pair not yet moved into the namespaces
}
test_tmpdir netns
DIR=$TEST_TMP

err=$(ip netns add "$NSA" 2>&1) || skip "'ip netns add $NSA' refused: $err"
err=$(ip netns add "$NSB" 2>&1) || skip "'ip netns add $NSB' refused: $err"
err=$(ip link add "$VA" type veth peer name "$VB" 2>&1) || skip "'ip link add $VA type veth peer name $VB' refused: $err"
err=$( { ip link set "$VA" netns "$NSA" && ip link set "$VB" netns "$NSB" &&
         ip -n "$NSA" addr add 10.77.0.1/24 dev "$VA" && ip -n "$NSB" addr add 10.77.0.2/24 dev "$VB" &&
         ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up &&
         ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up; } 2>&1) ||
    skip "configuring the veth pair in the namespaces was refused: $err"
err=$(ip netns exec "$NSA" cat "/sys/class/net/$VA/statistics/tx_bytes" 2>&1) ||
    skip "'ip netns exec $NSA' refused: $err"

# The rsh agent: mpirun calls `AGENT [options] HOST COMMAND...` and expects ssh's behaviour (COMMAND is one
# shell command line, run on HOST).
cat > "$DIR/agent.sh" << EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
echo "\$host" >> "$DIR/agent.log"
case "\$host" in
    10.77.0.1) ns=$NSA ;;
    10.77.0.2) ns=$NSB ;;
    *) echo "agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$DIR/agent.sh"

STEPS=5
TRAIN="train --layers 1 --d-model 32 --heads 4 --context 16 --batch 8 --steps $STEPS --threads 1 --quiet --reduce-dtype fp32 --dist-timeout 30"
cd "$DIR" || fail_now "cd $DIR"

# 1. The reference: 2 ranks on this host over shared memory.
# shellcheck disable=SC2086 # $TRAIN is split into words on purpose
timeout 45 "$MPIRUN" --oversubscribe -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    "$AMPC" $TRAIN --log local.jsonl --checkpoint local.st > local.out 2>&1 ||
    { cat local.out; fail_now "2 ranks on one host (shared memory) failed"; }

# 2. The same run across the namespaces.
txa0=$(ip netns exec "$NSA" cat "/sys/class/net/$VA/statistics/tx_bytes")
txb0=$(ip netns exec "$NSB" cat "/sys/class/net/$VB/statistics/tx_bytes")
t0=$(date +%s.%N)
# shellcheck disable=SC2086
timeout 45 ip netns exec "$NSA" "$MPIRUN" -np 2 -H 10.77.0.1,10.77.0.2 --bind-to none \
    --mca plm_rsh_agent "$DIR/agent.sh" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    "$AMPC" $TRAIN --log ns.jsonl --checkpoint ns.st > ns.out 2>&1
rc=$?
t1=$(date +%s.%N)
txa1=$(ip netns exec "$NSA" cat "/sys/class/net/$VA/statistics/tx_bytes")
txb1=$(ip netns exec "$NSB" cat "/sys/class/net/$VB/statistics/tx_bytes")
cat ns.out
[ $rc = 0 ] || fail_now "mpirun across the namespaces exited with $rc"
echo "ok: 2 ranks across two namespaces finished in $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}') s"
grep -qx "10.77.0.2" agent.log 2>/dev/null || fail_now "mpirun never called the agent for 10.77.0.2 (rank 1 not in $NSB)"

n=$(grep -c '"step":' ns.jsonl 2>/dev/null)
[ "$n" = $STEPS ] || fail_now "ns.jsonl has ${n:-no} step records, expected $STEPS"
grep -q '"final":true' ns.jsonl || fail_now "ns.jsonl has no final record"
[ -s ns.st ] || fail_now "no checkpoint ns.st"
echo "ok: $STEPS step records and a checkpoint"

losses() { grep '"step":' "$1" | sed 's/.*"loss":\([^,}]*\).*/\1/'; }
losses local.jsonl > l1
losses ns.jsonl > l2
[ "$(wc -l < l1)" = $STEPS ] || fail_now "local.jsonl has $(wc -l < l1) step records"
paste l1 l2 | awk '{ d = $1 - $2; if (d < 0) d = -d; m = ($1 < 0 ? -$1 : $1); if (d > 1e-6 * m) bad = 1;
                     printf "  step %d: shared memory %s, namespaces %s\n", NR - 1, $1, $2 }
                   END { exit bad }' || fail_now "losses differ by more than 1e-6 relative"
echo "ok: the losses equal those over shared memory (1e-6 relative)"

# The checkpoint's safetensors header: the model's tensors (not optim.*) are the gradient bytes reduced per
# step (F32 parameters, --reduce-dtype fp32).
header() { dd if="$1" bs=1 skip=8 count="$(od -An -tu8 -N8 "$1" | tr -d ' ')" 2>/dev/null; }
gbytes=$(header ns.st | grep -o '"[^"]*":{"dtype":"[A-Z0-9]*","shape":\[[0-9,]*\],"data_offsets":\[[0-9]*,[0-9]*\]}' |
         grep -v '^"optim\.' | sed 's/.*"data_offsets":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/' |
         awk '{ s += $2 - $1 } END { print s + 0 }')
[ "$gbytes" -gt 0 ] || fail_now "could not read the parameter sizes from ns.st's header"
crc1=$(header local.st | grep -o '"ampc.payload_crc32":"[0-9a-f]*"')
crc2=$(header ns.st | grep -o '"ampc.payload_crc32":"[0-9a-f]*"')
if [ -n "$crc1" ]; then
    [ "$crc1" = "$crc2" ] || fail_now "checkpoint payloads differ: shared memory $crc1, namespaces $crc2"
    echo "ok: the checkpoints' payloads are equal ($crc2)"
fi

need=$((gbytes * STEPS))
sa=$((txa1 - txa0))
sb=$((txb1 - txb0))
echo "  veth tx bytes: $NSA $sa, $NSB $sb; gradient bytes $gbytes per step, $need in $STEPS steps"
[ $sa -ge $need ] || fail_now "$VA sent $sa bytes, less than the $need gradient bytes: the traffic did not go over the veth"
[ $sb -ge $need ] || fail_now "$VB sent $sb bytes, less than the $need gradient bytes: the traffic did not go over the veth"
echo "ok: the gradient traffic went over the veth pair"
echo "PASS"
