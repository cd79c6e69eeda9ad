//! The cluster's truth: nodes, jobs, the queue, agents and counters, and
//! the plain functions that change them. One owner (the server task) calls
//! them; what must reach an agent goes out through an [`Outbox`], so tests
//! drive the state synchronously with a recording outbox.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use formats::wire::{
    ClusterStats, Exit, Held, HostInfo, HostReport, JobFilter, JobInfo, JobOutcome, JobSpec,
    JobState, NodeInfo, NodeState, StartJob, ToAgent, PASS_BUCKETS,
};
use tracing::{info, warn};

use crate::config;
use crate::journal::{Entry, JobImage, Recovered};
use crate::policy::{Active, ActiveState, Decision, Gang, NodeView, PartitionView, Queued, View};

pub type AgentId = u64;

/// Where messages for agents go.
pub trait Outbox {
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent);
}

/// Finished jobs kept for `queue --all` and replays' accounting; older
/// ones are forgotten. Enough for the largest trace of the archive.
pub const HISTORY: usize = 500_000;

/// An instant on both clocks the state uses: `mono` (nanoseconds on a
/// monotonic clock, what durations and policies use) and `wall`
/// (CLOCK_REALTIME nanoseconds, what users and records see). The server
/// reads the real clocks; the simulator makes them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub mono: i64,
    pub wall: i64,
}

/// The server's clock: monotonic nanoseconds since it started.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Now {
        Now {
            mono: self.epoch.elapsed().as_nanos() as i64,
            wall: wall_ns(),
        }
    }

    /// The real instant of monotonic time `mono`.
    pub fn instant(&self, mono: i64) -> std::time::Instant {
        self.epoch + Duration::from_nanos(mono.max(0) as u64)
    }
}

/// Why a job is suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendedBy {
    /// `controller suspend`: the job keeps its cores until resumed.
    Admin,
    /// The scheduling policy: its cores go to others, its memory stays.
    Policy,
}

#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub cpus: u32,
    pub memory_mb: u64,
    /// Cores in use: by running jobs and jobs an administrator suspended.
    pub alloc_cpus: u32,
    /// Cores allocated to any job, suspended by the policy or not: what
    /// gang time-slicing may oversubscribe up to K times.
    pub slot_cpus: u32,
    /// Memory of every job holding the node, suspended or not.
    pub alloc_mem_mb: u64,
    /// Drained, and why.
    pub drained: Option<String>,
    /// The agent serving it; `None`: down.
    pub agent: Option<AgentId>,
}

impl Node {
    pub fn state(&self) -> NodeState {
        if self.agent.is_none() {
            NodeState::Down
        } else if self.drained.is_some() {
            NodeState::Drained
        } else if self.alloc_cpus == 0 {
            NodeState::Idle
        } else if self.alloc_cpus >= self.cpus {
            NodeState::Allocated
        } else {
            NodeState::Mixed
        }
    }
}

#[derive(Debug)]
pub struct Job {
    pub id: u64,
    pub spec: JobSpec,
    pub partition: usize,
    pub state: JobState,
    pub submit_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    /// (node, cores) held while running or suspended.
    pub alloc: Vec<(usize, u32)>,
    /// The nodes it was given, folded (kept after it ends).
    pub nodes: String,
    /// The agent running its process.
    pub agent: Option<AgentId>,
    pub reason: String,
    /// A cancel was sent; the state to end in (cancelled, or timeout when
    /// the controller enforced the wall-time limit).
    pub ending_as: Option<JobState>,
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
    /// Submit instant on the monotonic clock, for gang fairness.
    pub submit_mono: i64,
}

impl Job {
    fn estimate_ns(&self) -> u64 {
        if self.spec.walltime_ns > 0 {
            self.spec.walltime_ns
        } else {
            self.spec.runtime_ns
        }
    }

    /// Nanoseconds run, not counting suspensions.
    fn run_time(&self, now: i64) -> i64 {
        let Some(start) = self.started_mono else {
            return 0;
        };
        let suspended = self.suspended_total + self.suspended_since.map_or(0, |s| now - s);
        (now - start - suspended).max(0)
    }
}

#[derive(Debug)]
pub struct Agent {
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
pub struct Counters {
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
    pub fn pass(&mut self, took: Duration) {
        self.passes += 1;
        self.last_pass = took;
        self.pass_ns_total += took.as_nanos() as u64;
        let secs = took.as_secs_f64();
        let at = PASS_BUCKETS.partition_point(|&b| b < secs);
        self.pass_buckets[at] += 1;
    }
}

/// Where a pending job stands in the queue: its partition's priority
/// (highest first), then its id.
type QueueKey = (Reverse<u32>, u64);

pub struct Cluster {
    pub config: Arc<config::Cluster>,
    pub nodes: Vec<Node>,
    node_index: HashMap<String, usize>,
    /// Jobs not yet over. Boxed: the map keeps spare buckets (up to twice
    /// as many as jobs), which then cost a pointer each, not a whole job.
    pub jobs: HashMap<u64, Box<Job>>,
    /// Pending jobs in queue order (partition priority, then id), as
    /// policies see them. Kept up to date in place and shared with the
    /// views of passes, so a pass copies nothing.
    queue: Arc<Vec<Queued>>,
    /// While [`Cluster::unqueue_batched`] runs: the queue keys of the jobs
    /// to take out of the queue at its end.
    unqueue_later: Option<Vec<QueueKey>>,
    /// Jobs holding resources, by id, as policies see them.
    active: Arc<Vec<Active>>,
    /// Finished jobs by id, and their ids oldest first (for forgetting).
    done: HashMap<u64, JobInfo>,
    done_order: VecDeque<u64>,
    next_id: u64,
    pub agents: HashMap<AgentId, Agent>,
    pub counters: Counters,
    /// Jobs per core each node allows: the largest `oversubscribe` of its
    /// partitions (1 without gang time-slicing).
    oversubscription: Vec<u32>,
    /// (partition, MiB per core) → cores a job could ever get there.
    capacity_cache: HashMap<(usize, u64), u64>,
    /// The partitions as policies see them; built once.
    partition_views: Arc<Vec<PartitionView>>,
    /// Set when something happened that may let a job start.
    pub needs_schedule: bool,
    /// Jobs suspended by the policy, waiting to resume.
    policy_suspended: usize,
    /// Ends that agents reported, for the server to acknowledge (once they
    /// are journaled) so the agents can forget them.
    pub forget: Vec<(AgentId, u64)>,
    /// Record changes as journal entries (the server does; the twin not).
    pub journaling: bool,
    /// Entries not yet taken by the server.
    pub journal: Vec<Entry>,
}

/// CLOCK_REALTIME nanoseconds now.
pub fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Cluster {
    /// Whether a pass could decide anything: some job waits (pending, or
    /// suspended by the policy). Passes are skipped otherwise, unless the
    /// policy asked to be woken.
    pub fn anything_waits(&self) -> bool {
        !self.queue.is_empty() || self.policy_suspended > 0
    }

    pub fn new(config: Arc<config::Cluster>) -> Cluster {
        let partition_config = Arc::clone(&config);
        let nodes: Vec<Node> = config
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                cpus: n.cpus,
                memory_mb: n.memory_mb,
                alloc_cpus: 0,
                slot_cpus: 0,
                alloc_mem_mb: 0,
                drained: None,
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
        Cluster {
            config,
            nodes,
            node_index,
            jobs: HashMap::new(),
            queue: Arc::new(Vec::new()),
            unqueue_later: None,
            active: Arc::new(Vec::new()),
            done: HashMap::new(),
            done_order: VecDeque::new(),
            next_id: 1,
            agents: HashMap::new(),
            counters: Counters::default(),
            oversubscription,
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
                    })
                    .collect(),
            ),
            needs_schedule: false,
            policy_suspended: 0,
            forget: Vec::new(),
            journaling: false,
            journal: Vec::new(),
        }
    }

    fn partition_of(&self, name: Option<&str>) -> Result<usize, String> {
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
    /// could ever get (nodes' cores, or what their memory allows). Cached:
    /// submissions come by the thousand.
    fn capacity(&mut self, p: usize, mem_per_cpu: u64) -> u64 {
        if let Some(&c) = self.capacity_cache.get(&(p, mem_per_cpu)) {
            return c;
        }
        let c = self.config.partitions[p]
            .nodes
            .iter()
            .map(|&n| {
                let node = &self.nodes[n];
                let by_mem = node.memory_mb.checked_div(mem_per_cpu).unwrap_or(u64::MAX);
                u64::from(node.cpus).min(by_mem)
            })
            .sum();
        self.capacity_cache.insert((p, mem_per_cpu), c);
        c
    }

    /// Accepts jobs; all or none: a job that can never run is refused with
    /// the reason, and so are the others of the same request.
    pub fn submit(&mut self, specs: Vec<JobSpec>, now: Now) -> Result<Vec<u64>, String> {
        let n = specs.len();
        let mut checked = Vec::with_capacity(n);
        // Named as people count: "job 3 of 4" of the request.
        let which = |i: usize| {
            if n == 1 {
                "job".to_string()
            } else {
                format!("job {} of {n}", i + 1)
            }
        };
        for (i, spec) in specs.into_iter().enumerate() {
            let p = self.partition_of(spec.partition.as_deref())?;
            let capacity = self.capacity(p, spec.mem_per_cpu_mb);
            let part = &self.config.partitions[p];
            if spec.cores == 0 {
                return Err(format!("{}: cores must be at least 1", which(i)));
            }
            if u64::from(spec.cores) > capacity {
                return Err(if spec.mem_per_cpu_mb > 0 {
                    format!(
                        "{}: {} cores with {} MiB each, but partition {} has memory for {capacity}",
                        which(i),
                        spec.cores,
                        spec.mem_per_cpu_mb,
                        part.name
                    )
                } else {
                    format!(
                        "{}: {} cores, but partition {} has {capacity}",
                        which(i),
                        spec.cores,
                        part.name
                    )
                });
            }
            if part.max_time_ns > 0 && spec.walltime_ns > part.max_time_ns {
                return Err(format!(
                    "{}: wall time over partition {}'s limit",
                    which(i),
                    part.name
                ));
            }
            checked.push((p, spec));
        }
        let mut ids = Vec::with_capacity(checked.len());
        for (p, spec) in checked {
            let id = self.next_id;
            self.next_id += 1;
            self.jobs.insert(
                id,
                Box::new(Job {
                    id,
                    submit_ns: spec.submit_ns.unwrap_or(now.wall),
                    spec,
                    partition: p,
                    state: JobState::Pending,
                    start_ns: 0,
                    end_ns: 0,
                    alloc: Vec::new(),
                    nodes: String::new(),
                    agent: None,
                    reason: String::new(),
                    ending_as: None,
                    suspended_by: None,
                    started_mono: None,
                    since_mono: now.mono,
                    suspended_since: None,
                    suspended_total: 0,
                    host: None,
                    lost_at: None,
                    suspensions: Vec::new(),
                    submit_mono: now.mono,
                }),
            );
            let q = Queued {
                job: id,
                partition: p,
                cores: self.jobs[&id].spec.cores,
                mem_per_cpu_mb: self.jobs[&id].spec.mem_per_cpu_mb,
                estimate_ns: self.jobs[&id].estimate_ns(),
                submit_ns: now.mono,
            };
            self.enqueue(p, q);
            if self.journaling {
                let image = self.image(&self.jobs[&id], now);
                self.journal.push(Entry::Submitted(Box::new(image)));
            }
            ids.push(id);
        }
        self.counters.submitted += ids.len() as u64;
        self.needs_schedule = true;
        Ok(ids)
    }

    /// Puts a job in the queue at its place: partition priority, then id.
    fn enqueue(&mut self, partition: usize, q: Queued) {
        let key = self.queue_key(partition, q.job);
        let views = &self.partition_views;
        let queue = Arc::make_mut(&mut self.queue);
        // Ids grow: a new job goes after every job of its priority, at the
        // end unless priorities differ.
        let at = queue.partition_point(|o| (Reverse(views[o.partition].priority), o.job) < key);
        // Queued again while its removal is held back (`unqueue_batched`):
        // it is still there, at its place; it stays.
        let held_back = match &mut self.unqueue_later {
            Some(later) => match later.iter().position(|k| *k == key) {
                Some(i) => {
                    later.swap_remove(i);
                    true
                }
                None => false,
            },
            None => false,
        };
        if held_back && queue.get(at).is_some_and(|o| o.job == q.job) {
            queue[at] = q;
            return;
        }
        queue.insert(at, q);
    }

    /// A job's place in the queue: partition priority, then id.
    fn queue_key(&self, partition: usize, id: u64) -> QueueKey {
        (Reverse(self.partition_views[partition].priority), id)
    }

    fn unqueue(&mut self, id: u64, partition: usize) {
        let key = self.queue_key(partition, id);
        if let Some(later) = &mut self.unqueue_later {
            later.push(key);
            return;
        }
        self.unqueue_key(key);
    }

    /// Takes the job of `key` out of the queue: found by binary search,
    /// the rest of the queue moved up.
    fn unqueue_key(&mut self, key: QueueKey) {
        let views = &self.partition_views;
        let queue = Arc::make_mut(&mut self.queue);
        let at = queue.partition_point(|o| (Reverse(views[o.partition].priority), o.job) < key);
        if queue.get(at).is_some_and(|q| q.job == key.1) {
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
    fn unqueue_batched<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        /// Removals past which one walk of the whole queue is cheaper.
        const ONE_BY_ONE: usize = 16;
        let nested = self.unqueue_later.is_some();
        if !nested {
            self.unqueue_later = Some(Vec::new());
        }
        let r = f(self);
        if nested {
            return r;
        }
        let mut keys = self.unqueue_later.take().unwrap_or_default();
        if keys.len() <= ONE_BY_ONE {
            for key in keys {
                self.unqueue_key(key);
            }
        } else {
            keys.sort_unstable();
            let views = &self.partition_views;
            let mut next = keys.iter().peekable();
            Arc::make_mut(&mut self.queue).retain(|q| {
                let key = (Reverse(views[q.partition].priority), q.job);
                while next.next_if(|k| **k < key).is_some() {}
                next.next_if(|k| **k == key).is_none()
            });
        }
        r
    }

    fn active_at(&self, id: u64) -> Option<usize> {
        self.active.binary_search_by_key(&id, |a| a.job).ok()
    }

    /// Updates the policies' copy of an active job: its state since
    /// `since`, with `remaining` ns of run time expected from then.
    fn set_active(&mut self, id: u64, state: ActiveState, since: i64, remaining: i64) {
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
    }

    /// What the policy sees.
    pub fn view(&self, now: Now) -> View {
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeView {
                cpus: n.cpus,
                free_cpus: n.cpus.saturating_sub(n.alloc_cpus),
                free_mem_mb: n.memory_mb.saturating_sub(n.alloc_mem_mb),
                free_slots: (n.cpus * self.oversubscription[i]).saturating_sub(n.slot_cpus),
                usable: n.agent.is_some() && n.drained.is_none(),
            })
            .collect();
        View {
            now_ns: now.mono,
            nodes,
            partitions: Arc::clone(&self.partition_views),
            queue: Arc::clone(&self.queue),
            active: Arc::clone(&self.active),
        }
    }

    /// Carries out a policy's decisions, checking each: one that would
    /// overbook a node or act on a job in the wrong state is refused and
    /// logged.
    pub fn apply(&mut self, decisions: Vec<Decision>, now: Now, out: &mut impl Outbox) {
        self.unqueue_batched(|c| {
            for d in decisions {
                let result = match d {
                    Decision::Start { job, alloc } => c.start_job(job, alloc, now, out),
                    Decision::Suspend(job) => c.policy_suspend(job, now, out),
                    Decision::Resume(job) => c.policy_resume(job, now, out),
                    Decision::Cancel(job) => c.cancel_at(job, JobState::Cancelled, now, out),
                };
                if let Err(e) = result {
                    warn!("policy decision refused: {e}");
                    c.counters.refused += 1;
                }
            }
        })
    }

    fn start_job(
        &mut self,
        id: u64,
        alloc: Vec<(usize, u32)>,
        now: Now,
        out: &mut impl Outbox,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("start of unknown job {id}"))?;
        if job.state != JobState::Pending {
            return Err(format!(
                "start of job {id}, which is {}",
                job.state.as_str()
            ));
        }
        let total: u32 = alloc.iter().map(|(_, c)| c).sum();
        if total != job.spec.cores {
            return Err(format!(
                "start of job {id} on {total} cores, not {}",
                job.spec.cores
            ));
        }
        // In a partition that time-slices, at most K jobs per core, running
        // or suspended. (A job suspended by preemption elsewhere does not
        // count: its cores are free for the job that preempted it.)
        let gang = self.config.partitions[job.partition].oversubscribe > 1;
        for &(n, c) in &alloc {
            let node = self
                .nodes
                .get(n)
                .ok_or_else(|| format!("start of job {id} on node {n}"))?;
            let mem = u64::from(c) * job.spec.mem_per_cpu_mb;
            if node.agent.is_none()
                || node.alloc_cpus + c > node.cpus
                || (gang && node.slot_cpus + c > node.cpus * self.oversubscription[n])
                || node.alloc_mem_mb + mem > node.memory_mb
            {
                return Err(format!(
                    "start of job {id} would overbook node {}",
                    node.name
                ));
            }
        }
        let (first, _) = alloc[0];
        let agent = self.nodes[first]
            .agent
            .ok_or_else(|| format!("node of job {id} is down"))?;
        let partition = job.partition;
        let mem_per_cpu = job.spec.mem_per_cpu_mb;
        let (cores, estimate) = (job.spec.cores, job.estimate_ns());
        self.unqueue(id, partition);
        let active = Active {
            job: id,
            partition,
            cores,
            mem_per_cpu_mb: mem_per_cpu,
            alloc: alloc.clone(),
            state: ActiveState::Running,
            since_ns: now.mono,
            expected_end_ns: now
                .mono
                .saturating_add(estimate.min(i64::MAX as u64) as i64),
            remaining_ns: estimate.min(i64::MAX as u64) as i64,
        };
        let list = Arc::make_mut(&mut self.active);
        let at = list.partition_point(|a| a.job < id);
        list.insert(at, active);
        for &(n, c) in &alloc {
            let node = &mut self.nodes[n];
            node.alloc_cpus += c;
            node.slot_cpus += c;
            node.alloc_mem_mb += u64::from(c) * mem_per_cpu;
        }
        let nodes = self
            .config
            .fold(&alloc.iter().map(|(n, _)| *n).collect::<Vec<_>>());
        let first_name = self.nodes[first].name.clone();
        let Some(job) = self.jobs.get_mut(&id) else {
            return Err(format!("start of unknown job {id}"));
        };
        job.state = JobState::Running;
        job.start_ns = now.wall;
        job.started_mono = Some(now.mono);
        job.since_mono = now.mono;
        job.agent = Some(agent);
        job.host = self.agents.get(&agent).map(|a| a.host.clone());
        job.nodes = nodes;
        job.alloc = alloc;
        if self.journaling {
            // After the allocation is set: a restart gives the job back
            // exactly these cores.
            self.journal.push(Entry::Started {
                id,
                alloc: job
                    .alloc
                    .iter()
                    .map(|&(n, c)| (self.nodes[n].name.clone(), c))
                    .collect(),
                nodes: job.nodes.clone(),
                host: job.host.clone().unwrap_or_default(),
                at_ns: now.wall,
            });
        }
        out.to_agent(
            agent,
            ToAgent::Start(StartJob {
                job: id,
                node: first_name,
                cores: job.spec.cores,
                runtime_ns: job.spec.runtime_ns,
                walltime_ns: job.spec.walltime_ns,
                submit_ns: job.submit_ns,
            }),
        );
        self.counters.started += 1;
        Ok(())
    }

    /// Moves a running job to suspended: `by` the policy (its cores become
    /// free) or an administrator (it keeps them).
    fn suspend_job(
        &mut self,
        id: u64,
        by: SuspendedBy,
        now: Now,
        out: &mut impl Outbox,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        if job.state != JobState::Running || job.ending_as.is_some() {
            return Err(format!("job {id} is {}, not running", job.state.as_str()));
        }
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        job.state = JobState::Suspended;
        job.suspended_by = Some(by);
        job.suspended_since = Some(now.mono);
        job.suspensions.push((now.wall, 0));
        if self.journaling {
            self.journal.push(Entry::Suspended {
                id,
                by_policy: by == SuspendedBy::Policy,
                at_ns: now.wall,
            });
        }
        job.since_mono = now.mono;
        if let Some(a) = job.agent {
            out.to_agent(a, ToAgent::Suspend(id));
        }
        if by == SuspendedBy::Policy {
            for &(n, c) in &job.alloc {
                self.nodes[n].alloc_cpus -= c;
            }
            self.policy_suspended += 1;
            self.needs_schedule = true;
        }
        let state = match by {
            SuspendedBy::Policy => ActiveState::Suspended,
            SuspendedBy::Admin => ActiveState::Held,
        };
        self.set_active(id, state, now.mono, remaining);
        self.counters.suspensions += 1;
        Ok(())
    }

    fn resume_job(
        &mut self,
        id: u64,
        by: SuspendedBy,
        now: Now,
        out: &mut impl Outbox,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        if job.state != JobState::Suspended {
            return Err(format!("job {id} is {}, not suspended", job.state.as_str()));
        }
        if job.suspended_by != Some(by) {
            return Err(match by {
                SuspendedBy::Admin => format!(
                    "job {id} was suspended by the scheduler; it resumes when its cores are free"
                ),
                SuspendedBy::Policy => format!("job {id} is held by an administrator"),
            });
        }
        if by == SuspendedBy::Policy {
            if let Some(&(n, _)) = job
                .alloc
                .iter()
                .find(|&&(n, c)| self.nodes[n].alloc_cpus + c > self.nodes[n].cpus)
            {
                return Err(format!(
                    "resume of job {id} would overbook node {}",
                    self.nodes[n].name
                ));
            }
            for &(n, c) in &job.alloc {
                self.nodes[n].alloc_cpus += c;
            }
            self.policy_suspended -= 1;
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return Err(format!("no active job {id}"));
        };
        job.state = JobState::Running;
        job.suspended_by = None;
        if let Some(s) = job.suspended_since.take() {
            job.suspended_total += now.mono - s;
        }
        if let Some(last) = job.suspensions.last_mut() {
            last.1 = now.wall;
        }
        if self.journaling {
            self.journal.push(Entry::Resumed {
                id,
                at_ns: now.wall,
            });
        }
        job.since_mono = now.mono;
        if let Some(a) = job.agent {
            out.to_agent(a, ToAgent::Resume(id));
        }
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        self.set_active(id, ActiveState::Running, now.mono, remaining);
        Ok(())
    }

    fn policy_suspend(&mut self, id: u64, now: Now, out: &mut impl Outbox) -> Result<(), String> {
        self.suspend_job(id, SuspendedBy::Policy, now, out)
    }

    fn policy_resume(&mut self, id: u64, now: Now, out: &mut impl Outbox) -> Result<(), String> {
        self.resume_job(id, SuspendedBy::Policy, now, out)
    }

    fn release(&mut self, id: u64) {
        if let Some(i) = self.active_at(id) {
            Arc::make_mut(&mut self.active).remove(i);
        }
        if let Some(job) = self.jobs.get_mut(&id) {
            // A job the policy suspended has given its cores back already.
            let holds_cores = job.suspended_by != Some(SuspendedBy::Policy);
            if !holds_cores {
                self.policy_suspended -= 1;
            }
            for (n, c) in std::mem::take(&mut job.alloc) {
                let node = &mut self.nodes[n];
                if holds_cores {
                    node.alloc_cpus -= c;
                }
                node.slot_cpus -= c;
                node.alloc_mem_mb -= u64::from(c) * job.spec.mem_per_cpu_mb;
            }
        }
        self.needs_schedule = true;
    }

    /// Moves a job to a final state and into the history.
    fn finish(&mut self, id: u64, state: JobState, reason: String, now: Now) {
        self.release(id);
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        self.unqueue(id, job.partition);
        job.state = state;
        job.end_ns = now.wall;
        job.reason = reason;
        // Ended while suspended (cancelled, lost), or as the suspension was
        // decided: a finished job has no open suspension.
        if let Some(last) = job.suspensions.last_mut().filter(|s| s.1 == 0) {
            last.1 = now.wall;
        }
        if job.started_mono.is_some() {
            self.counters.ended += 1;
        }
        if self.done_order.len() == HISTORY {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
        let info = self.info(&job);
        if self.journaling {
            self.journal.push(Entry::Ended(Box::new(info.clone())));
        }
        self.done.insert(id, info);
        self.done_order.push_back(id);
    }

    /// An agent reported that a job's process ended.
    pub fn job_ended(&mut self, agent: AgentId, id: u64, exit: Exit, now: Now) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.agent != Some(agent) {
            warn!(
                job = id,
                agent, "end reported by an agent that does not run the job"
            );
            return;
        }
        self.forget.push((agent, id));
        let cancelled = job.ending_as;
        let asked = |default: JobState| match cancelled {
            Some(JobState::Timeout) => (JobState::Timeout, "wall-time limit".to_string()),
            Some(s) => (s, "cancelled".to_string()),
            None => (default, String::new()),
        };
        let (state, reason) = match exit {
            Exit::Code(0) => (JobState::Completed, String::new()),
            Exit::Code(124) => (JobState::Timeout, "wall-time limit".into()),
            Exit::Code(c) if c > 128 => {
                let (s, r) = asked(JobState::Cancelled);
                (
                    s,
                    if r.is_empty() {
                        format!("signal {}", c - 128)
                    } else {
                        r
                    },
                )
            }
            Exit::Signal(sig) => {
                let (s, r) = asked(JobState::Failed);
                (
                    s,
                    if r.is_empty() {
                        format!("killed by signal {sig}")
                    } else {
                        r
                    },
                )
            }
            Exit::Code(c) => (JobState::Failed, format!("sigsleep exited {c}")),
            Exit::SpawnFailed => (JobState::Failed, "could not start sigsleep".into()),
            Exit::Fenced => {
                // Not an end of the job: its agent killed it because it
                // could not reach this controller, which may have run it
                // elsewhere.
                self.execution_lost(id, "its agent lost the controller and killed it", now);
                return;
            }
        };
        self.finish(id, state, reason, now);
    }

    pub fn cancel(&mut self, ids: &[u64], now: Now, out: &mut impl Outbox) -> Vec<JobOutcome> {
        self.unqueue_batched(|c| {
            ids.iter()
                .map(|&id| JobOutcome {
                    id,
                    error: c.cancel_at(id, JobState::Cancelled, now, out).err(),
                })
                .collect()
        })
    }

    fn cancel_at(
        &mut self,
        id: u64,
        as_state: JobState,
        now: Now,
        out: &mut impl Outbox,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        match job.state {
            JobState::Pending => {
                self.finish(
                    id,
                    JobState::Cancelled,
                    "cancelled while pending".into(),
                    now,
                );
            }
            JobState::Running | JobState::Suspended => {
                if job.ending_as.is_none() {
                    job.ending_as = Some(as_state);
                    if self.journaling {
                        self.journal.push(Entry::Ending {
                            id,
                            state: as_state,
                        });
                    }
                    if let Some(a) = job.agent {
                        out.to_agent(a, ToAgent::Cancel(id));
                    }
                    // No policy may suspend or resume it now.
                    self.set_active(id, ActiveState::Ending, now.mono, 0);
                }
            }
            _ => return Err(format!("job {id} is already over")),
        }
        Ok(())
    }

    /// `controller suspend`: the jobs keep their cores until resumed.
    pub fn suspend(&mut self, ids: &[u64], now: Now, out: &mut impl Outbox) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| JobOutcome {
                id,
                error: self.suspend_job(id, SuspendedBy::Admin, now, out).err(),
            })
            .collect()
    }

    pub fn resume(&mut self, ids: &[u64], now: Now, out: &mut impl Outbox) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| JobOutcome {
                id,
                error: self.resume_job(id, SuspendedBy::Admin, now, out).err(),
            })
            .collect()
    }

    /// Node indices of a nodeset expression (groups resolved).
    pub fn resolve(&self, expr: &str) -> Result<Vec<usize>, String> {
        let set = self.config.groups.parse(expr).map_err(|e| e.to_string())?;
        if set.len() > self.nodes.len() {
            return Err(format!(
                "{expr}: {} names, more than the {} nodes of the cluster",
                set.len(),
                self.nodes.len()
            ));
        }
        set.iter()
            .map(|n| {
                self.node_index
                    .get(&n)
                    .copied()
                    .ok_or_else(|| format!("no node {n}"))
            })
            .collect()
    }

    pub fn drain(&mut self, expr: &str, reason: &str) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        let why = if reason.is_empty() { "drained" } else { reason };
        for &n in &idx {
            self.nodes[n].drained = Some(why.to_string());
        }
        let nodes = self.config.fold(&idx);
        if self.journaling {
            self.journal.push(Entry::Drained {
                nodes: nodes.clone(),
                reason: why.to_string(),
            });
        }
        Ok(nodes)
    }

    pub fn undrain(&mut self, expr: &str) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        for &n in &idx {
            self.nodes[n].drained = None;
        }
        self.needs_schedule = true;
        let nodes = self.config.fold(&idx);
        if self.journaling {
            self.journal.push(Entry::Undrained {
                nodes: nodes.clone(),
            });
        }
        Ok(nodes)
    }

    /// An agent registered: it serves these nodes from now on. `held`: the
    /// jobs it reports (an agent registering again after losing the
    /// controller, or after the controller restarted). Jobs of its host
    /// that the controller had lost track of are claimed back; jobs it
    /// runs that the controller does not know are killed; jobs of its host
    /// it does not report are gone. Returns the reported ends to apply
    /// once the records that came with them are in.
    #[allow(clippy::too_many_arguments)]
    pub fn agent_up(
        &mut self,
        agent: AgentId,
        host: &str,
        expr: &str,
        cpus: u32,
        memory_mb: u64,
        local: bool,
        held: &[(u64, Held)],
        now: Now,
        out: &mut impl Outbox,
    ) -> Result<Vec<(u64, Exit)>, String> {
        let idx = self.resolve(expr)?;
        // The same host registering again before its old connection was
        // seen to fail: that registration is over.
        let stale: HashSet<AgentId> = idx
            .iter()
            .filter_map(|&n| self.nodes[n].agent)
            .filter(|a| self.agents.get(a).is_some_and(|x| x.host == host))
            .collect();
        for old in stale {
            self.agent_down(old, "registered again", false, now, out);
        }
        if let Some(&n) = idx.iter().find(|&&n| self.nodes[n].agent.is_some()) {
            return Err(format!(
                "node {} is already served by another agent",
                self.nodes[n].name
            ));
        }
        for &n in &idx {
            let node = &mut self.nodes[n];
            if node.cpus != cpus || (memory_mb > 0 && node.memory_mb != memory_mb) {
                warn!(
                    node = %node.name,
                    host,
                    "agent declares {cpus} cpus / {memory_mb} MiB, the config {} / {}: the config wins",
                    node.cpus,
                    node.memory_mb
                );
            }
            node.agent = Some(agent);
        }
        info!(agent, host, nodes = %self.config.fold(&idx), "agent up");
        self.agents.insert(
            agent,
            Agent {
                host: host.to_string(),
                nodes: idx,
                last_seen: now.mono,
                running: 0,
                local,
                report: None,
            },
        );
        self.needs_schedule = true;

        let mut ends = Vec::new();
        for &(id, h) in held {
            let ours = self.jobs.get(&id).is_some_and(|j| {
                j.agent.is_none() && j.lost_at.is_some() && j.host.as_deref() == Some(host)
            });
            match h {
                Held::Running | Held::Suspended if ours => {
                    self.claim(id, agent, h == Held::Suspended, now, out);
                }
                Held::Running | Held::Suspended => {
                    warn!(
                        job = id,
                        host, "the agent runs a job this controller does not give it: killing it"
                    );
                    out.to_agent(agent, ToAgent::Kill(id));
                }
                Held::Ended(exit) if ours => {
                    self.claim(id, agent, false, now, out);
                    ends.push((id, exit));
                }
                Held::Ended(_) => self.forget.push((agent, id)),
            }
        }
        let gone: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.agent.is_none() && j.lost_at.is_some() && j.host.as_deref() == Some(host))
            .map(|j| j.id)
            .collect();
        for id in gone {
            self.lose(id, &format!("{host} no longer has it"), now, out);
        }
        Ok(ends)
    }

    /// A job its agent reported again: it runs there, as before.
    fn claim(
        &mut self,
        id: u64,
        agent: AgentId,
        suspended_there: bool,
        now: Now,
        out: &mut impl Outbox,
    ) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.agent = Some(agent);
        job.lost_at = None;
        // What was decided while the agent was away is sent again.
        if job.ending_as.is_some() {
            out.to_agent(agent, ToAgent::Cancel(id));
        } else if job.state == JobState::Suspended && !suspended_there {
            out.to_agent(agent, ToAgent::Suspend(id));
        } else if job.state == JobState::Running && suspended_there {
            out.to_agent(agent, ToAgent::Resume(id));
        }
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        let state = if job.ending_as.is_some() {
            ActiveState::Ending
        } else {
            match (job.state, job.suspended_by) {
                (JobState::Suspended, Some(SuspendedBy::Policy)) => ActiveState::Suspended,
                (JobState::Suspended, _) => ActiveState::Held,
                _ => ActiveState::Running,
            }
        };
        let since = job.since_mono;
        self.set_active(id, state, since, remaining);
        info!(job = id, agent, "job reported again by its agent");
    }

    /// A started job whose node was lost: back to the queue, or over as
    /// `node_fail`, as its partition says. Its process, if any is left, is
    /// not this controller's any more.
    fn lose(&mut self, id: u64, why: &str, now: Now, out: &mut impl Outbox) {
        if let Some(a) = self.jobs.get(&id).and_then(|j| j.agent) {
            out.to_agent(a, ToAgent::Kill(id));
        }
        self.execution_lost(id, why, now);
    }

    /// A started job's execution is gone without an end of its own: back
    /// to the queue, or over as `node_fail`, as its partition says.
    fn execution_lost(&mut self, id: u64, why: &str, now: Now) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let requeue = self.config.partitions[job.partition].requeue && job.ending_as.is_none();
        if !requeue {
            let state = job.ending_as.unwrap_or(JobState::NodeFail);
            self.finish(id, state, format!("node lost: {why}"), now);
            return;
        }
        self.release(id);
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        warn!(job = id, why, "job requeued");
        job.state = JobState::Pending;
        job.start_ns = 0;
        job.nodes.clear();
        job.agent = None;
        job.host = None;
        job.lost_at = None;
        job.suspended_by = None;
        job.started_mono = None;
        job.since_mono = now.mono;
        job.suspended_since = None;
        job.suspended_total = 0;
        job.suspensions.clear();
        job.reason = format!("requeued: node lost: {why}");
        if self.journaling {
            self.journal.push(Entry::Requeued {
                id,
                reason: job.reason.clone(),
                at_ns: now.wall,
            });
        }
        let (p, q) = (
            job.partition,
            Queued {
                job: id,
                partition: job.partition,
                cores: job.spec.cores,
                mem_per_cpu_mb: job.spec.mem_per_cpu_mb,
                estimate_ns: job.estimate_ns(),
                submit_ns: job.submit_mono,
            },
        );
        self.enqueue(p, q);
        self.counters.requeued += 1;
        self.needs_schedule = true;
    }

    /// An agent is gone: its nodes are down. Jobs that ran on it wait for
    /// it to come back (until the heartbeat timeout after it was last
    /// heard of) unless it was hosted here, in which case they died with
    /// it; jobs that only held some of its nodes lose them at once.
    /// `expected`: the cluster is shutting down.
    pub fn agent_down(
        &mut self,
        agent: AgentId,
        why: &str,
        expected: bool,
        now: Now,
        out: &mut impl Outbox,
    ) {
        let Some(a) = self.agents.remove(&agent) else {
            return;
        };
        if expected {
            info!(agent, host = %a.host, why, "agent left");
        } else {
            warn!(agent, host = %a.host, why, "agent down");
        }
        let lost: HashSet<usize> = a.nodes.iter().copied().collect();
        for &n in &a.nodes {
            self.nodes[n].agent = None;
        }
        let hit: Vec<(u64, Option<AgentId>)> = self
            .jobs
            .values()
            .filter(|j| j.agent == Some(agent) || j.alloc.iter().any(|(n, _)| lost.contains(n)))
            .map(|j| (j.id, j.agent))
            .collect();
        let timeout = self.config.heartbeat_timeout.as_nanos() as i64;
        for (id, runner) in hit {
            let reason = format!("agent on {} lost: {why}", a.host);
            if runner == Some(agent) && !a.local && !expected {
                let Some(job) = self.jobs.get_mut(&id) else {
                    continue;
                };
                job.agent = None;
                job.lost_at = Some(now.mono.max(a.last_seen.saturating_add(timeout)));
                let since = job.since_mono;
                self.set_active(id, ActiveState::Unreachable, since, 0);
            } else if expected {
                self.finish(id, JobState::NodeFail, reason, now);
            } else {
                self.lose(id, &reason, now, out);
            }
        }
    }

    /// Jobs whose agent stayed away past the deadline are lost.
    pub fn lose_overdue(&mut self, now: Now, out: &mut impl Outbox) {
        let overdue: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.lost_at.is_some_and(|t| t <= now.mono))
            .map(|j| j.id)
            .collect();
        for id in overdue {
            self.lose(id, "its agent did not come back in time", now, out);
        }
    }

    pub fn heartbeat(&mut self, agent: AgentId, running: u32, now: Now) {
        if let Some(a) = self.agents.get_mut(&agent) {
            a.last_seen = now.mono;
            a.running = running;
        }
    }

    /// Agents not heard from within the timeout.
    pub fn silent_agents(&self, now: Now) -> Vec<AgentId> {
        self.agents
            .iter()
            .filter(|(_, a)| {
                now.mono - a.last_seen > self.config.heartbeat_timeout.as_nanos() as i64
            })
            .map(|(&id, _)| id)
            .collect()
    }

    /// Cancels running jobs past their wall-time limit by more than the
    /// grace (sigsleep stops itself at the limit; this is the safety net).
    pub fn enforce_walltime(&mut self, now: Now, out: &mut impl Outbox) {
        let grace = self.config.timeout_grace.as_nanos() as i64;
        let over: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running
                    && j.ending_as.is_none()
                    && j.spec.walltime_ns > 0
                    && j.run_time(now.mono) > j.spec.walltime_ns.min(i64::MAX as u64) as i64 + grace
            })
            .map(|j| j.id)
            .collect();
        for id in over {
            let _ = self.cancel_at(id, JobState::Timeout, now, out);
        }
    }

    /// Cancels every job and tells every agent to stop.
    pub fn shutdown(&mut self, now: Now, out: &mut impl Outbox) {
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        self.unqueue_batched(|c| {
            for id in ids {
                let _ = c.cancel_at(id, JobState::Cancelled, now, out);
            }
        });
        for &a in self.agents.keys() {
            out.to_agent(a, ToAgent::Shutdown);
        }
    }

    pub fn info(&self, j: &Job) -> JobInfo {
        JobInfo {
            id: j.id,
            name: j.spec.name.clone().unwrap_or_default(),
            state: j.state,
            partition: self.config.partitions[j.partition].name.clone(),
            cores: j.spec.cores,
            nodes: j.nodes.clone(),
            submit_ns: j.submit_ns,
            start_ns: j.start_ns,
            end_ns: j.end_ns,
            runtime_ns: j.spec.runtime_ns,
            walltime_ns: j.spec.walltime_ns,
            reason: j.reason.clone(),
            suspensions: j.suspensions.clone(),
        }
    }

    /// The jobs not yet over that pass `filter`, in id order; with ids
    /// given, an error outcome for each that is no job not yet over.
    pub fn matching(&self, filter: &JobFilter) -> (Vec<u64>, Vec<JobOutcome>) {
        let passes = |j: &Job| {
            (filter.states.is_empty() || filter.states.contains(&j.state))
                && filter
                    .partition
                    .as_ref()
                    .is_none_or(|p| *p == self.config.partitions[j.partition].name)
                && filter
                    .name
                    .as_ref()
                    .is_none_or(|n| j.spec.name.as_ref() == Some(n))
        };
        let mut unknown = Vec::new();
        let mut ids: Vec<u64> = if filter.ids.is_empty() {
            self.jobs
                .values()
                .filter(|j| passes(j))
                .map(|j| j.id)
                .collect()
        } else {
            filter
                .ids
                .iter()
                .copied()
                .filter(|id| match self.jobs.get(id) {
                    Some(j) => passes(j),
                    None => {
                        unknown.push(JobOutcome {
                            id: *id,
                            error: Some(format!("no active job {id}")),
                        });
                        false
                    }
                })
                .collect()
        };
        ids.sort_unstable();
        ids.dedup();
        (ids, unknown)
    }

    /// Active jobs in id order, and with `all` the finished ones kept.
    pub fn queue(&self, all: bool) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self.jobs.values().map(|j| self.info(j)).collect();
        if all {
            v.extend(self.done.values().cloned());
        }
        v.sort_by_key(|j| j.id);
        v
    }

    /// These jobs, active or finished, in the order asked; ids the
    /// controller does not know (or has forgotten) are left out.
    pub fn jobs_info(&self, ids: &[u64]) -> Vec<JobInfo> {
        ids.iter()
            .filter_map(|id| match self.jobs.get(id) {
                Some(j) => Some(self.info(j)),
                None => self.done.get(id).cloned(),
            })
            .collect()
    }

    pub fn node_infos(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                state: n.state(),
                cpus: n.cpus,
                alloc_cpus: n.alloc_cpus,
                memory_mb: n.memory_mb,
                alloc_memory_mb: n.alloc_mem_mb,
                host: n
                    .agent
                    .and_then(|a| self.agents.get(&a))
                    .map(|a| a.host.clone())
                    .unwrap_or_default(),
                reason: n.drained.clone().unwrap_or_default(),
            })
            .collect()
    }

    pub fn stats(&self) -> ClusterStats {
        let mut jobs: HashMap<JobState, u64> = HashMap::new();
        for j in self.jobs.values() {
            *jobs.entry(j.state).or_default() += 1;
        }
        for j in self.done.values() {
            *jobs.entry(j.state).or_default() += 1;
        }
        let mut nodes: HashMap<NodeState, u64> = HashMap::new();
        for n in &self.nodes {
            *nodes.entry(n.state()).or_default() += 1;
        }
        ClusterStats {
            jobs: JobState::ALL
                .iter()
                .map(|s| (*s, jobs.get(s).copied().unwrap_or(0)))
                .collect(),
            nodes: NodeState::ALL
                .iter()
                .map(|s| (*s, nodes.get(s).copied().unwrap_or(0)))
                .collect(),
            cores: self.nodes.iter().map(|n| u64::from(n.cpus)).sum(),
            alloc_cores: self.nodes.iter().map(|n| u64::from(n.alloc_cpus)).sum(),
            agents: self.agents.len() as u64,
            submitted: self.counters.submitted,
            started: self.counters.started,
            ended: self.counters.ended,
            suspensions: self.counters.suspensions,
            schedule_passes: self.counters.passes,
            last_pass_ns: self.counters.last_pass.as_nanos() as u64,
            refused_decisions: self.counters.refused,
            requeued: self.counters.requeued,
            pass_buckets: self
                .counters
                .pass_buckets
                .iter()
                .scan(0, |sum, n| {
                    *sum += n;
                    Some(*sum)
                })
                .collect(),
            pass_ns_total: self.counters.pass_ns_total,
            max_jobs: self.config.max_jobs as u64,
            // The server's to fill in: the journal and the waiting
            // submissions are its own.
            journal_unsynced: 0,
            journal_lag_ns: 0,
            held_requests: 0,
            held_jobs: 0,
        }
    }

    /// An agent's report of its host.
    pub fn host_report(&mut self, agent: AgentId, report: HostReport, now: Now) {
        if let Some(a) = self.agents.get_mut(&agent) {
            a.report = Some((report, now.mono));
        }
    }

    /// The connected agents' hosts, by name.
    pub fn hosts(&self, now: Now) -> Vec<HostInfo> {
        let mut v: Vec<HostInfo> = self
            .agents
            .values()
            .map(|a| HostInfo {
                host: a.host.clone(),
                nodes: self.config.fold(&a.nodes),
                local: a.local,
                running: a.running,
                report: a.report.as_ref().map(|(r, _)| r.clone()),
                report_age_ns: a
                    .report
                    .as_ref()
                    .map_or(0, |(_, at)| (now.mono - at).max(0) as u64),
            })
            .collect();
        v.sort_by(|a, b| a.host.cmp(&b.host));
        v
    }
}

/// What the journal keeps of the cluster, and rebuilding from it.
impl Cluster {
    /// A job as the journal keeps it.
    fn image(&self, j: &Job, now: Now) -> JobImage {
        let wall = |mono: i64| now.wall - (now.mono - mono);
        JobImage {
            id: j.id,
            spec: j.spec.clone(),
            partition: self.config.partitions[j.partition].name.clone(),
            state: j.state,
            submit_ns: j.submit_ns,
            start_ns: j.start_ns,
            alloc: j
                .alloc
                .iter()
                .map(|&(n, c)| (self.nodes[n].name.clone(), c))
                .collect(),
            nodes: j.nodes.clone(),
            host: j.host.clone(),
            ending_as: j.ending_as,
            suspended_by_policy: j.suspended_by.map(|b| b == SuspendedBy::Policy),
            suspensions: j.suspensions.clone(),
            since_ns: wall(j.since_mono),
            reason: j.reason.clone(),
        }
    }

    /// Folds the journal into a snapshot of the state, written job by job.
    pub fn write_snapshot(
        &self,
        journal: &mut crate::journal::Journal,
        now: Now,
    ) -> anyhow::Result<()> {
        let mut drained: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(why) = &n.drained {
                drained.entry(why).or_default().push(i);
            }
        }
        let drained: Vec<(String, String)> = drained
            .into_iter()
            .map(|(why, idx)| (self.config.fold(&idx), why.to_string()))
            .collect();
        let history: Vec<JobInfo> = self
            .done_order
            .iter()
            .filter_map(|id| self.done.get(id).cloned())
            .collect();
        let jobs = self.jobs.values().map(|j| self.image(j, now));
        journal.compact_from(self.next_id, jobs, &history, &drained)
    }

    /// Restored jobs that had started and whose record is in the record
    /// file: they ended while the controller was down (a job has a record
    /// only from an execution that ended; a lost one leaves none).
    pub fn settle(&mut self, last: &HashMap<u64, (formats::record::Status, i64)>, now: Now) {
        use formats::record::Status;
        let ended: Vec<(u64, JobState, i64)> = self
            .jobs
            .values()
            .filter(|j| j.lost_at.is_some())
            .filter_map(|j| {
                let (status, end) = last.get(&j.id)?;
                let state = match status {
                    Status::Completed => JobState::Completed,
                    Status::Cancelled => JobState::Cancelled,
                    Status::Failed => JobState::Failed,
                    Status::Timeout => JobState::Timeout,
                };
                Some((j.id, state, *end))
            })
            .collect();
        self.unqueue_batched(|c| {
            for (id, state, end) in ended {
                let at = Now { wall: end, ..now };
                c.finish(id, state, "ended while the controller was down".into(), at);
            }
        });
    }

    /// The cluster as the journal left it. Jobs that had started wait for
    /// their agents to report them (until the heartbeat timeout from now);
    /// a job whose partition or nodes are no longer in the configuration
    /// cannot be restored and is dropped, with a warning.
    pub fn restore(config: Arc<config::Cluster>, rec: Recovered, now: Now) -> Cluster {
        let mut c = Cluster::new(config);
        c.next_id = rec.next_id.max(1);
        let to_mono = |wall: i64| now.mono - (now.wall - wall);
        let lost_at = now.mono + c.config.heartbeat_timeout.as_nanos() as i64;
        for (nodes, why) in &rec.drained {
            let r = if why.is_empty() {
                c.undrain(nodes)
            } else {
                c.drain(nodes, why)
            };
            if let Err(e) = r {
                warn!(nodes, "drained nodes not restored: {e}");
            }
        }
        for info in rec.history {
            c.done_order.push_back(info.id);
            c.done.insert(info.id, info);
        }
        for (id, im) in rec.jobs {
            let Some(p) = c
                .config
                .partitions
                .iter()
                .position(|p| p.name == im.partition)
            else {
                warn!(job = id, partition = %im.partition, "job not restored: its partition is gone");
                continue;
            };
            let alloc: Option<Vec<(usize, u32)>> = im
                .alloc
                .iter()
                .map(|(name, cores)| c.node_index.get(name).map(|&n| (n, *cores)))
                .collect();
            let Some(alloc) = alloc else {
                warn!(job = id, "job not restored: one of its nodes is gone");
                continue;
            };
            let closed: i64 = im
                .suspensions
                .iter()
                .filter(|(_, r)| *r > 0)
                .map(|(s, r)| r - s)
                .sum();
            let open = im
                .suspensions
                .last()
                .filter(|(_, r)| *r == 0)
                .map(|(s, _)| to_mono(*s));
            let suspended_by = im.suspended_by_policy.map(|policy| {
                if policy {
                    SuspendedBy::Policy
                } else {
                    SuspendedBy::Admin
                }
            });
            let started = im.state != JobState::Pending;
            let job = Job {
                id,
                partition: p,
                state: im.state,
                submit_ns: im.submit_ns,
                start_ns: im.start_ns,
                end_ns: 0,
                alloc: alloc.clone(),
                nodes: im.nodes,
                agent: None,
                reason: im.reason,
                ending_as: im.ending_as,
                suspended_by,
                started_mono: started.then(|| to_mono(im.start_ns)),
                since_mono: to_mono(im.since_ns),
                suspended_since: open,
                suspended_total: closed,
                host: im.host,
                lost_at: started.then_some(lost_at),
                suspensions: im.suspensions,
                submit_mono: to_mono(im.submit_ns),
                spec: im.spec,
            };
            let q = Queued {
                job: id,
                partition: p,
                cores: job.spec.cores,
                mem_per_cpu_mb: job.spec.mem_per_cpu_mb,
                estimate_ns: job.estimate_ns(),
                submit_ns: job.submit_mono,
            };
            if started {
                let holds_cores = suspended_by != Some(SuspendedBy::Policy);
                for &(n, cores) in &alloc {
                    let node = &mut c.nodes[n];
                    if holds_cores {
                        node.alloc_cpus += cores;
                    }
                    node.slot_cpus += cores;
                    node.alloc_mem_mb += u64::from(cores) * job.spec.mem_per_cpu_mb;
                }
                if !holds_cores {
                    c.policy_suspended += 1;
                }
                let active = Active {
                    job: id,
                    partition: p,
                    cores: job.spec.cores,
                    mem_per_cpu_mb: job.spec.mem_per_cpu_mb,
                    alloc,
                    state: ActiveState::Unreachable,
                    since_ns: job.since_mono,
                    expected_end_ns: i64::MAX,
                    remaining_ns: 0,
                };
                let list = Arc::make_mut(&mut c.active);
                let at = list.partition_point(|a| a.job < id);
                list.insert(at, active);
            } else {
                c.enqueue(p, q);
            }
            c.jobs.insert(id, Box::new(job));
        }
        c.needs_schedule = true;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Base, Policy, Standard};

    #[derive(Default)]
    struct Recorder(Vec<(AgentId, ToAgent)>);

    impl Outbox for Recorder {
        fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
            self.0.push((agent, msg));
        }
    }

    const S: i64 = 1_000_000_000;

    fn at(secs: i64) -> Now {
        Now {
            mono: secs * S,
            wall: (1_000 + secs) * S,
        }
    }

    fn cluster_with(extra: &str) -> Cluster {
        let cfg = config::Cluster::from_str(
            &format!("[[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\n{extra}"),
            std::path::Path::new("/tmp/t.toml"),
        )
        .unwrap();
        let mut c = Cluster::new(Arc::new(cfg));
        up(&mut c, 7, "h", "vn[1-4]", &[]).unwrap();
        c
    }

    /// An agent on its own host registers, holding `held`.
    fn up(
        c: &mut Cluster,
        agent: AgentId,
        host: &str,
        nodes: &str,
        held: &[(u64, Held)],
    ) -> Result<Vec<(u64, Exit)>, String> {
        c.agent_up(
            agent,
            host,
            nodes,
            4,
            0,
            false,
            held,
            at(0),
            &mut Recorder::default(),
        )
    }

    fn cluster() -> Cluster {
        cluster_with("")
    }

    fn spec(cores: u32) -> JobSpec {
        JobSpec {
            cores,
            mem_per_cpu_mb: 1024,
            runtime_ns: 1_000_000_000,
            walltime_ns: 0,
            partition: None,
            submit_ns: Some(5),
            name: None,
        }
    }

    fn pass_at(c: &mut Cluster, out: &mut Recorder, now: Now, preemption: bool) {
        let d = Standard {
            base: Base::Easy,
            preemption,
        }
        .decide(&c.view(now));
        c.apply(d.list, now, out);
    }

    fn pass(c: &mut Cluster, out: &mut Recorder) {
        pass_at(c, out, at(1), false);
    }

    #[test]
    fn a_job_runs_and_ends() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(6)], at(0)).unwrap();
        pass(&mut c, &mut out);
        let j = &c.jobs[&ids[0]];
        assert_eq!(j.state, JobState::Running);
        assert_eq!(j.alloc, vec![(0, 4), (1, 2)]);
        assert_eq!(j.start_ns, at(1).wall);
        assert_eq!(c.nodes[0].state(), NodeState::Allocated);
        assert_eq!(c.nodes[1].state(), NodeState::Mixed);
        assert_eq!(c.nodes[1].alloc_mem_mb, 2048);
        assert!(
            matches!(&out.0[0], (7, ToAgent::Start(s)) if s.node == "vn1" && s.cores == 6 && s.submit_ns == 5)
        );
        c.job_ended(7, ids[0], Exit::Code(0), at(3));
        assert!(c.jobs.is_empty());
        assert_eq!(c.queue(true)[0].state, JobState::Completed);
        assert_eq!(c.queue(true)[0].nodes, "vn[1-2]");
        assert_eq!(c.nodes[0].alloc_cpus + c.nodes[1].alloc_cpus, 0);
        assert_eq!(c.nodes[1].alloc_mem_mb, 0);
    }

    #[test]
    fn each_time_slicing_partition_has_its_own_slice() {
        let c = cluster_with(
            "[controller]\ntime_slice_s = 20\n\
             [[partitions]]\nname = \"a\"\noversubscribe = 2\n\
             [[partitions]]\nname = \"b\"\noversubscribe = 3\ntime_slice_s = 2.5\n",
        );
        let v = c.view(at(0));
        let gang = |p: usize| v.partitions[p].gang.unwrap();
        assert_eq!((gang(0).oversubscribe, gang(0).slice_ns), (2, 20 * S));
        assert_eq!(
            (gang(1).oversubscribe, gang(1).slice_ns),
            (3, 2_500_000_000)
        );
    }

    #[test]
    fn cancelling_many_pending_jobs_at_once_leaves_the_queue_right() {
        let mut c = cluster();
        let mut out = Recorder::default();
        // One job holds every core; the rest wait.
        let ids = c.submit(vec![spec(16); 1_000], at(0)).unwrap();
        pass(&mut c, &mut out);
        let odd: Vec<u64> = ids[1..].iter().copied().filter(|i| i % 2 == 1).collect();
        let outcomes = c.cancel(&odd, at(1), &mut out);
        assert!(outcomes.iter().all(|o| o.error.is_none()));
        let queued: Vec<u64> = c.view(at(2)).queue.iter().map(|q| q.job).collect();
        let want: Vec<u64> = ids[1..].iter().copied().filter(|i| i % 2 == 0).collect();
        assert_eq!(queued, want);
        // They start in order once the first ends.
        c.job_ended(7, ids[0], Exit::Code(0), at(3));
        pass_at(&mut c, &mut out, at(4), false);
        assert_eq!(c.jobs[&want[0]].state, JobState::Running);
        assert_eq!(c.view(at(5)).queue.len(), want.len() - 1);
        c.shutdown(at(6), &mut out);
        assert!(c.view(at(7)).queue.is_empty());
    }

    #[test]
    fn drained_nodes_get_no_jobs() {
        let mut c = cluster();
        let mut out = Recorder::default();
        c.drain("vn[1-3]", "maintenance").unwrap();
        let ids = c.submit(vec![spec(4), spec(4)], at(0)).unwrap();
        pass(&mut c, &mut out);
        assert_eq!(c.jobs[&ids[0]].alloc, vec![(3, 4)]);
        assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
        assert_eq!(c.nodes[0].state(), NodeState::Drained);
        c.undrain("vn1").unwrap();
        pass(&mut c, &mut out);
        assert_eq!(c.jobs[&ids[1]].alloc, vec![(0, 4)]);
    }

    #[test]
    fn exit_codes_map_to_states() {
        for (exit, want) in [
            (Exit::Code(124), JobState::Timeout),
            (Exit::Code(143), JobState::Cancelled),
            (Exit::Code(1), JobState::Failed),
            (Exit::Signal(9), JobState::Failed),
            (Exit::SpawnFailed, JobState::Failed),
        ] {
            let mut c = cluster();
            let mut out = Recorder::default();
            let id = c.submit(vec![spec(1)], at(0)).unwrap()[0];
            pass(&mut c, &mut out);
            c.job_ended(7, id, exit, at(2));
            assert_eq!(c.queue(true)[0].state, want, "{exit:?}");
        }
    }

    #[test]
    fn cancel_suspend_resume() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(1), spec(16)], at(0)).unwrap();
        pass(&mut c, &mut out);
        // The second needs every core and waits; cancelling it is at once.
        assert_eq!(c.cancel(&[ids[1]], at(1), &mut out)[0].error, None);
        assert_eq!(
            c.queue(true).iter().find(|j| j.id == ids[1]).unwrap().state,
            JobState::Cancelled
        );
        assert_eq!(c.suspend(&[ids[0]], at(2), &mut out)[0].error, None);
        assert!(c.suspend(&[ids[0]], at(2), &mut out)[0].error.is_some());
        assert_eq!(c.jobs[&ids[0]].state, JobState::Suspended);
        // An administrator's suspension keeps the cores.
        assert_eq!(c.nodes[0].alloc_cpus, 1);
        assert_eq!(c.resume(&[ids[0]], at(4), &mut out)[0].error, None);
        assert_eq!(c.jobs[&ids[0]].suspended_total, 2 * S);
        assert_eq!(c.cancel(&[ids[0]], at(5), &mut out)[0].error, None);
        let sent: Vec<String> = out.0.iter().map(|(_, m)| format!("{m:?}")).collect();
        assert!(
            sent[1].starts_with("Suspend")
                && sent[2].starts_with("Resume")
                && sent[3].starts_with("Cancel"),
            "{sent:?}"
        );
        // It ends by SIGTERM: cancelled.
        c.job_ended(7, ids[0], Exit::Code(143), at(6));
        assert!(c.jobs.is_empty());
    }

    #[test]
    fn a_lost_agent_fails_its_jobs_and_downs_its_nodes() {
        let mut c = cluster_with(
            "[agents]\nheartbeat_timeout_ms = 10000\n\
             [[partitions]]\nname = \"p\"\non_node_fail = \"fail\"\n",
        );
        let mut out = Recorder::default();
        let id = c.submit(vec![spec(2)], at(0)).unwrap()[0];
        pass(&mut c, &mut out);
        c.agent_down(7, "heartbeat timeout", false, at(2), &mut out);
        // It may come back within the timeout (from when it was last
        // heard of, at 0): until then the job waits.
        assert_eq!(c.jobs[&id].state, JobState::Running);
        c.lose_overdue(at(9), &mut out);
        assert_eq!(c.jobs[&id].state, JobState::Running);
        c.lose_overdue(at(10), &mut out);
        assert_eq!(c.queue(true)[0].state, JobState::NodeFail);
        assert!(c.nodes.iter().all(|n| n.state() == NodeState::Down));
        let id2 = c.submit(vec![spec(1)], at(3)).unwrap()[0];
        pass_at(&mut c, &mut out, at(4), false);
        assert_eq!(
            c.jobs[&id2].state,
            JobState::Pending,
            "nothing runs on down nodes"
        );
        assert_ne!(id, id2);
    }

    #[test]
    fn impossible_jobs_are_refused_at_submit() {
        let mut c = cluster();
        assert!(c
            .submit(vec![spec(17)], at(0))
            .unwrap_err()
            .contains("memory for 16"));
        assert!(c.submit(vec![spec(0)], at(0)).is_err());
        let mut s = spec(1);
        s.partition = Some("nope".into());
        assert!(c
            .submit(vec![s], at(0))
            .unwrap_err()
            .contains("no partition"));
    }

    #[test]
    fn an_unknown_or_taken_node_is_refused_at_registration() {
        let mut c = cluster();
        assert!(up(&mut c, 8, "h2", "vn9", &[])
            .unwrap_err()
            .contains("no node vn9"));
        assert!(up(&mut c, 8, "h2", "vn1", &[])
            .unwrap_err()
            .contains("already served"));
    }

    #[test]
    fn a_lost_job_is_requeued_by_default_and_runs_again() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let id = c.submit(vec![spec(2)], at(0)).unwrap()[0];
        pass(&mut c, &mut out);
        c.agent_down(7, "disconnected", false, at(2), &mut out);
        c.lose_overdue(at(100), &mut out);
        assert_eq!(c.jobs[&id].state, JobState::Pending);
        assert_eq!(c.counters.requeued, 1);
        assert!(c
            .nodes
            .iter()
            .all(|n| n.alloc_cpus == 0 && n.slot_cpus == 0));
        up(&mut c, 9, "h", "vn[1-4]", &[]).unwrap();
        pass_at(&mut c, &mut out, at(101), false);
        assert_eq!(c.jobs[&id].state, JobState::Running);
        assert_eq!(c.jobs[&id].agent, Some(9));
    }

    #[test]
    fn an_agent_that_comes_back_reports_its_jobs() {
        // Four 1-core jobs run on host h; its agent is lost, then registers
        // again: job 1 still runs, job 2 is suspended there although the
        // controller wants it running, job 3 ended meanwhile, job 4 is not
        // reported (gone). It also runs job 99, unknown here.
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(1); 4], at(0)).unwrap();
        pass(&mut c, &mut out);
        c.agent_down(7, "disconnected", false, at(2), &mut out);
        assert!(c
            .jobs
            .values()
            .all(|j| j.agent.is_none() && j.lost_at.is_some()));
        let mut back = Recorder::default();
        let ends = c
            .agent_up(
                8,
                "h",
                "vn[1-4]",
                4,
                0,
                false,
                &[
                    (ids[0], Held::Running),
                    (ids[1], Held::Suspended),
                    (ids[2], Held::Ended(Exit::Code(0))),
                    (99, Held::Running),
                ],
                at(3),
                &mut back,
            )
            .unwrap();
        assert_eq!(ends, [(ids[2], Exit::Code(0))]);
        assert_eq!(c.jobs[&ids[0]].agent, Some(8));
        assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
        assert_eq!(c.jobs[&ids[1]].agent, Some(8));
        assert_eq!(c.jobs[&ids[3]].state, JobState::Pending, "gone: requeued");
        let sent: Vec<String> = back.0.iter().map(|(a, m)| format!("{a} {m:?}")).collect();
        assert!(sent.contains(&format!("8 Resume({})", ids[1])), "{sent:?}");
        assert!(sent.contains(&"8 Kill(99)".to_string()), "{sent:?}");
        c.job_ended(8, ids[2], Exit::Code(0), at(3));
        assert_eq!(
            c.queue(true).iter().find(|j| j.id == ids[2]).unwrap().state,
            JobState::Completed
        );
    }

    #[test]
    fn bad_decisions_are_refused() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(4), spec(4)], at(0)).unwrap();
        c.apply(
            vec![
                Decision::Start {
                    job: ids[0],
                    alloc: vec![(0, 4)],
                },
                // Same cores again: refused.
                Decision::Start {
                    job: ids[1],
                    alloc: vec![(0, 4)],
                },
                // Wrong size: refused.
                Decision::Start {
                    job: ids[1],
                    alloc: vec![(1, 3)],
                },
                Decision::Resume(ids[0]),
                Decision::Suspend(999),
            ],
            at(1),
            &mut out,
        );
        assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
        assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
        assert_eq!(out.0.len(), 1);
        assert_eq!(c.nodes[0].alloc_cpus, 4);
    }

    #[test]
    fn preemption_suspends_low_priority_jobs_and_resumes_them_after() {
        let mut c = cluster_with(
            "[controller]\npreemption = \"suspend\"\n\
             [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
             [[partitions]]\nname = \"high\"\npriority = 10\n",
        );
        let mut out = Recorder::default();
        let low = c.submit(vec![spec(16)], at(0)).unwrap()[0];
        pass_at(&mut c, &mut out, at(1), true);
        let mut hi = spec(4);
        hi.partition = Some("high".into());
        let high = c.submit(vec![hi], at(2)).unwrap()[0];
        pass_at(&mut c, &mut out, at(3), true);
        assert_eq!(c.jobs[&low].state, JobState::Suspended);
        assert_eq!(c.jobs[&high].state, JobState::Running);
        // The victim keeps its memory, gives its cores.
        assert_eq!(c.nodes[0].alloc_mem_mb, 8192);
        assert_eq!(c.nodes.iter().map(|n| n.alloc_cpus).sum::<u32>(), 4);
        c.job_ended(7, high, Exit::Code(0), at(5));
        pass_at(&mut c, &mut out, at(6), true);
        assert_eq!(c.jobs[&low].state, JobState::Running);
        assert_eq!(c.jobs[&low].suspended_total, 3 * S);
        let sent: Vec<String> = out.0.iter().map(|(_, m)| format!("{m:?}")).collect();
        assert_eq!(sent.len(), 4, "{sent:?}");
        assert!(
            sent[1].starts_with("Suspend")
                && sent[2].starts_with("Start")
                && sent[3].starts_with("Resume")
        );
        // An administrator cannot resume what the scheduler suspended.
        let id = c.submit(vec![hi_spec()], at(7)).unwrap()[0];
        pass_at(&mut c, &mut out, at(8), true);
        assert_eq!(c.jobs[&low].state, JobState::Suspended);
        assert!(c.resume(&[low], at(9), &mut out)[0]
            .error
            .as_deref()
            .unwrap()
            .contains("scheduler"));
        let _ = id;
    }

    fn hi_spec() -> JobSpec {
        let mut s = spec(4);
        s.partition = Some("high".into());
        s
    }
}
