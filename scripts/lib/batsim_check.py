#!/usr/bin/env python3
"""Checks of scripts/batsim-check.sh on results directories (runworkload's)
and their Batsim export (calcmets export --format batsim).

    batsim_check.py once RUN N            every job completed exactly once
    batsim_check.py cores RUN TOL         no two jobs ran on one core at once
    batsim_check.py selftest              the rule of `cores` on made-up cases
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
    twin). Where one of two stopped at a suspension, the other may start
    as much before that stop as the slowest suspension of the run took to
    land (the manifest's measured `latency.suspend`, from the decision to
    the process noting it): the controller gives the cores away when it
    decides, and the process counts itself running until the signal
    reaches it ([`overlaps`])."""
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
        w, bad = overlaps(spans, tol, landing)
        if bad:
            who, j, overlap, allowed = bad
            fail(f"{run}: jobs {who} and {j} ran on {n} at once "
                 f"({overlap:.6f} s of overlap, {allowed * 1e3:.3f} ms allowed)")
        worst = max(worst, w)
    print(f"batsim-check: {run}: no core held by two running jobs "
          f"(largest overlap {max(worst, 0) * 1e3:.3f} ms, tolerance {tol * 1e3:.0f} ms, "
          f"and {landing * 1e3:.3f} ms more after a suspension: the slowest to land)")


def overlaps(spans, tol, landing):
    """The largest overlap of two jobs' spans (start, stop, job, stopped by
    a suspension) on one core, and the first pair not allowed (who, job,
    overlap, allowed), or None. Two spans may overlap by tol; and when
    one of them stopped at a suspension, the other may start as much as
    a suspension takes to land (landing) before that stop: the
    controller gave the core away when it decided the suspension, before
    the other started, and the suspended process ran until the signal
    reached it, whichever of the two processes came up first (a job
    suspended as it starts may reach its process after the job given its
    core)."""
    worst, live = 0.0, []
    for a, b, j, susp in sorted(spans):
        # Sorted by start: a span over by `a` overlaps nothing from here.
        live = [s for s in live if s[1] > a]
        for la, lb, who, lsusp in live:
            if who == j:
                continue
            overlap = min(lb, b) - a
            # How long the other ran before each suspended one stopped.
            landed = [stop - other for stop, other, by in ((lb, a, lsusp), (b, la, susp)) if by]
            allowed = tol + (landing if landed else 0)
            if overlap > tol and not any(x <= tol + landing for x in landed):
                return worst, (who, j, overlap, allowed)
            worst = max(worst, overlap)
        live.append((a, b, j, susp))
    return worst, None


def selftest():
    """The overlap rule on made-up spans (seconds), against what it is for."""
    ms = 1e-3

    def allowed(spans, tol, landing):
        return overlaps(spans, tol, landing)[1] is None

    # Job 1's suspension lands 2 ms after job 2 took its core: allowed by
    # the landing, not without it.
    late = [(0, 3 * ms, 1, True), (1 * ms, 30 * ms, 2, False)]
    assert allowed(late, 0.5 * ms, 4 * ms) and not allowed(late, 0.5 * ms, 0)
    # Job 1 is suspended as it starts; its process comes up 0.2 ms after
    # job 2's, given its core, and runs 0.04 ms before the signal lands.
    first = [(0, 19 * ms, 2, False), (0.2 * ms, 0.24 * ms, 1, True), (20 * ms, 40 * ms, 1, False)]
    assert allowed(first, 0.01 * ms, 4 * ms) and not allowed(first, 0.01 * ms, 0)
    # Job 2 put on the core 50 ms into job 1's run, then suspended: no
    # landing explains it.
    assert not allowed([(0, 100 * ms, 1, False), (50 * ms, 53 * ms, 2, True)], 1 * ms, 4 * ms)
    # Job 1's suspension decided at 5 ms lands at 20; job 2 ran from 8 to 15.
    assert allowed([(0, 20 * ms, 1, True), (8 * ms, 15 * ms, 2, False)], 5 * ms, 15 * ms)
    # Job 1 resumed 18.8 ms before job 2 ended: never allowed.
    bad = overlaps([(0, 19 * ms, 2, False), (0.2 * ms, 40 * ms, 1, False)], 5 * ms, 4 * ms)[1]
    assert bad and bad[:2] == (2, 1) and abs(bad[2] - 18.8 * ms) < 1e-9, bad
    # A span inside a longer one counts its own length, not the longer one's.
    w, bad = overlaps([(0, 100 * ms, 1, False), (10 * ms, 12 * ms, 2, False)], 5 * ms, 0)
    assert bad is None and abs(w - 2 * ms) < 1e-9
    print("batsim-check: the overlap rule holds on its own cases")


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
    {"once": once, "cores": cores, "starts": starts, "evalys": evalys,
     "selftest": selftest}[cmd](*args)
