#!/usr/bin/env bash
# How long a job's end takes to become the start of the job waiting for
# it: the cost a chain of short jobs pays per link, which a replay at
# 10,000x turns into trace seconds (BENCHMARKS.md, "From one job's end to
# the next one's start"). On a cluster of one core (`clemu-slurm up
# --nodes 1 --cpus 1`, its controller hosting the agent, every coming pass
# prepared ahead as by default), JOBS jobs of RUNTIME seconds submitted in
# one request run one after another; from their records, the gap between
# each job's end and the next one's start (the controller's start of it,
# as its record gives it: the launch of its process is part of its run). Prints, per round and build,
# the median, 90th percentile and mean of the gaps in microseconds.
#
#   scripts/bench-end-to-start.sh [BIN_DIR...]     (JOBS=2000 RUNTIME=0.001 ROUNDS=3)
#
# Each BIN_DIR holds a release build's clemu-slurm, controller, agent,
# sigsleep and calcmets (another commit's, say): the builds take turns,
# round by round, so that the machine's noise falls on all of them alike.
# Without one, this tree's release build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2000}
runtime=${RUNTIME:-0.001}
rounds=${ROUNDS:-3}
if [ $# -eq 0 ]; then
  cargo build --release -q
  host=$(rustc -vV | sed -n 's/^host: //p')
  set -- "$PWD/target/$host/release"
fi
tmp=$(mktemp -d -t bench-end-to-start-XXXXXX)
cleanup() {
  local i=0
  for bin in "$@"; do
    "$bin/clemu-slurm" down --dir "$tmp/c$i" >/dev/null 2>&1 || true
    i=$((i + 1))
  done
  rm -rf "$tmp"
}
trap 'cleanup "$@"' EXIT

# Jobs pending or running on the cluster CONF, by BIN's controller.
left() {
  "$1/controller" --config "$2" stats | awk '/^jobs/ { gsub(",", ""); print $3 + $5 }'
}

for r in $(seq "$rounds"); do
  i=0
  for bin in "$@"; do
    dir=$tmp/c$i
    "$bin/clemu-slurm" down --dir "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
    "$bin/clemu-slurm" up --nodes 1 --cpus 1 --dir "$dir" >/dev/null 2>&1
    conf=$dir/cluster.toml
    "$bin/controller" --config "$conf" submit --cores 1 --runtime "$runtime" --count "$jobs" >/dev/null
    while [ "$(left "$bin" "$conf")" != 0 ]; do sleep 0.1; done
    "$bin/clemu-slurm" down --dir "$dir" >/dev/null 2>&1
    printf 'round %d, %s: ' "$r" "$bin"
    "$bin/calcmets" dump "$dir/records" | python3 -c '
import json, statistics, sys
jobs = sorted((json.loads(line) for line in sys.stdin), key=lambda j: j["start"])
gaps = sorted((b["start"] - a["end"]) * 1e6 for a, b in zip(jobs, jobs[1:]))
print("%d links: median %.0f us, p90 %.0f us, mean %.0f us" % (
    len(gaps), statistics.median(gaps), gaps[len(gaps) * 9 // 10], statistics.mean(gaps)))'
    i=$((i + 1))
  done
done
