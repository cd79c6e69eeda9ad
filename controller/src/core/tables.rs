//! The tables: nodes, jobs, the queue and active jobs as policies see
//! them, agents and counters, owned by [`Cluster`], and the upkeep of the
//! policies' copies (queue order, active jobs) that every change shares.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use formats::wire::{
    ArrayTask, HoldKind, HostReport, JobInfo, JobSpec, JobState, NodeState, StepInfo, PASS_BUCKETS,
};

use super::Now;
use crate::config;
use crate::gres::{self, Counts, Masks};
use crate::policy::{
    spare, Active, ActiveState, Alloc, Gang, Happened, NodeView, PartitionView, Queued, View,
};

pub type AgentId = u64;

/// Finished jobs kept for `queue --all` and replays' accounting; older
/// ones are forgotten. Enough for the largest trace of the archive.
pub const HISTORY: usize = 500_000;

/// What the policies expect of a program job with no time limit: a year,
/// as Slurm's backfill (`YEAR_MINUTES`) takes it.
pub const UNLIMITED_ESTIMATE_NS: u64 = 365 * 24 * 3600 * 1_000_000_000;

/// How long, and how many, finished batch jobs keep what they need to
/// run again (`scontrol requeue` of a job over): Slurm's defaults for
/// keeping a finished job (`MinJobAge`, 300 s) and for the jobs it holds
/// in all (`MaxJobCount`, 10,000).
pub const KEEP_FINISHED_NS: i64 = 300_000_000_000;
pub const KEEP_FINISHED_MAX: usize = 10_000;

/// What a finished batch job needs to go back to the queue: its spec
/// (script, environment, files), partition and place in the queue.
#[derive(Debug)]
pub(super) struct Kept {
    pub spec: JobSpec,
    pub partition: usize,
    pub submit_mono: i64,
    /// Monotonic ns it is kept until.
    pub until: i64,
}

/// Why a job is suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SuspendedBy {
    /// `controller suspend`: the job keeps its cores until resumed.
    Admin,
    /// The scheduling policy: its cores go to others, its memory stays.
    Policy,
}

/// A node's name and what it is not usable for: read when a node is
/// named or its state told, not at every start. What a start checks and
/// charges on it is its [`Load`].
#[derive(Debug)]
pub(super) struct Node {
    pub name: String,
    /// Drained, and why.
    pub drained: Option<String>,
    /// Failed (`controller down`, or an event of a replay), and why: down
    /// whether its agent is there or not.
    pub failed: Option<String>,
    /// When (wall ns) its reason was given; 0: not known (restored from a
    /// snapshot, which keeps reasons only).
    pub reason_ns: i64,
    /// The agent serving it; `None`: down.
    pub agent: Option<AgentId>,
}

impl Node {
    /// Up (its agent is there), neither failed nor drained.
    pub(super) fn usable(&self) -> bool {
        self.agent.is_some() && self.drained.is_none() && self.failed.is_none()
    }
}

/// What a job's start checks and charges on a node, kept apart from the
/// rest of it ([`Node`]): the widest jobs' starts and ends walk tens of
/// thousands of these, 32 bytes each, where a whole node spans two cache
/// lines. Whether the node is usable at all is [`Cluster::usable`]'s.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Load {
    pub cpus: u32,
    /// Cores in use: by running jobs and jobs an administrator suspended.
    pub alloc_cpus: u32,
    /// Cores allocated to any job, suspended by the policy or not: what
    /// gang time-slicing may oversubscribe up to K times.
    pub slot_cpus: u32,
    /// How many `slot_cpus` may come to: `cpus` times the largest
    /// `oversubscribe` of the node's partitions (1 without gang
    /// time-slicing).
    pub slots: u32,
    pub memory_mb: u64,
    /// Memory of every job holding the node, suspended or not.
    pub alloc_mem_mb: u64,
}

impl Load {
    /// Counts `cores` of a job here, with `mem_mb` of memory.
    pub(super) fn charge(&mut self, cores: u32, mem_mb: u64) {
        self.alloc_cpus += cores;
        self.slot_cpus += cores;
        self.alloc_mem_mb += mem_mb;
    }

    /// Gives back what [`Load::charge`] counted.
    pub(super) fn uncharge(&mut self, cores: u32, mem_mb: u64) {
        self.alloc_cpus -= cores;
        self.slot_cpus -= cores;
        self.alloc_mem_mb -= mem_mb;
    }
}

#[derive(Debug)]
pub(super) struct Job {
    pub id: u64,
    pub spec: JobSpec,
    pub partition: usize,
    pub state: JobState,
    pub submit_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    /// (node, cores) held while running or suspended.
    pub alloc: Alloc,
    /// The nodes it was given, folded (kept after it ends).
    pub nodes: String,
    /// The agent running its process.
    pub agent: Option<AgentId>,
    pub reason: String,
    /// A cancel was sent; the state to end in (cancelled, or timeout when
    /// the controller enforced the wall-time limit).
    pub ending_as: Option<JobState>,
    /// When (wall ns) it was told to end: while it completes, its end as
    /// Slurm shows one (squeue's time stops there).
    pub ending_ns: i64,
    pub suspended_by: Option<SuspendedBy>,
    /// Monotonic ns: first start, last state change, start of the current
    /// suspension, time suspended in all.
    pub started_mono: Option<i64>,
    pub since_mono: i64,
    pub suspended_since: Option<i64>,
    pub suspended_total: i64,
    /// Host of the agent that runs it; kept while the agent is away.
    pub host: Option<String>,
    /// Started, but its agent is gone: when (monotonic ns) it counts as
    /// lost unless the agent comes back and reports it. By then the agent,
    /// if alive, has killed it (it fences its jobs sooner).
    pub lost_at: Option<i64>,
    /// Wall-clock ns of each suspension and its resumption (0 while
    /// suspended), as decided here: what the job's record should show.
    pub suspensions: Vec<(i64, i64)>,
    /// Submit instant on the monotonic clock: its place in the queue,
    /// and gang fairness.
    pub submit_mono: i64,
    /// Waits for other jobs to be over (`after`) before it enters the
    /// queue; policies do not see it meanwhile.
    pub held: bool,
    /// While held: how many of the jobs it waits for are not over, and
    /// when the last of those over ended (wall ns).
    pub deps_left: u32,
    pub deps_end: i64,
    /// While held, with `singleton` and `?`: how many of the singleton's
    /// jobs are not over (the singleton is met when none is).
    pub singleton_left: u32,
    /// Not let into the queue before this (wall ns): its `after`
    /// dependencies' starts, each plus its delay (`after:JOB+MINUTES`).
    pub delay_until: i64,
    /// A job it waits for ended otherwise than it waits for (`afterok`,
    /// `afternotok`): it can never run, and waits until cancelled.
    pub never: bool,
    /// Held (`--hold`, `scontrol hold`, `requeuehold`), and by whom:
    /// pending, it waits out of the queue until released, whatever else it
    /// waits for; running, it runs on, and waits so if requeued.
    pub hold: Option<HoldKind>,
    /// How many times it went back to the queue after it started
    /// (a node lost, `scontrol requeue`).
    pub restarts: u32,
    /// A batch script's steps, as its agent reported them at its end.
    pub steps: Vec<StepInfo>,
    /// Its limit changed after it started (`scontrol update`): sent again
    /// to its agent when that agent comes back.
    pub limit_changed: bool,
    /// Its key in [`Cluster::releases`] (monotonic ns), once its wait is
    /// over and its think time runs.
    pub release_at: Option<i64>,
    /// Its place in a job array.
    pub array: Option<ArrayTask>,
    /// A task of an array at its limit: it waits out of the queue for one
    /// of the array's tasks to end.
    pub throttled: bool,
    /// What it asks of each node's generic resources (`spec.gres`, by
    /// kind).
    pub gres: Counts,
    /// The devices it was given, by node: held while it holds its nodes,
    /// kept after that for its history.
    pub devices: Vec<(usize, Masks)>,
    /// How its process ended, as Slurm's `ExitCode`: (code, signal).
    pub exit: (u32, u32),
    /// The cores it held on each node, in `alloc`'s order, once it gave
    /// them back: its history (sacct's steps), as `nodes`.
    pub node_cpus: Vec<u32>,
    /// The nodes it names (`Program::nodelist`, `exclude`), by index:
    /// found from their names at submission, and again at a restart.
    pub within: Option<Arc<crate::policy::Within>>,
}

/// A job array with a limit: how many of its tasks are queued or
/// running, and the tasks waiting for one of them to end, in order.
#[derive(Debug, Default)]
pub(super) struct ArrayState {
    pub live: u32,
    pub waiting: VecDeque<u64>,
}

impl Job {
    /// The job as policies see it in the queue.
    pub(super) fn as_queued(&self) -> Queued {
        Queued {
            job: self.id,
            partition: self.partition,
            cores: self.spec.cores,
            mem_per_cpu_mb: self.spec.mem_per_cpu_mb,
            estimate_ns: self.estimate_ns(),
            submit_ns: self.submit_mono,
            gres: self.gres,
            within: self.within.clone(),
            nodes: {
                // A batch script's tasks go whole on a node, as Slurm's;
                // one on whole nodes asks all their cores, whatever its
                // tasks.
                let task_cores = self
                    .spec
                    .program
                    .as_ref()
                    .filter(|p| !p.exclusive)
                    .map_or(1, |p| p.cpus_per_task.max(1))
                    .min(self.spec.cores.max(1));
                let even = self
                    .spec
                    .program
                    .as_ref()
                    .is_some_and(|p| p.tasks_per_node > 0);
                match self.spec.nodes {
                    Some((least, most)) => Some(crate::policy::Span {
                        least,
                        most,
                        task_cores,
                        even,
                    }),
                    // No node count asked, but tasks of several cores.
                    None if task_cores > 1 => Some(crate::policy::Span {
                        least: 0,
                        most: 0,
                        task_cores,
                        even: false,
                    }),
                    None => None,
                }
            },
        }
    }

    /// How long the policies expect the job to run: its limit; with none,
    /// its run time if it sleeps, and a year if it runs a program, whose
    /// run time is not known before it ends. Slurm's backfill takes a job
    /// with no limit for a year, as here: such a job never ends "in time"
    /// before a blocked head's reservation, nor does the head's
    /// reservation come sooner for it.
    pub(super) fn estimate_ns(&self) -> u64 {
        if self.spec.walltime_ns > 0 {
            self.spec.walltime_ns
        } else if self.spec.program.is_some() {
            UNLIMITED_ESTIMATE_NS
        } else {
            self.spec.runtime_ns
        }
    }

    /// Nanoseconds run, not counting suspensions.
    pub(super) fn run_time(&self, now: i64) -> i64 {
        let Some(start) = self.started_mono else {
            return 0;
        };
        let suspended = self.suspended_total + self.suspended_since.map_or(0, |s| now - s);
        (now - start - suspended).max(0)
    }
}

#[derive(Debug)]
pub(super) struct Agent {
    pub host: String,
    pub nodes: Vec<usize>,
    pub last_seen: i64,
    pub running: u32,
    /// Hosted in the controller's process: its jobs die with it.
    pub local: bool,
    /// Its last host report and when (monotonic ns) it came.
    pub report: Option<(HostReport, i64)>,
}

#[derive(Debug, Default, Clone)]
pub(super) struct Counters {
    pub submitted: u64,
    pub started: u64,
    pub ended: u64,
    pub suspensions: u64,
    pub passes: u64,
    pub last_pass: Duration,
    /// Policy decisions refused as illegal (a policy bug, logged).
    pub refused: u64,
    /// Jobs put back in the queue after their node was lost.
    pub requeued: u64,
    /// Passes by duration: per bucket of [`PASS_BUCKETS`] (not
    /// cumulative; the last is over the largest bound), and the total.
    pub pass_buckets: [u64; PASS_BUCKETS.len() + 1],
    pub pass_ns_total: u64,
}

impl Counters {
    /// Counts a scheduling pass that took `took`.
    pub(super) fn pass(&mut self, took: Duration) {
        self.passes += 1;
        self.last_pass = took;
        self.pass_ns_total += took.as_nanos() as u64;
        let secs = took.as_secs_f64();
        let at = PASS_BUCKETS.partition_point(|&b| b < secs);
        self.pass_buckets[at] += 1;
    }
}

/// Where a pending job stands in the queue: its partition's priority
/// (highest first), then its submit instant (monotonic), then its id. Ids
/// follow submissions, except for a job held for others (`after` with a
/// think time): it is submitted when released, and queues from then.
type QueueKey = (Reverse<u32>, i64, u64);

pub struct Cluster {
    pub(super) config: Arc<config::Cluster>,
    pub(super) nodes: Vec<Node>,
    /// Each node's [`Load`], by the same index.
    pub(super) loads: Vec<Load>,
    /// Each node's [`Node::usable`], as a bit set by node index: kept by
    /// [`Cluster::node_changed`] whenever a node's agent, failure or drain
    /// changes, so that a start reads one bit, not the node.
    pub(super) usable: Vec<u64>,
    pub(super) node_index: HashMap<String, usize>,
    /// Jobs not yet over. Boxed: the map keeps spare buckets (up to twice
    /// as many as jobs), which then cost a pointer each, not a whole job.
    pub(super) jobs: HashMap<u64, Box<Job>>,
    /// Pending jobs in queue order (partition priority, then id), as
    /// policies see them. Kept up to date in place and shared with the
    /// views of passes, so a pass copies nothing.
    queue: Arc<Vec<Queued>>,
    /// While [`Cluster::unqueue_batched`] runs: the queue keys of the jobs
    /// to take out of the queue at its end.
    unqueue_later: Option<HashSet<QueueKey>>,
    /// Jobs holding resources, by id, as policies see them.
    pub(super) active: Arc<Vec<Active>>,
    /// Finished jobs by id, and their ids oldest first (for forgetting).
    pub(super) done: HashMap<u64, JobInfo>,
    pub(super) done_order: VecDeque<u64>,
    /// Finished batch jobs that may still be requeued, by id, and their
    /// ids in the order they are let go ([`KEEP_FINISHED_NS`]).
    pub(super) kept: HashMap<u64, Kept>,
    pub(super) kept_order: VecDeque<(i64, u64)>,
    pub(super) next_id: u64,
    pub(super) agents: HashMap<AgentId, Agent>,
    pub(super) counters: Counters,
    /// (partition, MiB per core, generic resources per node) → cores a
    /// job could ever get there.
    capacity_cache: HashMap<(usize, u64, Counts), u64>,
    /// The partitions as policies see them; built once.
    pub(super) partition_views: Arc<Vec<PartitionView>>,
    /// Set when something happened that may let a job start: the
    /// [`Scheduler`](super::Scheduler) runs a pass and clears it.
    pub(super) wants_pass: bool,
    /// Jobs suspended by the policy, waiting to resume.
    pub(super) policy_suspended: usize,
    /// What happened since the last pass, for a policy that wants it
    /// ([`Cluster::keep_events`]); `None` otherwise.
    pub(super) happened: Option<Vec<Happened>>,
    pub(super) keys: Keys,
    /// Held jobs by the job they wait for.
    pub(super) waiters: HashMap<u64, Vec<u64>>,
    /// Held jobs waiting for a job's start (`after`), by that job.
    pub(super) start_waiters: HashMap<u64, Vec<u64>>,
    /// Held jobs whose wait is over, to enter the queue at an instant
    /// (monotonic ns, id): a think time after the last of them ended.
    pub(super) releases: BTreeSet<(i64, u64)>,
    /// Job arrays with a limit, by array id.
    pub(super) arrays: HashMap<u64, ArrayState>,
    /// The free devices of each node's generic resources; empty for a
    /// cluster without them.
    pub(super) device_free: Vec<Masks>,
    /// Where the notice that no more jobs will come stands
    /// ([`Cluster::no_more_jobs`]).
    no_more: NoMore,
    /// When each running job's process is expected to end (monotonic ns,
    /// id), from its run time, and each one's key: what the scheduler
    /// prepares the next pass for (`core/ahead.rs`).
    pub(super) ends: BTreeSet<(i64, u64)>,
    pub(super) end_of: HashMap<u64, i64>,
}

/// The notice that no more jobs will come: not said yet; said by the
/// client at this instant (monotonic ns) while jobs still wait out of the
/// queue, so the scheduler is told once they are in; told, once and for
/// all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoMore {
    Unsaid,
    Since(i64),
    Told,
}

/// Submissions kept by key, most recent [`KEYS_KEPT`]: a client that lost
/// the answer (its controller died, and a backup took over) asks again with
/// the same key and gets the same jobs, not new ones.
#[derive(Default)]
pub(super) struct Keys {
    /// key → (first job, jobs).
    map: HashMap<u64, (u64, u32)>,
    order: VecDeque<u64>,
}

/// Submission keys kept: far more requests than a client has in flight
/// across one takeover.
pub const KEYS_KEPT: usize = 65_536;

impl Keys {
    pub(super) fn get(&self, key: u64) -> Option<Vec<u64>> {
        let &(first, count) = self.map.get(&key)?;
        Some((first..first + u64::from(count)).collect())
    }

    pub(super) fn insert(&mut self, key: u64, first: u64, count: u32) {
        if self.map.insert(key, (first, count)).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > KEYS_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    /// (key, first job, jobs), oldest first.
    pub(super) fn all(&self) -> Vec<(u64, u64, u32)> {
        self.order
            .iter()
            .filter_map(|k| self.map.get(k).map(|&(f, c)| (*k, f, c)))
            .collect()
    }
}

impl Cluster {
    /// Whether a pass could decide anything: some job waits (pending, or
    /// suspended by the policy). Passes are skipped otherwise, unless the
    /// policy asked to be woken.
    pub fn anything_waits(&self) -> bool {
        !self.queue.is_empty() || self.policy_suspended > 0
    }

    pub fn new(config: Arc<config::Cluster>) -> Cluster {
        // Every start folds its job's nodes: the first should not also
        // read the names of the whole cluster.
        config.ready_to_fold();
        let partition_config = Arc::clone(&config);
        let device_free = if config.kinds.is_empty() {
            Vec::new()
        } else {
            config
                .nodes
                .iter()
                .map(|n| gres::all_free(&n.devices))
                .collect()
        };
        let nodes: Vec<Node> = config
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                drained: None,
                reason_ns: 0,
                failed: None,
                agent: None,
            })
            .collect();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut oversubscription = vec![1; nodes.len()];
        for p in &config.partitions {
            for &n in &p.nodes {
                oversubscription[n] = oversubscription[n].max(p.oversubscribe.max(1));
            }
        }
        let loads = config
            .nodes
            .iter()
            .zip(&oversubscription)
            .map(|(n, &k)| Load {
                cpus: n.cpus,
                slots: n.cpus * k,
                memory_mb: n.memory_mb,
                ..Load::default()
            })
            .collect();
        // No node is usable before its agent comes.
        let usable = vec![0; nodes.len().div_ceil(64)];
        Cluster {
            config,
            nodes,
            loads,
            usable,
            node_index,
            jobs: HashMap::new(),
            queue: Arc::new(Vec::new()),
            unqueue_later: None,
            active: Arc::new(Vec::new()),
            done: HashMap::new(),
            done_order: VecDeque::new(),
            kept: HashMap::new(),
            kept_order: VecDeque::new(),
            next_id: 1,
            agents: HashMap::new(),
            counters: Counters::default(),
            capacity_cache: HashMap::new(),
            partition_views: Arc::new(
                partition_config
                    .partitions
                    .iter()
                    .map(|p| PartitionView {
                        nodes: p.nodes.clone(),
                        priority: p.priority,
                        gang: (p.oversubscribe > 1).then_some(Gang {
                            oversubscribe: p.oversubscribe,
                            slice_ns: p.time_slice.as_nanos() as i64,
                        }),
                        contiguous: p.contiguous,
                    })
                    .collect(),
            ),
            wants_pass: false,
            policy_suspended: 0,
            happened: None,
            keys: Keys::default(),
            waiters: HashMap::new(),
            start_waiters: HashMap::new(),
            releases: BTreeSet::new(),
            no_more: NoMore::Unsaid,
            arrays: HashMap::new(),
            device_free,
            ends: BTreeSet::new(),
            end_of: HashMap::new(),
        }
    }

    /// Whether node `n` is usable ([`Node::usable`]), from the bit set.
    pub(super) fn is_usable(&self, n: usize) -> bool {
        spare::bit(&self.usable, n)
    }

    /// Node `n`'s agent, failure or drain changed: its bit in the usable
    /// set follows. Every change of those goes through here.
    pub(super) fn node_changed(&mut self, n: usize) {
        let Some(node) = self.nodes.get(n) else {
            return;
        };
        let on = node.usable();
        spare::set_bit(&mut self.usable, n, on);
    }

    /// Node `n`'s state, as `nodes` tells it.
    pub(super) fn node_state(&self, n: usize) -> NodeState {
        let (node, load) = (&self.nodes[n], &self.loads[n]);
        if node.agent.is_none() || node.failed.is_some() {
            NodeState::Down
        } else if node.drained.is_some() {
            NodeState::Drained
        } else if load.alloc_cpus == 0 {
            NodeState::Idle
        } else if load.alloc_cpus >= load.cpus {
            NodeState::Allocated
        } else {
            NodeState::Mixed
        }
    }

    pub(super) fn partition_of(&self, name: Option<&str>) -> Result<usize, String> {
        let parts = &self.config.partitions;
        match name {
            None => Ok(parts.iter().position(|p| p.default).unwrap_or(0)),
            Some(n) => parts
                .iter()
                .position(|p| p.name == n)
                .ok_or_else(|| format!("no partition {n:?}")),
        }
    }

    /// Cores of partition `p` that jobs asking `mem_per_cpu` MiB per core
    /// and `gres` of each node could ever get (the cores of the nodes that
    /// have those resources, or what their memory allows). Cached:
    /// submissions come by the thousand.
    pub(super) fn capacity(&mut self, p: usize, mem_per_cpu: u64, gres: Counts) -> u64 {
        let key = (p, mem_per_cpu, gres);
        if let Some(&c) = self.capacity_cache.get(&key) {
            return c;
        }
        let c = self
            .node_capacities(p, mem_per_cpu, gres)
            .map(|(_, c)| c)
            .sum();
        self.capacity_cache.insert(key, c);
        c
    }

    /// The cores a job could get on each node of partition `p` that has
    /// the devices it asks, were the node idle: (node index, cores).
    pub(super) fn node_capacities(
        &self,
        p: usize,
        mem_per_cpu: u64,
        gres: Counts,
    ) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.config.partitions[p]
            .nodes
            .iter()
            .filter(move |&&n| {
                let has = &self.config.nodes[n].devices;
                has.iter().zip(&gres).all(|(h, g)| h >= g)
            })
            .map(move |&n| {
                let node = &self.loads[n];
                let by_mem = node.memory_mb.checked_div(mem_per_cpu).unwrap_or(u64::MAX);
                (n, u64::from(node.cpus).min(by_mem))
            })
    }

    /// Puts a job in the queue at its place: partition priority, then id.
    pub(super) fn enqueue(&mut self, partition: usize, q: Queued) {
        let key = self.queue_key(partition, q.submit_ns, q.job);
        let views = &self.partition_views;
        let queue = Arc::make_mut(&mut self.queue);
        // Submit instants grow: a new job goes after every job of its
        // priority, at the end unless priorities differ.
        let at = queue
            .partition_point(|o| (Reverse(views[o.partition].priority), o.submit_ns, o.job) < key);
        // Queued again while its removal is held back (`unqueue_batched`):
        // it is still there, at its place; it stays.
        let held_back = self
            .unqueue_later
            .as_mut()
            .is_some_and(|later| later.remove(&key));
        if held_back && queue.get(at).is_some_and(|o| o.job == q.job) {
            queue[at] = q;
            return;
        }
        queue.insert(at, q);
    }

    /// A job's place in the queue: partition priority, then submit
    /// instant, then id.
    fn queue_key(&self, partition: usize, submit_mono: i64, id: u64) -> QueueKey {
        (
            Reverse(self.partition_views[partition].priority),
            submit_mono,
            id,
        )
    }

    /// Takes a job out of the queue, if it is there; called while the job
    /// is still in the tables (its submit instant finds its place).
    pub(super) fn unqueue(&mut self, id: u64, partition: usize) {
        let Some(submit) = self.jobs.get(&id).map(|j| j.submit_mono) else {
            return;
        };
        let key = self.queue_key(partition, submit, id);
        if let Some(later) = &mut self.unqueue_later {
            later.insert(key);
            return;
        }
        self.unqueue_key(key);
    }

    /// Puts what policies read of waiting job `id` (its limit, say) in the
    /// queue again, at the same place; a held or throttled one is not in it.
    pub(super) fn requeue_view(&mut self, id: u64) {
        let Some(j) = self.jobs.get(&id).filter(|j| !j.held && !j.throttled) else {
            return;
        };
        let (p, q) = (j.partition, j.as_queued());
        self.unqueue(id, p);
        self.enqueue(p, q);
    }

    /// Takes the job of `key` out of the queue: found by binary search,
    /// the rest of the queue moved up.
    fn unqueue_key(&mut self, key: QueueKey) {
        let views = &self.partition_views;
        let queue = Arc::make_mut(&mut self.queue);
        let at = queue
            .partition_point(|o| (Reverse(views[o.partition].priority), o.submit_ns, o.job) < key);
        if queue.get(at).is_some_and(|q| q.job == key.2) {
            queue.remove(at);
        }
    }

    /// Runs `f` with removals from the queue held back and made together
    /// at the end. One at a time, each moves the rest of the queue: a pass
    /// that starts a thousand jobs out of 100,000, or a shutdown that
    /// cancels 300,000, would be quadratic. A few are still taken out one
    /// by one (a pass usually starts one or two jobs); more, in one walk
    /// of the queue and their sorted keys together. (`f` must not read the
    /// queue meanwhile: no pass runs inside it.)
    pub(super) fn unqueue_batched<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        /// Removals past which one walk of the whole queue is cheaper.
        const ONE_BY_ONE: usize = 16;
        let nested = self.unqueue_later.is_some();
        if !nested {
            self.unqueue_later = Some(HashSet::new());
        }
        let r = f(self);
        if nested {
            return r;
        }
        let mut keys: Vec<QueueKey> = self
            .unqueue_later
            .take()
            .unwrap_or_default()
            .into_iter()
            .collect();
        if keys.len() <= ONE_BY_ONE {
            for key in keys {
                self.unqueue_key(key);
            }
        } else {
            keys.sort_unstable();
            let views = &self.partition_views;
            let mut next = keys.iter().peekable();
            Arc::make_mut(&mut self.queue).retain(|q| {
                let key = (Reverse(views[q.partition].priority), q.submit_ns, q.job);
                while next.next_if(|k| **k < key).is_some() {}
                next.next_if(|k| **k == key).is_none()
            });
        }
        r
    }

    pub(super) fn active_at(&self, id: u64) -> Option<usize> {
        self.active.binary_search_by_key(&id, |a| a.job).ok()
    }

    /// Updates the policies' copy of an active job: its state since
    /// `since`, with `remaining` ns of run time expected from then.
    pub(super) fn set_active(&mut self, id: u64, state: ActiveState, since: i64, remaining: i64) {
        if let Some(i) = self.active_at(id) {
            let a = &mut Arc::make_mut(&mut self.active)[i];
            a.state = state;
            a.since_ns = since;
            a.remaining_ns = remaining;
            // Only a running job releases its cores at a time one can tell.
            a.expected_end_ns = if state == ActiveState::Running {
                since.saturating_add(remaining)
            } else {
                i64::MAX
            };
        }
        if state == ActiveState::Running {
            self.expect_end(id);
        } else {
            self.forget_end(id);
        }
    }

    /// What the policy sees.
    pub fn view(&self, now: Now) -> View {
        let mut nodes = crate::policy::spare::node_views(self.nodes.len());
        nodes.extend(self.loads.iter().enumerate().map(|(i, n)| NodeView {
            cpus: n.cpus,
            free_cpus: n.cpus.saturating_sub(n.alloc_cpus),
            free_mem_mb: n.memory_mb.saturating_sub(n.alloc_mem_mb),
            free_slots: n.slots.saturating_sub(n.slot_cpus),
            usable: self.is_usable(i),
            free_gres: self.device_free.get(i).map(gres::count).unwrap_or_default(),
        }));
        View {
            now_ns: now.mono,
            nodes,
            partitions: Arc::clone(&self.partition_views),
            queue: Arc::clone(&self.queue),
            active: Arc::clone(&self.active),
            happened: Vec::new(),
        }
    }

    /// From now on, keep what happens for the policy's views.
    pub fn keep_events(&mut self) {
        self.happened.get_or_insert_with(Vec::new);
    }

    /// How many jobs are pending.
    pub(super) fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// The pending jobs, in queue order.
    pub(super) fn pending(&self) -> impl Iterator<Item = u64> + '_ {
        self.queue.iter().map(|q| q.job)
    }

    /// Jobs that wait out of the queue: held for others (`after`), or
    /// tasks of an array at its limit.
    pub(super) fn waiting_outside(&self) -> impl Iterator<Item = u64> + '_ {
        self.jobs
            .values()
            .filter(|j| j.held || j.throttled)
            .map(|j| j.id)
    }

    /// The jobs a policy suspended (their cores free, theirs to resume).
    pub(super) fn policy_suspended(&self) -> impl Iterator<Item = u64> + '_ {
        self.active
            .iter()
            .filter(|a| a.state == ActiveState::Suspended)
            .map(|a| a.job)
    }

    /// Stops keeping events: no policy will take them any more.
    pub(super) fn forget_events(&mut self) {
        self.happened = None;
    }

    /// Whether something happened that the policy has not yet seen.
    pub fn has_events(&self) -> bool {
        self.happened.as_ref().is_some_and(|h| !h.is_empty())
    }

    /// What happened since the last call.
    pub(super) fn take_events(&mut self) -> Vec<Happened> {
        self.happened
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub(super) fn record_event(&mut self, event: Happened) {
        if let Some(h) = &mut self.happened {
            h.push(event);
        }
    }

    /// Nothing more will be submitted (a replay's last job is in): an
    /// event-driven scheduler is told, once no job waits out of the queue.
    /// A job held for others, or an array task at its limit, reaches the
    /// scheduler as a submission when it enters the queue, and Batsim's
    /// `no_more_static_job_to_submit` promises that none comes after it.
    pub fn no_more_jobs(&mut self, now: super::Now) {
        if self.happened.is_some() && self.no_more == NoMore::Unsaid {
            self.no_more = NoMore::Since(now.mono);
            self.tell_no_more(now.mono);
        }
    }

    /// Tells the scheduler that no more jobs will come, at `at_ns`, if the
    /// client said so and no job waits out of the queue any more. Called
    /// whenever a job leaves the waiting room.
    pub(super) fn tell_no_more(&mut self, at_ns: i64) {
        let NoMore::Since(since) = self.no_more else {
            return;
        };
        if self.waiting_outside().next().is_some() {
            return;
        }
        self.no_more = NoMore::Told;
        self.record_event(Happened::NoMoreJobs {
            at_ns: at_ns.max(since),
        });
        self.wants_pass = true;
    }
}
