#!/usr/bin/env bash
# Every benchmark, one after the other, then one table: each goal, what was
# measured and whether it is met. Each benchmark's own table (with its
# baseline side by side) is kept in the output directory.
#
#   scripts/bench.sh [OUTDIR]       (default results/bench-DATE; about 26 minutes)
#
# Needs root for scripts/bench-signals.sh's pid_max on small machines, GNU
# time, python3, and ../shared/workloads (RICC-2010-2) for the trace-based
# benchmarks. What each figure means: BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

run() { # name command...
  local name=$1
  shift
  echo "== $name: $*" >&2
  "$@" | tee "$out/$name.md" >&2
}

run agent scripts/bench-agent.sh 20
run throughput scripts/bench-throughput.sh 5000 5
run signals scripts/bench-signals.sh 20000 10000 1000 10
# Goal 4 as stated: 10,000 jobs suspended, 1,000 operations a second on the
# others (a thousand more), without goal 3's 20,000 live processes.
run signals-10k scripts/bench-signals.sh 11000 10000 1000 10
run gang-turn scripts/bench-gang-turn.sh 8 50 4
run pass cargo bench -q -p controller --bench pass
run fugaku scripts/bench-fugaku.sh
run raijin scripts/bench-raijin.sh
run calcmets scripts/bench-calcmets.sh 5000000
run replay scripts/bench-replay.sh 1000 10
run submit scripts/bench-submit.sh 1000000
run twin scripts/bench-sim.sh
run sigsleep python3 scripts/bench-sigsleep.py --runs 1000 --copies 20

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import sys

out = sys.argv[1]

def rows(name):
    """The rows of every Markdown table in a benchmark's output, as cells."""
    found = []
    for line in open(f"{out}/{name}.md"):
        line = line.strip()
        if line.startswith("|") and not set(line) <= set("|-: "):
            found.append([c.strip().strip("*") for c in line.strip("|").split("|")])
    return found

def row(name, first):
    return next(r for r in rows(name) if r[0].startswith(first))

def num(s):
    return float(s.split()[0].replace(",", "").rstrip("x%"))

table = []
def goal(what, target, measured, met=None):
    table.append((what, target, measured, "-" if met is None else "yes" if met else "**no**"))

r = row("agent", "100000")
goal("RSS per idle virtual node, 100,000 nodes in one agent", "<= 2048 bytes", f"{r[2]} bytes", num(r[2]) <= 2048)
goal("agent idle CPU at 100,000 nodes", "< 2 % of a core", f"{r[3]} %", num(r[3]) < 2)
r = row("throughput", "median")
goal("end-to-end zero-length jobs, clemu / raw spawn+reap", ">= 0.80", r[-1], num(r[-1]) >= 0.8)
r = row("signals", "private memory")
total, per = r[1].replace("(", "").replace(")", "").split()
goal("20,000 live sigsleeps: private memory", "(measured)", f"{total} MiB, {per} KiB per job")
for label in ("suspend all", "resume all"):
    r = row("signals", label)
    goal(f"20,000 sigsleeps: {label}", "(measured)", f"{r[1]} ms")
for run_name, alive in (("signals-10k", "11,000"), ("signals", "20,000")):
    for label in ("paced suspensions", "paced resumptions"):
        r = row(run_name, label)
        p99 = num(r[1].split("/")[1])
        goal(f"{label}, p99, 1,000 ops/s, 10,000 suspended, {alive} alive", "<= 5 ms", f"{p99} ms", p99 <= 5)
    r = row(run_name, "accounting error")
    p99 = num(r[1].split("/")[1])
    goal(f"sigsleep accounting error p99, 10,000 suspended, {alive} alive", "<= 1 ms", f"{p99} ms", p99 <= 1)
for label in ("decision to old job stopped", "decision to new job running"):
    r = row("gang-turn", label)
    p99 = num(r[1].split("/")[1])
    goal(f"gang turn, 8 cores, 50 ms slices: {label}, p99", "< 1 ms", f"{p99} ms", p99 < 1)
for r in rows("pass")[1:]:
    lim = 10 if num(r[1]) < 50000 else 100
    goal(f"EASY pass on 57,600 cores, {r[0]}, {r[1]} queued (p50)", f"<= {lim} ms", r[4], num(r[4]) <= lim)
ok = [r for r in rows("raijin")[1:] if r[-1] == "yes"]
best = min(ok, key=lambda r: num(r[0])) if ok else None
goal("raijin-3600 on this host: most compressed factor that keeps up", "lateness p99 <= 10 ms, twin within 2 %",
     f"factor {best[0]} ({best[1]}), RSS {best[8]} MiB + {best[7]} sigsleeps" if best else "none", best is not None)
r = max(rows("calcmets")[1:], key=lambda r: num(r[0]) if r[0][0].isdigit() else 0)
goal("calcmets on job records", ">= 10 M records/s", f"{num(r[2]) / 1e6:.1f} M/s", num(r[2]) >= 1e7)
r = row("calcmets", "as shipped")
goal("calcmets --swf against Python (RICC, gzip)", ">= 50x", r[3], num(r[3]) >= 50)
r = row("calcmets", "decompressed first")
goal("calcmets --swf against Python (RICC, plain text)", ">= 50x", r[3], num(r[3]) >= 50)
r = rows("replay")[1]
goal("replay lateness p99 at 1,000 submissions/s", "<= 2 ms", f"{r[4]} ms", num(r[4]) <= 2)
r = row("submit", "10000")
goal("controller: submissions in batches of 10,000", ">= 50,000 jobs/s", f"{r[2]} jobs/s", num(r[2]) >= 50000)
goal("controller: memory per queued job, 1,000,000 queued", "< 1024 bytes", f"{r[7]} bytes", num(r[7]) < 1024)
for r in rows("sigsleep")[1:]:
    goal(f"sigsleep / coreutils sleep: {r[0]}", "<= 1.0", r[3], num(r[3]) <= 1.0)
r = row("fugaku", "configs/fugaku.toml")
goal("configs/fugaku.toml (158,976 nodes): controller RSS per idle node", "<= 2048 bytes", r[3], num(r[3]) <= 2048)
for r in (r for r in rows("fugaku") if r[0] in ("mixed", "fragmented")):
    goal(f"EASY pass on fugaku (7,630,848 cores), {r[0]}, {r[1]} queued (p50)", "< 50 ms", r[4], num(r[4]) < 50)
for r in rows("twin")[1:]:
    goal(f"virtual-time twin, 100,000 jobs, {r[0]}", "< 5 s", f"{r[2]} s", num(r[2]) < 5)

print("| goal | target | measured | met |")
print("|---|---|---|---|")
for g in table:
    print("| " + " | ".join(g) + " |")
EOF
