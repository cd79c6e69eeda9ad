#!/usr/bin/env bash
# A published workflow tool, unmodified, on an emulated cluster: Parsl
# (PARSL_VERSION, from PyPI, in a virtual environment) runs
# examples/parsl/squares.py through its own SlurmProvider, which submits
# its worker block with sbatch, follows it with sacct and cancels it with
# scancel: clemu's commands, first on PATH after `clemu-slurm up`.
# Checks every task's result, that one block job ran them on the
# cluster's node, that Parsl cancelled it at the end, and that no worker
# process is left.
#
#   scripts/parsl-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=${PARSL_VERSION:-2025.11.10}
cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$root/target/$host/debug
[ -x "$bin/clemu-slurm" ] || bin=$root/target/debug
fail() { echo "parsl-check: FAIL: $*" >&2; exit 1; }

venv=$root/target/parsl-$version
if [ ! -x "$venv/bin/process_worker_pool.py" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "parsl==$version"
fi
work=$(mktemp -d -t clemu-parsl-XXXXXX)
trap '"$bin/clemu-slurm" down --dir "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$bin/clemu-slurm" up --nodes 8 --cpus 4 --memory 1000M --dir "$work/cluster" > "$work/cluster.env"
# shellcheck disable=SC1091
source "$work/cluster.env"
export PATH=$venv/bin:$PATH
[ "$(command -v sbatch)" = "$work/cluster/bin/sbatch" ] || fail "clemu's sbatch is not first on PATH"
cd "$work"
timeout 300 "$venv/bin/python" "$root/examples/parsl/squares.py" "$work/runinfo" > "$work/out.txt" \
  || { tail -20 "$work/runinfo"/*/parsl.log >&2 || true; fail "the workflow failed"; }
python3 - "$work/out.txt" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 20, f"{len(rows)} results, expected 20"
for i, (x, sq, job, node) in enumerate(rows):
    assert (int(x), int(sq)) == (i, i * i), rows[i]
    assert node.startswith("node"), rows[i]
jobs = {r[2] for r in rows}
assert len(jobs) == 1, f"tasks ran in jobs {jobs}, expected Parsl's one block"
print(f"parsl-check: 20 tasks, every square right, all in Slurm job {jobs.pop()} on {rows[0][3]}")
EOF
job=$(awk '{print $3; exit}' "$work/out.txt")
# Parsl cancelled its block when the workflow ended.
state=$(sacct -X -P -n -j "$job" --format JobName,State)
case "$state" in
  parsl.*"|CANCELLED by "*) ;;
  *) fail "job $job: $state, expected Parsl's block, cancelled" ;;
esac
for _ in $(seq 100); do
  pgrep -f "$venv/bin/process_worker_pool.py" >/dev/null || break
  sleep 0.1
done
! pgrep -f "$venv/bin/process_worker_pool.py" >/dev/null || fail "a Parsl worker is left"
echo "parsl-check: Parsl $version's SlurmProvider ran on clemu; its block was cancelled, nothing left"
