#!/usr/bin/env bash
# A cluster the size of Fugaku on one machine: configs/fugaku.toml
# (158,976 nodes of 48 cores, eight local agents in the controller's
# process). Measures, in the same run:
#
# - idle memory per node: the controller's resident set (VmRSS) once every
#   node is up and 3 s idle, against the same controller hosting one node
#   of one agent (the baseline); per node = (RSS - baseline) / (N - 1);
# - one EASY pass with 100,000 jobs queued behind a full machine (the
#   pass benchmark on this config; mixed and fragmented cases).
#
#   scripts/bench-fugaku.sh
#
# Prints one Markdown table, then the pass benchmark's.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
tmp=$(mktemp -d -t bench-fugaku-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Serves CONFIG until NODES nodes are idle, waits 3 s, prints its RSS (KiB).
idle_rss() {
  local config=$1 nodes=$2 state=$tmp/state$2
  "$bin/controller" --config "$config" serve --listen 127.0.0.1:0 --state-dir "$state" \
    > "$tmp/serve$nodes.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do [ -s "$state/address" ] && break; sleep 0.1; done
  local addr up=0
  addr=$(cat "$state/address")
  for _ in $(seq 600); do
    up=$("$bin/controller" --config "$config" --addr "$addr" --secret-file "$state/secret" --format json stats 2>/dev/null \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"].get("idle", 0))' || echo 0)
    [ "$up" = "$nodes" ] && break
    sleep 0.2
  done
  if [ "$up" != "$nodes" ]; then
    echo "bench-fugaku: only $up of $nodes nodes came up ($tmp/serve$nodes.log)" >&2
    exit 1
  fi
  sleep 3
  rss_kib "$pid"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
}

cat > "$tmp/one.toml" <<'TOML'
[agents]
local = true

[[nodes]]
names = "fn000000"
cpus = 48
memory = "32G"
TOML

base=$(idle_rss "$tmp/one.toml" 1)
full=$(idle_rss configs/fugaku.toml 158976)
per=$(( (full - base) * 1024 / (158976 - 1) ))
echo "| cluster | nodes | controller RSS | per node (over the 1-node baseline) |"
echo "|---|---:|---:|---:|"
echo "| one node (baseline) | 1 | $((base / 1024)) MiB | - |"
echo "| configs/fugaku.toml | 158,976 | $((full / 1024)) MiB | $per bytes |"
echo
cargo bench -q -p controller --bench pass -- configs/fugaku.toml 100000
