#!/usr/bin/env bash
# Schedulers nobody here wrote drive clemu over Batsim's protocol: pybatsim
# 3.2.1 (PyPI, in a virtual environment under target/) with its bundled
# FCFS, EASY backfilling and filler schedulers, unmodified, and the
# suspension scheduler of examples/batsim/, each replaying the 200-job KTH
# sample on configs/batsim.toml (KTH's 100 one-core nodes) in the twin and
# emulated (real processes, real signals). For every run: each job
# completes exactly once, no core runs two jobs at once, and nothing is left
# running, the scheduler included. pybatsim's FCFS in the twin starts every
# job when clemu's own fcfs twin does; its EASY is compared with clemu's
# easy (docs/batsim.md explains the differences). The runs exported with
# `calcmets export --format batsim` load in evalys, whose utilization and
# mean waiting time agree with calcmets'.
#
#   scripts/batsim-check.sh [SPEEDUP]     (emulated runs; default 40000)
set -euo pipefail
cd "$(dirname "$0")/.."
speedup=${1:-40000}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/runworkload" ] || bin=$PWD/target/release
venv=$PWD/target/batsim-venv
if ! "$venv/bin/python" -c 'import batsim, evalys, zmq' 2>/dev/null; then
  echo "batsim-check: installing pybatsim 3.2.1 and evalys 4.0.7 in $venv"
  python3 -m venv "$venv"
  # pybatsim pins pyzmq<23, which has no wheel for current Pythons; it
  # runs on pyzmq 26 and later.
  "$venv/bin/pip" install -q 'pyzmq>=26' docopt procset sortedcontainers 'evalys==4.0.7'
  "$venv/bin/pip" install -q --no-deps 'pybatsim==3.2.1'
fi
export PATH=$bin:$venv/bin:$PATH
work=$(mktemp -d -t clemu-batsim-check-XXXXXX)
sched_pid=
cleanup() {
  [ -n "$sched_pid" ] && kill "$sched_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "batsim-check: FAIL: $*" >&2; exit 1; }
check() { "$venv/bin/python" scripts/lib/batsim_check.py "$@"; }
check selftest
workload=configs/workloads/kth-sp2-200.swf

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
endpoint=tcp://127.0.0.1:$port
# The demo config, pointed at this port; and the same cluster with clemu's
# own policies, for comparison.
sed "s|^endpoint = .*|endpoint = \"$endpoint\"|" configs/batsim.toml > "$work/batsim.toml"
for p in fcfs easy; do
  sed "s/^policy = \"batsim\".*/policy = \"$p\"/; /^\[batsim\]/,\$d" configs/batsim.toml > "$work/$p.toml"
done

# run NAME MODE SCHEDULER...: the scheduler in the background, one replay
# (MODE: twin or emulated), then the checks every run gets.
run() {
  local name=$1 mode=$2; shift 2
  local out=$work/$name-$mode flags=(--simulate) tol=0
  if [ "$mode" = emulated ]; then flags=(--speedup "$speedup"); tol=0.005; fi
  "$@" > "$work/$name-$mode.sched.log" 2>&1 &
  sched_pid=$!
  local t0=$(date +%s.%N)
  runworkload --config "$work/batsim.toml" --workload "$workload" "${flags[@]}" -q \
    --out "$out" > "$out.log" 2>&1 || { cat "$out.log" "$work/$name-$mode.sched.log"; fail "$name $mode: runworkload failed"; }
  local t1=$(date +%s.%N)
  # SIMULATION_ENDS was sent: the scheduler exits on its own.
  for _ in $(seq 100); do kill -0 "$sched_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$sched_pid" 2>/dev/null && fail "$name $mode: the scheduler is still running after the end"
  wait "$sched_pid" || { cat "$work/$name-$mode.sched.log"; fail "$name $mode: the scheduler exited with an error"; }
  sched_pid=
  check once "$out/shrink-100" 200
  check cores "$out/shrink-100" "$tol"
  if pgrep -f -- "--log $out/" >/dev/null; then fail "$name $mode: sigsleep processes left"; fi
  printf 'batsim-check: %-9s %-8s 200 jobs once, %s s, %s\n' "$name" "$mode" \
    "$(python3 -c "print(round($t1 - $t0, 1))")" "$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['scheduler']; print('%d messages, reply p50 %.2f ms, p99 %.2f ms' % (s['messages'], s['reply_ms']['p50'], s['reply_ms']['p99']))" "$out/shrink-100/manifest.json")"
}

# (Schedulers of pybatsim's own API log their events to PREFIX_events.csv.)
pyb() { pybatsim "$1" -s "$endpoint" -t 5000 -v warning -o "{\"export-prefix\": \"$work/$1\"}"; }
for mode in twin emulated; do
  run fcfs "$mode" pyb schedFcfs
  run easy "$mode" pyb easyBackfill
  run filler "$mode" pyb fillerSched
  run suspend "$mode" python examples/batsim/suspend_for_short.py --bind "$endpoint"
done

# The suspension extension did suspend, with real signals when emulated;
# it heard that no more jobs would come, and no job came after that.
for mode in twin emulated; do
  n=$(calcmets --format json "$work/suspend-$mode" | python3 -c 'import json,sys; print(json.load(sys.stdin)["suspensions"])')
  [ "$n" -gt 0 ] || fail "suspend $mode: no suspension"
  echo "batsim-check: suspend $mode: $n suspensions carried out"
  grep -q 'told no more jobs would come at .*, 0 submitted after' "$work/suspend-$mode.sched.log" ||
    { cat "$work/suspend-$mode.sched.log"; fail "suspend $mode: no_more_static_job_to_submit missing or broken"; }
done

# pybatsim's FCFS and clemu's own fcfs: the same start for every job.
runworkload --config "$work/fcfs.toml" --workload "$workload" --simulate -q --out "$work/own-fcfs" > /dev/null 2>&1
check starts "$work/own-fcfs/shrink-100" "$work/fcfs-twin/shrink-100" --all
# pybatsim's EASY and clemu's easy: docs/batsim.md says why they part.
runworkload --config "$work/easy.toml" --workload "$workload" --simulate -q --out "$work/own-easy" > /dev/null 2>&1
check starts "$work/own-easy/shrink-100" "$work/easy-twin/shrink-100"

# What evalys makes of the runs that suspend nothing.
for r in fcfs-twin fcfs-emulated easy-twin easy-emulated; do
  calcmets export --format batsim --out "$work/$r/batsim" "$work/$r/shrink-100" > /dev/null
  check evalys "$work/$r/shrink-100" "$work/$r/batsim"
done
echo "batsim-check: OK"
