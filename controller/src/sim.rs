//! The virtual-time twin: the controller's own state machine and policy,
//! driven by a discrete-event loop instead of a clock, agents and
//! processes. What a job's sigsleep would do (sleep its run time, stop
//! while suspended, end at its wall-time limit or when cancelled) is
//! computed exactly, and every job leaves a record in the same format as
//! an emulated run, so calcmets reads both and they can be compared.
//!
//! Scheduling passes follow the server's rules: a pass runs when
//! something happened, at most once per `schedule_interval`, and when the
//! policy asked to be woken (gang time slices). Same input, same records:
//! there is no clock, no thread and no randomness.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use formats::record::{Flags, JobRecord, Status, Suspension};
use formats::wire::{Exit, JobSpec, ToAgent};

use crate::config;
use crate::state::{AgentId, Cluster, Now, Outbox};

/// A job to simulate: what would be submitted, and when (nanoseconds after
/// the start). Jobs are submitted in the order given.
#[derive(Debug, Clone)]
pub struct SimJob {
    pub spec: JobSpec,
    pub submit_ns: i64,
}

/// What a simulation leaves.
#[derive(Debug, Clone)]
pub struct SimRun {
    /// One per job that ran, in the order they ended.
    pub records: Vec<JobRecord<'static>>,
    /// The cluster's job id of each input job, in input order.
    pub ids: Vec<u64>,
    /// Virtual nanoseconds from the start to the last event.
    pub end_ns: i64,
    pub passes: u64,
    /// Policy decisions the cluster refused as illegal: 0 unless the policy
    /// has a bug.
    pub refused: u64,
    /// The nodes each job ran on, folded, by job id.
    pub nodes: HashMap<u64, String>,
}

/// Events, in the order they are handled at one instant: processes end,
/// jobs arrive, then the scheduler looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A job's process ends, if its generation is still current (a
    /// suspension or resume makes a new one).
    End { job: u64, generation: u64 },
    /// Submit input jobs from this index on that share its submit time.
    Submit(usize),
    /// Run a scheduling pass, if it is still the one wanted (its sequence
    /// number).
    Pass(u64),
}

impl Ev {
    fn rank(&self) -> u8 {
        match self {
            Ev::End { .. } => 0,
            Ev::Submit(_) => 1,
            Ev::Pass(_) => 2,
        }
    }
}

/// A job's simulated process.
struct Proc {
    agent: AgentId,
    node: String,
    cores: u32,
    submit: i64,
    runtime: u64,
    walltime: u64,
    /// Unsuspended nanoseconds still to run before it ends by itself.
    remaining: i64,
    /// Whether it ends by its wall-time limit rather than its run time.
    limited: bool,
    start: i64,
    /// When it last resumed (or started), while running.
    running_since: Option<i64>,
    suspensions: Vec<Suspension>,
    generation: u64,
}

/// Collects what the controller tells agents, to play it out.
#[derive(Default)]
struct Mailbox(Vec<(AgentId, ToAgent)>);

impl Outbox for Mailbox {
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
        self.0.push((agent, msg));
    }
}

struct Sim {
    cluster: Cluster,
    policy: Box<dyn crate::policy::Policy>,
    /// Wall-clock nanoseconds of virtual time 0.
    epoch: i64,
    /// (time, rank, sequence, event), smallest first.
    events: BinaryHeap<Reverse<(i64, u8, u64, Ev)>>,
    seq: u64,
    procs: HashMap<u64, Proc>,
    records: Vec<JobRecord<'static>>,
    interval: i64,
    last_pass: i64,
    /// The pass wanted next: (time, sequence number of its event).
    pass_queued: Option<(i64, u64)>,
    wake_at: Option<i64>,
    passes: u64,
}

impl Sim {
    fn now(&self, t: i64) -> Now {
        Now {
            mono: t,
            wall: self.epoch + t,
        }
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, ev.rank(), self.seq, ev)));
    }

    /// Makes sure a pass runs at or after `t`, honouring the interval.
    fn want_pass(&mut self, t: i64) {
        let at = t.max(self.last_pass + self.interval);
        if self.pass_queued.is_none_or(|(q, _)| q > at) {
            let seq = self.seq + 1;
            self.pass_queued = Some((at, seq));
            self.push(at, Ev::Pass(seq));
        }
    }

    fn pass(&mut self, t: i64) {
        self.pass_queued = None;
        self.cluster.needs_schedule = false;
        let woken = self.wake_at.is_some_and(|w| w <= t);
        if !self.cluster.anything_waits() && !woken {
            // Nothing to decide: the server skips such passes too.
            self.wake_at = None;
            return;
        }
        self.last_pass = t;
        self.passes += 1;
        let now = self.now(t);
        let decisions = self.policy.decide(&self.cluster.view(now));
        self.wake_at = decisions.wake_at_ns;
        let mut mail = Mailbox::default();
        self.cluster.apply(decisions.list, now, &mut mail);
        self.deliver(mail, t);
        if let Some(w) = self.wake_at {
            self.want_pass(w.max(t + 1));
        }
    }

    /// Plays out what the controller told its agents, as sigsleep would.
    fn deliver(&mut self, mail: Mailbox, t: i64) {
        for (agent, msg) in mail.0 {
            match msg {
                ToAgent::Start(s) => {
                    let limited = s.walltime_ns > 0 && s.walltime_ns < s.runtime_ns;
                    let target = if limited { s.walltime_ns } else { s.runtime_ns };
                    let p = Proc {
                        agent,
                        node: s.node,
                        cores: s.cores,
                        submit: s.submit_ns,
                        runtime: s.runtime_ns,
                        walltime: s.walltime_ns,
                        remaining: target.min(i64::MAX as u64) as i64,
                        limited,
                        start: t,
                        running_since: Some(t),
                        suspensions: Vec::new(),
                        generation: 0,
                    };
                    let end = t.saturating_add(p.remaining);
                    self.procs.insert(s.job, p);
                    self.push(
                        end,
                        Ev::End {
                            job: s.job,
                            generation: 0,
                        },
                    );
                }
                ToAgent::Suspend(job) => {
                    if let Some(p) = self.procs.get_mut(&job) {
                        if let Some(since) = p.running_since.take() {
                            p.remaining -= t - since;
                            p.generation += 1;
                            p.suspensions.push(Suspension {
                                suspend: t,
                                resume: t,
                            });
                        }
                    }
                }
                ToAgent::Resume(job) => {
                    if let Some(p) = self.procs.get_mut(&job) {
                        if p.running_since.is_none() {
                            p.running_since = Some(t);
                            if let Some(s) = p.suspensions.last_mut() {
                                s.resume = t;
                            }
                            p.generation += 1;
                            let (end, generation) = (t + p.remaining.max(0), p.generation);
                            self.push(end, Ev::End { job, generation });
                        }
                    }
                }
                // sigsleep ends at once on SIGTERM, with a record.
                ToAgent::Cancel(job) | ToAgent::Kill(job) => self.end(job, t, true),
                ToAgent::Registered(_)
                | ToAgent::Rejected(_)
                | ToAgent::Shutdown
                | ToAgent::Forget(_)
                | ToAgent::Ping => {}
            }
        }
    }

    fn end(&mut self, job: u64, t: i64, cancelled: bool) {
        let Some(mut p) = self.procs.remove(&job) else {
            return;
        };
        if p.running_since.is_none() {
            // Cancelled while suspended: the suspension ends with the job.
            if let Some(s) = p.suspensions.last_mut() {
                s.resume = t;
            }
        }
        let (status, exit) = if cancelled {
            (Status::Cancelled, Exit::Code(143))
        } else if p.limited {
            (Status::Timeout, Exit::Code(124))
        } else {
            (Status::Completed, Exit::Code(0))
        };
        let epoch = self.epoch;
        self.records.push(JobRecord {
            id: job,
            cores: p.cores,
            node: Cow::Owned(std::mem::take(&mut p.node)),
            submit: p.submit,
            start: epoch + p.start,
            end: epoch + t,
            runtime: p.runtime,
            walltime: p.walltime,
            status,
            flags: Flags::default(),
            suspensions: p
                .suspensions
                .iter()
                .map(|s| Suspension {
                    suspend: epoch + s.suspend,
                    resume: epoch + s.resume,
                })
                .collect(),
        });
        let now = self.now(t);
        self.cluster.job_ended(p.agent, job, exit, now);
        // No agent to acknowledge to.
        self.cluster.forget.clear();
    }
}

/// Simulates `jobs` on the cluster of `config` with its policy. Instants
/// in the records are `epoch_wall_ns` plus virtual time.
pub fn simulate(config: Arc<config::Cluster>, jobs: &[SimJob], epoch_wall_ns: i64) -> SimRun {
    let mut cluster = Cluster::new(Arc::clone(&config));
    // One virtual agent per host of the layout: every node is up.
    for (i, host) in config.hosts.iter().enumerate() {
        let nodes = config.fold(&host.nodes);
        let first = host.nodes.first().map(|&n| &config.nodes[n]);
        let _ = cluster.agent_up(
            i as AgentId + 1,
            &host.name,
            &nodes,
            first.map_or(0, |n| n.cpus),
            first.map_or(0, |n| n.memory_mb),
            true,
            &[],
            Now {
                mono: 0,
                wall: epoch_wall_ns,
            },
            &mut Mailbox::default(),
        );
    }
    let mut sim = Sim {
        cluster,
        policy: crate::policy(&config),
        epoch: epoch_wall_ns,
        events: BinaryHeap::new(),
        seq: 0,
        procs: HashMap::new(),
        records: Vec::with_capacity(jobs.len()),
        interval: config.schedule_interval.as_nanos() as i64,
        last_pass: i64::MIN / 2,
        pass_queued: None,
        wake_at: None,
        passes: 0,
    };
    // Consecutive jobs with one submit time go in one request, as the
    // replay does.
    let mut i = 0;
    while i < jobs.len() {
        sim.push(jobs[i].submit_ns, Ev::Submit(i));
        let t = jobs[i].submit_ns;
        while i < jobs.len() && jobs[i].submit_ns == t {
            i += 1;
        }
    }
    let mut ids = vec![0; jobs.len()];
    let mut end_ns = 0;
    while let Some(Reverse((t, _, _, ev))) = sim.events.pop() {
        end_ns = end_ns.max(t);
        match ev {
            Ev::Submit(from) => {
                let mut to = from;
                while to < jobs.len() && jobs[to].submit_ns == t {
                    to += 1;
                }
                let now = sim.now(t);
                let specs = jobs[from..to]
                    .iter()
                    .map(|j| JobSpec {
                        submit_ns: j.spec.submit_ns.or(Some(now.wall)),
                        ..j.spec.clone()
                    })
                    .collect();
                // The caller has dropped jobs the cluster cannot run.
                if let Ok(got) = sim.cluster.submit(specs, now) {
                    ids[from..to].copy_from_slice(&got);
                }
                sim.want_pass(t);
            }
            Ev::End { job, generation } => {
                if sim
                    .procs
                    .get(&job)
                    .is_some_and(|p| p.generation == generation)
                {
                    sim.end(job, t, false);
                    sim.want_pass(t);
                }
            }
            Ev::Pass(seq) => {
                if sim.pass_queued == Some((t, seq)) {
                    sim.pass(t);
                }
            }
        }
        if sim.cluster.needs_schedule {
            sim.want_pass(t);
        }
    }
    let nodes = sim
        .cluster
        .jobs_info(&ids)
        .into_iter()
        .map(|j| (j.id, j.nodes))
        .collect();
    SimRun {
        records: sim.records,
        ids,
        end_ns,
        passes: sim.passes,
        refused: sim.cluster.counters.refused,
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn config(extra: &str) -> Arc<config::Cluster> {
        Arc::new(
            config::Cluster::from_str(
                &format!("[[nodes]]\nnames = \"vn[1-2]\"\ncpus = 4\n{extra}"),
                std::path::Path::new("/tmp/sim.toml"),
            )
            .unwrap(),
        )
    }

    fn job(cores: u32, runtime_s: i64, submit_s: i64) -> SimJob {
        SimJob {
            spec: JobSpec {
                cores,
                mem_per_cpu_mb: 0,
                runtime_ns: (runtime_s * S) as u64,
                walltime_ns: 0,
                partition: None,
                submit_ns: None,
                name: None,
            },
            submit_ns: submit_s * S,
        }
    }

    #[test]
    fn fcfs_by_hand() {
        // 8 cores. Jobs: 8 cores for 10 s at 0; 4 cores for 5 s at 1; 4
        // cores for 5 s at 2. The second and third wait for the first.
        let run = simulate(
            config("[controller]\npolicy = \"fcfs\"\nschedule_interval_ms = 0\n"),
            &[job(8, 10, 0), job(4, 5, 1), job(4, 5, 2)],
            0,
        );
        let mut recs = run.records.clone();
        recs.sort_by_key(|r| r.id);
        let times: Vec<(i64, i64)> = recs.iter().map(|r| (r.start / S, r.end / S)).collect();
        assert_eq!(times, [(0, 10), (10, 15), (10, 15)]);
        assert_eq!(run.ids, [1, 2, 3]);
        assert!(recs.iter().all(|r| r.status == Status::Completed));
    }

    #[test]
    fn the_same_input_gives_the_same_records() {
        let jobs: Vec<SimJob> = (0..200)
            .map(|i| job(1 + (i * 7 % 8) as u32, 1 + i * 13 % 50, i * 3))
            .collect();
        let a = simulate(config(""), &jobs, 1_000 * S);
        let b = simulate(config(""), &jobs, 1_000 * S);
        assert_eq!(a.records, b.records);
        assert_eq!(a.records.len(), 200);
    }

    #[test]
    fn gang_time_slicing_rotates_two_jobs_on_one_node() {
        let cfg = config(
            "[controller]\ntime_slice_s = 10\nschedule_interval_ms = 0\n\
             [[partitions]]\nname = \"shared\"\nnodes = \"vn1\"\noversubscribe = 2\n",
        );
        let run = simulate(cfg, &[job(4, 30, 0), job(4, 30, 0)], 0);
        let mut recs = run.records;
        recs.sort_by_key(|r| r.id);
        // Each runs 30 s in 10 s turns. Job 1 runs 0-10, 20-30, 40-50; job 2
        // waits for its first turn (pending) and runs 10-20, 30-40, 50-60.
        // Each is suspended twice for 10 s.
        for r in &recs {
            assert_eq!(r.end - r.start - r.suspended_ns(), 30 * S, "{r:?}");
            assert_eq!(r.suspensions.len(), 2, "{r:?}");
            for s in &r.suspensions {
                assert_eq!(s.resume - s.suspend, 10 * S, "{r:?}");
            }
        }
        assert_eq!((recs[0].start, recs[0].end), (0, 50 * S));
        assert_eq!((recs[1].start, recs[1].end), (10 * S, 60 * S));
    }

    #[test]
    fn preemption_in_virtual_time() {
        let cfg = config(
            "[controller]\npreemption = \"suspend\"\nschedule_interval_ms = 0\n\
             [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
             [[partitions]]\nname = \"high\"\npriority = 10\n",
        );
        let mut hi = job(8, 5, 10);
        hi.spec.partition = Some("high".into());
        let run = simulate(cfg, &[job(8, 20, 0), hi], 0);
        let mut recs = run.records;
        recs.sort_by_key(|r| r.id);
        // The low job runs 0..10, is suspended 10..15 while the high one
        // runs, then runs its last 10 s: it ends at 25 s.
        assert_eq!(recs[1].start, 10 * S);
        assert_eq!(recs[1].end, 15 * S);
        assert_eq!(
            recs[0].suspensions,
            [Suspension {
                suspend: 10 * S,
                resume: 15 * S
            }]
        );
        assert_eq!(recs[0].end, 25 * S);
    }

    /// Property over generated workloads on a cluster with every policy
    /// feature at once (a gang partition, and preemption between two
    /// priorities): every decision is legal when carried out in order,
    /// every job ends with its full run time, and no job starves.
    #[test]
    fn every_decision_is_legal_and_every_job_ends() {
        let cfg = config(
            "[controller]\npreemption = \"suspend\"\ntime_slice_s = 3\n\
             schedule_interval_ms = 10\n\
             [[partitions]]\nname = \"low\"\ndefault = true\n\
             [[partitions]]\nname = \"high\"\npriority = 10\n\
             [[partitions]]\nname = \"gang\"\nnodes = \"vn2\"\noversubscribe = 3\n",
        );
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..40 {
            let jobs: Vec<SimJob> = (0..60)
                .map(|i| {
                    let mut j = job(1 + rnd(4) as u32, 1 + rnd(20) as i64, i * rnd(4) as i64);
                    j.spec.partition = match rnd(3) {
                        0 => None,
                        1 => Some("high".into()),
                        _ => Some("gang".into()),
                    };
                    j
                })
                .collect();
            let run = simulate(cfg.clone(), &jobs, 0);
            assert_eq!(run.refused, 0, "round {round}: illegal decisions");
            assert_eq!(run.records.len(), jobs.len(), "round {round}");
            for r in &run.records {
                assert_eq!(r.status, Status::Completed, "round {round}: {r:?}");
                assert_eq!(
                    r.end - r.start - r.suspended_ns(),
                    r.runtime as i64,
                    "round {round}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn a_policy_named_in_the_config_runs_in_the_twin() {
        // 8 cores, busy until 10 s; then a 100 s job (queued first) and a
        // 5 s job, both of 8 cores. Shortest first: the 5 s job goes first.
        let cfg = config("[controller]\npolicy = \"sjf\"\nschedule_interval_ms = 0\n");
        let run = simulate(cfg, &[job(8, 10, 0), job(8, 100, 1), job(8, 5, 2)], 0);
        let mut recs = run.records;
        recs.sort_by_key(|r| r.id);
        let starts: Vec<i64> = recs.iter().map(|r| r.start / S).collect();
        assert_eq!(starts, [0, 15, 10]);
    }

    fn sorted(run: SimRun) -> Vec<JobRecord<'static>> {
        let mut recs = run.records;
        recs.sort_by_key(|r| r.id);
        recs
    }

    fn secs(s: &[Suspension]) -> Vec<(i64, i64)> {
        s.iter().map(|s| (s.suspend / S, s.resume / S)).collect()
    }

    #[test]
    fn a_high_priority_job_does_not_wait_behind_a_resumed_victim() {
        // Low job L (8 cores, 100 s) at 0; H1 (8 cores, 10 s) at 5 suspends
        // it; H2 (8 cores, 10 s) arrives at 12 and must run when H1 ends,
        // not after L.
        let cfg = config(
            "[controller]\npreemption = \"suspend\"\npolicy = \"fcfs\"\nschedule_interval_ms = 0\n\
             [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
             [[partitions]]\nname = \"high\"\npriority = 10\n",
        );
        let mut h1 = job(8, 10, 5);
        h1.spec.partition = Some("high".into());
        let mut h2 = job(8, 10, 12);
        h2.spec.partition = Some("high".into());
        let recs = sorted(simulate(cfg, &[job(8, 100, 0), h1, h2], 0));
        assert_eq!((recs[1].start / S, recs[2].start / S), (5, 15));
        assert_eq!(secs(&recs[0].suspensions), [(5, 25)]);
        assert_eq!(recs[0].end / S, 120);
    }

    #[test]
    fn a_victim_gets_its_nodes_back_before_later_jobs() {
        // L (8 cores on both nodes) is suspended at 5 by a 4-core urgent job
        // on vn1. 4-core low jobs keep arriving: none may take vn2 while L
        // waits, or L would wait for ever.
        let cfg = config(
            "[controller]\npreemption = \"suspend\"\nschedule_interval_ms = 0\n\
             [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
             [[partitions]]\nname = \"high\"\nnodes = \"vn1\"\npriority = 10\n",
        );
        let mut jobs = vec![job(8, 30, 0)];
        let mut urgent = job(4, 10, 5);
        urgent.spec.partition = Some("high".into());
        jobs.push(urgent);
        jobs.extend((0..8).map(|k| job(4, 100, 6 + 50 * k)));
        let recs = sorted(simulate(cfg, &jobs, 0));
        assert_eq!(secs(&recs[0].suspensions), [(5, 15)]);
        assert_eq!(recs[0].end / S, 40);
    }

    #[test]
    fn gang_time_slicing_does_not_starve_a_job_on_several_nodes() {
        // 2 nodes of 4 cores, K = 3, 10 s slices. An 8-core job and a
        // stream of 4-core jobs: the 8-core job must get turns.
        let cfg = config(
            "[controller]\ntime_slice_s = 10\nschedule_interval_ms = 0\n\
             [[partitions]]\nname = \"g\"\nnodes = \"ALL\"\ndefault = true\noversubscribe = 3\n",
        );
        let mut jobs = vec![
            job(8, 20, 0),
            job(4, 100, 1),
            job(4, 100, 15),
            job(4, 100, 16),
            job(4, 100, 17),
        ];
        jobs.extend((0..10).map(|k| job(4, 100, 100 + 50 * k)));
        let run = simulate(cfg, &jobs, 0);
        assert_eq!(run.refused, 0);
        let recs = sorted(run);
        let longest = recs[0]
            .suspensions
            .iter()
            .map(Suspension::duration_ns)
            .max()
            .unwrap_or(0);
        // Waiting for the 4-core jobs on its nodes to finish their slices:
        // a few slices, not hundreds of seconds.
        assert!(
            longest <= 40 * S,
            "longest wait {} s: {:?}",
            longest / S,
            recs[0]
        );
        assert!(recs[0].end <= 100 * S, "{:?}", recs[0]);
    }

    #[test]
    fn walltime_ends_in_timeout() {
        let mut j = job(1, 100, 0);
        j.spec.walltime_ns = (10 * S) as u64;
        let run = simulate(config(""), &[j], 0);
        assert_eq!(run.records[0].status, Status::Timeout);
        assert_eq!(run.records[0].end, 10 * S);
    }
}
