//! A results directory, as runworkload writes it and calcmets reads it:
//! one place for its files' shapes, read and written through serde.
//!
//! - [`Manifest`] (`manifest.json`): what the run was (cluster, trace
//!   slice, time compression, schedule) and how it ended;
//! - [`JobRow`] (`jobs.csv`, through the `csv` crate): each job of the
//!   slice, the cluster's id for it, its submit instants, its final state
//!   and its nodes;
//! - `metrics.json` is calcmets' own summary of the run's records.
//!
//! Readers are lenient where files written before a field existed lack
//! it (a default stands in); writers always write every field. The page
//! for people is `docs/results.md`.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The manifest's file name: a directory holding one is a results
/// directory.
pub const MANIFEST: &str = "manifest.json";
/// One line per job of the slice.
pub const JOBS: &str = "jobs.csv";
/// One line per event of the replay (`--events`, `--failures`).
pub const EVENTS: &str = "events.csv";
/// The same events in the plain form `runworkload --events` reads: the
/// run's failures, to replay again.
pub const EVENTS_PLAIN: &str = "events.txt";
/// calcmets' metrics of the run.
pub const METRICS: &str = "metrics.json";
/// The emulation's own delays, one line per job and kind (`kind,ns`):
/// what a twin's replicas draw their perturbations from.
pub const LATENCY: &str = "latency.csv";

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// From before the first job on; left so by a replay that died.
    Running,
    /// Every job over.
    Completed,
    /// Stopped by Ctrl-C: unfinished jobs were cancelled.
    Interrupted,
    /// Stopped by an error (the manifest's `error`).
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }
}

/// Runs written before manifests had a status finished.
fn completed() -> Status {
    Status::Completed
}

/// Runs written before `load` existed replayed the trace's arrivals.
fn one() -> f64 {
    1.0
}

/// `manifest.json`: what a run was and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// `shrink-FFF`, the run's name in tables.
    #[serde(default)]
    pub label: String,
    #[serde(default = "completed")]
    pub status: Status,
    /// Why a `failed` run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub clemu_version: String,
    /// The replay's process.
    #[serde(default)]
    pub pid: u32,
    /// The cluster config's path.
    #[serde(default)]
    pub config: String,
    /// SHA-256 of the config file's bytes, hex: whether two runs ran the
    /// same cluster. `None` in runs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// `emulated` (real processes) or `simulated` (the virtual-time twin).
    #[serde(default)]
    pub mode: String,
    /// `clemu` or `slurm`.
    #[serde(default)]
    pub backend: String,
    /// `embedded`, the address of the controller driven, or `slurm`.
    #[serde(default)]
    pub controller: String,
    #[serde(default)]
    pub policy: String,
    /// `off` or `suspend`.
    #[serde(default)]
    pub preemption: String,
    /// The gang time slice as the config gives it: trace seconds.
    #[serde(default)]
    pub time_slice_s: f64,
    /// The same slice as the cluster ran it, in wall-clock seconds: scaled
    /// with the run, unless the cluster was one started elsewhere (it
    /// keeps its own). `None` in runs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_slice_wall_s: Option<f64>,
    #[serde(default)]
    pub gang_partitions: Vec<GangPartition>,
    /// When the cluster's scheduler passed; `None` in runs written before
    /// its interval was in trace seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    /// `[controller] prestart`: whether the processes of the jobs a gang
    /// turn would start were to be started ahead of it, held (the setting;
    /// never done for turns under 2 ms away or with an external
    /// scheduler). `None` where no
    /// clemu controller ran processes: the twin, Slurm, a cluster started
    /// elsewhere, and runs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prestart: Option<bool>,
    /// The replay's `--route` values: which jobs went to a partition other
    /// than the default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<String>,
    /// The cluster's total cores (what utilization divides by).
    #[serde(default)]
    pub cores: Option<u64>,
    /// The devices of each generic resource in the cluster (what each
    /// one's utilization divides by); empty without them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub resources: std::collections::BTreeMap<String, u64>,
    /// The config's `[[workload.gres]]` rules, as text: which trace jobs
    /// asked which generic resources of each node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workload_gres: Vec<String>,
    #[serde(default)]
    pub nodes: u64,
    /// The nodes in the cluster's order, as runs of nodes with the same
    /// core count: what numbers cores node by node, as Batsim numbers its
    /// resources (`calcmets export --format batsim`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layout: Vec<NodeGroup>,
    #[serde(default)]
    pub trace: Trace,
    #[serde(default)]
    pub slice: Slice,
    /// Which replica of its replay this run is (`runworkload --replicas`);
    /// `None` for a replay run once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<Replica>,
    /// The shrinking factor, a fraction (0.5 for 50 %): submit times,
    /// run times and limits × factor.
    #[serde(default)]
    pub factor: f64,
    /// The load factor, a fraction (1.5 for 150 %): inter-arrival times ÷
    /// load, run times as they are (`--load`). 1 in runs written before it
    /// existed.
    #[serde(default = "one")]
    pub load: f64,
    /// Every time ÷ speedup on top of the factor.
    #[serde(default)]
    pub speedup: f64,
    /// τ of the bounded slowdown in this run's (wall-clock) seconds.
    #[serde(default)]
    pub tau: Option<f64>,
    /// τ of the bounded slowdown in trace seconds (`--tau`, 10 unless
    /// given); `None` in runs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_trace: Option<f64>,
    #[serde(default)]
    pub schedule: Schedule,
    /// Unix seconds: the first deadline (while `running`, when the replay
    /// started).
    #[serde(default)]
    pub start: Option<f64>,
    /// Unix seconds: the end of the run; `None` while `running`.
    #[serde(default)]
    pub end: Option<f64>,
    /// Jobs by final state; `None` while `running`.
    #[serde(default)]
    pub counts: Option<BTreeMap<String, u64>>,
    /// Actual − target submit instants; `None` while `running`.
    #[serde(default)]
    pub lateness: Option<Lateness>,
    /// What happened to the cluster during the run (`--events`,
    /// `--failures`); `None` when nothing was to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Events>,
    /// What the emulation's own costs came to on this host, measured job
    /// by job in the run: from the controller's decision to the job's
    /// process acting on it. `None` in the twin (it has none), for a run
    /// still running, and in runs written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latencies>,
    /// A twin's: how far its schedule hangs on the order of events at one
    /// instant. `None` for other runs, a perturbed twin's, and an external
    /// scheduler's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ties: Option<Ties>,
    /// An external scheduler's figures (`policy = "batsim"`): its
    /// endpoint, messages exchanged, reply latency p50/p99/max in ms, and
    /// why it stopped deciding if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<crate::scheduler::SchedulerReport>,
}

/// How far a twin's schedule hangs on the order of events at one instant
/// (an end and an arrival in the same trace second, which the twin takes
/// end first): its figures again with every start, end, suspension,
/// resumption and arrival `nudge_ns` later, relative to its own. No real
/// system keeps that order, so a difference this size between an emulated
/// run and this twin is the order of simultaneous events, not the
/// emulation's cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ties {
    pub nudge_ns: u64,
    pub wait_mean: Option<f64>,
    pub bounded_slowdown_mean: Option<f64>,
}

impl Ties {
    /// From this share on, the ties are worth a word.
    pub const NOTABLE: f64 = 0.005;

    /// Whether the nudge moved a figure by [`Ties::NOTABLE`] or more.
    pub fn notable(&self) -> bool {
        [self.wait_mean, self.bounded_slowdown_mean]
            .into_iter()
            .flatten()
            .any(|r| r.abs() >= Self::NOTABLE)
    }

    /// `mean wait +2.28 % and mean bounded slowdown +3.13 %`.
    pub fn moved(&self) -> String {
        let pct = |r: Option<f64>| r.map_or("–".to_string(), |r| format!("{:+.2} %", r * 100.0));
        format!(
            "mean wait {} and mean bounded slowdown {}",
            pct(self.wait_mean),
            pct(self.bounded_slowdown_mean)
        )
    }
}

/// One of the runs of a replay run several times (`--replicas`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    /// From 1.
    pub index: u32,
    pub of: u32,
    /// In the twin: the seed its perturbations were drawn from, and where
    /// the latencies drawn came from (an emulated run's directory, or
    /// `host`: measured here before the replay). `None` for emulated runs,
    /// which the host perturbs itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latencies_from: Option<String>,
}

/// The emulation's costs in a run, by kind of order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Latencies {
    /// From the pass that started a job to the start its record gives:
    /// none where its process learns the controller's start (a job's run
    /// counts from there, its launch within it), but for the part of a
    /// launch longer than a sleep's whole run; else to the process's
    /// first instant.
    pub start: Option<Delay>,
    /// From the controller's decision to suspend (or resume) a job to the
    /// instant its process noted it (the record's suspension pairs).
    pub suspend: Option<Delay>,
    pub resume: Option<Delay>,
    /// From a job's end (the record's: a sleep's deadline, a program's
    /// last instant) to the controller knowing the job over and its cores
    /// free: a sleep's process waking at its deadline is in it.
    pub end: Option<Delay>,
    /// From a job's submission to the pass that first looked at it, over
    /// the jobs that pass started: those started with no other job
    /// submitted, no end known and no job suspended or resumed between
    /// the two instants.
    pub arrive: Option<Delay>,
}

/// One kind of delay over the jobs of a run: in the host's (wall-clock)
/// milliseconds, and what it comes to in trace seconds at the run's
/// factor and speed-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delay {
    pub samples: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
}

/// The events of a run, in brief (`events.csv` has each).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Events {
    /// `--events` as given.
    pub file: Option<String>,
    /// `--failures` as given.
    pub failures: Option<String>,
    /// Events planned, and applied (those after every job was over are
    /// not), and refused by the cluster.
    pub planned: u64,
    pub applied: u64,
    pub refused: u64,
    /// Jobs hit by at least one (killed by a failed node, or cancelled).
    pub jobs_hit: u64,
}

/// One line of `events.csv`: an event of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// From 1, as `jobs.csv`'s `events` name them.
    pub number: u64,
    /// Its instant in the trace, seconds.
    pub trace_s: f64,
    /// When it was applied, Unix seconds; empty if it never was.
    pub at: Option<f64>,
    /// `down`, `up`, `drain`, `undrain` or `cancel`.
    pub kind: String,
    /// Nodes (folded), or the trace job cancelled.
    pub target: String,
    pub reason: String,
    /// The cluster's ids of the jobs it hit, `;`-separated.
    pub jobs: String,
    /// Why the cluster refused it; empty if it did not.
    pub error: String,
    /// Where it came from: `FILE:LINE`, or `generated`.
    pub source: String,
}

/// Writes `dir/events.csv`.
pub fn write_events(dir: &Path, rows: &[EventRow]) -> io::Result<()> {
    let path = dir.join(EVENTS);
    let mut w = csv::Writer::from_path(&path).map_err(csv_error(&path))?;
    for r in rows {
        w.serialize(r).map_err(csv_error(&path))?;
    }
    w.flush()
}

/// When a run's scheduler passed: `[controller] schedule_interval_s` and
/// `pass_floor_ms`, in both clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Scheduling {
    /// The least time between two passes, trace seconds (0: a pass after
    /// every event).
    pub interval_s: f64,
    /// The same as the cluster ran it, wall-clock seconds.
    pub interval_wall_s: f64,
    /// The emulation's own least wall-clock time between passes
    /// (`pass_floor_ms`; 0 in the twin, which has none), wall-clock
    /// seconds, and what it comes to in trace seconds.
    pub floor_wall_s: f64,
    pub floor_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GangPartition {
    pub name: String,
    pub oversubscribe: u32,
    /// Trace seconds, as the config gives it.
    pub time_slice_s: f64,
    /// Wall-clock seconds, as the cluster ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_slice_wall_s: Option<f64>,
}

/// The trace a run replays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Trace {
    pub path: String,
    /// What the workload is written in.
    pub format: WorkloadFormat,
    pub max_procs: Option<u64>,
    pub unix_start_time: Option<i64>,
}

/// Consecutive nodes of the cluster with the same number of cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeGroup {
    /// Folded; they expand in the cluster's order.
    pub nodes: String,
    pub cpus: u32,
}

/// What a workload file is written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadFormat {
    /// The Standard Workload Format (plain or gzip).
    #[default]
    Swf,
    /// Batsim's JSON workload.
    Batsim,
}

/// The slice of the trace a run replays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Slice {
    pub skip: u64,
    /// As asked (`--jobs`); `None` for all.
    pub jobs: Option<u64>,
    /// Job lines in the slice.
    pub read: u64,
    /// Jobs the run submits.
    pub replayed: u64,
    pub skipped_too_large: u64,
    /// Run time or size unknown.
    pub skipped_unknown: u64,
    pub malformed_lines: u64,
    pub cores_per_proc: u32,
    /// What the replay did with the jobs the trace marks cancelled (SWF
    /// status 5): `replay` (cancelled at the trace's delay after their
    /// submission), `skip` or `run` (run as if they completed). Empty in
    /// runs written before the choice existed.
    pub cancelled: String,
    /// Jobs of the slice the trace marks cancelled.
    pub trace_cancelled: u64,
    /// Of those, left out by `--cancelled skip`.
    pub skipped_cancelled: u64,
    /// What the replay did with the jobs the trace saw fail (SWF status
    /// 0): `replay` (run for their run time, then ended `failed`), `skip`
    /// or `run` (as if they completed). Empty in runs written before the
    /// choice existed (they ran them).
    pub failed: String,
    /// Jobs of the slice the trace marks failed.
    pub trace_failed: u64,
    /// Of those, left out by `--failed skip`.
    pub skipped_failed: u64,
    /// `--feedback`: a job that followed another (SWF field 17) was
    /// submitted its think time after that one ended in this run.
    pub feedback: bool,
    /// Jobs so submitted (those whose preceding job is in the slice).
    pub followers: u64,
    /// The slice's first submit time in the trace, trace seconds (SWF
    /// field 2: since the log's start): the instant the run's start
    /// stands for in trace time. `None` in runs written before it was
    /// recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_submit: Option<f64>,
}

/// When jobs are submitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Schedule {
    /// Each job at its own (shrunk) submit time.
    #[default]
    Trace,
    /// The originating study's: warm-up jobs at once, then groups at a
    /// fixed period (seconds).
    Groups {
        warmup_jobs: usize,
        warmup: f64,
        group: usize,
        period: f64,
        drift: f64,
    },
}

/// Actual − target submit instant over the submitted jobs, seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Lateness {
    /// The clock of its figures: `wall`, the run's own seconds (how late
    /// the replay was, not the workload).
    #[serde(default = "wall_clock")]
    pub clock: String,
    pub submitted: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

fn wall_clock() -> String {
    "wall".into()
}

impl Manifest {
    /// Trace seconds per second of the run's own clock (speedup ÷ factor),
    /// when the manifest says both.
    pub fn trace_per_wall(&self) -> Option<f64> {
        let scale = self.speedup / self.factor;
        (self.factor > 0.0 && self.speedup > 0.0 && scale.is_finite()).then_some(scale)
    }

    /// τ of the bounded slowdown in trace seconds: as recorded, else the
    /// run's τ undone by its compression.
    pub fn tau_in_trace(&self) -> Option<f64> {
        self.tau_trace
            .or_else(|| Some(self.tau? * self.trace_per_wall()?))
            .filter(|t| *t >= 0.0)
    }

    /// Reads `dir/manifest.json`.
    pub fn read(dir: &Path) -> io::Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
        })?;
        let bad = |why: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a manifest: {why}", path.display()),
            )
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let Some(fields) = value.as_object() else {
            return Err(bad("a JSON object is expected".into()));
        };
        // What every figure is scaled by: a run has them above 0.
        for key in ["factor", "speedup"] {
            if let Some(v) = fields
                .get(key)
                .filter(|v| !v.as_f64().is_some_and(|f| f > 0.0))
            {
                return Err(bad(format!(
                    "its {key} is {v}, where a run has one above 0"
                )));
            }
        }
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }

    /// Writes `dir/manifest.json` whole: to a file beside it, renamed into
    /// place, so that a reader never sees half of one.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let path = dir.join(MANIFEST);
        let tmp = dir.join(".manifest.json.new");
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        std::fs::write(&tmp, text + "\n")?;
        std::fs::rename(&tmp, &path)
    }
}

/// One line of `jobs.csv`: a job of the slice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// The trace's job number (SWF field 1; −1 where it has none).
    pub trace_id: i64,
    /// The cluster's id for it; 0 if it was never submitted.
    pub job_id: u64,
    #[serde(default)]
    pub cores: u32,
    /// Run time and wall-time limit as replayed, in trace seconds (the
    /// limit 0 where the trace gives none: no limit). `None` in files
    /// written before the columns were.
    #[serde(default)]
    pub runtime_trace_s: Option<f64>,
    #[serde(default)]
    pub walltime_trace_s: Option<f64>,
    /// The same as submitted to the cluster: in the run's own clock,
    /// shrunk by the factor and the speed-up.
    #[serde(default, alias = "runtime_s")]
    pub runtime_wall_s: f64,
    #[serde(default, alias = "walltime_s")]
    pub walltime_wall_s: f64,
    /// Unix seconds: when it was due, and when it was sent.
    #[serde(default)]
    pub target_submit: f64,
    #[serde(default)]
    pub actual_submit: f64,
    /// The submit instant the cluster gave it, Unix nanoseconds, exactly
    /// as its records carry it; 0 if never submitted. `None` in files
    /// written before the column was.
    #[serde(default)]
    pub submit_ns: Option<i64>,
    /// When the cluster started it (the scheduling pass's instant, one for
    /// all the jobs a pass starts), Unix nanoseconds; 0 if it never
    /// started. `None` in files written before the column was.
    #[serde(default)]
    pub start_ns: Option<i64>,
    /// When the cluster knew it over and its cores free (a moment after
    /// its process ended), Unix nanoseconds; 0 if it is not over. `None`
    /// in files written before the column was.
    #[serde(default)]
    pub end_ns: Option<i64>,
    /// Its submit instant less its deadline, in the run's own clock
    /// (milliseconds): how late the replay was, not the workload.
    #[serde(default, alias = "lateness_ms")]
    pub lateness_wall_ms: f64,
    /// Its final state (`completed`, ..., `not_submitted`).
    #[serde(default)]
    pub state: String,
    /// For a job the trace marks cancelled, replayed so: how long after
    /// its submission the replay cancelled it (the trace's wait plus run
    /// time), in trace seconds and in the run's own; empty for other jobs.
    #[serde(default)]
    pub cancel_after_trace_s: Option<f64>,
    #[serde(default, alias = "cancel_after_s")]
    pub cancel_after_wall_s: Option<f64>,
    /// Under `--feedback`, the trace job it followed: it was submitted its
    /// think time after that one ended (its target is then); empty for
    /// the others.
    #[serde(default)]
    pub follows: Option<i64>,
    /// The events (numbers of `events.csv`) that hit it, `;`-separated;
    /// empty for none.
    #[serde(default)]
    pub events: String,
    /// With `--backend slurm`, the id Slurm gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_id: Option<u64>,
    /// The nodes it ran on, folded; empty if none.
    #[serde(default)]
    pub nodes: String,
    /// What it asked of each node's generic resources (`gpu:2`, the
    /// config's `[[workload.gres]]`); empty for none.
    #[serde(default)]
    pub gres: String,
}

/// Writes `dir/jobs.csv`.
pub fn write_jobs(dir: &Path, rows: &[JobRow]) -> io::Result<()> {
    let path = dir.join(JOBS);
    let mut w = csv::Writer::from_path(&path).map_err(csv_error(&path))?;
    for r in rows {
        w.serialize(r).map_err(csv_error(&path))?;
    }
    w.flush()
}

/// Reads `dir/jobs.csv`; `None` when there is none (a run still running,
/// or killed, has none yet).
pub fn read_jobs(dir: &Path) -> io::Result<Option<Vec<JobRow>>> {
    let path = dir.join(JOBS);
    let mut r = match csv::Reader::from_path(&path) {
        Ok(r) => r,
        Err(e) if matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == io::ErrorKind::NotFound) => {
            return Ok(None)
        }
        Err(e) => return Err(csv_error(&path)(e)),
    };
    let rows = r
        .deserialize()
        .collect::<Result<Vec<JobRow>, _>>()
        .map_err(csv_error(&path))?;
    Ok(Some(rows))
}

/// A CSV error as an I/O error naming the file (and the line, when the
/// error has one).
fn csv_error(path: &Path) -> impl Fn(csv::Error) -> io::Error + '_ {
    move |e| {
        let at = e
            .position()
            .map_or(String::new(), |p| format!(":{}", p.line()));
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}{at}: {e}", path.display()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(trace_id: i64, job_id: u64, nodes: &str) -> JobRow {
        JobRow {
            trace_id,
            job_id,
            cores: 2,
            runtime_trace_s: Some(150.0),
            walltime_trace_s: Some(300.0),
            runtime_wall_s: 1.5,
            walltime_wall_s: 3.0,
            target_submit: 1_800_000_000.25,
            actual_submit: 1_800_000_000.250_1,
            submit_ns: Some(1_800_000_000_250_300_000),
            start_ns: Some(1_800_000_001_000_000_000),
            end_ns: Some(1_800_000_002_500_000_000),
            lateness_wall_ms: 0.1,
            state: "completed".into(),
            cancel_after_trace_s: (job_id == 1).then_some(25.0),
            cancel_after_wall_s: (job_id == 1).then_some(0.25),
            follows: (job_id == 1).then_some(4514),
            events: if job_id == 1 {
                "2;5".into()
            } else {
                String::new()
            },
            slurm_id: None,
            nodes: nodes.into(),
            gres: String::new(),
        }
    }

    #[test]
    fn jobs_round_trip_with_folded_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![row(4515, 1, "vn[001-002],vn007"), row(-1, 0, "")];
        write_jobs(dir.path(), &rows).unwrap();
        let text = std::fs::read_to_string(dir.path().join(JOBS)).unwrap();
        assert!(text.starts_with("trace_id,job_id,cores,"), "{text}");
        assert!(text.contains("\"vn[001-002],vn007\""), "{text}");
        assert_eq!(read_jobs(dir.path()).unwrap(), Some(rows));
    }

    #[test]
    fn older_jobs_files_still_read() {
        let dir = tempfile::tempdir().unwrap();
        // Before submit_ns and slurm_id, with the nodes quoted by hand.
        std::fs::write(
            dir.path().join(JOBS),
            "trace_id,job_id,cores,runtime_s,walltime_s,target_submit,actual_submit,lateness_ms,state,nodes\n\
             7,3,4,1.000,2.000,10.000000,10.000100,0.100,completed,\"vn[1-2]\"\n",
        )
        .unwrap();
        let rows = read_jobs(dir.path()).unwrap().unwrap();
        assert_eq!((rows[0].job_id, rows[0].submit_ns), (3, None));
        assert_eq!(rows[0].nodes, "vn[1-2]");
        // The wall-clock columns under their former names.
        assert_eq!(
            (rows[0].runtime_wall_s, rows[0].walltime_wall_s),
            (1.0, 2.0)
        );
        assert_eq!(
            (rows[0].lateness_wall_ms, rows[0].runtime_trace_s),
            (0.1, None)
        );
        std::fs::write(dir.path().join(JOBS), "trace_id,job_id,cores\n1,x,2\n").unwrap();
        let err = read_jobs(dir.path()).unwrap_err().to_string();
        assert!(err.contains("jobs.csv:2"), "{err}");
        assert_eq!(
            read_jobs(tempfile::tempdir().unwrap().path()).unwrap(),
            None
        );
    }

    #[test]
    fn a_manifest_round_trips_and_an_old_one_reads() {
        let dir = tempfile::tempdir().unwrap();
        let m = Manifest {
            label: "shrink-050".into(),
            status: Status::Running,
            error: None,
            clemu_version: "0.1.0".into(),
            pid: 42,
            config: "configs/demo.toml".into(),
            config_sha256: Some("ab12".into()),
            mode: "emulated".into(),
            backend: "clemu".into(),
            controller: "embedded".into(),
            policy: "easy".into(),
            preemption: "off".into(),
            time_slice_s: 30.0,
            time_slice_wall_s: Some(0.0015),
            gang_partitions: vec![],
            scheduling: Some(Scheduling {
                interval_s: 0.0,
                interval_wall_s: 0.0,
                floor_wall_s: 0.0005,
                floor_s: 10.0,
            }),
            prestart: Some(true),
            routes: vec!["urgent:cores<=8".into()],
            cores: Some(256),
            resources: [("gpu".to_string(), 32)].into(),
            workload_gres: vec!["queue=2 -> gpu:1".into()],
            nodes: 16,
            layout: vec![NodeGroup {
                nodes: "vn[01-16]".into(),
                cpus: 16,
            }],
            trace: Trace::default(),
            slice: Slice::default(),
            replica: Some(Replica {
                index: 2,
                of: 10,
                seed: Some(7),
                latencies_from: Some("emulated/shrink-050".into()),
            }),
            factor: 0.5,
            load: 1.5,
            speedup: 10_000.0,
            tau: Some(0.0005),
            tau_trace: Some(10.0),
            schedule: Schedule::Groups {
                warmup_jobs: 10,
                warmup: 1.0,
                group: 5,
                period: 2.0,
                drift: 0.1,
            },
            start: Some(1_800_000_000.5),
            end: None,
            counts: None,
            lateness: None,
            events: Some(Events {
                failures: Some("mtbf=1000,mttr=100,seed=1".into()),
                planned: 4,
                applied: 3,
                jobs_hit: 2,
                ..Events::default()
            }),
            latency: Some(Latencies {
                start: Some(Delay {
                    samples: 200,
                    p50_ms: 0.2,
                    p99_ms: 1.5,
                    max_ms: 2.0,
                    p50_s: 4.0,
                    p99_s: 30.0,
                    max_s: 40.0,
                }),
                ..Latencies::default()
            }),
            ties: Some(Ties {
                nudge_ns: 1,
                wait_mean: Some(0.0228),
                bounded_slowdown_mean: None,
            }),
            scheduler: Some(crate::scheduler::SchedulerReport {
                endpoint: "tcp://127.0.0.1:28000".into(),
                messages: 12,
                reply_ms: crate::scheduler::Latency {
                    p50: 0.5,
                    p99: 1.5,
                    max: 2.0,
                },
                failure: None,
            }),
        };
        m.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
        assert!(text.contains("\"status\": \"running\"") && text.contains("\"mode\": \"groups\""));
        assert_eq!(Manifest::read(dir.path()).unwrap(), m);
        // What the first manifests held, and no status: a finished run.
        std::fs::write(
            dir.path().join(MANIFEST),
            r#"{"label": "shrink-100", "cores": 8, "start": 5.0, "tau": 10.0}"#,
        )
        .unwrap();
        let old = Manifest::read(dir.path()).unwrap();
        assert_eq!(
            (old.status, old.cores, old.tau, old.load),
            (Status::Completed, Some(8), Some(10.0), 1.0)
        );
        // No factor to undo: no trace clock.
        assert_eq!((old.trace_per_wall(), old.tau_in_trace()), (None, None));
        assert_eq!(m.trace_per_wall(), Some(20_000.0));
        assert_eq!(m.tau_in_trace(), Some(10.0));
        // The least a results directory can hold.
        std::fs::write(dir.path().join(MANIFEST), "{}").unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap().cores, None);
        // Not one: a list, or a run whose figures would scale by nothing.
        for (text, why) in [
            ("[]", "a JSON object is expected"),
            (
                r#"{"speedup": 0}"#,
                "its speedup is 0, where a run has one above 0",
            ),
            (
                r#"{"factor": -1.0}"#,
                "its factor is -1.0, where a run has one above 0",
            ),
        ] {
            std::fs::write(dir.path().join(MANIFEST), text).unwrap();
            let err = Manifest::read(dir.path()).unwrap_err().to_string();
            assert!(err.ends_with(&format!("not a manifest: {why}")), "{err}");
        }
    }
}
