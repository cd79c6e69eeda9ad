#!/usr/bin/env bash
# Faults at random, by seed, for MINUTES: the cluster of
# scripts/failover.sh (two controllers, three agent hosts and the replay,
# each in a network namespace, real TCP) replays configs/workloads/
# kth-sp2-200.swf round after round, while a schedule drawn from SEED
# kills and restarts either controller, hangs one and lets it go, cuts
# and restores the link between any two parties, and kills and restarts
# agents, at random instants and in random combinations. After every
# round: every acknowledged job completed exactly once (one record), or
# ended in a state that says why; no core ran two jobs at once, by the
# cluster's account and by the processes'; no job ran in two processes at
# once; no process left; the replay over within 90 s of the faults
# healing. A failing seed fails again: the schedule depends on the seed
# and the round only. Prints each round's faults, then the faults applied
# by kind, the jobs replayed and the spans without a leader (p50, p99,
# max).
#
#   sudo scripts/chaos.sh SEED MINUTES      (SPEEDUP, default 20000: a
#                                            round is about 20 s)
#
# KEEP=1 keeps the logs of a run that passed (a failing one's are kept).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: sudo scripts/chaos.sh SEED MINUTES" >&2; exit 2; }
[[ $1 =~ ^[0-9]+$ ]] || { echo "chaos: SEED must be a whole number, not '$1'" >&2; exit 2; }
[[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "chaos: MINUTES must be a number, not '$2'" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "chaos: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null || { echo "chaos: needs iproute2 (apt install iproute2)" >&2; exit 2; }
cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/controller" ] || bin=$PWD/target/debug
tmp=$(mktemp -d -t clemu-chaos-XXXXXX)
rc=0
BIN=$bin TMP=$tmp python3 scripts/lib/chaos.py "$1" "$2" || rc=$?
if [ "$rc" -ne 0 ] || [ "${KEEP:-0}" = 1 ]; then echo "chaos: logs in $tmp" >&2; else rm -rf "$tmp"; fi
exit "$rc"
