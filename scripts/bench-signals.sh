#!/usr/bin/env bash
# Many live jobs under one agent, and how fast real signals reach them.
#
#   scripts/bench-signals.sh [JOBS] [HELD] [RATE] [SECONDS]
#                            (default 20000 10000 1000 10)
#
# A controller hosts one agent of JOBS/16 nodes of 16 cores in-process and
# runs JOBS one-core sigsleeps of 60 s at once. Then (controller/examples/
# signal_load.rs, one client connection): all jobs suspended in one
# request and resumed in one request; HELD of them suspended; then for
# SECONDS, RATE single-job requests a second, resuming the
# longest-suspended job and suspending the longest-running one in turn, so
# that HELD stay suspended; the rest resumed; every job runs to its end.
#
# Measured:
# - memory: private memory (Private_Clean + Private_Dirty of smaps_rollup)
#   and PSS of every live sigsleep, and the controller's RSS;
# - latency of each suspension (resumption): from the instant the
#   controller decided it (its own record of the job's suspensions, from
#   `queue --format json`) to the instant in the job's record (sigsleep's
#   clock, on SIGTSTP / SIGCONT);
# - time to suspend (resume) all: from sending the request to the last
#   job's suspend (resume) instant in its record;
# - sigsleep's run-time accounting error: wall time - suspended time -
#   requested run time, for every job that completed.
#
# Needs kernel.pid_max above JOBS plus what the system runs; as root the
# script raises it when it is lower than 65536.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-20000}
held=${2:-10000}
rate=${3:-1000}
secs=${4:-10}
cargo build --release -q
cargo build --release -q -p controller --example signal_load
host=$(rustc -vV | sed -n 's/^host: //p')
bin=target/$host/release
[ -x "$bin/controller" ] || bin=target/release
if [ "$(cat /proc/sys/kernel/pid_max)" -lt 65536 ] && [ "$(id -u)" -eq 0 ]; then
  echo 4194304 > /proc/sys/kernel/pid_max
fi
tmp=$(mktemp -d -t bench-signals-XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

nodes=$(( (jobs + 15) / 16 ))
cat > "$tmp/cluster.toml" <<EOF
[controller]
listen = "127.0.0.1:0"
state_dir = "$tmp/state"

[agents]
local = true
sigsleep = "$PWD/$bin/sigsleep"

[[nodes]]
names = "vn[00001-$(printf '%05d' "$nodes")]"
cpus = 16
memory = "64G"
EOF
ctl=("$bin/controller" --config "$tmp/cluster.toml")
"$bin/controller" --config "$tmp/cluster.toml" serve > "$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/state/address" ] && break; sleep 0.1; done
stat() { "${ctl[@]}" stats --format json | awk -F'[:,]' -v k="\"$1\"" '$1 ~ k { gsub(/ /, "", $2); print $2 }'; }

s=$(date +%s.%N)
"${ctl[@]}" submit --cores 1 --runtime 60 --count "$jobs" > /dev/null
# Started means decided; the processes take longer: count them.
live=0
for _ in $(seq 1200); do
  live=$(pgrep -c -P "$pid" || true)
  [ "$live" -ge "$jobs" ] && break
  sleep 0.1
done
e=$(date +%s.%N)
sleep 2
if [ "$live" -lt "$jobs" ]; then
  echo "bench-signals: $live of $jobs jobs alive, $(awk -v s="$s" -v e="$e" 'BEGIN { print e - s }') s after the submission" >&2
  "${ctl[@]}" stats >&2
  tail -5 "$tmp/serve.log" >&2
  exit 1
fi
python3 - "$pid" > "$tmp/memory.json" <<'EOF'
import json, os, sys
parent = sys.argv[1]
priv = pss = n = 0
for p in os.popen(f"pgrep -P {parent}").read().split():
    try:
        with open(f"/proc/{p}/smaps_rollup") as f:
            for line in f:
                k, v = line.split(":", 1)
                if k in ("Private_Clean", "Private_Dirty"):
                    priv += int(v.split()[0])
                elif k == "Pss":
                    pss += int(v.split()[0])
        n += 1
    except OSError:
        pass
rss = next(int(l.split()[1]) for l in open(f"/proc/{parent}/status") if l.startswith("VmRSS:"))
print(json.dumps({"procs": n, "private_kib": priv, "pss_kib": pss, "controller_rss_kib": rss}))
EOF

"$bin/examples/signal_load" "$tmp/cluster.toml" "$jobs" "$held" "$rate" "$secs" > "$tmp/phases.json"
"${ctl[@]}" queue --format json > "$tmp/queue.json"
until [ "$(stat ended)" -ge "$jobs" ]; do sleep 1; done
"${ctl[@]}" shutdown > /dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=
"$bin/calcmets" dump "$tmp/state/records" > "$tmp/records.jsonl"

python3 - "$tmp" "$jobs" "$held" "$rate" "$secs" "$s" "$e" <<'EOF'
import json, math, sys
tmp, jobs, held, rate, secs, s, e = sys.argv[1:8]
jobs = int(jobs)
mem = json.load(open(f"{tmp}/memory.json"))
ph = json.load(open(f"{tmp}/phases.json"))
ctl = {j["id"]: j["suspensions"] for j in json.load(open(f"{tmp}/queue.json"))}
recs = [json.loads(l) for l in open(f"{tmp}/records.jsonl")]
assert len(recs) == jobs, f"{len(recs)} records for {jobs} jobs"

def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, math.ceil(len(xs) * p) - 1)] if xs else float("nan")

bulk_s, bulk_r, paced_s, paced_r, acct = [], [], [], [], []
mismatched = 0
for r in recs:
    c = ctl.get(r["id"], [])
    if len(c) != len(r["suspensions"]):
        mismatched += 1
        continue
    for (cs, cr), (rs, rr) in zip(c, r["suspensions"]):
        if ph["suspend_all"] <= cs < ph["resume_all"]:
            bulk_s.append(rs)
            bulk_r.append(rr)
        elif ph["paced"] <= cs <= ph["paced_end"]:
            paced_s.append(rs - cs)
        if cr is not None and ph["paced"] <= cr <= ph["paced_end"]:
            paced_r.append(rr - cr)
    if r["status"] == "completed":
        susp = sum(b - a for a, b in r["suspensions"])
        acct.append((r["end"] - r["start"]) - susp - r["runtime"])

ms = lambda x: f"{x * 1e3:.2f}"
print(f"| measure ({jobs} jobs, {held} held suspended, {rate} ops/s for {secs} s) | value |")
print("|---|---:|")
print(f"| jobs started, from submission to the last process alive (s) | {float(e) - float(s):.1f} |")
print(f"| private memory of all sigsleeps (MiB; per job KiB) | {mem['private_kib'] / 1024:.1f} ({mem['private_kib'] / mem['procs']:.1f}) |")
print(f"| PSS of all sigsleeps (MiB) | {mem['pss_kib'] / 1024:.1f} |")
print(f"| controller RSS, agent included (MiB) | {mem['controller_rss_kib'] / 1024:.1f} |")
print(f"| suspend all: request to last suspend instant (ms) | {ms(max(bulk_s) - ph['suspend_all'])} |")
print(f"| resume all: request to last resume instant (ms) | {ms(max(bulk_r) - ph['resume_all'])} |")
print(f"| paced suspensions: decision to record, p50 / p99 / max (ms; n) | {ms(pct(paced_s, .5))} / {ms(pct(paced_s, .99))} / {ms(max(paced_s))} ({len(paced_s)}) |")
print(f"| paced resumptions: decision to record, p50 / p99 / max (ms; n) | {ms(pct(paced_r, .5))} / {ms(pct(paced_r, .99))} / {ms(max(paced_r))} ({len(paced_r)}) |")
print(f"| paced requests sent late, p50 / p99 (ms) | {ms(ph['send_late_p50'])} / {ms(ph['send_late_p99'])} |")
print(f"| accounting error: wall - suspended - run time, p50 / p99 / max (ms; n) | {ms(pct(acct, .5))} / {ms(pct(acct, .99))} / {ms(max(acct))} ({len(acct)}) |")
print(f"| jobs whose record and controller disagree on suspensions | {mismatched} |")
EOF
