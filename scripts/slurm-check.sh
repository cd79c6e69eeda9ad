#!/usr/bin/env bash
# Checks scripts/slurm-local.sh on real Slurm: brings up 10 nodes of 16
# cores, runs sigsleep jobs through sbatch (one suspended and resumed with
# scontrol, Slurm's SIGTSTP, 2 s, SIGSTOP, SIGCONT), checks their records,
# replays 20 jobs of the bundled KTH slice with `runworkload --backend
# slurm`, tears the cluster down while two jobs still run and checks that
# nothing of it is left: no daemon, no job step, no job process.
# Root.
#
#   scripts/slurm-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/sigsleep" ] || bin=$PWD/target/release
export SLURM_LOCAL_DIR=$(mktemp -d -t clemu-slurm-check-XXXXXX)
trap 'scripts/slurm-local.sh down >/dev/null 2>&1 || true; rm -rf "$SLURM_LOCAL_DIR"' EXIT
fail() { echo "slurm-check: FAIL: $*" >&2; exit 1; }

scripts/slurm-local.sh up 10 16
export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf
[ "$(sinfo -h -N -t idle -o %N | wc -l)" -eq 10 ] || fail "not 10 idle nodes"
log=$SLURM_LOCAL_DIR/jobs.rec
ids=()
for i in 1 2 3 4; do
  ids+=("$(sbatch --parsable -n 1 -o /dev/null \
    --wrap "exec $bin/sigsleep --runtime 4 --id $i --node \$SLURMD_NODENAME --log $log")")
done
echo "slurm-check: submitted Slurm jobs ${ids[*]}"
# Suspend the first once its process runs; resume it 3 s later.
for _ in $(seq 100); do
  [ "$(squeue -h -j "${ids[0]}" -o %T)" = RUNNING ] && pgrep -f "sigsleep --runtime 4 --id 1 " >/dev/null && break
  sleep 0.1
done
sleep 0.5
scontrol suspend "${ids[0]}"
sleep 3
scontrol resume "${ids[0]}"
for _ in $(seq 300); do
  [ -z "$(squeue -h -o %i)" ] && break
  sleep 0.1
done
[ -z "$(squeue -h -o %i)" ] || fail "jobs still queued: $(squeue -h)"
sleep 0.5
"$bin/calcmets" dump "$log" > "$SLURM_LOCAL_DIR/records.jsonl"
python3 - "$SLURM_LOCAL_DIR/records.jsonl" <<'EOF'
import json, sys
recs = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
assert sorted(recs) == [1, 2, 3, 4], f"records of jobs {sorted(recs)}"
for r in recs.values():
    assert r["status"] == "completed", r
    assert r["node"].startswith("node"), r
    ran = r["end"] - r["start"] - sum(b - a for a, b in r["suspensions"])
    assert abs(ran - 4) < 0.05, f"job {r['id']} ran {ran} s"
s = recs[1]["suspensions"]
assert len(s) == 1, f"Slurm's TSTP, STOP, CONT must be one suspension: {s}"
assert 2.5 < s[0][1] - s[0][0] < 4.5, s
assert all(not recs[i]["suspensions"] for i in (2, 3, 4))
print(f"slurm-check: 4 records, each 4 s of run time; job 1 suspended once for {s[0][1] - s[0][0]:.2f} s")
EOF
# A replay through sbatch: every job submitted, one record each.
cat > "$SLURM_LOCAL_DIR/mirror.toml" <<EOF
[agents]
sigsleep = "$bin/sigsleep"
[[nodes]]
names = "node[1-10]"
cpus = 16
EOF
"$bin/runworkload" --backend slurm --config "$SLURM_LOCAL_DIR/mirror.toml" \
  --workload configs/workloads/kth-sp2-200.swf --jobs 20 --cores-per-proc 2 \
  --speedup 5000 --out "$SLURM_LOCAL_DIR/replay" -q > "$SLURM_LOCAL_DIR/replay.log" 2>&1 \
  || { cat "$SLURM_LOCAL_DIR/replay.log" >&2; fail "runworkload --backend slurm"; }
python3 - "$SLURM_LOCAL_DIR/replay/shrink-100" <<'EOF'
import csv, json, sys
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
assert m["backend"] == "slurm" and m["cores"] == 160, m
assert m["counts"] == {"completed": 20}, m["counts"]
rows = list(csv.DictReader(open(f"{d}/jobs.csv")))
assert len(rows) == 20 and all(int(r["slurm_id"]) > 0 for r in rows), rows[:2]
assert len({r["slurm_id"] for r in rows}) == 20
# The nodes Slurm gave each job, as its batch script noted them.
assert all(r["nodes"].startswith("node") for r in rows), [r["nodes"] for r in rows]
metrics = json.load(open(f"{d}/metrics.json"))
assert metrics["jobs"] == 20, metrics["jobs"]
print(f"slurm-check: runworkload --backend slurm replayed 20 jobs, lateness p99 {m['lateness']['p99'] * 1e3:.1f} ms")
EOF
# Down while jobs still run: their steps and processes go with it.
late=$SLURM_LOCAL_DIR/late.rec
for i in 5 6; do
  sbatch --parsable -n 1 -o /dev/null \
    --wrap "exec $bin/sigsleep --runtime 300 --id $i --log $late" > /dev/null
done
for _ in $(seq 100); do
  [ "$(pgrep -f -- "--log $late" | wc -l)" -eq 2 ] && break
  sleep 0.1
done
[ "$(pgrep -f -- "--log $late" | wc -l)" -eq 2 ] || fail "the two long jobs never ran"
pids=$(cat "$SLURM_LOCAL_DIR"/run/*.pid | tr '\n' ' ')
scripts/slurm-local.sh down
for p in $pids; do
  kill -0 "$p" 2>/dev/null && fail "daemon $p still runs after down"
done
sleep 0.5
left=$(scripts/slurm-local.sh leftovers | tr '\n' ' ')
[ -z "${left// }" ] || fail "processes of the cluster left: $left"
jobs_left=$(pgrep -f -- "--log $late" || true)
[ -z "$jobs_left" ] || fail "job processes left: $jobs_left"
echo "slurm-check: OK, $(echo $pids | wc -w) daemons started and stopped with two jobs running; nothing left"

# Slurm's suspending policies, as clemu's configs/suspend.toml has them:
# 2 nodes of 4 cores, gang time slices of 5 s, an urgent partition.
scripts/slurm-local.sh up 2 4 --suspend 5
log=$SLURM_LOCAL_DIR/suspend.rec
run_job() { # partition cores runtime id [sbatch options]
  local p=$1 c=$2 r=$3 id=$4
  shift 4
  sbatch --parsable -p "$p" -n "$c" -o /dev/null "$@" \
    --wrap "exec $bin/sigsleep --runtime $r --id $id --node \$SLURMD_NODENAME --log $log"
}
wait_running() { # slurm id
  for _ in $(seq 100); do
    [ "$(squeue -h -j "$1" -o %T)" = RUNNING ] && return 0
    sleep 0.2
  done
  fail "job $1 never ran"
}
wait_empty() {
  for _ in $(seq 600); do
    [ -z "$(squeue -h -o %i)" ] && return 0
    sleep 0.2
  done
  fail "jobs still queued: $(squeue -h)"
}
# Preemption: an urgent job suspends the batch job on its node.
low=$(run_job batch 4 12 1 -w node1)
wait_running "$low"
sleep 1
run_job urgent 4 3 2 > /dev/null
wait_empty
# Gang: two batch jobs of the whole cluster take turns.
run_job batch 8 7 3 > /dev/null
run_job batch 8 7 4 > /dev/null
wait_empty
sleep 0.5
"$bin/calcmets" dump "$log" > "$SLURM_LOCAL_DIR/suspend.jsonl"
python3 - "$SLURM_LOCAL_DIR/suspend.jsonl" <<'EOF'
import json, sys
recs = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
assert sorted(recs) == [1, 2, 3, 4], sorted(recs)
for r in recs.values():
    assert r["status"] == "completed", r
    ran = r["end"] - r["start"] - sum(b - a for a, b in r["suspensions"])
    assert abs(ran - r["runtime"]) < 0.05, f"job {r['id']} ran {ran} s"
low, urgent = recs[1], recs[2]
assert len(low["suspensions"]) == 1, f"the batch job: {low['suspensions']}"
(s, e), = low["suspensions"]
assert s <= urgent["start"] + 0.5 and abs(e - urgent["end"]) < 1.5, (low, urgent)
assert not urgent["suspensions"]
turns = [len(recs[i]["suspensions"]) for i in (3, 4)]
assert sum(turns) >= 1, f"gang jobs never took turns: {turns}"
print(f"slurm-check: preemption suspended the batch job once for {e - s:.2f} s; "
      f"gang jobs suspended {turns} times, each Slurm TSTP/STOP/CONT counted once")
EOF
pids=$(cat "$SLURM_LOCAL_DIR"/run/*.pid | tr '\n' ' ')
scripts/slurm-local.sh down
for p in $pids; do
  kill -0 "$p" 2>/dev/null && fail "daemon $p still runs after down"
done
echo "slurm-check: OK, the suspending configuration too"
