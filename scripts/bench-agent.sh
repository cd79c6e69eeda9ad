#!/usr/bin/env bash
# Virtual nodes per agent: one agent process hosting 1,000, 10,000 and
# 100,000 idle virtual nodes, against the same agent hosting one node (the
# baseline, in the same run).
#
#   scripts/bench-agent.sh [SECONDS]     (CPU sampled over SECONDS, default 20)
#
# A controller of 100,000 nodes (no local agents) runs throughout; for each
# size an agent registers that many of its nodes, is left idle for 3 s, and
# then its resident set (VmRSS) and its CPU time over SECONDS (utime +
# stime from /proc/PID/stat) are read. RSS per node is (RSS at N - RSS at
# 1) / (N - 1). Prints one Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
tmp=$(mktemp -d -t bench-agent-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

cat > "$tmp/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"

[agents]
heartbeat_ms = 1000

[[nodes]]
names = "vn[000000-099999]"
cpus = 16
memory = "64G"
EOF
"$bin/controller" --config "$tmp/cluster.toml" serve --state-dir "$tmp/state" > "$tmp/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/state/address" ] && break; sleep 0.1; done
addr=$(cat "$tmp/state/address")
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# One agent of N nodes: prints "rss_kib cpu_percent threads".
measure() {
  local n=$1 last nodes
  last=$(printf '%06d' $((n - 1)))
  nodes="vn[000000-$last]"
  [ "$n" -gt 1 ] || nodes=vn000000
  "$bin/agent" --controller "$addr" --nodes "$nodes" --cpus 16 --memory 64G \
    --secret-file "$tmp/state/secret" --host "bench$n" --record-dir "$tmp/spool$n" \
    > "$tmp/agent$n.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do grep -q registered "$tmp/agent$n.log" && break; sleep 0.1; done
  grep -q registered "$tmp/agent$n.log" || { cat "$tmp/agent$n.log" >&2; exit 1; }
  sleep 3
  local rss t0 t1 threads
  rss=$(rss_kib "$pid")
  t0=$(cpu_ticks "$pid")
  sleep "$secs"
  t1=$(cpu_ticks "$pid")
  threads=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  awk -v r="$rss" -v a="$t0" -v b="$t1" -v s="$secs" -v t="$tck" -v th="$threads" \
    'BEGIN { printf "%d %.3f %d\n", r, (b - a) / t / s * 100, th }'
}

read -r base_rss base_cpu base_threads < <(measure 1)
echo "| nodes | agent RSS (MiB) | RSS per node (bytes) | idle CPU (% of one core) | threads |"
echo "|---:|---:|---:|---:|---:|"
awk -v r="$base_rss" -v c="$base_cpu" -v t="$base_threads" \
  'BEGIN { printf "| 1 (baseline) | %.1f | | %.3f | %d |\n", r / 1024, c, t }'
for n in 1000 10000 100000; do
  read -r rss cpu threads < <(measure "$n")
  awk -v n="$n" -v r="$rss" -v b="$base_rss" -v c="$cpu" -v t="$threads" \
    'BEGIN { printf "| %d | %.1f | %.0f | %.3f | %d |\n", n, r / 1024, (r - b) * 1024 / (n - 1), c, t }'
done
