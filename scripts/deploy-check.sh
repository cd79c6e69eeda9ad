#!/usr/bin/env bash
# controller deploy and undeploy over real ssh. Three agent hosts, each an
# sshd in a network namespace, with a mount namespace (its own empty
# directory where the agents go) and a PID namespace of its own, as three
# VMs would have; a key made for the test. The controller runs in a
# namespace of its own.
#
#   sudo scripts/deploy-check.sh          (root; installs openssh-server)
#
# 1. deploy --dry-run prints the commands and touches no host.
# 2. With h3's sshd down, deploy starts h1 and h2, names h3 as unreachable
#    on one line, and exits 1.
# 3. h3's sshd up: deploy again leaves h1 and h2 alone (already up, same
#    pids) and starts h3.
#    A controller of another build (its agent a byte longer) refuses every
#    host, naming the agent that runs there, and changes nothing.
# 4. runworkload replays the 200-job KTH sample across the three hosts.
# 5. undeploy stops every agent, finds no job process left, fetches the
#    logs and removes each host's directory.
# 6. The same deploy and undeploy through ClusterShell's clush
#    ([agents] clush = true; pip install ClusterShell).
# Then every job of the trace has completed with exactly one record, and
# nothing but sshd runs in any host's namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bridge.sh
source scripts/lib/bridge.sh
[ "$(id -u)" -eq 0 ] || { echo "deploy-check: needs root (namespaces, sshd)" >&2; exit 2; }
command -v ip >/dev/null || { echo "deploy-check: needs iproute2" >&2; exit 2; }
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
fi
mkdir -p /run/sshd   # sshd's privilege separation directory

cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/controller" ] || bin=$PWD/target/debug
trace=$PWD/configs/workloads/kth-sp2-200.swf

p=cd$$
tmp=$(mktemp -d -t clemu-deploy-check-XXXXXX)
names=(sw ct h1 h2 h3)
declare -A ip=([ct]=10.98.0.1 [h1]=10.98.0.11 [h2]=10.98.0.12 [h3]=10.98.0.13)
declare -A sshd=()
cleanup() {
  for h in "${!sshd[@]}"; do kill "${sshd[$h]}" 2>/dev/null || true; done
  ip netns exec "$p-ct" "$bin/controller" --config "$tmp/cluster.toml" shutdown >/dev/null 2>&1 || true
  sleep 0.3
  for n in "${names[@]}"; do
    for pid in $(ip netns pids "$p-$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$p-$n" 2>/dev/null || true
  done
  if [ "${KEEP:-0}" = 1 ]; then echo "deploy-check: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "deploy-check: FAILED: $*" >&2; KEEP=1; exit 1; }

bridge_up "$p" "ct=${ip[ct]}" "h1=${ip[h1]}" "h2=${ip[h2]}" "h3=${ip[h3]}"

# The test's key, and sshd's host key.
ssh-keygen -q -t ed25519 -N '' -f "$tmp/key"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key"
cp "$tmp/key.pub" "$tmp/authorized_keys"
mkdir -p "$tmp/remote"   # each host mounts its own empty one over it
start_sshd() { # h1|h2|h3
  cat > "$tmp/sshd-$1.conf" <<CONF
ListenAddress ${ip[$1]}
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
Subsystem sftp /usr/lib/openssh/sftp-server
CONF
  ip netns exec "$p-$1" unshare --mount --pid --fork --mount-proc --propagation private \
    sh -c "mount -t tmpfs -o mode=755 tmpfs '$tmp/remote' && exec /usr/sbin/sshd -D -e -f '$tmp/sshd-$1.conf'" \
    2>> "$tmp/sshd-$1.log" &
  sshd[$1]=$!
  disown "${sshd[$1]}"
  for _ in $(seq 50); do
    ssh_to "$1" true 2>/dev/null && return 0
    sleep 0.1
  done
  fail "sshd of $1 does not answer"
}
ssh_opts="-i $tmp/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
# shellcheck disable=SC2086
ssh_to() { h=$1; shift; ip netns exec "$p-ct" ssh -o BatchMode=yes $ssh_opts "root@${ip[$h]}" "$@"; }

cat > "$tmp/cluster.toml" <<TOML
[controller]
listen = "${ip[ct]}:7817"
state_dir = "$tmp/state"
record_dir = "$tmp/records"
schedule_interval_s = 0.001

[agents]
local = false
deploy_dir = "$tmp/remote/clemu"
ssh_options = "$ssh_opts"

[[agents.host]]
name = "h1"
nodes = "vn[001-034]"
address = "root@${ip[h1]}"
[[agents.host]]
name = "h2"
nodes = "vn[035-068]"
address = "root@${ip[h2]}"
[[agents.host]]
name = "h3"
nodes = "vn[069-102]"
address = "root@${ip[h3]}"

[[nodes]]
names = "vn[001-102]"
cpus = 1
memory = "1G"
TOML
ctl() { ip netns exec "$p-ct" "$bin/controller" --config "$tmp/cluster.toml" "$@"; }

start_sshd h1
start_sshd h2
ctl serve --detach > /dev/null

# 1. A dry run says what it would do, and does nothing.
ctl deploy --dry-run > "$tmp/dry-run.txt"
grep -q "scp .*agent .*sigsleep root@${ip[h1]}:$tmp/remote/clemu/bin/" "$tmp/dry-run.txt" ||
  fail "the dry run does not show the copy: $(cat "$tmp/dry-run.txt")"
grep -q -- "--nodes 'vn\[069-102\]'" "$tmp/dry-run.txt" || fail "the dry run does not show h3's agent"
ssh_to h1 "test ! -e $tmp/remote/clemu" || fail "the dry run touched h1"
echo "1. deploy --dry-run: $(grep -c '^#' "$tmp/dry-run.txt") hosts planned, nothing touched"
# A directory deploy did not make is neither written into nor removed.
ssh_to h1 "mkdir -p $tmp/remote/theirs && echo keep > $tmp/remote/theirs/data"
sed "s|^deploy_dir = .*|deploy_dir = \"$tmp/remote/theirs\"|" "$tmp/cluster.toml" > "$tmp/theirs.toml"
if ip netns exec "$p-ct" "$bin/controller" --config "$tmp/theirs.toml" deploy --hosts h1 \
  > /dev/null 2> "$tmp/theirs.err"; then fail "deploy wrote into a directory it did not make"; fi
grep -q "deploy did not make it" "$tmp/theirs.err" || fail "$(cat "$tmp/theirs.err")"
[ "$(ssh_to h1 "ls $tmp/remote/theirs")" = data ] || fail "deploy touched a directory it did not make"
echo "   a directory deploy did not make: refused, untouched"

# 2. h3 unreachable: named on one line; the other two come up.
set +e
ctl deploy > "$tmp/deploy1.out" 2> "$tmp/deploy1.err"
code=$?
set -e
[ "$code" = 1 ] || fail "deploy with h3 down exited $code: $(cat "$tmp/deploy1.err")"
[ "$(wc -l < "$tmp/deploy1.err")" = 1 ] || fail "more than one line for h3: $(cat "$tmp/deploy1.err")"
grep -q "host h3 (root@${ip[h3]}): unreachable" "$tmp/deploy1.err" || fail "h3 is not named: $(cat "$tmp/deploy1.err")"
for h in h1 h2; do
  grep -E "^$h .* started, registered" "$tmp/deploy1.out" > /dev/null || fail "$h did not come up: $(cat "$tmp/deploy1.out")"
done
echo "2. deploy with h3's sshd down: $(cat "$tmp/deploy1.err")"
cat "$tmp/deploy1.out"

# 3. Again, h3 reachable: h1 and h2 are left alone.
start_sshd h3
pid_of() { awk -v h="$1" '$1 == h { print $4 }' "$2"; }
ctl deploy > "$tmp/deploy2.out" || fail "second deploy: $(cat "$tmp/deploy2.out")"
for h in h1 h2; do
  grep -E "^$h .* already up, registered" "$tmp/deploy2.out" > /dev/null || fail "$h was not left alone: $(cat "$tmp/deploy2.out")"
  [ "$(pid_of $h "$tmp/deploy1.out")" = "$(pid_of $h "$tmp/deploy2.out")" ] || fail "$h's agent changed"
done
grep -E "^h3 .* started, registered" "$tmp/deploy2.out" > /dev/null || fail "h3 did not come up"
echo "3. deploy again: h1 and h2 already up (same pids), h3 started"
cat "$tmp/deploy2.out"
[ "$(ssh_to h2 "stat -c %a $tmp/remote/clemu/secret")" = 600 ] || fail "the secret is not mode 600"
ctl nodes --hosts
mkdir "$tmp/other-build"
cp "$bin/controller" "$bin/agent" "$bin/sigsleep" "$tmp/other-build/"
printf '\0' >> "$tmp/other-build/agent"
set +e
ip netns exec "$p-ct" "$tmp/other-build/controller" --config "$tmp/cluster.toml" deploy \
  > "$tmp/deploy3.out" 2> "$tmp/deploy3.err"
code=$?
set -e
[ "$code" = 1 ] || fail "a controller of another build deployed: $(cat "$tmp/deploy3.out")"
[ "$(grep -c 'runs an agent of another build' "$tmp/deploy3.err")" = 3 ] ||
  fail "the other build's deploy: $(cat "$tmp/deploy3.err")"
for h in h1 h2 h3; do
  [ "$(pid_of $h "$tmp/deploy2.out")" = "$(pid_of $h "$tmp/deploy3.out")" ] || fail "$h's agent changed"
done
echo "   a controller of another build: $(head -1 "$tmp/deploy3.err")"


# 4. A replay across the three hosts.
ip netns exec "$p-ct" "$bin/runworkload" --config "$tmp/cluster.toml" --controller "${ip[ct]}:7817" \
  --secret-file "$tmp/state/secret" --workload "$trace" --speedup 40000 -q --out "$tmp/run" \
  > "$tmp/runworkload.log" 2>&1 || { tail "$tmp/runworkload.log"; fail "the replay failed"; }
echo "4. replayed $(grep -vc '^;' "$trace") jobs across h1, h2, h3"

# 5. Undeploy: stopped, no job left, logs fetched, directories gone.
ctl undeploy --logs "$tmp/logs" > "$tmp/undeploy.out" || fail "undeploy: $(cat "$tmp/undeploy.out")"
cat "$tmp/undeploy.out"
for h in h1 h2 h3; do
  grep -E "^$h .* stopped, log in .*, $tmp/remote/clemu removed" "$tmp/undeploy.out" > /dev/null ||
    fail "$h was not undeployed clean"
  grep -q "registered" "$tmp/logs/$h.log" || fail "$h's log was not fetched"
  ssh_to "$h" "test ! -e $tmp/remote/clemu" || fail "$h keeps its directory"
  others=$(for pid in $(ip netns pids "$p-$h"); do
    c=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [ -z "$c" ] || [ "$c" = sshd ] || [ "$c" = unshare ] || echo "$pid:$c"
  done)
  [ -z "$others" ] || fail "left running on $h: $others"
done
python3 - "$trace" "$tmp/run" <<'PY' || fail "see above"
import collections, csv, glob, sys
jobs = [l for l in open(sys.argv[1]) if l.strip() and not l.startswith(";")]
run = glob.glob(sys.argv[2] + "/*/")[0]
rows = list(csv.DictReader(open(run + "jobs.csv")))
states = collections.Counter(r["state"] for r in rows)
assert len(rows) == len(jobs) and states == {"completed": len(jobs)}, states
hosts = collections.Counter(r["nodes"][:4] for r in rows)
PY
"$bin/calcmets" dump "$tmp"/run/*/records | python3 -c '
import collections, json, sys
per = collections.Counter(json.loads(l)["id"] for l in sys.stdin)
assert len(per) == 200 and set(per.values()) == {1}, per.most_common(3)
print(f"   200 jobs completed, one record each")'
echo "5. undeploy: every agent stopped, no job left, logs fetched, directories removed"

# 6. The same through clush.
command -v clush >/dev/null || python3 -m pip install -q ClusterShell
sed 's/^local = false$/local = false\nclush = true/' "$tmp/cluster.toml" > "$tmp/clush.toml"
cctl() { ip netns exec "$p-ct" "$bin/controller" --config "$tmp/clush.toml" "$@"; }
cctl deploy --dry-run | grep -q "^clush -N -S -t 5 -w ${ip[h1]} -l root" || fail "the dry run does not use clush"
cctl deploy > "$tmp/clush-deploy.out" || fail "deploy through clush: $(cat "$tmp/clush-deploy.out")"
[ "$(grep -c ' started, registered' "$tmp/clush-deploy.out")" = 3 ] || fail "$(cat "$tmp/clush-deploy.out")"
cctl undeploy --logs "$tmp/clush-logs" > "$tmp/clush-undeploy.out" || fail "undeploy through clush: $(cat "$tmp/clush-undeploy.out")"
[ "$(grep -c ' stopped, log in ' "$tmp/clush-undeploy.out")" = 3 ] || fail "$(cat "$tmp/clush-undeploy.out")"
for h in h1 h2 h3; do
  grep -q "registered" "$tmp/clush-logs/$h.log" || fail "$h's log was not fetched through clush"
  ssh_to "$h" "test ! -e $tmp/remote/clemu" || fail "$h keeps its directory"
done
echo "6. deploy and undeploy through clush: 3 agents up, then stopped and removed"
echo "deploy-check: OK"
