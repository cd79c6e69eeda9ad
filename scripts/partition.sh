#!/usr/bin/env bash
# Network partitions between the controller and its agents, on real TCP
# between network namespaces: a short cut that the cluster rides through,
# then a long one that gets an agent declared lost, its jobs run elsewhere,
# and its return. Throughout, a sampler watches every sigsleep process on
# the machine and fails if one job ever runs twice at the same time.
#
#   sudo scripts/partition.sh            (needs root and iproute2)
#
# Layout as scripts/multihost.sh: namespace <p>-ctl holds the controller,
# <p>-hK holds agent hK (nodes vn[4K-3..4K], 4 cores each). A cut is the
# controller's end of the link set down: packets vanish both ways, no
# connection is reset.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/netns.sh
source scripts/lib/netns.sh
[ "$(id -u)" -eq 0 ] || { echo "partition: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null || { echo "partition: needs iproute2 (apt install iproute2)" >&2; exit 2; }

cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/controller" ] || bin=$PWD/target/debug

p=clp$$
tmp=$(mktemp -d -t clemu-partition-XXXXXX)
pids=()
sampler=""
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  netns_down
  if [ "${KEEP:-0}" = 1 ]; then echo "partition: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "partition: FAILED: $*" >&2; echo "logs in $tmp (KEEP=1 keeps them)" >&2; KEEP=1; exit 1; }

netns_up 98
cut() { ip -n "$p-ctl" link set "$p-c$1" down; }
mend() { ip -n "$p-ctl" link set "$p-c$1" up; }

# Heartbeat every 200 ms; an agent silent for 3 s is lost, and an agent
# that hears nothing for 1.5 s kills its jobs.
cat > "$tmp/cluster.toml" <<TOML
[controller]
listen = "0.0.0.0:7817"
state_dir = "$tmp/state"
record_dir = "$tmp/records"

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

cluster_up 98
nodes_in() { # state -> count
  ctl nodes --format json | python3 -c "import json,sys; print(sum(n['state']=='$1' for n in json.load(sys.stdin)))"
}
for _ in $(seq 100); do [ "$(nodes_in down)" = 0 ] && break; sleep 0.1; done
[ "$(nodes_in down)" = 0 ] || fail "the agents did not come up"
echo "cluster up: 3 agent hosts in their own namespaces, 12 nodes"

# The sampler: every 20 ms, live sigsleeps of this cluster by job id. One
# job in two processes at once (on one host or two) is a double run.
python3 scripts/lib/double_runs.py "$tmp" > "$tmp/sampler.log" 2>&1 &
sampler=$!

# 36 jobs of 4 cores for 6 s on 48 cores: three waves, each node busy.
ids=()
for _ in $(seq 36); do ids+=($(ctl submit --cores 4 --runtime 6)); done
for _ in $(seq 100); do
  [ "$(ctl queue --format json | python3 -c 'import json,sys; print(sum(j["state"]=="running" for j in json.load(sys.stdin)))')" = 12 ] && break
  sleep 0.1
done
echo "submitted ${#ids[@]} jobs; 12 running"

# 1. A short cut (1 s, under the agents' 1.5 s fence): nothing is lost.
cut 3; sleep 1; mend 3
sleep 1
[ "$(nodes_in down)" = 0 ] || fail "a 1 s cut took nodes down"
grep -q "job requeued" "$tmp/controller.log" && fail "a 1 s cut requeued jobs"
echo "short cut of h3 (1 s): ridden through, no node down, nothing requeued"

# 2. A long cut (8 s): h2 is declared lost within the heartbeat timeout,
#    kills its jobs by itself, and they run elsewhere.
t0=$(date +%s.%N)
cut 2
for _ in $(seq 100); do [ "$(nodes_in down)" = 4 ] && break; sleep 0.1; done
t1=$(date +%s.%N)
[ "$(nodes_in down)" = 4 ] || fail "h2's nodes were not marked down"
echo "long cut of h2: its 4 nodes down after $(python3 -c "print(round($t1 - $t0, 1))") s (timeout 3 s)"
sleep 7
mend 2
for _ in $(seq 100); do [ "$(nodes_in down)" = 0 ] && break; sleep 0.1; done
[ "$(nodes_in down)" = 0 ] || fail "h2 did not come back"
echo "link of h2 restored: it registered again, its nodes are back"
grep -q "killing every job" "$tmp/agent-h2.log" || fail "h2 did not fence its jobs"
requeued=$(grep -c "job requeued" "$tmp/controller.log" || true)
echo "h2 fenced its jobs; the controller requeued $requeued of them"
[ "$requeued" -ge 1 ] || fail "nothing was requeued"

# Converge: every job completes, once.
for _ in $(seq 600); do
  left=$(ctl queue --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [ "$left" = 0 ] && break
  sleep 0.2
done
kill "$sampler"; sampler=""
ctl queue --all --format json > "$tmp/queue.json"
ctl shutdown >/dev/null 2>&1 || true
wait "${pids[0]}" 2>/dev/null || true

"$bin/calcmets" dump "$tmp/records" > "$tmp/records.jsonl"
python3 - "$tmp/queue.json" "$tmp/records.jsonl" "${#ids[@]}" "$tmp/sampler.log" <<'PY' || fail "see above"
import json, sys, collections
queue = json.load(open(sys.argv[1]))
recs = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
doubles = [l for l in open(sys.argv[4]) if l.startswith("DOUBLE")]
states = collections.Counter(j["state"] for j in queue)
per_job = collections.Counter(r["id"] for r in recs)
print(f"jobs: {dict(states)}; records: {len(recs)} for {len(per_job)} jobs; double runs seen: {len(doubles)}")
assert not doubles, doubles[:5]
assert states["completed"] == n, states
assert sorted(per_job) == sorted(j["id"] for j in queue), "a job has no record"
dupes = [j for j, c in per_job.items() if c != 1]
assert not dupes, f"jobs with more than one record: {dupes}"
PY
echo "partition: OK, no job ran twice at once, and every job completed with exactly one record"
