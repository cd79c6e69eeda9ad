#!/usr/bin/env bash
# Submission load on the controller: how fast it accepts jobs in batches
# (each batch journaled and synced before it is acknowledged), and what a
# queued job costs in memory.
#
#   scripts/bench-submit.sh [JOBS]        (default 1000000)
#   BIN=DIR scripts/bench-submit.sh ...   (DIR's controller: another build's)
#
# The cluster is configs/raijin-3600.toml's 3,600 nodes of 16 cores with no
# agent connected, so every job stays queued. One client submits JOBS
# one-core jobs with `controller submit --count JOBS --batch B` over one
# connection, for B = 1,000, 10,000 and 100,000, each against a fresh
# controller. Memory per queued job is the controller's resident set after
# the submissions minus the same controller's resident set before them
# (the baseline: an idle 3,600-node controller), divided by JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000000}
if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  cargo build --release -q
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin=target/$host/release
  [ -x "$bin/controller" ] || bin=target/release
fi
tmp=$(mktemp -d -t bench-submit-XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

cat > "$tmp/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
policy = "easy"
max_jobs = $jobs

[[nodes]]
names = "vn[0000-3599]"
cpus = 16
memory = "64G"

[[partitions]]
name = "batch"
nodes = "ALL"
default = true
EOF

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# One run: a fresh controller, JOBS jobs in batches of $1. Prints
# "batch seconds rate rss_before rss_after hwm journal_mib".
run() {
  local batch=$1 state=$tmp/state-$1
  "$bin/controller" --config "$tmp/cluster.toml" serve --state-dir "$state" \
    > "$tmp/serve-$batch.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -s "$state/address" ] && break; sleep 0.1; done
  [ -s "$state/address" ] || { cat "$tmp/serve-$batch.log" >&2; exit 1; }
  sleep 0.5
  local before s e after hwm
  before=$(rss_kib "$pid")
  s=$(date +%s.%N)
  "$bin/controller" --config "$tmp/cluster.toml" --secret-file "$state/secret" \
    --addr "$(cat "$state/address")" submit --cores 1 --runtime 60 \
    --count "$jobs" --batch "$batch" > "$tmp/ids"
  e=$(date +%s.%N)
  [ "$(wc -l < "$tmp/ids")" -eq "$jobs" ] || { echo "bench-submit: not every job was acknowledged" >&2; exit 1; }
  sleep 1 # let a pass over the full queue run
  after=$(rss_kib "$pid")
  hwm=$(hwm_kib "$pid")
  local journal
  journal=$(du -sm "$state" | cut -f1)
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  awk -v b="$batch" -v s="$s" -v e="$e" -v n="$jobs" -v r0="$before" -v r1="$after" -v h="$hwm" -v j="$journal" \
    'BEGIN { printf "| %d | %.2f | %.0f | %.1f | %.1f | %.1f | %d | %.0f |\n", b, e - s, n / (e - s), r0 / 1024, r1 / 1024, h / 1024, j, (r1 - r0) * 1024 / n }'
}

echo "| batch | seconds | jobs/s | RSS before (MiB) | RSS after (MiB) | peak RSS (MiB) | state dir (MiB) | bytes per queued job |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for b in 1000 10000 100000; do run "$b"; done
