//! What the controller, its agents and its clients say to each other once
//! the handshake is done: the jobs, nodes and hosts they speak of, a
//! client's [`Request`]s and their [`Response`]s, and the orders and
//! reports between controller and agents ([`ToAgent`], [`FromAgent`]).

use serde::{Deserialize, Serialize};

/// A job as submitted. Its default is a one-core job that sleeps no time,
/// with no limit, in the default partition, waiting for nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Cores in total (spread over as many nodes as needed).
    pub cores: u32,
    /// Memory per allocated core, in MiB (0: none asked).
    pub mem_per_cpu_mb: u64,
    /// Run time the job's sigsleep sleeps, in nanoseconds.
    pub runtime_ns: u64,
    /// Wall-time limit in nanoseconds, 0 for none.
    pub walltime_ns: u64,
    /// Partition; `None` for the default one.
    pub partition: Option<String>,
    /// Submit instant to record (CLOCK_REALTIME ns); `None`: when the
    /// controller accepts it. A replay driver passes its own target.
    pub submit_ns: Option<i64>,
    /// A name to find the job by (`cancel --name`), as Slurm's
    /// `--job-name`; `None` for none.
    pub name: Option<String>,
    /// Jobs to wait for: it enters the queue once all of them are over,
    /// however they ended (Slurm's `--dependency=afterany`).
    pub after: Vec<u64>,
    /// Jobs to wait for that must complete (Slurm's `afterok`): when one
    /// ends otherwise, this job can never run; it waits, its reason
    /// `DependencyNeverSatisfied`, until cancelled, as on Slurm.
    pub after_ok: Vec<u64>,
    /// Jobs to wait for that must end otherwise than completed (Slurm's
    /// `afternotok`): when one completes, this job can never run.
    pub after_not_ok: Vec<u64>,
    /// Slurm's `singleton`: it waits for every job not yet over of the
    /// same name and user, found at submission (`singleton_jobs`). With
    /// `?`, it is one of the dependencies any one of which is enough, met
    /// once the last of those jobs is over.
    pub singleton: bool,
    /// The jobs `singleton` waits for: found by the controller when the
    /// job is submitted (what a client sends is replaced).
    pub singleton_jobs: Vec<u64>,
    /// Jobs to wait for until they have started, or ended without
    /// starting (Slurm's `after`).
    pub after_start: Vec<u64>,
    /// Arrays (their ids) whose task of the same index each task of this
    /// array waits for to complete (Slurm's `aftercorr`); a task whose
    /// index one of them lacks waits for every task of that one, as
    /// Slurm's does. Resolved at submission into each task's `after_ok`.
    pub after_corr: Vec<u64>,
    /// Delays after a dependency, as (job, ns) pairs (Slurm's
    /// `after:JOB+MINUTES`): it waits this long past that job's start (or
    /// its end, had it never started) before that dependency is met. Slurm
    /// 22.05 takes a delay on every kind and waits it out only on `after`;
    /// so does clemu, and shows it on every kind.
    pub delays: Vec<(u64, u64)>,
    /// Any one of the jobs it waits for, ending (or starting) as it waits
    /// for, lets it go (Slurm's `?` between dependencies); else all must.
    pub any_dep: bool,
    /// The dependencies in the order they were asked, each by its kind and
    /// the first job it named (an array by its id): how they are shown
    /// (`%E`, `Dependency=`), as Slurm keeps them. Empty: in the kinds'
    /// order (`after`, `afterany`, `afterok`, `afternotok`, `singleton`).
    pub dep_order: Vec<(DepKind, u64)>,
    /// The dependency lists name jobs exactly: an array's id is its first
    /// task alone, not the whole array (a client that expanded arrays
    /// itself, as sbatch does to tell `A_0` from `A`).
    pub exact_deps: bool,
    /// Submitted held by its user (Slurm's `--hold`): it waits out of the
    /// queue, its reason `JobHeldUser`, until released
    /// ([`Request::Release`]).
    pub hold: bool,
    /// With `after`: it is submitted this long after the last of them
    /// ended (its submit instant is then), as a user who waits for one
    /// job's result, thinks, then submits the next. Without, it waits in
    /// the queue from its submission.
    pub think_ns: Option<u64>,
    /// Not before this instant (CLOCK_REALTIME ns), as Slurm's `--begin`:
    /// held out of the queue until then, and submitted then (its submit
    /// instant). A replay sends its jobs a moment ahead so: the controller
    /// knows them before they come, and a late message never makes a job
    /// late. `None`: from its submission.
    pub begin_ns: Option<i64>,
    /// A job array (Slurm's `--array`): this one submission is a task per
    /// index, each a job of its own, at most `limit` of them queued or
    /// running at once (0: no limit).
    pub array: Option<ArraySpec>,
    /// Generic resources it asks of every node it gets (name, count), as
    /// Slurm's `--gres`; empty for none.
    pub gres: Vec<(String, u32)>,
    /// The program it runs (a batch script) instead of sleeping
    /// `runtime_ns` in sigsleep; boxed: most jobs of a replay have none.
    pub program: Option<Box<Program>>,
    /// Whether it may run again once started (Slurm's `--requeue`,
    /// `--no-requeue`): when a node of it is lost, and on request
    /// ([`Request::Requeue`]). `None`: as its partition says of a lost
    /// node (`on_node_fail`), and yes on request.
    pub requeue: Option<bool>,
    /// How many nodes it spans, at least and at most (Slurm's `-N
    /// MIN[-MAX]`; a MAX of 0 is no most). Its cores go on as few nodes
    /// as fit when that count is allowed, else split evenly over MIN (or
    /// MAX) nodes. `None`: as many as its cores need.
    pub nodes: Option<(u32, u32)>,
}

/// A kind of dependency, as Slurm names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepKind {
    After,
    AfterAny,
    AfterOk,
    AfterNotOk,
    AfterCorr,
    Singleton,
}

impl DepKind {
    /// Slurm's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterOk => "afterok",
            DepKind::AfterNotOk => "afternotok",
            DepKind::AfterCorr => "aftercorr",
            DepKind::Singleton => "singleton",
        }
    }
}

/// A batch script run as the job, as `sbatch` submits one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The script's text: the agent writes it to a file of the job's and
    /// runs that, as Slurm does.
    pub script: String,
    /// Where it runs, and `SLURM_SUBMIT_DIR`.
    pub workdir: String,
    /// The environment it gets besides Slurm's variables (what `sbatch
    /// --export` passes).
    pub env: Vec<(String, String)>,
    /// Where its standard output goes, with Slurm's patterns (`%j %A %a %x
    /// %N %u %%`), relative to `workdir`; empty: `slurm-%j.out`
    /// (`slurm-%A_%a.out` for an array task).
    pub stdout: String,
    /// Its standard error, likewise; empty: with the output.
    pub stderr: String,
    /// Who submitted it (`%u`, `SLURM_JOB_USER`).
    pub user: String,
    /// Slurm's `--signal`: `[B:]SIG[@SECONDS]`, as sigsleep takes it.
    pub signal: Option<String>,
    /// Tasks, and cores for each (`SLURM_NTASKS`, `SLURM_CPUS_PER_TASK`).
    pub ntasks: u32,
    pub cpus_per_task: u32,
    /// Slurm's `--ntasks-per-node`: its tasks dealt evenly over its nodes,
    /// so many at most on each; 0: laid out as any job's.
    pub tasks_per_node: u32,
    /// Slurm's `--comment`: kept and shown, nothing more.
    pub comment: String,
    /// The arguments the script is run with (`sbatch script.sh A B`).
    pub args: Vec<String>,
    /// What its processes may hold together on its first node, in MiB
    /// (0: no limit): sbatch's `--mem` as given (per node), else set by
    /// the controller at the start from the memory the job holds there.
    /// Beyond it, one is killed and the job ends out of memory.
    pub mem_limit_mb: u64,
    /// The script's file as submitted: a path with a slash as given, a
    /// bare name made absolute (as Slurm's sbatch names it); empty for
    /// `--wrap` and a script read from standard input (Slurm's `Command`).
    pub command: String,
    /// It asked no time limit and has not started: its limit is its
    /// partition's as that is now (the controller sets it at submission,
    /// and again at a restart), and Slurm's database shows
    /// `Partition_Limit` for it. Its own once it starts, or once a limit
    /// is set for it. A client sends `false`.
    pub partition_limit: bool,
    /// Slurm's `--exclusive`: it asked whole nodes (sbatch asks their
    /// cores for it), and its tasks are dealt evenly over them
    /// (`SLURM_TASKS_PER_NODE`), not by the cores it holds on each.
    pub exclusive: bool,
    /// Slurm's `--open-mode=append`: its output files are added to, not
    /// emptied first.
    pub open_append: bool,
    /// Slurm's `-w/--nodelist`, folded (`node[1-2]`): nodes it must have,
    /// each of them, and others if it needs more; empty: none.
    pub nodelist: String,
    /// Slurm's `-x/--exclude`, folded: nodes it must not have; empty: none.
    pub exclude: String,
}

impl JobSpec {
    /// Every job it waits for, whatever it waits for of it (its start or
    /// its end).
    pub fn waits_for(&self) -> impl Iterator<Item = u64> + '_ {
        self.after
            .iter()
            .chain(&self.after_ok)
            .chain(&self.after_not_ok)
            .chain(&self.after_start)
            .chain(&self.singleton_jobs)
            .copied()
    }

    /// Whether it waits for job `dep`'s start only, not for its end: named
    /// only by `after`, or by `after` among others joined by `?` (any one
    /// met is enough, and its start comes first).
    pub fn waits_to_start(&self, dep: u64) -> bool {
        self.after_start.contains(&dep)
            && (self.any_dep
                || !self.after.contains(&dep)
                    && !self.after_ok.contains(&dep)
                    && !self.after_not_ok.contains(&dep))
    }

    /// Whether job `dep`, over in `state` (`None`: over, but how is no
    /// longer known), ends as this job waits for it to: every kind of
    /// dependency that names it met, or with `?` any one (any end for
    /// `afterany`, and for `after`: it started or was cancelled).
    pub fn satisfied_by(&self, dep: u64, state: Option<JobState>) -> bool {
        let ok = self.after_ok.contains(&dep);
        let not_ok = self.after_not_ok.contains(&dep);
        let completed = state.map(|s| s == JobState::Completed);
        if self.any_dep {
            self.after.contains(&dep)
                || self.after_start.contains(&dep)
                || ok && completed == Some(true)
                || not_ok && completed == Some(false)
        } else {
            match completed {
                Some(completed) => !(ok && !completed || not_ok && completed),
                None => !ok && !not_ok,
            }
        }
    }

    /// The delay its dependency on job `dep` was given (`+MINUTES`), in
    /// ns; 0 for none.
    pub fn delay(&self, dep: u64) -> u64 {
        self.delays
            .iter()
            .filter(|(d, _)| *d == dep)
            .map(|(_, ns)| *ns)
            .max()
            .unwrap_or(0)
    }

    /// How long past job `dep`'s start its `after` dependency waits
    /// (Slurm's `after:JOB+MINUTES`), in ns; 0 for none.
    pub fn start_delay(&self, dep: u64) -> u64 {
        if self.after_start.contains(&dep) {
            self.delay(dep)
        } else {
            0
        }
    }

    /// The jobs it makes: one, or a task per index of its array.
    pub fn jobs(&self) -> usize {
        self.array.as_ref().map_or(1, |a| a.indices.len())
    }
}

/// The jobs a request of `specs` makes (arrays counted by their tasks).
pub fn jobs_of(specs: &[JobSpec]) -> usize {
    specs.iter().map(JobSpec::jobs).sum()
}

/// The tasks of a job array, as submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Task indices, in order, each once.
    pub indices: Vec<u32>,
    pub limit: u32,
}

/// A job's place in its array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array's id: its first task's.
    pub job: u64,
    pub index: u32,
    /// At most so many of its tasks queued or running at once; 0: no
    /// limit.
    pub limit: u32,
}

impl ArraySpec {
    /// Largest array a submission may make: Slurm's default
    /// `MaxArraySize`.
    pub const MAX_TASKS: usize = 1001;

    /// Slurm's notation: `0-99`, `1,3,5-7`, `0-15:4`, the list in
    /// brackets or not (`[1-3]`), each with an optional `%N` limit at the
    /// end (`%0` or a bare `%`: none). An index given twice is one task,
    /// as Slurm's sbatch takes it.
    pub fn parse(s: &str) -> Result<ArraySpec, String> {
        let (list, limit) = match s.split_once('%') {
            Some((l, "")) => (l, 0),
            Some((l, n)) => (
                l,
                n.parse::<u32>()
                    .map_err(|_| format!("{s:?}: the limit after % must be a whole number"))?,
            ),
            None => (s, 0),
        };
        let list = list
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .unwrap_or(list);
        let mut indices = Vec::new();
        for part in list.split(',') {
            let bad = || format!("{s:?}: {part:?} is not N, N-M or N-M:STEP");
            let (range, step) = match part.split_once(':') {
                Some((r, st)) => (
                    r,
                    st.parse::<u32>().ok().filter(|&x| x > 0).ok_or_else(bad)?,
                ),
                None => (part, 1),
            };
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if b < a {
                return Err(bad());
            }
            let mut i = a;
            while i <= b {
                indices.push(i);
                if indices.len() > Self::MAX_TASKS {
                    return Err(format!(
                        "{s:?}: more than {} tasks in one array",
                        Self::MAX_TASKS
                    ));
                }
                match i.checked_add(step) {
                    Some(n) => i = n,
                    None => break,
                }
            }
        }
        let mut sorted = indices;
        sorted.sort_unstable();
        sorted.dedup();
        Ok(ArraySpec {
            indices: sorted,
            limit,
        })
    }
}

/// Job states, as docs/design.md names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    /// A program job one of whose processes was killed for going over its
    /// memory (Slurm's OUT_OF_MEMORY).
    OutOfMemory,
    /// Cancelled by the policy to give its cores to a job of a
    /// higher-priority partition (Slurm's PREEMPTED, `PreemptMode=CANCEL`).
    Preempted,
}

impl JobState {
    pub const ALL: [JobState; 10] = [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Completed,
        JobState::Cancelled,
        JobState::Failed,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::OutOfMemory,
        JobState::Preempted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Suspended => "suspended",
            JobState::Completed => "completed",
            JobState::Cancelled => "cancelled",
            JobState::Failed => "failed",
            JobState::Timeout => "timeout",
            JobState::NodeFail => "node_fail",
            JobState::OutOfMemory => "out_of_memory",
            JobState::Preempted => "preempted",
        }
    }

    /// The state a job's record says it ended in: its status, or out of
    /// memory for a failed job flagged so.
    pub fn of_record(status: crate::record::Status, flags: crate::record::Flags) -> JobState {
        use crate::record::{Flags, Status};
        match status {
            Status::Completed => JobState::Completed,
            Status::Cancelled => JobState::Cancelled,
            Status::Failed if flags.contains(Flags::OUT_OF_MEMORY) => JobState::OutOfMemory,
            Status::Failed => JobState::Failed,
            Status::Timeout => JobState::Timeout,
        }
    }

    /// The state named `s` ([`JobState::as_str`]).
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether the job is over.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended
        )
    }
}

/// Node states, as docs/design.md names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeState {
    Idle,
    Mixed,
    Allocated,
    Drained,
    Down,
}

impl NodeState {
    pub const ALL: [NodeState; 5] = [
        NodeState::Idle,
        NodeState::Mixed,
        NodeState::Allocated,
        NodeState::Drained,
        NodeState::Down,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Idle => "idle",
            NodeState::Mixed => "mixed",
            NodeState::Allocated => "allocated",
            NodeState::Drained => "drained",
            NodeState::Down => "down",
        }
    }
}

/// One job in the queue view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: u64,
    /// Its name, empty when it has none.
    pub name: String,
    pub state: JobState,
    pub partition: String,
    pub cores: u32,
    /// Allocated nodes, folded; empty while pending.
    pub nodes: String,
    pub submit_ns: i64,
    /// First start, 0 while pending.
    pub start_ns: i64,
    /// End, 0 while not over.
    pub end_ns: i64,
    pub runtime_ns: u64,
    pub walltime_ns: u64,
    /// Why it waits or how it ended, when there is something to say.
    pub reason: String,
    /// Wall-clock ns at which the controller suspended the job and resumed
    /// it (0 while still suspended).
    pub suspensions: Vec<(i64, i64)>,
    /// Its array and index, for a task of a job array.
    pub array: Option<ArrayTask>,
    /// What it asks of generic resources, and the devices it got; `None`
    /// for a job that asks none (most: boxed, it costs them a pointer).
    pub gres: Option<Box<JobGres>>,
    /// Memory per allocated core it asked, in MiB (0: none asked).
    pub mem_per_cpu_mb: u64,
    /// How it ended, as Slurm's `ExitCode` says it: (code, signal); (0, 0)
    /// while not over, and for a job that completed.
    pub exit: (u32, u32),
    /// For a batch script: what Slurm's commands show of it; `None` for a
    /// job that sleeps (boxed, as `gres`).
    pub program: Option<Box<ProgramInfo>>,
    /// How many times it went back to the queue after it started.
    pub restarts: u32,
    /// Started, and told to end (cancelled, at its limit, requeued): its
    /// processes are being ended (Slurm's `COMPLETING`).
    pub completing: bool,
}

/// What the queue view shows of a batch script's job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramInfo {
    pub user: String,
    pub workdir: String,
    /// Its output and error files, Slurm's patterns expanded as far as
    /// known (`%N` once it started), relative paths made absolute from
    /// `workdir`; `stderr` is `stdout` when the two go together.
    pub stdout: String,
    pub stderr: String,
    pub comment: String,
    pub ntasks: u32,
    pub cpus_per_task: u32,
    /// Its `--ntasks-per-node` (`Program::tasks_per_node`); 0: none.
    pub tasks_per_node: u32,
    /// It may be requeued (`JobSpec::requeue`, yes unless refused).
    pub requeue: bool,
    /// Its steps (each `srun` its script ran), once the job is over.
    pub steps: Vec<StepInfo>,
    /// The nodes it asked to span, at least and at most (`JobSpec::nodes`).
    pub nodes_asked: Option<(u32, u32)>,
    /// The cores it holds (or held) on each of its nodes, its batch host
    /// first; empty before it started.
    pub node_cpus: Vec<u32>,
    /// When it may start (CLOCK_REALTIME ns): its submission, or its
    /// begin (`--begin`, a requeue's wait) when later; `None` while it
    /// waits for other jobs to end.
    pub eligible_ns: Option<i64>,
    /// What it still waits for, as Slurm's `%E` and `Dependency=` say it
    /// (`afterok:12(unfulfilled),afterany:14_*(unfulfilled)`); empty when
    /// nothing.
    pub dependency: String,
    /// The script's file (`Program::command`); empty: none.
    pub command: String,
    /// Memory asked per node (`sbatch --mem`), in MiB; 0: none asked so.
    pub mem_per_node_mb: u64,
    /// An array task Slurm would keep as a job record of its own rather
    /// than in its array's record of pending tasks: one requeued, or
    /// submitted with `aftercorr` (each task with a dependency of its
    /// own). squeue folds only the others (`12_[1-3]`).
    pub own_record: bool,
    /// The only task of its array (`--array=5`): pending in its array's
    /// record, squeue shows it `12_[5]`, where the last pending task of a
    /// larger array is `12_5`.
    pub only_task: bool,
    /// Its limit is its partition's, and it has not started: sacct shows
    /// `Partition_Limit` ([`Program::partition_limit`]).
    pub partition_limit: bool,
    /// `Program::nodelist` and `Program::exclude`, as asked.
    pub nodelist: String,
    pub exclude: String,
}

/// A job step: one `srun` in a batch script, as sacct shows it
/// (`JOB.0`, `JOB.1`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInfo {
    /// Its number in the job, from 0.
    pub id: u32,
    /// The command it ran (its file name, as Slurm names a step).
    pub name: String,
    pub start_ns: i64,
    /// 0: it had not ended when its job did.
    pub end_ns: i64,
    pub ntasks: u32,
    /// Its nodes, folded (`node[1-2]`), and its cores on them all.
    pub nodes: String,
    pub cpus: u32,
    /// The highest exit code of its tasks, and the signal that ended one.
    pub exit: (u32, u32),
    /// CPU time of its tasks, and the largest resident set of one (KiB).
    pub cpu_ns: u64,
    pub max_rss_kib: u64,
    /// Cancelled (`scancel JOB.STEP`, no `--signal`), rather than ended.
    pub cancelled: bool,
}

impl StepInfo {
    /// The line srun writes in the job's directory (`step-N`) for the
    /// agent to read at the job's end: `START END NTASKS NODES CPUS CODE
    /// SIGNAL CPU RSS CANCELLED NAME`.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {} {}\n",
            self.start_ns,
            self.end_ns,
            self.ntasks,
            self.nodes,
            self.cpus,
            self.exit.0,
            self.exit.1,
            self.cpu_ns,
            self.max_rss_kib,
            u8::from(self.cancelled),
            self.name
        )
    }

    /// Step `id` from its [`StepInfo::line`]; `None` for a line that is
    /// not one (a step whose srun has not written it yet).
    pub fn parse(id: u32, line: &str) -> Option<StepInfo> {
        let mut f = line.trim_end_matches('\n').splitn(11, ' ');
        let mut next = || f.next();
        Some(StepInfo {
            id,
            start_ns: next()?.parse().ok()?,
            end_ns: next()?.parse().ok()?,
            ntasks: next()?.parse().ok()?,
            nodes: next()?.to_string(),
            cpus: next()?.parse().ok()?,
            exit: (next()?.parse().ok()?, next()?.parse().ok()?),
            cpu_ns: next()?.parse().ok()?,
            max_rss_kib: next()?.parse().ok()?,
            cancelled: next()? == "1",
            name: next()?.to_string(),
        })
    }
}

/// A job's generic resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobGres {
    /// (name, count) asked of each node.
    pub asks: Vec<(String, u32)>,
    /// The devices it holds or held, in the text form of
    /// [`crate::record::Devices::list_to_string`]; empty until it starts.
    pub devices: String,
}

/// One node in the nodes view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub state: NodeState,
    pub cpus: u32,
    pub alloc_cpus: u32,
    pub memory_mb: u64,
    pub alloc_memory_mb: u64,
    /// Host of the agent serving it; empty when none is connected.
    pub host: String,
    /// Why it is drained or down, and since when (wall ns; 0: not known).
    pub reason: String,
    pub reason_ns: i64,
    /// Its generic resources: (name, devices, devices held by jobs).
    pub gres: Vec<(String, u32, u32)>,
}

/// Counts and counters of the whole cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterStats {
    /// Jobs by state, in [`JobState::ALL`] order.
    pub jobs: Vec<(JobState, u64)>,
    /// Nodes by state, in [`NodeState::ALL`] order.
    pub nodes: Vec<(NodeState, u64)>,
    pub cores: u64,
    pub alloc_cores: u64,
    pub agents: u64,
    pub submitted: u64,
    pub started: u64,
    pub ended: u64,
    pub suspensions: u64,
    pub schedule_passes: u64,
    /// Duration of the last scheduling pass, in nanoseconds.
    pub last_pass_ns: u64,
    /// Policy decisions the controller refused as illegal (overbooking, or
    /// acting on a job in the wrong state): 0 unless a policy has a bug.
    pub refused_decisions: u64,
    /// Jobs put back in the queue after their node was lost.
    pub requeued: u64,
    /// Scheduling passes by duration: cumulative counts of passes that took
    /// at most each of [`PASS_BUCKETS`] seconds (the last, `+Inf`, is every
    /// pass), and their total duration in nanoseconds.
    pub pass_buckets: Vec<u64>,
    pub pass_ns_total: u64,
    /// Journal entries not yet synced (not yet safe from a crash of the
    /// machine), and how long the oldest of them has waited.
    pub journal_unsynced: u64,
    pub journal_lag_ns: u64,
    /// Why the journal cannot be written, while it cannot (a full disk):
    /// no job is submitted nor started until it can.
    pub journal_error: Option<String>,
    /// Why the last records of ended jobs could not be made durable, while
    /// they cannot (a full disk under the record file): their agents keep
    /// them, and the controller writes them once it can.
    pub records_error: Option<String>,
    /// `[controller] max_jobs`: jobs not yet over past which submissions
    /// wait.
    pub max_jobs: u64,
    /// Submission requests waiting for room under `max_jobs`, and the jobs
    /// in them.
    pub held_requests: u64,
    pub held_jobs: u64,
    /// Why the policy stopped deciding (an external scheduler that died
    /// or stopped answering): then pending jobs were cancelled and no job
    /// is accepted.
    pub policy_failure: Option<String>,
    /// An external scheduler's figures (its reply latency).
    pub policy_report: Option<crate::scheduler::SchedulerReport>,
    /// Which controller answered, and how its copies stand.
    pub replication: Replication,
}

/// A controller's place among the controllers of its config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Replication {
    /// "primary", "backup", or "alone" (no other controller listed).
    pub role: String,
    /// This controller's address, as the config lists it.
    pub address: String,
    /// The primary's address (this one's, on the primary; empty on a
    /// backup that has not reached it yet).
    pub primary: String,
    pub term: u64,
    /// Sequence number of the last journal entry this controller holds.
    pub seq: u64,
    /// On the primary, its backups; on a backup, itself as the primary
    /// last saw it.
    pub backups: Vec<BackupLag>,
    /// The cluster whose history this controller holds.
    pub cluster: ClusterId,
    /// Agent hosts it turned away lately because of the marks they hold,
    /// and why ("h1: ..."): what keeps a controller from leading.
    pub turned_away: Vec<String>,
}

/// How far one backup is behind its primary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupLag {
    pub address: String,
    /// Still copying the whole state: it confirms nothing yet.
    pub copying: bool,
    /// Sequence number of the last entry it confirmed holding.
    pub acked: u64,
    /// Entries written but not confirmed, and how long the oldest of them
    /// has waited (zero when it holds everything).
    pub lag_entries: u64,
    pub lag_ns: u64,
}

/// Upper bounds (seconds) of the scheduling-pass duration histogram, as
/// Prometheus buckets; `+Inf` follows.
pub const PASS_BUCKETS: [f64; 13] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// What an agent reports of its host every few heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// Load averages over 1, 5 and 15 minutes (`/proc/loadavg`).
    pub load: [f32; 3],
    pub mem_total_kb: u64,
    pub mem_available_kb: u64,
    /// Job processes alive, and their resident and private memory (KiB;
    /// private is resident minus shared pages).
    pub jobs_alive: u32,
    pub jobs_rss_kb: u64,
    pub jobs_private_kb: u64,
}

/// A connected agent's host, for `controller nodes --hosts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub host: String,
    /// Its nodes, folded.
    pub nodes: String,
    /// Hosted in the controller's process.
    pub local: bool,
    /// Jobs it runs, as its last heartbeat said.
    pub running: u32,
    /// Its last report and how old it is (nanoseconds); none yet right
    /// after it registered.
    pub report: Option<HostReport>,
    pub report_age_ns: u64,
}

/// What happened to one job of a cancel, suspend or resume request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    pub id: u64,
    /// `None` if done, else why not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// Jobs to queue. `key` (0: none) makes the request safe to send
    /// again: the controller answers a key it has seen with the same jobs
    /// (a client asks again when its controller died before answering,
    /// and a backup took over). [`submit_key`] makes one.
    Submit {
        specs: Vec<JobSpec>,
        key: u64,
    },
    /// Active jobs; with `all`, finished ones too.
    Queue {
        all: bool,
    },
    /// Active jobs, and the finished ones that ended at or after this
    /// wall-clock instant (nanoseconds): what a client that polls needs
    /// (Slurm's commands show a finished job for `MinJobAge`), without
    /// every job a long run has kept.
    Recent {
        ended_since_ns: i64,
    },
    Nodes,
    Stats,
    Cancel(Vec<u64>),
    Suspend(Vec<u64>),
    Resume(Vec<u64>),
    /// Hold jobs (Slurm's `scontrol hold` and `uhold`): a pending job
    /// waits out of the queue until released; a running one runs on, and
    /// waits held if it is requeued. `privileged`: asked by Slurm's
    /// operator (root), whose holds a plain user cannot release nor
    /// turn into the user's own.
    Hold {
        ids: Vec<u64>,
        kind: HoldKind,
        privileged: bool,
    },
    /// Let held jobs (`Hold`, `JobSpec::hold`, `Requeue`'s `hold`) go on
    /// (`scontrol release`); a job not held is left as it is.
    Release {
        ids: Vec<u64>,
        privileged: bool,
    },
    /// Send a signal to running batch scripts' jobs, as Slurm's `scancel
    /// --signal` (with `--batch` or `--full`); answered with
    /// [`Response::Jobs`].
    Signal {
        ids: Vec<u64>,
        signal: i32,
        reach: Reach,
    },
    /// Started jobs end and wait again under the same ids (Slurm's
    /// `scontrol requeue`; `hold`: `requeuehold`); answered with
    /// [`Response::Jobs`].
    Requeue {
        ids: Vec<u64>,
        hold: bool,
    },
    /// A pending job's wall-time limit, in nanoseconds, 0 for none
    /// (`scontrol update JobId=N TimeLimit=T`); answered with
    /// [`Response::Jobs`].
    SetLimit {
        id: u64,
        walltime_ns: u64,
    },
    Drain {
        nodes: String,
        reason: String,
    },
    Undrain {
        nodes: String,
    },
    /// Nodes fail: down, their jobs killed and requeued or over as
    /// `node_fail` (Slurm's `scontrol update state=down`).
    Fail {
        nodes: String,
        reason: String,
    },
    /// Failed nodes are up again.
    Repair {
        nodes: String,
    },
    /// The records of these jobs from the controller's record file, for a
    /// client on another host (a replay driving a remote cluster).
    Records(Vec<u64>),
    /// These jobs, active or finished (those the controller still knows).
    Jobs(Vec<u64>),
    /// The connected agents' hosts and their resource reports.
    Hosts,
    Shutdown,
    /// Cancel the jobs not yet over that match, as Slurm's `scancel` with
    /// filters; answered with the outcome of each job it acted on.
    CancelMatching(JobFilter),
    /// The client has submitted its last job (a replay's end): a scheduler
    /// that keeps time (Batsim's `no_more_static_job_to_submit`) is told,
    /// once no job waits out of the queue. Answered with
    /// [`Response::Noted`].
    NoMoreJobs,
    /// When pending jobs are expected to start, and where (Slurm's
    /// `squeue --start`): answered with [`Response::Starts`].
    Starts,
}

/// Who holds a job, as Slurm tells holds apart: each has its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldKind {
    /// Its user's (`sbatch --hold`, `scontrol uhold`, a plain user's
    /// `scontrol hold`).
    User,
    /// Slurm's operator's (root's `scontrol hold`): a plain user cannot
    /// release it.
    Admin,
    /// `scontrol requeuehold`: held as it went back to the queue.
    Requeued,
}

impl HoldKind {
    /// The pending reason Slurm gives a job so held.
    pub const fn reason(self) -> &'static str {
        match self {
            HoldKind::User => "JobHeldUser",
            HoldKind::Admin => "JobHeldAdmin",
            HoldKind::Requeued => "job requeued in held state",
        }
    }
}

/// Which processes of a job a signal reaches ([`Request::Signal`]), as
/// Slurm's `scancel` options say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    /// The tasks of its steps (what `srun` runs in it), not the batch
    /// script: scancel's default.
    Steps,
    /// The batch script's shell alone, not its children (`--batch`).
    Batch,
    /// Every process of the job (`--full`).
    Full,
    /// The tasks of one step (`scancel JOB.STEP`), which its srun is told
    /// were cancelled.
    Step(u32),
}

/// Which jobs not yet over a request acts on: those that pass every
/// filter given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFilter {
    /// These jobs only; empty: every job not over. A given id that is no
    /// job not over gets an error outcome.
    pub ids: Vec<u64>,
    /// In one of these states (pending, running, suspended); empty: any.
    pub states: Vec<JobState>,
    pub partition: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Response {
    Submitted(Vec<u64>),
    Queue(Vec<JobInfo>),
    Nodes(Vec<NodeInfo>),
    Hosts(Vec<HostInfo>),
    Stats(Box<ClusterStats>),
    Jobs(Vec<JobOutcome>),
    /// Nodes affected (folded).
    Drained(String),
    /// Nodes failed (folded), and the jobs on them.
    Failed {
        nodes: String,
        jobs: Vec<u64>,
    },
    /// Record frames, as sigsleep wrote them.
    Records(Vec<u8>),
    ShuttingDown,
    /// Taken into account; nothing to say.
    Noted,
    /// This controller is a backup: ask the primary, at this address
    /// (empty when it does not know one).
    NotPrimary(String),
    Error(String),
    /// The pending jobs expected to start, by when.
    Starts(Vec<ExpectedStart>),
}

/// A pending job's expected start ([`Request::Starts`]): the scheduling
/// policy run on the cluster as it will be as running jobs end at their
/// limits, a day ahead at most.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedStart {
    pub id: u64,
    /// When (CLOCK_REALTIME ns).
    pub at_ns: i64,
    /// Its nodes then (folded).
    pub nodes: String,
}

/// A job to start on an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartJob {
    pub job: u64,
    /// The job's first node: the one whose task runs the process.
    pub node: String,
    pub cores: u32,
    pub runtime_ns: u64,
    pub walltime_ns: u64,
    pub submit_ns: i64,
    /// When the controller started the job (wall-clock ns; 0 in a
    /// `Prepare`, which is no start). Its run counts from here, as a batch
    /// system's accounting counts it: the process's launch is part of it.
    pub start_ns: i64,
    /// Devices of generic resources it holds on each node, in the text
    /// form of [`crate::record::Devices::list_to_string`] (empty: none).
    /// Its process learns its first node's through the environment
    /// ([`visible_devices_var`]), and writes all of them in its record.
    pub devices: String,
    /// The program to run instead of sleeping `runtime_ns`, as the
    /// controller settled it at the start: its `env` the whole
    /// environment (the submission's, then Slurm's variables), its
    /// `stdout` and `stderr` with their patterns expanded.
    pub program: Option<Box<Program>>,
}

impl StartJob {
    /// Whether this start is the one `prepared` foresaw: every field alike
    /// but the start's instant, which a `Prepare` cannot know.
    pub fn claims(&self, prepared: &StartJob) -> bool {
        let StartJob {
            job,
            node,
            cores,
            runtime_ns,
            walltime_ns,
            submit_ns,
            start_ns: _,
            devices,
            program,
        } = self;
        *job == prepared.job
            && *node == prepared.node
            && *cores == prepared.cores
            && *runtime_ns == prepared.runtime_ns
            && *walltime_ns == prepared.walltime_ns
            && *submit_ns == prepared.submit_ns
            && *devices == prepared.devices
            && *program == prepared.program
    }
}

/// The environment variable through which a job learns which devices of
/// `kind` it holds on its node, named as CUDA names its own:
/// `CUDA_VISIBLE_DEVICES` for `gpu`, `KIND_VISIBLE_DEVICES` (upper case)
/// for any other kind.
pub fn visible_devices_var(kind: &str) -> String {
    if kind == "gpu" {
        "CUDA_VISIBLE_DEVICES".into()
    } else {
        format!("{}_VISIBLE_DEVICES", kind.to_ascii_uppercase())
    }
}

/// How an agent delivers a suspension (docs/design.md, "States").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SuspendMode {
    /// `SIGTSTP`: sigsleep records the instant and stops itself.
    Tstp,
    /// `SIGTSTP`, then `SIGSTOP` after a grace period, as slurmstepd does.
    Slurm,
    /// A bare `SIGSTOP`: sigsleep only notices on `SIGCONT`.
    Stop,
}

impl SuspendMode {
    pub fn parse(s: &str) -> Result<SuspendMode, String> {
        match s {
            "tstp" => Ok(SuspendMode::Tstp),
            "slurm" => Ok(SuspendMode::Slurm),
            "stop" => Ok(SuspendMode::Stop),
            other => Err(format!(
                "unknown suspend mode {other:?} (known: tstp, slurm, stop)"
            )),
        }
    }
}

/// How the controller wants an agent to run its jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub heartbeat_ms: u64,
    pub suspend_mode: SuspendMode,
    /// `slurm` mode: milliseconds between `SIGTSTP` and `SIGSTOP`.
    pub suspend_grace_ms: u64,
    /// Milliseconds between `SIGTERM` and `SIGKILL` on cancel.
    pub kill_grace_ms: u64,
    /// Send finished records to the controller (false when the agent
    /// writes them straight into the controller's record directory).
    pub stream_records: bool,
    /// Milliseconds without hearing from the controller after which the
    /// agent kills its jobs (0: never). Shorter than the controller's
    /// heartbeat timeout, so that by the time the controller gives a lost
    /// agent's jobs to other nodes, the lost copies are dead: a job never
    /// runs twice at once, whatever the network does.
    pub fence_ms: u64,
    /// The controller's witness mark (docs/faults.md): the agent keeps it
    /// and never registers with a controller of a lower term.
    pub mark: Mark,
    /// Jobs wait under real-time scheduling (`sigsleep --realtime`), so
    /// that they wake at their deadlines whatever the host's other work.
    pub realtime: bool,
    /// A job's run counts from its process's first instant, not from the
    /// controller's start (`[agents] run_from = "launch"`): for measuring
    /// what a launch costs.
    pub run_from_launch: bool,
}

/// What an agent keeps for the controllers, as a witness of which may
/// lead (docs/faults.md, "Takeover"): the highest term it has seen, the
/// controller that leads in it (its place in `[controller] hosts`, from 1;
/// 0: none yet), and the least journal entry another controller must hold
/// to take over from it (`u64::MAX`: none may, the primary acts alone).
///
/// A mark belongs to one cluster (docs/faults.md, "One cluster, one
/// history"): its terms say nothing of another cluster's controllers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub cluster: ClusterId,
    pub term: u64,
    pub leader: u32,
    pub floor: u64,
}

impl std::fmt::Display for Mark {
    /// "term 2 of cluster 3f2a9c81d4e6b7a0, led by controller 2 acting
    /// alone": what an agent says it holds.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "term {} of cluster {}", self.term, self.cluster)?;
        if self.leader > 0 {
            write!(f, ", led by controller {}", self.leader)?;
        }
        match self.floor {
            0 => Ok(()),
            u64::MAX => f.write_str(" acting alone"),
            n => write!(f, ", floor journal entry {n}"),
        }
    }
}

/// A cluster's identity: made at random by its first primary, kept in its
/// controllers' state directories and in every mark, so that what one
/// cluster leaves on a host is never taken for the next one's. 0: none
/// yet (a controller that has led nothing and copied nothing). Shown as 16
/// hexadecimal digits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterId(pub u64);

impl ClusterId {
    /// A new identity: random, never 0.
    pub fn new() -> ClusterId {
        ClusterId(submit_key())
    }

    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Display for ClusterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_none() {
            f.write_str("(none)")
        } else {
            write!(f, "{:016x}", self.0)
        }
    }
}

impl std::str::FromStr for ClusterId {
    type Err = String;

    fn from_str(s: &str) -> Result<ClusterId, String> {
        match u64::from_str_radix(s, 16) {
            Ok(n) if s.len() == 16 && n != 0 => Ok(ClusterId(n)),
            _ => Err(format!(
                "{s:?} is not a cluster identity (16 hexadecimal digits)"
            )),
        }
    }
}

/// Where a controller that does not take an agent's registration stands,
/// so that an agent that cannot register can say why: its place, its
/// cluster, its term and the term of the state it holds, the primary it
/// knows of, and why it turned the agent away.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// "primary", "alone", "backup" or "candidate".
    pub role: String,
    pub cluster: ClusterId,
    pub term: u64,
    pub held: u64,
    /// The primary's address, when it knows it ("" else).
    pub primary: String,
    /// Why it did not take this agent, in a few words ("" when it simply
    /// does not lead).
    pub why: String,
}

impl std::fmt::Display for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of cluster {} at term {} (its state of term {})",
            self.role, self.cluster, self.term, self.held
        )?;
        if !self.primary.is_empty() && self.role == "backup" {
            write!(f, ", following {}", self.primary)?;
        }
        if !self.why.is_empty() {
            write!(f, ": {}", self.why)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToAgent {
    /// Registration accepted, with how to run jobs.
    Registered(RunSettings),
    /// Registration refused; the agent should give up.
    Rejected(String),
    /// This controller does not take the agent: try the others of the
    /// list (the primary, when it names one, first).
    Elsewhere(Standing),
    /// The primary's new mark; the agent keeps it, then says so.
    Mark(Mark),
    Start(StartJob),
    /// Start this job's process ahead of its start, held: it counts
    /// nothing until a `Start` with the same fields claims it (it is then
    /// only let go on). Unclaimed within `claim_within_ms`, or claimed with
    /// other fields, it is killed without a record. Sent for the jobs a
    /// gang turn is about to start, so the turn need not wait for process
    /// starts.
    Prepare {
        start: StartJob,
        claim_within_ms: u32,
    },
    Suspend(u64),
    Resume(u64),
    Cancel(u64),
    /// End the job's process at once, without a record: this execution no
    /// longer counts (another node of the job was lost, or the controller
    /// does not know the job).
    Kill(u64),
    /// Send `signal` to the processes of a running batch script's job that
    /// `reach` names; the job's state does not change.
    Signal {
        job: u64,
        signal: i32,
        reach: Reach,
    },
    /// A running job's wall-time limit is now `walltime_ns` (0: none),
    /// counted from its start as before (`scontrol update TimeLimit=`).
    Limit {
        job: u64,
        walltime_ns: u64,
    },
    /// The controller has durably taken note that these jobs ended: the
    /// agent may forget them (until then it reports them again when it
    /// registers anew).
    Forget(Vec<u64>),
    /// The controller is alive (sent every heartbeat period).
    Ping,
    /// Stop every job and exit.
    Shutdown,
    /// End the job as [`ToAgent::Cancel`] does, for a reason its program is
    /// told (Slurm's step writes it to the job's error file).
    End {
        job: u64,
        why: EndWhy,
    },
}

/// Why the controller ends a running job other than by a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndWhy {
    /// A job of a higher-priority partition needs its cores.
    Preempted,
    /// It goes back to the queue.
    Requeued,
}

/// How a job's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// A program run as the job ended so ([`Ran`]).
    Ran(Ran),
    /// The process could not be started.
    SpawnFailed,
    /// Killed by its agent, which had heard nothing from the controller for
    /// its fence time (the controller may have given the job to another
    /// host meanwhile): the execution is lost, as on a lost node, rather
    /// than ended.
    Fenced,
}

/// How a program run as the job ended: the job's state, and the program's
/// exit as Slurm's `ExitCode` shows it (`code:signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ran {
    pub state: RanState,
    pub code: i32,
    pub signal: i32,
}

/// What ended a program run as the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RanState {
    /// It exited 0.
    Completed,
    /// It exited otherwise, a signal ended it, or it could not start.
    Failed,
    Cancelled,
    Timeout,
    /// A process of it was killed for going over its memory.
    OutOfMemory,
}

/// A job an agent holds when it registers: what it knows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Held {
    Running,
    Suspended,
    /// Ended, and not yet forgotten: the controller may not know.
    Ended(Exit),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromAgent {
    /// First message: the nodes this agent hosts and, when it registers
    /// again after losing the controller, the jobs it holds, with the
    /// records of those that ended meanwhile.
    Register {
        host: String,
        nodes: String,
        cpus: u32,
        memory_mb: u64,
        jobs: Vec<(u64, Held)>,
        records: Vec<u8>,
        /// The mark it keeps.
        mark: Mark,
        /// Whether it has served the mark's cluster since it started: then
        /// it joins no other. Else a mark of another cluster is set aside
        /// when a controller of a new one takes it.
        bound: bool,
    },
    Started {
        job: u64,
        pid: u32,
    },
    Ended {
        job: u64,
        exit: Exit,
    },
    /// The steps of a batch script's job, sent before its `Ended`.
    Steps {
        job: u64,
        steps: Vec<StepInfo>,
    },
    /// Finished records, as the frames sigsleep wrote.
    Records(Vec<u8>),
    Heartbeat {
        running: u32,
    },
    /// The host's load and memory and its jobs' memory.
    Resources(HostReport),
    /// It keeps this mark now (durably).
    Marked(Mark),
}

/// A fresh submission key: random, never 0.
pub fn submit_key() -> u64 {
    use std::hash::BuildHasher;
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // RandomState is seeded from the system's randomness once per process.
    let key = std::collections::hash_map::RandomState::new().hash_one((std::process::id(), n));
    key.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_lists_read_as_slurms_sbatch_reads_them() {
        let of = |s: &str| ArraySpec::parse(s).map(|a| (a.indices, a.limit));
        // Each as Slurm 22.05's sbatch took it.
        assert_eq!(of("1,1,2"), Ok((vec![1, 2], 0)));
        assert_eq!(of("1-3%0"), Ok((vec![1, 2, 3], 0)));
        assert_eq!(of("1-3%"), Ok((vec![1, 2, 3], 0)));
        assert_eq!(of("[1-3]"), Ok((vec![1, 2, 3], 0)));
        assert_eq!(of("[1,3]%1"), Ok((vec![1, 3], 1)));
        assert_eq!(of("0-15:4"), Ok((vec![0, 4, 8, 12], 0)));
        for bad in ["1-3:0", "3-1", "x", "1-3%x", ""] {
            assert!(of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_step_line_reads_back_and_a_torn_one_does_not() {
        let step = StepInfo {
            id: 2,
            name: "my tool".into(),
            start_ns: 5,
            end_ns: 9,
            ntasks: 4,
            nodes: "node[1-2]".into(),
            cpus: 5,
            exit: (3, 0),
            cpu_ns: 1_500,
            max_rss_kib: 2048,
            cancelled: true,
        };
        assert_eq!(StepInfo::parse(2, &step.line()), Some(step.clone()));
        // A step of no node known (an environment that said none).
        let nowhere = StepInfo {
            nodes: String::new(),
            ..step
        };
        assert_eq!(StepInfo::parse(2, &nowhere.line()), Some(nowhere));
        assert_eq!(StepInfo::parse(0, "5 9 4"), None);
        assert_eq!(StepInfo::parse(0, ""), None);
    }
}
