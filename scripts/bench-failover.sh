#!/usr/bin/env bash
# A backup controller on the originating study's cluster: configs/raijin-3600.toml
# (3,600 nodes of 16 cores) with its 10 agent hosts as agent processes and
# two controllers, all on loopback on this machine.
#
#   scripts/bench-failover.sh [TRIALS] [JOBS]        (default 10, 100000)
#
# 1. Takeover: a replay of RICC-2010-2 (7 cores per processor) runs
#    through the list of controllers while the primary is lost, TRIALS
#    times each way, the next trial losing the other:
#    - killed with SIGKILL (its connections close at once; it is then
#      restarted and becomes the backup);
#    - frozen with SIGSTOP, as a host that hangs or is cut off: its
#      connections stay open and silent, so agents and backup learn of it
#      only from the silence. It is then let go on (SIGCONT), sees the
#      higher term, steps down and becomes the backup.
#    For each: from the fault to the new primary acting (its log: a
#    majority of agent hosts back it), and to its first job started (the
#    controller's own start instants: a job the replay submits once its
#    client has found the new primary); and the resident memory of the
#    backup and of the primary just before the fault. Heartbeats and
#    timeouts are the defaults.
# 2. Submissions: JOBS one-core jobs in batches of 10,000 from one client,
#    to a primary with its backup and to a controller alone (no list),
#    three rounds each, alternated; every node drained, so jobs stay
#    queued. The ratio is the cost of holding each answer until the backup
#    has the batch. Then the resident memory of both controllers, once the
#    backup holds the whole queue.
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-10}
jobs=${2:-100000}
trace=../shared/workloads/RICC-2010-2.swf.gz
[ -r "$trace" ] || { echo "bench-failover: cannot read $trace" >&2; exit 2; }
cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/release
[ -x "$bin/controller" ] || bin=$PWD/target/release
tmp=$(mktemp -d -t bench-failover-XXXXXX)
pids=()
declare -A serve=()
cleanup() {
  for pid in "${pids[@]}" "${serve[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  pkill -9 -f -- "--log $tmp" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "bench-failover: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
a=127.0.0.1:$(port)
b=127.0.0.1:$(port)
list=$a,$b
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret"
chmod 600 "$tmp/secret"

# raijin-3600 with agents of their own, and the two controllers.
python3 - configs/raijin-3600.toml "$tmp" "$a" "$b" "$bin" <<'PY'
import re, sys
src, tmp, a, b, bin_ = sys.argv[1:]
text = open(src).read()
text = re.sub(r'(?m)^listen = .*$', f'listen = "{a}"\nsecret_file = "{tmp}/secret"\nmax_jobs = 2000000', text)
text = re.sub(r'(?m)^local = true$', f'local = false\nsigsleep = "{bin_}/sigsleep"', text)
open(f"{tmp}/alone.toml", "w").write(text)
open(f"{tmp}/pair.toml", "w").write(text.replace(f'listen = "{a}"', f'listen = "{a}"\nhosts = ["{a}", "{b}"]'))
PY
agent_hosts=$(python3 -c '
import re, sys
t = open("configs/raijin-3600.toml").read()
for name, nodes in re.findall(r"name = \"(h\d+)\"\nnodes = \"([^\"]+)\"", t):
    print(name, nodes)')

ctl() { "$bin/controller" --config "$tmp/pair.toml" --addr "$1" "${@:2}"; }
start() { # a|b config
  local addr=${!1}
  "$bin/controller" --config "$tmp/$2.toml" serve --listen "$addr" --state-dir "$tmp/state-$1" \
    2>> "$tmp/serve-$1.log" &
  serve[$1]=$!
}
agents() { # config address(es)
  while read -r name nodes; do
    "$bin/agent" --controller "$2" --nodes "$nodes" --cpus 16 --memory 64G --host "$name" \
      --secret-file "$tmp/secret" --record-dir "$tmp/spool-$name" 2>> "$tmp/agent-$name.log" &
    pids+=($!)
  done <<< "$agent_hosts"
}
stop_all() {
  for pid in "${pids[@]}" "${serve[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}" "${serve[@]}"; do wait "$pid" 2>/dev/null || true; done
  pkill -9 -f -- "--log $tmp" 2>/dev/null || true
  pids=(); serve=()
}
# Whether the controller at ADDR (config CONFIG) leads with every node up
# and, with a list, a backup that holds the whole state.
ready() { # addr config
  "$bin/controller" --config "$tmp/$2.toml" --addr "$1" stats --format json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin); c = s["controller"]
backed = c["role"] == "alone" or (c["role"] == "primary" and c["backups"] and not c["backups"][0]["copying"])
sys.exit(0 if backed and s["nodes"]["down"] == 0 else 1)'
}
synced_queue() { # the backup holds every job submitted
  [ "$(ctl "$b" stats --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"]["pending"])')" = "$jobs" ]
}
acting() { # a|b count: more than count "acting" lines in its log
  [ "$(grep -c 'back this primary: acting' "$tmp/serve-$1.log")" -gt "$2" ]
}
wait_for() { # what command...
  local what=$1; shift
  for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done
  echo "bench-failover: timed out waiting for $what" >&2; exit 1
}
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# 1. Takeover.
start a pair
wait_for "the first controller" ctl "$a" stats > /dev/null 2>&1
start b pair
agents pair "$list"
wait_for "a primary with its backup" ready "$a" pair
"$bin/runworkload" --config "$tmp/pair.toml" --controller "$list" --secret-file "$tmp/secret" \
  --workload "$trace" --jobs 40000 --cores-per-proc 7 --speedup 2000 -q --out "$tmp/run" \
  > "$tmp/runworkload.log" 2>&1 &
replay=$!
pids+=("$replay")
sleep 5
primary=a backup=b
: > "$tmp/trials"
for fault in kill stop; do for t in $(seq "$trials"); do
  kill -0 "$replay" 2>/dev/null || { echo "bench-failover: the replay ended early" >&2; exit 1; }
  rb=$(rss "${serve[$backup]}") rp=$(rss "${serve[$primary]}")
  before=$(grep -c 'back this primary: acting' "$tmp/serve-$backup.log" || true)
  t0=$(date +%s.%N)
  if [ "$fault" = kill ]; then
    kill -9 "${serve[$primary]}"
    wait "${serve[$primary]}" 2>/dev/null || true
  else
    kill -STOP "${serve[$primary]}"
  fi
  wait_for "the backup to lead" acting "$backup" "$before"
  # Time for the first start: after a hang, the replay's client finds the
  # new primary within a second of the takeover (it asks the list while
  # it waits), and its next submission starts.
  sleep 5
  ctl "${!backup}" queue --all --format json > "$tmp/queue.json"
  python3 - "$tmp/serve-$backup.log" "$tmp/queue.json" "$t0" "$rb" "$rp" "$fault" >> "$tmp/trials" <<'PY'
import calendar, json, sys, time
log, queue, t0, rb, rp = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def stamp(line):
    d, frac = line.split("Z")[0].split(".")
    return calendar.timegm(time.strptime(d, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)
acting = [stamp(l) for l in open(log) if "back this primary: acting" in l]
acting = min(x for x in acting if x >= t0)
starts = [j["start"] for j in json.load(open(queue)) if j.get("start") and j["start"] >= t0]
first = min(starts) if starts else float("nan")
print(f"{sys.argv[6]} {acting - t0:.3f} {first - t0:.3f} {rb} {rp}")
PY
  echo "trial $t: $(tail -1 "$tmp/trials")" >&2
  if [ "$fault" = kill ]; then
    start "$primary" pair
  else
    kill -CONT "${serve[$primary]}"
  fi
  wait_for "the old primary to follow" ready "${!backup}" pair
  sleep 2
  tmpswap=$primary; primary=$backup; backup=$tmpswap
done; done
kill "$replay" 2>/dev/null || true
stop_all

python3 - "$tmp/trials" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def pct(xs, p):
    xs = sorted(x for x in xs if not math.isnan(x))
    return xs[max(0, math.ceil(len(xs) * p) - 1)] if xs else float("nan")
print(f"| takeover on raijin-3600, p50 / max of {len(rows) // 2} trials each | kill -9 | SIGSTOP (a hung host) |")
print("|---|---:|---:|")
col = lambda fault, i: [float(r[i]) for r in rows if r[0] == fault]
cell = lambda fault, i, div=1: f"{pct(col(fault, i), .5) / div:.2f} / {pct(col(fault, i), 1) / div:.2f}"
both = lambda i, div=1: f"{cell('kill', i, div)} | {cell('stop', i, div)}"
print(f"| the fault to the new primary acting (s) | {both(1)} |")
print(f"| the fault to its first job started (s) | {both(2)} |")
for fault in ("kill", "stop"):
    idle = sum(math.isnan(x) for x in col(fault, 2))
    if idle:
        print(f"| {fault}: trials with no job started in the 5 s after (left out above) | {idle} | |")
print(f"| backup resident memory before the fault (MiB) | {both(3, 1024)} |")
print(f"| primary resident memory before the fault (MiB) | {both(4, 1024)} |")
PY

# 2. Submissions, with and without a backup, alternated.
: > "$tmp/rates"
for round in 1 2 3; do
  for mode in pair alone; do
    rm -rf "$tmp/state-a" "$tmp/state-b" "$tmp"/spool-*
    start a "$mode"
    wait_for "the controller" ctl "$a" stats > /dev/null 2>&1
    if [ "$mode" = pair ]; then start b pair; agents pair "$list"; else agents alone "$a"; fi
    wait_for "every node up" ready "$a" "$mode"
    "$bin/controller" --config "$tmp/$mode.toml" --addr "$a" drain 'vn[0000-3599]' --reason bench > /dev/null
    s0=$(date +%s.%N)
    "$bin/controller" --config "$tmp/$mode.toml" --addr "$a" submit --cores 1 --runtime 60 \
      --count "$jobs" --batch 10000 > /dev/null
    s1=$(date +%s.%N)
    echo "$mode $(python3 -c "print($jobs / ($s1 - $s0))")" >> "$tmp/rates"
    if [ "$mode" = pair ]; then
      # The copy's cost with a queue: both controllers' resident memory.
      wait_for "the backup to hold the queue" synced_queue
      echo "$(rss "${serve[a]}") $(rss "${serve[b]}")" >> "$tmp/memory"
    fi
    stop_all
  done
done
python3 - "$tmp/rates" "$jobs" "$tmp/memory" <<'PY'
import statistics, sys
rates = {}
for l in open(sys.argv[1]):
    mode, r = l.split()
    rates.setdefault(mode, []).append(float(r))
pair, alone = statistics.median(rates["pair"]), statistics.median(rates["alone"])
print()
print(f"| submissions, {int(sys.argv[2]):,} jobs in batches of 10,000 (median of 3) | jobs/s |")
print("|---|---:|")
print(f"| a controller alone | {alone:,.0f} |")
print(f"| a primary with its backup | {pair:,.0f} |")
print(f"| with a backup / alone | {pair / alone:.2f} |")
print(f"| rounds, alone / with a backup | {', '.join(f'{r:,.0f}' for r in rates['alone'])} / {', '.join(f'{r:,.0f}' for r in rates['pair'])} |")
mem = [list(map(int, l.split())) for l in open(sys.argv[3])]
p, b = statistics.median(m[0] for m in mem), statistics.median(m[1] for m in mem)
print()
print(f"| resident memory with {int(sys.argv[2]):,} jobs queued (median of 3) | MiB |")
print("|---|---:|")
print(f"| primary | {p / 1024:.1f} |")
print(f"| backup | {b / 1024:.1f} |")
PY
