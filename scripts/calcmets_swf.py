#!/usr/bin/env python3
"""A straightforward Python implementation of `calcmets --swf`.

The baseline that scripts/bench-calcmets.sh times against calcmets, and an
independent check of its arithmetic: the same metric definitions (docs/design.md,
"Metric definitions", SWF rules), written the obvious way, printed as the
same JSON object as `calcmets --swf TRACE --format json`.

usage: scripts/calcmets_swf.py TRACE [--cores N] [--tau S] [--status completed|all]
"""
import argparse
import gzip
import json
import math
import sys


def nearest_rank(sorted_values, q):
    if not sorted_values:
        return None
    k = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[k - 1]


def summary(values):
    if not values:
        return {"mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    values.sort()
    return {
        "mean": sum(values) / len(values),
        "p50": nearest_rank(values, 0.50),
        "p95": nearest_rank(values, 0.95),
        "p99": nearest_rank(values, 0.99),
        "max": values[-1],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--cores", type=int)
    ap.add_argument("--tau", type=float, default=10.0)
    ap.add_argument("--status", choices=["completed", "all"], default="completed")
    args = ap.parse_args()

    opener = gzip.open if args.trace.endswith(".gz") else open
    header = {}
    waits, responses, slowdowns, bslds = [], [], [], []
    area = area_resp = 0.0
    t0, t1 = math.inf, -math.inf
    excluded = {k: 0 for k in ("cancelled", "failed", "timeout", "other_status",
                               "no_run_time", "no_cores", "not_in_run")}
    cancelled = {"jobs": 0, "before_start": 0, "while_running": 0}
    with opener(args.trace, "rt") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if value:
                    header[key.strip()] = value.strip()
                continue
            fields = [float(x) for x in line.split()]
            if len(fields) != 18:
                continue
            submit, wait, run, alloc, req = fields[1], fields[2], fields[3], fields[4], fields[7]
            status = int(fields[10])
            if status in (2, 3, 4):
                continue
            cores = alloc if alloc >= 0 else req
            if wait < 0:
                wait = 0.0
            if status == 5:
                cancelled["jobs"] += 1
                cancelled["while_running" if run > 0 else "before_start"] += 1
            ok = status in (1, -1) or args.status == "all"
            if not ok or run <= 0 or cores <= 0:
                if not ok:
                    why = {0: "failed", 5: "cancelled"}.get(status, "other_status")
                elif run <= 0:
                    why = "no_run_time"
                else:
                    why = "no_cores"
                excluded[why] += 1
                continue
            response = wait + run
            waits.append(wait)
            responses.append(response)
            slowdowns.append(response / run)
            bslds.append(max(1.0, response / max(run, args.tau)))
            area += cores * run
            area_resp += cores * response
            t0 = min(t0, submit)
            t1 = max(t1, submit + response)

    cores = args.cores or int(header.get("MaxProcs", "0").split()[0]) or int(header.get("MaxNodes", "0").split()[0])
    if not cores:
        sys.exit("calcmets_swf: no core count: give --cores or a MaxProcs/MaxNodes header")
    n = len(waits)
    out = {
        "clock": "trace",
        "jobs": n,
        "cores": cores,
        "tau": args.tau,
        "window": [t0, t1] if n else None,
        "makespan": t1 - t0 if n else None,
        "wait": summary(waits),
        "response": summary(responses),
        "slowdown": summary(slowdowns),
        "bounded_slowdown": summary(bslds),
        "weighted_slowdown": area_resp / area if n else None,
        "utilization": area / (cores * (t1 - t0)) if n and t1 > t0 else None,
        "suspended_jobs": 0,
        "suspensions": 0,
        "suspended_time": 0.0,
        "cancelled": cancelled,
        "skipped": {"corrupt": 0, "torn": 0, "unsupported": 0,
                    "excluded": sum(excluded.values()), "excluded_by": excluded},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
