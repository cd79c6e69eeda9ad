#!/usr/bin/env bash
# Replay submission lateness at a steady rate.
#
#   scripts/bench-replay.sh [RATE] [SECONDS]     (default 1000 jobs/s for 10 s)
#
# A synthetic SWF trace submits one one-processor job every trace second,
# each running one second; `runworkload --speedup RATE` replays it on an
# embedded 4-node, 64-core cluster, so RATE jobs a second are submitted
# (each acknowledged only once journaled and synced) and run as real
# sigsleeps of 1/RATE s. Lateness is the instant a job's submission was
# sent minus its target instant, from the run's manifest.json.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
secs=${2:-10}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/runworkload" ] || bin=target/release
tmp=$(mktemp -d -t bench-replay-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
jobs=$((rate * secs))
{
  echo "; MaxProcs: 64"
  # job submit wait run procs cpu mem req_procs req_time req_mem status ...
  for i in $(seq "$jobs"); do
    echo "$i $((i - 1)) 0 1 1 -1 -1 1 2 -1 1 1 1 -1 1 -1 -1 -1"
  done
} > "$tmp/steady.swf"
cat > "$tmp/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$tmp/state"

[agents]
local = true
sigsleep = "$PWD/$bin/sigsleep"

[[nodes]]
names = "vn[1-4]"
cpus = 16
memory = "64G"
EOF
"$bin/runworkload" --config "$tmp/cluster.toml" --workload "$tmp/steady.swf" \
  --speedup "$rate" --out "$tmp/out" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
python3 - "$tmp/out" "$rate" "$jobs" <<'EOF'
import glob, json, sys
out, rate, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = json.load(open(glob.glob(f"{out}/shrink-*/manifest.json")[0]))
l = m["lateness"]
done = m["counts"].get("completed", 0)
assert l["submitted"] == jobs, f"{l['submitted']} of {jobs} submitted"
print("| rate (jobs/s) | jobs | completed | lateness p50 (ms) | p99 (ms) | max (ms) |")
print("|---:|---:|---:|---:|---:|---:|")
print(f"| {rate} | {jobs} | {done} | {l['p50'] * 1e3:.3f} | {l['p99'] * 1e3:.3f} | {l['max'] * 1e3:.3f} |")
EOF
