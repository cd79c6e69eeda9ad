//! runworkload: replays a workload trace on an emulated cluster.
//!
//! # How it works
//!
//! [`trace`] reads the chosen slice of an SWF trace into jobs (cores from
//! processors, run time, wall-time limit), counting what cannot be
//! replayed. [`rundir`] takes every factor's results directory before the
//! first run (locked; one holding another run refused unless `--force`,
//! which removes it whole), so a run's records are only ever its own. For
//! each shrinking factor, [`run`] writes the manifest (status `running`),
//! brings up the cluster of the config in this process (or reaches a
//! running one with `--controller`), computes every job's submission
//! offset ([`schedule`]: the trace's own times, or the originating study's
//! warm-up and groups), submits at those absolute deadlines over an
//! authenticated client connection (late jobs go together; lateness never
//! accumulates), shows progress, waits until every job is over, and
//! completes the results directory: the records, `jobs.csv` (each job's
//! target, actual and recorded submit instants), `manifest.json` and
//! `metrics.json` (calcmets' numbers).
//! [`compare`] prints the runs side by side with calcmets' table.
//!
//! Where the jobs run is the plan's [`backend::Backend`]: the emulated
//! cluster ([`backend::clemu`]), its virtual-time twin
//! ([`backend::twin`], `--simulate`: the same trace slice, factors,
//! schedule, cluster and policy code, no processes, perfect timing), or a
//! running Slurm cluster ([`backend::slurm`]). The results directory has
//! the same layout whichever it is, so calcmets reads them all and
//! `calcmets fidelity` sets an emulated run beside its twin.

pub mod backend;
pub mod cli;
pub mod events;
pub mod progress;
pub mod route;
pub mod run;
pub mod rundir;
pub mod schedule;
pub mod trace;

use std::path::PathBuf;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::run::RunResult;
use crate::schedule::Schedule;
use crate::trace::Slice;

/// A checked replay: everything the runs need.
pub struct Plan {
    pub config_path: PathBuf,
    pub config: controller::config::Cluster,
    pub workload: PathBuf,
    pub slice: Slice,
    /// What was done with the jobs the trace marks cancelled.
    pub cancelled: trace::Cancelled,
    /// What was done with the jobs the trace saw fail.
    pub failed: trace::Failed,
    /// What happens to the cluster meanwhile (`--events`, `--failures`),
    /// in time order.
    pub events: Vec<events::Event>,
    pub events_file: Option<PathBuf>,
    /// `--failures` as given.
    pub failures: Option<String>,
    /// `--feedback`: followers wait for the job they follow.
    pub feedback: bool,
    /// With `--feedback`, for each job of the slice, the job it follows:
    /// it is submitted its think time after that one ends.
    pub links: Vec<Option<usize>>,
    pub skip: u64,
    pub take: Option<u64>,
    pub cores_per_proc: u32,
    /// Fractions (1.0 = 100 %), in sweep order.
    pub factors: Vec<f64>,
    /// Load factors, fractions (1.0: the trace's arrivals), in sweep
    /// order: every load is run at every factor.
    pub loads: Vec<f64>,
    pub speedup: f64,
    pub schedule: Schedule,
    pub out: PathBuf,
    pub force: bool,
    /// How to show where each run stands.
    pub progress: progress::Mode,
    pub tau_ns: i64,
    /// Where the jobs run: the emulated cluster, its twin, or Slurm.
    pub backend: Box<dyn backend::Backend>,
    /// Runs of each factor and load (`--replicas`), each in a directory
    /// of its own under the point's.
    pub replicas: u32,
    /// The twin's perturbations (`--latencies`): the delays measured in an
    /// emulated run, drawn from a seed (`--seed`, one more for each
    /// replica), and where they came from.
    pub perturb: Option<(controller::sim::Perturb, String)>,
    /// Which jobs go to a partition other than the default (`--route`).
    pub routes: Vec<route::Route>,
}

/// One run of a sweep: its shrinking factor and its load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub factor: f64,
    pub load: f64,
}

impl Point {
    /// Its directory's name: `shrink-050`; `load-150` when the sweep
    /// varies the load (`loads_swept`) and not the factor; both,
    /// `shrink-050-load-150`, when it varies both (`factors_swept`).
    pub fn label(&self, loads_swept: bool, factors_swept: bool) -> String {
        let shrink = format!("shrink-{}", run::percent_label(self.factor));
        let load = format!("load-{}", run::percent_label(self.load));
        match (loads_swept, factors_swept) {
            (false, _) => shrink,
            (true, false) => load,
            (true, true) => format!("{shrink}-{load}"),
        }
    }
}

impl Plan {
    /// The runs of the sweep, in the order they run: every load at every
    /// factor.
    pub fn points(&self) -> Vec<Point> {
        self.factors
            .iter()
            .flat_map(|&factor| self.loads.iter().map(move |&load| Point { factor, load }))
            .collect()
    }

    /// The name of `point`'s run and directory.
    pub fn label(&self, point: Point) -> String {
        let loads_swept = self.loads.iter().any(|&l| (l - 1.0).abs() > 1e-12);
        let factors_swept = self.factors.len() > 1 || (self.factors[0] - 1.0).abs() > 1e-12;
        point.label(loads_swept, factors_swept)
    }
}

/// Runs every factor and load in turn; stops early (the run at hand
/// marked interrupted) when `stop` fires. Every run's directory is taken
/// before the first starts ([`rundir`]).
pub async fn replay(plan: &Plan, stop: &CancellationToken) -> Result<Vec<RunResult>> {
    // Every run of the sweep: each point, each of its replicas.
    let runs: Vec<(Point, Option<u32>)> = plan
        .points()
        .into_iter()
        .flat_map(|p| {
            let n = plan.replicas;
            (1..=n).map(move |r| (p, (n > 1).then_some(r)))
        })
        .collect();
    let paths: Vec<PathBuf> = runs
        .iter()
        .map(|&(p, r)| {
            let dir = plan.out.join(plan.label(p));
            match r {
                Some(r) => dir.join(format!("r{r:02}")),
                None => dir,
            }
        })
        .collect();
    let dirs = rundir::claim_all(&paths, plan.force)?;
    let mut results = Vec::new();
    for (&(p, replica), dir) in runs.iter().zip(&dirs) {
        let r = match run::run_point(plan, p, replica, dir, stop).await {
            Ok(r) => r,
            Err(e) => {
                rundir::mark_failed(&dir.path, &e);
                return Err(e);
            }
        };
        let interrupted = r.interrupted;
        results.push(r);
        if interrupted {
            break;
        }
    }
    Ok(results)
}

/// The runs side by side, as calcmets prints several results directories
/// (replicas of a point as one column: each figure's mean and its 95 %
/// interval).
pub fn compare(results: &[RunResult], out: &mut impl std::io::Write) -> std::io::Result<()> {
    let mut named: Vec<calcmets::report::Named> = Vec::new();
    for r in results {
        match named.last_mut() {
            // The next replica of the same point: one more in its column.
            Some(last) if r.replica.is_some_and(|k| k > 1) && last.name == r.label => {
                last.members.push(r.summary.clone());
            }
            _ => {
                let mut n = calcmets::report::Named::one(r.label.clone(), r.summary.clone());
                if r.replica.is_some() {
                    n.members.push(r.summary.clone());
                }
                named.push(n);
            }
        }
    }
    calcmets::report::table(out, &named)
}
