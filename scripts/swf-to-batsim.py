#!/usr/bin/env python3
"""An SWF trace as a Batsim workload (JSON), job for job as runworkload
replays the SWF itself: a job asks for its allocated processors (else its
requested ones) as resources, runs a `delay` profile of its run time, and
has its requested time as wall time, raised to its run time. Partial lines
(status 2, 3, 4) and jobs of unknown run time or size are left out, as
runworkload leaves them out.

    scripts/swf-to-batsim.py configs/workloads/kth-sp2-200.swf > kth-sp2-200.json
"""
import gzip
import json
import sys


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    jobs, delays, max_procs = [], {}, None
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if key.strip().lower() == "maxprocs" and value.split():
                    max_procs = int(value.split()[0])
                continue
            if not line:
                continue
            v = [float(x) for x in line.split()]
            v += [-1.0] * (18 - len(v))
            job, submit, run, alloc, req_procs, req_time, status = (
                v[0], v[1], v[3], v[4], v[7], v[8], v[10])
            if status in (2, 3, 4):
                continue
            procs = alloc if alloc >= 0 else req_procs
            if run < 0 or procs <= 0:
                continue
            profile = "delay_%s" % repr(run)
            delays[profile] = run
            j = {"id": str(int(job)), "subtime": submit, "res": int(round(procs)),
                 "profile": profile}
            if req_time >= 0:
                j["walltime"] = max(req_time, run)
            jobs.append(j)
    out = {
        "nb_res": max_procs or max(j["res"] for j in jobs),
        "jobs": jobs,
        "profiles": {p: {"type": "delay", "delay": d} for p, d in sorted(delays.items())},
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: swf-to-batsim.py TRACE.swf[.gz] > WORKLOAD.json")
    main(sys.argv[1])
