#!/usr/bin/env bash
# A first look at clemu: the demo cluster (16 nodes x 16 cores, one
# process), six real jobs, one suspended and resumed with real signals, one
# cancelled; then the queue, the records the jobs left and their metrics.
#
#   scripts/demo.sh [OUT_DIR]        (default: a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
out=${1:-$(mktemp -d -t clemu-demo-XXXXXX)}
mkdir -p "$out"

"$bin/controller" serve --config configs/demo.toml --listen 127.0.0.1:0 \
  --state-dir "$out/state" --record-dir "$out/records" 2> "$out/controller.log" &
serve=$!
trap 'kill $serve 2>/dev/null || true' EXIT
ctl() { "$bin/controller" --config configs/demo.toml --secret-file "$out/state/secret" \
          --addr "$(cat "$out/state/address")" "$@"; }
for _ in $(seq 100); do [ -s "$out/state/address" ] && ctl stats >/dev/null 2>&1 && break; sleep 0.05; done

echo "== submitting: 3 jobs of 64 cores for 2 s, a 16-core job for 60 s, a 256-core job"
ctl submit --cores 64 --runtime 2 --count 3 | tr '\n' ' '
long=$(ctl submit --cores 16 --runtime 60); echo -n "$long "
ctl submit --cores 256 --runtime 1
sleep 0.5
echo "   (EASY: the 256-core job waits for the whole cluster, reserved when the"
echo "    60 s job would end)"
ctl queue
echo
echo "== suspending job 2 for 2 s (real SIGTSTP / SIGCONT to its sigsleep)"
ctl suspend 2
pid=$(pgrep -f -- "--id 2 .*--log $out/records" | head -1)
echo "   its process $pid is now in state $(awk '{print $3}' "/proc/$pid/stat") (T = stopped)"
sleep 2
ctl resume 2
echo "== cancelling job $long, so that the 256-core job can start"
ctl cancel "$long"
for _ in $(seq 100); do
  [ "$(ctl queue --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 0 ] && break
  sleep 0.1
done
echo
ctl queue --all
ctl nodes
ctl shutdown
wait "$serve" || true
trap - EXIT

echo
echo "== records in $out/records:"
"$bin/calcmets" dump "$out/records"
echo
"$bin/calcmets" --cores 256 --status all "$out/records"
