#!/usr/bin/env bash
# A real trace on a cluster the size of Fugaku: 1,000 jobs of RICC-2010-2
# (../shared/workloads) on configs/fugaku.toml (158,976 nodes of 48
# cores), each trace processor 931 cores, so that RICC's 8,192 processors
# fill the machine (a job of 4,096 processors takes 79,488 nodes), at
# 1,000x, emulated and in the twin. Prints the three metrics against the
# twin's, and the emulation's start latency (the pass that started a job to
# the start its record gives: 0 but for a launch longer than the job's
# whole run, since its run counts from the controller's start) by the
# job's size in nodes.
#
#   scripts/bench-fugaku-replay.sh [JOBS] [SPEEDUP] [SKIP]
#
# KEEP=1 keeps both runs' directories (their path is printed last), to
# look into a result that stands out.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000}
speedup=${2:-1000}
skip=${3:-0}
trace=../shared/workloads/RICC-2010-2.swf.gz
[ -f "$trace" ] || { echo "bench-fugaku-replay: $trace is missing" >&2; exit 2; }
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/runworkload" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t bench-fugaku-replay-XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then
  trap 'echo "bench-fugaku-replay: runs kept in $tmp" >&2' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi
W=(--config configs/fugaku.toml --workload "$trace" --skip "$skip" --jobs "$jobs"
   --cores-per-proc 931 --speedup "$speedup" -q)
"$bin/runworkload" "${W[@]}" --simulate --out "$tmp/twin" > /dev/null
"$bin/runworkload" "${W[@]}" --out "$tmp/emulated" > /dev/null
"$bin/calcmets" fidelity --format json "$tmp/emulated/shrink-100" "$tmp/twin/shrink-100" \
  > "$tmp/fidelity.json" || true
"$bin/calcmets" dump "$tmp/emulated/shrink-100/records" > "$tmp/records.jsonl"
python3 - "$tmp" "$jobs" "$speedup" <<'EOF'
import csv, json, sys
tmp, jobs, speedup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
f = json.load(open(f"{tmp}/fidelity.json"))
print(f"{jobs} jobs of RICC-2010-2 on configs/fugaku.toml at {speedup:,}x, against the twin\n")
print("| metric | emulated | twin | relative |")
print("|---|---:|---:|---:|")
for name, key in (("makespan (trace s)", "makespan"), ("utilization", "utilization"),
                  ("mean wait (trace s)", "wait_mean"),
                  ("mean bounded slowdown", "bounded_slowdown_mean")):
    m = f["metrics"][key]
    rel = "–" if m["rel"] is None else f"{m['rel'] * 100:+.2f} %"
    print(f"| {name} | {m['a']:.4g} | {m['b']:.4g} | {rel} |")
recs = {r["id"]: r for r in map(json.loads, open(f"{tmp}/records.jsonl"))}
by_size = {}
for row in csv.DictReader(open(f"{tmp}/emulated/shrink-100/jobs.csv")):
    r = recs.get(int(row["job_id"]))
    if not r or not row["start_ns"] or int(row["start_ns"]) == 0:
        continue
    nodes = -(-int(row["cores"]) // 48)
    lat = (r["start"] * 1e9 - int(row["start_ns"])) / 1e6
    cls = next(c for c in (1, 10, 100, 1000, 10000, 100000, 10**9) if nodes <= c)
    by_size.setdefault(cls, []).append(lat)
def q(v, p):
    v = sorted(v)
    return v[max(0, -(-int(p * 100) * len(v) // 100) - 1)]
print("\n| job size (nodes) | jobs | start p50 (ms) | start p99 (ms) |")
print("|---|---:|---:|---:|")
for c in sorted(by_size):
    v = by_size[c]
    print(f"| up to {c:,} | {len(v)} | {q(v, .5):.2f} | {q(v, .99):.2f} |")
EOF
