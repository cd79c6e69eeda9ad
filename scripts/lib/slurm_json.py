"""A Slurm command's --json document, one key per line, for
scripts/slurm-face.sh to compare side by side: the jobs (or nodes) in id
(or name) order, each instant (a Unix time) written `T` and each priority
other than 0 written `P`, since both depend on when each side ran the
job set (docs/slurm.md), and jobs over left out (the reference Slurm
forgets them after 2 s: docs/slurm.md). A node's host (address, name,
port) is written `H`, and what the host measures of itself (its load,
its free memory) `M`: the reference's nodes are slurmds on this host, a
virtual node has no load, and its free memory is what no job holds.
Nothing else is changed. The job ids are left to slurm-face's own
normalisation."""

import json
import sys

OVER = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
        "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


HOST = {"address", "hostname", "port"}
MEASURED = {"cpu_load", "free_memory"}


def norm(value, key=None):
    if key in HOST:
        return "H"
    if key in MEASURED:
        return "M"
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
