#!/usr/bin/env bash
# Fuzzes the job-record decoder with libFuzzer for a bounded time.
#
#   scripts/fuzz-record.sh [SECONDS]     (default 60)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz uses unstable
# rustc flags; on a stable toolchain RUSTC_BOOTSTRAP=1 lets it run, and the
# address sanitizer is left out unless FUZZ_SANITIZER=address is set.
# Crashes land in fuzz/artifacts/record_decoder/; the corpus grows in
# fuzz/corpus/record_decoder/ (seeded with a few valid frames).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
command -v cargo-fuzz >/dev/null || { echo "fuzz-record: cargo-fuzz not installed (cargo install cargo-fuzz)" >&2; exit 2; }
host=$(rustc -vV | sed -n 's/^host: //p')
corpus=fuzz/corpus/record_decoder
mkdir -p "$corpus"
if [ -z "$(ls -A "$corpus")" ]; then
  # Seed with real frames written by sigsleep.
  cargo build -q -p sigsleep
  bin=target/$host/debug/sigsleep
  [ -x "$bin" ] || bin=target/debug/sigsleep
  "$bin" --runtime 0 --id 1 --node vn0001 --log "$corpus/one.rec"
  "$bin" --runtime 0 --id 2 --walltime 5 --log "$corpus/two.rec"
  cat "$corpus/one.rec" "$corpus/two.rec" > "$corpus/both.rec"
fi
RUSTC_BOOTSTRAP=1 cargo fuzz run --target "$host" --sanitizer "${FUZZ_SANITIZER:-none}" \
  record_decoder "$corpus" -- -max_total_time="$secs" -max_len=4096
