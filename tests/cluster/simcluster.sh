#!/usr/bin/env bash
# A simulated cluster on one machine, for fault injection: N "nodes" under a real mpirun,
# each rank its own host (its own UTS namespace and host name, sim-node0 ...) with its own
# address (127.0.1.<rank+1>), all inside a private network namespace whose loopback shapes
# the traffic per node and per link with tc (HTB classes and u32 filters on the source and
# destination addresses). Any one link or node can be degraded on its own:
#
#   simcluster.sh [--nodes N] [--rate RATE] [--slow-link A-B[:RATE]]... [--slow-node A[:RATE]]...
#                 [--slow-dir A>B[:RATE]]... [--groups G --cross-rate RATE] -- COMMAND [ARGS...]
#
# runs `mpirun -np N COMMAND ARGS... --bind-addr 127.0.1.<rank+1>` in the namespace, every
# rank as host sim-node<rank>. Healthy links get RATE each way (default 1gbit: steady
# figures on a busy 2-core machine), a slow node's traffic in and out and a slow link's
# traffic both ways get their own rate (default 50mbit: a link that trained low), and a
# slow direction only the traffic from node A to node B (a bad transmitter or receiver:
# B to A stays healthy; quote it, `>` is the shell's). With --groups G the nodes fall
# into G contiguous groups (node i in group i*G/N, a leaf switch each), and all traffic
# between nodes of different groups shares ONE class of --cross-rate (default 100mbit): an
# oversubscribed spine, where congestors and canaries of different leaves queue together.
# The namespace is removed on exit; the exit code is the command's.
#
# Why this shape: OpenMPI's launcher reaches its ranks over loopback, so ranks in other
# network namespaces do not start (design.md); here the launcher and every rank share one
# namespace, and only the addresses tell the nodes apart. The host kernel here has HTB,
# TBF and the u32 classifier but no netem, so degradation is by rate (which also delays
# small messages: 130 bytes at 50 Mbit/s take 21 us on the wire). Loss is tested in the
# Soft-RoCE VMs, whose kernel has netem. Needs root (ip netns, unshare --uts).
set -euo pipefail

if [ "${1:-}" = "__node" ]; then
  # One rank: become host sim-node<rank> and run the command from its own address.
  shift
  r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}
  exec unshare --uts sh -c 'hostname "sim-node$1"; shift; exec "$@"' sh "$r" "$@" \
    --bind-addr "127.0.1.$((r + 1))"
fi

nodes=6 rate=1gbit slow_links=() slow_nodes=() slow_dirs=() groups=0 cross_rate=100mbit
usage() { sed -n '2,27p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --slow-link) slow_links+=("$2"); shift 2 ;;
    --slow-node) slow_nodes+=("$2"); shift 2 ;;
    --slow-dir) slow_dirs+=("$2"); shift 2 ;;
    --groups) groups=$2; shift 2 ;;
    --cross-rate) cross_rate=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "simcluster: unknown option $1" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "simcluster: no command after --" >&2; usage; }
[ "$(id -u)" -eq 0 ] || { echo "simcluster: needs root (ip netns, unshare --uts)" >&2; exit 2; }
[[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 2 ] && [ "$nodes" -le 250 ] ||
  { echo "simcluster: --nodes must be 2..250" >&2; exit 2; }

[[ "$groups" =~ ^[0-9]+$ ]] && { [ "$groups" -eq 0 ] || { [ "$groups" -ge 2 ] && [ "$groups" -le "$nodes" ]; }; } ||
  { echo "simcluster: --groups must be 2..$nodes (the node count)" >&2; exit 2; }

ns="fabsim-$$"
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
inns() { ip netns exec "$ns" "$@"; }
inns ip link set lo up
ip_of() { echo "127.0.1.$(($1 + 1))"; }
check_node() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$nodes" ] ||
    { echo "simcluster: node $1 is not one of 0..$((nodes - 1))" >&2; exit 2; }
}

# Root HTB: unshaped by default (MPI's own traffic on 127.0.0.1), one class per node for
# its outgoing traffic at the healthy rate, faster-matching filters for slow links first.
inns tc qdisc add dev lo root handle 1: htb default 1
inns tc class add dev lo parent 1: classid 1:1 htb rate 100gbit quantum 60000
class=100
shape() { # shape CLASSID RATE
  inns tc class add dev lo parent 1: classid "1:$1" htb rate "$2" ceil "$2" quantum 1514
}
match() { # match PRIO CLASSID u32-selectors...
  local prio=$1 cls=$2; shift 2
  inns tc filter add dev lo parent 1: protocol ip prio "$prio" u32 "$@" flowid "1:$cls"
}
for spec in "${slow_links[@]}"; do
  pair=${spec%%:*} r=slow; [ "$pair" != "$spec" ] && r=${spec#*:}; [ "$r" = slow ] && r=50mbit
  a=${pair%-*} b=${pair#*-}
  check_node "$a"; check_node "$b"
  [ "$a" != "$b" ] || { echo "simcluster: --slow-link $spec joins a node to itself" >&2; exit 2; }
  class=$((class + 1)); shape $class "$r"
  match 2 $class match ip src "$(ip_of "$a")/32" match ip dst "$(ip_of "$b")/32"
  class=$((class + 1)); shape $class "$r"
  match 2 $class match ip src "$(ip_of "$b")/32" match ip dst "$(ip_of "$a")/32"
  echo "simcluster: link sim-node$a <-> sim-node$b limited to $r" >&2
done
for spec in "${slow_dirs[@]}"; do
  pair=${spec%%:*} r=50mbit; [ "$pair" != "$spec" ] && r=${spec#*:}
  [[ "$pair" == *">"* ]] || { echo "simcluster: --slow-dir $spec is not A>B" >&2; exit 2; }
  a=${pair%%>*} b=${pair#*>}
  check_node "$a"; check_node "$b"
  [ "$a" != "$b" ] || { echo "simcluster: --slow-dir $spec joins a node to itself" >&2; exit 2; }
  # Only what A sends to B; B's traffic to A keeps the healthy rate. A shallow queue, as
  # a switch port has: HTB's default leaf holds 1000 of loopback's 64 KiB packets, seconds
  # at 50 Mbit/s, and the acknowledgements of B's data to A, which pass here, would wait
  # behind them and slow B -> A too.
  class=$((class + 1)); shape $class "$r"
  inns tc qdisc add dev lo parent "1:$class" handle "$class:" bfifo limit 128kb
  match 2 $class match ip src "$(ip_of "$a")/32" match ip dst "$(ip_of "$b")/32"
  echo "simcluster: direction sim-node$a -> sim-node$b limited to $r" >&2
done
for spec in "${slow_nodes[@]}"; do
  n=${spec%%:*} r=50mbit; [ "$n" != "$spec" ] && r=${spec#*:}
  check_node "$n"
  # Everything the node receives, whoever sends it, shares its slow ingress class.
  class=$((class + 1)); shape $class "$r"
  match 3 $class match ip dst "$(ip_of "$n")/32"
  class=$((class + 1)); shape $class "$r"
  match 3 $class match ip src "$(ip_of "$n")/32"
  echo "simcluster: node sim-node$n limited to $r in and out" >&2
done
if [ "$groups" -gt 0 ]; then
  # The spine: one shared class, matched before the per-node classes, for every pair of
  # nodes on different leaves.
  class=$((class + 1)); spine=$class; shape $spine "$cross_rate"
  for ((a = 0; a < nodes; a++)); do
    for ((b = 0; b < nodes; b++)); do
      [ $((a * groups / nodes)) -ne $((b * groups / nodes)) ] || continue
      match 1 $spine match ip src "$(ip_of $a)/32" match ip dst "$(ip_of $b)/32"
    done
  done
  echo "simcluster: $groups groups, cross-group traffic shares $cross_rate" >&2
fi
for ((i = 0; i < nodes; i++)); do
  class=$((class + 1)); shape $class "$rate"
  match 4 $class match ip src "$(ip_of $i)/32"
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
set +e
inns mpirun --oversubscribe --bind-to none -np "$nodes" "$(realpath "$0")" __node "$@"
code=$?
exit $code
