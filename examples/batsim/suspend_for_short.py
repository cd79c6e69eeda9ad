#!/usr/bin/env python3
"""A scheduler of clemu's Batsim extension: short jobs preempt long ones by
suspension.

First come, first served on the lowest free resources, with one twist:
when the job at the head of the queue is short (it asks for at most
--short seconds) and cannot start, the scheduler suspends running long
jobs (each at most once) with SUSPEND_JOB until the head fits, and starts
it on their resources. A suspended job keeps its resources reserved; it
is resumed with RESUME_JOB, on the very same resources, as soon as they
are all free again, before anything else starts. clemu confirms each
with JOB_SUSPENDED and JOB_RESUMED, and carries them out with real
SIGTSTP and SIGCONT signals in the emulation (docs/batsim.md).

It speaks Batsim's protocol directly (JSON over a ZeroMQ REP socket;
needs pyzmq only), so that every message of the extension is in sight:

    python3 examples/batsim/suspend_for_short.py --bind tcp://127.0.0.1:28000 &
    runworkload --config configs/batsim.toml \\
        --workload configs/workloads/kth-sp2-200.swf --simulate --out out
"""
import argparse
import json
import sys

import zmq


class Scheduler:
    def __init__(self, short, long_factor):
        self.short = short
        self.long_factor = long_factor
        self.free = []  # sorted free resource ids
        self.queue = []  # job ids, first come first served
        self.jobs = {}  # id -> {"res", "walltime", "alloc", "start"}
        self.running = set()
        self.suspended = []  # ids, oldest suspension first
        self.preempted = set()  # ids suspended once already
        self.suspensions = 0
        self.no_more_at = None  # when clemu said no more jobs would come
        self.late = 0  # jobs submitted after that: a broken promise

    def hear(self, event):
        kind, data = event["type"], event.get("data", {})
        if kind == "SIMULATION_BEGINS":
            self.free = list(range(data["nb_resources"]))
        elif kind == "JOB_SUBMITTED":
            if self.no_more_at is not None:
                self.late += 1
            job = data["job"]
            self.jobs[data["job_id"]] = {
                "res": job["res"], "walltime": job.get("walltime", -1),
                "alloc": [], "start": None}
            self.queue.append(data["job_id"])
        elif kind == "JOB_COMPLETED":
            j = self.jobs.pop(data["job_id"])
            self.running.discard(data["job_id"])
            if data["job_id"] in self.suspended:
                # It ended before the suspension landed (real time): its
                # resources, free since the suspension, are no longer its.
                self.suspended.remove(data["job_id"])
            else:
                self.free = sorted(self.free + j["alloc"])
        elif kind == "NOTIFY" and data.get("type") == "no_more_static_job_to_submit":
            self.no_more_at = event["timestamp"]
        elif kind in ("JOB_SUSPENDED", "JOB_RESUMED", "REQUESTED_CALL", "NOTIFY"):
            pass  # confirmations and notices: nothing to decide from them
        else:
            raise ValueError(f"unexpected event {kind}")

    def reserved(self):
        return {r for j in self.suspended for r in self.jobs[j]["alloc"]}

    def expected_end(self, j):
        job = self.jobs[j]
        return job["start"] + job["walltime"] if job["walltime"] > 0 else float("inf")

    def decide(self, now):
        out = []

        def say(kind, **data):
            out.append({"timestamp": now, "type": kind, "data": data})

        # Suspended jobs first, on their own resources, oldest first.
        for j in list(self.suspended):
            alloc = self.jobs[j]["alloc"]
            if all(r in self.free for r in alloc):
                self.free = [r for r in self.free if r not in alloc]
                self.suspended.remove(j)
                self.running.add(j)
                say("RESUME_JOB", job_id=j)
        # Then the queue, in order, on free resources no suspended job waits for.
        while self.queue:
            head = self.queue[0]
            job = self.jobs[head]
            reserved = self.reserved()
            usable = [r for r in self.free if r not in reserved]
            if len(usable) < job["res"]:
                victims = self.victims(head, len(usable), now)
                if victims is None:
                    break
                for v in victims:
                    self.running.discard(v)
                    self.suspended.append(v)
                    self.preempted.add(v)
                    self.suspensions += 1
                    say("SUSPEND_JOB", job_id=v)
                # Their resources are free, and theirs to resume on; the head
                # may use them meanwhile.
                theirs = [r for v in victims for r in self.jobs[v]["alloc"]]
                self.free = sorted(self.free + theirs)
                usable = sorted(usable + theirs)
            alloc = usable[:job["res"]]
            self.free = [r for r in self.free if r not in alloc]
            job["alloc"], job["start"] = alloc, now
            self.queue.pop(0)
            self.running.add(head)
            say("EXECUTE_JOB", job_id=head, alloc=interval_set(alloc))
        return out

    def victims(self, head, usable, now):
        """Long running jobs to suspend so that a short head fits, fewest
        first (latest expected end first); None if it is not short or they
        would not do."""
        job = self.jobs[head]
        if not 0 < job["walltime"] <= self.short:
            return None
        candidates = sorted(
            (j for j in self.running
             if j not in self.preempted
             and self.expected_end(j) - now > self.long_factor * job["walltime"]),
            key=lambda j: -self.expected_end(j))
        chosen, have = [], usable
        for j in candidates:
            if have >= job["res"]:
                break
            chosen.append(j)
            have += len(self.jobs[j]["alloc"])
        return chosen if have >= job["res"] and chosen else None


def interval_set(ids):
    parts, i = [], 0
    while i < len(ids):
        k = i
        while k + 1 < len(ids) and ids[k + 1] == ids[k] + 1:
            k += 1
        parts.append(str(ids[i]) if i == k else f"{ids[i]}-{ids[k]}")
        i = k + 1
    return " ".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bind", default="tcp://127.0.0.1:28000",
                   help="the REP socket clemu connects to")
    p.add_argument("--short", type=float, default=3600,
                   help="a job asking for at most this many seconds may preempt")
    p.add_argument("--long-factor", type=float, default=10,
                   help="a job may be suspended if it is expected to run this many "
                        "times longer than the short job")
    p.add_argument("--timeout", type=float, default=30,
                   help="give up after this many seconds without a message")
    args = p.parse_args()
    sched = Scheduler(args.short, args.long_factor)
    sock = zmq.Context().socket(zmq.REP)
    sock.bind(args.bind)
    sock.setsockopt(zmq.RCVTIMEO, int(args.timeout * 1000))
    while True:
        try:
            msg = json.loads(sock.recv())
        except zmq.Again:
            sys.exit(f"suspend_for_short: no message for {args.timeout} s")
        ends = False
        for e in msg["events"]:
            if e["type"] == "SIMULATION_ENDS":
                ends = True
            else:
                sched.hear(e)
        events = [] if ends else sched.decide(msg["now"])
        sock.send_string(json.dumps({"now": msg["now"], "events": events}))
        if ends:
            told = ("never told that no more jobs would come" if sched.no_more_at is None
                    else f"told no more jobs would come at {sched.no_more_at:.0f} s, "
                         f"{sched.late} submitted after")
            print(f"suspend_for_short: {sched.suspensions} suspensions, {told}", file=sys.stderr)
            return


if __name__ == "__main__":
    main()
