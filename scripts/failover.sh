#!/usr/bin/env bash
# A primary controller and its backup, on real TCP between network
# namespaces, with three agent hosts and a replay driven through the list
# of controllers. Each scenario faults the controllers mid-replay, then
# checks that every job of the trace completed exactly once (one record
# each), that no core was overbooked, that no job ever ran twice at once,
# and that no process is left behind:
#
#   a  kill -9 of the primary: the backup takes over;
#   b  the primary's link cut, then restored: the backup takes over, and
#      the old primary steps down and becomes the new backup;
#   c  the backup killed, then restarted: it catches up;
#   d  both killed, then restarted from their journals;
#   e  the primary hangs (SIGSTOP: its host still accepts connections,
#      nothing answers), then goes on (SIGCONT): the backup takes over and
#      the old primary steps down.
#
# Heartbeats and timeouts are the defaults. In a, b and e the jobs must
# also keep running through the takeover: no agent may reach its fence
# and kill them (a killed job would be requeued and run again, which the
# other checks would not see).
#
#   sudo scripts/failover.sh [SCENARIO...]      (default: a b c d e)
#
# Layout: namespace <p>-sw holds a bridge; <p>-c1 and <p>-c2 hold the
# controllers (10.97.0.1 and .2), <p>-hK agent hK (10.97.0.1K, nodes
# vn[34K-33..34K], one core each), <p>-cl the replay (10.97.0.20). A cut
# sets the primary's port on the bridge down: packets vanish both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bridge.sh
source scripts/lib/bridge.sh
[ "$(id -u)" -eq 0 ] || { echo "failover: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null || { echo "failover: needs iproute2 (apt install iproute2)" >&2; exit 2; }
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(a b c d e)

cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/controller" ] || bin=$PWD/target/debug
trace=$PWD/configs/workloads/kth-sp2-200.swf
# 200 jobs over about 10 s of wall clock.
speedup=${SPEEDUP:-40000}

names=(sw c1 c2 h1 h2 h3 cl)
declare -A ip=([c1]=10.97.0.1 [c2]=10.97.0.2 [h1]=10.97.0.11 [h2]=10.97.0.12 [h3]=10.97.0.13 [cl]=10.97.0.20)
list="${ip[c1]}:7817,${ip[c2]}:7817"

p=""
tmp=""
pids=()
declare -A serve_pid=()
sampler=""
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  for pid in "${pids[@]}" "${serve_pid[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}" "${serve_pid[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  [ -z "$tmp" ] || pkill -9 -f -- "--log $tmp" 2>/dev/null || true
  [ -z "$p" ] || for n in "${names[@]}"; do ip netns del "$p-$n" 2>/dev/null || true; done
  if [ -n "$tmp" ]; then
    if [ "${KEEP:-0}" = 1 ]; then echo "failover: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  pids=(); serve_pid=(); sampler=""; p=""; tmp=""
}
trap cleanup EXIT
fail() { echo "failover: FAILED ($scenario): $*" >&2; echo "logs in $tmp" >&2; KEEP=1; exit 1; }

net_up() {
  local n hosts=()
  for n in c1 c2 h1 h2 h3 cl; do hosts+=("$n=${ip[$n]}"); done
  bridge_up "$p" "${hosts[@]}"
}
cut() { ip -n "$p-sw" link set "$p-$1-sw" down; }
mend() { ip -n "$p-sw" link set "$p-$1-sw" up; }

serve() { # c1|c2
  ip netns exec "$p-$1" "$bin/controller" --config "$tmp/cluster.toml" serve \
    --listen "${ip[$1]}:7817" --state-dir "$tmp/state-$1" 2>> "$tmp/serve-$1.log" &
  serve_pid[$1]=$!
}
kill9() { kill -9 "${serve_pid[$1]}"; wait "${serve_pid[$1]}" 2>/dev/null || true; unset "serve_pid[$1]"; }
# A client command from the replay's namespace, through the list.
ctl() { ip netns exec "$p-cl" "$bin/controller" --config "$tmp/cluster.toml" --addr "${ADDR:-$list}" "$@"; }
# One controller's own view: role, term, and its backup's state.
role() { # c1|c2 -> "primary 2" / "backup 2" / ...
  ADDR="${ip[$1]}:7817" ctl stats --format json 2>/dev/null |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["controller"]; print(c["role"], c["term"], "copying" if any(b["copying"] for b in c["backups"]) else ("with-backup" if c["backups"] else "alone"))' 2>/dev/null ||
    echo "down"
}
wait_role() { # c1|c2 pattern seconds
  local t=$(( $3 * 10 ))
  for _ in $(seq "$t"); do [[ "$(role "$1")" == $2 ]] && return 0; sleep 0.1; done
  fail "$1 is '$(role "$1")', waited $3 s for '$2'"
}
completed() {
  ctl stats --format json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"]["completed"])' 2>/dev/null || echo 0
}

run_scenario() {
  scenario=$1
  p=clf$$$scenario
  tmp=$(mktemp -d -t clemu-failover-XXXXXX)
  net_up
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret"
  chmod 600 "$tmp/secret"
  cat > "$tmp/cluster.toml" <<TOML
[controller]
listen = "${ip[c1]}:7817"
hosts = ["${ip[c1]}:7817", "${ip[c2]}:7817"]
secret_file = "$tmp/secret"
state_dir = "$tmp/unused"
schedule_interval_s = 0.001

[agents]
local = false
sigsleep = "$bin/sigsleep"

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
TOML
  serve c1
  serve c2
  local k first
  for k in 1 2 3; do
    first=$(( (k - 1) * 34 + 1 ))
    ip netns exec "$p-h$k" "$bin/agent" --controller "$list" \
      --nodes "vn[$(printf %03d $first)-$(printf %03d $((first + 33)))]" --cpus 1 --memory 1G \
      --secret-file "$tmp/secret" --record-dir "$tmp/spool-h$k" --host "h$k" \
      --sigsleep "$bin/sigsleep" 2> "$tmp/agent-h$k.log" &
    pids+=($!)
  done
  wait_role c1 "primary 1 with-backup" 30
  wait_role c2 "backup 1 *" 5

  # Every 20 ms, the live sigsleeps of this run by job: one job in two
  # processes at once is a double run.
  python3 scripts/lib/double_runs.py "$tmp" > "$tmp/sampler.log" 2>&1 &
  sampler=$!

  ip netns exec "$p-cl" "$bin/runworkload" --config "$tmp/cluster.toml" --controller "$list" \
    --secret-file "$tmp/secret" --workload "$trace" --speedup "$speedup" -q \
    --out "$tmp/run" > "$tmp/runworkload.log" 2>&1 &
  local replay=$!
  pids+=("$replay")
  for _ in $(seq 300); do [ "$(completed)" -ge 30 ] && break; sleep 0.1; done
  [ "$(completed)" -ge 30 ] || fail "the replay did not get going"
  # Three jobs that run through the fault (the trace's last a few ms of
  # wall clock each): they must run on, not be killed and started again.
  ctl submit --cores 1 --runtime 15 --count 3 > "$tmp/long.ids"
  for _ in $(seq 100); do
    ctl queue --format json | python3 -c '
import json, sys
ids = set(map(int, open(sys.argv[1]).read().split()))
sys.exit(0 if sum(j["state"] == "running" for j in json.load(sys.stdin) if j["id"] in ids) == 3 else 1)' "$tmp/long.ids" && break
    sleep 0.1
  done

  local t0 t1
  case $scenario in
    a)
      t0=$(date +%s.%N)
      kill9 c1
      wait_role c2 "primary 2 *" 20
      t1=$(date +%s.%N)
      echo "a: primary killed; the backup took over at term 2 in $(python3 -c "print(round($t1 - $t0, 2))") s"
      ;;
    b)
      t0=$(date +%s.%N)
      cut c1
      wait_role c2 "primary 2 *" 20
      t1=$(date +%s.%N)
      echo "b: primary cut off; the backup took over at term 2 in $(python3 -c "print(round($t1 - $t0, 2))") s"
      mend c1
      wait_role c1 "backup 2 *" 20
      wait_role c2 "primary 2 with-backup" 20
      grep -q "stepping down" "$tmp/serve-c1.log" || fail "c1 did not step down"
      echo "b: link restored; the old primary stepped down and follows at term 2"
      ;;
    c)
      t0=$(date +%s.%N)
      kill9 c2
      sleep 1
      wait_role c1 "primary 1 alone" 10
      serve c2
      wait_role c2 "backup 1 *" 20
      wait_role c1 "primary 1 with-backup" 20
      echo "c: backup killed and restarted: it caught up, the primary went on"
      ;;
    e)
      t0=$(date +%s.%N)
      kill -STOP "${serve_pid[c1]}"
      wait_role c2 "primary 2 *" 20
      t1=$(date +%s.%N)
      echo "e: primary hung; the backup took over at term 2 in $(python3 -c "print(round($t1 - $t0, 2))") s"
      # The replay goes on with the new primary while the old one hangs:
      # clients with the list do not wait for it (the new primary counts
      # the submissions made to it).
      local sent=0
      for _ in $(seq 100); do
        sent=$(ADDR="${ip[c2]}:7817" ctl stats --format json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["submitted"])' 2>/dev/null || echo 0)
        [ "$sent" -gt 0 ] && break
        sleep 0.1
      done
      [ "$sent" -gt 0 ] || fail "the replay waits for the hung primary"
      echo "e: the replay went on while the old primary hung: $sent jobs submitted to the new one"
      kill -CONT "${serve_pid[c1]}"
      wait_role c1 "backup 2 *" 20
      echo "e: the old primary went on, stepped down and follows at term 2"
      ;;
    d)
      t0=$(date +%s.%N)
      kill9 c1
      kill9 c2
      sleep 1
      serve c1
      serve c2
      wait_role c1 "primary 2 with-backup" 30
      wait_role c2 "backup 2 *" 10
      echo "d: both killed, restarted from their journals: c1 leads at term 2, c2 follows"
      ;;
  esac

  wait "$replay" || { tail -20 "$tmp/runworkload.log"; fail "runworkload failed"; }
  kill "$sampler"; sampler=""
  ctl wait $(cat "$tmp/long.ids") > /dev/null
  ctl queue --all --format json | python3 -c '
import json, sys
ids, t0 = set(map(int, open(sys.argv[1]).read().split())), float(sys.argv[2])
long = [j for j in json.load(sys.stdin) if j["id"] in ids]
assert len(long) == 3 and all(j["state"] == "completed" for j in long), long
again = [j["id"] for j in long if j["start"] >= t0]
assert not again, f"jobs started again after the fault: {again}"
print("   3 jobs running through the fault went on to complete, none started again")' \
    "$tmp/long.ids" "$t0" || fail "see above"
  ctl queue --all --format json > "$tmp/queue.json"
  "$bin/calcmets" dump "$tmp"/run/*/records > "$tmp/records.jsonl"
  # Through the list: it reaches whichever controller leads, which stops
  # its agents and its backup. Every process of the run must then end by
  # itself.
  ctl shutdown > /dev/null 2>&1 || true
  local who pid
  for who in "${!serve_pid[@]}" agents; do
    if [ "$who" = agents ]; then set -- "${pids[@]}"; else set -- "${serve_pid[$who]}"; fi
    for pid in "$@"; do
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && fail "$who (pid $pid) still runs 10 s after the shutdown"
    done
  done
  local csv
  csv=$(ls "$tmp"/run/*/jobs.csv)
  # Each job's nodes, expanded, for the overbooking check.
  python3 -c 'import csv,sys; [print(r["job_id"], r["nodes"]) for r in csv.DictReader(open(sys.argv[1]))]' "$csv" |
    while read -r id nodes; do echo "$id $("$bin/controller" nodeset -e "$nodes")"; done > "$tmp/nodes.txt"
  python3 scripts/lib/run_checks.py "$trace" "$tmp/records.jsonl" "$tmp/sampler.log" "$csv" \
    "$tmp/nodes.txt" --all-complete || fail "see above"
  ! grep -h "killing every job" "$tmp"/agent-h*.log ||
    fail "an agent killed its jobs: the controllers came back after its fence"

  local left
  left=$(pgrep -f -- "$tmp" || true)
  [ -z "$left" ] || fail "processes left behind: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
  echo "$scenario: OK"
  cleanup
}

for s in "${scenarios[@]}"; do run_scenario "$s"; done
echo "failover: OK (${scenarios[*]})"
