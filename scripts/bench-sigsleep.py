#!/usr/bin/env python3
"""sigsleep against coreutils `sleep`, side by side in one run.

Measures, for both programs, with runs interleaved so that machine noise
hits both alike:

  peak RSS       VmHWM from /proc/PID/status of a sleeping process (the
                 high-water mark since exec, start-up included)
  private memory Private_Clean + Private_Dirty from /proc/PID/smaps_rollup of
                 a sleeping process, averaged over COPIES concurrent copies so
                 that pages every copy shares (program text, libc) count as
                 shared, as they do when thousands of jobs sleep at once
  start to exit  wall time from posix_spawn to wait4 of a zero-length run
                 (median and mean over the runs)

and prints one table with the ratio sigsleep / sleep (goal: <= 1.0).

usage: scripts/bench-sigsleep.py [--sigsleep PATH] [--runs N] [--copies K] [--json]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time


def spawn(argv):
    return os.posix_spawn(argv[0], argv, os.environ)


def run_once(argv):
    t0 = time.perf_counter_ns()
    pid = spawn(argv)
    _, status = os.waitpid(pid, 0)
    t1 = time.perf_counter_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench-sigsleep: {argv} exited with {status}")
    return (t1 - t0) / 1e3


def kib_fields(path):
    fields = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1])
    return fields


def memory_kib(pid):
    smaps = kib_fields(f"/proc/{pid}/smaps_rollup")
    status = kib_fields(f"/proc/{pid}/status")
    return {
        "private": smaps["Private_Clean"] + smaps["Private_Dirty"],
        "pss": smaps["Pss"],
        "hwm": status["VmHWM"],
    }


def sleeping_memory(argv, copies):
    pids = [spawn(argv) for _ in range(copies)]
    time.sleep(0.5)
    samples = [memory_kib(p) for p in pids]
    for p in pids:
        os.kill(p, 15)
        os.waitpid(p, 0)
    return {k: statistics.mean(s[k] for s in samples) for k in samples[0]}


def default_sigsleep():
    """The release build: under the host triple (static build, see
    .cargo/config.toml) if present, else the plain target directory."""
    import subprocess
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
    host = subprocess.run(["rustc", "-vV"], capture_output=True, text=True).stdout
    host = next((l.split()[1] for l in host.splitlines() if l.startswith("host:")), "")
    for d in (os.path.join(root, host, "release"), os.path.join(root, "release")):
        if os.access(os.path.join(d, "sigsleep"), os.X_OK):
            return os.path.join(d, "sigsleep")
    return os.path.join(root, host, "release", "sigsleep")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sigsleep", default=default_sigsleep())
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    sigsleep = os.path.abspath(args.sigsleep)
    sleep = shutil.which("sleep")
    if not os.access(sigsleep, os.X_OK):
        sys.exit(f"bench-sigsleep: {sigsleep} not found; run `cargo build --release -p sigsleep` first")
    # Page-cache pages the linker just wrote count as dirty; write them back.
    os.sync()

    tmp = tempfile.mkdtemp(prefix="bench-sigsleep-")
    log = os.path.join(tmp, "jobs.rec")
    zero = {
        "sleep": [sleep, "0"],
        "sigsleep": [sigsleep, "--runtime", "0", "--log", log],
    }
    long = {
        "sleep": [sleep, "600"],
        "sigsleep": [sigsleep, "--runtime", "600", "--log", log],
    }

    times = {k: [] for k in zero}
    for name in zero:  # warm the page cache
        for _ in range(20):
            run_once(zero[name])
    for i in range(args.runs):
        order = list(zero) if i % 2 == 0 else list(reversed(list(zero)))
        for name in order:
            times[name].append(run_once(zero[name]))
    mem = {name: sleeping_memory(long[name], args.copies) for name in long}
    shutil.rmtree(tmp)

    rows = [
        (f"peak RSS, VmHWM (KiB, mean of {args.copies})", {k: v["hwm"] for k, v in mem.items()}),
        (f"private memory while sleeping (KiB, mean of {args.copies})", {k: v["private"] for k, v in mem.items()}),
        (f"PSS while sleeping (KiB, mean of {args.copies})", {k: v["pss"] for k, v in mem.items()}),
        ("start to exit, zero-length (us, median)", {k: statistics.median(v) for k, v in times.items()}),
        ("start to exit, zero-length (us, mean)", {k: statistics.mean(v) for k, v in times.items()}),
    ]
    if args.json:
        print(json.dumps([{"metric": m, **v, "ratio": v["sigsleep"] / v["sleep"]} for m, v in rows], indent=1))
        return
    print(f"sigsleep: {sigsleep}\nsleep:    {sleep}\nruns: {args.runs} interleaved, copies: {args.copies}\n")
    print(f"| {'metric':<48} | {'sleep':>9} | {'sigsleep':>9} | {'ratio':>6} |")
    print(f"|{'-' * 50}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
    for m, v in rows:
        print(f"| {m:<48} | {v['sleep']:>9.1f} | {v['sigsleep']:>9.1f} | {v['sigsleep'] / v['sleep']:>6.2f} |")


if __name__ == "__main__":
    main()
