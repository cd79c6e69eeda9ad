#!/usr/bin/env bash
# Where a job's files go (its script, sigsleep's line on how it ended, the
# directory that holds them), side by side: in memory (/dev/shm, the
# agent's choice when TMPDIR is not set) and on /tmp's file system
# (TMPDIR=/tmp), on one build, alternating.
#
#   scripts/bench-job-files.sh [JOBS] [ROUNDS]   (default 2000 jobs, 3 rounds)
#
# Each round: `clemu-slurm up --nodes 100 --cpus 16`, JOBS batch jobs of
# `true` as two job arrays (`sbatch -o /dev/null --array --wrap true`),
# timed from the first sbatch until `squeue -h` prints nothing. Prints a
# line per round and the median of each.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2000}
rounds=${2:-3}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/clemu-slurm" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t bench-job-files-XXXXXX)
cleanup() {
  "$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
half=$((jobs / 2))

rate() { # where: memory | disk
  local env=(env -u TMPDIR)
  [ "$1" = disk ] && env=(env TMPDIR=/tmp)
  "${env[@]}" "$bin/clemu-slurm" up --nodes 100 --cpus 16 --dir "$tmp/c" > "$tmp/env" 2>/dev/null
  (
    # shellcheck disable=SC1091
    source "$tmp/env"
    mkdir -p "$tmp/w" && cd "$tmp/w"
    local t0 t1
    t0=$(now)
    sbatch -Q -o /dev/null --array=1-"$half" --wrap true
    sbatch -Q -o /dev/null --array=1-"$((jobs - half))" --wrap true
    while [ -n "$(squeue -h -o %i)" ]; do sleep 0.05; done
    t1=$(now)
    awk -v n="$jobs" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", n / (b - a) }'
  )
  "$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1
}

echo "/tmp is $(df -T /tmp | awk 'NR == 2 { print $2 }'); /dev/shm is $(df -T /dev/shm | awk 'NR == 2 { print $2 }')"
mem=() disk=()
for r in $(seq "$rounds"); do
  m=$(rate memory)
  d=$(rate disk)
  mem+=("$m") disk+=("$d")
  echo "round $r: job files in memory $m jobs/s, on /tmp $d jobs/s"
done
source scripts/lib/stats.sh
m=$(median "${mem[@]}")
d=$(median "${disk[@]}")
echo "median: in memory $m jobs/s, on /tmp $d jobs/s, $(awk -v a="$m" -v b="$d" 'BEGIN { printf "%.2f", a / b }')x"
