#!/usr/bin/env bash
# What a constant delay does to a replay's figures, in the twin alone: how
# much delay per start, end and arrival a window can take before a figure
# moves by 2 %, and whether it hangs on ties (a nanosecond moving it). The
# twin runs once exact, then once per delay in DELAYS (ns), each kind of
# delay (start, end, arrive) at that value; suspensions and resumptions
# 1 ns. Prints each delay in wall ns and what it comes to in trace seconds
# at SPEEDUP, and mean wait and mean bounded slowdown against the exact
# twin.
#
#   scripts/twin-delays.sh TRACE SKIP JOBS [POLICY]    (default easy)
#
# DELAYS (default "1 1000 10000 30000 50000 70000 100000"); SPEEDUP
# (default 10000, the speed-up the delays are wall clock of). On the demo
# cluster (configs/demo.toml with POLICY), --cores-per-proc 2. Runs in
# seconds: the twin is virtual time.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: scripts/twin-delays.sh TRACE SKIP JOBS [POLICY]" >&2; exit 2; }
trace=$1 skip=$2 jobs=$3 policy=${4:-easy}
delays=${DELAYS:-1 1000 10000 30000 50000 70000 100000}
speedup=${SPEEDUP:-10000}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
tmp=$(mktemp -d -t twin-delays-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sed "s/^policy = \"easy\"/policy = \"$policy\"/" configs/demo.toml > "$tmp/cluster.toml"
twin() {
  "$bin/runworkload" --config "$tmp/cluster.toml" --workload "$trace" --skip "$skip" \
    --jobs "$jobs" --cores-per-proc 2 --speedup "$speedup" --simulate -q --out "$1" "${@:2}" \
    >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
}
twin "$tmp/exact"
# The figure's relative difference from the exact twin, from calcmets'
# fidelity report.
rel() {
  "$bin/calcmets" fidelity --format json "$1/shrink-100" "$tmp/exact/shrink-100" 2>/dev/null |
    python3 -c 'import json,sys; m=json.load(sys.stdin)["metrics"]
for k in ("wait_mean","bounded_slowdown_mean"):
    r=m[k].get("rel"); print("–" if r is None else "%+.2f %%" % (r*100), end=" | ")'
}
echo "$(basename "$trace") jobs $((skip + 1))-$((skip + jobs)), $policy, at ${speedup}x"
echo
echo "| delay per start, end and arrival (wall ns) | in trace s | mean wait | mean bounded slowdown |"
echo "|---:|---:|---:|---:|"
for d in $delays; do
  mkdir -p "$tmp/d$d"
  printf 'kind,ns\nstart,%s\nend,%s\narrive,%s\nsuspend,1\nresume,1\n' "$d" "$d" "$d" \
    > "$tmp/d$d/latency.csv"
  twin "$tmp/d$d/twin" --latencies "$tmp/d$d"
  echo "| $d | $(python3 -c "print(f'{$d * $speedup / 1e9:g}')") | $(rel "$tmp/d$d/twin")"
done
