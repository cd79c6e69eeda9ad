#!/usr/bin/env bash
# Slurm's commands on clemu against real Slurm on this machine, side by
# side (root; Slurm from scripts/slurm-local.sh):
#
#   scripts/bench-slurm-commands.sh   (JOBS=300 NODES=100 WORK="sleep 1" by default)
#
# - throughput, end to end: JOBS batch jobs running WORK on NODES nodes of
#   16 cores, from the first sbatch to the queue empty (squeue -h prints
#   nothing), on each system with the same commands: submitted one sbatch
#   each, then as job arrays; and, as the floor of one sbatch each, how
#   fast a shell loop starts /bin/true JOBS times on this machine, and
#   the floor of any batch system here: that loop, each turn also a
#   connection whose other end starts the job's script and does nothing
#   else (scripts/lib/job_floor.py);
# - bring-up: `clemu-slurm up --nodes 10000`, from the command to every
#   node able to take a job, three times;
# - memory per idle node: the controller's PSS idle with 100, 360, 1,000
#   and 10,000 nodes, each step's difference over its added nodes.
# Prints one line per figure, and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-300}
nodes=${NODES:-100}
work=${WORK:-sleep 1}
cargo build --release -q
# sigsleep's musl build, which the agents run where it is built (README.md).
if rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
  cargo build --release -q -p sigsleep --target x86_64-unknown-linux-musl
fi
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/clemu-slurm" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t bench-slurm-commands-XXXXXX)
export SLURM_LOCAL_DIR=$tmp/slurm
cleanup() {
  for d in "$tmp"/clemu*; do
    [ -d "$d" ] && "$bin/clemu-slurm" down --dir "$d" >/dev/null 2>&1 || true
  done
  scripts/slurm-local.sh down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
pss_kib() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }

# JOBS jobs through whichever sbatch/squeue are first on PATH; prints
# "individual_jobs_per_s array_jobs_per_s".
throughput() {
  local dir=$1 t0 t1 ind arr
  mkdir -p "$dir" && cd "$dir"
  wait_empty() {
    while [ -n "$(squeue -h -o %i)" ]; do sleep 0.05; done
  }
  t0=$(now)
  for _ in $(seq "$jobs"); do sbatch -Q -o /dev/null --wrap "$work" || exit 1; done
  wait_empty
  t1=$(now)
  ind=$(echo "$jobs / ($t1 - $t0)" | bc -l)
  # Arrays of at most 1,000 tasks: both refuse more (Slurm's MaxArraySize).
  local left=$jobs n
  t0=$(now)
  while [ "$left" -gt 0 ]; do
    n=$((left < 1000 ? left : 1000))
    sbatch -Q -o /dev/null --array="1-$n" --wrap "$work" || exit 1
    left=$((left - n))
  done
  wait_empty
  t1=$(now)
  arr=$(echo "$jobs / ($t1 - $t0)" | bc -l)
  cd - >/dev/null
  printf '%.1f %.1f\n' "$ind" "$arr"
}

# Real Slurm.
scripts/slurm-local.sh up "$nodes" 16 >/dev/null
slurm=$(SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf throughput "$tmp/slurm-work")
scripts/slurm-local.sh down >/dev/null
# clemu, the same commands.
"$bin/clemu-slurm" up --nodes "$nodes" --cpus 16 --dir "$tmp/clemu-t" > "$tmp/t.env" 2>/dev/null
clemu=$(
  # shellcheck disable=SC1091
  source "$tmp/t.env"
  throughput "$tmp/clemu-work"
)
"$bin/clemu-slurm" down --dir "$tmp/clemu-t" >/dev/null 2>&1
read -r s_ind s_arr <<< "$slurm"
read -r c_ind c_arr <<< "$clemu"
echo "throughput, $jobs jobs of $work on $nodes nodes, one sbatch each: Slurm $s_ind jobs/s, clemu $c_ind jobs/s, $(printf %.1f "$(echo "$c_ind / $s_ind" | bc -l)")x"
echo "throughput, $jobs jobs of $work on $nodes nodes, job arrays:      Slurm $s_arr jobs/s, clemu $c_arr jobs/s, $(printf %.1f "$(echo "$c_arr / $s_arr" | bc -l)")x"

# The floor of one sbatch per job: starting any process, JOBS times.
t0=$(now)
for _ in $(seq "$jobs"); do /bin/true; done
t1=$(now)
echo "floor: a shell loop starts /bin/true $(printf %.0f "$(echo "$jobs / ($t1 - $t0)" | bc -l)") times per second"

# The floor of a batch system on this host: the same loop, each turn a
# process and a connection, the other end starting the batch script and
# nothing else (scripts/lib/job_floor.py). No implementation does less
# per job, so no implementation beats this rate here.
printf '#!/bin/sh\n%s\n' "$work" > "$tmp/floor-job.sh"
chmod +x "$tmp/floor-job.sh"
# A port the system picks: a random one may be taken.
coproc FLOOR { exec python3 scripts/lib/job_floor.py 0 "$jobs" "$tmp/floor-job.sh"; }
floor_pid=$FLOOR_PID
read -r _ floor_port <&"${FLOOR[0]}"
t0=$(now)
for _ in $(seq "$jobs"); do
  /bin/true
  exec 3<>"/dev/tcp/127.0.0.1/$floor_port"
  exec 3>&-
done
wait "$floor_pid"
t1=$(now)
f_ind=$(echo "$jobs / ($t1 - $t0)" | bc -l)
echo "floor: $jobs jobs of $work, each a process, a connection and its script: $(printf %.1f "$f_ind") jobs/s, $(printf %.1f "$(echo "$f_ind / $s_ind" | bc -l)")x Slurm"

# Bring-up of 10,000 nodes, three times.
for i in 1 2 3; do
  t0=$(now)
  "$bin/clemu-slurm" up --nodes 10000 --dir "$tmp/clemu-up$i" > /dev/null 2>&1
  t1=$(now)
  printf 'bring-up, 10,000 nodes of 16 cores (clemu-slurm up, run %d): %.2f s\n' "$i" "$(echo "$t1 - $t0" | bc -l)"
  "$bin/clemu-slurm" down --dir "$tmp/clemu-up$i" >/dev/null 2>&1
done

# Memory per idle node: what one more node costs, from one size to the
# next (the process's fixed part drops out), as scripts/vs-slurm.sh
# measures it for 100 and 360 nodes.
declare -A pss
sizes=(100 360 1000 10000)
for n in "${sizes[@]}"; do
  "$bin/clemu-slurm" up --nodes "$n" --dir "$tmp/clemu-m$n" > /dev/null 2>&1
  sleep 1
  pss[$n]=$(pss_kib "$(cat "$tmp/clemu-m$n/controller.pid")")
  "$bin/clemu-slurm" down --dir "$tmp/clemu-m$n" >/dev/null 2>&1
done
for i in 1 2 3; do
  a=${sizes[$((i - 1))]} b=${sizes[$i]}
  echo "memory: controller PSS ${pss[$a]} KiB with $a idle nodes, ${pss[$b]} KiB with $b: $(printf %.2f "$(echo "(${pss[$b]} - ${pss[$a]}) / ($b - $a)" | bc -l)") KiB per idle node"
done
