#!/usr/bin/env bash
# What a finished job costs the controller's memory: on a cluster of
# `clemu-slurm up` (100 nodes of 16 cores, its controller hosting the
# agents), ROUNDS rounds of JOBS jobs of no length, each round submitted
# in one request and run to its end; after each, the controller's RSS
# and what it grew by per job since the cluster was idle. The controller
# keeps up to 500,000 finished jobs (sacct's history), so this is what
# a long replay or a busy day costs it.
#
#   scripts/bench-finished-job-memory.sh [BIN_DIR]     (JOBS=10000 ROUNDS=5)
#
# BIN_DIR holds a release build's clemu-slurm, controller, agent and
# sigsleep; without it, this tree's release build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-10000}
rounds=${ROUNDS:-5}
bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --release -q
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin=$PWD/target/$host/release
fi
tmp=$(mktemp -d -t finished-job-memory-XXXXXX)
trap '"$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
"$bin/clemu-slurm" up --nodes 100 --cpus 16 --dir "$tmp/c" >/dev/null 2>&1
conf=$tmp/c/cluster.toml
pid=$(cat "$tmp/c/controller.pid" 2>/dev/null || pgrep -f "controller serve --detach --config $conf" | head -1)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
left() {
  "$bin/controller" --config "$conf" stats | awk '/^jobs/ { gsub(",", ""); print $3 + $5 }'
}
idle=$(rss)
printf 'idle: RSS %d KiB\n' "$idle"
for r in $(seq "$rounds"); do
  "$bin/controller" --config "$conf" submit --cores 1 --runtime 0 --count "$jobs" >/dev/null
  while [ "$(left)" != 0 ]; do sleep 0.2; done
  now=$(rss)
  printf 'after %7d finished jobs: RSS %7d KiB, %.2f KiB per finished job\n' \
    "$((r * jobs))" "$now" "$(echo "($now - $idle) / ($r * $jobs)" | bc -l)"
done
