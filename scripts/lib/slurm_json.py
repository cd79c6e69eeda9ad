"""A Slurm command's --json document, one key per line, for
scripts/slurm-face.sh to compare side by side: the jobs (or nodes) in id
(or name) order, each instant (a Unix time) written `T` and each priority
other than 0 written `P`, since both depend on when each side ran the
job set (docs/slurm.md), and jobs over left out (the reference Slurm
forgets them after 2 s: docs/slurm.md). A node's host (address, name,
port) is written `H`, and what the host measures of itself (its load,
its free memory) `M`, as is CPU time: the reference's nodes are slurmds
on this host, which gather no usage; a virtual node has no load, and its
free memory is what no job holds. Elapsed seconds are written `E`, as
slurm-face writes them in its tables. Two things of sacct's jobs are
left as Slurm and clemu share them: which of Slurm's schedulers started
a job (`STARTED_ON_BACKFILL` or `_SCHEDULE`, written `STARTED_ON`), and
memory among the TRES a job was allocated (the reference schedules
cores only; clemu schedules memory too). Nothing else is changed. The job ids are left to slurm-face's own
normalisation."""

import json
import sys

OVER = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
        "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


HOST = {"address", "hostname", "port"}
MEASURED = {"cpu_load", "free_memory"}
# CPU time, which the reference does not gather (docs/slurm.md).
CPU_TIME = {"system", "total", "user"}


def norm(value, key=None):
    if key in HOST:
        return "H"
    if key in MEASURED:
        return "M"
    if key in CPU_TIME and isinstance(value, dict) and "microseconds" in value:
        return "M"
    if key == "elapsed":
        return "E"
    if key == "flags" and isinstance(value, list):
        return ["STARTED_ON" if str(f).startswith("STARTED_ON_") else f for f in value]
    if key == "tres" and isinstance(value, dict) and "allocated" in value and "requested" in value:
        value = dict(value, allocated=[t for t in value["allocated"] if t.get("type") != "mem"])
    if isinstance(value, dict):
        return {k: norm(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [norm(v) for v in value]
    if key == "priority" and value:
        return "P"
    if isinstance(value, int) and not isinstance(value, bool) and value > 1_000_000_000:
        return "T"
    return value


def main():
    doc = json.load(sys.stdin)
    for key in ("meta", "errors"):
        print(key, json.dumps(doc[key]))
    for kind, order in (("jobs", "job_id"), ("nodes", "name")):
        items = [i for i in doc.get(kind, []) if i.get("job_state") not in OVER]
        for item in sorted(items, key=lambda x: x[order]):
            print(kind[:-1])
            for k, v in norm(item).items():
                print(" ", k, json.dumps(v))


main()
