#!/usr/bin/env bash
# Slurm's own backup controller, beside clemu's (scripts/bench-failover.sh):
# a real Slurm cluster of 4 nodes on this host (scripts/slurm-local.sh up
# 4 2 --backup TIMEOUT: two slurmctld, one StateSaveLocation), and TRIALS
# times:
#
# 1. two long jobs (sleep 600) run, for SETTLE seconds (default 10: Slurm
#    saves its state to StateSaveLocation in the background, after it
#    acknowledged the submission; a job younger than that may be lost);
# 2. the primary slurmctld is killed with SIGKILL;
# 3. timed: from the kill to the backup running as primary (its log says
#    "Running as primary controller"), and to a job submitted at once
#    (sbatch retried until the backup takes it) running;
# 4. whether the two long jobs ran on: still running with the start time
#    they had, not started again;
# 5. the primary is started again and takes its place back.
#
#   sudo scripts/bench-slurm-failover.sh [TRIALS] [TIMEOUT]   (default 10, 3)
#
# TIMEOUT is SlurmctldTimeout, seconds: 3 matches clemu's default
# takeover_timeout_s; Slurm's own default is 120.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-slurm-failover: needs root (slurmctld, namespaces)" >&2; exit 2; }
trials=${1:-10}
timeout=${2:-3}
SLURM_LOCAL_DIR=$(mktemp -d -t bench-slurm-failover-XXXXXX)
export SLURM_LOCAL_DIR
trap 'scripts/slurm-local.sh down > /dev/null 2>&1 || true; [ "${KEEP:-0}" = 1 ] || rm -rf "$SLURM_LOCAL_DIR"' EXIT
scripts/slurm-local.sh up 4 2 --backup "$timeout" >&2
export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf
log() { echo "$SLURM_LOCAL_DIR/ctl-$1/log/slurmctld.log"; }
pid_of() { cat "$SLURM_LOCAL_DIR/ctl-$1/run/slurmctld.pid"; }
primary_count() { grep -c "Running as primary controller" "$(log "$1")" 2>/dev/null || true; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$(now)"; }
# Job id -> "STATE START" of the jobs asked.
jobs_of() { squeue -h -j "$1" -o '%i %T %S' 2>/dev/null | sort; }
wait_until() { # what seconds command...
  local what=$1 limit=$2
  shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || { echo "bench-slurm-failover: timed out waiting for $what" >&2; return 1; }
    sleep 0.05
  done
}
running() { [ "$(squeue -h -j "$1" -o %T 2>/dev/null | grep -c RUNNING)" = "$2" ]; }
queue_empty() { [ -z "$(squeue -h -o %i 2>/dev/null)" ]; }
# Whether controller NAME has said it runs as primary more than N times.
primary_past() { [ "$(primary_count "$1")" -gt "$2" ]; }
results=$SLURM_LOCAL_DIR/trials
: > "$results"
for t in $(seq "$trials"); do
  long=$(for _ in 1 2; do sbatch --parsable -n 1 -o /dev/null --wrap 'sleep 600'; done | paste -sd,)
  wait_until "the long jobs to run" 60 running "$long" 2
  sleep "${SETTLE:-10}"
  before=$(jobs_of "$long")
  taken=$(primary_count slurmbackup)
  t0=$(now)
  kill -9 "$(pid_of slurmprimary)"
  wait_until "the backup to take over" 600 primary_past slurmbackup "$taken"
  took=$(since "$t0")
  id=
  until id=$(sbatch --parsable -n 1 -o /dev/null --wrap 'sleep 1' 2>/dev/null); do sleep 0.05; done
  if wait_until "the new job to run" 300 running "$id" 1; then first=$(since "$t0"); else first=nan; fi
  after=$(jobs_of "$long")
  kept=0
  [ "$before" = "$after" ] && kept=1
  echo "$took $first $kept" >> "$results"
  echo "trial $t: backup acting after $took s, a new job running after $first s, long jobs ran on: $kept" >&2
  [ "$kept" = 1 ] || { echo "  before: $before" >&2; echo "  after:  $after" >&2; }
  # The primary back; it takes control again.
  back=$(primary_count slurmprimary)
  scripts/slurm-local.sh ctld slurmprimary
  wait_until "the primary to take control back" 600 primary_past slurmprimary "$back"
  scancel --quiet --full -u "$(id -un)" || true
  wait_until "the queue to empty" 120 queue_empty
done
python3 - "$results" "$trials" "$timeout" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def pct(xs, p):
    xs = sorted(x for x in xs if not math.isnan(x))
    return xs[max(0, math.ceil(len(xs) * p) - 1)] if xs else float("nan")
col = lambda i: [float(r[i]) for r in rows]
print(f"| Slurm 22.05 backup slurmctld, SlurmctldTimeout={sys.argv[3]}, {len(rows)} trials | p50 | max |")
print("|---|---:|---:|")
print(f"| kill -9 of the primary to the backup running as primary (s) | {pct(col(0), .5):.2f} | {pct(col(0), 1):.2f} |")
print(f"| kill -9 of the primary to a job submitted then running (s) | {pct(col(1), .5):.2f} | {pct(col(1), 1):.2f} |")
print(f"| trials where the two running jobs ran on, not started again | {sum(int(r[2]) for r in rows)} of {len(rows)} | |")
PY
