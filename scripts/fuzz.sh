#!/usr/bin/env bash
# Fuzzes every decoder of untrusted input with libFuzzer, each for a
# bounded time: job records, SWF traces, nodeset expressions, wire frames.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s each, every target)
#
# Targets: record_decoder swf_parser nodeset_parser wire_decoder.
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz uses unstable
# rustc flags; on a stable toolchain RUSTC_BOOTSTRAP=1 lets it run, and the
# address sanitizer is left out unless FUZZ_SANITIZER=address is set.
# Crashes land in fuzz/artifacts/<target>/: once fixed, copy each into
# fuzz/regressions/<target>/, which formats/tests/fuzz_regressions.rs
# replays with the target's own checks (fuzz/fuzz_targets/checks.rs);
# corpora grow in fuzz/corpus/<target>/, seeded on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(record_decoder swf_parser nodeset_parser wire_decoder)
command -v cargo-fuzz >/dev/null || { echo "fuzz: cargo-fuzz not installed (cargo install cargo-fuzz)" >&2; exit 2; }
host=$(rustc -vV | sed -n 's/^host: //p')

seed() { # target
  local corpus=fuzz/corpus/$1
  mkdir -p "$corpus"
  [ -z "$(ls -A "$corpus")" ] || return 0
  case $1 in
    record_decoder)
      # Real frames written by sigsleep.
      cargo build -q -p sigsleep
      local bin=target/$host/debug/sigsleep
      [ -x "$bin" ] || bin=target/debug/sigsleep
      "$bin" --runtime 0 --id 1 --node vn0001 --log "$corpus/one.rec"
      "$bin" --runtime 0 --id 2 --walltime 5 --log "$corpus/two.rec"
      cat "$corpus/one.rec" "$corpus/two.rec" > "$corpus/both.rec" ;;
    swf_parser)
      head -c 4000 configs/workloads/kth-sp2-200.swf > "$corpus/kth-head.swf"
      printf '; MaxProcs: 100\n1 0 -1 10 4 -1 -1 4 20 -1 1 1 1 -1 1 -1 -1 -1\n' > "$corpus/tiny.swf" ;;
    nodeset_parser)
      local i=0
      for e in 'vn[0000-3599]' 'a[2-8/2]' 'da[1-3]c[1-2]' 'vn[1-10]!vn[3-4]' \
               'vn[1-10]&vn[5-20]' 'vn[1-10]^vn[5-20]' '@all!vn05' '(a1,b[1-3])&b2'; do
        printf '%s' "$e" > "$corpus/seed$i"; i=$((i + 1))
      done ;;
    wire_decoder)
      # A frame: 4-byte big-endian length, then a message (ToAgent::Ping,
      # Request::Queue { all: true }).
      printf '\0\0\0\4\x0c\0\0\0' > "$corpus/ping"
      printf '\0\0\0\5\1\0\0\0\1' > "$corpus/queue" ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  seed "$t"
  echo "== $t: ${secs}s"
  if ! RUSTC_BOOTSTRAP=1 cargo fuzz run --target "$host" --sanitizer "${FUZZ_SANITIZER:-none}" \
      "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -max_len=4096 2>&1 | tail -3; then
    status=1
  fi
  if [ -n "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ]; then
    echo "fuzz: $t found crashes in fuzz/artifacts/$t/" >&2
    status=1
  fi
done
exit $status
