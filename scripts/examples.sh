#!/usr/bin/env bash
# Every example of README.md and docs/*.md, run as written, then checked
# against what the text around it says it does.
#
#   scripts/examples.sh [--keep]
#
# 1. Every relative link in README.md and docs/*.md must resolve.
# 2. The ```sh blocks of README.md, then of docs/*.md (in name order), run
#    one after the other in one bash session from the repository's root,
#    as a reader would type them (variables and PATH carry over), each
#    command checked (set -e). A block preceded by a line
#    `<!-- scripts/examples.sh leaves this block to .ci/run ... -->` is left
#    to .ci/run, which runs it as written (the test suite, not twice).
# 3. What the examples left is checked: every job's record, suspensions of
#    the lengths the commands asked for, the metrics of the right jobs.
#
# It writes where the examples say (results/, demo.rec, ...), so it runs
# only on a clean checkout, and removes what the examples wrote when it is
# done (--keep leaves it). CI runs it on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
keep=0
[ "${1:-}" = --keep ] && keep=1
fail() { echo "examples: FAIL: $*" >&2; exit 1; }

# 1. Links.
python3 - <<'PY' || exit 1
import glob, os, re, sys
bad = []
for f in ["README.md"] + sorted(glob.glob("docs/*.md")):
    text = open(f).read()
    # Links outside code: [text](target), without the #anchor.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if "://" in target or target.startswith(("mailto:", "#")):
            continue
        path = target.split("#")[0]
        if not os.path.exists(os.path.join(os.path.dirname(f), path)):
            bad.append(f"{f}: link to {target}, which does not exist")
for b in bad:
    print(f"examples: FAIL: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo "examples: every relative link resolves"

# What is in the checkout before: the examples' outputs are what is new.
before=$(git status --porcelain --ignored --untracked-files=normal | sed 's/^...//' | sort)
strays=$(printf '%s\n' "$before" | grep -vE '^(target|fuzz/target)/?$' | grep -v '^$' || true)
[ -z "$strays" ] || fail "the checkout is not clean (examples write into it): $(echo $strays); run this on a fresh clone"

# The state directories clusters started from the configs make by default
# (per user, per config file, under $TMPDIR): those that are new are the
# examples' too.
states=${TMPDIR:-/tmp}/clemu-$(id -u)
states_before=$(ls -d "$states"/* 2>/dev/null | sort || true)
work=$(mktemp -d -t clemu-examples-XXXXXX)
cleanup() {
  # A block that failed may have left its cluster running.
  if command -v controller >/dev/null 2>&1 || [ -x target/x86_64-unknown-linux-gnu/release/controller ]; then
    PATH=$root/target/x86_64-unknown-linux-gnu/release:$PATH \
      controller --config configs/demo.toml shutdown >/dev/null 2>&1 || true
  fi
  if [ "$keep" = 0 ]; then
    after=$(git status --porcelain --ignored --untracked-files=normal | sed 's/^...//' | sort)
    comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | while read -r p; do
      [ -n "$p" ] && rm -rf -- "$p"
    done
    comm -13 <(printf '%s\n' "$states_before") <(ls -d "$states"/* 2>/dev/null | sort) | while read -r p; do
      [ -n "$p" ] && rm -rf -- "$p"
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# 2. The blocks, as one script: each announced with where it comes from.
python3 - "$work/examples.sh" <<'PY'
import glob, shlex, sys
out = ["set -euo pipefail"]
count = 0
for f in ["README.md"] + sorted(glob.glob("docs/*.md")):
    lines = open(f).read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            left = i > 0 and "scripts/examples.sh leaves this block" in lines[i - 1]
            if not left:
                where = f"{f}:{start + 1}"
                out.append(f"echo {shlex.quote('examples: == ' + where)} >&2")
                out.append(f"EXAMPLE={shlex.quote(where)}")
                out.append("EXAMPLE_T0=$SECONDS")
                out.extend(lines[start:j])
                out.append(f"echo \"examples: {where} took $((SECONDS - EXAMPLE_T0)) s\" >&2")
                count += 1
            i = j
        i += 1
out.append(f"echo 'examples: ran {count} blocks' >&2")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
trap 'echo "examples: FAIL: a command of the block at ${EXAMPLE:-?} failed" >&2' ERR
EXAMPLE=
# shellcheck disable=SC1091
source "$work/examples.sh"
trap - ERR

# 3. What they left.
python3 - <<'PY'
import json, subprocess, sys

def fail(msg):
    print(f"examples: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)

def dump(path):
    out = subprocess.run(["calcmets", "dump", path], capture_output=True, text=True, check=True)
    return [json.loads(l) for l in out.stdout.splitlines()]

def metrics(*args):
    out = subprocess.run(["calcmets", "--format", "json", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)

def near(what, got, want, tol):
    if abs(got - want) > tol:
        fail(f"{what}: {got:.3f}, expected {want} ± {tol}")

# Quick start: two finished runs of all 200 jobs, and their charts.
for run in ("results/load-100", "results/load-150"):
    m = json.load(open(f"{run}/manifest.json"))
    if m["status"] != "completed" or m["counts"].get("completed") != 200:
        fail(f"{run}: {m['status']}, counts {m['counts']}")
    if metrics(run)["jobs"] != 200:
        fail(f"{run}: metrics not of 200 jobs")
import glob
if not glob.glob("results/plots/*.svg"):
    fail("calcmets plot drew no chart in results/plots")
# The README's figures still say what calcmets plot draws.
if subprocess.run(["scripts/readme-figures.sh", "--check", "results/plots"]).returncode != 0:
    fail("the README's figures drifted from what calcmets plot draws")

# A cluster by hand: four completed jobs, the second suspended for 2 s.
recs = dump("demo.rec")
ids = [int(l) for l in open("ids").read().split()]
if sorted(r["id"] for r in recs) != sorted(ids) or any(r["status"] != "completed" for r in recs):
    fail(f"demo.rec: {[(r['id'], r['status']) for r in recs]}, expected jobs {ids} completed")
for r in recs:
    susp = r["suspensions"]
    if r["id"] == ids[1]:
        if len(susp) != 1:
            fail(f"demo.rec: job {r['id']} has {len(susp)} suspensions, expected 1")
        near(f"job {r['id']} suspended for", susp[0][1] - susp[0][0], 2.0, 0.5)
    elif susp:
        fail(f"demo.rec: job {r['id']} was suspended")
m = metrics("--cores", "256", "demo.rec")
if (m["jobs"], m["suspended_jobs"]) != (4, 1):
    fail(f"calcmets demo.rec: {m['jobs']} jobs, {m['suspended_jobs']} suspended; expected 4, 1")

# Slurm's commands (README): each task of the array wrote its line, and
# the job that waited for the whole array gathered all four.
lines = open("slurm-demo/all.txt").read().splitlines()
if sorted(l.split(" of ")[0] for l in lines) != [f"task {i}" for i in range(1, 5)]:
    fail(f"slurm-demo/all.txt: {lines}, expected a line from each of tasks 1-4")

# srun outside a job (docs/slurm.md): a line from each of its four
# tasks, labelled; the step's exit status is srun's.
ranks = open("ranks.txt").read().splitlines()
if ranks != [f"{i}: {i} of 4 in sh" for i in range(4)]:
    fail(f"ranks.txt: {ranks}, expected tasks 0-3 of 4 in job sh")
if open("said.txt").read() != "srun said 3\n":
    fail(f"said.txt: {open('said.txt').read()!r}, expected srun said 3")

# Preemption (README): the first batch job was preempted, the other runs
# on, the urgent one runs.
states = sorted(l.split()[1:3] for l in open("preempted.txt").read().splitlines()[1:])
if states != [["batch", "PR"], ["batch", "R"], ["urgent", "R"]]:
    fail(f"preempted.txt: {states}, expected one batch job PR, one R, the urgent one R")

# A job by hand: 10 s of run time, one suspension of 3 s from its start.
(r,) = dump("jobs.rec")
if len(r["suspensions"]) != 1:
    fail(f"jobs.rec: {len(r['suspensions'])} suspensions, expected the one sent")
s, e = r["suspensions"][0]
near("jobs.rec: suspended for", e - s, 3.0, 0.3)
near("jobs.rec: suspended after the start by", s - r["start"], 0.0, 0.3)
near("jobs.rec: run time", r["end"] - r["start"] - (e - s), 10.0, 0.1)

# Policies that suspend, emulated and simulated, here and in policies.md:
# three replicas a side of the gang replay, a run of the EASY one.
for d in ("emulated", "simulated", "gang/emulated", "gang/simulated"):
    for r in ("r01", "r02", "r03"):
        m = json.load(open(f"{d}/shrink-050/{r}/manifest.json"))
        if m["status"] != "completed" or m["replica"]["of"] != 3:
            fail(f"{d}/{r}: {m['status']}, replica {m.get('replica')}")
for d in ("easy/emulated", "easy/simulated"):
    m = json.load(open(f"{d}/shrink-050/manifest.json"))
    if m["status"] != "completed":
        fail(f"{d}: {m['status']}")
if metrics("emulated/shrink-050")["mean"]["suspensions"] == 0:
    fail("the gang replay suspended no job")

# Batsim schedulers (README and docs/batsim.md): every replay ran its 200
# jobs under the external scheduler, the extension suspended, and the
# exports hold every job.
for run in ("batsim-readme", "batsim-twin", "batsim-emulated", "batsim-json", "batsim-suspend"):
    m = json.load(open(f"{run}/shrink-100/manifest.json"))
    if m["status"] != "completed" or m["counts"] != {"completed": 200} or m["policy"] != "batsim":
        fail(f"{run}: {m['status']}, counts {m['counts']}, policy {m['policy']}")
    if m["scheduler"]["messages"] < 200:
        fail(f"{run}: only {m['scheduler']['messages']} messages with the scheduler")
if json.load(open("batsim-json/shrink-100/manifest.json"))["trace"]["format"] != "batsim":
    fail("batsim-json: not read as a Batsim workload")
if metrics("batsim-suspend/shrink-100")["suspensions"] == 0:
    fail("batsim-suspend: the extension suspended no job")
for export in ("batsim-evalys", "batsim-out"):
    rows = open(f"{export}/jobs.csv").read().splitlines()
    if len(rows) != 201 or not rows[0].startswith("job_id,workload_name,profile,"):
        fail(f"{export}/jobs.csv: {len(rows)} lines")

# The shipped trace: its 200 jobs, 74 of which failed (status 0).
m = metrics("--swf", "configs/workloads/kth-sp2-200.swf")
if (m["jobs"], m["skipped"]["excluded_by"]["failed"]) != (126, 74):
    fail(f"calcmets --swf on the KTH slice: {m['jobs']} jobs, {m['skipped']['excluded_by']}")
print("examples: every example did what its text says", file=sys.stderr)
PY
