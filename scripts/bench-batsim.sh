#!/usr/bin/env bash
# What Batsim's protocol costs the twin, and a Python scheduler against
# clemu's own, on one real trace (runworkload --simulate on
# configs/ricc-1024.toml, the trace's own 8,192 cores, one resource per
# core).
#
#   scripts/bench-batsim.sh [TRACE] [JOBS] [RUNS]
#       (default ../shared/workloads/RICC-2010-2.swf.gz, 100000 jobs, 3 runs)
#
# 1. Protocol overhead: the twin driven by a trivial scheduler over the
#    protocol (controller/examples/batsim_fcfs.rs: first come, first served
#    on the lowest free cores, in Rust, so that it decides in next to no
#    time), against the twin with clemu's own fcfs on the same trace, run
#    alternately; best of RUNS each. Events through the protocol are the
#    events clemu sent plus the decisions it got back.
# 2. pybatsim 3.2.1's easyBackfill (Python) against clemu's easy, the twin
#    on the same trace, once each: how long a run takes when the scheduler
#    is a Python program.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-../shared/workloads/RICC-2010-2.swf.gz}
jobs=${2:-100000}
runs=${3:-3}
[ -r "$trace" ] || { echo "bench-batsim: cannot read $trace" >&2; exit 2; }
cargo build --release -q
cargo build --release -q -p controller --example batsim_fcfs
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/runworkload" ] || bin=$PWD/target/release
venv=$PWD/target/batsim-venv
tmp=$(mktemp -d -t bench-batsim-XXXXXX)
sched=
trap '[ -n "$sched" ] && kill $sched 2>/dev/null; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ep=tcp://127.0.0.1:$port

# The RICC cluster with each policy; the external one at $ep, a message at
# every event as Batsim sends them.
conf() { # policy -> config path
  local c=$tmp/$1.toml
  sed "s/^policy = .*/policy = \"$2\"/; s/^schedule_interval_s = .*/schedule_interval_s = 0/" \
    configs/ricc-1024.toml > "$c"
  [ "$2" = batsim ] && printf '\n[batsim]\nendpoint = "%s"\nreply_timeout_s = 600\n' "$ep" >> "$c"
  echo "$c"
}
batsim=$(conf batsim batsim)
fcfs=$(conf fcfs fcfs)
easy=$(conf easy easy)
secs() { # out-dir config -> wall seconds of the twin
  local s e
  s=$(date +%s.%N)
  "$bin/runworkload" --config "$2" --workload "$trace" --jobs "$jobs" --simulate -q --out "$1" \
    > /dev/null 2>> "$tmp/runworkload.log" || { cat "$tmp/runworkload.log" >&2; exit 1; }
  e=$(date +%s.%N)
  awk "BEGIN{printf \"%.3f\", $e - $s}"
}
best() { printf '%s\n' "$@" | sort -g | head -1; }
completed() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"].get("completed", 0))' "$1/shrink-100/manifest.json"; }

t_proto=() t_own=()
for r in $(seq "$runs"); do
  "$bin/examples/batsim_fcfs" "$ep" 2> "$tmp/fcfs-$r.log" &
  sched=$!
  t_proto+=("$(secs "$tmp/proto-$r" "$batsim")")
  wait "$sched"; sched=
  t_own+=("$(secs "$tmp/own-$r" "$fcfs")")
done
# "batsim_fcfs: M messages, H events heard, D decisions"
read -r msgs heard said < <(sed -n 's/^batsim_fcfs: \([0-9]*\) messages, \([0-9]*\) events heard, \([0-9]*\) decisions$/\1 \2 \3/p' "$tmp/fcfs-1.log")
tp=$(best "${t_proto[@]}")
to=$(best "${t_own[@]}")
echo "Protocol overhead, $jobs jobs of $(basename "$trace") on ricc-1024 (8,192 resources), twin, best of $runs:"
echo
echo "| run | wall s | jobs completed | messages | events through the protocol | events/s | µs per message over the twin's own fcfs |"
echo "|---|---|---|---|---|---|---|"
echo "| twin, trivial Batsim scheduler (Rust) | $tp | $(completed "$tmp/proto-1") | $msgs | $((heard + said)) | $(awk "BEGIN{printf \"%.0f\", ($heard + $said) / $tp}") | $(awk "BEGIN{printf \"%.1f\", ($tp - $to) / $msgs * 1e6}") |"
echo "| twin, clemu's fcfs (no protocol) | $to | $(completed "$tmp/own-1") | - | - | - | - |"
echo

if [ -x "$venv/bin/pybatsim" ]; then
  "$venv/bin/pybatsim" easyBackfill -s "$ep" -t 600000 -v warning > "$tmp/pyb.log" 2>&1 &
  sched=$!
  tpy=$(secs "$tmp/pyb" "$batsim")
  wait "$sched"; sched=
  tez=$(secs "$tmp/easy" "$easy")
  pm=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["scheduler"]["messages"])' "$tmp/pyb/shrink-100/manifest.json")
  echo "EASY in the twin, same trace:"
  echo
  echo "| scheduler | wall s | jobs completed | messages | ratio |"
  echo "|---|---|---|---|---|"
  echo "| pybatsim easyBackfill (Python, over the protocol) | $tpy | $(completed "$tmp/pyb") | $pm | $(awk "BEGIN{printf \"%.0f\", $tpy / $tez}")× |"
  echo "| clemu's easy (built in) | $tez | $(completed "$tmp/easy") | - | 1× |"
else
  echo "(pybatsim not installed in $venv: scripts/batsim-check.sh installs it; EASY comparison skipped)"
fi
