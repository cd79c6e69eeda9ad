#!/usr/bin/env bash
# Checks `controller nodeset` against ClusterShell's own `nodeset` tool on
# fixed cases and on random ones: fold (-f), expand (-e) and count (-c) must
# print the same thing.
#
#   scripts/nodeset-vs-clustershell.sh [RANDOM_CASES]     (default 300)
#
# Installs ClusterShell from PyPI if `nodeset` is not on the PATH or its
# Python module cannot be imported.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
{ command -v nodeset && python3 -c "import ClusterShell"; } >/dev/null 2>&1 || python3 -m pip install -q ClusterShell
cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
ctl=target/$host/debug/controller
[ -x "$ctl" ] || ctl=target/debug/controller

cases=$(mktemp)
trap 'rm -f "$cases"' EXIT
cat > "$cases" <<'CASES'
vn[0000-3599]
a[2-8/2]
da[1-3]c[1-2]
vn[1-10],vn[5-20]
vn[1-10]!vn[3-4]
vn[1-10]&vn[5-20]
vn[1-10]^vn[5-20]
vn[1-4],vn[6-7]&vn[2-6]
vn[1-4]!vn2,vn10
node1,node2,node3
node[01-10]
node[001-002],node[003]
a1b1,a1b2,a2b1,a2b2
a1b1,a1b2,a2b1
x[1-3]y[1-2]z[1-2]
foo,bar
foo1,foo01
node[9-11]
node[09-11]
n[1-100/3]
r[1-2]sw[1-2]-port[1-2]
node-1,node-2
node[0-2]-eth0
c[1-2]-[1-3]
n1,n001
vn[000000-099999]!vn[000100-099899]
[1-3]
1,2,3
[1-3],5
a[1-3],[4-5]
x[1-2],1
01,1,2
CASES
python3 - "$n" >> "$cases" <<'PY'
import random, sys
random.seed(7)
ops = [",", "!", "&", "^"]
def term():
    p = random.choice(["vn", "n", "r1sw", "node-"])
    pad = random.choice([0, 2, 4])
    a = random.randrange(0, 60); b = a + random.randrange(0, 40)
    if random.random() < 0.3:
        return f"{p}{a:0{pad}d}"
    step = random.choice(["", "", "/2", "/3"])
    return f"{p}[{a:0{pad}d}-{b:0{pad}d}{step}]"
for _ in range(int(sys.argv[1])):
    k = random.randrange(1, 4)
    s = term()
    for _ in range(k - 1):
        s += random.choice(ops) + term()
    print(s)
PY

# ClusterShell's own tool, its main() called in one Python process for
# every case (a process of its own per case costs a minute of Python
# start-ups), against clemu's, a process per case.
result=$(python3 - "$ctl" "$cases" <<'PY'
import contextlib, io, subprocess, sys
from ClusterShell.CLI.Nodeset import main as clustershell_nodeset
ctl, cases = sys.argv[1], sys.argv[2]
fail = total = 0
for expr in open(cases).read().splitlines():
    for mode in ("-f", "-e", "-c"):
        total += 1
        out = io.StringIO()
        sys.argv = ["nodeset", mode, expr]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                clustershell_nodeset()
            except SystemExit:
                pass
        want = out.getvalue().rstrip("\n")
        got = subprocess.run([ctl, "nodeset", mode, expr], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout.rstrip("\n")
        if want != got:
            fail += 1
            print(f"DIFFERS: nodeset {mode} '{expr}'", file=sys.stderr)
            print(f"  ClusterShell: {want[:200]}", file=sys.stderr)
            print(f"  clemu:        {got[:200]}", file=sys.stderr)
print(fail, total)
PY
) || { echo "nodeset: the comparison with ClusterShell did not run" >&2; exit 1; }
read -r fail total <<< "$result"
# Expressions both must refuse (the messages differ; the exit status says).
for expr in 'a[1-3]!' 'a!' '!a' 'a,,b' 'a,' ',a' 'a&' 'a[1-3]^' 'a[3-1]' 'a[1-2' 'a[1-9/0]'; do
  total=$((total + 1))
  if nodeset -f "$expr" >/dev/null 2>&1; then cs=ok; else cs=refused; fi
  if "$ctl" nodeset -f "$expr" >/dev/null 2>&1; then us=ok; else us=refused; fi
  if [ "$cs" != "$us" ]; then
    fail=$((fail + 1))
    echo "DIFFERS: nodeset -f '$expr': ClusterShell $cs, clemu $us"
  fi
done

# A long list of names in shuffled order, from standard input.
total=$((total + 1))
names=$(python3 -c 'import random; n = list(range(20000)); random.seed(3); random.shuffle(n); print("\n".join(f"vn{i:05d}" for i in n))')
want=$(nodeset -f <<< "$names")
got=$("$ctl" nodeset -f <<< "$names")
if [ "$want" != "$got" ]; then
  fail=$((fail + 1))
  echo "DIFFERS: 20,000 shuffled names on standard input: ClusterShell $want, clemu $got"
fi

echo "nodeset: $((total - fail)) of $total cases agree with ClusterShell ($(nodeset --version 2>&1 | head -1))"
[ "$fail" -eq 0 ]
