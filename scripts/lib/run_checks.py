"""What a replay through faults must show, checked from its own files:
every job of the trace is in the run and over, each completed job with
exactly one record (a killed execution leaves none), no double run seen by
the sampler (scripts/lib/double_runs.py), and no node (one core each)
holding two jobs at once, as the cluster ran them (jobs.csv) and as their
processes did (the records: one clock, all namespaces on one machine).

    python3 scripts/lib/run_checks.py TRACE RECORDS.jsonl SAMPLER.log JOBS.csv NODES.txt [--all-complete]

NODES.txt: one line per job, its id then its nodes, expanded. With
--all-complete every job must have completed; else a job may end in
another final state, which says why (node_fail, cancelled, timeout).

Shared by scripts/failover.sh and scripts/lib/chaos.py."""
import collections
import csv
import json
import sys


def check(trace, records, sampler, jobs_csv, nodes_txt, all_complete):
    """Prints what was seen; returns a list of what is wrong."""
    wrong = []
    jobs = [l for l in open(trace) if l.strip() and not l.startswith(";")]
    recs = [json.loads(l) for l in open(records)]
    doubles = [l for l in open(sampler) if l.startswith("DOUBLE")]
    rows = list(csv.DictReader(open(jobs_csv)))
    nodes = {int(l.split()[0]): l.split()[1:] for l in open(nodes_txt)}
    per_job = collections.Counter(r["id"] for r in recs)
    states = collections.Counter(r["state"] for r in rows)
    print(f"   {len(jobs)} jobs in the trace; {len(rows)} in the run: {dict(states)}; "
          f"{len(recs)} records for {len(per_job)} jobs; double runs seen: {len(doubles)}")
    if doubles:
        wrong.append(f"double runs: {doubles[:5]}")
    if len(rows) != len(jobs):
        wrong.append(f"{len(rows)} jobs in the run for {len(jobs)} in the trace")
    done = {int(r["job_id"]) for r in rows if r["state"] == "completed"}
    if all_complete and len(done) != len(jobs):
        wrong.append(f"not every job completed: {dict(states)}")
    unrecorded = sorted(done - set(per_job))
    if unrecorded:
        wrong.append(f"completed jobs without a record: {unrecorded[:10]}")
    dupes = [j for j, c in per_job.items() if c != 1]
    if dupes:
        wrong.append(f"jobs with more than one record: {dupes[:10]}")
    unfinished = [r["job_id"] for r in rows if r["state"] in ("pending", "running", "suspended")]
    if unfinished:
        wrong.append(f"jobs not over: {unfinished[:10]}")
    ran = {r["id"]: (r["start"], r["end"]) for r in recs}

    def ns(t):
        return round(t * 1e9)

    views = (("the cluster", lambda r: (int(r["start_ns"]), int(r["end_ns"]))),
             ("the processes", lambda r: tuple(map(ns, ran[int(r["job_id"])]))))
    for view, span in views:
        by_node = collections.defaultdict(list)
        for r in rows:
            if r["state"] != "completed" or int(r["job_id"]) not in ran:
                continue
            for n in nodes.get(int(r["job_id"]), []):
                by_node[n].append(span(r) + (r["job_id"],))
        overlaps = []
        for node, spans in by_node.items():
            spans.sort()
            for (s1, e1, a), (s2, e2, b) in zip(spans, spans[1:]):
                if s2 < e1:
                    overlaps.append(f"node {node} held jobs {a} and {b} at once")
        if overlaps:
            wrong.append(f"as {view} ran them: {overlaps[:5]}")
        print(f"   {sum(map(len, by_node.values()))} job-node spans on {len(by_node)} nodes: "
              f"{'none overlap' if not overlaps else f'{len(overlaps)} overlap'}, as {view} ran them")
    return wrong


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 5:
        sys.exit(__doc__)
    problems = check(*args, all_complete="--all-complete" in sys.argv)
    for p in problems:
        print(f"   WRONG: {p}")
    sys.exit(1 if problems else 0)
