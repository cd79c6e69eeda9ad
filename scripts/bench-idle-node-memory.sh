#!/usr/bin/env bash
# What one more idle node costs a controller that hosts its nodes: its
# PSS, idle, at 100, 360, 1,000 and 10,000 nodes of 16 cores (the cluster
# `clemu-slurm up` makes: one partition of every node), and each step's
# difference over the nodes it adds. BIN is a directory holding the
# controller and sigsleep to measure (default: this checkout's release
# build), so that two builds are measured side by side:
#
#   scripts/bench-idle-node-memory.sh [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --release -q
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin=$PWD/target/$host/release
fi
tmp=$(mktemp -d -t idle-node-memory-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sizes=(100 360 1000 10000)
declare -A pss
for n in "${sizes[@]}"; do
  d=$tmp/$n
  mkdir -p "$d"
  cat > "$d/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$d/state"
record_dir = "$d/records"
policy = "easy"
schedule_interval_s = 0

[agents]
local = true
sigsleep = "$bin/sigsleep"

[[nodes]]
names = "node[1-$n]"
cpus = 16
memory = "64G"

[[partitions]]
name = "batch"
nodes = "ALL"
default = true
EOF
  pid=$("$bin/controller" serve --detach --config "$d/cluster.toml" --log "$d/log" 2>/dev/null)
  sleep 1
  pss[$n]=$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup")
  "$bin/controller" --config "$d/cluster.toml" shutdown >/dev/null 2>&1 || kill "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
done
for i in 1 2 3; do
  a=${sizes[$((i - 1))]} b=${sizes[$i]}
  printf 'PSS %6d KiB with %5d idle nodes, %6d KiB with %5d: %.2f KiB per idle node\n' \
    "${pss[$a]}" "$a" "${pss[$b]}" "$b" "$(echo "(${pss[$b]} - ${pss[$a]}) / ($b - $a)" | bc -l)"
done
