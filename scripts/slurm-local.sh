#!/usr/bin/env bash
# A real Slurm cluster of N emulated nodes on this one host, loopback only,
# every piece of state under one directory: munged with its own key and
# socket, slurmctld, and one slurmd per node (Slurm's multiple-slurmd
# mode, each node on its own port).
#
#   scripts/slurm-local.sh up N CPUS [--suspend SLICE | --preempt MODE]
#                                        [--backup TIMEOUT] [--accounting]
#                                        start it; prints what to source
#   scripts/slurm-local.sh ctld NAME     (with --backup) start controller
#                                        NAME again: slurmprimary or
#                                        slurmbackup
#   scripts/slurm-local.sh down          stop every daemon it started, by PID
#   scripts/slurm-local.sh status        the daemons' PIDs and sinfo
#   scripts/slurm-local.sh leftovers     PIDs of anything of it still alive
#                                        (daemons, job steps, job processes)
#
# $SLURM_LOCAL_SCHEDULER_PARAMETERS, if set, is slurm.conf's
# SchedulerParameters (`bf_interval=3600`).
#
# The directory is $SLURM_LOCAL_DIR (default /tmp/clemu-slurm-$UID). Client
# commands need `export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf` (written
# to $SLURM_LOCAL_DIR/env). Installs slurmctld, slurmd, slurm-client and
# munge from the distribution if they are missing (root needed, as for the
# daemons). Nodes claim CPUS cores each whatever the host has
# (SlurmdParameters=config_overrides); no cgroups, no accounting.
#
# --suspend SLICE mirrors configs/suspend.toml, clemu's suspending policies:
# PreemptType=preempt/partition_prio with PreemptMode=SUSPEND,GANG; the
# default partition `batch` (every node) time-slices two jobs per core
# (OverSubscribe=FORCE:2) every SLICE seconds (SchedulerTimeSlice, at least
# 5); `urgent` (the first half of the nodes) has the higher priority tier and
# suspends batch jobs where it needs their cores. Slurm suspends with
# SIGTSTP, then SIGSTOP 2 s later, and resumes with SIGCONT.
#
# --preempt MODE (cancel or requeue) mirrors clemu's `preemption = "cancel"`
# and `"requeue"`: PreemptType=preempt/partition_prio with PreemptMode=MODE;
# `batch` (every node) and `urgent` (the first half of the nodes, higher
# priority tier), neither time-sliced.
#
# --accounting keeps Slurm's accounting, so that sacct answers: a MariaDB
# server of its own (data, socket and log under the directory, TCP on
# loopback only) and slurmdbd, which slurmctld sends every job's record
# to (AccountingStorageType=accounting_storage/slurmdbd). Installs
# mariadb-server and slurmdbd if they are missing. Jobs' CPU time and
# memory are not gathered (JobAcctGatherType=jobacct_gather/none).
#
# --backup TIMEOUT adds Slurm's backup controller: two SlurmctldHost lines,
# slurmprimary (127.0.0.1) and slurmbackup (127.0.0.2), SlurmctldTimeout =
# TIMEOUT, one StateSaveLocation. slurmctld knows which one it is by its
# host name, so each runs in a UTS and mount namespace of its own: its
# host name, an /etc/hosts that names both, and its own run/ and log/
# (ctl-NAME/ under the directory; the pid file's path is one for both).
set -euo pipefail
dir=${SLURM_LOCAL_DIR:-/tmp/clemu-slurm-$(id -u)}
conf=$dir/etc/slurm.conf
base_port=${SLURM_LOCAL_PORT:-16817}

die() { echo "slurm-local: $*" >&2; exit 1; }

install() {
  local need=()
  for b in slurmctld slurmd sbatch munged; do command -v "$b" >/dev/null || need+=("$b"); done
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${need[*]}; install slurmctld slurmd slurm-client munge (root)"
  echo "slurm-local: installing slurmctld slurmd slurm-client munge" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null; }
}

install_accounting() {
  command -v mariadbd >/dev/null && command -v slurmdbd >/dev/null && return 0
  [ "$(id -u)" -eq 0 ] || die "missing mariadbd or slurmdbd; install mariadb-server slurmdbd (root)"
  echo "slurm-local: installing mariadb-server slurmdbd" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server slurmdbd >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server slurmdbd >/dev/null; }
}

# The PID in FILE if that process lives.
pidof_file() {
  local p
  p=$(cat "$1" 2>/dev/null || true)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
  return 0
}

# The PIDs this cluster's daemons wrote.
pids() {
  local f
  for f in "$dir"/run/*.pid "$dir"/ctl-*/run/*.pid; do
    [ -f "$f" ] && pidof_file "$f"
  done
  # A stale last file (a daemon killed) is no failure.
  return 0
}

db_port=$((base_port - 3))
dbd_port=$((base_port - 2))

write_conf() { # nodes cpus slice (empty: no suspension) backup-timeout (empty: none) preempt-mode accounting
  local n=$1 cpus=$2 slice=${3:-} backup=${4:-} preempt=${5:-} accounting=${6:-}
  mkdir -p "$dir"/{etc,log,run,state,spool,munge}
  chmod 700 "$dir/munge"
  {
    echo "# Written by scripts/slurm-local.sh: $n nodes of $cpus cores on this host."
    echo "ClusterName=clemu"
    if [ -n "$backup" ]; then
      echo "SlurmctldHost=slurmprimary(127.0.0.1)"
      echo "SlurmctldHost=slurmbackup(127.0.0.2)"
      echo "SlurmctldTimeout=$backup"
    else
      echo "SlurmctldHost=localhost(127.0.0.1)"
    fi
    echo "SlurmctldPort=$base_port"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
    echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    if [ -n "$accounting" ]; then
      echo "AccountingStorageType=accounting_storage/slurmdbd"
      echo "AccountingStorageHost=localhost"
      echo "AccountingStoragePort=$dbd_port"
      # The munge socket for slurmdbd's connections (not AuthInfo's).
      echo "AccountingStoragePass=socket=$dir/munge/munge.socket"
    else
      echo "AccountingStorageType=accounting_storage/none"
    fi
    echo "MpiDefault=none"
    echo "SchedulerType=sched/backfill"
    if [ -n "${SLURM_LOCAL_SCHEDULER_PARAMETERS:-}" ]; then
      echo "SchedulerParameters=$SLURM_LOCAL_SCHEDULER_PARAMETERS"
    fi
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "MaxJobCount=1000000"
    echo "MinJobAge=2"
    echo "KillWait=5"
    echo "SlurmdTimeout=300"
    for i in $(seq "$n"); do
      echo "NodeName=node$i NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((base_port + i)) CPUs=$cpus RealMemory=1000 State=UNKNOWN"
    done
    if [ -n "$slice" ]; then
      echo "PreemptType=preempt/partition_prio"
      echo "PreemptMode=SUSPEND,GANG"
      echo "SchedulerTimeSlice=$slice"
      echo "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2 PriorityTier=1"
      echo "PartitionName=urgent Nodes=node[1-$(( (n + 1) / 2 ))] MaxTime=INFINITE State=UP OverSubscribe=FORCE:1 PriorityTier=10"
    elif [ -n "$preempt" ]; then
      echo "PreemptType=preempt/partition_prio"
      echo "PreemptMode=${preempt^^}"
      echo "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1"
      echo "PartitionName=urgent Nodes=node[1-$(( (n + 1) / 2 ))] MaxTime=INFINITE State=UP PriorityTier=10"
    else
      echo "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    fi
  } > "$conf"
  echo "export SLURM_CONF=$conf" > "$dir/env"
  [ -n "$accounting" ] || return 0
  {
    echo "# Written by scripts/slurm-local.sh: slurmdbd over a MariaDB of its own."
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "DbdHost=localhost"
    echo "DbdAddr=127.0.0.1"
    echo "DbdPort=$dbd_port"
    echo "SlurmUser=root"
    echo "PidFile=$dir/run/slurmdbd.pid"
    echo "LogFile=$dir/log/slurmdbd.log"
    echo "StorageType=accounting_storage/mysql"
    echo "StorageHost=127.0.0.1"
    echo "StoragePort=$db_port"
    echo "StorageUser=root"
    echo "StorageLoc=slurm_acct_db"
  } > "$dir/etc/slurmdbd.conf"
  chmod 600 "$dir/etc/slurmdbd.conf"
}

# MariaDB with its data, socket and log under the directory, then
# slurmdbd, which needs it, and the cluster registered with it.
accounting_up() {
  mkdir -p "$dir/db"
  mariadb-install-db --datadir="$dir/db" --user=root --auth-root-authentication-method=normal \
    --skip-test-db > "$dir/log/mariadb-install.log" 2>&1 \
    || die "mariadb-install-db failed (see $dir/log/mariadb-install.log)"
  setsid mariadbd --no-defaults --datadir="$dir/db" --user=root --port="$db_port" \
    --bind-address=127.0.0.1 --socket="$dir/run/mariadb.sock" --pid-file="$dir/run/mariadb.pid" \
    --log-error="$dir/log/mariadb.log" < /dev/null > /dev/null 2>&1 &
  # A busy host (a CI run, the first start after an install) may take tens
  # of seconds to create the databases: wait for answers, not for files.
  local ok=0
  for _ in $(seq 600); do
    mariadb-admin --no-defaults --socket="$dir/run/mariadb.sock" --user=root ping > /dev/null 2>&1 \
      && { ok=1; break; }
    sleep 0.1
  done
  [ "$ok" = 1 ] || die "mariadbd does not answer after 60 s: $(tail -n 3 "$dir/log/mariadb.log" 2>/dev/null | tr '\n' ' ')"
  slurmdbd || die "slurmdbd did not start (see $dir/log/slurmdbd.log)"
  ok=0
  local why=
  for _ in $(seq 300); do
    why=$(sacctmgr -i add cluster clemu 2>&1) && { ok=1; break; }
    # slurmdbd gives up for good on some errors: no use waiting for it then.
    [ -n "$(pidof_file "$dir/run/slurmdbd.pid")" ] || [ ! -f "$dir/run/slurmdbd.pid" ] || break
    sleep 0.2
  done
  [ "$ok" = 1 ] || die "slurmdbd does not answer (sacctmgr: $(echo "$why" | tail -n 1)); its log ends: $(tail -n 3 "$dir/log/slurmdbd.log" 2>/dev/null | tr '\n' ' ')"
}

# Controller NAME of a cluster with --backup, in its namespaces.
ctld() {
  local name=$1
  mkdir -p "$dir/ctl-$name/run" "$dir/ctl-$name/log"
  unshare --uts --mount --propagation private sh -c "
    mount --bind '$dir/etc/hosts' /etc/hosts &&
    mount --bind '$dir/ctl-$name/run' '$dir/run' &&
    mount --bind '$dir/ctl-$name/log' '$dir/log' &&
    hostname $name &&
    exec slurmctld -i -f '$conf'"
}

up() {
  local n=${1:-} cpus=${2:-} slice= backup= preempt= accounting=
  local usage="usage: slurm-local.sh up N CPUS [--suspend SLICE | --preempt cancel|requeue] [--backup TIMEOUT] [--accounting]"
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 ]] || die "$usage"
  [[ "$cpus" =~ ^[0-9]+$ && "$cpus" -ge 1 ]] || die "$usage"
  shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --suspend)
        [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "${2:-0}" -ge 5 ] || die "$usage (SLICE: whole seconds, at least 5)"
        slice=$2 ;;
      --preempt)
        [[ "${2:-}" =~ ^(cancel|requeue)$ ]] || die "$usage (MODE: cancel or requeue)"
        preempt=$2 ;;
      --accounting) accounting=1; shift; continue ;;
      --backup)
        [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "${2:-0}" -ge 1 ] || die "$usage (TIMEOUT: whole seconds)"
        backup=$2 ;;
      *) die "$usage" ;;
    esac
    shift 2
  done
  [ -z "$(pids)" ] || die "a cluster is already up in $dir (slurm-local.sh down first)"
  install
  [ -z "$accounting" ] || install_accounting
  rm -rf "$dir"
  [ -z "$slice" ] || [ -z "$preempt" ] || die "$usage (--suspend and --preempt are two modes: one of them)"
  write_conf "$n" "$cpus" "$slice" "$backup" "$preempt" "$accounting"
  export SLURM_CONF=$conf
  local t0=$SECONDS
  # munged with a key and a socket of its own, so that the host's munge (if
  # any) is left alone.
  head -c 1024 /dev/urandom > "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file "$dir/munge/munge.key" --socket "$dir/munge/munge.socket" \
    --pid-file "$dir/run/munged.pid" --log-file "$dir/log/munged.log" \
    --seed-file "$dir/munge/munged.seed"
  for _ in $(seq 50); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$dir/munge/munge.socket" ] || die "munged did not start (see $dir/log/munged.log)"
  [ -z "$accounting" ] || accounting_up
  if [ -n "$backup" ]; then
    { cat /etc/hosts; echo "127.0.0.1 slurmprimary"; echo "127.0.0.2 slurmbackup"; } > "$dir/etc/hosts"
    ctld slurmprimary || die "slurmctld slurmprimary did not start (see $dir/ctl-slurmprimary/log)"
    ctld slurmbackup || die "slurmctld slurmbackup did not start (see $dir/ctl-slurmbackup/log)"
  else
    slurmctld -i -f "$conf" || die "slurmctld did not start (see $dir/log/slurmctld.log)"
  fi
  for i in $(seq "$n"); do
    slurmd -f "$conf" -N "node$i" || die "slurmd node$i did not start (see $dir/log/slurmd-node$i.log)"
  done
  # Every node idle, or give up after two minutes.
  local idle=0
  for _ in $(seq 600); do
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | wc -l || true)
    [ "$idle" -ge "$n" ] && break
    sleep 0.2
  done
  [ "$idle" -ge "$n" ] || { sinfo >&2 || true; die "$idle of $n nodes idle after 120 s"; }
  echo "slurm-local: $n nodes of $cpus cores idle after $((SECONDS - t0)) s; $(pids | wc -l) daemons; state in $dir"
  echo "slurm-local: source $dir/env   (or: export SLURM_CONF=$conf)"
}

# The slurmstepd processes of this cluster's jobs: they carry its
# SLURM_CONF in their environment (slurmd passes its own on), and outlive
# their slurmd.
steps() {
  local e
  for e in /proc/[0-9]*/environ; do
    local p=${e#/proc/}
    p=${p%/environ}
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] || continue
    { tr '\0' '\n' < "$e"; } 2>/dev/null | grep -qx "SLURM_CONF=$conf" && echo "$p"
  done
  return 0
}

down() {
  local p left
  p=$(pids | tr '\n' ' ')
  if [ -z "$p" ] && [ -z "$(steps)" ]; then
    echo "slurm-local: nothing running in $dir"
    return 0
  fi
  # Jobs first, while slurmctld can still cancel them the proper way.
  if [ -n "$p" ]; then
    SLURM_CONF=$conf scancel --quiet --full $(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  kill -TERM $p 2>/dev/null || true
  for _ in $(seq 100); do
    left=0
    for q in $p; do kill -0 "$q" 2>/dev/null && left=$((left + 1)); done
    [ "$left" -eq 0 ] && break
    sleep 0.1
  done
  for q in $p; do kill -KILL "$q" 2>/dev/null || true; done
  # Steps that outlived it all: each job runs in its slurmstepd's session,
  # so the session goes whole.
  local s sid n=0 mine
  mine=$(ps -o sess= -p $$ | tr -d ' ')
  for s in $(steps); do
    sid=$(ps -o sess= -p "$s" 2>/dev/null | tr -d ' ')
    if [ -n "$sid" ] && [ "$sid" -gt 1 ] && [ "$sid" != "$mine" ]; then
      pkill -KILL -s "$sid" 2>/dev/null || true
    fi
    kill -KILL "$s" 2>/dev/null || true
    n=$((n + 1))
  done
  rm -f "$dir"/run/*.pid
  if [ "$n" -gt 0 ]; then
    echo "slurm-local: stopped $(echo $p | wc -w) daemons, and $n job steps they left running"
  else
    echo "slurm-local: stopped $(echo $p | wc -w) daemons"
  fi
}

# What is left of this cluster: daemons, job steps, their processes.
leftovers() {
  local s sid
  pids || true
  for s in $(steps); do
    echo "$s"
    sid=$(ps -o sess= -p "$s" 2>/dev/null | tr -d ' ')
    [ -n "$sid" ] && pgrep -s "$sid" || true
  done
}

status() {
  echo "daemons: $(pids | tr '\n' ' ')"
  [ -f "$conf" ] && SLURM_CONF=$conf sinfo 2>/dev/null || true
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  ctld) [ -n "${2:-}" ] || die "usage: slurm-local.sh ctld slurmprimary|slurmbackup"; ctld "$2" ;;
  status) status ;;
  leftovers) leftovers ;;
  *) die "usage: slurm-local.sh up N CPUS [--suspend SLICE] [--backup TIMEOUT] | ctld NAME | down | status | leftovers" ;;
esac
