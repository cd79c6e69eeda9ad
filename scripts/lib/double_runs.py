"""Samples the live sigsleeps of one run every 20 ms, forever, and prints a
line starting with "DOUBLE RUN" whenever one job is alive in two processes
at once (on one host or two): a job must never run twice at the same time.

    python3 scripts/lib/double_runs.py DIR      (jobs whose --log is under DIR)

Shared by scripts/partition.sh and scripts/failover.sh, which run it in the
background and look for those lines at the end."""
import collections
import os
import sys
import time

root = sys.argv[1]


def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return None


while True:
    live = collections.defaultdict(set)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        state = stat.rsplit(")", 1)[1].split()[0]
        if state == "Z" or not args or not args[0].endswith(b"sigsleep"):
            continue
        # A process started ahead of its job and not yet let go on
        # (`[controller] prestart`) runs nothing.
        if stat.startswith(f"{pid} (sigsleep-held)"):
            continue
        a = [x.decode() for x in args]
        if "--log" not in a or not a[a.index("--log") + 1].startswith(root):
            continue
        held = "--held" in a
        live[a[a.index("--id") + 1]].add((pid, a[a.index("--log") + 1], held))
    for job, procs in live.items():
        if len(procs) < 2:
            continue
        # A process started ahead bears the held name only from its first
        # instructions on: caught just after exec, it still reads
        # "sigsleep". Looked at again a moment later, such a process that
        # was only held reads "sigsleep-held" (or is gone, killed
        # unclaimed); one let go on still reads "sigsleep". A job really
        # run twice is still running at the next sample.
        time.sleep(0.05)
        procs = {(pid, log) for pid, log, held in procs if not held or comm(pid) == "sigsleep"}
        if len(procs) > 1:
            print(f"DOUBLE RUN: job {job} in {sorted(procs)}", flush=True)
    time.sleep(0.02)
