#!/usr/bin/env bash
# A first look at clemu's job: three real sigsleep processes share one log;
# one is suspended with SIGTSTP and resumed with SIGCONT, one is cancelled
# with SIGTERM; calcmets prints the records they leave behind.
#
#   scripts/demo.sh [OUT_DIR]        (default: a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sigsleep -p calcmets
bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
host=$(rustc -vV | sed -n 's/^host: //p')
if [ -x "$bin/$host/release/sigsleep" ]; then bin=$bin/$host/release; else bin=$bin/release; fi
out=${1:-$(mktemp -d -t clemu-demo-XXXXXX)}
mkdir -p "$out"
log=$out/jobs.rec
rm -f "$log"

now=$(date +%s.%N)
launch() { # id runtime node
  "$bin/sigsleep" --id "$1" --runtime "$2" --cores 16 --node "$3" --submit "$now" --log "$log" &
}
launch 1 2 vn0001; a=$!
launch 2 3 vn0002; b=$!
launch 3 30 vn0003; c=$!

sleep 0.5
echo "suspending job 2 (pid $b) for 2 s with SIGTSTP ..."
kill -TSTP "$b"
sleep 0.2
echo "  its state now: $(awk '{print $3}' /proc/$b/stat) (T = stopped)"
sleep 1.8
kill -CONT "$b"
echo "cancelling job 3 (pid $c) with SIGTERM ..."
kill -TERM "$c"
wait "$a" || true; wait "$b" || true; wait "$c" || true

echo
echo "records in $log:"
"$bin/calcmets" dump "$log"
