#!/usr/bin/env bash
# The virtual-time twin (`runworkload --simulate`) on 100,000 jobs of a real
# trace, against the time it takes just to read that trace, side by side.
#
#   scripts/bench-sim.sh [TRACE]     (default ../shared/workloads/RICC-2010-2.swf.gz)
#
# Two clusters: configs/ricc-1024.toml (the trace's own 8,192 cores, so the
# queue is long and every pass backfills over it) and
# configs/raijin-3600.toml (57,600 cores, short queue, many nodes). Each is
# simulated 3 times with EASY; the best time is reported, and the records
# of the runs must be byte for byte the same (the twin is deterministic).
# The baseline is `calcmets --swf` on the same trace: parsing it, no
# scheduling.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-../shared/workloads/RICC-2010-2.swf.gz}
[ -r "$trace" ] || { echo "bench-sim: cannot read $trace" >&2; exit 2; }
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/runworkload" ] || bin=target/release
tmp=$(mktemp -d -t bench-sim-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
jobs=100000

secs() { # command... -> wall seconds
  local s e
  s=$(date +%s.%N)
  "$@" > /dev/null
  e=$(date +%s.%N)
  awk "BEGIN{printf \"%.2f\", $e - $s}"
}
best() { printf '%s\n' "$@" | sort -g | head -1; }

parse=()
for _ in 1 2 3; do parse+=("$(secs "$bin/calcmets" --swf "$trace" --format json)"); done
p=$(best "${parse[@]}")

echo "| cluster | jobs in metrics | twin s (best of 3) | trace parse s | twin / parse | deterministic |"
echo "|---|---|---|---|---|---|"
for config in ricc-1024 raijin-3600; do
  t=()
  for run in 1 2 3; do
    t+=("$(secs "$bin/runworkload" --config "configs/$config.toml" --workload "$trace" \
      --jobs "$jobs" --simulate --out "$tmp/$config-$run" -q)")
  done
  same=yes
  for run in 2 3; do
    cmp -s "$tmp/$config-1/shrink-100/records/jobs.rec" "$tmp/$config-$run/shrink-100/records/jobs.rec" || same=NO
  done
  done_jobs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"])' \
    "$tmp/$config-1/shrink-100/metrics.json")
  b=$(best "${t[@]}")
  echo "| $config | $done_jobs | $b | $p | $(awk "BEGIN{printf \"%.1f\", $b / $p}") | $same |"
  [ "$same" = yes ] || { echo "bench-sim: the twin's records differ between runs" >&2; exit 1; }
done
