#!/usr/bin/env bash
# One sbatch per job, end to end, on two builds side by side: JOBS jobs
# of `true` submitted by a shell loop, from the first sbatch to the queue
# empty, on a `clemu-slurm up` cluster of 100 nodes of 16 cores that each
# build starts with its own controller and sigsleep. BASE is the
# directory of the other build's binaries (clemu-slurm, controller,
# sigsleep). The builds take turns, ROUNDS times, each first in every
# other round, each run from a copy of its own; the medians are
# printed side by side, with how the machine's CPU time went in this
# build's last round (user, system, idle: /proc/stat); what one
# submission costs on the idle cluster after the round: a loop of 200
# `sbatch --hold`, in ms per sbatch from start to exit; and what one job
# process costs each build's sigsleep: a loop of `sigsleep -- /bin/true`
# in a working directory of its own, in ms per start.
#
#   scripts/bench-sbatch-loop.sh BASE [ROUNDS] [JOBS]   (5 and 500 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench-sbatch-loop.sh BASE [ROUNDS] [JOBS]}
rounds=${2:-5}
jobs=${3:-500}
for b in clemu-slurm controller sigsleep; do
  [ -x "$base/$b" ] || { echo "bench-sbatch-loop: no $b in $base" >&2; exit 2; }
done
# shellcheck source=scripts/lib/stats.sh
source scripts/lib/stats.sh
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
tmp=$(mktemp -d -t bench-sbatch-loop-XXXXXX)
cleanup() {
  for d in "$tmp"/c-*; do
    [ -d "$d" ] && "$bin/clemu-slurm" down --dir "$d" >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s%N; }
cpu() { head -1 /proc/stat; }

# Jobs per second of one round on build directory $1, its cluster named
# $2, and ms per held sbatch after it; leaves the CPU split of the round
# in $tmp/split.
round() {
  local dir=$tmp/c-$2 a b t0 t1
  "$1/clemu-slurm" up --nodes 100 --cpus 16 --dir "$dir" > "$dir.env" 2>/dev/null
  mkdir -p "$tmp/work"
  (
    # shellcheck disable=SC1090
    source "$dir.env"
    cd "$tmp/work"
    a=$(cpu)
    t0=$(now)
    for _ in $(seq "$jobs"); do sbatch -Q -o /dev/null --wrap true; done
    while [ -n "$(squeue -h -o %i)" ]; do sleep 0.02; done
    t1=$(now)
    b=$(cpu)
    python3 -c "
a = [int(x) for x in '$a'.split()[1:]]
b = [int(x) for x in '$b'.split()[1:]]
d = [y - x for x, y in zip(a, b)]
t = sum(d)
print('user %.0f %%, system %.0f %%, idle %.0f %%' % (100 * (d[0] + d[1]) / t, 100 * (d[2] + d[5] + d[6]) / t, 100 * (d[3] + d[4]) / t))
" > "$tmp/split"
    jps=$(echo "scale=1; $jobs * 1000000000 / ($t1 - $t0)" | bc -l)
    t0=$(now)
    for _ in $(seq 200); do sbatch -Q -o /dev/null --hold --wrap true; done
    t1=$(now)
    echo "$jps $(echo "scale=3; ($t1 - $t0) / 200 / 1000000" | bc -l)"
  )
  "$1/clemu-slurm" down --dir "$dir" >/dev/null 2>&1
}

# ms per start of `sigsleep -- /bin/true`, 300 in a loop.
starts() {
  local t0 t1
  mkdir -p "$tmp/start"
  t0=$(now)
  for _ in $(seq 300); do
    "$1/sigsleep" --log "$tmp/start/jobs.log" --chdir "$tmp/start" -- /bin/true
  done
  t1=$(now)
  echo "scale=3; ($t1 - $t0) / 300 / 1000000" | bc -l
}

declare -A rate start held
# Each build runs from a copy of its own, made the same way: a binary
# just written by the linker and one written in one go by `cp` are held
# differently in the page cache (15 more page faults per `sbatch` from
# the linker's here), which is not a difference between the builds.
# This build's sigsleep is the one its agents take: its musl build where
# that comes from the same code (agent::settings::sigsleep_in).
sig=$bin/sigsleep
musl=$PWD/target/${host%-gnu}-musl/release/sigsleep
[ -x "$musl" ] && [ "$("$musl" --source-id)" = "$("$sig" --source-id)" ] && sig=$musl
echo "bench-sbatch-loop: this build's sigsleep: $sig" >&2
for b in base new; do
  mkdir -p "$tmp/bin-$b"
  src=$bin
  [ "$b" = base ] && src=$base
  for f in clemu-slurm controller sigsleep; do
    cp "$src/$f" "$tmp/bin-$b/$f"
  done
done
cp "$sig" "$tmp/bin-new/sigsleep"

# The builds take turns and swap places every round: the second of a
# round runs after the first's cluster went down, which is not the same.
for r in $(seq "$rounds"); do
  order="base new"
  [ $((r % 2)) = 0 ] && order="new base"
  for b in $order; do
    dir=$tmp/bin-$b
    read -r jps ms < <(round "$dir" "$b$r")
    rate[$b]+=" $jps"
    held[$b]+=" $ms"
    [ "$b" = new ] && cp "$tmp/split" "$tmp/split.new"
    start[$b]+=" $(starts "$dir")"
  done
  echo "bench-sbatch-loop: round $r of $rounds: jobs/s base${rate[base]##* } this${rate[new]##* }" >&2
done

# shellcheck disable=SC2086
rb=$(median ${rate[base]})
# shellcheck disable=SC2086
rn=$(median ${rate[new]})
# shellcheck disable=SC2086
hb=$(median ${held[base]})
# shellcheck disable=SC2086
hn=$(median ${held[new]})
# shellcheck disable=SC2086
sb=$(median ${start[base]})
# shellcheck disable=SC2086
sn=$(median ${start[new]})
echo "medians of $rounds rounds            base      this build   this / base"
printf 'jobs/s, %4d jobs, one sbatch each  %7.1f   %10.1f   %11.2f\n' "$jobs" "$rb" "$rn" "$(echo "$rn / $rb" | bc -l)"
printf 'ms per sbatch --hold, idle cluster  %7.3f   %10.3f   %11.2f\n' "$hb" "$hn" "$(echo "$hn / $hb" | bc -l)"
printf 'ms per sigsleep -- /bin/true        %7.3f   %10.3f   %11.2f\n' "$sb" "$sn" "$(echo "$sn / $sb" | bc -l)"
echo "CPU in this build's last round: $(cat "$tmp/split.new")"
