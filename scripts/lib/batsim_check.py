#!/usr/bin/env python3
"""Checks of scripts/batsim-check.sh on results directories (runworkload's)
and their Batsim export (calcmets export --format batsim).

    batsim_check.py once RUN N            every job completed exactly once
    batsim_check.py cores RUN TOL         no two jobs ran on one core at once
    batsim_check.py starts RUN_A RUN_B    how many jobs started at the same
                                          instant in both (prints it; --all
                                          fails unless every one did)
    batsim_check.py evalys RUN EXPORT     evalys's utilization and mean
                                          waiting time against calcmets'
"""
import csv
import json
import subprocess
import sys


def fail(msg):
    sys.exit(f"batsim-check: FAIL: {msg}")


def records(run):
    out = subprocess.run(["calcmets", "dump", f"{run}/records"], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def once(run, n):
    n = int(n)
    m = json.load(open(f"{run}/manifest.json"))
    if m["status"] != "completed" or m["counts"] != {"completed": n}:
        fail(f"{run}: status {m['status']}, counts {m['counts']} ({m.get('error')})")
    ids = [r["id"] for r in records(run)]
    if len(ids) != n or len(set(ids)) != n:
        fail(f"{run}: {len(ids)} records of {len(set(ids))} jobs, not one each of {n}")
    if any(r["status"] != "completed" for r in records(run)):
        fail(f"{run}: a record is not of a completed job")


def cores(run, tol):
    """One-core nodes (configs/batsim.toml): a job's nodes are its cores.
    The intervals in which its process ran (its record, suspensions taken
    out) never overlap another's on one node by more than tol seconds (the
    time a start or an end takes to be known, in the emulation; 0 in the
    twin). An interval that ends at a suspension may overlap by as much
    more as the slowest suspension of the run took to land (the manifest's
    measured `latency.suspend`, from the decision to the process noting
    it): the controller gives the cores away when it decides, and the
    process counts itself running until the signal reaches it."""
    tol = float(tol)
    m = json.load(open(f"{run}/manifest.json"))
    if any(g["cpus"] != 1 for g in m["layout"]):
        fail(f"{run}: the check needs one-core nodes")
    landing = ((m.get("latency") or {}).get("suspend") or {}).get("max_ms", 0) / 1e3
    nodes = {}
    for row in csv.DictReader(open(f"{run}/jobs.csv")):
        nodes[int(row["job_id"])] = expand(row["nodes"])
    by_node = {}
    for r in records(run):
        t, spans = r["start"], []
        for s, e in r["suspensions"]:
            spans.append((t, s, True))
            t = e
        spans.append((t, r["end"], False))
        for n in nodes[r["id"]]:
            by_node.setdefault(n, []).extend((a, b, r["id"], susp) for a, b, susp in spans)
    worst = 0.0
    for n, spans in by_node.items():
        spans.sort()
        end, who, by_suspension = float("-inf"), None, False
        for a, b, j, susp in spans:
            allowed = tol + (landing if by_suspension else 0)
            if a < end - allowed:
                fail(f"{run}: jobs {who} and {j} ran on {n} at once "
                     f"({end - a:.6f} s of overlap, {allowed * 1e3:.3f} ms allowed)")
            worst = max(worst, end - a)
            if b > end:
                end, who, by_suspension = b, j, susp
    print(f"batsim-check: {run}: no core held by two running jobs "
          f"(largest overlap {max(worst, 0) * 1e3:.3f} ms, tolerance {tol * 1e3:.0f} ms, "
          f"and {landing * 1e3:.3f} ms more after a suspension: the slowest to land)")


def expand(folded):
    """The nodes of a folded list such as vn[001-003,007],x1."""
    out, i = [], 0
    parts, depth, cur = [], 0, ""
    for ch in folded:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "[") - (ch == "]")
        cur += ch
    if cur:
        parts.append(cur)
    for p in parts:
        if "[" not in p:
            out.append(p)
            continue
        prefix, rest = p.split("[", 1)
        body, suffix = rest.split("]", 1)
        for r in body.split(","):
            a, _, b = r.partition("-")
            for k in range(int(a), int(b or a) + 1):
                out.append(f"{prefix}{k:0{len(a)}d}{suffix}")
    return out


def starts(a, b, *flags):
    sa = {r["id"]: r["start"] for r in records(a)}
    sb = {r["id"]: r["start"] for r in records(b)}
    same = sorted(i for i in sa if i in sb and abs(sa[i] - sb[i]) < 1e-6)
    differ = sorted(i for i in sa if i not in same)
    first = ""
    if differ:
        # The earliest in time: where the two schedules part.
        t, i = min((min(sa[i], sb.get(i, sa[i])), i) for i in differ)
        first = (f"; they part at job {i}, started at {sa[i] - min(sa.values()):.0f} s "
                 f"in the first and {sb.get(i, float('nan')) - min(sb.values()):.0f} s "
                 f"in the second (seconds after each run's first start)")
    print(f"batsim-check: {len(same)} of {len(sa)} jobs start at the same instant "
          f"in {a} and {b}{first}")
    if "--all" in flags and differ:
        fail(f"{len(differ)} jobs start at other instants")


def evalys(run, export):
    from evalys.jobset import JobSet
    m = json.load(open(f"{run}/metrics.json"))
    js = JobSet.from_csv(f"{export}/jobs.csv", resource_bounds=(0, m["cores"] - 1))
    load = js.utilisation
    first, last = load.index.min(), load.index.max()
    # evalys averages load from the first start to the last end; calcmets
    # over [first submission, last end], and the export's time 0 is the
    # first submission.
    util = js.mean_utilisation() * (last - first) / last / js.MaxProcs
    wait = js.df.waiting_time.mean()
    for name, ours, theirs in (("utilization", m["utilization"], util),
                               ("mean wait", m["wait"]["mean"], wait)):
        if abs(ours - theirs) > 1e-5 * max(1.0, abs(ours)):
            fail(f"{run}: evalys's {name} {theirs} against calcmets' {ours}")
    print(f"batsim-check: {run}: evalys agrees with calcmets: utilization "
          f"{util:.6f}, mean wait {wait:.6f} s")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"once": once, "cores": cores, "starts": starts, "evalys": evalys}[cmd](*args)
