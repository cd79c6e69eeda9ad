#!/usr/bin/env bash
# A stream of short jobs through the emulation, end to end: on a cluster
# of `clemu-slurm up` (100 nodes of 16 cores, its controller hosting the
# agents, every coming pass prepared ahead as by default), ROUNDS rounds
# of JOBS jobs of no length, each round submitted in one request
# (`controller submit --count`) and timed until no job is pending or
# running. Prints jobs/s per round.
#
#   scripts/bench-short-jobs.sh [BIN_DIR...]     (JOBS=10000 ROUNDS=3)
#
# Each BIN_DIR holds a release build's clemu-slurm, controller, agent and
# sigsleep (another commit's, say): the builds take turns, round by
# round, so that the machine's noise falls on all of them alike. Without
# one, this tree's release build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-10000}
rounds=${ROUNDS:-3}
if [ $# -eq 0 ]; then
  cargo build --release -q
  host=$(rustc -vV | sed -n 's/^host: //p')
  set -- "$PWD/target/$host/release"
fi
tmp=$(mktemp -d -t bench-short-jobs-XXXXXX)
cleanup() {
  local i=0
  for bin in "$@"; do
    "$bin/clemu-slurm" down --dir "$tmp/c$i" >/dev/null 2>&1 || true
    i=$((i + 1))
  done
  rm -rf "$tmp"
}
trap 'cleanup "$@"' EXIT
now() { date +%s.%N; }

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
    "$bin/clemu-slurm" up --nodes 100 --cpus 16 --dir "$dir" >/dev/null 2>&1
    conf=$dir/cluster.toml
    t0=$(now)
    "$bin/controller" --config "$conf" submit --cores 1 --runtime 0 --count "$jobs" >/dev/null
    while [ "$(left "$bin" "$conf")" != 0 ]; do sleep 0.2; done
    t1=$(now)
    printf 'round %d, %s: %.0f jobs/s\n' "$r" "$bin" "$(echo "$jobs / ($t1 - $t0)" | bc -l)"
    "$bin/clemu-slurm" down --dir "$dir" >/dev/null 2>&1
    i=$((i + 1))
  done
done
