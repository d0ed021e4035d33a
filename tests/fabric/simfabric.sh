#!/usr/bin/env bash
# A simulated rail-optimised leaf-spine fabric on one machine (as root), for the tests and for
# anyone who wants to inject a fault by hand:
#
#   simfabric.sh --groups G --nodes-per-group N --rails R --spines S [--rate RATE]
#       [--uplink-rate RATE] [--slow-uplink LEAF:SPINE[:RATE]] [--slow-leaf LEAF[:RATE]]
#       [--swap-cables NODE:RAIL,RAIL] [--move-nic NODE:RAIL:GROUP] [--wrong-port NODE:RAIL]
#       [--slow-dir NODE>NODE[:RATE]] [--tenant NAME:VLAN:NODE,NODE,...]
#       [--leak-vlan NODE:RAIL:VLAN] [--leak-route NODE,NODE] [--plan-out FILE]
#       [--driver [--slurm | --agents BINDIR]] -- COMMAND [ARGS...]
#
# Every node (g<group>n<index>) is a network namespace with interfaces rail0..rail<R-1> and
# mgmt0; every leaf (leaf-r<rail>-g<group>) a namespace with one bridge whose ports toward the
# nodes are swp1, swp2, ... and whose routed uplinks toward the spines are up0, up1, ...; every
# spine (spine<k>) a router namespace. The leaves route (each leaf's bridge is the gateway of
# its own /24) and send everything else over ECMP multipath routes across the spines, hashed on
# L4 ports (fib_multipath_hash_policy=1). Node links run at --rate (default 1gbit), each
# leaf-to-spine link at --uplink-rate (default: --rate x --nodes-per-group, so nothing is
# oversubscribed and no ECMP collision slows a flow), both shaped with HTB on both ends.
# lldpd runs in every leaf and node (1 s transmit interval; the leaf's port id is its interface
# name); the fabric is ready when every node sees its leaves.
#
# COMMAND runs as one mpirun over every node, one rank per rail (local rank r = rail r), each
# rank in its node's namespace with host name = node name, given `--bind-addr <its rail's
# address>` as its last arguments and FABCHECK_LLDPD_SOCKET = its node's lldpd socket. mpirun
# runs in the management namespace and reaches the nodes over the management bridge
# (198.19.255.0/24) through an rsh agent that enters the node's namespace instead of ssh.
# With --driver, COMMAND instead runs once, in the management namespace, as a driver that
# launches its own mpirun jobs (fabcheck accept): it gets FABCHECK_SIM_HOSTFILE (every node
# with a slot per rail), FABCHECK_SIM_WRAP (the rank wrapper to put before each tool: rail
# by local rank, --bind-addr for bench-lat/bench-bw/bench-congestion) and Open MPI's MCA
# settings for the nodes' namespaces in its environment.
# With --driver --slurm, the driver runs inside an allocation of every node of a private
# Slurm cluster whose nodes are the fabric's nodes (tests/slurm/cluster.sh: slurmctld and
# munged in the management namespace, one slurmd in each node's namespace with its host name,
# reached over the management bridge), so its jobs are srun steps across the nodes, as in a
# Slurm cluster's nightly job.
# With --driver --agents BINDIR, every node runs BINDIR's `bench-bw --serve` and `bench-lat
# --serve`, one of each per rail (data bound to the rail's address, control on the node's
# management address, ports 18600+rail and 18700+rail), before the driver starts: it gets
# FABCHECK_SIM_BW_AGENTS and FABCHECK_SIM_LAT_AGENTS (agents files, a node's agents its rails
# in order) and FABCHECK_SECRET (the agents' shared secret, made for this fabric).
# Exit code: COMMAND's; 2 for usage or environment errors. Everything is torn down on exit.
#
# Faults (each may be repeated; RATE defaults to 50mbit):
#   --slow-uplink LEAF:SPINE[:RATE]  that leaf-to-spine link, both directions
#   --slow-leaf LEAF[:RATE]          every port of that leaf (node ports and uplinks)
#   --swap-cables NODE:A,B           the node's rail A cable lands on rail B's leaf and back
#   --move-nic NODE:RAIL:GROUP       that NIC is cabled to GROUP's leaf of its rail (spare port)
#   --wrong-port NODE:RAIL           right leaf, wrong (spare) port: invisible to the data plane
#   --slow-dir A>B[:RATE]            only what node A sends to node B (its data; packets under
#                                    128 bytes, B's acknowledgements among them, pass)
#
# Tenants (--tenant, up to 4; the nodes of none stay in the default network):
#   --tenant NAME:VLAN:NODES         NODES (comma-separated) rent the fabric as NAME. On every
#                                    leaf the tenant's VLAN (2..4094) is a bridge of its own
#                                    (brvVLAN; this kernel has no 8021q) with its own /27, and
#                                    its VRF is a routing table of its own on the leaves and the
#                                    spines (chosen by the bridge it came from, on a spine by
#                                    the tenant's source addresses; this kernel has no vrf
#                                    module) that reaches only the tenant's subnets; one shaped
#                                    uplink still carries every tenant (shared uplinks)
#   --leak-vlan NODE:RAIL:VLAN       breach: that NIC's leaf port is put in VLAN instead of
#                                    its tenant's (an access port set wrong; the NIC takes an
#                                    address there, as DHCP would give it)
#   --leak-route A,B                 breach: every spine leaks host routes between A's and
#                                    B's VRFs for A's and B's addresses (nodes of two tenants
#                                    in two groups): A and B reach each other
# A NIC gets its address from the leaf it lands on (as DHCP or a routed fabric would), so a
# mis-cabled NIC still carries data and the fault shows in hop classes and in LLDP.
# --plan-out FILE writes the INTENDED fabric (no faults) in fabcheck's native plan format,
# with --rate and --uplink-rate as the NICs' and uplinks' rate_gbit_s (a sweep given that plan
# holds an oversubscribed group's cross-spine pairs per round to what its uplinks carry).
# Documentation: docs/simfabric.md.
set -euo pipefail

me=$(realpath "$0")
die() { echo "simfabric: $*" >&2; exit 2; }

# --- inside a node: the rsh agent and the rank wrapper ------------------------------------
if [ "${1:-}" = "__agent" ]; then
  # Called by mpirun's rsh launcher as `AGENT [ssh options...] NODE COMMAND...`: enter the
  # node's namespace with its own host name and run the command line as sshd's shell would.
  shift
  prefix=$1; shift
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  node=$1; shift
  exec ip netns exec "$prefix-$node" unshare --uts sh -c 'hostname "$0"; exec sh -c "$*"' "$node" "$@"
fi
if [ "${1:-}" = "__enter" ]; then
  # `__enter PREFIX PLACE CMD...`: CMD in that namespace with PLACE as its host name (how
  # the private Slurm cluster of --slurm starts its daemons and clients).
  # `ip netns exec` mounts a fresh /sys for the namespace, without the host's cgroup
  # hierarchies, and slurmd will not start without them: they are mounted again there as
  # the host has them (v1, hybrid or v2).
  shift
  prefix=$1 place=$2
  shift 2
  exec ip netns exec "$prefix-$place" unshare --uts sh -c '
    hostname "$0"
    awk '\''{ for (i = 7; $i != "-"; i++); if ($(i+1) ~ /^cgroup2?$/ || ($5 == "/sys/fs/cgroup" && $(i+1) == "tmpfs")) print $5, $(i+1), $(i+3) }'\'' /proc/1/mountinfo |
      while read -r mp fs opts; do mkdir -p "$mp" && mount -t "$fs" -o "$opts" "$fs" "$mp"; done
    exec "$@"' "$place" "$@"
fi
if [ "${1:-}" = "__rank" ]; then
  # One rank: local rank r measures over rail r, from that interface's address. (mpirun
  # says the local rank before the tool starts; srun's direct launch says it as SLURM_LOCALID.)
  shift
  run=$1; shift
  lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-0}}
  addr=$(ip -4 -o addr show dev "rail$lr" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
  [ -n "$addr" ] || { echo "simfabric: $(hostname) has no address on rail$lr" >&2; exit 2; }
  export FABCHECK_LLDPD_SOCKET="$run/lldpd-$(hostname).sock"
  # The point-to-point and load tools bind their data to the rail; the others (MPI
  # collectives over the management network, the audit) take the command as it is.
  case $(basename "$1") in
    bench-lat | bench-bw | bench-congestion) exec "$@" --bind-addr "$addr" ;;
    *) exec "$@" ;;
  esac
fi

usage() { sed -n '2,/^set -euo pipefail/{/^set -euo/!p}' "$me" >&2; exit 2; }
groups= npg= rails= spines= rate=1gbit uplink_rate= plan_out= driver=0 slurm=0 agents_bin=
slow_uplinks=() slow_leaves=() swaps=() moves=() wrongs=() slow_dirs=()
tenant_specs=() leak_vlans=() leak_routes=()
need() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) need "$@"; groups=$2; shift 2 ;;
    --nodes-per-group) need "$@"; npg=$2; shift 2 ;;
    --rails) need "$@"; rails=$2; shift 2 ;;
    --spines) need "$@"; spines=$2; shift 2 ;;
    --rate) need "$@"; rate=$2; shift 2 ;;
    --uplink-rate) need "$@"; uplink_rate=$2; shift 2 ;;
    --slow-uplink) need "$@"; slow_uplinks+=("$2"); shift 2 ;;
    --slow-leaf) need "$@"; slow_leaves+=("$2"); shift 2 ;;
    --swap-cables) need "$@"; swaps+=("$2"); shift 2 ;;
    --move-nic) need "$@"; moves+=("$2"); shift 2 ;;
    --wrong-port) need "$@"; wrongs+=("$2"); shift 2 ;;
    --slow-dir) need "$@"; slow_dirs+=("$2"); shift 2 ;;
    --tenant) need "$@"; tenant_specs+=("$2"); shift 2 ;;
    --leak-vlan) need "$@"; leak_vlans+=("$2"); shift 2 ;;
    --leak-route) need "$@"; leak_routes+=("$2"); shift 2 ;;
    --plan-out) need "$@"; plan_out=$2; shift 2 ;;
    --driver) driver=1; shift ;;
    --slurm) slurm=1; shift ;;
    --agents) need "$@"; agents_bin=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "simfabric: unknown option $1" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || die "no command after -- (for example: -- bench-bw --pattern all-pairs)"
[ "$slurm" = 0 ] || [ "$driver" = 1 ] || die "--slurm goes with --driver (the driver's jobs are srun steps)"
if [ -n "$agents_bin" ]; then
  [ "$driver" = 1 ] && [ "$slurm" = 0 ] || die "--agents goes with --driver and not with --slurm (the driver coordinates the agents)"
  for t in bench-bw bench-lat; do
    [ -x "$agents_bin/$t" ] || die "--agents $agents_bin: no $t there (give the directory of the built binaries, e.g. target/debug)"
  done
fi

# --- checks: sizes that fit, names that exist ----------------------------------------------
int_in() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
  die "$1 must be a whole number in $3..$4 (got '${2}')"; }
int_in --groups "$groups" 1 16
int_in --nodes-per-group "$npg" 1 64
int_in --rails "$rails" 1 8
int_in --spines "$spines" 1 16
[ $((groups * npg)) -ge 2 ] || die "the fabric needs at least 2 nodes (--groups x --nodes-per-group)"
[ $((groups * npg)) -le 200 ] || die "at most 200 nodes fit in the management /24"
check_rate() { [[ "$2" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
  die "$1 '$2' is not a tc rate (examples: 50mbit, 1gbit)"; }
check_rate --rate "$rate"
# Default uplinks: each carries a whole leaf (--rate x --nodes-per-group), so neither the
# spine layer's capacity nor two flows that ECMP hashes onto one spine slow anything: a clean
# fabric is clean. Oversubscription (and ECMP collisions) is a choice: give --uplink-rate.
if [ -z "$uplink_rate" ]; then
  [[ "$rate" =~ ^([0-9]+(\.[0-9]+)?)([a-z]+)$ ]]
  uplink_rate=$(awk -v x="${BASH_REMATCH[1]}" -v n="$npg" 'BEGIN { printf "%g", x * n }')${BASH_REMATCH[3]}
fi
check_rate --uplink-rate "$uplink_rate"

node_ok() { [[ "$1" =~ ^g([0-9]+)n([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "$groups" ] &&
  [ "${BASH_REMATCH[2]}" -lt "$npg" ] ||
  die "$2: node '$1' is not one of g0n0..g$((groups - 1))n$((npg - 1))"; }
rail_ok() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$rails" ] ||
  die "$2: rail '$1' is not one of 0..$((rails - 1))"; }
leaf_ok() { [[ "$1" =~ ^leaf-r([0-9]+)-g([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "$rails" ] &&
  [ "${BASH_REMATCH[2]}" -lt "$groups" ] ||
  die "$2: leaf '$1' is not one of leaf-r<0..$((rails - 1))>-g<0..$((groups - 1))>"; }
spine_ok() { [[ "$1" =~ ^spine([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "$spines" ] ||
  die "$2: spine '$1' is not one of spine0..spine$((spines - 1))"; }
node_group() { local x=${1#g}; echo "${x%%n*}"; }
node_index() { echo "${1##*n}"; }
split_rate() { # split_rate SPEC -> sets _name and _rate (default 50mbit)
  _name=${1%%:*} _rate=50mbit
  [ "$_name" != "$1" ] && _rate=${1#*:}
  check_rate "rate in '$1'" "$_rate"
}

# --- where every cable lands -------------------------------------------------------------
# land_leaf[node:rail] / land_port[node:rail]: the leaf and its port number the NIC is on.
declare -A land_leaf land_port spare_next
for ((g = 0; g < groups; g++)); do
  for ((i = 0; i < npg; i++)); do
    for ((r = 0; r < rails; r++)); do
      land_leaf[g${g}n$i:$r]=leaf-r$r-g$g land_port[g${g}n$i:$r]=$((i + 1))
    done
  done
  for ((r = 0; r < rails; r++)); do spare_next[leaf-r$r-g$g]=$((npg + 1)); done
done
spare() { # spare LEAF -> a port number past the nodes' own
  _port=${spare_next[$1]}
  spare_next[$1]=$((_port + 1))
}
for spec in "${swaps[@]}"; do
  [[ "$spec" =~ ^([^:]+):([0-9]+),([0-9]+)$ ]] || die "--swap-cables '$spec' is not NODE:RAIL,RAIL"
  n=${BASH_REMATCH[1]} a=${BASH_REMATCH[2]} b=${BASH_REMATCH[3]}
  node_ok "$n" "--swap-cables $spec"; rail_ok "$a" "--swap-cables $spec"; rail_ok "$b" "--swap-cables $spec"
  [ "$a" != "$b" ] || die "--swap-cables $spec swaps a rail with itself"
  la=${land_leaf[$n:$a]} pa=${land_port[$n:$a]}
  land_leaf[$n:$a]=${land_leaf[$n:$b]} land_port[$n:$a]=${land_port[$n:$b]}
  land_leaf[$n:$b]=$la land_port[$n:$b]=$pa
  echo "simfabric: $n rail$a and rail$b cables swapped (rail$a on ${land_leaf[$n:$a]}, rail$b on ${land_leaf[$n:$b]})" >&2
done
for spec in "${moves[@]}"; do
  [[ "$spec" =~ ^([^:]+):([0-9]+):(g?)([0-9]+)$ ]] || die "--move-nic '$spec' is not NODE:RAIL:GROUP"
  n=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]} to=${BASH_REMATCH[4]}
  node_ok "$n" "--move-nic $spec"; rail_ok "$r" "--move-nic $spec"
  [ "$to" -lt "$groups" ] || die "--move-nic $spec: group $to is not one of 0..$((groups - 1))"
  [ "$to" != "$(node_group "$n")" ] || die "--move-nic $spec: $n is already in group $to"
  spare "leaf-r$r-g$to"
  land_leaf[$n:$r]=leaf-r$r-g$to land_port[$n:$r]=$_port
  echo "simfabric: $n rail$r cabled to leaf-r$r-g$to port swp$_port" >&2
done
for spec in "${wrongs[@]}"; do
  [[ "$spec" =~ ^([^:]+):([0-9]+)$ ]] || die "--wrong-port '$spec' is not NODE:RAIL"
  n=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]}
  node_ok "$n" "--wrong-port $spec"; rail_ok "$r" "--wrong-port $spec"
  spare "${land_leaf[$n:$r]}"
  land_port[$n:$r]=$_port
  echo "simfabric: $n rail$r on ${land_leaf[$n:$r]} port swp$_port instead of swp$(( $(node_index "$n") + 1 ))" >&2
done
for l in "${!spare_next[@]}"; do
  [ "${spare_next[$l]}" -le 200 ] || die "too many NICs on $l"
done

# Tenants: tenant_of[node]=VLAN, tenant_name[VLAN]=NAME, tenant_nodes[VLAN]="n1 n2".
declare -A tenant_of tenant_name tenant_nodes
tenant_vids=()
for spec in "${tenant_specs[@]}"; do
  [[ "$spec" =~ ^([A-Za-z][A-Za-z0-9_-]*):([0-9]+):([^:]+)$ ]] || die "--tenant '$spec' is not NAME:VLAN:NODE,NODE,..."
  name=${BASH_REMATCH[1]} vid=${BASH_REMATCH[2]} list=${BASH_REMATCH[3]}
  int_in "--tenant $spec: VLAN" "$vid" 2 4094
  [ -z "${tenant_name[$vid]:-}" ] || die "--tenant $spec: VLAN $vid is already tenant ${tenant_name[$vid]}'s"
  for v in "${tenant_vids[@]}"; do
    [ "${tenant_name[$v]}" != "$name" ] || die "--tenant $spec: tenant $name given twice"
  done
  tenant_name[$vid]=$name tenant_vids+=("$vid")
  IFS=, read -r -a tnodes <<<"$list"
  for n in "${tnodes[@]}"; do
    node_ok "$n" "--tenant $spec"
    [ -z "${tenant_of[$n]:-}" ] || die "--tenant $spec: $n is already in tenant ${tenant_name[${tenant_of[$n]}]}"
    tenant_of[$n]=$vid
    tenant_nodes[$vid]="${tenant_nodes[$vid]:-} $n"
  done
done
[ "${#tenant_vids[@]}" -le 4 ] || die "at most 4 tenants (each takes a /30 per uplink from a /24 per leaf)"
[ $((spines * ${#tenant_vids[@]})) -le 64 ] || die "spines x tenants must be at most 64"
declare -A leak_port_vid # node:rail -> VLAN
for spec in "${leak_vlans[@]}"; do
  [[ "$spec" =~ ^([^:]+):([0-9]+):([0-9]+)$ ]] || die "--leak-vlan '$spec' is not NODE:RAIL:VLAN"
  n=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]} vid=${BASH_REMATCH[3]}
  node_ok "$n" "--leak-vlan $spec"; rail_ok "$r" "--leak-vlan $spec"
  [ -n "${tenant_name[$vid]:-}" ] || die "--leak-vlan $spec: VLAN $vid is no tenant's (give it with --tenant)"
  [ "${tenant_of[$n]:-}" != "$vid" ] || die "--leak-vlan $spec: $n is already in VLAN $vid"
  leak_port_vid[$n:$r]=$vid
  echo "simfabric: BREACH $n rail$r's leaf port put in VLAN $vid (tenant ${tenant_name[$vid]})" >&2
done
for spec in "${leak_routes[@]}"; do
  [[ "$spec" =~ ^([^,]+),([^,]+)$ ]] || die "--leak-route '$spec' is not NODE,NODE"
  a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]}
  node_ok "$a" "--leak-route $spec"; node_ok "$b" "--leak-route $spec"
  [ -n "${tenant_of[$a]:-}" ] && [ -n "${tenant_of[$b]:-}" ] && [ "${tenant_of[$a]}" != "${tenant_of[$b]}" ] ||
    die "--leak-route $spec: the two nodes must be in two different tenants"
  [ "$(node_group "$a")" != "$(node_group "$b")" ] ||
    die "--leak-route $spec: nodes of one group share their leaves, where no spine is crossed; take nodes of two groups"
  echo "simfabric: BREACH host routes of $a and $b leaked between their VRFs on every spine" >&2
done

declare -A bucket_vid # bucket -> VLAN
for ((b = 1; b <= ${#tenant_vids[@]}; b++)); do bucket_vid[$b]=${tenant_vids[$((b - 1))]}; done
bucket_of() { # bucket_of NODE:RAIL -> the bucket (0: no tenant) its leaf port sits in
  local vid=${leak_port_vid[$1]:-${tenant_of[${1%%:*}]:-}} b
  _bucket=0
  for ((b = 1; b <= ${#tenant_vids[@]}; b++)); do [ "${bucket_vid[$b]}" = "$vid" ] && _bucket=$b; done
  return 0
}
bridge_of() { if [ "$1" = 0 ]; then echo br0; else echo "brv${bucket_vid[$1]}"; fi; }
if [ "${#tenant_vids[@]}" -gt 0 ]; then
  for l in "${!spare_next[@]}"; do
    [ "${spare_next[$l]}" -le 30 ] || die "with tenants a leaf has 29 ports per /27 (too many NICs on $l)"
  done
fi

# Addresses (198.18.0.0/15 only): leaf L = rail*G + group owns 198.18.L.0/24 (gateway .1, the
# NIC on port p is .(p+9)); its link to spine k is 198.19.L.(4k+1) (leaf) / .(4k+2) (spine);
# the management bridge is 198.19.255.1/24, node j = group*N + index is 198.19.255.(j+10).
# With tenants a leaf's /24 is cut in /27s: bucket 0 the nodes of no tenant (br0), bucket
# b = 1.. the b-th --tenant (brvVLAN); gateway .(32b+1), the NIC on port p is .(32b+p+1).
leaf_idx() { [[ "$1" =~ ^leaf-r([0-9]+)-g([0-9]+)$ ]]; echo $((BASH_REMATCH[1] * groups + BASH_REMATCH[2])); }
nic_addr() {
  if [ "${#tenant_vids[@]}" -gt 0 ]; then
    bucket_of "$1"
    echo "198.18.$(leaf_idx "${land_leaf[$1]}").$((32 * _bucket + land_port[$1] + 1))"
  else
    echo "198.18.$(leaf_idx "${land_leaf[$1]}").$((land_port[$1] + 9))"
  fi
}
nic_prefix() { if [ "${#tenant_vids[@]}" -gt 0 ]; then echo 27; else echo 24; fi; }
nic_gateway() { # nic_gateway NODE:RAIL
  if [ "${#tenant_vids[@]}" -gt 0 ]; then
    bucket_of "$1"
    echo "198.18.$(leaf_idx "${land_leaf[$1]}").$((32 * _bucket + 1))"
  else
    echo "198.18.$(leaf_idx "${land_leaf[$1]}").1"
  fi
}
mgmt_addr() { echo "198.19.255.$(($(node_group "$1") * npg + $(node_index "$1") + 10))"; }

# --- the intended fabric ------------------------------------------------------------------
gbit() { # gbit TC_RATE -> the rate in Gb/s as a TOML float (200mbit -> 0.2)
  [[ "$1" =~ ^([0-9]+(\.[0-9]+)?)([a-z]+)$ ]]
  awk -v x="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
    m = (u == "gbit") ? 1 : (u == "mbit") ? 1e-3 : (u == "kbit") ? 1e-6 : 1e-9
    v = sprintf("%.9g", x * m); if (v !~ /[.e]/) v = v ".0"; print v }'
}
write_plan() {
  local tmp="$1.tmp.$$" nic_gbit up_gbit
  nic_gbit=$(gbit "$rate") up_gbit=$(gbit "$uplink_rate")
  {
    echo "# The intended fabric of tests/fabric/simfabric.sh (no faults): fabcheck plan format."
    echo "version = 1"
    echo "name = \"simfabric ${groups}x${npg}x${rails}x${spines}\""
    for ((r = 0; r < rails; r++)); do
      for ((g = 0; g < groups; g++)); do
        printf '\n[[switch]]\nname = "leaf-r%d-g%d"\ntier = "leaf"\ngroup = "g%d"\nrail = %d\n' "$r" "$g" "$g" "$r"
      done
    done
    for ((k = 0; k < spines; k++)); do printf '\n[[switch]]\nname = "spine%d"\ntier = "spine"\n' "$k"; done
    for ((g = 0; g < groups; g++)); do
      for ((i = 0; i < npg; i++)); do
        printf '\n[[node]]\nname = "g%dn%d"\ngroup = "g%d"\n' "$g" "$i" "$g"
        for ((r = 0; r < rails; r++)); do
          printf '\n[[nic]]\nnode = "g%dn%d"\nnic = "rail%d"\nrail = %d\nswitch = "leaf-r%d-g%d"\nport = "swp%d"\nrate_gbit_s = %s\n' \
            "$g" "$i" "$r" "$r" "$r" "$g" $((i + 1)) "$nic_gbit"
        done
      done
    done
    for ((r = 0; r < rails; r++)); do
      for ((g = 0; g < groups; g++)); do
        for ((k = 0; k < spines; k++)); do
          printf '\n[[link]]\na = "leaf-r%d-g%d"\nb = "spine%d"\ncount = 1\nrate_gbit_s = %s\n' "$r" "$g" "$k" "$up_gbit"
        done
      done
    done
    for vid in "${tenant_vids[@]}"; do
      printf '\n[[tenant]]\nname = "%s"\nnodes = [' "${tenant_name[$vid]}"
      sep=
      for n in ${tenant_nodes[$vid]}; do printf '%s"%s"' "$sep" "$n"; sep=", "; done
      printf ']\nvlan = %d\nvrf = "vrf-%d"\n' "$vid" "$vid"
    done
  } >"$tmp" && mv -f "$tmp" "$1" || { rm -f "$tmp"; die "cannot write --plan-out $1"; }
}
if [ -n "$plan_out" ]; then write_plan "$plan_out"; fi

# --- fault rates, checked before anything is built ----------------------------------------
declare -A uplink_slow leaf_slow
for spec in "${slow_uplinks[@]}"; do
  [[ "$spec" =~ ^([^:]+):([^:]+)(:(.+))?$ ]] || die "--slow-uplink '$spec' is not LEAF:SPINE[:RATE]"
  l=${BASH_REMATCH[1]} s=${BASH_REMATCH[2]} rr=${BASH_REMATCH[4]:-50mbit}
  leaf_ok "$l" "--slow-uplink $spec"; spine_ok "$s" "--slow-uplink $spec"; check_rate "--slow-uplink $spec" "$rr"
  uplink_slow[$l:$s]=$rr
done
for spec in "${slow_leaves[@]}"; do
  split_rate "$spec"; leaf_ok "$_name" "--slow-leaf $spec"; leaf_slow[$_name]=$_rate
done
declare -A dir_slow # dir_slow[A>B]=RATE
for spec in "${slow_dirs[@]}"; do
  [[ "$spec" =~ ^([^\>]+)\>([^:]+)(:(.+))?$ ]] || die "--slow-dir '$spec' is not NODE>NODE[:RATE]"
  a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} rr=${BASH_REMATCH[4]:-50mbit}
  node_ok "$a" "--slow-dir $spec"; node_ok "$b" "--slow-dir $spec"; check_rate "--slow-dir $spec" "$rr"
  [ "$a" != "$b" ] || die "--slow-dir $spec: a node to itself"
  dir_slow[$a\>$b]=$rr
done

# --- build ---------------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "needs root (ip netns, veth, tc, lldpd, unshare --uts); CI runs as root"
# The simulated hosts are the measuring instrument: their ranks run above the machine's other
# work (nice SIMFABRIC_NICE, -5 by default; every process below inherits it). Beside the test
# command's VM lane a starved rank read as a slow link: a healthy fabric's one direction at
# 0.38 against a rail median of 0.92 Gb/s, an incast's sender share at Jain 0.84.
renice -n "${SIMFABRIC_NICE:--5}" -p $$ >/dev/null 2>&1 || true
for t in ip tc lldpd lldpcli mpirun unshare awk; do
  command -v "$t" >/dev/null || die "$t not found: install iproute2, lldpd and openmpi-bin (scripts/lib/deps.sh)"
done
prefix="sf$$"
run=$(mktemp -d /tmp/simfabric.XXXXXX)
chmod 755 "$run"
lldpd_pids=()
started=$(date +%s.%N)
teardown() {
  local code=$?
  set +e
  for p in "${lldpd_pids[@]}"; do kill "$p" 2>/dev/null; done
  for ns in $(ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}'); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$run"
  exit $code
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

inns() { local ns=$1; shift; ip netns exec "$prefix-$ns" "$@"; }
mkns() {
  ip netns add "$prefix-$1" || die "cannot create namespace $prefix-$1"
  inns "$1" ip link set lo up
  inns "$1" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 >/dev/null
}
# veth NS_A IF_A NS_B IF_B: one cable.
veth() {
  ip link add "$2" netns "$prefix-$1" type veth peer name "$4" netns "$prefix-$3" ||
    die "cannot create the veth $1:$2 <-> $3:$4"
  inns "$1" ip link set "$2" up
  inns "$3" ip link set "$4" up
}
# shape NS IF RATE: HTB on the interface's egress, one default class at RATE.
shape() {
  inns "$1" tc qdisc add dev "$2" root handle 1: htb default 1 r2q 100
  inns "$1" tc class add dev "$2" parent 1: classid 1:1 htb rate "$3" ceil "$3" quantum 1514
}

mkns mgmt
inns mgmt ip link add br0 type bridge
inns mgmt ip addr add 198.19.255.1/24 dev br0
inns mgmt ip link set br0 up
for ((k = 0; k < spines; k++)); do
  mkns "spine$k"
  inns "spine$k" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1
done
for ((r = 0; r < rails; r++)); do
  for ((g = 0; g < groups; g++)); do
    l=leaf-r$r-g$g L=$(leaf_idx "$l")
    mkns "$l"
    inns "$l" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1
    inns "$l" ip link add br0 type bridge
    inns "$l" ip addr add "198.18.$L.1/$(nic_prefix)" dev br0
    inns "$l" ip link set br0 up
    for ((b = 1; b <= ${#tenant_vids[@]}; b++)); do
      inns "$l" ip link add "$(bridge_of $b)" type bridge
      inns "$l" ip addr add "198.18.$L.$((32 * b + 1))/27" dev "$(bridge_of $b)"
      inns "$l" ip link set "$(bridge_of $b)" up
    done
    hops=()
    for ((k = 0; k < spines; k++)); do
      veth "$l" "up$k" "spine$k" "$l"
      inns "$l" ip addr add "198.19.$L.$((4 * k + 1))/30" dev "up$k"
      inns "spine$k" ip addr add "198.19.$L.$((4 * k + 2))/30" dev "$l"
      inns "spine$k" ip route add "198.18.$L.0/24" via "198.19.$L.$((4 * k + 1))"
      ur=${uplink_slow[$l:spine$k]:-${leaf_slow[$l]:-$uplink_rate}}
      shape "$l" "up$k" "$ur"
      shape "spine$k" "$l" "$ur"
      hops+=(nexthop via "198.19.$L.$((4 * k + 2))" dev "up$k")
    done
    inns "$l" ip route add 198.18.0.0/16 "${hops[@]}"
    if [ "${#tenant_vids[@]}" -gt 0 ]; then
      # Each bucket's VRF: its own /27 here, everything else up the spines, which enforce.
      for ((b = 0; b <= ${#tenant_vids[@]}; b++)); do
        inns "$l" ip route add "198.18.$L.$((32 * b))/27" dev "$(bridge_of $b)" table $((10 + b))
        inns "$l" ip route add 198.18.0.0/16 table $((10 + b)) "${hops[@]}"
        inns "$l" ip rule add iif "$(bridge_of $b)" lookup $((10 + b)) prio 100
      done
    fi
  done
done
if [ "${#tenant_vids[@]}" -gt 0 ]; then
  # The spines' VRFs: a packet's table is its source's bucket; each table routes to that
  # bucket's /27 on every leaf and refuses the rest (ICMP unreachable, no fall-through).
  for ((k = 0; k < spines; k++)); do
    for ((b = 0; b <= ${#tenant_vids[@]}; b++)); do
      for ((r = 0; r < rails; r++)); do
        for ((g = 0; g < groups; g++)); do
          L=$(leaf_idx "leaf-r$r-g$g")
          inns "spine$k" ip rule add from "198.18.$L.$((32 * b))/27" lookup $((10 + b)) prio 100
          inns "spine$k" ip route add "198.18.$L.$((32 * b))/27" via "198.19.$L.$((4 * k + 1))" \
            dev "leaf-r$r-g$g" onlink table $((10 + b))
        done
      done
      inns "spine$k" ip route add unreachable default table $((10 + b))
    done
    # Breaches: host routes of two nodes leaked into each other's VRF.
    for spec in "${leak_routes[@]}"; do
      for pair in "${spec%%,*} ${spec#*,}" "${spec#*,} ${spec%%,*}"; do
        read -r from to <<<"$pair"
        bucket_of "$from:0"
        for ((r = 0; r < rails; r++)); do
          l=${land_leaf[$to:$r]} L=$(leaf_idx "${land_leaf[$to:$r]}")
          inns "spine$k" ip route add "$(nic_addr "$to:$r")/32" via "198.19.$L.$((4 * k + 1))" \
            dev "$l" onlink table $((10 + _bucket))
        done
      done
    done
  done
fi
declare -A node_addrs # node -> space-separated rail addresses
for ((g = 0; g < groups; g++)); do
  for ((i = 0; i < npg; i++)); do
    n=g${g}n$i
    mkns "$n"
    veth "$n" mgmt0 mgmt "m$n"
    inns mgmt ip link set "m$n" master br0
    inns "$n" ip addr add "$(mgmt_addr "$n")/24" dev mgmt0
    for ((r = 0; r < rails; r++)); do
      l=${land_leaf[$n:$r]} p=${land_port[$n:$r]} a=$(nic_addr "$n:$r")
      veth "$n" "rail$r" "$l" "swp$p"
      bucket_of "$n:$r"
      inns "$l" ip link set "swp$p" master "$(bridge_of "$_bucket")"
      inns "$n" ip addr add "$a/$(nic_prefix)" dev "rail$r"
      # Each rail routes its own source address through its own leaf.
      inns "$n" ip route add default via "$(nic_gateway "$n:$r")" dev "rail$r" table $((100 + r))
      inns "$n" ip rule add from "$a" table $((100 + r)) prio $((1000 + r))
      shape "$l" "swp$p" "${leaf_slow[$l]:-$rate}"
      shape "$n" "rail$r" "$rate"
      node_addrs[$n]="${node_addrs[$n]:-} $a"
    done
  done
done
# One-way faults: a class of their own on the sender's rails for traffic to the receiver.
for key in "${!dir_slow[@]}"; do
  a=${key%%>*} b=${key#*>} rr=${dir_slow[$key]}
  for ((r = 0; r < rails; r++)); do
    inns "$a" tc class add dev "rail$r" parent 1: classid 1:2 htb rate "$rr" ceil "$rr" quantum 1514
    for dst in ${node_addrs[$b]}; do
      # Packets under 128 bytes (TCP acknowledgements of B's data, control) keep the link
      # rate: queued behind the slowed data they would slow B -> A too and hide which
      # direction is at fault.
      inns "$a" tc filter add dev "rail$r" parent 1: protocol ip prio 1 u32 \
        match ip dst "$dst/32" match u16 0x0000 0xff80 at 2 flowid 1:1
      inns "$a" tc filter add dev "rail$r" parent 1: protocol ip prio 2 u32 match ip dst "$dst/32" flowid 1:2
    done
  done
  echo "simfabric: $a -> $b limited to $rr (one direction)" >&2
done

# --- lldpd in every leaf and node --------------------------------------------------------
mkdir -p /run/lldpd
start_lldpd() { # start_lldpd NAME INTERFACES
  local conf="$run/lldpd-$1.conf"
  printf 'configure system hostname %s\nconfigure lldp tx-interval 1\nconfigure lldp portidsubtype ifname\n' "$1" >"$conf"
  inns "$1" lldpd -d -u "$run/lldpd-$1.sock" -I "$2" -O "$conf" -L "$(command -v lldpcli)" \
    >"$run/lldpd-$1.log" 2>&1 &
  lldpd_pids+=($!)
}
for ((r = 0; r < rails; r++)); do
  for ((g = 0; g < groups; g++)); do start_lldpd "leaf-r$r-g$g" 'swp*'; done
done
for ((g = 0; g < groups; g++)); do
  for ((i = 0; i < npg; i++)); do start_lldpd "g${g}n$i" 'rail*'; done
done
# Ready when every node's lldpd lists a neighbour on every rail.
deadline=$(($(date +%s) + ${SIMFABRIC_LLDP_TIMEOUT:-60}))
for ((g = 0; g < groups; g++)); do
  for ((i = 0; i < npg; i++)); do
    n=g${g}n$i
    until [ "$(lldpcli -u "$run/lldpd-$n.sock" show neighbors summary 2>/dev/null | grep -c 'Interface:')" -ge "$rails" ]; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "simfabric: $n did not see an LLDP neighbour on each of its $rails rails in time; its lldpd said:" >&2
        tail -5 "$run/lldpd-$n.log" >&2
        exit 2
      fi
      sleep 0.3
    done
  done
done
setup_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "simfabric: ${groups} groups x ${npg} nodes x ${rails} rails x ${spines} spines up in ${setup_s} s (node links $rate, uplinks $uplink_rate)" >&2

# --- the command, one rank per rail --------------------------------------------------------
hosts=()
for ((g = 0; g < groups; g++)); do
  for ((i = 0; i < npg; i++)); do hosts+=("g${g}n$i:$rails"); done
done
# The private Slurm cluster of --slurm: its controller in the management namespace, a slurmd
# in each node's namespace (tests/slurm/cluster.sh); teardown's kill of every namespace's
# processes takes it down.
start_slurm() {
  local n spec=()
  for n in "${hosts[@]}"; do spec+=("${n%%:*}:$(mgmt_addr "${n%%:*}")"); done
  for t in slurmctld slurmd salloc srun munged; do
    command -v "$t" >/dev/null || die "$t not found: install slurm-wlm and munge (scripts/lib/deps.sh)"
  done
  SLURM_TEST_ENTER="$me __enter $prefix" SLURM_TEST_CTLD="mgmt:198.19.255.1" \
    SLURM_TEST_NODES="${spec[*]}" "$(dirname "$me")/../slurm/cluster.sh" start "$run/slurm" >/dev/null || {
    tail -n 5 "$run"/slurm/log/*.log >&2
    die "the private Slurm cluster did not start (its logs' last lines above)"
  }
  export SLURM_CONF=$run/slurm/slurm.conf
  echo "simfabric: a Slurm cluster of ${#hosts[@]} nodes is up (the allocation runs the driver)" >&2
}
# The agents of --agents: in each node's namespace, under its host name, one bench-bw and
# one bench-lat agent per rail; ready when every one says it is listening.
start_agents() {
  local n r tool port addr log logs=()
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$run/secret")
  FABCHECK_SECRET=$(cat "$run/secret")
  export FABCHECK_SECRET
  : >"$run/bw-agents"
  : >"$run/lat-agents"
  for n in "${hosts[@]}"; do
    n=${n%%:*}
    for ((r = 0; r < rails; r++)); do
      addr=$(inns "$n" ip -4 -o addr show dev "rail$r" | awk '{print $4}' | cut -d/ -f1 | head -1)
      for tool in bench-bw bench-lat; do
        port=$((r + $([ "$tool" = bench-bw ] && echo 18600 || echo 18700)))
        log="$run/agent-$n-rail$r-$tool.log"
        logs+=("$log")
        FABCHECK_LLDPD_SOCKET="$run/lldpd-$n.sock" inns "$n" unshare --uts sh -c 'hostname "$0"; exec "$@"' \
          "$n" "$agents_bin/$tool" --serve -p "$port" --bind-addr "$addr" \
          --control-addr "$(mgmt_addr "$n")" >"$log" 2>&1 &
        echo "$(mgmt_addr "$n"):$port" >>"$run/$([ "$tool" = bench-bw ] && echo bw || echo lat)-agents"
      done
    done
  done
  deadline=$(($(date +%s) + 30))
  for log in "${logs[@]}"; do
    until grep -q 'waiting for a coordinator' "$log" 2>/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        cat "$log" >&2
        die "the agent of $(basename "$log" .log) did not start (its log above)"
      fi
      sleep 0.1
    done
  done
  export FABCHECK_SIM_BW_AGENTS="$run/bw-agents" FABCHECK_SIM_LAT_AGENTS="$run/lat-agents"
  echo "simfabric: ${#logs[@]} agents are up (a bench-bw and a bench-lat per rail of every node)" >&2
}
agent="$run/agent"
printf '#!/bin/sh\nexec %q __agent %q "$@"\n' "$me" "$prefix" >"$agent"
chmod 755 "$agent"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$driver" = 1 ]; then
  hostfile="$run/hosts"
  for h in "${hosts[@]}"; do echo "${h%%:*} slots=$rails"; done >"$hostfile"
  export FABCHECK_SIM_HOSTFILE="$hostfile" FABCHECK_SIM_WRAP="$me __rank $run"
  export OMPI_MCA_plm_rsh_agent="$agent" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
    OMPI_MCA_oob_tcp_if_include=198.19.255.0/24 OMPI_MCA_btl_tcp_if_include=198.19.255.0/24 \
    OMPI_MCA_btl=self,vader,tcp
  [ -z "$agents_bin" ] || start_agents
  if [ "$slurm" = 1 ]; then
    start_slurm
    set +e
    inns mgmt salloc --quiet --nodes=${#hosts[@]} --ntasks-per-node="$rails" --exclusive \
      --time=60 "$@"
  else
    set +e
    inns mgmt "$@"
  fi
  code=$?
  set -e
  exit $code
fi
set +e
inns mgmt mpirun --host "$(IFS=,; echo "${hosts[*]}")" -np $((groups * npg * rails)) \
  --map-by slot --bind-to none \
  --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include 198.19.255.0/24 --mca btl_tcp_if_include 198.19.255.0/24 \
  --mca btl self,vader,tcp \
  "$me" __rank "$run" "$@"
code=$?
set -e
exit $code
