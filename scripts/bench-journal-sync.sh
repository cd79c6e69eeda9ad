#!/usr/bin/env bash
# When the controller answers a change, side by side on one build,
# alternating: once it is synced to disk (`journal_sync = "answer"`, the
# default) and once it is written (`"background"`, what `clemu-slurm up`
# writes, as slurmctld answers before its state save).
#
#   scripts/bench-journal-sync.sh [JOBS] [ROUNDS]   (default 1000 jobs, 3 rounds)
#
# Each round: `clemu-slurm up --nodes 100 --cpus 16` with its state under
# /tmp (a disk here, where a sync costs what it costs), the cluster
# restarted with the setting, then JOBS batch jobs of `true`, one sbatch
# each (`sbatch -Q -o /dev/null --wrap true`), timed from the first sbatch
# until `squeue -h` prints nothing. Prints a line per round and the
# median of each.
set -euo pipefail
# A failure inside $(rate ...) stops the script too.
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
jobs=${1:-1000}
rounds=${2:-3}
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/clemu-slurm" ] || bin=$PWD/target/release
tmp=$(mktemp -d -p /tmp bench-journal-sync-XXXXXX)
cleanup() {
  "$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }

rate() { # answer | background
  rm -rf "$tmp/c" "$tmp/w"
  "$bin/clemu-slurm" up --nodes 100 --cpus 16 --dir "$tmp/c" > "$tmp/env" 2>/dev/null
  "$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1
  sed -i "s/^journal_sync = .*/journal_sync = \"$1\"/" "$tmp/c/cluster.toml"
  grep -q "^journal_sync = \"$1\"" "$tmp/c/cluster.toml"
  # As `up` starts it: its pid where `down` looks for it.
  "$bin/controller" serve --detach --config "$tmp/c/cluster.toml" \
    --log "$tmp/c/controller.log" > "$tmp/c/controller.pid" 2>/dev/null
  (
    # shellcheck disable=SC1091
    source "$tmp/env"
    # Up as `up` means it: every node idle.
    local deadline=$((SECONDS + 30))
    until [ "$(sinfo -h -t idle -o %D 2>/dev/null)" = 100 ]; do
      [ "$SECONDS" -lt "$deadline" ] || { echo "the nodes are not up after 30 s" >&2; exit 1; }
      sleep 0.05
    done
    mkdir -p "$tmp/w" && cd "$tmp/w"
    local t0 t1 left
    t0=$(now)
    for _ in $(seq "$jobs"); do sbatch -Q -o /dev/null --wrap true; done
    while :; do
      left=$(squeue -h -o %i) || exit 1
      [ -n "$left" ] || break
      sleep 0.05
    done
    t1=$(now)
    awk -v n="$jobs" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", n / (b - a) }'
  )
  "$bin/clemu-slurm" down --dir "$tmp/c" >/dev/null 2>&1
}

echo "/tmp is $(df -T /tmp | awk 'NR == 2 { print $2 }')"
synced=() written=()
for r in $(seq "$rounds"); do
  # Each goes first every other round.
  if [ $((r % 2)) = 1 ]; then
    s=$(rate answer)
    w=$(rate background)
  else
    w=$(rate background)
    s=$(rate answer)
  fi
  synced+=("$s") written+=("$w")
  echo "round $r: answered once synced $s jobs/s, once written $w jobs/s"
done
source scripts/lib/stats.sh
s=$(median "${synced[@]}")
w=$(median "${written[@]}")
echo "median: once synced $s jobs/s, once written $w jobs/s, $(awk -v a="$w" -v b="$s" 'BEGIN { printf "%.2f", a / b }')x"
