#!/usr/bin/env bash
# Whether a job's start, and its end, cost the same whatever its number of
# nodes: on configs/fugaku.toml (158,976 nodes of 48 cores, eight local
# agents in the controller's process), jobs of 1, 10, 100, 1,000, 10,000
# and 80,000 nodes are started one at a time, sizes taking turns, ROUNDS
# times each (default 30), on two clusters one after the other:
#
# - `launch` ([agents] run_from = "launch"): a job's run counts from its
#   process's first instant, which is then what a launch costs;
# - `start` (the shipped setting): a job's run counts from its
#   controller's start, as a batch system accounts it, its launch within
#   it. What its record says is what every figure of a replay is made of.
#
# For each job:
#
# - start: from the pass that started it (its `start` in the controller's
#   view) to its record's start;
# - end: from its record's end (a sleep's deadline) to the controller
#   knowing it over (its `end`);
# - the pass that started it, whole (`controller stats`, last pass).
#
#   scripts/bench-wide-start.sh [ROUNDS] [MODES]   (MODES: "launch start")
#
# Prints one Markdown table per mode: p50, p99 and max of each by job
# size, and the p99's difference from the one-node job's.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-30}
modes=${2:-launch start}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/controller" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t bench-wide-XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# `launch`: a job's run counts from its process's first instant.
launch_config() {  # CONFIG OUT
  if grep -q '^\[agents\]' "$1"; then
    sed -e '/^run_from *=/d' -e 's/^\[agents\]$/[agents]\nrun_from = "launch"/' "$1" > "$2"
  else
    { cat "$1"; printf '\n[agents]\nrun_from = "launch"\n'; } > "$2"
  fi
}

bench() {  # MODE
  local config=$tmp/$1.toml
  case $1 in
  launch) launch_config configs/fugaku.toml "$config" ;;
  start) cp configs/fugaku.toml "$config" ;;
  *) echo "bench-wide-start: no mode $1 (launch or start)" >&2; exit 2 ;;
  esac
  local state=$tmp/state-$1
  "$bin/controller" --config "$config" serve --listen 127.0.0.1:0 --state-dir "$state" \
    > "$tmp/serve-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do [ -s "$state/address" ] && break; sleep 0.1; done
  local addr up
  addr=$(cat "$state/address")
  local C=("$bin/controller" --config "$config" --addr "$addr" --secret-file "$state/secret")
  for _ in $(seq 600); do
    up=$("${C[@]}" --format json stats 2>/dev/null \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"].get("idle", 0))' || echo 0)
    [ "$up" = 158976 ] && break
    sleep 0.2
  done
  [ "$up" = 158976 ] || { echo "bench-wide-start: only $up nodes came up" >&2; exit 1; }
  echo
  echo "run_from = \"$1\""
  echo
  ROUNDS=$rounds BIN=$bin python3 - "${C[@]}" <<'EOF'
import json, os, subprocess, sys
C = sys.argv[1:]
calcmets = os.path.join(os.environ["BIN"], "calcmets")
sizes = [1, 10, 100, 1000, 10000, 80000]

def run(*args, json_out=False):
    out = subprocess.run(C + list(args), capture_output=True, check=True)
    return json.loads(out.stdout) if json_out else out.stdout

samples = {n: {"start": [], "end": [], "pass": []} for n in sizes}
for r in range(int(os.environ["ROUNDS"])):
    for n in sizes:
        job = int(run("submit", "--cores", str(48 * n), "--runtime", "0.05").split()[0])
        run("wait", str(job))
        passed = run("--format", "json", "stats", json_out=True)["last_pass_seconds"]
        info = next(j for j in run("--format", "json", "queue", "--all", json_out=True)
                    if j["id"] == job)
        rec = json.loads(subprocess.run([calcmets, "dump", "-"], input=run("records", str(job)),
                                        capture_output=True, check=True).stdout.splitlines()[0])
        samples[n]["start"].append((rec["start"] - info["start"]) * 1e3)
        samples[n]["end"].append((info["end"] - rec["end"]) * 1e3)
        samples[n]["pass"].append(passed * 1e3)

def q(v, p):
    v = sorted(v)
    return v[max(0, -(-int(p * 100) * len(v) // 100) - 1)]

print("| nodes | start p50 / p99 / max (ms) | p99 − 1 node's | end p50 / p99 / max (ms) | p99 − 1 node's | its pass p50 / p99 (ms) |")
print("|---:|---:|---:|---:|---:|---:|")
base = {k: q(samples[1][k], 0.99) for k in ("start", "end")}
for n in sizes:
    s = samples[n]
    cell = lambda k: " / ".join(f"{q(s[k], p):.2f}" for p in (0.5, 0.99, 1.0))
    print(f"| {n:,} | {cell('start')} | {q(s['start'], .99) - base['start']:+.2f} | {cell('end')} "
          f"| {q(s['end'], .99) - base['end']:+.2f} | {q(s['pass'], .5):.2f} / {q(s['pass'], .99):.2f} |")
EOF
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

for mode in $modes; do bench "$mode"; done
