#!/usr/bin/env bash
# Slurm's commands side by side: the same job set goes through a real
# Slurm cluster on this host (scripts/slurm-local.sh, 4 nodes of 4 cores)
# and through clemu's commands on an emulated cluster of the same shape
# (`clemu-slurm up`); every command's output is then compared, line by
# line. Job ids, dates and the seconds of elapsed times are normalised;
# nothing else is. Exits 1 on any difference, showing it. Root (for the
# real Slurm's daemons).
#
#   scripts/slurm-face.sh
#
# What is left out, and why, is in docs/slurm.md ("Side by side").
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cargo build -q
host=$(rustc -vV | sed -n 's/^host: //p')
bin=$PWD/target/$host/debug
[ -x "$bin/clemu-slurm" ] || bin=$PWD/target/debug
work=$(mktemp -d -t clemu-slurm-face-XXXXXX)
export SLURM_LOCAL_DIR=$work/slurm
cleanup() {
  "$bin/clemu-slurm" down --dir "$work/clemu" >/dev/null 2>&1 || true
  scripts/slurm-local.sh down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "slurm-face: FAIL: $*" >&2; exit 1; }

# The reference's backfill pass runs every 30 s by default; one that lands
# while the queue is being looked at gives its pending jobs estimated
# starts and nodes, and may start a job of its own with a year's limit.
# Where it lands is chance: here it waits an hour, so that every job is
# started by the main scheduler, as clemu's queue is read against.
SLURM_LOCAL_SCHEDULER_PARAMETERS=bf_interval=3600 \
  scripts/slurm-local.sh up 4 4 --accounting >/dev/null
mkdir -p "$work/clemu"
"$bin/clemu-slurm" up --nodes 4 --cpus 4 --memory 1000M --dir "$work/clemu" > "$work/clemu.env"

# The job set, then every command, in one environment; outputs to $1/.
# Whole-node jobs (4 cores on 4-core nodes), so that both place them
# alike: the first four run, one per node, and the rest wait.
jobset() {
  local out=$1
  mkdir -p "$out/run"
  cd "$out/run"
  # Until nothing is left in the queue.
  empty() {
    for _ in $(seq 300); do
      [ -z "$(squeue -h -o %i)" ] && break
      sleep 0.1
    done
  }
  # A job alone on the cluster, so that both place it alike (Slurm's
  # placement of a job that lands beside others differs: docs/slurm.md).
  alone() { sbatch "$@" >/dev/null; empty; }
  # Twenty jobs first, over before the rest: the ids compared start past
  # 20, so that normalising them leaves counts and limits alone.
  for _ in $(seq 10); do sbatch -o /dev/null --wrap true >/dev/null; done
  empty
  # Four that ask for a node count: where their cores go, as their
  # scripts are told.
  local show='echo $SLURM_JOB_NUM_NODES $SLURM_NTASKS $SLURM_CPUS_PER_TASK $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE'
  alone -N 2 -n 4 -o "$out/run/spread-2" --wrap "$show"
  alone -N 3 -o "$out/run/spread-3" --wrap "$show"
  alone -n 2 -c 2 --mem=100M -o "$out/run/spread-c" --wrap "$show \$SLURM_MEM_PER_NODE"
  # Its tasks per node only: Slurm 22.05 says SLURM_JOB_CPUS_PER_NODE=3,2
  # for it, fewer CPUs than its tasks hold (docs/slurm.md).
  alone -N 2 -n 3 -c 2 -o "$out/run/spread-t" \
    --wrap 'echo $SLURM_JOB_NUM_NODES $SLURM_NTASKS $SLURM_TASKS_PER_NODE'
  # Ends of every kind, for sacct: an exit code, steps (one failing), a
  # signal, memory asked, two nodes and a limit.
  alone -J failing -o /dev/null --wrap 'exit 3'
  alone -J steps -n 2 -o /dev/null --wrap 'srun true; srun -n 1 false; true'
  alone -J sig -o /dev/null --wrap 'kill -9 $$'
  alone -J mem -n 2 --mem=200M -o /dev/null --wrap true
  alone -J two -t 5 -N 2 -n 2 -o /dev/null --wrap true
  # And one cancelled while it runs (its output: the step's line). Its
  # one process is the command (`exec`): with a shell waiting on a child,
  # Slurm's SIGTERM reaches the two in either order, and a run of
  # 2026-12-01 saw the shell report its child `Terminated` and the batch
  # step end FAILED 15:0 rather than CANCELLED 0:15. It has a limit:
  # when Slurm's backfill, rather than its main scheduler, happens to
  # start a job without one, it gives it a year (365-00:00:00), and which
  # of the two starts it is a race on the reference's side (runs of
  # 2026-11-29 and 2026-12-02 saw it).
  local c
  c=$(sbatch --parsable -J cancelled -t 10 -o "$out/run/cancelled" --wrap 'exec sleep 100')
  for _ in $(seq 300); do
    [ "$(squeue -h -j "$c" -o %t)" = R ] && break
    sleep 0.1
  done
  # Slurm's database needs a moment to have its start, and its end.
  for _ in $(seq 100); do
    [ "$(sacct -X -n -P -j "$c" -o State)" = RUNNING ] && break
    sleep 0.1
  done
  sleep 1
  scancel "$c"
  for _ in $(seq 100); do
    [ "$(sacct -X -n -P -j "$c" -o State)" = "CANCELLED by 0" ] && break
    sleep 0.1
  done
  empty
  # The names of the variables a batch script gets, but for the three
  # docs/slurm.md says clemu does not set. (After the jobs whose ids the
  # sacct lines below name.)
  alone -o "$out/run/variables" --wrap 'env | sed -n "s/^\(SLURM[A-Z_]*\)=.*/\1/p" |
    grep -v -x -e SLURM_CONF -e SLURM_TASK_PID -e SLURM_WORKING_CLUSTER | sort'
  # All of each node's memory, and mail (sent by neither): no
  # SLURM_MEM_PER_NODE; and the node's TMPDIR where the submitter has
  # none.
  (unset TMPDIR; alone --mem=0 --mail-type=END,FAIL -o "$out/run/mem0" \
    --wrap 'echo ${SLURM_MEM_PER_NODE-unset} ${TMPDIR-unset}')
  # One whose output cannot be opened: its batch step fails to launch.
  alone -J noout -o /nonexistent/noout.out --wrap true
  # Steps whose task a signal ends: what srun says of each.
  alone -n 1 -o "$out/run/srun-signals" --wrap 'for s in TERM KILL INT; do
    srun sh -c "kill -$s \$\$"; echo "$s $?"; done'
  # Steps with cores of their own (-c): what their tasks are told, and
  # steps the job's CPUs cannot hold.
  alone -n 4 -o "$out/run/srun-c" --wrap 'srun -c 2 -n 2 sh -c "echo \$SLURM_PROCID \$SLURM_CPUS_PER_TASK" | sort
    srun -c 2 -n 4 true; echo $?; srun -n 5 true; echo $?
    srun -n 1 --exact echo exact; srun -n 1 --overlap echo overlap; srun --exclusive -n 1 echo exclusive'
  # Steps over several nodes: each task's node and its number there, and
  # the step's layout, as srun lays it out (-N, -w, -x, -c); steps it
  # refuses; the tasks that ended alike on a node, said in one line;
  # output files named by node and task. Then sacct's lines for those
  # steps.
  alone -J spread -N 3 --exclusive -o "$out/run/srun-nodes" --wrap 'show="echo \$SLURM_PROCID \$SLURM_NODEID \$SLURMD_NODENAME \$SLURM_LOCALID \$SLURM_STEP_NODELIST \$SLURM_STEP_TASKS_PER_NODE \$SLURM_NNODES \$SLURM_NTASKS \$SLURM_CPUS_ON_NODE \$SLURM_GTIDS \$SLURM_DISTRIBUTION"
    for a in "" "-n 7" "-n 5 -c 2" "-N 2 -n 5" "-n 2" "-w node2 -n 1" "-w node3 -n 6" \
      "-x node2 -N 2" "-x node2" "-N 4" "-w node9" "-n 13" "-N 2-1"; do
      echo "== $a"; { srun $a -l sh -c "$show"; echo "exit $?"; } 2>&1 | sort
    done
    for c in "exit 2" "exit \$((SLURM_PROCID % 2 + 1))"; do
      echo "== $c"; { srun -n 7 sh -c "$c"; echo "exit $?"; } 2>&1 | sort
    done
    srun -n 4 -o "task-%n-%t" true; ls task-*; rm task-*'
  # A step cancelled (scancel JOB.STEP) while its tasks run: what its
  # srun says, and the job going on. Then sacct's lines for its steps.
  local sc
  rm -f started-*
  sc=$(sbatch --parsable -J stepcancel -N 2 -n 3 -o "$out/run/step-cancel" --wrap 'srun -n 3 sh -c "touch started-\$SLURM_PROCID; exec sleep 100"
    echo "srun said $?"; srun -n 1 echo after')
  for _ in $(seq 300); do
    [ -e started-0 ] && [ -e started-1 ] && [ -e started-2 ] && break
    sleep 0.1
  done
  scancel "$sc.0"
  empty
  rm -f started-*
  # A hint (no threads to use or leave on these nodes), and an output
  # file added to.
  alone --hint=nomultithread -o "$out/run/hint" --wrap 'echo $SLURM_HINT $SLURM_CPUS_ON_NODE'
  echo before > "$out/run/appended"
  alone --open-mode=append -o "$out/run/appended" --wrap 'echo after'
  # Whole nodes: the cores each job is given and how its tasks are dealt.
  local a
  for a in "" "-n 2" "-n 6" "-N 2 -n 3" "-c 2" "-n 2 -c 3"; do
    # shellcheck disable=SC2086 # the options are words
    alone --exclusive $a -o "$out/run/exclusive-${a// /}" --wrap "$show \$SLURM_CPUS_ON_NODE"
  done
  # Nodes named (-w) and excluded (-x): where each job goes and how its
  # tasks are laid out; and fewer tasks than nodes named, with sbatch's
  # warning.
  local named='echo $SLURM_JOB_NODELIST $SLURM_JOB_NUM_NODES $SLURM_TASKS_PER_NODE'
  for a in "-w node4 -N 2" "-w node2 -n 6" "-w node[1,3] -N 3" "-x node[1-2] -N 2" \
    "-w node1 -x node2 -n 8" "-w node[2-3]"; do
    # shellcheck disable=SC2086 # the options are words
    alone $a -o "$out/run/named-${a//[ \[\],]/}" --wrap "$named"
  done
  alone -n 1 -w 'node[3-4]' -o "$out/run/named-first" --wrap "$named" 2> "$out/run/named-warning"
  {
    sbatch -J longname_job_x -n 4 -t 1:00:00 --wrap "sleep 120"
    sbatch --parsable -n 4 --wrap "sleep 120"
    printf '#!/bin/sh\n#SBATCH -J fromstdin\n#SBATCH -n 4\n#SBATCH -t 5\nsleep 120\n' | sbatch
    sbatch --parsable -n 4 -t 10 --comment hello --wrap "sleep 120"
    sbatch --parsable -n 4 --wrap "sleep 120"
    sbatch --parsable -n 4 -J second --wrap "sleep 120"
    sbatch --parsable -n 4 -a 1-3 --wrap "sleep 120"
    sbatch --parsable -n 4 -H -J held --wrap "sleep 120"
  } > "$out/sbatch" 2>&1
  # One that waits for the first to complete, one for five minutes past
  # its start, and one for two kinds, shown in the order asked; their ids
  # are the last three.
  local first held
  first=$(grep -oE '[0-9]+' "$out/sbatch" | head -1)
  held=$(grep -oE '[0-9]+' "$out/sbatch" | sed -n 8p)
  sbatch --parsable -n 4 -J after -d "afterok:$first" --wrap "sleep 120" >> "$out/sbatch" 2>&1
  sbatch --parsable -n 4 -J later -d "after:$first+5" --wrap "sleep 120" >> "$out/sbatch" 2>&1
  sbatch --parsable -n 4 -J mixed -d "afterok:$first,afterany:$held" --wrap "sleep 120" \
    >> "$out/sbatch" 2>&1
  # Until the first four run.
  for _ in $(seq 300); do
    [ "$(squeue -h -t R -o %i | wc -l)" -eq 4 ] && break
    sleep 0.1
  done
  local n=0
  run() {
    n=$((n + 1))
    local f rc=0
    f=$out/$(printf %02d "$n")
    echo "\$ $*" > "$f"
    "$@" >> "$f" 2>&1 || rc=$?
    echo "[exit $rc]" >> "$f"
  }
  run cat "$out/run/spread-2" "$out/run/spread-3" "$out/run/spread-c" "$out/run/spread-t" \
    "$out/run/cancelled"
  run cat "$out/run/variables"
  run cat "$out/run/mem0"
  run cat "$out/run/srun-signals"
  run cat "$out/run/srun-c"
  run cat "$out/run/srun-nodes"
  run sacct -P -o JobName,NNodes,NodeList,NTasks,AllocCPUS --name spread
  # Slurm's step daemon and srun say a cancelled step in either order.
  run sort "$out/run/step-cancel"
  run sacct -P -o JobName,State,ExitCode,NNodes,NTasks --name stepcancel
  run cat "$out/run"/exclusive-*
  run cat "$out/run/hint" "$out/run/appended"
  run cat "$out/run"/named-*
  # How each ended, and its steps' highest end (DerivedExitCode).
  run sacct -P -o JobName,State,ExitCode,DerivedExitCode --name failing,steps,sig,noout
  run squeue
  run squeue -h -o '%i %t'
  run squeue -h -o '%.5i %P %j %u %t %D %C %l %R %Z %k'
  run squeue --format='%i|%T' --noheader --name second
  run squeue -O jobid,state,name,username,numnodes,numcpus,timelimit,reason,partition
  run squeue -O jobid,numtasks,eligibletime:22,numcpus
  run squeue -t PD
  run squeue -t R -p batch -h
  run squeue -j 999
  run squeue -t bogus
  run squeue -l
  run squeue -h -o '%i %E %r' -t PD
  run squeue -o '%i|%B|%c|%d|%f|%G|%h|%H|%I|%J|%n|%O|%s|%v|%w|%W|%x|%X|%y|%Y|%z'
  run squeue -h -O jobid,batchhost,mincpus,groupid,oversubscribe,sct,nice -t R
  run sinfo
  run sinfo -N
  run sinfo -s
  run sinfo -l
  run sinfo -N -l
  run sinfo -h -o %P
  run sinfo -aho %F/%C
  run sinfo -a -o "%P %G %l %p %c %m"
  run sinfo -o "%N %D %t %c %m"
  run sinfo -O partition,available,nodes,cpus,memory,statelong,nodelist
  # As Open OnDemand lists nodes, but for the host each runs on: all of
  # the real Slurm's run on this one.
  run sinfo -ahNO nodelist:100,gres:512,gresused:512,statelong
  # The users' defaults in the environment: SQUEUE_FORMAT before
  # SQUEUE_FORMAT2, both after -o; SINFO_FORMAT under -l's date, not for
  # -N; SACCT_FORMAT after -b.
  run env SQUEUE_FORMAT2=jobid:6,name:8,state squeue -t PD
  run env SQUEUE_FORMAT='%i %t' SQUEUE_FORMAT2=jobid:6 squeue -t PD
  run env SQUEUE_FORMAT2=jobid:6 squeue -t PD -o '%i|%j'
  run env SINFO_FORMAT='%P %D %t' sinfo -l
  run env SINFO_FORMAT='%P %D %t' sinfo -N
  # As Open OnDemand lists jobs: the cluster named (-M), every field it
  # reads, `;` between them, but for the priority (%Q: docs/slurm.md) and
  # the time left (%L: the jobs running here started at other instants on
  # each side, and their seconds left are not normalised).
  run squeue --all --noconvert -M clemu -o \
    '%a;%A;%b;%B;%c;%C;%d;%D;%e;%E;%f;%F;%g;%G;%h;%H;%i;%I;%j;%J;%k;%K;%l;%m;%M;%n;%N;%o;%O;%q;%P;%r;%S;%t;%T;%u;%U;%v;%V;%w;%W;%x;%X;%y;%Y;%z;%Z'
  # And as its newer adapter does: -O names, each field ended by the unit
  # separator (ExcNodes is not a field of Slurm 22.05's: said, and
  # empty), but for TimeLeft, as above.
  local us=$'\x1f' o="" f
  for f in Account JobID BatchHost MinCpus NumCPUs MinTmpDisk NumNodes EndTime Dependency \
    Feature ArrayJobID GroupName GroupID OverSubscribe Sockets JobArrayID Cores Name Threads \
    Comment ArrayTaskID TimeLimit MinMemory TimeUsed ReqNodes NodeList Command \
    Contiguous QOS Partition Reason StartTime StateCompact State UserName UserID Reservation \
    SubmitTime WCKey Licenses ExcNodes CoreSpec Nice SchedNodes SCT WorkDir tres-alloc \
    tres-per-node; do
    o+="$f:$us,"
  done
  run squeue -M clemu --all --noconvert -O "$o"
  run sinfo -M clemu -s
  run squeue -M nosuch
  run sbatch -M nosuch --wrap true
  # sacct: without QOS (the reference's database, just made, says
  # `Unknown`), TotalCPU and MaxRSS (the real Slurm here gathers
  # neither), AllocTRES of a job asking memory (not scheduled there),
  # node lists, job 14, which Slurm gives fewer CPUs than its tasks hold,
  # and jobs just submitted, which Slurm's database may not have yet
  # (docs/slurm.md).
  local listed=1,11,12,13,15,16,17,18,19,20
  # Every end at least a second ago: a window of "now" holds none.
  sleep 1
  run sacct -P --format=JobID,JobName,Partition,State,ExitCode,AllocCPUS,NNodes,ReqMem,Timelimit \
    -S 00:00 -j "$listed"
  run sacct -X -n --format=JobID,JobName%12,State,ExitCode,NCPUS,NNodes --name failing,steps,sig,mem,two,cancelled
  run sacct -j 15,16,17 --format=JobID,JobIDRaw,JobName%20,State,ExitCode,NCPUS
  run sacct -X -p --delimiter=, -o jobid,state,exitcode,reqmem,alloctres -j 19
  run sacct -X -n -o JobID,ReqMem,Timelimit --units=K -j 1,18,19
  run sacct -X -o JobID,State -s CA,F
  run sacct -X -o JobID,JobName,State -s CA,F,TO -S 00:00 -E now
  run sacct -j 999 -X
  run env SACCT_FORMAT=JobID,JobName%12,State sacct -X --name failing,steps,sig
  run env SACCT_FORMAT=JobID,JobName%12,State sacct -X -b --name failing,steps,sig
  run sacct -X -P -o JobID,Account,User -j "$listed"
  # Dates as SLURM_TIME_FORMAT asks them (the seconds since the epoch,
  # as ReFrame reads sacct; a format of one's own; one Slurm calls
  # invalid), with their digits set aside, as each side ran at its time.
  local digits='s/\b1[0-9]{9}\b/EPOCH/g; s/[0-9]{2}:[0-9]{2}:[0-9]{2}/TIME/g'
  run sh -c "SLURM_TIME_FORMAT=%s sacct -X -j $listed -o JobID,Submit,Start,End | sed -E '$digits'"
  run sh -c "SLURM_TIME_FORMAT=%s sacct -X -P -n -j $listed -o JobID,End | sed -E '$digits'"
  run sh -c "SLURM_TIME_FORMAT='%Y %j' squeue -h -o '%i %V' -t PD"
  run sh -c "SLURM_TIME_FORMAT=relative scontrol show job $first | grep -o 'SubmitTime=[^ ]*' | sed -E '$digits'"
  # (Its error after its table: the two are written in their own
  # orders.)
  run sh -c "SLURM_TIME_FORMAT=bogus squeue -h -o '%i %V' -j $first 2> $out/run/tf-err; cat $out/run/tf-err"
  # Each of them, with its steps, as sacct --json writes it, key by key.
  run sh -c "sacct --json -j $listed | python3 $repo/scripts/lib/slurm_json.py"
  # Open OnDemand's, but for TotalCPU and MaxRSS (above) and Elapsed
  # (the cancelled job runs for as long as each side takes to see it
  # running).
  run sacct -M clemu -P --delimiter $'\x1f' -n --units G --allocations -j "$listed" \
    -o User,Group,JobId,JobName,ReqMem,AllocCPUS,ReqCPUS,Timelimit,State,Partition,Submit,Start,End,ReqTRES
  run squeue -h -o '%i %a %q' -t PD
  run scontrol update "JobId=$held" TimeLimit=100
  # Slurm sets a waiting job's AccrueTime when a scheduling pass looks at
  # it, and its main pass stops at the first job that cannot start: the
  # rest wait for the backfill pass (every 30 s). Until it has run, a job
  # waiting for resources or priority would show 0, which is no
  # difference of clemu's but of when the command ran.
  for _ in $(seq 450); do
    squeue --json | python3 -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
sys.exit(any(j["job_state"] == "PENDING" and j["state_reason"] in ("Resources", "Priority")
             and j["accrue_time"] == 0 for j in jobs))' && break
    sleep 0.1
  done
  # Every job as squeue --json writes it, key by key (times and
  # priorities aside: scripts/lib/slurm_json.py).
  run sh -c "squeue --json | python3 $repo/scripts/lib/slurm_json.py"
  run sh -c "sinfo --json | python3 $repo/scripts/lib/slurm_json.py"
  run squeue -h -o '%i %j %l %r' -t PD
  run scontrol release "$held"
  # Root's hold of a running job: it runs on, held by the operator, with
  # priority 0; released, it runs on as before, and a second release of
  # a job no longer held is no error.
  run scontrol hold "$first"
  run sh -c "squeue -h -o '%i %t %r' -j $first; scontrol show job $first | grep -oE '(Priority|Reason)=[^ ]*'"
  run scontrol release "$first"
  run scontrol release "$first"
  run squeue -h -o '%i %t %r' -j "$first"
  run scontrol show hostnames 'node[1-3],x5,node1'
  run scontrol show partition
  run scontrol show partition -o
  run sbatch --wrap "true" -t soon
  run sbatch --wrap "true" --hint=bogus
  run sbatch --wrap "true" --open-mode=bogus
  run sbatch --wrap "true" -w node9
  run sbatch --wrap "true" -x 'node[1-4]'
  run sbatch --wrap "true" -w node1 -x node1
  run sbatch --wrap "true" -w 'node[1-2]' -N 1
  # An administrator drains a node that runs a job, then resumes it.
  run scontrol update NodeName=node4 State=DRAIN
  run scontrol update NodeName=node4 State=DRAIN Reason=maintenance
  run sinfo -N -o '%N %t %E'
  run sinfo -R
  run sinfo -N -t drain,draining
  run sinfo -t bogus
  run sh -c "scontrol show node node4 | grep -o 'Reason=.*'"
  run scontrol ping
  # Accounts, as tools look them up (Open OnDemand, snakemake's plugin):
  # a database just made has one account, root, and its user root.
  run sacctmgr -nP show users withassoc format=account,qos where user=root cluster=clemu
  run sacctmgr -n -s list user root format=account%256
  run sacctmgr show user
  run sacctmgr show assoc
  run sacctmgr -p show account
  run sacctmgr list user format=bogus
  run sshare -U --format Account%256 --noheader
  run sshare -p -a -o account,user,rawshares
  run scontrol update NodeName=node4 State=RESUME
  # Slurm marks a resumed node not responding (`alloc*`) until its next
  # ping answers: the state once settled is compared.
  for _ in $(seq 300); do
    sinfo -h -N -o %t | grep -q '\*' || break
    sleep 0.1
  done
  run sinfo -N -o '%N %t %E'
  # srun outside a job: an allocation of its own, once the cluster is
  # idle again (so that it starts at once, as on Slurm).
  scancel -u root
  for _ in $(seq 300); do
    [ "$(sinfo -h -o %t | sort -u)" = idle ] && [ -z "$(squeue -h -o %i)" ] && break
    sleep 0.1
  done
  run sh -c "srun -n 2 -l sh -c 'echo \$SLURM_PROCID \$SLURM_STEPID \$SLURM_JOB_NAME \$SLURM_NTASKS' | sort"
  # Slurm's srun may say a task's exit before or after its last output:
  # the lines are compared, not their order.
  run bash -c "srun -J named sh -c 'echo out; exit 3' 2>&1 | sort; exit \${PIPESTATUS[0]}"
  cd /
}

(
  export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf
  jobset "$work/slurm-out"
  scancel -u root
)
(
  # shellcheck disable=SC1091
  source "$work/clemu.env"
  [ "$(command -v sbatch)" = "$work/clemu/bin/sbatch" ] || fail "clemu's sbatch is not first on PATH"
  jobset "$work/clemu-out"
  scancel -u root
)

# Job ids in order of submission, from each side's sbatch output.
ids() { grep -oE '[0-9]+' "$1/sbatch"; }
normalise() {
  local side=$1 file=$2 i=0 id expr=""
  for id in $(ids "$side"); do
    i=$((i + 1))
    # Not a number's part after a dot or an underscore (`v0.0.38`, an
    # array's index `12_38`): only whole ids.
    expr+="s/(^|[^._[:alnum:]])$id\\b/\\1J$i/g;"
  done
  # The reference Slurm runs a slurmd per node on one host, a build in
  # which the step daemon's lines carry its node's name
  # (`slurmstepd-node1:`); a cluster's one slurmd per host, and clemu,
  # write `slurmstepd:`.
  # Dates first: a date's seconds may read as a job id.
  # (And -l's date line, as C's ctime writes it.)
  # A time's minutes and seconds (`1:40:00`) are kept from the ids while
  # those are replaced: `Q` for `:` meanwhile, twice for the two.
  sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}/DATE/g;
    s/^[A-Z][a-z]{2} [A-Z][a-z]{2} [0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}$/DATE/;'"s#$work/(slurm|clemu)-out#WORK#g;"'
    s/([0-9]):([0-9]{2})/\1Q\2/g; s/([0-9]):([0-9]{2})/\1Q\2/g;'"$expr"'
    s/([0-9])Q([0-9]{2})/\1:\2/g; s/([0-9])Q([0-9]{2})/\1:\2/g;
    s/\b0:0[0-9]\b/0:0S/g; s/^slurmstepd-node[0-9]+: /slurmstepd: /' "$file" |
    if [ "$side" = "$work/slurm-out" ]; then
      # A race on the reference's side: when Slurm's backfill pass,
      # rather than its main scheduler, starts a job that asked no limit
      # on a partition without one, its database records a year
      # (365-00:00:00; 525600 minutes in --json) where it otherwise says
      # UNLIMITED (seen 2026-11-29, 2026-12-02, on jobs started on an
      # idle cluster). clemu's side is compared as it is.
      sed -E 's/365-00:00:00/UNLIMITED/g; s/365-00:00\+/ UNLIMITED/g; s/"limit": 525600/"limit": null/g'
    else
      cat
    fi
}
diffs=0
for f in "$work/slurm-out"/[0-9]* "$work/slurm-out/sbatch"; do
  name=$(basename "$f")
  if ! diff -u --label "slurm $name" --label "clemu $name" \
      <(normalise "$work/slurm-out" "$f") <(normalise "$work/clemu-out" "$work/clemu-out/$name") \
      > "$work/diff-$name"; then
    echo "slurm-face: differs: $(head -1 "$f")"
    sed 's/^/  /' "$work/diff-$name"
    diffs=$((diffs + 1))
  fi
done
total=$(ls "$work/slurm-out" | grep -c .)
total=$((total - 1))
[ "$diffs" -eq 0 ] || fail "$diffs of $total outputs differ"
echo "slurm-face: $total outputs alike, Slurm's and clemu's"
