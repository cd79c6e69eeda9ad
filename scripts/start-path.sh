#!/usr/bin/env bash
# Where a job's start goes, stage by stage, in an emulated replay: the
# controller's pass, its journal write, the hand-off to the agent up to
# the held process's SIGCONT, and that process's wake-up to its first
# instant. Traced with perf (uprobes on the controller's pass and journal
# write, the signal tracepoint), matched job by job to the run's jobs.csv
# (the pass's instant) and records (the process's first instant). Needs
# perf and root; not part of CI.
#
#   scripts/start-path.sh [TRACE SKIP JOBS]   (default: NASA's jobs 10,001-11,000)
#
# SPEEDUP (default 10000), CONFIG (default configs/demo.toml, whose
# policy is EASY); the release build is used, or BIN's
# (a directory with runworkload, calcmets, sigsleep and
# examples/host_wakeup). TASKS=1 also probes each poll of the tasks the
# order passes through on its way to the agent (the controller's link,
# the agent's uplink, the node's task): slower, so apart. KEEP=1 keeps the
# run and the trace.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-../shared/workloads/NASA-iPSC-1993-3.1-cln.swf.gz}
skip=${2:-10000}
jobs=${3:-1000}
command -v perf >/dev/null || { echo "start-path.sh: needs perf" >&2; exit 2; }
[ -r "$trace" ] || { echo "start-path.sh: cannot read $trace" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build --release -q
  cargo build --release -q -p sigsleep --example host_wakeup
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin=$PWD/target/$host/release
  [ -x "$bin/runworkload" ] || bin=$PWD/target/release
else
  bin=$BIN  # another build's binaries, to take turns with this one
fi
exe=$bin/runworkload
tmp=$(mktemp -d -t start-path-XXXXXX)
group=clemu_start_path
cleanup() {
  perf probe -q -d "$group:*" 2>/dev/null || true
  [ -n "${KEEP:-}" ] && echo "start-path: kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

# uprobes take a file offset: the symbol's address less its segment's
# (address - offset).
# The executable segment (one, in what the linker makes of runworkload).
segment=$(readelf -lW "$exe" | awk '$1 == "LOAD" && / R E / { print $2, $3 }') || true
[ "$(printf '%s\n' "$segment" | grep -c .)" = 1 ] \
  || { echo "start-path.sh: $exe has not one executable segment: $segment" >&2; exit 1; }
read -r seg_off seg_addr <<< "$segment"
shift_of_text=$((seg_addr - seg_off))
symbols=$(nm -C "$exe") || { echo "start-path.sh: nm cannot read $exe (stripped?)" >&2; exit 1; }
probe() {  # NAME SYMBOL
  local addr
  addr=$(awk -v s="$2" '($2 == "t" || $2 == "T") && substr($0, index($0, $3)) == s && !n++ { print $1 }' <<< "$symbols")
  [ -n "$addr" ] || { echo "start-path.sh: no symbol $2 in $exe (inlined?)" >&2; exit 1; }
  local off
  off=$(printf '0x%x' $((0x$addr - shift_of_text)))
  perf probe -q -x "$exe" -a "$group:$1=$off" >/dev/null
  perf probe -q -x "$exe" -a "$group:$1_done=$off%return" >/dev/null
}
# Every poll of a task (its async function's body; one per instance of a
# generic one): TASK1, TASK2, ...
polls() {  # NAME SYMBOL
  local i=0 addr
  for addr in $(awk -v s="$2" '($2 == "t" || $2 == "T") && substr($0, index($0, $3)) == s { print $1 }' <<< "$symbols"); do
    i=$((i + 1))
    perf probe -q -x "$exe" -a "$group:$1$i=$(printf '0x%x' $((0x$addr - shift_of_text)))" >/dev/null
  done
  [ "$i" -gt 0 ] || { echo "start-path.sh: no symbol $2 in $exe" >&2; exit 1; }
}
# What is measured is the process's first instant: its run counts from
# there ([agents] run_from = "launch"), not from the controller's start,
# which a job's record gives otherwise.
launch_config() {  # CONFIG OUT
  if grep -q '^\[agents\]' "$1"; then
    sed -e '/^run_from *=/d' -e 's/^\[agents\]$/[agents]\nrun_from = "launch"/' "$1" > "$2"
  else
    { cat "$1"; printf '\n[agents]\nrun_from = "launch"\n'; } > "$2"
  fi
}
launch_config "${CONFIG:-configs/demo.toml}" "$tmp/config.toml"
perf probe -q -d "$group:*" 2>/dev/null || true
probe pass 'controller::server::Server::pass'
probe journal 'controller::server::Server::write_journal'
if [ -n "${TASKS:-}" ]; then
  polls link 'controller::connection::serve::{{closure}}'
  polls uplink 'agent::uplink::Agent::session::{{closure}}'
  polls node 'agent::node::run::{{closure}}'
fi

# The host's own floor, for the figures below: it moves hour to hour.
"$bin/examples/host_wakeup"
perf record -q -k CLOCK_MONOTONIC -a -o "$tmp/perf.data" \
  -e "$group:*" -e signal:signal_generate --filter 'sig == 18' -- \
  "$exe" --config "$tmp/config.toml" --workload "$trace" --skip "$skip" --jobs "$jobs" \
  --cores-per-proc 2 --speedup "${SPEEDUP:-10000}" -q --out "$tmp/run" >/dev/null
# perf stamps on the monotonic clock; jobs.csv and the records on the
# real-time one.
offset=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC))')
perf script -i "$tmp/perf.data" --ns -F comm,tid,time,event,trace 2>/dev/null > "$tmp/events.txt"
"$bin/calcmets" dump "$tmp/run/shrink-100/records" > "$tmp/records.jsonl"
python3 - "$tmp" "$offset" "$group" <<'EOF'
import bisect, csv, json, re, sys
tmp, offset, group = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kinds = {f"{group}:pass": "pass", f"{group}:pass_done__return": "pass_done",
         f"{group}:journal": "journal", f"{group}:journal_done__return": "journal_done",
         "signal:signal_generate": "cont"}
tasks = ("link", "uplink", "node")
events = {k: [] for k in list(kinds.values()) + list(tasks)}
for line in open(f"{tmp}/events.txt"):
    m = re.search(r"\s(\d+)\.(\d{9}):\s+(\S+):", line)
    if not m:
        continue
    t = int(m.group(1)) * 10**9 + int(m.group(2)) + offset
    if m.group(3) in kinds:
        events[kinds[m.group(3)]].append(t)
    else:
        task = re.sub(r"\d+$", "", m.group(3).split(":")[-1])
        if task in tasks:
            events[task].append(t)
for v in events.values():
    v.sort()
first = {json.loads(l)["id"]: round(json.loads(l)["start"] * 1e9) for l in open(f"{tmp}/records.jsonl")}

def after(kind, t):
    v = events[kind]
    i = bisect.bisect_left(v, t)
    return v[i] if i < len(v) else None

stages = {"rest of the pass": [], "journal write": [], "to the agent's SIGCONT": [],
          "SIGCONT to the process's first instant": [], "whole, held": [], "whole, cold": []}
claimed = set()
# Latest first: each takes the last signal before it that a later one
# has not taken.
rows = sorted(csv.DictReader(open(f"{tmp}/run/shrink-100/jobs.csv")),
              key=lambda r: first.get(int(r["job_id"]), 0), reverse=True)
for row in rows:
    job, decided = int(row["job_id"]), int(row["start_ns"] or 0)
    if not decided or job not in first:
        continue
    began = first[job]
    # The last SIGCONT between the pass and the process's first instant,
    # each claimed once. The records do not name their process, so of two
    # jobs one pass started, each may take the other's: the split between
    # the last two stages is then off by the gap between the two signals.
    v = events["cont"]
    i = bisect.bisect_right(v, began) - 1
    while i >= 0 and v[i] in claimed:
        i -= 1
    cont = v[i] if i >= 0 and decided <= v[i] <= began else None
    if cont is not None:
        claimed.add(cont)
    if cont is None:
        stages["whole, cold"].append(began - decided)
        continue
    stages["whole, held"].append(began - decided)
    passed = after("pass_done", decided)
    written = after("journal_done", passed) if passed else None
    if passed and written and written <= cont:
        stages["rest of the pass"].append(passed - decided)
        stages["journal write"].append(written - passed)
        stages["to the agent's SIGCONT"].append(cont - written)
        # With TASKS: when each task of the hand-off is first polled after
        # the write (any node's task: the first that runs).
        for task in tasks:
            polled = after(task, written)
            if events[task] and polled and polled <= cont:
                stages.setdefault(f"  its {task} task polled, after the write", []).append(polled - written)
    stages["SIGCONT to the process's first instant"].append(began - cont)

print("stage (µs)                                    jobs      p50     mean      p90")
for name, v in stages.items():
    if not v:
        continue
    v.sort()
    n = len(v)
    print(f"{name:<42} {n:>7} {v[n // 2] / 1e3:>8.1f} {sum(v) / n / 1e3:>8.1f} {v[n * 9 // 10] / 1e3:>8.1f}")
m = json.load(open(f"{tmp}/run/shrink-100/manifest.json"))["latency"]
print("manifest's latency, p50 (µs):",
      ", ".join(f"{k} {d['p50_ms'] * 1e3:.0f}" for k, d in m.items() if d))
EOF
