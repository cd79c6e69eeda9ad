#!/usr/bin/env bash
# What a Slurm command costs on a small and on a large cluster: the wall
# time of one `sbatch -Q --hold --wrap true` and of one `squeue` (the
# calls a workflow tool makes most), on `clemu-slurm up` clusters of 100
# and of 10,000 nodes, each a mean over a loop of CALLS calls. Every
# command loads the cluster's config, so what it does per node shows
# here. BASE is the directory of another build's clemu-slurm: its
# commands and this checkout's take turns on the same clusters, ROUNDS
# times, and the medians are printed side by side.
#
#   scripts/bench-command-size.sh BASE [ROUNDS] [CALLS]   (5 and 200 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench-command-size.sh BASE [ROUNDS] [CALLS]}
rounds=${2:-5}
calls=${3:-200}
[ -x "$base/clemu-slurm" ] || { echo "bench-command-size: no clemu-slurm in $base" >&2; exit 2; }
# shellcheck source=scripts/lib/stats.sh
source scripts/lib/stats.sh
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
tmp=$(mktemp -d -t bench-command-size-XXXXXX)
cleanup() {
  for n in 100 10000; do
    "$bin/clemu-slurm" down --dir "$tmp/c$n" >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s%N; }

# Each build's commands, as links of Slurm's names in a directory of its own.
for b in base new; do
  mkdir -p "$tmp/$b"
  src=$bin
  [ "$b" = base ] && src=$base
  for c in sbatch squeue scancel; do ln -s "$src/clemu-slurm" "$tmp/$b/$c"; done
done
for n in 100 10000; do
  "$bin/clemu-slurm" up --nodes "$n" --cpus 16 --dir "$tmp/c$n" > "$tmp/c$n.env" 2>/dev/null
done

# Mean wall time of one call, in ms: CALLS calls of "$@" in a loop.
per_call() {
  local t0 t1
  t0=$(now)
  for _ in $(seq "$calls"); do "$@" > /dev/null; done
  t1=$(now)
  echo "scale=3; ($t1 - $t0) / $calls / 1000000" | bc -l
}

declare -A ms
cd "$tmp"
for r in $(seq "$rounds"); do
  for n in 100 10000; do
    conf=$(sed -n 's/^export CLEMU_CONF=//p' "$tmp/c$n.env")
    # squeue on an empty queue first, then the held submissions, which
    # are cancelled before the next turn so that every squeue reads the
    # same queue.
    for b in base new; do
      ms[$b,$n,squeue]+=" $(CLEMU_CONF=$conf per_call "$tmp/$b/squeue")"
    done
    for b in base new; do
      ms[$b,$n,sbatch]+=" $(CLEMU_CONF=$conf per_call "$tmp/$b/sbatch" -Q --hold -o /dev/null --wrap true)"
    done
    CLEMU_CONF=$conf "$tmp/new/scancel" -u "$(id -un)"
    while [ -n "$(CLEMU_CONF=$conf "$tmp/new/squeue" -h -o %i)" ]; do sleep 0.1; done
  done
  echo "bench-command-size: round $r of $rounds done" >&2
done

echo "command  nodes   base (ms per call, median of $rounds)   this build   this / base"
for c in sbatch squeue; do
  for n in 100 10000; do
    # shellcheck disable=SC2086
    b=$(median ${ms[base,$n,$c]})
    # shellcheck disable=SC2086
    w=$(median ${ms[new,$n,$c]})
    printf '%-7s  %-6s  %36.2f   %10.2f   %11.2f\n' "$c" "$n" "$b" "$w" "$(echo "$w / $b" | bc -l)"
  done
done
