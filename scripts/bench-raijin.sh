#!/usr/bin/env bash
# The originating study's cluster on this one machine: configs/raijin-3600.toml
# (3,600 nodes, 57,600 cores, 10 agents hosted by the controller) replaying
# a real trace, ever more compressed in time, each run set beside its
# virtual-time twin (the baseline: the same policy with perfect timing).
#
#   scripts/bench-raijin.sh [JOBS] [SPEEDUP] [SHRINK]
#        (default 1000 jobs of RICC-2010-2, speedup 4000, shrink 100:25:25 plus 12)
#
# RICC's processors map to 7 cores each (its 8,192 processors on 57,344 of
# the 57,600 cores), so the trace's load is kept. Every job is a real
# sigsleep. A factor keeps up when the submissions' lateness p99 is at most
# 10 ms and the mean wait and the utilization are within 2 % of the twin's.
# Compression is trace time over emulated time (speedup × 100 / factor).
# Memory: peak RSS of runworkload (controller, agents and nodes in one
# process) and the peak number of live sigsleeps, sampled every 0.2 s, at
# 72.5 KiB of private memory each (scripts/bench-signals.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000}
speedup=${2:-4000}
shrink=${3:-}
trace=../shared/workloads/RICC-2010-2.swf.gz
[ -r "$trace" ] || { echo "bench-raijin: cannot read $trace" >&2; exit 2; }
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/runworkload" ] || bin=target/release
tmp=$(mktemp -d -t bench-raijin-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The shipped config listens on 0.0.0.0:7817; a copy on a free loopback port.
sed 's/^listen = .*/listen = "127.0.0.1:0"/' configs/raijin-3600.toml > "$tmp/raijin.toml"
factors=${shrink:-"100 75 50 25 12"}
common=(--config "$tmp/raijin.toml" --workload "$trace" --jobs "$jobs" --cores-per-proc 7 --speedup "$speedup")

echo "| factor | compression | emulated s | lateness p50 (ms) | lateness p99 (ms) | mean wait vs twin | utilization vs twin | peak live sigsleeps | runworkload peak RSS (MiB) | keeps up |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for f in $factors; do
  "$bin/runworkload" "${common[@]}" --shrink "$f" --simulate --out "$tmp/sim" > /dev/null 2>&1
  /usr/bin/time -f "%M" -o "$tmp/rss" "$bin/runworkload" "${common[@]}" --shrink "$f" --out "$tmp/emu" \
    > "$tmp/emu.log" 2>&1 &
  run=$!
  peak=0
  while kill -0 "$run" 2>/dev/null; do
    n=$(pgrep -c -x sigsleep || true)
    [ "$n" -gt "$peak" ] && peak=$n
    sleep 0.2
  done
  wait "$run" || { cat "$tmp/emu.log" >&2; exit 1; }
  d=$(printf '%03d' "$f")
  "$bin/calcmets" fidelity --format json "$tmp/emu/shrink-$d" "$tmp/sim/shrink-$d" > "$tmp/fid.json"
  python3 - "$tmp/emu/shrink-$d/manifest.json" "$tmp/fid.json" "$f" "$speedup" "$peak" "$(cat "$tmp/rss")" <<'EOF'
import json, sys
man, fid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
f, speedup, peak, rss = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
late = man["lateness"]
wait = fid["metrics"]["wait_mean"]["rel"]
util = fid["metrics"]["utilization"]["rel"]
ok = late["p99"] <= 0.010 and abs(wait) <= 0.02 and abs(util) <= 0.02
print(f"| {f} | {speedup * 100 / f:.0f}x | {man['end'] - man['start']:.1f} | {late['p50'] * 1e3:.3f} | "
      f"{late['p99'] * 1e3:.3f} | {wait * 100:+.2f} % | {util * 100:+.2f} % | {peak} | {rss / 1024:.1f} | "
      f"{'yes' if ok else 'no'} |")
EOF
  rm -rf "$tmp/emu" "$tmp/sim"
done
