//! Scheduling policies: pure functions from a [`View`] of the cluster to
//! [`Decisions`] (start a job on these cores, suspend, resume, cancel). No
//! I/O, no clock, no hidden state: the emulation and the virtual-time
//! simulation ([`crate::sim`]) run the very same code, and tests build
//! views by hand.
//!
//! # Writing a policy
//!
//! A policy is a type that implements [`Policy`]. It sees every node's free
//! cores and memory, the pending jobs in queue order and the jobs that
//! hold resources, and answers with what to do now and, if it wants to be
//! asked again at a given time even if nothing happens, when. Here is a
//! complete one, "largest job first", with first-fit placement:
//!
//! ```
//! use controller::policy::{Decision, Decisions, Free, Policy, View};
//!
//! struct LargestFirst;
//!
//! impl Policy for LargestFirst {
//!     fn decide(&self, view: &View) -> Decisions {
//!         let mut free = Free::new(view);
//!         let mut queue: Vec<_> = view.queue.iter().collect();
//!         queue.sort_by_key(|q| std::cmp::Reverse(q.cores));
//!         let mut out = Decisions::default();
//!         for q in queue {
//!             // First fit over the job's partition; None if it does not fit.
//!             if let Some(alloc) = free.place(view, q) {
//!                 out.list.push(Decision::Start { job: q.job, alloc });
//!             }
//!         }
//!         out
//!     }
//! }
//! # let view = View::default();
//! # assert!(LargestFirst.decide(&view).list.is_empty());
//! ```
//!
//! The controller applies decisions in order and checks each (a start
//! that would overbook a node is refused, logged and counted in
//! `controller stats`), so a buggy policy cannot corrupt the cluster's
//! state. Order matters: suspend a job before giving its cores away.
//!
//! To make a policy selectable with `[controller] policy = "name"`, in the
//! emulation and in the virtual-time twin alike, put it in a file of its
//! own under `src/policy/` with a `pub const ENTRY: Entry` naming it:
//! nothing else to edit (the build finds every file there).
//! `src/policy/shortest_first.rs` (`policy = "sjf"`) is a complete
//! example, with its test.
//!
//! # The built-in policy
//!
//! [`Standard`] combines, in this order each pass:
//!
//! 1. **gang time-slicing** in partitions with `oversubscribe = K > 1`
//!    (Slurm's `PreemptMode=GANG`): up to K jobs share each core; a job
//!    that has run for a time slice gives its cores to the job of its
//!    partition that has waited longest, suspended or pending, so every
//!    job runs in turn and none starves;
//! 2. **preemption by suspension** (Slurm's `preempt/partition_prio` with
//!    `PreemptMode=SUSPEND`): a pending job that does not fit suspends just
//!    enough jobs of lower-priority partitions (fewest and lowest-priority
//!    first) on the nodes it needs, and starts; suspended jobs keep their
//!    memory;
//! 3. **resumption**: jobs the policy suspended resume, highest partition
//!    priority then oldest suspension first, as soon as their cores are
//!    free again; the first that cannot keeps its nodes reserved;
//! 4. the **base policy** for what is left of the queue: [`Base::Fcfs`]
//!    (strict first come, first served) or [`Base::Easy`] (EASY
//!    backfilling).
//!
//! Placement is first fit over a partition's usable nodes: a job of `c`
//! cores takes whatever free cores (and the memory they need) nodes have,
//! in node order, until it has `c`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

// The files of src/policy/ and their entries (`FROM_FILES`).
include!(concat!(env!("OUT_DIR"), "/policies.rs"));

/// A policy a configuration can name.
pub struct Entry {
    /// The value of `[controller] policy`.
    pub name: &'static str,
    pub about: &'static str,
    /// Whether it carries out preemption and gang time-slicing; a config
    /// that asks for them with a policy that does not is refused.
    pub suspends: bool,
    pub make: fn(&crate::config::Cluster) -> Box<dyn Policy>,
}

/// The built-in policies; [`all`] adds those of `src/policy/`.
pub const BUILT_IN: &[Entry] = &[
    Entry {
        name: "fcfs",
        about: "first come, first served, with gang time-slicing and preemption",
        suspends: true,
        make: |c| {
            Box::new(Standard {
                base: Base::Fcfs,
                preemption: c.preemption,
            })
        },
    },
    Entry {
        name: "easy",
        about: "EASY backfilling, with gang time-slicing and preemption",
        suspends: true,
        make: |c| {
            Box::new(Standard {
                base: Base::Easy,
                preemption: c.preemption,
            })
        },
    },
];

/// Every policy a configuration can name.
pub fn all() -> impl Iterator<Item = &'static Entry> {
    BUILT_IN.iter().chain(FROM_FILES.iter().copied())
}

pub fn find(name: &str) -> Option<&'static Entry> {
    all().find(|p| p.name == name)
}

/// A node as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeView {
    pub cpus: u32,
    /// Cores not used by running (or administratively suspended) jobs.
    pub free_cpus: u32,
    /// Memory not held by any job, running or suspended.
    pub free_mem_mb: u64,
    /// Cores that more jobs may still be allocated on: `cpus × K` minus
    /// what running and suspended jobs hold (K the node's oversubscription,
    /// 1 without gang scheduling).
    pub free_slots: u32,
    /// Up (agent connected) and not drained.
    pub usable: bool,
}

/// Gang time-slicing of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gang {
    /// Jobs per core at most (Slurm's `OverSubscribe=FORCE:K`).
    pub oversubscribe: u32,
    /// How long a job runs before it may have to give its cores up.
    pub slice_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionView {
    pub nodes: Vec<usize>,
    /// Higher wins, for queue order and preemption.
    pub priority: u32,
    pub gang: Option<Gang>,
}

/// A pending job, in queue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub job: u64,
    pub partition: usize,
    pub cores: u32,
    pub mem_per_cpu_mb: u64,
    /// How long it is expected to run: its wall-time limit, or its run
    /// time when it has none (nanoseconds).
    pub estimate_ns: u64,
    /// When it was submitted (same clock as `View::now_ns`).
    pub submit_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveState {
    Running,
    /// Suspended by a policy: its cores are free, its memory held.
    Suspended,
    /// Suspended by an administrator: it keeps its cores; policies leave
    /// it alone.
    Held,
    /// Being cancelled (or ended at its wall-time limit): it still holds
    /// what it held until its process is gone; policies leave it alone.
    Ending,
    /// Its agent is gone for now (it may come back and report the job):
    /// policies leave it alone.
    Unreachable,
}

/// A job holding resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    pub job: u64,
    pub partition: usize,
    pub cores: u32,
    pub mem_per_cpu_mb: u64,
    /// (node, cores).
    pub alloc: Vec<(usize, u32)>,
    pub state: ActiveState,
    /// When it last started, resumed or was suspended.
    pub since_ns: i64,
    /// When it is expected to release its cores if it keeps running
    /// (`i64::MAX` when it is not running).
    pub expected_end_ns: i64,
    /// Expected run time still to go at `since_ns`: what a suspended job
    /// would run for once resumed.
    pub remaining_ns: i64,
}

/// What a policy sees.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub now_ns: i64,
    pub nodes: Vec<NodeView>,
    /// Shared, not copied, from pass to pass: it changes only with the
    /// configuration. At most 64 partitions.
    pub partitions: Arc<Vec<PartitionView>>,
    /// Pending jobs, highest partition priority first, then oldest first.
    /// Shared with the cluster state, which keeps it in this order.
    pub queue: Arc<Vec<Queued>>,
    /// Started jobs (running or suspended), by job id.
    pub active: Arc<Vec<Active>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start a pending job on these (node, cores).
    Start {
        job: u64,
        alloc: Vec<(usize, u32)>,
    },
    Suspend(u64),
    Resume(u64),
    Cancel(u64),
}

/// What to do now, and when to be asked again at the latest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    pub list: Vec<Decision>,
    pub wake_at_ns: Option<i64>,
}

/// A scheduling policy. `decide` is called after something happened (a
/// job arrived or ended, a node changed) once no job is waiting to be
/// (re)started, or when the time it asked to be woken at has come; it is
/// not called when no job waits (pending or suspended by a policy) and no
/// wake-up is due.
pub trait Policy: Send + Sync {
    fn decide(&self, view: &View) -> Decisions;
}

/// The base policy for starting jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// Start jobs in queue order while they fit; the first that does not
    /// fit blocks everything behind it.
    Fcfs,
    /// EASY backfilling: once the queue's head is blocked it gets a
    /// reservation (the earliest time enough cores free up, from the
    /// running jobs' expected ends), and a later job may start now only if
    /// it cannot delay that reservation: it ends before the reserved start,
    /// or it uses only cores the head will not need then. The reservation
    /// counts cores, not memory.
    Easy,
}

/// The built-in policy (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standard {
    pub base: Base,
    /// Higher-priority partitions may suspend lower-priority jobs.
    pub preemption: bool,
}

impl Policy for Standard {
    fn decide(&self, v: &View) -> Decisions {
        let mut free = Free::new(v);
        let mut out = Decisions::default();
        // Jobs already decided on in this pass.
        let mut done: HashSet<u64> = HashSet::new();
        for p in 0..v.partitions.len() {
            if v.partitions[p].gang.is_some_and(|g| g.oversubscribe > 1) {
                rotate(v, p, &mut free, &mut out, &mut done);
            }
        }
        if self.preemption {
            preempt(v, &mut free, &mut out, &mut done);
        }
        resume(v, &mut free, &mut out, &mut done);
        match self.base {
            Base::Fcfs => fcfs(v, &mut free, &mut out, &done),
            Base::Easy => {
                let earlier = decided_ends(v, &out.list);
                easy(v, &mut free, &mut out, &done, earlier);
            }
        }
        out
    }
}

fn gang_of(v: &View, partition: usize) -> Option<Gang> {
    v.partitions[partition].gang.filter(|g| g.oversubscribe > 1)
}

fn fcfs(v: &View, free: &mut Free, out: &mut Decisions, done: &HashSet<u64>) {
    for q in v.queue.iter().filter(|q| !done.contains(&q.job)) {
        match free.place(v, q) {
            Some(alloc) => out.list.push(Decision::Start { job: q.job, alloc }),
            None => break,
        }
    }
}

/// When `q` would end if it started now.
fn end_of(v: &View, q: &Queued) -> i64 {
    v.now_ns
        .saturating_add(q.estimate_ns.min(i64::MAX as u64) as i64)
}

/// Expected ends of the jobs started or resumed by `decisions`, for the
/// EASY reservation: they will release their cores too.
fn decided_ends(v: &View, decisions: &[Decision]) -> Vec<(i64, Vec<(usize, u32)>)> {
    let started: HashSet<u64> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    let mut ends: Vec<(i64, Vec<(usize, u32)>)> = Vec::new();
    if !started.is_empty() {
        let estimate: HashMap<u64, i64> = v
            .queue
            .iter()
            .filter(|q| started.contains(&q.job))
            .map(|q| (q.job, end_of(v, q)))
            .collect();
        for d in decisions {
            if let Decision::Start { job, alloc } = d {
                if let Some(&end) = estimate.get(job) {
                    ends.push((end, alloc.clone()));
                }
            }
        }
    }
    for d in decisions {
        if let Decision::Resume(job) = d {
            if let Ok(i) = v.active.binary_search_by_key(job, |a| a.job) {
                let a = &v.active[i];
                ends.push((v.now_ns.saturating_add(a.remaining_ns), a.alloc.clone()));
            }
        }
    }
    ends
}

fn easy(
    v: &View,
    free: &mut Free,
    out: &mut Decisions,
    done: &HashSet<u64>,
    earlier: Vec<(i64, Vec<(usize, u32)>)>,
) {
    // Expected ends of the jobs started in this pass before the head
    // blocked, which the head's reservation must count as releases.
    let mut started = earlier;
    let mut reservation: Option<Reservation> = None;
    for q in v.queue.iter().filter(|q| !done.contains(&q.job)) {
        match &mut reservation {
            None => match free.place(v, q) {
                Some(alloc) => {
                    started.push((end_of(v, q), alloc.clone()));
                    out.list.push(Decision::Start { job: q.job, alloc });
                }
                None => reservation = Some(Reservation::for_head(v, free, q, &started)),
            },
            Some(r) => {
                // Cheap test first: most of a long queue does not fit.
                if !free.might_fit(q) {
                    continue;
                }
                let ends_in_time = end_of(v, q) <= r.shadow_ns;
                let Some(alloc) = free.try_place(v, q) else {
                    continue;
                };
                let on_head_nodes: u32 = alloc
                    .iter()
                    .filter(|(n, _)| r.head_nodes[*n])
                    .map(|(_, c)| c)
                    .sum();
                // The reservation counts cores only: when the head needs
                // memory, a job that would still run at its start could
                // take that memory, so only jobs ending in time go.
                let spare_ok = r.head_mem_free && on_head_nodes <= r.extra;
                if ends_in_time || spare_ok {
                    if !ends_in_time {
                        r.extra -= on_head_nodes;
                    }
                    free.take(v, q, &alloc);
                    out.list.push(Decision::Start { job: q.job, alloc });
                }
            }
        }
    }
}

/// The blocked head's reserved start and what is spare at that time.
struct Reservation {
    /// Whether the head asks no memory (so spare cores are truly spare).
    head_mem_free: bool,
    shadow_ns: i64,
    /// Cores on the head's partition free at the shadow time beyond what
    /// the head needs.
    extra: u32,
    head_nodes: Vec<bool>,
}

impl Reservation {
    fn for_head(
        v: &View,
        free: &Free,
        head: &Queued,
        started: &[(i64, Vec<(usize, u32)>)],
    ) -> Reservation {
        let mut head_nodes = vec![false; v.nodes.len()];
        for &n in &v.partitions[head.partition].nodes {
            if v.nodes[n].usable {
                head_nodes[n] = true;
            }
        }
        let on_head = |alloc: &[(usize, u32)]| -> u32 {
            alloc
                .iter()
                .filter(|(n, _)| head_nodes[*n])
                .map(|(_, c)| c)
                .sum()
        };
        // Releases: running jobs at their expected ends, and the jobs this
        // pass just started, at now + estimate.
        let mut releases: Vec<(i64, u32)> = v
            .active
            .iter()
            .filter(|a| a.state == ActiveState::Running)
            .map(|a| (a.expected_end_ns, on_head(&a.alloc)))
            .collect();
        releases.extend(started.iter().map(|(end, alloc)| (*end, on_head(alloc))));
        releases.sort_unstable();
        let mut avail = free.partition_free[head.partition];
        // No release in sight (the cores are held by suspended or held
        // jobs): no time to backfill into, and nothing spare.
        let mut shadow_ns = v.now_ns;
        let mut extra = 0;
        for (end, cores) in releases {
            avail += u64::from(cores);
            if avail >= u64::from(head.cores) {
                shadow_ns = end.max(v.now_ns);
                extra = (avail - u64::from(head.cores)).min(u64::from(u32::MAX)) as u32;
                break;
            }
        }
        Reservation {
            head_mem_free: head.mem_per_cpu_mb == 0,
            shadow_ns,
            extra,
            head_nodes,
        }
    }
}

/// Gang time-slicing of partition `p`: running jobs whose slice is over
/// give way to the jobs that have waited longest (suspended or pending).
fn rotate(v: &View, p: usize, free: &mut Free, out: &mut Decisions, done: &mut HashSet<u64>) {
    let Some(gang) = gang_of(v, p) else { return };
    // Waiting jobs, longest waiting first: suspended ones since their
    // suspension, pending ones since their submission.
    let mut waiting: Vec<(i64, Waiter)> = v
        .active
        .iter()
        .enumerate()
        .filter(|(_, a)| a.partition == p && a.state == ActiveState::Suspended)
        .map(|(i, a)| (a.since_ns, Waiter::Suspended(i)))
        .chain(
            v.queue
                .iter()
                .enumerate()
                .filter(|(_, q)| q.partition == p && !done.contains(&q.job))
                .map(|(i, q)| (q.submit_ns, Waiter::Pending(i))),
        )
        .collect();
    if waiting.is_empty() {
        return;
    }
    waiting.sort_by_key(|(since, w)| (*since, w.key(v)));
    let mut expired: Vec<&Active> = v
        .active
        .iter()
        .filter(|a| {
            a.partition == p
                && a.state == ActiveState::Running
                && v.now_ns - a.since_ns >= gang.slice_ns
        })
        .collect();
    expired.sort_by_key(|a| (a.since_ns, a.job));
    // Tentatively take every expired job off its cores; those whose cores
    // nobody takes simply go on running.
    for a in &expired {
        free.give_back(a);
    }
    let mut granted = Vec::new();
    // The longest-waiting suspended job that cannot have its cores back
    // yet: its nodes are reserved for it, or younger jobs could keep
    // taking them turn after turn and a job spread over several nodes
    // would starve.
    let mut reserved = false;
    for (_, w) in &waiting {
        match *w {
            Waiter::Suspended(i) => {
                let a = &v.active[i];
                if free.fits_alloc(&a.alloc) {
                    free.take_alloc(&a.alloc);
                    granted.push(Decision::Resume(a.job));
                    done.insert(a.job);
                } else if !reserved {
                    free.block(&a.alloc);
                    reserved = true;
                }
            }
            Waiter::Pending(i) => {
                let q = &v.queue[i];
                if let Some(alloc) = free.place(v, q) {
                    granted.push(Decision::Start { job: q.job, alloc });
                    done.insert(q.job);
                }
            }
        }
    }
    let served = granted.len();
    let mut displaced = 0;
    for a in &expired {
        // Cores nobody took go back to their job, reserved or not.
        if free.still_free(&a.alloc) {
            free.take_alloc(&a.alloc);
        } else {
            out.list.push(Decision::Suspend(a.job));
            done.insert(a.job);
            displaced += 1;
        }
    }
    // Decisions are carried out in order: the displaced jobs must be off
    // the cores before the waiting ones are given them.
    out.list.append(&mut granted);
    // Someone still waits: ask again when the first running job's slice
    // ends (the jobs started or resumed now end theirs a slice from now).
    if waiting.len() - served + displaced > 0 {
        let next = v
            .active
            .iter()
            .filter(|a| {
                a.partition == p && a.state == ActiveState::Running && !done.contains(&a.job)
            })
            .map(|a| a.since_ns + gang.slice_ns)
            .filter(|&t| t > v.now_ns)
            .fold(v.now_ns + gang.slice_ns, i64::min);
        out.wake_at_ns = Some(out.wake_at_ns.map_or(next, |w| w.min(next)));
    }
}

#[derive(Debug, Clone, Copy)]
enum Waiter {
    /// Index into `View::active`.
    Suspended(usize),
    /// Index into `View::queue`.
    Pending(usize),
}

impl Waiter {
    /// Tie-break between equal waiting times: job id.
    fn key(&self, v: &View) -> u64 {
        match *self {
            Waiter::Suspended(i) => v.active[i].job,
            Waiter::Pending(i) => v.queue[i].job,
        }
    }
}

/// Preemption by suspension: pending jobs that do not fit suspend jobs of
/// lower-priority partitions.
fn preempt(v: &View, free: &mut Free, out: &mut Decisions, done: &mut HashSet<u64>) {
    // Jobs above the lowest priority that holds (or waits to resume on)
    // cores are this step's: they may suspend lower ones, and those that
    // fit start before suspended lower ones resume.
    let lowest = v
        .active
        .iter()
        .filter(|a| matches!(a.state, ActiveState::Running | ActiveState::Suspended))
        .map(|a| v.partitions[a.partition].priority)
        .min();
    let Some(lowest) = lowest else { return };
    // Priorities whose first job could not be placed, even by preemption:
    // later jobs of the same priority do not jump it here (the base policy
    // may still backfill them).
    let mut stuck: HashSet<u32> = HashSet::new();
    for q in v.queue.iter() {
        let prio = v.partitions[q.partition].priority;
        if prio <= lowest
            || done.contains(&q.job)
            || gang_of(v, q.partition).is_some()
            || stuck.contains(&prio)
        {
            continue;
        }
        // It fits as it is: start it now, before suspended jobs of lower
        // priority resume onto those cores.
        if let Some(alloc) = free.place(v, q) {
            out.list.push(Decision::Start { job: q.job, alloc });
            done.insert(q.job);
            continue;
        }
        let on_part: Vec<bool> = {
            let mut m = vec![false; v.nodes.len()];
            for &n in &v.partitions[q.partition].nodes {
                m[n] = v.nodes[n].usable;
            }
            m
        };
        // Victims: running jobs of lower priority with cores on the nodes
        // the job may use; lowest priority first, then those that free the
        // most cores there (fewest victims: a job's cores elsewhere are no
        // use to it), then the youngest.
        let useful = |a: &Active| -> u32 {
            a.alloc
                .iter()
                .filter(|(n, _)| on_part[*n])
                .map(|(_, c)| c)
                .sum()
        };
        let mut candidates: Vec<&Active> = v
            .active
            .iter()
            .filter(|a| {
                a.state == ActiveState::Running
                    && !done.contains(&a.job)
                    && v.partitions[a.partition].priority < prio
                    && a.alloc.iter().any(|(n, _)| on_part[*n])
            })
            .collect();
        candidates.sort_by_key(|a| {
            (
                v.partitions[a.partition].priority,
                std::cmp::Reverse(useful(a)),
                std::cmp::Reverse(a.since_ns),
                a.job,
            )
        });
        let mut trial = free.clone();
        let mut chosen: Vec<&Active> = Vec::new();
        let mut fits = false;
        for a in candidates {
            trial.give_back(a);
            chosen.push(a);
            if trial.try_place(v, q).is_some() {
                fits = true;
                break;
            }
        }
        if !fits {
            stuck.insert(prio);
            continue;
        }
        // Just enough: drop every victim the job fits without, trying the
        // last chosen (the least preferred) first.
        let mut i = chosen.len();
        while i > 0 {
            i -= 1;
            let mut without = free.clone();
            for (k, a) in chosen.iter().enumerate() {
                if k != i {
                    without.give_back(a);
                }
            }
            if without.try_place(v, q).is_some() {
                chosen.remove(i);
            }
        }
        let mut trial = free.clone();
        for a in &chosen {
            trial.give_back(a);
        }
        let Some(alloc) = trial.try_place(v, q) else {
            continue;
        };
        // Spare victims the placement does not touch.
        let used: HashSet<usize> = alloc.iter().map(|(n, _)| *n).collect();
        for a in chosen {
            if a.alloc.iter().any(|(n, _)| used.contains(n)) {
                free.give_back(a);
                out.list.push(Decision::Suspend(a.job));
                done.insert(a.job);
            }
        }
        free.take(v, q, &alloc);
        out.list.push(Decision::Start { job: q.job, alloc });
        done.insert(q.job);
    }
}

/// Jobs the policy suspended (outside gang partitions) resume, oldest
/// suspension first, as soon as their cores are free.
fn resume(v: &View, free: &mut Free, out: &mut Decisions, done: &mut HashSet<u64>) {
    let mut suspended: Vec<&Active> = v
        .active
        .iter()
        .filter(|a| {
            a.state == ActiveState::Suspended
                && gang_of(v, a.partition).is_none()
                && !done.contains(&a.job)
        })
        .collect();
    suspended.sort_by_key(|a| {
        (
            std::cmp::Reverse(v.partitions[a.partition].priority),
            a.since_ns,
            a.job,
        )
    });
    let mut reserved = false;
    for a in suspended {
        if free.fits_alloc(&a.alloc) {
            free.take_alloc(&a.alloc);
            out.list.push(Decision::Resume(a.job));
            done.insert(a.job);
        } else if !reserved {
            // The first in line keeps its nodes: jobs started in the gaps
            // could otherwise keep a job spread over several nodes
            // suspended for ever.
            free.block(&a.alloc);
            reserved = true;
        }
    }
}

/// Free resources during one pass, as decisions are made.
#[derive(Debug, Clone)]
pub struct Free {
    nodes: Vec<NodeView>,
    /// Free cores on usable nodes of each partition: lets a job that
    /// cannot fit be turned down without looking at any node.
    partition_free: Vec<u64>,
    /// The partitions of each node, as a bit set.
    node_partitions: Vec<u64>,
    /// Each partition's nodes, as a bit set over node indices.
    members: Vec<Vec<u64>>,
    /// Usable nodes with a free core, as a bit set over node indices. On a
    /// busy cluster most nodes are full; first fit walks only these, so
    /// trying a queue of jobs against thousands of nodes stays cheap.
    open: Vec<u64>,
    /// Nodes reserved, for the rest of the pass, for a suspended job that
    /// waits longest for them: nothing else is placed or resumed there.
    blocked: Vec<u64>,
    /// Partitions that time-slice: placement there stays within the slots.
    gang: Vec<bool>,
}

fn set_bit(set: &mut [u64], n: usize, on: bool) {
    if on {
        set[n / 64] |= 1 << (n % 64);
    } else {
        set[n / 64] &= !(1 << (n % 64));
    }
}

impl Free {
    pub fn new(v: &View) -> Free {
        let words = v.nodes.len().div_ceil(64);
        let mut node_partitions = vec![0u64; v.nodes.len()];
        let mut members = Vec::with_capacity(v.partitions.len());
        let mut partition_free = Vec::with_capacity(v.partitions.len());
        for (p, part) in v.partitions.iter().enumerate() {
            let mut set = vec![0u64; words];
            let mut free = 0;
            for &n in &part.nodes {
                node_partitions[n] |= 1 << (p % 64);
                set_bit(&mut set, n, true);
                if v.nodes[n].usable {
                    free += u64::from(v.nodes[n].free_cpus);
                }
            }
            members.push(set);
            partition_free.push(free);
        }
        let mut open = vec![0u64; words];
        for (n, node) in v.nodes.iter().enumerate() {
            set_bit(&mut open, n, node.usable && node.free_cpus > 0);
        }
        Free {
            nodes: v.nodes.clone(),
            partition_free,
            node_partitions,
            members,
            blocked: vec![0u64; words],
            open,
            gang: (0..v.partitions.len())
                .map(|p| gang_of(v, p).is_some())
                .collect(),
        }
    }

    pub fn node(&self, n: usize) -> &NodeView {
        &self.nodes[n]
    }

    fn might_fit(&self, q: &Queued) -> bool {
        self.partition_free
            .get(q.partition)
            .is_some_and(|&f| f >= u64::from(q.cores))
    }

    /// Where `q` would go now (first fit), without taking anything: on
    /// free cores of its partition's usable nodes, outside reserved nodes,
    /// and within the slots in a partition that time-slices.
    pub fn try_place(&self, _v: &View, q: &Queued) -> Option<Vec<(usize, u32)>> {
        if q.cores == 0 || !self.might_fit(q) {
            return None;
        }
        let slotted = self.gang.get(q.partition).copied().unwrap_or(false);
        let mut need = q.cores;
        let mut alloc = Vec::new();
        let member = &self.members[q.partition];
        let open = self.open.iter().zip(&self.blocked);
        for (w, (&m, (&o, &b))) in member.iter().zip(open).enumerate() {
            let mut bits = m & o & !b;
            while bits != 0 {
                let n = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let node = &self.nodes[n];
                let by_mem = node
                    .free_mem_mb
                    .checked_div(q.mem_per_cpu_mb)
                    .unwrap_or(u64::MAX)
                    .min(u64::from(u32::MAX)) as u32;
                let mut take = node.free_cpus.min(need).min(by_mem);
                if slotted {
                    take = take.min(node.free_slots);
                }
                if take > 0 {
                    alloc.push((n, take));
                    need -= take;
                    if need == 0 {
                        return Some(alloc);
                    }
                }
            }
        }
        None
    }

    /// Takes the cores and memory of `alloc` for `q`.
    pub fn take(&mut self, _v: &View, q: &Queued, alloc: &[(usize, u32)]) {
        for &(n, c) in alloc {
            self.use_cpus(n, c);
            let node = &mut self.nodes[n];
            node.free_mem_mb -= u64::from(c) * q.mem_per_cpu_mb;
            node.free_slots = node.free_slots.saturating_sub(c);
        }
    }

    /// First fit, and take it.
    pub fn place(&mut self, v: &View, q: &Queued) -> Option<Vec<(usize, u32)>> {
        let alloc = self.try_place(v, q)?;
        self.take(v, q, &alloc);
        Some(alloc)
    }

    /// Reserves these nodes for the rest of the pass.
    fn block(&mut self, alloc: &[(usize, u32)]) {
        for &(n, _) in alloc {
            set_bit(&mut self.blocked, n, true);
        }
    }

    fn use_cpus(&mut self, n: usize, c: u32) {
        self.nodes[n].free_cpus -= c;
        if self.nodes[n].free_cpus == 0 {
            set_bit(&mut self.open, n, false);
        }
        if self.nodes[n].usable {
            let mut bits = self.node_partitions[n];
            while bits != 0 {
                let p = bits.trailing_zeros() as usize;
                self.partition_free[p] -= u64::from(c);
                bits &= bits - 1;
            }
        }
    }

    /// A running job's cores become free (it is to be suspended); its
    /// memory stays held.
    fn give_back(&mut self, a: &Active) {
        for &(n, c) in &a.alloc {
            self.nodes[n].free_cpus += c;
            if self.nodes[n].usable {
                set_bit(&mut self.open, n, self.nodes[n].free_cpus > 0);
                let mut bits = self.node_partitions[n];
                while bits != 0 {
                    let p = bits.trailing_zeros() as usize;
                    self.partition_free[p] += u64::from(c);
                    bits &= bits - 1;
                }
            }
        }
    }

    /// Whether a suspended job's cores are free (reserved nodes excluded).
    /// A drained node still lets its suspended jobs resume.
    fn fits_alloc(&self, alloc: &[(usize, u32)]) -> bool {
        alloc.iter().all(|&(n, c)| {
            self.nodes[n].free_cpus >= c && self.blocked[n / 64] & (1 << (n % 64)) == 0
        })
    }

    /// Whether a running job's own cores are still free, reserved or not.
    fn still_free(&self, alloc: &[(usize, u32)]) -> bool {
        alloc.iter().all(|&(n, c)| self.nodes[n].free_cpus >= c)
    }

    /// A suspended job's cores are taken again (its memory it never gave).
    fn take_alloc(&mut self, alloc: &[(usize, u32)]) {
        for &(n, c) in alloc {
            self.use_cpus(n, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_has_a_name_of_its_own() {
        let mut names: Vec<&str> = all().map(|p| p.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two policies share a name: {names:?}");
        assert!(find("sjf").is_some(), "the file policies are registered");
    }

    const S: i64 = 1_000_000_000;

    fn node(free: u32) -> NodeView {
        NodeView {
            cpus: 4,
            free_cpus: free,
            free_mem_mb: 1 << 20,
            free_slots: free,
            usable: true,
        }
    }

    fn job(id: u64, cores: u32, estimate_s: u64) -> Queued {
        Queued {
            job: id,
            partition: 0,
            cores,
            mem_per_cpu_mb: 0,
            estimate_ns: estimate_s * S as u64,
            submit_ns: id as i64,
        }
    }

    fn running(id: u64, partition: usize, alloc: Vec<(usize, u32)>, end_s: i64) -> Active {
        Active {
            job: id,
            partition,
            cores: alloc.iter().map(|(_, c)| c).sum(),
            mem_per_cpu_mb: 0,
            alloc,
            state: ActiveState::Running,
            since_ns: 0,
            expected_end_ns: end_s * S,
            remaining_ns: end_s * S,
        }
    }

    /// `free` cores now on 4 nodes of 4 cores (16 in all), one partition.
    fn view(free: [u32; 4], active: Vec<Active>, queue: Vec<Queued>) -> View {
        View {
            now_ns: 100 * S,
            nodes: free.iter().map(|&c| node(c)).collect(),
            partitions: Arc::new(vec![PartitionView {
                nodes: vec![0, 1, 2, 3],
                priority: 0,
                gang: None,
            }]),
            queue: Arc::new(queue),
            active: Arc::new(active),
        }
    }

    const FCFS: Standard = Standard {
        base: Base::Fcfs,
        preemption: false,
    };
    const EASY: Standard = Standard {
        base: Base::Easy,
        preemption: false,
    };

    fn started(d: &Decisions) -> Vec<u64> {
        d.list
            .iter()
            .filter_map(|x| match x {
                Decision::Start { job, .. } => Some(*job),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn fcfs_starts_in_order_and_stops_at_the_first_that_does_not_fit() {
        let v = view(
            [4, 4, 0, 0],
            vec![],
            vec![job(1, 4, 10), job(2, 2, 10), job(3, 8, 10), job(4, 1, 10)],
        );
        let d = FCFS.decide(&v);
        assert_eq!(
            d.list,
            [
                Decision::Start {
                    job: 1,
                    alloc: vec![(0, 4)]
                },
                Decision::Start {
                    job: 2,
                    alloc: vec![(1, 2)]
                }
            ]
        );
    }

    #[test]
    fn easy_backfills_a_small_job_that_ends_before_the_reservation() {
        let active = vec![
            running(10, 0, vec![(2, 4)], 200),
            running(11, 0, vec![(3, 4)], 300),
        ];
        // The head wants all 16: reserved at 300 s with none spare. Job 2
        // (8 cores) ends at 250 s: backfilled. Job 3 finds nothing left.
        let v = view(
            [4, 4, 0, 0],
            active,
            vec![job(1, 16, 500), job(2, 8, 150), job(3, 1, 10)],
        );
        assert_eq!(started(&EASY.decide(&v)), [2]);
    }

    #[test]
    fn easy_does_not_backfill_a_job_that_would_delay_the_head() {
        let active = vec![running(10, 0, vec![(2, 4), (3, 4)], 200)];
        let v = view(
            [4, 4, 0, 0],
            active.clone(),
            vec![job(1, 16, 500), job(2, 2, 300)],
        );
        assert!(started(&EASY.decide(&v)).is_empty());
        let v = view([4, 4, 0, 0], active, vec![job(1, 16, 500), job(2, 2, 100)]);
        assert_eq!(started(&EASY.decide(&v)), [2]);
    }

    #[test]
    fn easy_backfills_long_jobs_into_cores_the_head_will_not_need() {
        let active = vec![running(10, 0, vec![(2, 4), (3, 4)], 200)];
        // The head needs 12: reserved at 200 s with 4 spare. Two long 2-core
        // jobs fit in the spare 4; a third would not.
        let v = view(
            [4, 4, 0, 0],
            active,
            vec![
                job(1, 12, 500),
                job(2, 2, 900),
                job(3, 2, 900),
                job(4, 2, 900),
            ],
        );
        assert_eq!(started(&EASY.decide(&v)), [2, 3]);
    }

    #[test]
    fn easy_does_not_let_a_backfilled_job_take_the_heads_memory() {
        // Two nodes of 4 cores / 4000 MiB; node 0 busy until 200 s. The head
        // wants 6 cores of 1000 MiB: reserved at 200 s with 2 cores spare.
        // A long 1-core job of 4000 MiB fits those spare cores but would
        // take node 1's memory: not backfilled. A short one is.
        let mut v = view(
            [0, 4, 0, 0],
            vec![running(10, 0, vec![(0, 4)], 200)],
            vec![],
        );
        v.nodes.truncate(2);
        Arc::make_mut(&mut v.partitions)[0].nodes = vec![0, 1];
        for n in &mut v.nodes {
            n.free_mem_mb = 4000;
        }
        let head = Queued {
            mem_per_cpu_mb: 1000,
            ..job(1, 6, 500)
        };
        let long = Queued {
            mem_per_cpu_mb: 4000,
            ..job(2, 1, 900)
        };
        v.queue = Arc::new(vec![head, long]);
        assert!(started(&EASY.decide(&v)).is_empty());
        Arc::make_mut(&mut v.queue)[1].estimate_ns = 50 * S as u64;
        assert_eq!(started(&EASY.decide(&v)), [2]);
    }

    #[test]
    fn memory_limits_placement() {
        let mut v = view([4, 4, 4, 4], vec![], vec![]);
        v.nodes[0].free_mem_mb = 1000;
        v.nodes[1].free_mem_mb = 4000;
        v.queue = Arc::new(vec![Queued {
            mem_per_cpu_mb: 1000,
            ..job(1, 5, 10)
        }]);
        let d = FCFS.decide(&v);
        assert_eq!(
            d.list,
            [Decision::Start {
                job: 1,
                alloc: vec![(0, 1), (1, 4)]
            }]
        );
    }

    /// Adds partition 1 over `nodes` at priority 10 (partition 0 at 1) and
    /// queues one 4-core job there: the urgent job preemption is for.
    fn queue_urgent(v: &mut View, nodes: Vec<usize>) {
        Arc::make_mut(&mut v.partitions)[0].priority = 1;
        Arc::make_mut(&mut v.partitions).push(PartitionView {
            nodes,
            priority: 10,
            gang: None,
        });
        v.queue = Arc::new(vec![Queued {
            partition: 1,
            ..job(1, 4, 100)
        }]);
    }

    #[test]
    fn preemption_suspends_the_fewest_lowest_priority_jobs() {
        // All 16 cores busy with low-priority jobs: 1 core (job 10), 3 cores
        // (11) on node 0; 4 cores each on nodes 1 (12), 2 (13), 3 (14).
        let mut base = view([4, 4, 4, 4], vec![], vec![]);
        let active = vec![
            running(10, 0, vec![(0, 1)], 900),
            running(11, 0, vec![(0, 3)], 900),
            running(12, 0, vec![(1, 4)], 900),
            running(13, 0, vec![(2, 4)], 900),
            running(14, 0, vec![(3, 4)], 900),
        ];
        for n in &mut base.nodes {
            n.free_cpus = 0;
        }
        base.active = Arc::new(active);
        queue_urgent(&mut base, vec![0, 1, 2, 3]);
        let d = PREEMPT.decide(&base);
        // One victim suffices: a 4-core job (the largest first), the
        // youngest of equal ones, here the highest id (all started at 0).
        assert_eq!(
            d.list,
            [
                Decision::Suspend(12),
                Decision::Start {
                    job: 1,
                    alloc: vec![(1, 4)]
                }
            ]
        );
    }

    #[test]
    fn preemption_counts_only_the_cores_a_victim_frees_where_the_job_may_run() {
        // The urgent partition has nodes 0 to 2 only, all busy. Job 10 has
        // 3 cores on node 0 and 4 on node 3, job 11 two on node 1 and 4 on
        // node 3 (7 and 6 cores in all), job 12 four on node 2: counted by
        // their size, jobs 10 and 11 would both be suspended; job 12 alone
        // frees the 4 cores the urgent job needs where it may run.
        let mut base = view([3, 2, 4, 8], vec![], vec![]);
        for n in &mut base.nodes {
            n.free_cpus = 0;
        }
        base.active = Arc::new(vec![
            running(10, 0, vec![(0, 3), (3, 4)], 900),
            running(11, 0, vec![(1, 2), (3, 4)], 900),
            running(12, 0, vec![(2, 4)], 900),
        ]);
        queue_urgent(&mut base, vec![0, 1, 2]);
        let d = PREEMPT.decide(&base);
        assert_eq!(
            d.list,
            [
                Decision::Suspend(12),
                Decision::Start {
                    job: 1,
                    alloc: vec![(2, 4)]
                }
            ]
        );
    }

    #[test]
    fn preempted_jobs_resume_when_their_cores_are_free_oldest_first() {
        let mut v = view([4, 0, 4, 0], vec![], vec![]);
        let mut a = running(12, 0, vec![(1, 4)], 900);
        a.state = ActiveState::Suspended;
        a.since_ns = 50 * S;
        let mut b = running(13, 0, vec![(0, 4)], 900);
        b.state = ActiveState::Suspended;
        b.since_ns = 40 * S;
        v.active = Arc::new(vec![a, b]);
        // Node 1 is busy (its preemptor still runs), node 0 free: only job
        // 13 can resume; a pending job may then use node 2, not node 0.
        v.queue = Arc::new(vec![job(1, 4, 10)]);
        let d = FCFS.decide(&v);
        assert_eq!(
            d.list,
            [
                Decision::Resume(13),
                Decision::Start {
                    job: 1,
                    alloc: vec![(2, 4)]
                }
            ]
        );
    }

    fn in_state(mut a: Active, state: ActiveState, since_s: i64) -> Active {
        a.state = state;
        a.since_ns = since_s * S;
        if state != ActiveState::Running {
            a.expected_end_ns = i64::MAX;
        }
        a
    }

    const PREEMPT: Standard = Standard {
        base: Base::Fcfs,
        preemption: true,
    };

    #[test]
    fn preemption_spares_victims_it_can_do_without() {
        // Node 0 has 1 free core. Job 11 (low, 9 cores) holds 1 core of
        // node 0 and two other nodes; job 12 (low) holds node 1. A 4-core
        // urgent job limited to nodes 0-1 needs only job 12 gone.
        let mut v = view([1, 0, 0, 0], vec![], vec![]);
        Arc::make_mut(&mut v.partitions).push(PartitionView {
            nodes: vec![0, 1],
            priority: 10,
            gang: None,
        });
        Arc::make_mut(&mut v.partitions)[0].priority = 1;
        v.active = Arc::new(vec![
            running(10, 1, vec![(0, 3)], 900),
            running(11, 0, vec![(0, 0), (2, 4), (3, 4)], 900),
            running(12, 0, vec![(1, 4)], 900),
        ]);
        Arc::make_mut(&mut v.active)[1].alloc = vec![(0, 1), (2, 4), (3, 4)];
        Arc::make_mut(&mut v.active)[1].cores = 9;
        v.nodes[0].free_cpus = 1;
        let mut urgent = job(1, 4, 10);
        urgent.partition = 1;
        v.queue = Arc::new(vec![urgent]);
        let d = PREEMPT.decide(&v);
        assert_eq!(
            d.list,
            [
                Decision::Suspend(12),
                Decision::Start {
                    job: 1,
                    alloc: vec![(0, 1), (1, 3)]
                }
            ]
        );
    }

    #[test]
    fn jobs_being_cancelled_are_not_victims() {
        let mut v = view([0, 0, 0, 0], vec![], vec![]);
        Arc::make_mut(&mut v.partitions).push(PartitionView {
            nodes: vec![0, 1, 2, 3],
            priority: 10,
            gang: None,
        });
        v.active = Arc::new(vec![in_state(
            running(10, 0, vec![(0, 4), (1, 4), (2, 4), (3, 4)], 900),
            ActiveState::Ending,
            90,
        )]);
        let mut urgent = job(1, 4, 10);
        urgent.partition = 1;
        v.queue = Arc::new(vec![urgent]);
        assert!(PREEMPT.decide(&v).list.is_empty());
    }

    #[test]
    fn a_job_suspended_on_a_drained_node_resumes() {
        let mut v = view([4, 4, 4, 4], vec![], vec![]);
        v.nodes[0].usable = false;
        v.active = Arc::new(vec![in_state(
            running(10, 0, vec![(0, 4)], 900),
            ActiveState::Suspended,
            50,
        )]);
        assert_eq!(PREEMPT.decide(&v).list, [Decision::Resume(10)]);
    }

    #[test]
    fn easy_counts_jobs_resumed_in_the_same_pass_as_releases() {
        // Job 10 (8 cores, 200 s left) resumes on nodes 0-1; job 11 ends at
        // 200 s. The 16-core head can start at 300 s (100 s + 200 s), when
        // both have released: a 4-core job of 900 s on node 3 would delay
        // it and must not be backfilled.
        let mut v = view([4, 4, 0, 4], vec![], vec![]);
        let mut suspended = in_state(
            running(10, 0, vec![(0, 4), (1, 4)], 0),
            ActiveState::Suspended,
            50,
        );
        suspended.remaining_ns = 200 * S;
        v.active = Arc::new(vec![suspended, running(11, 0, vec![(2, 4)], 200)]);
        v.queue = Arc::new(vec![job(1, 16, 500), job(2, 4, 900)]);
        assert_eq!(EASY.decide(&v).list, [Decision::Resume(10)]);
    }

    #[test]
    fn no_start_beyond_k_jobs_per_core() {
        // K = 2 on 3 nodes of 4 cores. Node 0 holds two suspended jobs: it
        // has free cores but no free slot; nothing may start there.
        let mut v = view([4, 0, 0, 4], vec![], vec![]);
        v.nodes.truncate(3);
        for n in &mut v.nodes {
            n.free_slots = 0;
        }
        Arc::make_mut(&mut v.partitions)[0] = PartitionView {
            nodes: vec![0, 1, 2],
            priority: 0,
            gang: Some(Gang {
                oversubscribe: 2,
                slice_ns: 30 * S,
            }),
        };
        v.active = Arc::new(vec![
            in_state(
                running(10, 0, vec![(0, 4), (2, 4)], 0),
                ActiveState::Suspended,
                50,
            ),
            in_state(
                running(11, 0, vec![(0, 4), (1, 4)], 0),
                ActiveState::Suspended,
                60,
            ),
            in_state(running(12, 0, vec![(1, 4)], 900), ActiveState::Running, 90),
            in_state(running(13, 0, vec![(2, 4)], 900), ActiveState::Running, 95),
        ]);
        v.queue = Arc::new(vec![job(1, 4, 10)]);
        for policy in [FCFS, EASY] {
            let d = policy.decide(&v);
            assert!(
                !d.list.iter().any(|x| matches!(x, Decision::Start { .. })),
                "{d:?}"
            );
        }
    }

    fn gang_view(slice_s: i64) -> View {
        let mut v = view([4, 4, 4, 4], vec![], vec![]);
        v.nodes.truncate(1);
        v.nodes[0].free_slots = 8;
        Arc::make_mut(&mut v.partitions)[0] = PartitionView {
            nodes: vec![0],
            priority: 0,
            gang: Some(Gang {
                oversubscribe: 2,
                slice_ns: slice_s * S,
            }),
        };
        v
    }

    #[test]
    fn gang_rotation_every_slice() {
        // One 4-core node, two 4-core jobs time-sliced every 30 s.
        let mut v = gang_view(30);
        let mut a = running(1, 0, vec![(0, 4)], 900);
        a.since_ns = 80 * S;
        let mut b = running(2, 0, vec![(0, 4)], 900);
        b.state = ActiveState::Suspended;
        b.since_ns = 80 * S;
        v.nodes[0].free_cpus = 0;
        v.nodes[0].free_slots = 0;
        v.active = Arc::new(vec![a.clone(), b.clone()]);
        // 20 s into job 1's slice: nothing to do; ask again at 110 s.
        let d = FCFS.decide(&v);
        assert!(d.list.is_empty(), "{d:?}");
        assert_eq!(d.wake_at_ns, Some(110 * S));
        // At 110 s the slice is over: job 1 is suspended, then job 2
        // resumes on its cores (in that order, or the resume would
        // overbook them).
        v.now_ns = 110 * S;
        let d = FCFS.decide(&v);
        assert_eq!(d.list, [Decision::Suspend(1), Decision::Resume(2)]);
    }

    #[test]
    fn gang_starts_a_new_job_in_turn_and_respects_the_oversubscription() {
        let mut v = gang_view(30);
        v.now_ns = 200 * S;
        let mut a = running(1, 0, vec![(0, 4)], 900);
        a.since_ns = 100 * S;
        v.nodes[0].free_cpus = 0;
        v.nodes[0].free_slots = 4; // K = 2: room for one more 4-core job
        v.active = Arc::new(vec![a]);
        v.queue = Arc::new(vec![
            Queued {
                submit_ns: 150 * S,
                ..job(5, 4, 100)
            },
            Queued {
                submit_ns: 160 * S,
                ..job(6, 4, 100)
            },
        ]);
        let d = FCFS.decide(&v);
        // Job 5 takes job 1's turn; job 6 has no slot (K = 2) and waits.
        assert_eq!(
            d.list,
            [
                Decision::Suspend(1),
                Decision::Start {
                    job: 5,
                    alloc: vec![(0, 4)]
                },
            ]
        );
        assert!(d.wake_at_ns.is_some());
    }

    /// Property over many generated views: whatever the policy decides
    /// never gives a node more cores or memory than it has free, places
    /// each job once, with exactly its cores.
    #[test]
    fn never_overbooked() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..2000 {
            let n = 1 + rnd(12) as usize;
            let nodes: Vec<NodeView> = (0..n)
                .map(|_| {
                    let f = rnd(17) as u32;
                    NodeView {
                        cpus: 16,
                        free_cpus: f,
                        free_mem_mb: rnd(64_000),
                        free_slots: f,
                        usable: rnd(5) != 0,
                    }
                })
                .collect();
            let queue: Vec<Queued> = (0..rnd(30))
                .map(|j| Queued {
                    job: j,
                    partition: rnd(2) as usize,
                    cores: 1 + rnd(40) as u32,
                    mem_per_cpu_mb: rnd(3) * 1000,
                    estimate_ns: rnd(1000) * S as u64,
                    submit_ns: j as i64,
                })
                .collect();
            let v = View {
                now_ns: 10 * S,
                partitions: Arc::new(vec![
                    PartitionView {
                        nodes: (0..n).collect(),
                        priority: 0,
                        gang: None,
                    },
                    PartitionView {
                        nodes: (0..n).filter(|i| i % 2 == 0).collect(),
                        priority: 0,
                        gang: None,
                    },
                ]),
                nodes,
                queue: Arc::new(queue),
                active: Arc::default(),
            };
            for policy in [FCFS, EASY] {
                let d = policy.decide(&v);
                let mut cpus: Vec<u64> = vec![0; n];
                let mut mem: Vec<u64> = vec![0; n];
                let mut seen = HashSet::new();
                for x in &d.list {
                    let Decision::Start { job, alloc } = x else {
                        panic!("unexpected {x:?}");
                    };
                    assert!(seen.insert(*job), "job {job} placed twice");
                    let q = v.queue.iter().find(|q| q.job == *job).unwrap();
                    let total: u32 = alloc.iter().map(|(_, c)| c).sum();
                    assert_eq!(total, q.cores);
                    for &(node, c) in alloc {
                        assert!(v.partitions[q.partition].nodes.contains(&node));
                        assert!(v.nodes[node].usable);
                        cpus[node] += u64::from(c);
                        mem[node] += u64::from(c) * q.mem_per_cpu_mb;
                    }
                }
                for i in 0..n {
                    assert!(
                        cpus[i] <= u64::from(v.nodes[i].free_cpus),
                        "cpus overbooked on {i}"
                    );
                    assert!(mem[i] <= v.nodes[i].free_mem_mb, "memory overbooked on {i}");
                }
            }
        }
    }
}
