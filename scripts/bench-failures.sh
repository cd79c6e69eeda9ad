#!/usr/bin/env bash
# What node failures cost: the originating study's cluster
# (configs/raijin-3600.toml, 3,600 nodes, 57,600 cores, 10 agents hosted by
# the controller) replays a real trace at several shrinking factors,
# without failures and with generated ones at two mean times between
# failures per node, every job a real sigsleep; each run beside its
# virtual-time twin under the same failures.
#
#   scripts/bench-failures.sh [JOBS] [SPEEDUP] [FACTORS]
#        (default 1000 jobs of RICC-2010-2, speedup 4000, factors "100 50 25")
#
# Failures: each node fails after an exponential time of mean MTBF trace
# seconds and is repaired after one of mean 4 hours (MTTR), from one seed,
# so every run of a setting sees the same failures at the same trace
# instants. A failed node's jobs are killed and requeued (the default), and
# run again from the start. The cost is the mean bounded slowdown (tau 10 s
# of the trace) with failures over the one without, at the same factor.
# Writes docs/figures/bench-failures.svg: mean bounded slowdown by factor,
# one line per setting (calcmets plot).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000}
speedup=${2:-4000}
factors=${3:-"100 50 25"}
trace=../shared/workloads/RICC-2010-2.swf.gz
[ -r "$trace" ] || { echo "bench-failures: cannot read $trace" >&2; exit 2; }
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/runworkload" ] || bin=target/release
tmp=$(mktemp -d -t bench-failures-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sed 's/^listen = .*/listen = "127.0.0.1:0"/' configs/raijin-3600.toml > "$tmp/raijin.toml"
common=(--config "$tmp/raijin.toml" --workload "$trace" --jobs "$jobs" --cores-per-proc 7
  --speedup "$speedup" -q)
# name, --failures (none: no failures); MTTR 4 h; a year and 30 days.
settings=("none:" "mtbf-1y:mtbf=31536000,mttr=14400,seed=1" "mtbf-30d:mtbf=2592000,mttr=14400,seed=1")
for s in "${settings[@]}"; do
  name=${s%%:*}
  spec=${s#*:}
  extra=()
  [ -n "$spec" ] && extra=(--failures "$spec")
  for f in $factors; do
    "$bin/runworkload" "${common[@]}" "${extra[@]}" --shrink "$f" --out "$tmp/$name" \
      > /dev/null 2>"$tmp/$name.log" || { cat "$tmp/$name.log" >&2; exit 1; }
    "$bin/runworkload" "${common[@]}" "${extra[@]}" --shrink "$f" --simulate \
      --out "$tmp/twin-$name" > /dev/null 2>&1
  done
done

echo "| factor | failures (per node) | events applied | jobs hit | mean bounded slowdown | twin's | cost | twin's cost |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for f in $factors; do
  d=$(printf 'shrink-%03d' "$f")
  for s in "${settings[@]}"; do
    name=${s%%:*}
    python3 - "$tmp" "$name" "$d" "$f" <<'EOF'
import json, os, sys
tmp, name, d, f = sys.argv[1:5]
def load(kind, n):
    run = os.path.join(tmp, kind + n, d)
    return (json.load(open(os.path.join(run, "metrics.json"))),
            json.load(open(os.path.join(run, "manifest.json"))))
emu, man = load("", name)
twin, _ = load("twin-", name)
base, _ = load("", "none")
twin_base, _ = load("twin-", "none")
b = emu["bounded_slowdown"]["mean"]
t = twin["bounded_slowdown"]["mean"]
ev = man.get("events") or {}
label = {"none": "none", "mtbf-1y": "MTBF 1 year, MTTR 4 h",
         "mtbf-30d": "MTBF 30 days, MTTR 4 h"}[name]
cost = "-" if name == "none" else f"{b / base['bounded_slowdown']['mean']:.2f}x"
tcost = "-" if name == "none" else f"{t / twin_base['bounded_slowdown']['mean']:.2f}x"
# Every job over, none lost to a failure (they are requeued).
counts = man["counts"]
assert sum(counts.values()) == man["slice"]["replayed"] and "node_fail" not in counts, counts
print(f"| {f} | {label} | {ev.get('applied', 0)} | {ev.get('jobs_hit', 0)} | {b:.3f} | {t:.3f} | {cost} | {tcost} |")
EOF
  done
done
mkdir -p docs/figures
"$bin/calcmets" plot --out "$tmp/plots" "$tmp/none" "$tmp/mtbf-1y" "$tmp/mtbf-30d" > /dev/null
cp "$tmp/plots/bsld-by-factor.svg" docs/figures/bench-failures.svg
echo
echo "chart: docs/figures/bench-failures.svg"
