#!/usr/bin/env bash
# A throwaway one-node SLURM cluster on loopback for the slurm test suite (as root).
#
#   bash .ci/slurm.sh start     # prints nothing on stdout; returns when `sinfo` shows the node idle
#   sbatch --array=0-1 ...      # the usual client commands work (the configuration is /etc/slurm/slurm.conf)
#   bash .ci/slurm.sh stop      # stops slurmctld, slurmd and munged; removes their state and the configuration
#
# Debian's slurm-wlm and munge (installed when missing). No cgroups (proctrack/linuxproc, task/none) and no
# accounting database, so it runs in a container. Its own munged (key, socket, logs) and state under $HPO_SLURM_DIR
# (default /tmp/hpo-slurm), so the machine's own munge, if any, is left alone. The configuration must be at the path the
# client commands read by default (/etc/slurm/slurm.conf); a file there that this script did not write is refused.
set -euo pipefail

DIR=${HPO_SLURM_DIR:-/tmp/hpo-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by hpo .ci/slurm.sh"
NODE=localhost
PARTITION=debug

log() { echo "slurm.sh: $*" >&2; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "run as root: slurmd starts jobs as their users, and this cluster's daemons run as root"
    exit 1
  fi
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  log "installing Debian's slurm-wlm and munge"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >&2
}

start_munge() {
  mkdir -p "$DIR/munge"
  chmod 700 "$DIR/munge"
  if [ ! -f "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
  fi
  if [ -f "$DIR/munge/munged.pid" ] && kill -0 "$(cat "$DIR/munge/munged.pid")" 2>/dev/null; then
    return
  fi
  # --force: munged as root would refuse otherwise; the key and socket are this cluster's own.
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
}

write_config() {
  if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    log "$CONF exists and was not written by this script; move it away to start the test cluster"
    exit 1
  fi
  local cpus memory_mb
  cpus=$(nproc --all)
  # What slurmd may hand out: most of the memory, leaving some for the daemons and the machine.
  memory_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  mkdir -p /etc/slurm "$DIR/ctld" "$DIR/d" "$DIR/log"
  cat >"$CONF" <<EOF
$MARK (state in $DIR); removed by 'bash .ci/slurm.sh stop'
ClusterName=hpo-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups in a container: processes are tracked by their parent chain, tasks are not bound to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
# The node's CPUs and memory as written here, whatever slurmd finds (a container may see fewer).
SlurmdParameters=config_overrides
# Seconds between a job's SIGTERM (scancel, time limit) and its SIGKILL: time for a trial to save a checkpoint.
KillWait=30
MaxArraySize=1001
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
  local i state
  for i in $(seq 1 60); do
    state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null || true)
    if [ "$state" = idle ]; then return; fi
    sleep 1
  done
  log "the node is not idle after 60 s (sinfo: '${state:-no answer}'); see $DIR/log/"
  exit 1
}

start() {
  need_root
  install_packages
  # A run killed before its `stop` leaves state behind (jobs slurmctld would recover, so the node is never idle) and
  # maybe daemons still running: clear all of it first, so every start is a fresh cluster.
  if [ -e "$DIR" ]; then
    log "state of an earlier cluster in $DIR: stopping it first"
    stop
  fi
  write_config
  start_munge
  slurmctld -c >&2  # -c: clear any saved state (jobs, node states) instead of recovering it
  slurmd -N "$NODE" >&2
  wait_idle
  log "one node ($NODE, $(nproc --all) CPUs) idle in partition $PARTITION; state in $DIR"
}

stop_daemon() {
  # $1: pid file. SIGTERM, then wait for the process to go (slurmctld writes its state on the way out).
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -9 "$pid" 2>/dev/null || true
}

kill_orphaned_job_processes() {
  # A job whose slurmd died (a run killed before its `stop`) keeps running with no one to cancel it: find its processes
  # (by the cluster name SLURM puts in a job's environment) and their slurmstepd (which runs in $DIR), so they hold no
  # CPU or port in the next run.
  local proc pid
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [ "$pid" = $$ ] && continue
    # slurmstepd alone by its folder: a shell someone left in $DIR/log is not the cluster's.
    if { tr '\0' '\n' <"$proc/environ" | grep -qx "SLURM_CLUSTER_NAME=hpo-test"; } 2>/dev/null ||
      { [ "$(cat "$proc/comm" 2>/dev/null)" = slurmstepd ] &&
        [[ "$(readlink "$proc/cwd" 2>/dev/null)" == "$DIR"/* ]]; }; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

stop() {
  need_root
  # Jobs first, so no job's processes outlive the cluster that started them.
  if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then
    scancel --full --quiet --partition="$PARTITION" 2>/dev/null || true
  fi
  stop_daemon "$DIR/slurmd.pid"
  stop_daemon "$DIR/slurmctld.pid"
  stop_daemon "$DIR/munge/munged.pid"
  kill_orphaned_job_processes
  if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then rm -f "$CONF"; fi
  rm -rf "$DIR"
  log "stopped; state and configuration removed"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
