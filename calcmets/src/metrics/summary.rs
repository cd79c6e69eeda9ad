//! What the metrics of one run come to: the figures [`Accum::finish`]
//! prints, as docs/design.md names them.
//!
//! [`Accum::finish`]: super::Accum::finish

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Damage, ExcludedBy, NS, RATIO};
use crate::clock::{Clock, ClockKind};
use crate::dist::Dist;

/// Mean and nearest-rank percentiles, in seconds or as plain ratios.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

fn scaled(d: &mut Dist, unit: f64) -> Stats {
    match d.quantiles() {
        None => Stats {
            mean: None,
            p50: None,
            p95: None,
            p99: None,
            max: None,
        },
        Some(q) => Stats {
            mean: Some(q.mean / unit),
            p50: Some(q.p50 as f64 / unit),
            p95: Some(q.p95 as f64 / unit),
            p99: Some(q.p99 as f64 / unit),
            max: Some(q.max as f64 / unit),
        },
    }
}

impl Stats {
    /// Every figure × `k`: durations from one clock to another.
    fn times(self, k: f64) -> Stats {
        let f = |v: Option<f64>| v.map(|v| v * k);
        Stats {
            mean: f(self.mean),
            p50: f(self.p50),
            p95: f(self.p95),
            p99: f(self.p99),
            max: f(self.max),
        }
    }
}

pub(super) fn seconds(d: &mut Dist) -> Stats {
    scaled(d, NS)
}

pub(super) fn ratios(d: &mut Dist) -> Stats {
    scaled(d, RATIO)
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Skipped {
    /// Record frames that could not be read, by kind.
    #[serde(flatten)]
    pub damage: Damage,
    /// Jobs read but not counted: their status, r ≤ 0, no cores, or not
    /// of the run.
    pub excluded: u64,
    /// `excluded` by reason.
    pub excluded_by: ExcludedBy,
}

/// Cancelled jobs: those of a run (a record with status `cancelled`, or,
/// in a results directory, a job `jobs.csv` says was cancelled before it
/// started) or of a trace (status 5; started if it has run time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CancelledJobs {
    pub jobs: u64,
    pub before_start: u64,
    pub while_running: u64,
}

/// The metrics of one run, with exactly the keys of docs/design.md
/// ("calcmets --format json"), plus `by_size` when asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The clock every time below is in: `trace` (the workload's seconds)
    /// or `wall` (the records' own).
    pub clock: ClockKind,
    pub jobs: u64,
    pub cores: Option<u64>,
    pub tau: f64,
    pub window: Option<[f64; 2]>,
    pub makespan: Option<f64>,
    pub wait: Stats,
    pub response: Stats,
    pub slowdown: Stats,
    pub bounded_slowdown: Stats,
    pub weighted_slowdown: Option<f64>,
    pub utilization: Option<f64>,
    pub suspended_jobs: u64,
    pub suspensions: u64,
    pub suspended_time: f64,
    /// Cancelled jobs, apart from the metrics (which count completed jobs
    /// only, unless `--status all`).
    pub cancelled: CancelledJobs,
    pub skipped: Skipped,
    /// Whether the percentiles came from the histogram (more than 65,536
    /// jobs): within 0.1 % of the exact values. Not printed in JSON.
    #[serde(skip)]
    pub approximate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_size: Option<Vec<SizeClass>>,
    /// Each generic resource's devices and utilization, for a cluster
    /// that has them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, ResourceUse>,
}

impl Summary {
    /// The same figures in `clock` (they are computed in the records'
    /// own), with τ as that clock gives it: durations scaled, the window's
    /// instants mapped; ratios (slowdowns, utilization) are the same in
    /// any clock.
    pub fn in_clock(mut self, clock: &Clock, tau_s: f64) -> Summary {
        let k = clock.scale;
        let instant = |s: f64| clock.to_s + (s - clock.from_ns as f64 / NS) * k;
        self.clock = clock.kind;
        self.tau = tau_s;
        self.window = self.window.map(|[a, b]| [instant(a), instant(b)]);
        self.makespan = self.makespan.map(|m| m * k);
        self.wait = self.wait.times(k);
        self.response = self.response.times(k);
        self.suspended_time *= k;
        self.by_size = self.by_size.map(|classes| {
            classes
                .into_iter()
                .map(|c| SizeClass {
                    summary: c.summary.in_clock(clock, tau_s),
                    ..c
                })
                .collect()
        });
        self
    }
}

/// How much of one generic resource the jobs used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResourceUse {
    /// The cluster's devices of it; `None` when not known.
    pub devices: Option<u64>,
    /// Σ d·r / (D·(t1 − t0)); `None` without the device count.
    pub utilization: Option<f64>,
}

/// The metrics of the jobs of one size class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeClass {
    pub class: String,
    pub min_cores: u64,
    pub max_cores: u64,
    #[serde(flatten)]
    pub summary: Summary,
}
