#!/usr/bin/env bash
# clemu across hosts: the controller and three agent hosts, each in a
# network namespace of its own, joined by veth pairs, so that every
# message crosses real TCP between "machines". Runs a small workload and
# checks that every job has exactly one record on the controller's side.
#
#   sudo scripts/multihost.sh [JOBS]          (default 40; needs root and iproute2)
#
# Layout: namespace <p>-ctl holds the controller (10.99.K.1 on link K);
# namespace <p>-hK holds agent hK (10.99.K.2), hosting vn[..] nodes; set up
# by scripts/lib/netns.sh, which scripts/partition.sh shares.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/netns.sh
source scripts/lib/netns.sh
jobs=${1:-40}
[ "$(id -u)" -eq 0 ] || { echo "multihost: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null || { echo "multihost: needs iproute2 (apt install iproute2)" >&2; exit 2; }

cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/controller" ] || bin=$PWD/target/debug

p=clemu$$
tmp=$(mktemp -d -t clemu-multihost-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  netns_down
  if [ "${KEEP:-0}" = 1 ]; then echo "multihost: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

netns_up 99

cat > "$tmp/cluster.toml" <<TOML
[controller]
listen = "0.0.0.0:7817"
state_dir = "$tmp/state"
record_dir = "$tmp/records"
policy = "easy"

[agents]
local = false
sigsleep = "$bin/sigsleep"
heartbeat_ms = 200
heartbeat_timeout_ms = 3000

[[nodes]]
names = "vn[01-12]"
cpus = 4
memory = "8G"
TOML

cluster_up 99
for _ in $(seq 100); do
  [ "$(ctl nodes --format json | python3 -c 'import json,sys; print(sum(n["state"]!="down" for n in json.load(sys.stdin)))')" = 12 ] && break
  sleep 0.1
done
echo "cluster up across namespaces:"
ctl nodes --format json | python3 -c '
import json, sys
by = {}
for n in json.load(sys.stdin): by.setdefault(n["host"], []).append(n["name"])
for h, ns in sorted(by.items()): print(f"  {h}: {len(ns)} nodes ({ns[0]}..{ns[-1]})")
assert sorted(by) == ["h1", "h2", "h3"], by'

# A small workload: jobs of 1 to 8 cores, 0.2 to 1 s each.
ids=()
for i in $(seq "$jobs"); do
  cores=$(( (i * 7) % 8 + 1 )); runtime=0.$(( (i * 3) % 9 + 2 ))
  ids+=($(ctl submit --cores "$cores" --runtime "$runtime"))
done
echo "submitted ${#ids[@]} jobs"
for _ in $(seq 600); do
  left=$(ctl queue --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [ "$left" = 0 ] && break
  sleep 0.2
done
ctl queue --all --format json > "$tmp/queue.json"
ctl shutdown >/dev/null 2>&1 || true
wait "${pids[0]}" 2>/dev/null || true

"$bin/calcmets" dump "$tmp/records" > "$tmp/records.jsonl"
python3 - "$tmp/queue.json" "$tmp/records.jsonl" "${#ids[@]}" <<'PY'
import json, sys, collections
queue = json.load(open(sys.argv[1]))
recs = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
states = collections.Counter(j["state"] for j in queue)
per_job = collections.Counter(r["id"] for r in recs)
nodes = sorted({r["node"] for r in recs})
print(f"jobs: {dict(states)}; records: {len(recs)} for {len(per_job)} jobs; nodes used: {len(nodes)}")
assert states["completed"] == n, states
assert sorted(per_job) == sorted(j["id"] for j in queue), "a job has no record"
dupes = [j for j, c in per_job.items() if c != 1]
assert not dupes, f"jobs with more than one record: {dupes}"
assert len(nodes) >= 9, f"work spread over too few nodes: {nodes}"
print("multihost: OK, every job has exactly one record on the controller's side")
PY
