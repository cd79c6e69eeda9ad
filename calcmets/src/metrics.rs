//! The metric definitions of docs/design.md, applied one job at a time.
//! [`Accum`] owns the running sums and distributions of one run (an
//! included job's values are counted with the next 255, see `Held`);
//! [`Accum::finish`] turns them into the [`Summary`] that is printed.
//!
//! For each included job i, with cores c, submit s, first start b, end e and
//! total suspended time z: run time r = e − b − z, wait w = b − s, response
//! R = e − s, slowdown R / r, bounded slowdown max(1, R / max(r, τ)),
//! weighted slowdown Σ c·R / Σ c·r, utilization Σ c·r / (C·(t1 − t0)) over
//! [t0, t1] = [min s, max e]. All sums are integers (nanoseconds, core·ns),
//! so results do not depend on the order in which jobs are read. A job that
//! held devices of a generic resource (d of them, over all its nodes)
//! counts d·r towards that resource's utilization Σ d·r / (D·(t1 − t0)),
//! D the cluster's devices of it: the same definition as for cores.

use std::collections::BTreeMap;

use formats::record::{Devices, Suspension};
use serde::Serialize;

use crate::dist::Dist;

mod summary;
pub use summary::*;

/// Ratios (slowdowns) are kept as integers in units of 1e-9.
const RATIO: f64 = 1e9;
const NS: f64 = 1e9;

/// What a run's metrics depend on besides its jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// τ of the bounded slowdown, in nanoseconds.
    pub tau_ns: i64,
    /// `--window T0:T1` in nanoseconds (the time base of the input).
    pub window: Option<(i64, i64)>,
    /// Whether to break the metrics down by job-size class.
    pub by_size: bool,
}

/// One job as the metrics see it, whether it came from a record or a trace.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    pub cores: u64,
    pub submit: i64,
    pub start: i64,
    pub end: i64,
    pub suspensions: &'a [Suspension],
    /// Devices of generic resources it held (a record's; none for a trace
    /// line).
    pub devices: &'a [Devices<'a>],
    /// `None` when its status lets it count (completed, for records);
    /// else why it does not.
    pub excluded_status: Option<Exclusion>,
    /// Whether it was cancelled (counted apart, whether it counts or not).
    pub cancelled: bool,
}

/// Why a job read is not counted. Counted per reason so that the user is
/// told what was left out and how to keep it (`--status all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    Cancelled,
    Failed,
    Timeout,
    /// A status other than the above (an SWF status code of its own).
    OtherStatus,
    /// r ≤ 0: no run time to measure a slowdown against.
    NoRunTime,
    /// No cores.
    NoCores,
    /// A record of a job that is not one of its results directory's jobs
    /// (not in `jobs.csv`, or started before the run began).
    NotInRun,
}

impl Exclusion {
    /// Its key in `skipped.excluded_by`, and its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Exclusion::Cancelled => "cancelled",
            Exclusion::Failed => "failed",
            Exclusion::Timeout => "timeout",
            Exclusion::OtherStatus => "other_status",
            Exclusion::NoRunTime => "no_run_time",
            Exclusion::NoCores => "no_cores",
            Exclusion::NotInRun => "not_in_run",
        }
    }

    /// Whether `--status all` would count such a job.
    pub fn is_status(self) -> bool {
        matches!(
            self,
            Exclusion::Cancelled | Exclusion::Failed | Exclusion::Timeout | Exclusion::OtherStatus
        )
    }
}

/// Jobs read but not counted, by [`Exclusion`]. Every reason is always
/// there, so that JSON and CSV have the same keys whatever the input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExcludedBy {
    pub cancelled: u64,
    pub failed: u64,
    pub timeout: u64,
    pub other_status: u64,
    pub no_run_time: u64,
    pub no_cores: u64,
    pub not_in_run: u64,
}

impl ExcludedBy {
    fn slot(&mut self, why: Exclusion) -> &mut u64 {
        match why {
            Exclusion::Cancelled => &mut self.cancelled,
            Exclusion::Failed => &mut self.failed,
            Exclusion::Timeout => &mut self.timeout,
            Exclusion::OtherStatus => &mut self.other_status,
            Exclusion::NoRunTime => &mut self.no_run_time,
            Exclusion::NoCores => &mut self.no_cores,
            Exclusion::NotInRun => &mut self.not_in_run,
        }
    }

    /// The reasons with their counts, in a fixed order.
    pub fn counts(&self) -> [(Exclusion, u64); 7] {
        [
            (Exclusion::Cancelled, self.cancelled),
            (Exclusion::Failed, self.failed),
            (Exclusion::Timeout, self.timeout),
            (Exclusion::OtherStatus, self.other_status),
            (Exclusion::NoRunTime, self.no_run_time),
            (Exclusion::NoCores, self.no_cores),
            (Exclusion::NotInRun, self.not_in_run),
        ]
    }

    pub fn total(&self) -> u64 {
        self.counts().iter().map(|(_, n)| n).sum()
    }

    fn merge(&mut self, other: &ExcludedBy) {
        for (why, n) in other.counts() {
            *self.slot(why) += n;
        }
    }
}

/// Frames of record files that could not be read, by kind (the kinds of
/// [`formats::record::DecodeStats`]; an SWF trace has none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Damage {
    /// Damaged frames: implausible length, CRC mismatch, undecodable
    /// payload, or a run of stray bytes.
    pub corrupt: u64,
    /// Frames cut short by the end of a file.
    pub torn: u64,
    /// Intact frames of a record version this build does not read.
    pub unsupported: u64,
}

/// One job's run time, wait, response and suspended time (ns).
#[derive(Clone, Copy)]
struct Times {
    r: i64,
    w: i64,
    resp: i64,
    z: i64,
}

/// Included jobs held back before their values are counted.
const HELD: usize = 256;

/// The times of included jobs whose values are not counted yet. Counting
/// them a batch at a time lets the slowdowns' divisions overlap, rather
/// than each wait for the one before, and hands each distribution its
/// values in one go.
#[derive(Clone)]
struct Held {
    len: usize,
    /// τ of the jobs held (one run has one τ).
    tau_ns: i64,
    cores: [u64; HELD],
    r: [i64; HELD],
    w: [i64; HELD],
    resp: [i64; HELD],
}

impl Default for Held {
    fn default() -> Self {
        Held {
            len: 0,
            tau_ns: 0,
            cores: [0; HELD],
            r: [0; HELD],
            w: [0; HELD],
            resp: [0; HELD],
        }
    }
}

/// The running state of one run (or of one size class of it).
#[derive(Clone)]
pub struct Accum {
    jobs: u64,
    /// Jobs read but not counted, and why.
    excluded: ExcludedBy,
    /// Boxed: an `Accum` moves between threads and into its size classes'
    /// map, and this is most of its size.
    held: Box<Held>,
    wait: Dist,
    response: Dist,
    /// Slowdowns of the jobs whose bounded slowdown differs (r < τ), and
    /// those bounded slowdowns; the jobs whose two are equal (most: r ≥ τ)
    /// count their value once, in `unbounded`, which both take in at the
    /// end.
    slowdown: Dist,
    bounded: Dist,
    unbounded: Dist,
    /// Σ c·r in core·ns.
    area: i128,
    /// Σ c·R in core·ns (numerator of the weighted slowdown).
    area_response: i128,
    /// Σ c·(executed time inside the window) in core·ns.
    window_area: i128,
    t0: i64,
    t1: i64,
    suspended_jobs: u64,
    suspensions: u64,
    suspended_ns: i128,
    cancelled: CancelledJobs,
    by_size: BTreeMap<u32, Accum>,
    /// Σ d·r (or d·(executed time inside the window)) in device·ns, by
    /// generic resource.
    device_area: BTreeMap<String, i128>,
    /// The cluster's devices of each generic resource, for their
    /// utilization (a manifest's, or `--resources`).
    capacities: BTreeMap<String, u64>,
}

impl Default for Accum {
    fn default() -> Accum {
        Accum {
            jobs: 0,
            excluded: ExcludedBy::default(),
            held: Box::default(),
            wait: Dist::default(),
            response: Dist::default(),
            slowdown: Dist::default(),
            bounded: Dist::default(),
            unbounded: Dist::default(),
            area: 0,
            area_response: 0,
            window_area: 0,
            // The empty fold of min/max, so the first job sets both.
            t0: i64::MAX,
            t1: i64::MIN,
            suspended_jobs: 0,
            suspensions: 0,
            suspended_ns: 0,
            cancelled: CancelledJobs::default(),
            by_size: BTreeMap::new(),
            device_area: BTreeMap::new(),
            capacities: BTreeMap::new(),
        }
    }
}

impl Accum {
    pub fn new() -> Accum {
        Accum::default()
    }

    /// Jobs included so far.
    pub fn jobs(&self) -> u64 {
        self.jobs
    }

    /// The cluster's devices of each generic resource: what their
    /// utilizations divide by.
    pub fn set_capacities(&mut self, capacities: BTreeMap<String, u64>) {
        self.capacities = capacities;
    }

    /// See [`Dist::to_histogram`]: for partial results that will be merged
    /// into a run of more than [`crate::dist::EXACT_LIMIT`] included jobs.
    /// (Size classes keep their exact values: each may stay under it.)
    pub fn to_histograms(&mut self) {
        for d in [
            &mut self.wait,
            &mut self.response,
            &mut self.slowdown,
            &mut self.bounded,
            &mut self.unbounded,
        ] {
            d.to_histogram();
        }
    }

    /// Takes in everything `other` has seen, as if its jobs had been added
    /// here: partial results of separate threads combine into one.
    pub fn merge(&mut self, mut other: Accum) {
        self.count_held();
        other.count_held();
        self.jobs += other.jobs;
        self.excluded.merge(&other.excluded);
        self.wait.merge(&other.wait);
        self.response.merge(&other.response);
        self.slowdown.merge(&other.slowdown);
        self.bounded.merge(&other.bounded);
        self.unbounded.merge(&other.unbounded);
        self.area += other.area;
        self.area_response += other.area_response;
        self.window_area += other.window_area;
        self.t0 = self.t0.min(other.t0);
        self.t1 = self.t1.max(other.t1);
        self.suspended_jobs += other.suspended_jobs;
        self.suspensions += other.suspensions;
        self.suspended_ns += other.suspended_ns;
        self.cancelled.jobs += other.cancelled.jobs;
        self.cancelled.before_start += other.cancelled.before_start;
        self.cancelled.while_running += other.cancelled.while_running;
        for (kind, a) in other.device_area {
            *self.device_area.entry(kind).or_default() += a;
        }
        for (k, acc) in other.by_size {
            self.by_size.entry(k).or_default().merge(acc);
        }
    }

    /// Adds one job: included, excluded, or (outside `--window`) ignored.
    #[inline]
    pub fn add(&mut self, p: &Params, job: &JobView<'_>) {
        if let Some((w0, w1)) = p.window {
            if job.submit < w0 || job.submit >= w1 {
                return;
            }
        }
        if job.cancelled {
            // Started: a record (which only a started job has), or a
            // trace line with run time.
            self.cancelled_jobs(
                u64::from(job.end <= job.start),
                u64::from(job.end > job.start),
            );
        }
        let times = match counted(job) {
            Ok(t) => t,
            Err(why) => {
                self.exclude(why);
                if p.by_size {
                    self.class(job.cores).exclude(why);
                }
                return;
            }
        };
        self.include(p, job, times);
        if p.by_size {
            self.class(job.cores).include(p, job, times);
        }
    }

    /// Counts cancelled jobs: some cancelled before they started, some
    /// while they ran.
    pub fn cancelled_jobs(&mut self, before_start: u64, while_running: u64) {
        self.cancelled.jobs += before_start + while_running;
        self.cancelled.before_start += before_start;
        self.cancelled.while_running += while_running;
    }

    /// Counts a job read that does not count, and why.
    pub fn exclude(&mut self, why: Exclusion) {
        *self.excluded.slot(why) += 1;
    }

    fn class(&mut self, cores: u64) -> &mut Accum {
        self.by_size.entry(size_class(cores)).or_default()
    }

    #[inline]
    fn include(&mut self, p: &Params, job: &JobView<'_>, t: Times) {
        let Times { r, w, resp, z } = t;
        self.jobs += 1;
        let held = &mut *self.held;
        let i = held.len;
        held.tau_ns = p.tau_ns;
        held.cores[i] = job.cores;
        held.r[i] = r;
        held.w[i] = w;
        held.resp[i] = resp;
        held.len += 1;
        if held.len == HELD {
            self.count_held();
        }
        let within = p.window.map(|(w0, w1)| executed_within(job, w0, w1));
        if let Some(x) = within {
            self.window_area += i128::from(job.cores) * i128::from(x);
        }
        for d in job.devices {
            let a = d.ids.len() as i128 * i128::from(within.unwrap_or(r));
            match self.device_area.get_mut(&*d.kind) {
                Some(sum) => *sum += a,
                None => {
                    self.device_area.insert(d.kind.to_string(), a);
                }
            }
        }
        self.t0 = self.t0.min(job.submit);
        self.t1 = self.t1.max(job.end);
        if !job.suspensions.is_empty() {
            self.suspended_jobs += 1;
            self.suspensions += job.suspensions.len() as u64;
            self.suspended_ns += i128::from(z);
        }
    }

    /// Counts the held jobs' values into the distributions and sums.
    fn count_held(&mut self) {
        let held = &mut *self.held;
        let n = held.len;
        if n == 0 {
            return;
        }
        held.len = 0;
        let tau = held.tau_ns;
        let mut slow = [0i64; HELD];
        let mut bounded = [0i64; HELD];
        let mut equal = [0i64; HELD];
        let (mut n_equal, mut n_differ) = (0, 0);
        for i in 0..n {
            let (resp, r) = (held.resp[i], held.r[i]);
            let s = resp as f64 / r as f64;
            let b = bounded_slowdown(s, resp, r, tau);
            // Adding a half and truncating rounds these (slowdowns are
            // positive but for a skewed clock's), without a call into
            // libm for every job.
            let (s, b) = ((s * RATIO + 0.5) as i64, (b * RATIO + 0.5) as i64);
            // Both arrays are written every time and the counts say which
            // holds the job: no branch to mispredict.
            equal[n_equal] = s;
            slow[n_differ] = s;
            bounded[n_differ] = b;
            let same = usize::from(s == b);
            n_equal += same;
            n_differ += 1 - same;
        }
        for i in 0..n {
            let c = i128::from(held.cores[i]);
            self.area += c * i128::from(held.r[i]);
            self.area_response += c * i128::from(held.resp[i]);
        }
        self.wait.add_all(&held.w[..n]);
        self.response.add_all(&held.resp[..n]);
        self.slowdown.add_all(&slow[..n_differ]);
        self.bounded.add_all(&bounded[..n_differ]);
        self.unbounded.add_all(&equal[..n_equal]);
    }

    pub fn finish(mut self, p: &Params, cores: Option<u64>, damage: Damage) -> Summary {
        self.count_held();
        self.slowdown.merge(&self.unbounded);
        self.bounded.merge(&self.unbounded);
        let (t0, t1) = match p.window {
            Some(w) => w,
            None => (self.t0, self.t1),
        };
        // With no job and no window, t0 > t1 (the empty fold): no span.
        let span = if t1 > t0 { (t1 - t0) as f64 } else { 0.0 };
        let utilization = match (self.jobs, cores) {
            (0, _) | (_, None) => None,
            _ if span <= 0.0 => None,
            (_, Some(c)) => {
                let area = if p.window.is_some() {
                    self.window_area
                } else {
                    self.area
                };
                Some(area as f64 / (c as f64 * span))
            }
        };
        let by_size = p.by_size.then(|| {
            std::mem::take(&mut self.by_size)
                .into_iter()
                .map(|(k, mut acc)| {
                    // A class's utilization is its share of the whole run's
                    // window, so the classes add up to the run's; its window
                    // is the run's.
                    let class_params = Params {
                        window: Some((t0, t1)),
                        by_size: false,
                        ..*p
                    };
                    if p.window.is_none() {
                        acc.count_held();
                        acc.window_area = acc.area;
                    }
                    // Generic resources are reported for the whole run.
                    acc.device_area.clear();
                    let (lo, hi) = class_bounds(k);
                    SizeClass {
                        class: class_label(k),
                        min_cores: lo,
                        max_cores: hi,
                        summary: acc.finish(&class_params, cores, Damage::default()),
                    }
                })
                .collect()
        });
        let mut resources: BTreeMap<String, ResourceUse> = BTreeMap::new();
        for kind in self.capacities.keys().chain(self.device_area.keys()) {
            let devices = self.capacities.get(kind).copied().filter(|&d| d > 0);
            let area = self.device_area.get(kind).copied().unwrap_or(0);
            let utilization = match devices {
                Some(d) if self.jobs > 0 && span > 0.0 => Some(area as f64 / (d as f64 * span)),
                _ => None,
            };
            resources.insert(
                kind.clone(),
                ResourceUse {
                    devices,
                    utilization,
                },
            );
        }
        let jobs = self.jobs;
        let makespan = (jobs > 0).then(|| (self.t1 - self.t0) as f64 / NS);
        Summary {
            clock: crate::clock::ClockKind::Wall,
            jobs,
            cores,
            tau: p.tau_ns as f64 / NS,
            window: (jobs > 0 || p.window.is_some()).then(|| [t0 as f64 / NS, t1 as f64 / NS]),
            makespan,
            wait: seconds(&mut self.wait),
            response: seconds(&mut self.response),
            slowdown: ratios(&mut self.slowdown),
            bounded_slowdown: ratios(&mut self.bounded),
            weighted_slowdown: (self.area > 0)
                .then(|| self.area_response as f64 / self.area as f64),
            utilization,
            suspended_jobs: self.suspended_jobs,
            suspensions: self.suspensions,
            suspended_time: self.suspended_ns as f64 / NS,
            cancelled: self.cancelled,
            skipped: Skipped {
                damage,
                excluded: self.excluded.total(),
                excluded_by: self.excluded,
            },
            approximate: self.wait.approximate(),
            by_size,
            resources,
        }
    }
}

/// One job's times, as the metrics define them: wait, response, run time
/// and suspended time, when it counts; else why it does not. What
/// [`Accum::add`] counts, one job at a time (the charts use it too).
#[inline]
fn counted(job: &JobView<'_>) -> Result<Times, Exclusion> {
    let z: i64 = job
        .suspensions
        .iter()
        .map(|s| s.resume.saturating_sub(s.suspend).max(0))
        .fold(0, i64::saturating_add);
    // Instants so far apart that their differences overflow come only
    // from a damaged input: such a job has no run time to speak of.
    let times = (|| {
        let r = job.end.checked_sub(job.start)?.checked_sub(z)?;
        let w = job.start.checked_sub(job.submit)?;
        let resp = job.end.checked_sub(job.submit)?;
        Some(Times { r, w, resp, z })
    })();
    match times {
        Some(t) if job.excluded_status.is_none() && t.r > 0 && job.cores > 0 => Ok(t),
        _ => Err(match (job.excluded_status, times) {
            (Some(why), _) => why,
            (None, Some(t)) if t.r > 0 => Exclusion::NoCores,
            (None, _) => Exclusion::NoRunTime,
        }),
    }
}

/// The bounded slowdown max(1, R / max(r, τ)), given the slowdown R / r:
/// the same division when r ≥ τ.
#[inline]
fn bounded_slowdown(slowdown: f64, resp: i64, r: i64, tau_ns: i64) -> f64 {
    if r >= tau_ns {
        slowdown
    } else {
        resp as f64 / tau_ns as f64
    }
    .max(1.0)
}

/// One job's figures, as the metrics count them (ns, and ratios).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobFigures {
    pub run_ns: i64,
    pub wait_ns: i64,
    pub response_ns: i64,
    pub suspended_ns: i64,
    pub slowdown: f64,
    pub bounded_slowdown: f64,
}

/// What the metrics make of one job: its figures, with τ `tau_ns` for the
/// bounded slowdown, or why it does not count.
pub fn job_figures(job: &JobView<'_>, tau_ns: i64) -> Result<JobFigures, Exclusion> {
    let t = counted(job)?;
    let slowdown = t.resp as f64 / t.r as f64;
    Ok(JobFigures {
        run_ns: t.r,
        wait_ns: t.w,
        response_ns: t.resp,
        suspended_ns: t.z,
        slowdown,
        bounded_slowdown: bounded_slowdown(slowdown, t.resp, t.r, tau_ns),
    })
}

/// Executed time of `job` (start to end, minus suspensions) inside [w0, w1).
fn executed_within(job: &JobView<'_>, w0: i64, w1: i64) -> i64 {
    let overlap = |a: i64, b: i64| b.min(w1).saturating_sub(a.max(w0)).max(0);
    let mut t = overlap(job.start, job.end);
    for s in job.suspensions {
        let a = s.suspend.max(job.start);
        let b = s.resume.min(job.end);
        if b > a {
            t = t.saturating_sub(overlap(a, b));
        }
    }
    t.max(0)
}

/// Size class k holds jobs of (2^(k−1), 2^k] cores; class 0 is 1 core.
pub fn size_class(cores: u64) -> u32 {
    if cores <= 1 {
        0
    } else {
        64 - (cores - 1).leading_zeros()
    }
}

fn class_bounds(k: u32) -> (u64, u64) {
    match k {
        0 => (1, 1),
        _ => ((1u64 << (k - 1)) + 1, 1u64 << k),
    }
}

/// The size class `k` as the tables name it: `1`, `2`, `3-4`, ...
pub fn class_label(k: u32) -> String {
    match class_bounds(k) {
        (lo, hi) if lo == hi => lo.to_string(),
        (lo, hi) => format!("{lo}-{hi}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn params() -> Params {
        Params {
            tau_ns: 10 * S,
            window: None,
            by_size: false,
        }
    }

    fn job(cores: u64, s: i64, b: i64, e: i64, susp: &[Suspension]) -> JobView<'_> {
        JobView {
            cores,
            submit: s * S,
            start: b * S,
            end: e * S,
            suspensions: susp,
            excluded_status: None,
            cancelled: false,
            devices: &[],
        }
    }

    #[test]
    fn hand_computed_run() {
        // Job A: 4 cores, submitted 0, started 10, ended 110, never
        //   suspended: w 10, r 100, R 110, sld 1.1, bsld 1.1.
        // Job B: 2 cores, submitted 20, started 20, ended 70, suspended
        //   30..40: z 10, r 40, w 0, R 50, sld 1.25, bsld 1.25.
        // Job C: 1 core, submitted 50, started 60, ended 65: r 5, w 10,
        //   R 15, sld 3, bsld max(1, 15 / max(5, 10)) = 1.5.
        let susp = [Suspension {
            suspend: 30 * S,
            resume: 40 * S,
        }];
        let p = params();
        let mut acc = Accum::new();
        acc.add(&p, &job(4, 0, 10, 110, &[]));
        acc.add(&p, &job(2, 20, 20, 70, &susp));
        acc.add(&p, &job(1, 50, 60, 65, &[]));
        let s = acc.finish(&p, Some(8), Damage::default());
        assert_eq!(s.jobs, 3);
        assert_eq!(s.window, Some([0.0, 110.0]));
        assert_eq!(s.makespan, Some(110.0));
        assert_eq!(s.wait.mean, Some(20.0 / 3.0));
        assert_eq!((s.wait.p50, s.wait.max), (Some(10.0), Some(10.0)));
        assert_eq!(s.response.mean, Some(175.0 / 3.0));
        assert_eq!(s.response.p50, Some(50.0));
        assert_eq!(s.slowdown.max, Some(3.0));
        assert_eq!(s.slowdown.p50, Some(1.25));
        assert_eq!(s.bounded_slowdown.max, Some(1.5));
        // Σ c·R / Σ c·r = (4·110 + 2·50 + 1·15) / (4·100 + 2·40 + 1·5)
        assert_eq!(s.weighted_slowdown, Some(555.0 / 485.0));
        // Σ c·r / (C·(t1 − t0)) = 485 / (8·110)
        assert_eq!(s.utilization, Some(485.0 / 880.0));
        assert_eq!(
            (s.suspended_jobs, s.suspensions, s.suspended_time),
            (1, 1, 10.0)
        );
    }

    #[test]
    fn zero_run_time_and_bad_status_are_excluded() {
        let p = params();
        let mut acc = Accum::new();
        acc.add(&p, &job(4, 0, 10, 10, &[]));
        let mut failed = job(4, 0, 10, 20, &[]);
        failed.excluded_status = Some(Exclusion::Failed);
        acc.add(&p, &failed);
        acc.add(&p, &job(0, 0, 10, 20, &[]));
        let damage = Damage {
            corrupt: 2,
            torn: 1,
            unsupported: 0,
        };
        let s = acc.finish(&p, Some(8), damage);
        assert_eq!(s.jobs, 0);
        assert_eq!(
            s.skipped,
            Skipped {
                damage,
                excluded: 3,
                excluded_by: ExcludedBy {
                    failed: 1,
                    no_run_time: 1,
                    no_cores: 1,
                    ..ExcludedBy::default()
                },
            }
        );
        assert_eq!(s.wait.mean, None);
        assert_eq!(s.utilization, None);
        assert_eq!(s.window, None);
    }

    #[test]
    fn window_keeps_jobs_submitted_inside_and_clips_their_execution() {
        let susp = [Suspension {
            suspend: 40 * S,
            resume: 60 * S,
        }];
        let p = Params {
            window: Some((20 * S, 100 * S)),
            ..params()
        };
        let mut acc = Accum::new();
        acc.add(&p, &job(2, 10, 10, 50, &[])); // submitted before: dropped
        acc.add(&p, &job(4, 30, 30, 130, &susp)); // runs 30..130 minus 40..60
        let s = acc.finish(&p, Some(10), Damage::default());
        assert_eq!(s.jobs, 1);
        assert_eq!(s.skipped.excluded, 0);
        // Inside [20, 100): executed 30..40 and 60..100 = 50 s on 4 cores.
        assert_eq!(s.utilization, Some(200.0 / (10.0 * 80.0)));
        assert_eq!(s.window, Some([20.0, 100.0]));
    }

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(
            [1, 2, 3, 4, 5, 8, 9, 16, 17].map(size_class),
            [0, 1, 2, 2, 3, 3, 4, 4, 5]
        );
        assert_eq!(class_label(0), "1");
        assert_eq!(class_label(1), "2");
        assert_eq!(class_label(2), "3-4");
        assert_eq!(class_label(5), "17-32");
    }

    #[test]
    fn size_class_utilizations_add_up_to_the_run() {
        let p = Params {
            by_size: true,
            ..params()
        };
        let mut acc = Accum::new();
        acc.add(&p, &job(4, 0, 10, 110, &[]));
        acc.add(&p, &job(1, 50, 60, 65, &[]));
        acc.add(&p, &job(3, 5, 6, 26, &[]));
        let s = acc.finish(&p, Some(8), Damage::default());
        let classes = s.by_size.unwrap();
        assert_eq!(classes.len(), 2);
        assert_eq!(classes[0].class, "1");
        assert_eq!(classes[1].summary.jobs, 2);
        let sum: f64 = classes.iter().map(|c| c.summary.utilization.unwrap()).sum();
        assert!((sum - s.utilization.unwrap()).abs() < 1e-12);
    }
}
