//! The cluster's truth: nodes, jobs, the queue, agents and counters, and
//! the plain functions that change them. One owner (the server task) calls
//! them; what must reach an agent goes out through an [`Outbox`], so tests
//! drive the state synchronously with a recording outbox.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formats::wire::{
    ClusterStats, Exit, JobInfo, JobOutcome, JobSpec, JobState, NodeInfo, NodeState, StartJob,
    ToAgent,
};
use tracing::{info, warn};

use crate::config;
use crate::policy::{FreeNode, Queued, Running, Snapshot, Start};

pub type AgentId = u64;

/// Where messages for agents go.
pub trait Outbox {
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent);
}

/// Finished jobs kept for `queue --all`; older ones are forgotten.
const HISTORY: usize = 100_000;

#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub cpus: u32,
    pub memory_mb: u64,
    pub alloc_cpus: u32,
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
    pub started_at: Option<Instant>,
    pub suspended_since: Option<Instant>,
    pub suspended_total: Duration,
}

impl Job {
    fn estimate_ns(&self) -> u64 {
        if self.spec.walltime_ns > 0 {
            self.spec.walltime_ns
        } else {
            self.spec.runtime_ns
        }
    }

    /// Time run, not counting suspensions.
    fn run_time(&self, now: Instant) -> Duration {
        let Some(start) = self.started_at else {
            return Duration::ZERO;
        };
        let suspended =
            self.suspended_total + self.suspended_since.map_or(Duration::ZERO, |s| now - s);
        now.saturating_duration_since(start)
            .saturating_sub(suspended)
    }
}

#[derive(Debug)]
pub struct Agent {
    pub host: String,
    pub nodes: Vec<usize>,
    pub last_seen: Instant,
    pub running: u32,
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub submitted: u64,
    pub started: u64,
    pub ended: u64,
    pub suspensions: u64,
    pub passes: u64,
    pub last_pass: Duration,
}

pub struct Cluster {
    pub config: Arc<config::Cluster>,
    pub nodes: Vec<Node>,
    node_index: HashMap<String, usize>,
    /// Jobs not yet over.
    pub jobs: HashMap<u64, Job>,
    /// Pending jobs in queue order: partition priority, then id.
    pending: BTreeSet<(Reverse<u32>, u64)>,
    /// Finished jobs, oldest first.
    done: VecDeque<JobInfo>,
    next_id: u64,
    pub agents: HashMap<AgentId, Agent>,
    pub counters: Counters,
    /// Origin of the monotonic nanoseconds policies see.
    epoch: Instant,
    /// Set when something happened that may let a job start.
    pub needs_schedule: bool,
}

/// CLOCK_REALTIME nanoseconds now.
pub fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Cluster {
    pub fn new(config: Arc<config::Cluster>) -> Cluster {
        let nodes: Vec<Node> = config
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                cpus: n.cpus,
                memory_mb: n.memory_mb,
                alloc_cpus: 0,
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
        Cluster {
            config,
            nodes,
            node_index,
            jobs: HashMap::new(),
            pending: BTreeSet::new(),
            done: VecDeque::new(),
            next_id: 1,
            agents: HashMap::new(),
            counters: Counters::default(),
            epoch: Instant::now(),
            needs_schedule: false,
        }
    }

    fn mono_ns(&self, t: Instant) -> i64 {
        t.saturating_duration_since(self.epoch).as_nanos() as i64
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

    /// Accepts jobs; all or none: a job that can never run is refused with
    /// the reason, and so are the others of the same request.
    pub fn submit(&mut self, specs: Vec<JobSpec>) -> Result<Vec<u64>, String> {
        let mut checked = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let p = self.partition_of(spec.partition.as_deref())?;
            let part = &self.config.partitions[p];
            let capacity: u64 = part
                .nodes
                .iter()
                .map(|&n| u64::from(self.nodes[n].cpus))
                .sum();
            if spec.cores == 0 {
                return Err(format!("job {i}: cores must be at least 1"));
            }
            if u64::from(spec.cores) > capacity {
                return Err(format!(
                    "job {i}: {} cores, but partition {} has {capacity}",
                    spec.cores, part.name
                ));
            }
            if part.max_time_ns > 0 && spec.walltime_ns > part.max_time_ns {
                return Err(format!(
                    "job {i}: wall time over partition {}'s limit",
                    part.name
                ));
            }
            checked.push((p, spec));
        }
        let now = wall_ns();
        let mut ids = Vec::with_capacity(checked.len());
        for (p, spec) in checked {
            let id = self.next_id;
            self.next_id += 1;
            let priority = self.config.partitions[p].priority;
            self.jobs.insert(
                id,
                Job {
                    id,
                    submit_ns: spec.submit_ns.unwrap_or(now),
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
                    started_at: None,
                    suspended_since: None,
                    suspended_total: Duration::ZERO,
                },
            );
            self.pending.insert((Reverse(priority), id));
            ids.push(id);
        }
        self.counters.submitted += ids.len() as u64;
        self.needs_schedule = true;
        Ok(ids)
    }

    /// What the policy sees.
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        let nodes = self
            .nodes
            .iter()
            .map(|n| FreeNode {
                cpus: n.cpus - n.alloc_cpus,
                mem_mb: n.memory_mb.saturating_sub(n.alloc_mem_mb),
                usable: n.agent.is_some() && n.drained.is_none(),
            })
            .collect();
        let queue = self
            .pending
            .iter()
            .filter_map(|(_, id)| self.jobs.get(id))
            .map(|j| Queued {
                job: j.id,
                partition: j.partition,
                cores: j.spec.cores,
                mem_per_cpu_mb: j.spec.mem_per_cpu_mb,
                estimate_ns: j.estimate_ns(),
            })
            .collect();
        let running = self
            .jobs
            .values()
            .filter(|j| !j.alloc.is_empty())
            .map(|j| {
                // Expected end: start + estimate + time suspended so far; a
                // suspended job is taken to resume now.
                let remaining =
                    Duration::from_nanos(j.estimate_ns()).saturating_sub(j.run_time(now));
                Running {
                    job: j.id,
                    expected_end_ns: self.mono_ns(now + remaining),
                    alloc: j.alloc.clone(),
                }
            })
            .collect();
        Snapshot {
            now_ns: self.mono_ns(now),
            nodes,
            partitions: self
                .config
                .partitions
                .iter()
                .map(|p| p.nodes.clone())
                .collect(),
            queue,
            running,
        }
    }

    /// Carries out a policy's decisions.
    pub fn start(&mut self, starts: Vec<Start>, now: Instant, out: &mut impl Outbox) {
        for st in starts {
            let Some(job) = self.jobs.get_mut(&st.job) else {
                continue;
            };
            let Some(&(first, _)) = st.alloc.first() else {
                continue;
            };
            let Some(agent) = self.nodes[first].agent else {
                continue;
            };
            self.pending.remove(&(
                Reverse(self.config.partitions[job.partition].priority),
                job.id,
            ));
            for &(n, c) in &st.alloc {
                let node = &mut self.nodes[n];
                node.alloc_cpus += c;
                node.alloc_mem_mb += u64::from(c) * job.spec.mem_per_cpu_mb;
            }
            job.state = JobState::Running;
            job.start_ns = wall_ns();
            job.started_at = Some(now);
            job.agent = Some(agent);
            job.nodes = self
                .config
                .fold(&st.alloc.iter().map(|(n, _)| *n).collect::<Vec<_>>());
            job.alloc = st.alloc;
            out.to_agent(
                agent,
                ToAgent::Start(StartJob {
                    job: job.id,
                    node: self.nodes[first].name.clone(),
                    cores: job.spec.cores,
                    runtime_ns: job.spec.runtime_ns,
                    walltime_ns: job.spec.walltime_ns,
                    submit_ns: job.submit_ns,
                }),
            );
            self.counters.started += 1;
        }
    }

    fn release(&mut self, id: u64) {
        if let Some(job) = self.jobs.get_mut(&id) {
            for (n, c) in std::mem::take(&mut job.alloc) {
                let node = &mut self.nodes[n];
                node.alloc_cpus -= c;
                node.alloc_mem_mb -= u64::from(c) * job.spec.mem_per_cpu_mb;
            }
        }
        self.needs_schedule = true;
    }

    /// Moves a job to a final state and into the history.
    fn finish(&mut self, id: u64, state: JobState, reason: String) {
        self.release(id);
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        self.pending
            .remove(&(Reverse(self.config.partitions[job.partition].priority), id));
        job.state = state;
        job.end_ns = wall_ns();
        job.reason = reason;
        if job.started_at.is_some() {
            self.counters.ended += 1;
        }
        if self.done.len() == HISTORY {
            self.done.pop_front();
        }
        let info = self.info(&job);
        self.done.push_back(info);
    }

    /// An agent reported that a job's process ended.
    pub fn job_ended(&mut self, agent: AgentId, id: u64, exit: Exit) {
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
        };
        self.finish(id, state, reason);
    }

    pub fn cancel(&mut self, ids: &[u64], out: &mut impl Outbox) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| JobOutcome {
                id,
                error: self.cancel_one(id, JobState::Cancelled, out).err(),
            })
            .collect()
    }

    fn cancel_one(
        &mut self,
        id: u64,
        as_state: JobState,
        out: &mut impl Outbox,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        match job.state {
            JobState::Pending => {
                self.finish(id, JobState::Cancelled, "cancelled while pending".into());
            }
            JobState::Running | JobState::Suspended => {
                if job.ending_as.is_none() {
                    job.ending_as = Some(as_state);
                    if let Some(a) = job.agent {
                        out.to_agent(a, ToAgent::Cancel(id));
                    }
                }
            }
            _ => return Err(format!("job {id} is already over")),
        }
        Ok(())
    }

    pub fn suspend(&mut self, ids: &[u64], now: Instant, out: &mut impl Outbox) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| {
                let error = match self.jobs.get_mut(&id) {
                    None => Some(format!("no active job {id}")),
                    Some(j) if j.state != JobState::Running => {
                        Some(format!("job {id} is {}, not running", j.state.as_str()))
                    }
                    Some(j) => {
                        j.state = JobState::Suspended;
                        j.suspended_since = Some(now);
                        if let Some(a) = j.agent {
                            out.to_agent(a, ToAgent::Suspend(id));
                        }
                        self.counters.suspensions += 1;
                        None
                    }
                };
                JobOutcome { id, error }
            })
            .collect()
    }

    pub fn resume(&mut self, ids: &[u64], now: Instant, out: &mut impl Outbox) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| {
                let error = match self.jobs.get_mut(&id) {
                    None => Some(format!("no active job {id}")),
                    Some(j) if j.state != JobState::Suspended => {
                        Some(format!("job {id} is {}, not suspended", j.state.as_str()))
                    }
                    Some(j) => {
                        j.state = JobState::Running;
                        if let Some(s) = j.suspended_since.take() {
                            j.suspended_total += now - s;
                        }
                        if let Some(a) = j.agent {
                            out.to_agent(a, ToAgent::Resume(id));
                        }
                        None
                    }
                };
                JobOutcome { id, error }
            })
            .collect()
    }

    /// Node indices of a nodeset expression (groups resolved).
    pub fn resolve(&self, expr: &str) -> Result<Vec<usize>, String> {
        let set = self.config.groups.parse(expr).map_err(|e| e.to_string())?;
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
        Ok(self.config.fold(&idx))
    }

    pub fn undrain(&mut self, expr: &str) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        for &n in &idx {
            self.nodes[n].drained = None;
        }
        self.needs_schedule = true;
        Ok(self.config.fold(&idx))
    }

    /// An agent registered: it serves these nodes from now on.
    pub fn agent_up(
        &mut self,
        agent: AgentId,
        host: &str,
        expr: &str,
        cpus: u32,
        memory_mb: u64,
        now: Instant,
    ) -> Result<(), String> {
        let idx = self.resolve(expr)?;
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
                last_seen: now,
                running: 0,
            },
        );
        self.needs_schedule = true;
        Ok(())
    }

    /// An agent is gone: its nodes are down and the jobs it ran, or that
    /// held any of its nodes, end as `node_fail`. `expected`: the cluster
    /// is shutting down, which is no cause for a warning.
    pub fn agent_down(&mut self, agent: AgentId, why: &str, expected: bool, out: &mut impl Outbox) {
        let Some(a) = self.agents.remove(&agent) else {
            return;
        };
        if expected {
            info!(agent, host = %a.host, why, "agent left");
        } else {
            warn!(agent, host = %a.host, why, "agent down");
        }
        let lost: std::collections::HashSet<usize> = a.nodes.iter().copied().collect();
        for &n in &a.nodes {
            self.nodes[n].agent = None;
        }
        let hit: Vec<(u64, Option<AgentId>)> = self
            .jobs
            .values()
            .filter(|j| j.agent == Some(agent) || j.alloc.iter().any(|(n, _)| lost.contains(n)))
            .map(|j| (j.id, j.agent))
            .collect();
        for (id, runner) in hit {
            if let Some(r) = runner.filter(|&r| r != agent) {
                // Its process runs elsewhere: stop it there.
                out.to_agent(r, ToAgent::Cancel(id));
            }
            self.finish(
                id,
                JobState::NodeFail,
                format!("agent on {} lost: {why}", a.host),
            );
        }
    }

    pub fn heartbeat(&mut self, agent: AgentId, running: u32, now: Instant) {
        if let Some(a) = self.agents.get_mut(&agent) {
            a.last_seen = now;
            a.running = running;
        }
    }

    /// Agents not heard from within the timeout.
    pub fn silent_agents(&self, now: Instant) -> Vec<AgentId> {
        self.agents
            .iter()
            .filter(|(_, a)| {
                now.saturating_duration_since(a.last_seen) > self.config.heartbeat_timeout
            })
            .map(|(&id, _)| id)
            .collect()
    }

    /// Cancels running jobs past their wall-time limit by more than the
    /// grace (sigsleep stops itself at the limit; this is the safety net).
    pub fn enforce_walltime(&mut self, now: Instant, out: &mut impl Outbox) {
        let grace = self.config.timeout_grace;
        let over: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running
                    && j.ending_as.is_none()
                    && j.spec.walltime_ns > 0
                    && j.run_time(now) > Duration::from_nanos(j.spec.walltime_ns) + grace
            })
            .map(|j| j.id)
            .collect();
        for id in over {
            let _ = self.cancel_one(id, JobState::Timeout, out);
        }
    }

    /// Cancels every job and tells every agent to stop.
    pub fn shutdown(&mut self, out: &mut impl Outbox) {
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        for id in ids {
            let _ = self.cancel_one(id, JobState::Cancelled, out);
        }
        for &a in self.agents.keys() {
            out.to_agent(a, ToAgent::Shutdown);
        }
    }

    pub fn info(&self, j: &Job) -> JobInfo {
        JobInfo {
            id: j.id,
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
        }
    }

    /// Active jobs in id order, and with `all` the finished ones kept.
    pub fn queue(&self, all: bool) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self.jobs.values().map(|j| self.info(j)).collect();
        if all {
            v.extend(self.done.iter().cloned());
        }
        v.sort_by_key(|j| j.id);
        v
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
        for j in &self.done {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Easy, Policy};

    #[derive(Default)]
    struct Recorder(Vec<(AgentId, ToAgent)>);

    impl Outbox for Recorder {
        fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
            self.0.push((agent, msg));
        }
    }

    fn cluster() -> Cluster {
        let cfg = config::Cluster::from_str(
            "[[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\n",
            std::path::Path::new("/tmp/t.toml"),
        )
        .unwrap();
        let mut c = Cluster::new(Arc::new(cfg));
        c.agent_up(7, "h", "vn[1-4]", 4, 8192, Instant::now())
            .unwrap();
        c
    }

    fn spec(cores: u32) -> JobSpec {
        JobSpec {
            cores,
            mem_per_cpu_mb: 1024,
            runtime_ns: 1_000_000_000,
            walltime_ns: 0,
            partition: None,
            submit_ns: Some(5),
        }
    }

    fn pass(c: &mut Cluster, out: &mut Recorder) {
        let now = Instant::now();
        let starts = Easy.schedule(&c.snapshot(now));
        c.start(starts, now, out);
    }

    #[test]
    fn a_job_runs_and_ends() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(6)]).unwrap();
        pass(&mut c, &mut out);
        let j = &c.jobs[&ids[0]];
        assert_eq!(j.state, JobState::Running);
        assert_eq!(j.alloc, vec![(0, 4), (1, 2)]);
        assert_eq!(c.nodes[0].state(), NodeState::Allocated);
        assert_eq!(c.nodes[1].state(), NodeState::Mixed);
        assert_eq!(c.nodes[1].alloc_mem_mb, 2048);
        assert!(
            matches!(&out.0[0], (7, ToAgent::Start(s)) if s.node == "vn1" && s.cores == 6 && s.submit_ns == 5)
        );
        c.job_ended(7, ids[0], Exit::Code(0));
        assert!(c.jobs.is_empty());
        assert_eq!(c.queue(true)[0].state, JobState::Completed);
        assert_eq!(c.nodes[0].alloc_cpus + c.nodes[1].alloc_cpus, 0);
        assert_eq!(c.nodes[1].alloc_mem_mb, 0);
    }

    #[test]
    fn drained_nodes_get_no_jobs() {
        let mut c = cluster();
        let mut out = Recorder::default();
        c.drain("vn[1-3]", "maintenance").unwrap();
        let ids = c.submit(vec![spec(4), spec(4)]).unwrap();
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
            let id = c.submit(vec![spec(1)]).unwrap()[0];
            pass(&mut c, &mut out);
            c.job_ended(7, id, exit);
            assert_eq!(c.queue(true)[0].state, want, "{exit:?}");
        }
    }

    #[test]
    fn cancel_suspend_resume() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let ids = c.submit(vec![spec(1), spec(16)]).unwrap();
        pass(&mut c, &mut out);
        // The second needs every core and waits; cancelling it is at once.
        assert_eq!(c.cancel(&[ids[1]], &mut out)[0].error, None);
        assert_eq!(
            c.queue(true).iter().find(|j| j.id == ids[1]).unwrap().state,
            JobState::Cancelled
        );
        let now = Instant::now();
        assert_eq!(c.suspend(&[ids[0]], now, &mut out)[0].error, None);
        assert!(c.suspend(&[ids[0]], now, &mut out)[0].error.is_some());
        assert_eq!(c.jobs[&ids[0]].state, JobState::Suspended);
        assert_eq!(c.resume(&[ids[0]], now, &mut out)[0].error, None);
        assert_eq!(c.cancel(&[ids[0]], &mut out)[0].error, None);
        let sent: Vec<String> = out.0.iter().map(|(_, m)| format!("{m:?}")).collect();
        assert!(
            sent[1].starts_with("Suspend")
                && sent[2].starts_with("Resume")
                && sent[3].starts_with("Cancel"),
            "{sent:?}"
        );
        // It ends by SIGTERM: cancelled.
        c.job_ended(7, ids[0], Exit::Code(143));
        assert!(c.jobs.is_empty());
    }

    #[test]
    fn a_lost_agent_fails_its_jobs_and_downs_its_nodes() {
        let mut c = cluster();
        let mut out = Recorder::default();
        let id = c.submit(vec![spec(2)]).unwrap()[0];
        pass(&mut c, &mut out);
        c.agent_down(7, "heartbeat timeout", false, &mut out);
        assert_eq!(c.queue(true)[0].state, JobState::NodeFail);
        assert!(c.nodes.iter().all(|n| n.state() == NodeState::Down));
        let id2 = c.submit(vec![spec(1)]).unwrap()[0];
        pass(&mut c, &mut out);
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
        assert!(c.submit(vec![spec(17)]).unwrap_err().contains("has 16"));
        assert!(c.submit(vec![spec(0)]).is_err());
        let mut s = spec(1);
        s.partition = Some("nope".into());
        assert!(c.submit(vec![s]).unwrap_err().contains("no partition"));
    }

    #[test]
    fn an_unknown_or_taken_node_is_refused_at_registration() {
        let mut c = cluster();
        assert!(c
            .agent_up(8, "h2", "vn9", 4, 0, Instant::now())
            .unwrap_err()
            .contains("no node vn9"));
        assert!(c
            .agent_up(8, "h2", "vn1", 4, 0, Instant::now())
            .unwrap_err()
            .contains("already served"));
    }
}
