"""Faults at random, by seed: the driver of scripts/chaos.sh (see there).

The cluster of scripts/failover.sh (two controllers, three agent hosts,
the replay's host, each in a network namespace on one bridge) replays a
real trace round after round while a schedule drawn from the seed applies
faults at random instants and in random combinations:

  kill   a controller killed (SIGKILL), restarted when the fault heals;
  hang   a controller stopped (SIGSTOP: its kernel still accepts
         connections), let go on (SIGCONT);
  cut    the link between two parties (controllers, agent hosts, the
         replay) cut both ways, restored: each side's neighbour entry for
         the other points at an address no port has, so the frames go
         nowhere and nothing is told (packets vanish, as on a real cut);
  agent  an agent killed (SIGKILL), restarted.

A round's schedule depends on the seed and the round's number only, so a
failing seed fails again. After every round: every job of the trace is in
the run and over, each completed job has exactly one record, no node (one
core each) held two jobs at once by the cluster's account or by the
processes', the sampler saw no job alive in two processes at once
(scripts/lib/run_checks.py), no job process is left, and the replay ended
within PROGRESS_S of the last fault's healing."""

import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_checks  # noqa: E402

BIN = os.environ["BIN"]
TMP = os.environ["TMP"]
SEED = int(sys.argv[1])
MINUTES = float(sys.argv[2])
SPEEDUP = int(os.environ.get("SPEEDUP", "20000"))
TRACE = os.path.abspath("configs/workloads/kth-sp2-200.swf")
# How long after the last fault heals the replay must be over: the longest
# a job may wait for its lost agent to be declared down (heartbeat
# timeout), run again, and the replay's tail.
PROGRESS_S = 90
P = f"clc{os.getpid() % 100000}"
IP = {"c1": "10.98.0.1", "c2": "10.98.0.2", "h1": "10.98.0.11", "h2": "10.98.0.12",
      "h3": "10.98.0.13", "cl": "10.98.0.20", "mo": "10.98.0.30"}
PORT = 7817
LIST = f"{IP['c1']}:{PORT},{IP['c2']}:{PORT}"
CONTROLLERS = ("c1", "c2")
AGENTS = ("h1", "h2", "h3")
# Parties whose links may be cut; "mo" (the monitor) is never cut.
PARTIES = CONTROLLERS + AGENTS + ("cl",)


def netns(name, *args):
    return ["ip", "netns", "exec", f"{P}-{name}", *args]


def sh(*args, check=True):
    out = subprocess.run(args, capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"chaos: {' '.join(args)}: {out.stderr.strip()}")
    return out


class Cluster:
    """The processes and links of the run; state owned by the main
    thread, except the monitor's figures."""

    def __init__(self):
        self.serve, self.agents, self.sampler = {}, {}, None
        self.secret = f"{TMP}/secret"
        self.config = f"{TMP}/cluster.toml"

    def setup(self):
        hosts = " ".join(f"{n}={a}" for n, a in IP.items())
        sh("bash", "-c", f"source scripts/lib/bridge.sh && bridge_up {P} {hosts}")
        with open(self.secret, "w") as f:
            f.write(os.urandom(32).hex())
        os.chmod(self.secret, 0o600)
        with open(self.config, "w") as f:
            f.write(config())
        for c in CONTROLLERS:
            self.start_controller(c)
        for h in AGENTS:
            self.start_agent(h)
        self.sampler = subprocess.Popen(
            ["python3", "scripts/lib/double_runs.py", TMP],
            stdout=open(f"{TMP}/sampler.log", "w"), stderr=subprocess.STDOUT)

    def start_controller(self, c):
        self.serve[c] = subprocess.Popen(
            netns(c, f"{BIN}/controller", "--config", self.config, "serve", "--listen",
                  f"{IP[c]}:{PORT}", "--state-dir", f"{TMP}/state-{c}"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(f"{TMP}/serve-{c}.log", "a"))

    def start_agent(self, h):
        k = int(h[1])
        first = (k - 1) * 34 + 1
        self.agents[h] = subprocess.Popen(
            netns(h, f"{BIN}/agent", "--controller", LIST, "--nodes",
                  f"vn[{first:03d}-{first + 33:03d}]", "--cpus", "1", "--memory", "1G",
                  "--secret-file", self.secret, "--record-dir", f"{TMP}/spool-{h}",
                  "--host", h, "--sigsleep", f"{BIN}/sigsleep"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(f"{TMP}/agent-{h}.log", "a"))

    def ctl(self, *args, addr=LIST, where="mo", timeout=120):
        return subprocess.run(
            netns(where, f"{BIN}/controller", "--config", self.config, "--addr", addr, *args),
            capture_output=True, text=True, timeout=timeout)

    def leader(self):
        """The controller that answers, within a second, that it leads."""
        for c in CONTROLLERS:
            try:
                out = self.ctl("stats", "--format", "json", addr=f"{IP[c]}:{PORT}", timeout=1)
            except subprocess.TimeoutExpired:
                continue
            if out.returncode == 0 and '"role": "primary"' in out.stdout:
                return c
        return None

    def link(self, pair, up):
        """Cuts or restores the link between the two parties of `pair`."""
        for a, b in (pair, pair[::-1]):
            if up:
                sh(*netns(a, "ip", "neigh", "del", IP[b], "dev", f"{P}-{a}"), check=False)
            else:
                sh(*netns(a, "ip", "neigh", "replace", IP[b], "lladdr", "02:00:00:00:00:01",
                          "nud", "permanent", "dev", f"{P}-{a}"))

    def apply(self, kind, target):
        if kind == "kill":
            kill(self.serve.pop(target))
        elif kind == "hang":
            self.serve[target].send_signal(signal.SIGSTOP)
        elif kind == "cut":
            self.link(target, up=False)
        elif kind == "agent":
            kill(self.agents.pop(target))

    def heal(self, kind, target):
        if kind == "kill":
            self.start_controller(target)
        elif kind == "hang":
            self.serve[target].send_signal(signal.SIGCONT)
        elif kind == "cut":
            self.link(target, up=True)
        elif kind == "agent":
            self.start_agent(target)

    def shutdown(self):
        """Through the list, then every process must end by itself."""
        self.ctl("shutdown", timeout=90)
        deadline = time.time() + 20
        left = []
        for p in list(self.serve.values()) + list(self.agents.values()):
            while p.poll() is None and time.time() < deadline:
                time.sleep(0.1)
            if p.poll() is None:
                left.append(" ".join(p.args[-8:]))
        return left

    def destroy(self):
        procs = list(self.serve.values()) + list(self.agents.values())
        for p in procs + ([self.sampler] if self.sampler else []):
            try:
                p.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            kill(p)
        subprocess.run(["pkill", "-9", "-f", f"--log {TMP}"], capture_output=True)
        for n in list(IP) + ["sw"]:
            subprocess.run(["ip", "netns", "del", f"{P}-{n}"], capture_output=True)


def kill(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def config():
    return f"""[controller]
listen = "{IP['c1']}:{PORT}"
hosts = ["{IP['c1']}:{PORT}", "{IP['c2']}:{PORT}"]
secret_file = "{TMP}/secret"
state_dir = "{TMP}/unused"
schedule_interval_s = 0.001

[agents]
local = false
sigsleep = "{BIN}/sigsleep"

[[agents.host]]
name = "h1"
nodes = "vn[001-034]"
[[agents.host]]
name = "h2"
nodes = "vn[035-068]"
[[agents.host]]
name = "h3"
nodes = "vn[069-102]"

[[nodes]]
names = "vn[001-102]"
cpus = 1
memory = "1G"
"""


def schedule(rnd, span):
    """A round's faults, from the seed and the round only: (instant,
    kind, target, duration), instants within the replay's first `span`
    seconds; at most one fault at a time per process, links any number."""
    rng = random.Random(f"{SEED}:{rnd}")
    out, busy = [], {}
    for _ in range(rng.randint(2, 5)):
        at = rng.uniform(0.5, span)
        kind = rng.choice(["kill", "hang", "cut", "cut", "agent"])
        if kind == "cut":
            target = tuple(sorted(rng.sample(PARTIES, 2)))
        else:
            target = rng.choice(AGENTS if kind == "agent" else CONTROLLERS)
        length = rng.uniform(0.3, 6.0)
        key = target if kind == "cut" else ("proc", target)
        if busy.get(key, -1) > at:
            continue
        busy[key] = at + length
        out.append((at, kind, target, length))
    return sorted(out)


class Monitor(threading.Thread):
    """Every 200 ms, whether a controller answers that it leads: the
    spans without one (takeovers, and waits for a hung or killed
    controller's return)."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster, self.gaps, self.stop = cluster, [], threading.Event()

    def run(self):
        since = None
        while not self.stop.is_set():
            t = time.time()
            if self.cluster.leader() is None:
                since = since or t
            elif since is not None:
                self.gaps.append(t - since)
                since = None
            time.sleep(max(0.0, 0.2 - (time.time() - t)))


def q(v, p):
    v = sorted(v)
    return v[max(0, -(-int(p * 100) * len(v) // 100) - 1)] if v else float("nan")


def nodes_of(jobs_csv, path):
    import csv
    with open(path, "w") as out:
        for r in csv.DictReader(open(jobs_csv)):
            names = sh(f"{BIN}/controller", "nodeset", "-e", r["nodes"]).stdout.split() \
                if r["nodes"] else []
            out.write(f"{r['job_id']} {' '.join(names)}\n")


def round_(cluster, rnd, applied):
    """One replay under its faults; the checks' failures."""
    out = f"{TMP}/run-{rnd:03d}"
    plan = schedule(rnd, span=15.0 * 20000 / SPEEDUP)
    replay = subprocess.Popen(
        netns("cl", f"{BIN}/runworkload", "--config", cluster.config, "--controller", LIST,
              "--secret-file", cluster.secret, "--workload", TRACE, "--speedup", str(SPEEDUP),
              "-q", "--out", out),
        stdout=open(f"{out}.log", "w"), stderr=subprocess.STDOUT)
    t0 = time.time()
    events = sorted([(at, "apply", k, t) for at, k, t, _ in plan]
                    + [(at + d, "heal", k, t) for at, k, t, d in plan])
    for at, what, kind, target in events:
        time.sleep(max(0.0, t0 + at - time.time()))
        if what == "apply":
            cluster.apply(kind, target)
            name = "–".join(target) if kind == "cut" else target
            applied[f"{kind} {name}"] += 1
        else:
            cluster.heal(kind, target)
    healed = time.time()
    try:
        code = replay.wait(timeout=PROGRESS_S + 60)
    except subprocess.TimeoutExpired:
        replay.kill()
        return [f"the replay was not over {PROGRESS_S + 60} s after the faults healed"], plan, 0
    wrong = []
    if code != 0:
        tail = open(f"{out}.log").read().strip().splitlines()[-3:]
        return [f"runworkload exited {code}: {' | '.join(tail)}"], plan, 0
    if time.time() - healed > PROGRESS_S:
        wrong.append(f"the replay took {time.time() - healed:.0f} s after the faults healed")
    run = [d for d in os.listdir(out) if os.path.isdir(f"{out}/{d}")][0]
    jobs_csv = f"{out}/{run}/jobs.csv"
    with open(f"{out}/records.jsonl", "w") as f:
        f.write(sh(f"{BIN}/calcmets", "dump", f"{out}/{run}/records").stdout)
    nodes_of(jobs_csv, f"{out}/nodes.txt")
    wrong += run_checks.check(TRACE, f"{out}/records.jsonl", f"{TMP}/sampler.log", jobs_csv,
                              f"{out}/nodes.txt", all_complete=False)
    # Job processes end with their jobs (a held process started ahead
    # waits a second at most to be claimed).
    time.sleep(2)
    left = sh("pgrep", "-f", f"sigsleep.*--log {TMP}", check=False).stdout.split()
    if left:
        wrong.append(f"job processes left after the round: {left}")
    jobs = sum(1 for _ in open(jobs_csv)) - 1
    return wrong, plan, jobs


def main():
    cluster = Cluster()
    monitor = Monitor(cluster)
    applied = collections.Counter()
    rounds = jobs = 0
    try:
        cluster.setup()
        deadline = time.time() + 60
        while cluster.leader() is None:
            if time.time() > deadline:
                sys.exit("chaos: no controller leads 60 s after the start")
            time.sleep(0.2)
        monitor.start()
        end = time.time() + MINUTES * 60
        while time.time() < end:
            rounds += 1
            wrong, plan, n = round_(cluster, rounds, applied)
            jobs += n
            said = ", ".join(f"{k} {'–'.join(t) if k == 'cut' else t} at {at:.1f} s for {d:.1f} s"
                             for at, k, t, d in plan)
            print(f"round {rounds}: {n} jobs; faults: {said or 'none'}", flush=True)
            if wrong:
                for w in wrong:
                    print(f"   WRONG: {w}")
                print(f"chaos: FAILED in round {rounds}; to reproduce: "
                      f"sudo scripts/chaos.sh {SEED} {MINUTES:g}")
                return 1
        monitor.stop.set()
        monitor.join()
        left = cluster.shutdown()
        if left:
            print(f"chaos: FAILED: still running 20 s after the shutdown: {left}")
            return 1
        time.sleep(1)
        stray = sh("pgrep", "-f", TMP, check=False).stdout.split()
        stray = [p for p in stray if int(p) != cluster.sampler.pid]
        if stray:
            print(f"chaos: FAILED: processes left: {stray}")
            return 1
        kinds = collections.Counter()
        for k, n in applied.items():
            kinds[k.split()[0]] += n
        print(f"\nchaos: seed {SEED}, {MINUTES:g} min: {rounds} rounds, {jobs} jobs replayed, "
              f"nothing lost, no job twice, no core overbooked, no process left")
        print("faults: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
              + " (" + ", ".join(f"{k} {n}" for k, n in sorted(applied.items())) + ")")
        g = monitor.gaps
        print(f"spans without a leader: {len(g)}; p50 {q(g, 0.5):.2f} s, p99 {q(g, 0.99):.2f} s, "
              f"max {max(g, default=float('nan')):.2f} s")
        return 0
    finally:
        monitor.stop.set()
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
