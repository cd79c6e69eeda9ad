//! Scheduling policies: pure functions from a [`View`] of the cluster to
//! [`Decisions`] (start a job on these cores, suspend, resume, cancel). No
//! I/O, no clock, no hidden state (the buffers `spare.rs` keeps between
//! passes are memory, not state: no decision depends on them): the
//! emulation and the virtual-time simulation ([`crate::sim`]) run the very
//! same code, and tests build views by hand.
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
//! own in this folder with a `pub const ENTRY: Entry` naming it, and add
//! its module's name to the `policies![...]` list below ([`ALL`]): one file
//! and one line. `sjf.rs` (`policy = "sjf"`) is a complete example, with
//! its test.
//!
//! # The files
//!
//! - this file: what a policy sees and decides, and the list of policies;
//! - `fcfs.rs`, `easy.rs`: the two bases of the built-in policy, with the
//!   entries that name them; `standard.rs`: the built-in policy, which
//!   runs, each pass, `gang.rs` (gang time-slicing), `preempt.rs`
//!   (preemption, and resumption) and a base;
//! - `sjf.rs`: shortest job first, a policy of its own;
//! - `alloc.rs`: [`Free`], the free resources during a pass, and first-fit
//!   placement, which every policy shares; `spare.rs`: the buffers the
//!   size of the cluster that passes reuse.
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
//! 2. **preemption** (Slurm's `preempt/partition_prio` with `PreemptMode`
//!    `SUSPEND`, `CANCEL` or `REQUEUE`): a pending job that does not fit
//!    suspends, cancels or requeues just enough jobs of lower-priority
//!    partitions (fewest and lowest-priority first) on the nodes it needs;
//!    suspended ones keep their memory and it starts at once, ended ones
//!    are waited for;
//! 3. **resumption**: jobs the policy suspended resume, highest partition
//!    priority then oldest suspension first, as soon as their cores are
//!    free again; the first that cannot keeps its nodes reserved;
//! 4. the **base policy** for what is left of the queue: [`Base::Fcfs`]
//!    (strict first come, first served) or [`Base::Easy`] (EASY
//!    backfilling).
//!
//! Placement is first fit over a partition's usable nodes: a job of `c`
//! cores takes whatever free cores (and the memory they need) nodes have,
//! in node order, until it has `c`, on nodes that have the generic
//! resources it asks of each node free. In a partition with `contiguous =
//! true` it takes the first run of consecutive nodes that together have
//! `c` free cores.

use std::sync::Arc;

use crate::gres::Counts;

mod alloc;
mod easy;
mod fcfs;
pub mod forecast;
mod gang;
mod preempt;
pub(crate) mod spare;
mod standard;

/// Declares each policy's module and lists its `ENTRY` in [`ALL`], after
/// the built-in policy's two bases (`fcfs` and `easy`, whose modules hold
/// only their algorithms).
macro_rules! policies {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every policy a config can name (`[controller] policy`), in the
        /// order `controller policies` lists them.
        pub const ALL: &[&Entry] = &[&standard::FCFS, &standard::EASY, $(&$module::ENTRY),*];
    };
}

// The list of policies: a new one is a file in this folder with a
// `pub const ENTRY`, and its module's name here.
policies![sjf, batsim];

pub use alloc::Free;
pub use sjf::ShortestFirst;
pub use standard::{Base, Standard};

pub struct Entry {
    /// The value of `[controller] policy`.
    pub name: &'static str,
    pub about: &'static str,
    /// Whether it carries out preemption and gang time-slicing; a config
    /// that asks for them with a policy that does not is refused.
    pub suspends: bool,
    pub make: fn(&Settings) -> Box<dyn Policy>,
}

/// What a policy is made with, from the cluster's config. (The policy
/// module knows nothing else of configs: they depend on it, not it on
/// them.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `[controller] preemption`: what jobs of higher-priority partitions
    /// do to lower-priority ones in their way.
    pub preemption: Preemption,
    /// The `[batsim]` section, for `policy = "batsim"`.
    pub batsim: Option<crate::batsim::Settings>,
    /// Whether the policy runs in real time (the emulation) or in virtual
    /// time (the twin).
    pub realtime: bool,
}

/// Every policy a configuration can name, in [`ALL`]'s order.
pub fn all() -> impl Iterator<Item = &'static Entry> {
    ALL.iter().copied()
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
    /// Devices of each generic resource not held by any job, running or
    /// suspended ([`crate::gres`]).
    pub free_gres: Counts,
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
    /// A job's nodes must be consecutive in node order (no gap), and it
    /// takes the first such run that fits.
    pub contiguous: bool,
}

/// A pending job, in queue order.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Devices of each generic resource it needs on every node it gets.
    pub gres: Counts,
    /// How many nodes it spans (`JobSpec::nodes`); `None`: as many as
    /// its cores need.
    pub nodes: Option<Span>,
    /// Nodes it names (Slurm's `-w` and `-x`); `None`: its partition's,
    /// any of them. Shared: the queue's copy of a job is made often.
    pub within: Option<Arc<Within>>,
}

/// The nodes a job names, by index: those it must have, each (`-w`), and
/// those it must not (`-x`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Within {
    /// In the configuration's order.
    pub required: Vec<usize>,
    /// A bit set over node indices (as long as the node count's words, or
    /// empty for none).
    pub excluded: Vec<u64>,
}

impl Within {
    /// Whether node `n` is one it must not have.
    pub fn excludes(&self, n: usize) -> bool {
        self.excluded
            .get(n / 64)
            .is_some_and(|w| w & (1 << (n % 64)) != 0)
    }

    /// Word `w` of the excluded set.
    pub fn excluded_word(&self, w: usize) -> u64 {
        self.excluded.get(w).copied().unwrap_or(0)
    }
}

/// The nodes a job asks to span, and the cores of each of its tasks,
/// which go whole on one node each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// 0: no node count asked (the job is packed on as few nodes as hold
    /// it), only whole tasks.
    pub least: u32,
    /// 0: no most.
    pub most: u32,
    /// Cores per task (at least 1).
    pub task_cores: u32,
    /// Its tasks dealt evenly over its nodes (Slurm's
    /// `--ntasks-per-node`), rather than the first node filled first.
    pub even: bool,
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
    /// As `Ending`, told to end while a policy had it suspended: its cores
    /// were free already, so its end gives back only its memory and
    /// devices.
    EndingSuspended,
    /// Its agent is gone for now (it may come back and report the job):
    /// policies leave it alone.
    Unreachable,
}

/// The cores a job holds on each of its nodes, (node, cores), in node
/// order.
pub type Alloc = Arc<Vec<(usize, u32)>>;

/// The allocation of a job that holds nothing: one for all such jobs (a
/// million queued jobs would otherwise hold a million empty lists).
pub fn no_alloc() -> Alloc {
    static NONE: std::sync::OnceLock<Alloc> = std::sync::OnceLock::new();
    Arc::clone(NONE.get_or_init(Alloc::default))
}

/// A job holding resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    pub job: u64,
    pub partition: usize,
    pub cores: u32,
    pub mem_per_cpu_mb: u64,
    /// (node, cores): shared with the controller's own record of the job,
    /// so that the widest jobs' lists are not copied at their start.
    pub alloc: Alloc,
    /// The generic resources it holds on each of its nodes: what its end
    /// gives back besides cores (a preemption that ends a victim for its
    /// GPUs counts them).
    pub gres: crate::gres::Counts,
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
    /// What happened since the last pass, oldest first: kept only for a
    /// policy that asks for it ([`Policy::wants_events`]), such as one
    /// that relays events to an external scheduler.
    pub happened: Vec<Happened>,
}

impl View {
    /// Whether `q` names a node that is drained or down: it waits for
    /// that node, out of the queue's order (Slurm's `ReqNodeNotAvail`),
    /// and blocks no job behind it.
    pub fn waits_for_nodes(&self, q: &Queued) -> bool {
        q.within.as_deref().is_some_and(|w| {
            w.required
                .iter()
                .any(|&n| self.nodes.get(n).is_none_or(|node| !node.usable))
        })
    }

    /// Done with this view: its list of nodes is kept for the next one
    /// (`spare.rs`), rather than given back to the system and faulted in
    /// again.
    pub fn done(mut self) {
        spare::give_node_views(std::mem::take(&mut self.nodes));
    }

    /// The time-slicing of `partition`, if it time-slices (more than one
    /// job per core).
    pub fn time_slicing(&self, partition: usize) -> Option<Gang> {
        self.partitions[partition]
            .gang
            .filter(|g| g.oversubscribe > 1)
    }
}

/// A change of a job, as an event-driven scheduler hears of it. Times on
/// the view's clock (`now_ns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    Submitted {
        job: u64,
        at_ns: i64,
        cores: u32,
        /// 0: no limit.
        walltime_ns: u64,
        /// What its sigsleep sleeps.
        runtime_ns: u64,
    },
    Suspended {
        job: u64,
        at_ns: i64,
    },
    Resumed {
        job: u64,
        at_ns: i64,
    },
    /// Over, started or not (a pending job cancelled ends too).
    Ended {
        job: u64,
        at_ns: i64,
        state: formats::wire::JobState,
    },
    /// Nothing more will be submitted.
    NoMoreJobs {
        at_ns: i64,
    },
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
    /// End a running job for a higher-priority one: requeued if `requeue`
    /// and the job may be, else cancelled, ending preempted. Its cores
    /// free only once its process is gone.
    Preempt {
        job: u64,
        requeue: bool,
    },
}

/// What a pending job of a higher-priority partition does to the
/// lower-priority jobs holding the cores it needs (Slurm's `PreemptMode`
/// under `preempt/partition_prio`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Preemption {
    /// Nothing: it waits.
    #[default]
    Off,
    /// Suspends them and starts at once on their cores; they resume when
    /// cores free up.
    Suspend,
    /// Cancels them (they end preempted) and starts once they are gone.
    Cancel,
    /// Requeues them (cancelled, when a job may not be requeued) and
    /// starts once they are gone.
    Requeue,
}

impl Preemption {
    /// The names a config gives, in order.
    pub const NAMES: [(&'static str, Preemption); 4] = [
        ("off", Preemption::Off),
        ("suspend", Preemption::Suspend),
        ("cancel", Preemption::Cancel),
        ("requeue", Preemption::Requeue),
    ];

    pub fn parse(s: &str) -> Option<Preemption> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|&(_, p)| p)
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("off", |(n, _)| n)
    }

    /// Whether a job in the way ends (rather than being suspended).
    pub fn ends_victims(self) -> bool {
        matches!(self, Preemption::Cancel | Preemption::Requeue)
    }
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

    /// Whether it wants [`View::happened`] filled, and a pass after every
    /// change even when no job waits (an event-driven scheduler must hear
    /// of every end).
    fn wants_events(&self) -> bool {
        false
    }

    /// Whether `decide` may also be called on the cluster as it will be at
    /// the wake-up the policy asked for, its decisions only looked at:
    /// the emulation starts the processes of the jobs it would start then
    /// ahead, held, so a gang turn does not wait for process starts. A
    /// policy whose `decide` does more than decide (one that asks an
    /// external scheduler) says no.
    fn may_look_ahead(&self) -> bool {
        true
    }

    /// Why it can decide nothing more (an external scheduler that died),
    /// once that is so. The driver then stops asking it.
    fn failure(&self) -> Option<String> {
        None
    }

    /// The cluster refused some of its last decisions (why, for each):
    /// for a policy that keeps its own picture of the cluster (an external
    /// scheduler's), that picture is now wrong.
    fn refused(&self, _why: &[String]) {}

    /// Figures about the policy for the run's manifest (an external
    /// scheduler's reply latency).
    fn report(&self) -> Option<formats::scheduler::SchedulerReport> {
        None
    }
}

#[cfg(test)]
mod tests;
