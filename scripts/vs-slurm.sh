#!/usr/bin/env bash
# clemu against real Slurm on this machine, side by side, for clusters of
# 10, 100 and 360 emulated nodes of 16 cores (root; Slurm from
# scripts/slurm-local.sh).
#
#   scripts/vs-slurm.sh [NODES...]        (default 10 100 360)
#
# For each size, on each system:
# - bring-up: from starting the daemons to every node idle (Slurm: munged,
#   slurmctld and N slurmd; clemu: one controller hosting N nodes, until
#   `controller nodes` shows them idle);
# - memory per emulated node: PSS (from smaps_rollup) of all the system's
#   daemons, idle, over N;
# - throughput: JOBS (default 300) zero-length one-core sigsleep jobs, from
#   submission to the last one ended (Slurm: one job array, done when squeue
#   is empty; clemu: one request, done when the controller counts them
#   ended), each leaving its record;
# - metrics: the same 30 jobs of the bundled KTH slice replayed on both
#   (`runworkload --backend slurm` and the default), set side by side by
#   calcmets.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 100 360)
jobs=${JOBS:-300}
cargo build --release -q
cargo build --release -q -p controller --example submit_wait
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/controller" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t vs-slurm-XXXXXX)
export SLURM_LOCAL_DIR=$tmp/slurm
cpid=
cleanup() {
  [ -z "$cpid" ] || kill -9 "$cpid" 2>/dev/null || true
  scripts/slurm-local.sh down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
pss_kib() { # pids...
  local total=0 p v
  for p in "$@"; do
    v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    total=$((total + ${v:-0}))
  done
  echo "$total"
}

slurm_side() { # nodes -> "up_s pss_kib jobs_per_s"
  local n=$1 s e up pss rate
  s=$(now)
  scripts/slurm-local.sh up "$n" 16 > "$tmp/slurm-up.log"
  e=$(now)
  up=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }')
  export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf
  sleep 2
  # shellcheck disable=SC2046
  pss=$(pss_kib $(cat "$SLURM_LOCAL_DIR"/run/*.pid))
  local log=$tmp/slurm-$n.rec
  s=$(now)
  sbatch -Q --array="1-$jobs" -n 1 -o /dev/null \
    --wrap "exec $bin/sigsleep --runtime 0 --id \$SLURM_ARRAY_TASK_ID --node \$SLURMD_NODENAME --log $log" > /dev/null
  for _ in $(seq 3000); do
    [ -z "$(squeue -h -o %i)" ] && break
    sleep 0.1
  done
  e=$(now)
  local got
  got=$("$bin/calcmets" dump "$log" | wc -l)
  [ "$got" -eq "$jobs" ] || { echo "vs-slurm: Slurm left $got records of $jobs" >&2; exit 1; }
  rate=$(awk -v s="$s" -v e="$e" -v n="$jobs" 'BEGIN { printf "%.1f", n / (e - s) }')
  # The same slice through sbatch, for the metrics.
  cat > "$tmp/mirror.toml" <<EOF
[agents]
sigsleep = "$bin/sigsleep"
[[nodes]]
names = "node[1-$n]"
cpus = 16
EOF
  "$bin/runworkload" --backend slurm --config "$tmp/mirror.toml" \
    --workload configs/workloads/kth-sp2-200.swf --jobs 30 --cores-per-proc 2 \
    --speedup 2000 --out "$tmp/runs-$n/slurm" -q > "$tmp/slurm-replay.log" 2>&1 \
    || { cat "$tmp/slurm-replay.log" >&2; exit 1; }
  scripts/slurm-local.sh down > /dev/null
  unset SLURM_CONF
  echo "$up $pss $rate"
}

clemu_side() { # nodes -> "up_s pss_kib jobs_per_s"
  local n=$1 s e up pss rate dir=$tmp/clemu-$n
  mkdir -p "$dir"
  cat > "$dir/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$dir/state"
schedule_interval_s = 0.001

[agents]
local = true
sigsleep = "$bin/sigsleep"

[[nodes]]
names = "node[1-$n]"
cpus = 16
memory = "64G"
EOF
  local ctl=("$bin/controller" --config "$dir/cluster.toml")
  s=$(now)
  "${ctl[@]}" serve > "$dir/serve.log" 2>&1 &
  cpid=$!
  for _ in $(seq 1000); do
    [ -s "$dir/state/address" ] && "${ctl[@]}" stats --format json 2>/dev/null \
      | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['nodes']['idle'] == $n else 1)" 2>/dev/null \
      && break
    sleep 0.01
  done
  e=$(now)
  up=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }')
  sleep 2
  pss=$(pss_kib "$cpid")
  rate=$("$bin/examples/submit_wait" "$dir/cluster.toml" "$jobs")
  "${ctl[@]}" shutdown > /dev/null 2>&1 || true
  wait "$cpid" 2>/dev/null || true
  cpid=
  "$bin/runworkload" --config "$dir/cluster.toml" \
    --workload configs/workloads/kth-sp2-200.swf --jobs 30 --cores-per-proc 2 \
    --speedup 2000 --out "$tmp/runs-$n/clemu" -q > "$tmp/clemu-replay.log" 2>&1 \
    || { cat "$tmp/clemu-replay.log" >&2; exit 1; }
  echo "$up $pss $rate"
}

echo "| nodes | system | bring-up (s) | PSS of its daemons (MiB) | per node (KiB) | $jobs zero-length jobs (jobs/s) |"
echo "|---:|---|---:|---:|---:|---:|"
summary=()
s_mem=()
c_mem=()
for n in "${sizes[@]}"; do
  read -r s_up s_pss s_rate < <(slurm_side "$n")
  read -r c_up c_pss c_rate < <(clemu_side "$n")
  s_mem+=("$s_pss")
  c_mem+=("$c_pss")
  awk -v n="$n" -v u="$s_up" -v p="$s_pss" -v r="$s_rate" \
    'BEGIN { printf "| %d | Slurm 22.05 | %.2f | %.1f | %.1f | %.1f |\n", n, u, p / 1024, p / n, r }'
  awk -v n="$n" -v u="$c_up" -v p="$c_pss" -v r="$c_rate" \
    'BEGIN { printf "| %d | clemu | %.2f | %.1f | %.1f | %.1f |\n", n, u, p / 1024, p / n, r }'
  summary+=("$(awk -v n="$n" -v su="$s_up" -v cu="$c_up" -v sp="$s_pss" -v cp="$c_pss" -v sr="$s_rate" -v cr="$c_rate" \
    'BEGIN { printf "| %d | %.0fx | %.1fx | %.1fx |", n, sp / cp, su / cu, cr / sr }')")
done
echo
echo "| nodes | Slurm memory per node / clemu's | Slurm bring-up / clemu's | clemu throughput / Slurm's |"
echo "|---:|---:|---:|---:|"
printf '%s\n' "${summary[@]}"
# What one more node costs, from one size to the next: the fixed part of
# each system (clemu's one process and its program text, Slurm's
# slurmctld and munged) drops out.
if [ ${#sizes[@]} -gt 1 ]; then
  echo
  echo "| nodes | Slurm per added node (KiB) | clemu per added node (KiB) | Slurm / clemu |"
  echo "|---|---:|---:|---:|"
  for ((i = 1; i < ${#sizes[@]}; i++)); do
    awk -v a="${sizes[i - 1]}" -v b="${sizes[i]}" -v s0="${s_mem[i - 1]}" -v s1="${s_mem[i]}" \
      -v c0="${c_mem[i - 1]}" -v c1="${c_mem[i]}" 'BEGIN {
        sd = (s1 - s0) / (b - a); cd = (c1 - c0) / (b - a)
        ratio = (cd > 0) ? sprintf("%.0fx", sd / cd) : "-"
        printf "| %d to %d | %.1f | %.2f | %s |\n", a, b, sd, cd, ratio
      }'
  done
fi
for n in "${sizes[@]}"; do
  echo
  echo "Metrics of the same 30 KTH jobs on $n nodes (calcmets, clemu then Slurm):"
  echo
  echo '```'
  for side in clemu slurm; do
    python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
m["label"] = sys.argv[2]
json.dump(m, open(sys.argv[1], "w"), indent=1)' "$tmp/runs-$n/$side/shrink-100/manifest.json" "$side"
  done
  "$bin/calcmets" "$tmp/runs-$n/clemu/shrink-100" "$tmp/runs-$n/slurm/shrink-100"
  echo '```'
done
