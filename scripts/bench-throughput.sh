#!/usr/bin/env bash
# End-to-end job throughput on one host, against the raw rate of spawning
# and reaping the same sigsleep binary without clemu, side by side.
#
#   scripts/bench-throughput.sh [JOBS] [ROUNDS]     (default 5000 jobs, 3 rounds)
#
# clemu: a controller hosting 4 nodes of 16 cores in-process receives JOBS
# zero-length one-core jobs in one submission; the time runs from the
# submission until the controller counts every job ended (started as a
# sigsleep, reaped, its record written), asked every 20 ms over the
# submitting connection (controller/examples/submit_wait.rs). Baseline: `spawn_raw` (agent's
# example) starts the same sigsleep with the same arguments, at most 64 at
# once (the cluster's cores), and reaps them. The two alternate, ROUNDS
# times each; the table shows each round and the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-5000}
rounds=${2:-3}
cargo build --release -q
cargo build --release -q -p agent --example spawn_raw
cargo build --release -q -p controller --example submit_wait
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
tmp=$(mktemp -d -t bench-throughput-XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

clemu_rate() { # round
  local dir=$tmp/clemu$1
  mkdir -p "$dir"
  cat > "$dir/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$dir/state"
schedule_interval_s = 0.001

[agents]
local = true
sigsleep = "$PWD/$bin/sigsleep"

[[nodes]]
names = "vn[1-4]"
cpus = 16
memory = "64G"
EOF
  "$bin/controller" --config "$dir/cluster.toml" serve > "$dir/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -s "$dir/state/address" ] && break; sleep 0.1; done
  local ctl=("$bin/controller" --config "$dir/cluster.toml") rate
  rate=$("$bin/examples/submit_wait" "$dir/cluster.toml" "$jobs")
  "${ctl[@]}" shutdown > /dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  pid=
  local records
  records=$("$bin/calcmets" dump "$dir/state/records" | wc -l)
  [ "$records" -eq "$jobs" ] || { echo "bench-throughput: $records records for $jobs jobs" >&2; exit 1; }
  echo "$rate"
}

raw_rate() { # round
  "$bin/examples/spawn_raw" "$bin/sigsleep" "$jobs" 64 "$tmp/raw$1.rec"
}

echo "| round | raw spawn + reap (jobs/s) | clemu end to end (jobs/s) | clemu / raw |"
echo "|---:|---:|---:|---:|"
ratios=()
for r in $(seq "$rounds"); do
  raw=$(raw_rate "$r")
  clemu=$(clemu_rate "$r")
  ratio=$(awk -v a="$clemu" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')
  ratios+=("$ratio")
  echo "| $r | $raw | $clemu | $ratio |"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "| median | | | **$median** |"
