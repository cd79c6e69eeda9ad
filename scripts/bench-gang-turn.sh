#!/usr/bin/env bash
# What one turn of gang time-slicing costs: from the controller's decision
# to the old job stopped, and to the new job running.
#
#   scripts/bench-gang-turn.sh [CORES] [SLICE_MS] [RUNTIME_S]
#                              (default 8 50 4)
#
# A controller hosts one node of CORES cores in a partition that
# time-slices two jobs per core (oversubscribe = 2, time_slice_s =
# SLICE_MS), and runs 2 x CORES one-core sigsleeps of RUNTIME_S at once:
# every SLICE_MS, each core changes hands. A turn's decision instant is the
# controller's own (from `queue --format json`: it suspends the old job and
# resumes or starts the new one in the same pass, at the same instant); the
# old job stopped and the new one running are sigsleep's own instants, on
# SIGTSTP and SIGCONT or at its start (from its record, `calcmets dump`).
# Both are CLOCK_REALTIME on one host. KEEP=1 keeps the run's directory
# (config, serve.log, queue.json, records.jsonl).
#
# With TRACE=1 the controller logs when it sent each pass's orders and the
# agent when it sent each signal (CLEMU_LOG at debug for both), and the
# table splits the turn: decision to orders sent (the controller), orders
# sent to signal sent (the hop to the agent), signal sent to seen (the
# kernel and sigsleep). The logging costs some of what it measures; a
# CLEMU_LOG of your own replaces what TRACE=1 logs.
#
# PRESTART=false turns off `[controller] prestart` (the processes of the
# jobs a turn will start are then spawned at the turn, not ahead of it),
# for a side-by-side baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
cores=${1:-8}
slice_ms=${2:-50}
runtime=${3:-4}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
tmp=$(mktemp -d -t bench-gang-turn-XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "bench-gang-turn: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

jobs=$((2 * cores))
cat > "$tmp/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$tmp/state"
time_slice_s = $(awk -v m="$slice_ms" 'BEGIN { print m / 1000 }')
prestart = ${PRESTART:-true}

[agents]
local = true
sigsleep = "$PWD/$bin/sigsleep"
# A started job's record begins at its process's first instant, which is
# what a turn's start is measured to, not at the controller's start.
run_from = "launch"

[[nodes]]
names = "vn1"
cpus = $cores
memory = "64G"

[[partitions]]
name = "gang"
nodes = "ALL"
oversubscribe = 2
EOF
ctl=("$bin/controller" --config "$tmp/cluster.toml")
[ -z "${TRACE:-}" ] || export CLEMU_LOG=${CLEMU_LOG:-info,controller::server=debug,agent::node=debug}
"$bin/controller" --config "$tmp/cluster.toml" serve > "$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/state/address" ] && break; sleep 0.1; done
stat() { "${ctl[@]}" stats --format json | awk -F'[:,]' -v k="\"$1\"" '$1 ~ k { gsub(/ /, "", $2); print $2 }'; }

"${ctl[@]}" submit --cores 1 --runtime "$runtime" --count "$jobs" > /dev/null
# Jobs time-share, so they take twice their run time, and some more. The
# first wait is quiet: a client every 100 ms would be a process to start
# and a connection to serve on a busy host, in the middle of the turns.
sleep $((2 * runtime))
for _ in $(seq $((runtime * 40 + 200))); do
  [ "$(stat ended)" -ge "$jobs" ] && break
  sleep 0.1
done
"${ctl[@]}" queue --all --format json > "$tmp/queue.json"
"${ctl[@]}" shutdown > /dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=
"$bin/calcmets" dump "$tmp/state/records" > "$tmp/records.jsonl"

python3 - "$tmp" "$jobs" "$cores" "$slice_ms" <<'EOF'
import json, math, sys
from collections import defaultdict
tmp, jobs, cores, slice_ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctl = {j["id"]: j for j in json.load(open(f"{tmp}/queue.json"))}
recs = {r["id"]: r for r in (json.loads(l) for l in open(f"{tmp}/records.jsonl"))}
assert len(recs) == jobs, f"{len(recs)} records for {jobs} jobs"
incomplete = [i for i, r in recs.items() if r["status"] != "completed"]
assert not incomplete, f"jobs that did not complete: {incomplete}"

# Each decision instant of the controller: the jobs it stopped, and the
# ones it let run (resumed, or started while others stopped).
stopped = defaultdict(list)   # decision ns -> sigsleep's stop instants
running = defaultdict(list)   # decision ns -> sigsleep's run instants
resumed = defaultdict(list)   # the same, resumes only
started = defaultdict(list)   # the same, starts only (a process to spawn)
mismatched = 0
ns = lambda t: round(t * 1e9)  # both give instants in seconds
for i, j in ctl.items():
    r = recs[i]
    if len(j["suspensions"]) != len(r["suspensions"]):
        mismatched += 1
        continue
    for (cs, cr), (rs, rr) in zip(j["suspensions"], r["suspensions"]):
        stopped[ns(cs)].append(ns(rs))
        if cr:
            running[ns(cr)].append(ns(rr))
            resumed[ns(cr)].append(ns(rr))
    running[ns(j["start"])].append(ns(r["start"]))
    started[ns(j["start"])].append(ns(r["start"]))
turns = sorted(set(stopped) & set(running))
to_stop = [s - d for d in turns for s in stopped[d]]
to_run = [s - d for d in turns for s in running[d]]
to_resume = [s - d for d in turns for s in resumed[d]]
to_start = [s - d for d in turns for s in started[d]]
whole = [max(stopped[d] + running[d]) - d for d in turns]

def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, math.ceil(len(xs) * p) - 1)]

ms = lambda x: f"{x / 1e6:.3f}"
row = lambda xs: f"{ms(pct(xs, .5))} / {ms(pct(xs, .99))} / {ms(max(xs))} ({len(xs)})"
print(f"| gang turn ({cores} cores, 2 jobs per core, {slice_ms} ms slices) | p50 / p99 / max, ms (n) |")
print("|---|---:|")
print(f"| decision to old job stopped (SIGTSTP seen) | {row(to_stop)} |")
print(f"| decision to new job running (SIGCONT seen, or started) | {row(to_run)} |")
print(f"| of which resumed (SIGCONT seen) | {row(to_resume)} |")
print(f"| of which started (the first turn: a process to spawn) | {row(to_start)} |")
print(f"| whole turn: decision to the last job of it stopped or running | {row(whole)} |")
print(f"| jobs whose record and controller disagree on suspensions | {mismatched} |")

# The split, from the log's microsecond timestamps (TRACE=1).
import bisect, calendar, re, time
def stamp(line):
    d, frac = line.split("Z")[0].split(".")
    return calendar.timegm(time.strptime(d, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0"))
sent_orders, signalled = [], defaultdict(list)
pat = re.compile(r"agent::node: (suspended|resumed) job=(\d+)")
for line in open(f"{tmp}/serve.log"):
    if "orders sent" in line:
        sent_orders.append(stamp(line))
    elif m := pat.search(line):
        signalled[(int(m.group(2)), m.group(1))].append(stamp(line))
if sent_orders and signalled:
    controller, hop, kernel = [], [], []
    for i, j in ctl.items():
        r = recs[i]
        for kind, pairs in (("suspended", [(c[0], s[0]) for c, s in zip(j["suspensions"], r["suspensions"])]),
                            ("resumed", [(c[1], s[1]) for c, s in zip(j["suspensions"], r["suspensions"]) if c[1]])):
            for (d, seen), sig in zip(pairs, signalled[(i, kind)]):
                k = bisect.bisect_left(sent_orders, ns(d))
                if k < len(sent_orders) and sent_orders[k] <= sig:
                    controller.append(sent_orders[k] - ns(d))
                    hop.append(sig - sent_orders[k])
                kernel.append(ns(seen) - sig)
    print(f"| decision to orders sent (controller) | {row(controller)} |")
    print(f"| orders sent to signal sent (to the agent) | {row(hop)} |")
    print(f"| signal sent to seen by sigsleep (kernel) | {row(kernel)} |")
EOF
