#!/usr/bin/env bash
# Where the slow gang turns go: scripts/bench-gang-turn.sh run under the
# kernel's scheduler trace, and each turn sample over 1 ms set against what
# else held a core at that moment.
#
#   scripts/bench-gang-turn-noise.sh [CORES] [SLICE_MS] [RUNTIME_S]
#                                    (default 8 50 4; needs perf, and root)
#
# Prints, for every sample (a job seen stopped or running after its
# decision) over 1 ms: whether it is a process start (the first turn), or
# whether a task that is not clemu's (not the controller, its runtime's
# threads, or a sigsleep) ran for more than 0.5 ms at once on a core during
# it, and which. Then the host's own floor for process starts: eight
# sigsleeps spawned back to back by a bare posix_spawn loop, outside clemu.
# The trace costs some of what it measures: the samples are slower than
# without it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "bench-gang-turn-noise: needs perf (linux-perf)" >&2; exit 2; }
[ -d /sys/kernel/tracing/events/sched ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
[ -d /sys/kernel/tracing/events/sched ] || { echo "bench-gang-turn-noise: no scheduler tracepoints (mount tracefs, as root)" >&2; exit 2; }
cores=${1:-8}
slice_ms=${2:-50}
runtime=${3:-4}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/sigsleep" ] || bin=target/release
out=$(mktemp -d -t bench-gang-turn-noise-XXXXXX)
kept=
cleanup() {
  if [ -n "${KEEP:-}" ]; then echo "bench-gang-turn-noise: kept $out ${kept:-}" >&2; else rm -rf "$out" ${kept:+"$kept"}; fi
}
trap cleanup EXIT

# perf's clock is CLOCK_MONOTONIC, the instants of the run CLOCK_REALTIME.
offset=$(python3 -c 'import time; print(time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_MONOTONIC))')
KEEP=1 perf sched record -q -k CLOCK_MONOTONIC -a -o "$out/perf.data" -- \
  scripts/bench-gang-turn.sh "$cores" "$slice_ms" "$runtime" > "$out/bench.txt" 2> "$out/bench.err" || {
  cat "$out/bench.err" >&2
  exit 1
}
kept=$(sed -n 's/^bench-gang-turn: kept //p' "$out/bench.err")
[ -d "$kept" ] || { cat "$out/bench.err" >&2; exit 1; }
grep -E '^\| (decision|of which|whole)' "$out/bench.txt"
echo
perf sched timehist -i "$out/perf.data" 2> /dev/null > "$out/timehist.txt"

python3 - "$kept" "$offset" "$out/timehist.txt" <<'EOF'
import json, re, sys
from collections import Counter
kept, offset, timehist = sys.argv[1], float(sys.argv[2]), sys.argv[3]
ctl = {j["id"]: j for j in json.load(open(f"{kept}/queue.json"))}
recs = {r["id"]: r for r in (json.loads(l) for l in open(f"{kept}/records.jsonl"))}
# (decision, seen, what), on perf's clock; turns only, as
# bench-gang-turn.sh counts them (a decision that stops some job and lets
# another run), and jobs whose record and controller agree.
samples = []
for i, j in ctl.items():
    r = recs[i]
    if len(j["suspensions"]) != len(r["suspensions"]):
        continue
    for (cs, cr), (rs, rr) in zip(j["suspensions"], r["suspensions"]):
        samples.append((cs, rs, "stop"))
        if cr:
            samples.append((cr, rr, "resume"))
    samples.append((j["start"], r["start"], "start"))
stops = {d for d, _, what in samples if what == "stop"}
turns = stops & {d for d, _, what in samples if what != "stop"}
samples = [(d - offset, s - offset, w) for d, s, w in samples if d in turns]
# timehist lines: time [cpu] task wait sch-delay run (ms).
line = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.+?)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s*$")
ours = re.compile(r"^(controller|tokio-r|clemu-|sigsleep|<idle>)")
foreign = []  # (from, to, cpu, task) of runs over 0.5 ms
for l in open(timehist):
    m = line.match(l)
    if not m:
        continue
    end, cpu, task, run = float(m[1]), int(m[2]), m[3], float(m[6]) / 1e3
    if run > 0.0005 and not ours.match(task):
        foreign.append((end - run, end, cpu, re.sub(r"\[\d+(/\d+)?\]$", "", task)))
slow = [s for s in samples if s[1] - s[0] > 0.001]
starts = [s for s in slow if s[2] == "start"]
rest = [s for s in slow if s[2] != "start"]
by = Counter()
unexplained = 0
for d, seen, _ in rest:
    hit = {t for a, b, _, t in foreign if a < seen and b > d}
    if hit:
        by.update(hit)
    else:
        unexplained += 1
print(f"| gang-turn samples over 1 ms, of {len(samples)} | n |")
print("|---|---:|")
print(f"| process starts (the first turn: eight processes to spawn) | {len(starts)} |")
for t, n in by.most_common():
    print(f"| stops or resumes while `{t}` held a core for over 0.5 ms | {n} |")
print(f"| stops or resumes with no other task over 0.5 ms on a core (the turn's own wake-ups) | {unexplained} |")
first, last = min(s[0] for s in samples), max(s[1] for s in samples)
during = [f for f in foreign if f[0] < last and f[1] > first]
runs = Counter(t for _, _, _, t in during)
print()
print(f"While the turns ran ({last - first:.1f} s), tasks not clemu's that held a core for over 0.5 ms at once:")
for t, n in runs.most_common(6):
    ms = sorted(1e3 * (b - a) for a, b, _, u in during if u == t)
    print(f"- `{t}`: {n} times, {sum(ms):.1f} ms in all, longest {ms[-1]:.2f} ms")
EOF

echo
python3 - "$PWD/$bin/sigsleep" "$out" <<'EOF'
import os, sys, time
sigsleep, out = sys.argv[1], sys.argv[2]
argv = [sigsleep, "--runtime", "0.2", "--id", "1", "--log", f"{out}/spawn.rec"]
totals = []
for _ in range(5):
    t = time.perf_counter()
    pids = [os.posix_spawn(sigsleep, argv, os.environ) for _ in range(8)]
    totals.append(1e3 * (time.perf_counter() - t))
    for p in pids:
        os.waitpid(p, 0)
print("eight sigsleeps started back to back by posix_spawn, outside clemu, ms:",
      " ".join(f"{t:.2f}" for t in totals))
EOF
