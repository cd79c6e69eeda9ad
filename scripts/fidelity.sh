#!/usr/bin/env bash
# How far the emulation is from its virtual-time twin, policy by policy:
# the same replay emulated REPLAYS times and run once by the twin (which is
# deterministic), each emulated run compared with `calcmets fidelity`.
#
#   scripts/fidelity.sh bundled [REPLAYS]   (default 2; about 3 minutes)
#   scripts/fidelity.sh window [REPLAYS]    (default 2; about 15 minutes)
#
# bundled: configs/workloads/kth-sp2-200.swf on configs/demo.toml (EASY) and
#   configs/suspend.toml (gang time-slicing), --cores-per-proc 2 --shrink 50
#   --speedup 10000: the table of docs/policies.md.
# window: 1,000 jobs of the KTH SP2 trace (../shared/workloads; jobs
#   10,001-11,000) on the demo cluster under fcfs, easy, sjf, preemption by
#   suspension (EASY, with jobs of at most 8 cores and an hour routed to its
#   high-priority partition `debug`: --route debug:cores<=8,walltime<=3600)
#   and gang time-slicing (configs/suspend.toml), at the same factor and
#   speed-up: the table of BENCHMARKS.md.
#
# Each cell is the range over the replays of |emulated - simulated| (per-job
# start time) or the relative difference of a run's metric.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-bundled}
replays=${2:-2}
cargo build --release -q -p runworkload -p calcmets -p controller -p sigsleep
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/runworkload" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t fidelity-XXXXXX)
# KEEP=1 keeps every run and report.
trap '[ -n "${KEEP:-}" ] && echo "fidelity: kept $tmp" >&2 || rm -rf "$tmp"' EXIT

common=(--cores-per-proc 2 --shrink 50 --speedup 10000 -q)
case $what in
bundled)
  workload=(--workload configs/workloads/kth-sp2-200.swf)
  cases="easy:configs/demo.toml gang:configs/suspend.toml"
  ;;
window)
  trace=../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz
  [ -f "$trace" ] || { echo "fidelity.sh: $trace is missing" >&2; exit 2; }
  workload=(--workload "$trace" --skip 10000 --jobs 1000)
  # The demo cluster under each policy; gang as configs/suspend.toml has it.
  for p in fcfs easy sjf; do
    sed "s/^policy = .*/policy = \"$p\"/" configs/demo.toml > "$tmp/$p.toml"
  done
  sed 's/^policy = .*/policy = "easy"\npreemption = "suspend"/' configs/demo.toml > "$tmp/preempt.toml"
  cases="fcfs:$tmp/fcfs.toml easy:$tmp/easy.toml sjf:$tmp/sjf.toml preempt:$tmp/preempt.toml gang:configs/suspend.toml"
  ;;
*)
  echo "usage: scripts/fidelity.sh bundled|window [REPLAYS]" >&2
  exit 2
  ;;
esac

for c in $cases; do
  name=${c%%:*}
  config=${c#*:}
  route=()
  [ "$name" != preempt ] || route=(--route 'debug:cores<=8,walltime<=3600')
  echo "fidelity: $name: the twin, then $replays emulated replays" >&2
  "$bin/runworkload" --config "$config" "${workload[@]}" "${common[@]}" "${route[@]}" \
    --simulate --out "$tmp/$name/simulated" > /dev/null
  for r in $(seq 1 "$replays"); do
    "$bin/runworkload" --config "$config" "${workload[@]}" "${common[@]}" "${route[@]}" \
      --out "$tmp/$name/emulated-$r" > /dev/null
    "$bin/calcmets" fidelity --format json "$tmp/$name/emulated-$r/shrink-050" \
      "$tmp/$name/simulated/shrink-050" > "$tmp/$name/fidelity-$r.json"
  done
done

for c in $cases; do
  name=${c%%:*}
  for d in "$tmp/$name"/*/shrink-050; do
    "$bin/calcmets" dump "$d/records" > "$d/records.jsonl"
  done
done

python3 - "$tmp" $cases <<'EOF'
import json, glob, sys

tmp, cases = sys.argv[1], [c.split(":")[0] for c in sys.argv[2:]]
reports = {c: [json.load(open(f)) for f in sorted(glob.glob(f"{tmp}/{c}/fidelity-*.json"))] for c in cases}

def span(values, fmt):
    lo, hi = min(values), max(values)
    a, b = fmt(lo), fmt(hi)
    return a if a == b else f"{a}–{b}"

def ms(v):
    if v < 0.01:
        return f"{v * 1e3:.2f} ms"
    return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"

def pct(v):
    return f"{abs(v) * 100:.2f} %"

rows = [
    ("per-job start, \\|d\\| p50", lambda f: f["per_job"]["start"]["p50"], ms),
    ("per-job start, \\|d\\| p99", lambda f: f["per_job"]["start"]["p99"], ms),
    ("makespan", lambda f: f["metrics"]["makespan"]["rel"], pct),
    ("utilization", lambda f: f["metrics"]["utilization"]["rel"], pct),
    ("mean wait", lambda f: f["metrics"]["wait_mean"]["rel"], pct),
    ("mean bounded slowdown", lambda f: f["metrics"]["bounded_slowdown_mean"]["rel"], pct),
    ("suspended time", lambda f: f["metrics"]["suspended_time"]["rel"], pct),
]
def records(path):
    return {r["id"]: r for r in map(json.loads, open(path))}

def quantile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")

# Two of the emulation's own costs, from its records against the twin's
# (job ids match: both runs submit the trace's jobs in the same order):
# how long after its submission a job starts that the twin starts at
# once (the decision, the hop to the agent, spawn and exec), and how far
# a job shorter than 2 ms overshoots its run time.
own = {}
for c in cases:
    twin = records(f"{tmp}/{c}/simulated/shrink-050/records.jsonl")
    start, over = [], []
    for path in sorted(glob.glob(f"{tmp}/{c}/emulated-*/shrink-050/records.jsonl")):
        for i, r in records(path).items():
            t = twin.get(i)
            if t is None or r["status"] != "completed":
                continue
            if t["start"] - t["submit"] < 1e-9 and not t["suspensions"]:
                start.append(r["start"] - r["submit"])
            if r["runtime"] < 0.002 and not r["suspensions"]:
                over.append(r["end"] - r["start"] - r["runtime"])
    own[c] = (start, over)

n = len(next(iter(reports.values())))
jobs = next(iter(reports.values()))[0]["jobs_compared"]
print(f"{jobs} jobs, {n} emulated replays per policy against the twin\n")
print("| | " + " | ".join(cases) + " |")
print("|---|" + "---:|" * len(cases))
for label, get, fmt in rows:
    cells = []
    for c in cases:
        vals = []
        for f in reports[c]:
            try:
                v = get(f)
            except (KeyError, TypeError):
                v = None
            if v is not None:
                vals.append(abs(v) if fmt is pct else v)
        # A metric both runs have at 0 (no suspension) has no ratio.
        cells.append(span(vals, fmt) if vals else "–")
    print(f"| {label} | " + " | ".join(cells) + " |")
for label, k in (("start, of jobs the twin starts at once: p50 / p90", 0),
                 ("run-time overshoot of jobs under 2 ms: p50 / p90", 1)):
    cells = [f"{ms(quantile(own[c][k], .5))} / {ms(quantile(own[c][k], .9))}" if own[c][k] else "–" for c in cases]
    print(f"| {label} | " + " | ".join(cells) + " |")
EOF
