//! Where a replay's jobs run: one [`Backend`] trait, one implementation
//! per kind of cluster. [`clemu::Clemu`] is the emulated cluster (started
//! here, or a running one reached with `--controller`), [`twin::Twin`] the
//! virtual-time twin (`--simulate`), [`slurm::Slurm`] a running Slurm
//! cluster (`--backend slurm`). Each submits a run's jobs at their
//! deadlines, waits until they are over, leaves their records in the
//! run's `records/` and says what happened ([`Ran`]); `crate::run` does
//! the rest, the same for all.

pub mod clemu;
pub mod slurm;
pub mod twin;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use formats::wire::{JobInfo, JobSpec, JobState};
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::trace::Slice;
use crate::Plan;

/// One run's jobs, ready to submit.
pub struct Jobs<'a> {
    /// The run's name (`shrink-050`).
    pub label: &'a str,
    pub factor: f64,
    /// Inter-arrival times were divided by this.
    pub load: f64,
    /// Which replica of its point this run is (`None`: run once).
    pub replica: Option<u32>,
    /// Each job's submission offset from the run's start, ns.
    pub targets: &'a [i64],
    /// Each job as submitted (times scaled).
    pub specs: &'a [JobSpec],
    /// Job indices in submission order, of the jobs submitted at a
    /// deadline.
    pub order: &'a [usize],
    /// For each job, the job it follows (`--feedback`): it is submitted
    /// with that one, to wait for its end plus its think time
    /// (`JobSpec::after`, `think_ns`), and is in no `order`.
    pub after: &'a [Option<usize>],
    /// The run's other orders, in the order they are due.
    pub timed: &'a [Timed],
    /// The cluster as this run has it: the config's policy durations,
    /// given in trace seconds, scaled as the trace is ([`crate::run`]).
    pub config: &'a controller::config::Cluster,
}

impl Jobs<'_> {
    /// The run's progress, as the plan says to show it.
    pub fn progress(&self, plan: &Plan) -> crate::progress::Progress {
        let what = format!(
            "factor {} %, load {} %",
            self.factor * 100.0,
            self.load * 100.0
        );
        let last_due = self.targets.iter().copied().max().unwrap_or(0).max(0) as u64;
        crate::progress::Progress::new(
            plan.progress,
            self.label,
            &what,
            self.specs.len() as u64,
            LEAD + Duration::from_nanos(last_due),
        )
    }
}

/// An order a replay gives at an instant of its own, besides submitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Cancel job `i` of the slice, as the trace's user did.
    Cancel(usize),
    /// Apply event `k` of the plan (`Plan::events`).
    Event(usize),
}

/// An order and when it is due: ns from the run's start, as
/// [`Jobs::targets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    pub at: i64,
    pub order: Order,
}

/// What a backend tells of a run, for its results directory.
pub struct Ran {
    /// The cluster's id for each job; 0 for one never submitted.
    pub ids: Vec<u64>,
    /// When each job was sent, Unix ns.
    pub actual: Vec<i64>,
    /// What the cluster knows of each submitted job, by id.
    pub infos: HashMap<u64, JobInfo>,
    /// Unix ns: the first deadline, and the end of the run.
    pub started_wall: i64,
    pub ended_wall: i64,
    /// When the run, interrupted, began cancelling its jobs (Unix ns of
    /// its clock): the jobs cancelled from then on were cancelled by the
    /// interruption, not by the trace. `None`: not interrupted.
    pub interrupted_at: Option<i64>,
    /// The cluster's total cores.
    pub cores: u64,
    /// With Slurm, the id Slurm gave each job.
    pub slurm_ids: Option<Vec<u64>>,
    /// The policy's figures (an external scheduler's reply latency).
    pub scheduler: Option<formats::scheduler::SchedulerReport>,
    /// Why the policy stopped deciding, if it did: the jobs it had not
    /// started were cancelled, those it had ran to their end.
    pub failure: Option<String>,
    /// What each event of the plan did, by its number.
    pub events: Vec<Applied>,
    /// The twin's: how far its schedule hangs on ties.
    pub ties: Option<formats::results::Ties>,
}

/// An event as it was applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// When, Unix ns; 0 if it never was (the jobs were all over first).
    pub at: i64,
    /// The cluster's ids of the jobs it hit (killed by a failed node, or
    /// cancelled).
    pub jobs: Vec<u64>,
    /// Why the cluster refused it.
    pub error: Option<String>,
}

/// A kind of cluster a replay can run on.
pub trait Backend: Send + Sync {
    /// The manifest's `mode`: `emulated` or `simulated`.
    fn mode(&self) -> &'static str;
    /// The manifest's `backend`: `clemu` or `slurm`.
    fn name(&self) -> &'static str;
    /// The manifest's `controller`: what was driven.
    fn controller(&self) -> String;
    /// Whether jobs run `sigsleep` on this host (it must be there).
    fn runs_sigsleep_here(&self) -> bool;
    /// Whether the run is in virtual time (the twin: no process, no wall
    /// clock of its own).
    fn virtual_time(&self) -> bool {
        false
    }
    /// Whether the cluster runs this run's config ([`Jobs::config`], with
    /// its policy durations scaled); false for one started elsewhere, which
    /// keeps its own, in wall-clock seconds.
    fn runs_scaled_config(&self) -> bool {
        true
    }
    /// Runs the jobs, leaving their records in `dir/records`; stops early
    /// (cancelling what runs, `Ran::interrupted`) when `stop` fires.
    fn run<'a>(
        &'a self,
        plan: &'a Plan,
        jobs: &'a Jobs<'a>,
        dir: &'a Path,
        stop: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Ran>>;
}

/// Time between taking the start instant and the first deadline, so that
/// the first jobs are not late by the set-up of the loop itself.
pub(crate) const LEAD: Duration = Duration::from_millis(200);
/// How long before its deadline the emulation's replay sends a job, to
/// begin at the deadline: as far ahead as the controller prepares the
/// processes of a coming pass.
pub(crate) const SEND_AHEAD: Duration = Duration::from_millis(100);
/// The submitter sleeps to this much before a deadline, then yields until
/// it: tokio's timer has millisecond granularity.
pub(crate) const SPIN: Duration = Duration::from_millis(2);

/// CLOCK_REALTIME nanoseconds now.
pub(crate) fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The instant `offset` ns from `start` (before it if negative: a job
/// sent ahead of the first deadline).
pub(crate) fn at(start: Instant, offset: i64) -> Instant {
    if offset >= 0 {
        start + Duration::from_nanos(offset as u64)
    } else {
        start
            .checked_sub(Duration::from_nanos(offset.unsigned_abs()))
            .unwrap_or(start)
    }
}

/// The jobs (indices into the slice), in submission order from `*next`
/// on, whose deadline has come by `now`; `*next` moves past them.
pub(crate) fn due_jobs(
    order: &[usize],
    targets: &[i64],
    start: Instant,
    now: Instant,
    next: &mut usize,
) -> Vec<usize> {
    let mut batch = Vec::new();
    while *next < order.len() && at(start, targets[order[*next]]) <= now {
        batch.push(order[*next]);
        *next += 1;
    }
    batch
}

/// The timed orders from `*next` on that are due by `now`; `*next` moves
/// past them.
pub(crate) fn due_orders<'t>(
    timed: &'t [Timed],
    start: Instant,
    now: Instant,
    next: &mut usize,
) -> &'t [Timed] {
    let from = *next;
    while *next < timed.len() && at(start, timed[*next].at) <= now {
        *next += 1;
    }
    &timed[from..*next]
}

/// The offset of what comes due next: the next submission (`order`
/// from `submitted` on), due when `sends` says, or the next timed order
/// (from `done` on).
pub(crate) fn next_due(
    jobs: &Jobs<'_>,
    sends: &[i64],
    submitted: usize,
    done: usize,
) -> Option<i64> {
    let submit = jobs.order.get(submitted).map(|&i| sends[i]);
    let timed = jobs.timed.get(done).map(|t| t.at);
    submit.into_iter().chain(timed).min()
}

/// For each job, the jobs that follow it (`Jobs::after`).
pub(crate) fn followers(after: &[Option<usize>]) -> Vec<Vec<usize>> {
    let mut f = vec![Vec::new(); after.len()];
    for (i, a) in after.iter().enumerate() {
        if let Some(p) = *a {
            f[p].push(i);
        }
    }
    f
}

/// The trace jobs `batch` (indices into the slice) replay, for messages:
/// "trace job 4515 (line 20) of T", or the first few of several.
pub(crate) fn trace_jobs(slice: &Slice, batch: &[usize], trace: &Path) -> String {
    let jobs = &slice.jobs;
    let named: Vec<String> = batch
        .iter()
        .take(3)
        .map(|&i| {
            format!(
                "{} ({})",
                jobs[i].trace_id,
                crate::trace::place(slice.format, &jobs[i])
            )
        })
        .collect();
    let more = match batch.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    let noun = if batch.len() == 1 { "job" } else { "jobs" };
    format!(
        "trace {noun} {}{more} of {}",
        named.join(", "),
        trace.display()
    )
}

/// A finished job as its record tells it (the twin and Slurm have no
/// controller to ask).
pub(crate) fn info_of(r: &formats::record::JobRecord<'_>, nodes: String) -> JobInfo {
    let state = JobState::of_record(r.status, r.flags);
    JobInfo {
        id: r.id,
        name: String::new(),
        state,
        partition: String::new(),
        cores: r.cores,
        nodes,
        submit_ns: r.submit,
        start_ns: r.start,
        end_ns: r.end,
        runtime_ns: r.runtime,
        walltime_ns: r.walltime,
        reason: String::new(),
        suspensions: r
            .suspensions
            .iter()
            .map(|s| (s.suspend, s.resume))
            .collect(),
        array: None,
        gres: None,
        mem_per_cpu_mb: 0,
        exit: (0, 0),
        program: None,
        restarts: 0,
        completing: false,
    }
}
