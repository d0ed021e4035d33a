#!/usr/bin/env bash
# A private Slurm cluster for tests: `cluster.sh start DIR` brings up munged, slurmctld and
# slurmd with all state under DIR and prints the SLURM_CONF to export; `cluster.sh stop DIR`
# cancels jobs and takes it all down. No systemd needed.
#
# By default one node, this host. A cluster of several nodes on one machine (the simulated
# fabric's network namespaces, tests/fabric/simfabric.sh --slurm) is described by:
#   SLURM_TEST_ENTER   a command that runs `ENTER PLACE CMD...` inside PLACE (a namespace whose
#                      host name is PLACE); every daemon and client is started through it
#   SLURM_TEST_CTLD    PLACE:ADDR of the controller (slurmctld and munged run there)
#   SLURM_TEST_NODES   "NAME:ADDR NAME:ADDR ...": one slurmd per node, in its own place, each
#                      with its spool, pid and log file named for it (%n)
# Facts this relies on (design.md): Debian's slurm-wlm 22.05; srun --mpi=pmix works with
# Debian's OpenMPI (pmi2/none do not); more tasks than CPUs queue forever unless the node
# declares more CPUs than it has.
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: cluster.sh start|stop DIR}")
conf=$dir/slurm.conf

# Two consecutive free TCP ports, so clusters of tests running side by side never collide.
free_port_pair() {
  local p used
  used=$(ss -Htan | awk '{print $4}' | sed 's/.*://')
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 20000))
    if ! grep -qx "$p" <<<"$used" && ! grep -qx "$((p + 1))" <<<"$used"; then
      echo "$p"
      return
    fi
  done
  echo 16817
}

# at PLACE CMD...: CMD where PLACE lives (through SLURM_TEST_ENTER), else here.
at() {
  local place=$1
  shift
  if [ -n "${SLURM_TEST_ENTER:-}" ]; then
    $SLURM_TEST_ENTER "$place" "$@"
  else
    "$@"
  fi
}

start() {
  mkdir -p "$dir"/{state,spool,log,munge,run}
  chmod 755 "$dir" "$dir/run"          # munge's socket directory must be traversable
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  local host cpus port ctld nodes n
  host=$(hostname -s)
  cpus=${SLURM_TEST_CPUS:-8}
  port=${SLURM_TEST_PORT:-$(free_port_pair)}
  ctld=${SLURM_TEST_CTLD:-$host}
  ctld_place=${ctld%%:*}
  nodes=${SLURM_TEST_NODES:-$host}
  cat > "$conf" <<CONF
ClusterName=fabcheck-test
SlurmctldHost=${ctld_place}$([ "$ctld" = "$ctld_place" ] || echo "(${ctld#*:})")
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
CONF
  for n in $nodes; do
    echo "NodeName=${n%%:*}$([ "$n" = "${n%%:*}" ] || echo " NodeAddr=${n#*:}") CPUs=$cpus State=UNKNOWN"
  done >> "$conf"
  echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$conf"
  export SLURM_CONF=$conf
  at "$ctld_place" munged --socket="$dir/run/munge.socket" --key-file="$dir/munge/munge.key" \
         --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force
  at "$ctld_place" slurmctld -f "$conf"
  # PMIx's client directory is named for the step alone (spmix_appdir_UID_JOB.STEP): nodes
  # sharing one file system collide on it ("File exists"), so each node's slurmd, in a mount
  # namespace of its own, sees a directory of its own there.
  mkdir -p "$dir/pmix"
  echo "PMIxCliTmpDirBase=$dir/pmix" > "$dir/mpi.conf"
  for n in $nodes; do
    n=${n%%:*}
    mkdir -p "$dir/spool/$n" "$dir/pmix-$n"
    if [ -n "${SLURM_TEST_ENTER:-}" ]; then
      at "$n" sh -c 'mount --bind "$1" "$2" && exec slurmd -f "$3" -N "$4"' sh \
        "$dir/pmix-$n" "$dir/pmix" "$conf" "$n"
    else
      slurmd -f "$conf" -N "$n"
    fi
  done
  local want up
  want=$(wc -w <<<"$nodes")
  for _ in $(seq 1 150); do
    up=$(at "$ctld_place" sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix|alloc)' || true)
    if [ "$up" -eq "$want" ]; then
      echo "SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  echo "Slurm did not come up within 30 s (${up:-0} of $want node(s) up); logs in $dir/log" >&2
  tail -n 5 "$dir"/log/*.log >&2 || true
  stop
  return 1
}

stop() {
  export SLURM_CONF=$conf
  local ctld=${SLURM_TEST_CTLD:-$(hostname -s)}
  at "${ctld%%:*}" scancel --user=root >/dev/null 2>&1 || true
  at "${ctld%%:*}" scontrol shutdown >/dev/null 2>&1 || true
  for f in "$dir"/run/slurmd*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 0.5
  pkill -f "slurmd -f $conf" 2>/dev/null || true
  pkill -f "slurmctld -f $conf" 2>/dev/null || true
  pkill -f "munged --socket=$dir/run/munge.socket" 2>/dev/null || true
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
