#!/usr/bin/env bash
# A private single-node Slurm cluster for tests: `cluster.sh start DIR` brings up munged,
# slurmctld and slurmd with all state under DIR and prints the SLURM_CONF to export;
# `cluster.sh stop DIR` cancels jobs and takes it all down. No systemd needed.
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

start() {
  mkdir -p "$dir"/{state,spool,log,munge,run}
  chmod 755 "$dir" "$dir/run"          # munge's socket directory must be traversable
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  local host cpus port
  host=$(hostname -s)
  cpus=${SLURM_TEST_CPUS:-8}
  port=${SLURM_TEST_PORT:-$(free_port_pair)}
  cat > "$conf" <<CONF
ClusterName=fabcheck-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  munged --socket="$dir/run/munge.socket" --key-file="$dir/munge/munge.key" \
         --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force
  slurmctld -f "$conf"
  slurmd -f "$conf"
  export SLURM_CONF=$conf
  for _ in $(seq 1 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  echo "Slurm did not come up within 20 s; logs in $dir/log" >&2
  tail -n 5 "$dir"/log/*.log >&2 || true
  stop
  return 1
}

stop() {
  export SLURM_CONF=$conf
  scancel --user=root >/dev/null 2>&1 || true
  scontrol shutdown >/dev/null 2>&1 || true
  for f in slurmd slurmctld munged; do
    [ -f "$dir/run/$f.pid" ] && kill "$(cat "$dir/run/$f.pid")" 2>/dev/null || true
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
