#!/usr/bin/env bash
# How far the emulation is from its virtual-time twin, policy by policy,
# in trace seconds. Policies that suspend (gang, preempt) are compared as
# sets of replicas: the emulation's, and the twin's perturbed by the delays
# those measured (runworkload --replicas, --latencies), each figure a mean
# with its 95 % interval; the others, run by run against the twin (which is
# deterministic).
#
#   scripts/fidelity.sh bundled [REPLAYS]   (default 3; about 4 minutes)
#   scripts/fidelity.sh window [REPLAYS]    (default 3; about 40 minutes)
#   scripts/fidelity.sh speedups [POLICY...] (default all five; hours)
#   scripts/fidelity.sh traces              (hours)
#
# bundled: configs/workloads/kth-sp2-200.swf on configs/demo.toml (EASY) and
#   configs/suspend.toml (gang time-slicing), --cores-per-proc 2 --shrink 50
#   --speedup 10000: the table of docs/policies.md.
# window: 1,000 jobs of the KTH SP2 trace (../shared/workloads; jobs
#   10,001-11,000) on the demo cluster under fcfs, easy, sjf, preemption by
#   suspension (EASY, with jobs of at most 8 cores and an hour routed to its
#   high-priority partition `debug`: --route debug:cores<=8,walltime<=3600)
#   and gang time-slicing (configs/suspend.toml), at 10,000x.
# speedups: per policy, the highest speed-up at which each of mean wait,
#   mean bounded slowdown and utilization stays within 2 % of the twin (at
#   it and every lower one; where the twin hangs on ties, of the twin or
#   of the twin 1 ns later): a window of a real trace (TRACE=PATH:SKIP:JOBS,
#   default 500 jobs of KTH from job 10,001) emulated at each speed-up of
#   SPEEDUPS (default "2000 5000 10000 20000 50000"); REPLICAS (default 3)
#   a side for the policies that suspend.
# traces: real traces beyond the shipped slice at 10,000x (TRACES, a list
#   of PATH:SKIP:JOBS; POLICIES; REPLICAS, default 10; SPEEDUP): each
#   policy's mean wait, mean bounded slowdown and utilization against the
#   twin's, how far the twin moves with every delay 1 ns (its ties), and
#   where it does, the emulation's figures against the twin 1 ns later.
#
# KEEP=1 keeps every run and report.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-bundled}
case $what in
bundled|window|speedups|traces) ;;
*) echo "usage: scripts/fidelity.sh bundled|window [REPLAYS] | speedups [POLICY...] | traces" >&2; exit 2 ;;
esac
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/runworkload" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t fidelity-XXXXXX)
trap '[ -n "${KEEP:-}" ] && echo "fidelity: kept $tmp" >&2 || rm -rf "$tmp"' EXIT
if [ "$what" != bundled ] && [ ! -d ../shared/workloads ]; then
  echo "fidelity.sh: $what needs the traces of ../shared/workloads" >&2
  exit 2
fi
BIN=$bin TMP=$tmp SHARED=../shared/workloads python3 scripts/lib/fidelity.py "$@"
