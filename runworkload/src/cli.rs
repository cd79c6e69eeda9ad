//! runworkload's command line: what the user typed, checked into a
//! [`Plan`].

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, ValueEnum};

use crate::backend::clemu::{Clemu, Remote};
use crate::backend::slurm::Slurm;
use crate::backend::twin::Twin;
use crate::backend::Backend;
use crate::schedule::Schedule;
use crate::trace::{self, Cancelled, Failed, SliceSpec, TraceJob};
use crate::Plan;

const EXAMPLES: &str = "\
Examples:
  runworkload --config configs/demo.toml --workload configs/workloads/kth-sp2-200.swf \\
              --speedup 10000 --shrink 100:50:50 --out results
  runworkload --config cluster.toml --workload RICC-2010-2.swf.gz --skip 1000 --jobs 5000 \\
              --shrink 100:50:10 --speedup 600
  runworkload --config cluster.toml --workload trace.swf --schedule groups --warmup-jobs 100 \\
              --warmup 60 --group 10 --period 5 --drift 0.2
  runworkload --config configs/batsim.toml --workload configs/workloads/kth-sp2-200.json \\
              --simulate --out results

Times: a factor f (percent) scales every submit time, run time and wall-time
limit by f/100; --speedup S divides them all by S on top (so S = 3600 plays
an hour in a second). A load L (percent) divides inter-arrival times alone by
L/100: 150 offers half as much work again in the same time. Each job gets
--cores-per-proc cores per trace processor. Every figure printed is in trace
seconds (the compression undone).

Results: OUT/shrink-FFF/ per factor (OUT/load-LLL/ per load, or
OUT/shrink-FFF-load-LLL/ when both vary), with records/, jobs.csv,
manifest.json and metrics.json; `calcmets OUT` reads them all side by side.

Signals: SIGINT (Ctrl-C), SIGTERM (timeout, a batch system) and SIGHUP stop
the replay: the run at hand has its unfinished jobs cancelled, keeps its
records, jobs.csv and the metrics of what completed, and is marked
interrupted; a second signal quits at once.

Progress: a bar on a terminal; off one, a line every 5 s (which run, its
jobs submitted, running, pending and over, time elapsed and to go); -q for
neither.

Exit status: 0 ok, 1 the comparison or charts could not be made (the runs
are kept), 2 usage or input error (with --strict, a trace with malformed
lines is one), or an external scheduler (policy = \"batsim\") that failed
(the run's results are kept), 128 + the signal that stopped the replay
(130 SIGINT, 143 SIGTERM, 129 SIGHUP).";

#[derive(Debug, Parser)]
#[command(
    name = "runworkload",
    version,
    about = "Replay a workload trace on an emulated clemu cluster",
    after_help = EXAMPLES,
    // `--speedup -3` reaches the checks that say what is wrong with it,
    // rather than reading as an unknown flag `-3`.
    allow_negative_numbers = true
)]
pub struct Cli {
    /// Cluster configuration (TOML); the embedded cluster is started from it.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Workload: an SWF trace (plain or gzip), or a Batsim workload
    /// (`.json`: delay profiles only; each resource it asks for is a
    /// trace processor).
    #[arg(long, value_name = "TRACE")]
    pub workload: PathBuf,
    /// Replay this many jobs of the trace [default: all].
    #[arg(long, value_name = "N")]
    pub jobs: Option<u64>,
    /// Skip the first K jobs of the trace.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub skip: u64,
    /// Shrinking factors in percent: INI:END:STEP (100:50:10 gives 100, 90,
    /// ..., 50; the steps must reach END), or one factor.
    #[arg(
        long,
        value_name = "INI:END:STEP",
        default_value = "100",
        allow_hyphen_values = true
    )]
    pub shrink: String,
    /// Load factors in percent, as --shrink takes factors: inter-arrival
    /// times are divided by the load (150: arrivals 1.5 times as dense),
    /// run times, limits and the machine's events (--events, --failures)
    /// are not. The standard way to study a heavier
    /// or lighter load than the trace's; a sweep runs every load at every
    /// factor.
    #[arg(
        long,
        value_name = "INI:END:STEP",
        default_value = "100",
        allow_hyphen_values = true
    )]
    pub load: String,
    /// Divide every time by this on top of the factor.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speedup: f64,
    /// Cores per trace processor.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cores_per_proc: u32,
    /// Results directory.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// Replace runs already in --out.
    #[arg(long)]
    pub force: bool,
    /// Drive a running controller (with its agents) instead of starting the
    /// config's cluster here; with a backup controller, both, the primary
    /// first, comma-separated: the replay follows a takeover.
    #[arg(long, value_name = "ADDR")]
    pub controller: Option<String>,
    /// Shared secret of --controller [default: the config's].
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Run the virtual-time twin instead: the same policy code, no
    /// processes, perfect timing (results in the same layout).
    #[arg(long)]
    pub simulate: bool,
    /// Draw the charts at the end (`calcmets plot`, into OUT/plots).
    #[arg(long)]
    pub plot: bool,
    /// Where the jobs run: clemu's emulated cluster, or a running Slurm
    /// cluster (sbatch, squeue; `scripts/slurm-local.sh up` makes one),
    /// with the same slice, factors and schedule.
    #[arg(long, value_enum, default_value_t = BackendName::Clemu)]
    pub backend: BackendName,
    /// When jobs are submitted.
    #[arg(long, value_enum, default_value_t = ScheduleMode::Trace)]
    pub schedule: ScheduleMode,
    /// groups: jobs submitted at once at the start.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup_jobs: usize,
    /// groups: seconds before the first group.
    #[arg(long, value_name = "SECONDS", default_value = "0")]
    pub warmup: String,
    /// groups: jobs per group.
    #[arg(long, value_name = "G", default_value_t = 1)]
    pub group: usize,
    /// groups: seconds between groups (shrunk with the run; not sped up:
    /// the group schedule is in replay time).
    #[arg(long, value_name = "SECONDS", default_value = "1")]
    pub period: String,
    /// groups: seconds added to every period (not shrunk).
    #[arg(long, value_name = "SECONDS", default_value = "0")]
    pub drift: String,
    /// τ of the bounded slowdown in the metrics, in trace seconds (shrunk
    /// and sped up with each run).
    #[arg(long, value_name = "SECONDS", default_value = "10")]
    pub tau: String,
    /// Send jobs to a partition other than the default: NAME:COND[,COND],
    /// where COND is cores<=N or walltime<=SECONDS (the trace's limit).
    /// Repeatable; a job goes to the first route it meets and fits.
    #[arg(long, value_name = "NAME:COND")]
    pub route: Vec<String>,
    /// Jobs the trace marks cancelled (SWF status 5): `replay` cancels
    /// each at the delay after its submission at which it was cancelled
    /// in the trace, started or not; `skip` leaves them out; `run` runs
    /// them as if they had completed.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Cancelled::Replay)]
    pub cancelled: Cancelled,
    /// Jobs the trace saw fail (SWF status 0), which held their cores as
    /// the others did but which the trace's own metrics leave out: `run`
    /// runs them for the run time the trace gives, as if they completed;
    /// `skip` leaves them out. `calcmets --swf TRACE RUN` counts the
    /// trace's jobs the way the run did.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Failed::Run)]
    pub failed: Failed,
    /// Events to apply during the replay, at their trace instants (shrunk
    /// like the jobs): nodes down and up, drains, cancellations. Batsim's
    /// external events (JSON lines), or lines `TIME down|up|drain|undrain
    /// NODESET [REASON]` and `TIME cancel JOB`.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Generated node failures: each node fails after an exponential time
    /// of mean MTBF trace seconds and is back after one of mean MTTR;
    /// the same seed gives the same failures.
    #[arg(long, value_name = "mtbf=S,mttr=S,seed=N")]
    pub failures: Option<String>,
    /// User feedback: a job that followed another (SWF field 17) is
    /// submitted its think time (field 18) after that job ends in this
    /// run, not at its trace instant.
    #[arg(long)]
    pub feedback: bool,
    /// Run each factor and load N times, each run in a directory of its
    /// own (OUT/shrink-100/r01, ...): calcmets then gives each figure as
    /// the mean of the runs with its 95 % interval. For policies that
    /// suspend, where a millisecond changes who is suspended, a single run
    /// says little.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub replicas: u32,
    /// The twin only: perturb its processes' starts, suspensions,
    /// resumptions and ends, and the passes its arrivals call, by delays
    /// drawn from those an emulated run measured (its latency.csv; DIR a
    /// results directory, or one holding several), so that its replicas
    /// spread as the emulation's do.
    #[arg(long, value_name = "DIR")]
    pub latencies: Option<PathBuf>,
    /// The seed the twin's perturbations are drawn from (replica k draws
    /// from SEED + k - 1): the same seed, the same runs.
    #[arg(long, value_name = "SEED", default_value_t = 1)]
    pub seed: u64,
    /// Malformed trace lines are an error, not a warning.
    #[arg(long)]
    pub strict: bool,
    /// No progress: no bar on a terminal, no line every few seconds off one.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// More log output (-v, -vv); RUST_LOG also works.
    #[arg(long, short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Where the jobs of a replay run (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendName {
    Clemu,
    Slurm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleMode {
    /// Each job at its own (shrunk) submit time.
    Trace,
    /// Warm-up jobs at once, then groups at a fixed period.
    Groups,
}

/// Factors in percent from INI:END:STEP, or a single number.
pub fn factors(s: &str) -> Result<Vec<f64>> {
    percents("--shrink", "factor", s)
}

/// Load factors in percent (`--load`), as `--shrink` takes factors.
pub fn loads(s: &str) -> Result<Vec<f64>> {
    percents("--load", "load", s)
}

/// Percentages from INI:END:STEP, or a single number, as fractions (1.0
/// for 100 %), each to a thousandth of a percent: `flag` and `what` name
/// them in messages.
fn percents(flag: &str, what: &str, s: &str) -> Result<Vec<f64>> {
    let parts: Vec<&str> = s.split(':').collect();
    let number = |p: &str| -> Result<f64> {
        p.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| anyhow!("{flag} {s}: {p:?} is not a number"))
    };
    // Quoted as typed: "-50", not what a float prints of it.
    let percent = |p: &str| -> Result<f64> {
        let v = number(p)?;
        if !(v > 0.0 && v <= 1000.0) {
            bail!(
                "{flag} {s}: {} is not a {what}: {what}s are percentages in (0, 1000]",
                p.trim()
            );
        }
        Ok(v)
    };
    let out: Vec<f64> = match parts.as_slice() {
        [one] => vec![percent(one)?],
        [ini, end, step] => {
            let (ini, end) = (percent(ini)?, percent(end)?);
            let step = number(step)?;
            if step <= 0.0 {
                bail!(
                    "{flag} {s}: the step {} must be a positive number of percent",
                    parts[2].trim()
                );
            }
            let n = ((ini - end).abs() / step + 1e-9).floor() as usize + 1;
            let dir = if end < ini { -1.0 } else { 1.0 };
            let out: Vec<f64> = (0..n).map(|k| ini + dir * step * k as f64).collect();
            // A range ends at its END: one that steps past it would drop
            // the very value a sweep was asked to end on.
            let last = out.last().copied().unwrap_or(ini);
            if (last - end).abs() > 1e-6 {
                bail!(
                    "{flag} {s}: steps of {} from {} do not reach {}: the last would be {}; \
                     give an END the steps reach, or another STEP",
                    parts[2].trim(),
                    parts[0].trim(),
                    parts[1].trim(),
                    (last * 1000.0).round() / 1000.0
                );
            }
            out
        }
        _ => bail!("{flag}: expected INI:END:STEP or one {what} in percent, got {s:?}"),
    };
    // Each to a thousandth of a percent, and each its own directory.
    let out: Vec<f64> = out
        .into_iter()
        .map(|p| (p * 1000.0).round() / 1000.0 / 100.0)
        .collect();
    let mut labels: Vec<String> = out.iter().map(|&f| crate::run::percent_label(f)).collect();
    labels.sort();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        bail!(
            "{flag}: two {what}s would share {w0} (they are kept to a thousandth of a percent)",
            w0 = w[0]
        );
    }
    Ok(out)
}

/// The delays of every `latency.csv` under `dir` (an emulated run's
/// results directory, or one holding several), for the twin to draw from.
fn read_latencies(dir: &std::path::Path, seed: u64) -> Result<controller::sim::Perturb> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d)
            .with_context(|| format!("--latencies: cannot list {}", d.display()))?;
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p
                .file_name()
                .is_some_and(|n| n == formats::results::LATENCY)
            {
                files.push(p);
            }
        }
    }
    if files.is_empty() {
        bail!(
            "--latencies {}: no {} in it (an emulated replay writes one in each run's directory)",
            dir.display(),
            formats::results::LATENCY
        );
    }
    let mut p = controller::sim::Perturb {
        seed,
        ..Default::default()
    };
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        for (n, line) in text.lines().enumerate().skip(1) {
            let bad = || anyhow!("{}:{}: not KIND,NANOSECONDS: {line:?}", f.display(), n + 1);
            let (kind, ns) = line.split_once(',').ok_or_else(bad)?;
            let ns: i64 = ns.trim().parse().map_err(|_| bad())?;
            match kind {
                "start" => p.start.push(ns),
                "suspend" => p.suspend.push(ns),
                "resume" => p.resume.push(ns),
                "end" => p.end.push(ns),
                "arrive" => p.arrive.push(ns),
                // Written by runs whose records ended a sleep when its
                // process woke: that wake-up, now in `end`.
                "overrun" => {}
                _ => return Err(bad()),
            }
        }
    }
    Ok(p)
}

fn seconds(flag: &str, s: &str) -> Result<i64> {
    // A duration fits i64 nanoseconds by construction.
    formats::seconds::duration_ns(s)
        .map(|ns| ns as i64)
        .map_err(|e| anyhow!("{flag}: {e}"))
}

/// Checks the command line and reads the trace slice.
pub fn plan(cli: &Cli) -> Result<(Plan, Vec<String>)> {
    if cli.backend == BackendName::Slurm && (cli.simulate || cli.controller.is_some()) {
        bail!("--backend slurm submits to Slurm: it takes neither --simulate nor --controller");
    }
    if cli.backend == BackendName::Slurm && (cli.events.is_some() || cli.failures.is_some()) {
        bail!(
            "--events and --failures act on clemu's nodes; replay with clemu or its twin to \
             apply them"
        );
    }
    if cli.backend == BackendName::Slurm && cli.feedback {
        bail!(
            "--feedback submits a job a think time after another ends, which Slurm cannot be \
             asked to do; replay with clemu or its twin"
        );
    }
    if cli.simulate && cli.controller.is_some() {
        bail!("--simulate runs the config's cluster in virtual time; it takes no --controller");
    }
    if !(cli.speedup > 0.0 && cli.speedup.is_finite()) {
        bail!("--speedup must be a positive number");
    }
    if cli.cores_per_proc == 0 {
        bail!("--cores-per-proc must be at least 1");
    }
    if cli.jobs == Some(0) {
        bail!("--jobs 0 would replay nothing: give at least 1, or leave it out to replay them all");
    }
    let config = controller::config::Cluster::load(&cli.config)?;
    if cli.backend == BackendName::Slurm && !config.trace_gres.is_empty() {
        bail!(
            "{}: [[workload.gres]] gives trace jobs generic resources, which the Slurm backend \
             does not ask of Slurm; replay with clemu or its twin",
            cli.config.display()
        );
    }
    let default = config
        .partitions
        .iter()
        .find(|p| p.default)
        .map(|p| config.partition_cores(p))
        .unwrap_or(0);
    let routes = cli
        .route
        .iter()
        .map(|r| crate::route::Route::parse(r, &config))
        .collect::<Result<Vec<_>>>()?;
    let mut slice = trace::read(
        &cli.workload,
        &SliceSpec {
            skip: cli.skip,
            take: cli.jobs,
            cores_per_proc: cli.cores_per_proc,
            max_cores: default,
            cancelled: cli.cancelled,
            failed: cli.failed,
        },
    )?;
    // A job asking generic resources of each node (`[[workload.gres]]`)
    // can only go to nodes that have them: one larger than those is too
    // large for this cluster, as one larger than the partition is.
    let before = slice.jobs.len();
    slice.jobs.retain(|j| {
        let asks = j.gres(&config);
        if asks.is_empty() {
            return true;
        }
        let p = crate::route::partition_of(&routes, j, &config)
            .and_then(|name| config.partitions.iter().find(|p| p.name == name))
            .or_else(|| config.partitions.iter().find(|p| p.default));
        p.is_some_and(|p| config.gres_cores(p, &asks) >= u64::from(j.cores))
    });
    slice.too_large += (before - slice.jobs.len()) as u64;
    if slice.jobs.is_empty() {
        bail!(
            "{}: no job of the slice can be replayed: of its {} jobs, {} need more than the {} \
             cores of the cluster's default partition (at --cores-per-proc {}), {} have an \
             unknown run time or size, {} were cancelled in the trace (--cancelled skip) and {} \
             failed in it (--failed skip)",
            cli.workload.display(),
            slice.read,
            slice.too_large,
            default,
            cli.cores_per_proc,
            slice.unknown,
            slice.skipped_cancelled,
            slice.skipped_failed
        );
    }
    let links = if cli.feedback {
        trace::feedback_links(&slice, &cli.workload)?
    } else {
        vec![None; slice.jobs.len()]
    };
    let mut events = match &cli.events {
        Some(path) => crate::events::read(path, &config, &slice)?,
        None => Vec::new(),
    };
    let failures = cli
        .failures
        .as_deref()
        .map(crate::events::Failures::parse)
        .transpose()?;
    if let Some(f) = &failures {
        // Over the trace's span: from its first submission to its last
        // job's end.
        let from = slice.jobs.iter().map(|j| j.submit_ns).min().unwrap_or(0);
        let to = slice
            .jobs
            .iter()
            .map(|j| {
                j.submit_ns
                    .saturating_add(j.run_ns.min(i64::MAX as u64) as i64)
            })
            .max()
            .unwrap_or(0);
        events.extend(f.generate(&config, from, to));
        // In time order, those of the file first at one instant.
        events.sort_by_key(|e| e.at_ns);
    }
    let warnings = slice.warnings.clone();
    if cli.strict && !warnings.is_empty() {
        bail!(
            "{} (and {} more malformed lines; --strict)",
            warnings[0],
            warnings.len() - 1
        );
    }
    let schedule = match cli.schedule {
        ScheduleMode::Trace => Schedule::Trace,
        ScheduleMode::Groups if cli.load != "100" => bail!(
            "--load scales the trace's inter-arrival times; --schedule groups submits at a \
             period of its own (--period): give one or the other"
        ),
        ScheduleMode::Groups => {
            if cli.group == 0 {
                bail!("--group must be at least 1");
            }
            Schedule::Groups {
                warmup_jobs: cli.warmup_jobs,
                warmup_ns: seconds("--warmup", &cli.warmup)?,
                group: cli.group,
                period_ns: seconds("--period", &cli.period)?,
                drift_ns: seconds("--drift", &cli.drift)?,
            }
        }
    };
    let remote = match &cli.controller {
        None => None,
        Some(addr) => {
            let path = cli
                .secret_file
                .clone()
                .unwrap_or_else(|| config.secret_file.clone());
            let secret = formats::wire::read_secret(&path)
                .map_err(|e| anyhow!(e))
                .context("--controller needs the cluster's secret (--secret-file)")?;
            Some(Remote {
                addr: addr.clone(),
                secret,
            })
        }
    };
    if cli.latencies.is_some() && !cli.simulate {
        bail!(
            "--latencies perturbs the twin (--simulate); an emulated replay has the host's own \
             delays"
        );
    }
    if cli.simulate && cli.replicas > 1 && cli.latencies.is_none() {
        bail!(
            "the twin is deterministic: its {} replicas would be one run {} times. Give \
             --latencies DIR, an emulated run of this replay, for each replica to be perturbed \
             by delays drawn from those it measured",
            cli.replicas,
            cli.replicas
        );
    }
    let perturb = cli
        .latencies
        .as_deref()
        .map(|dir| read_latencies(dir, cli.seed).map(|p| (p, dir.display().to_string())))
        .transpose()?;
    let plan = Plan {
        replicas: cli.replicas,
        perturb,
        routes,
        config_path: cli.config.clone(),
        config,
        workload: cli.workload.clone(),
        slice,
        links,
        events,
        events_file: cli.events.clone(),
        failures: cli.failures.clone(),
        feedback: cli.feedback,
        cancelled: cli.cancelled,
        failed: cli.failed,
        skip: cli.skip,
        take: cli.jobs,
        cores_per_proc: cli.cores_per_proc,
        factors: factors(&cli.shrink)?,
        loads: loads(&cli.load)?,
        speedup: cli.speedup,
        schedule,
        out: cli.out.clone(),
        force: cli.force,
        // A bar or lines: main knows whether standard error is a
        // terminal.
        progress: if cli.quiet {
            crate::progress::Mode::Off
        } else {
            crate::progress::Mode::Lines
        },
        tau_ns: seconds("--tau", &cli.tau)?,
        backend: match cli.backend {
            BackendName::Slurm => Box::new(Slurm) as Box<dyn Backend>,
            BackendName::Clemu if cli.simulate => Box::new(Twin),
            BackendName::Clemu => Box::new(Clemu { remote }),
        },
    };
    let mut warnings = warnings;
    if let Some(o) = plan.slice.out_of_order {
        warnings.push(format!(
            "{}:{}: submitted at {} s, before line {} ({} s): {} job line(s) of the slice are out \
             of submit order, as SWF does not allow; each is replayed at its own submit time",
            cli.workload.display(),
            o.line,
            o.submit_ns / 1_000_000_000,
            o.after_line,
            o.after_ns / 1_000_000_000,
            o.lines
        ));
    }
    if !plan.backend.virtual_time() {
        let mut notes = Vec::new();
        if plan.backend.runs_scaled_config() {
            notes = short_slices(&plan.config, &plan.factors, plan.speedup);
            notes.extend(visible_floor(
                &plan.config,
                &plan.factors,
                plan.speedup,
                plan.tau_ns,
            ));
        }
        notes.extend(short_jobs(
            &plan.slice.jobs,
            &plan.factors,
            plan.speedup,
            plan.tau_ns,
        ));
        warnings.splice(0..0, notes);
    }
    Ok((plan, warnings))
}

/// Below this much wall clock a job's wait and slowdown are the host's
/// more than the trace's: a launch nobody prepared can take longer than
/// the job's whole run (the rest is waiting), and a process woken at its
/// deadline, 0.05 ms late at the median but up to 1-2 ms on a busy host,
/// holds its cores that much longer (docs/policies.md).
const SHORTEST_RUN: std::time::Duration = std::time::Duration::from_millis(2);

/// A warning when more than 1 % of the jobs would run shorter than
/// [`SHORTEST_RUN`], naming the `--tau` that keeps the bounded slowdown
/// clear of them.
fn short_jobs(jobs: &[TraceJob], factors: &[f64], speedup: f64, tau_ns: i64) -> Option<String> {
    let factor = factors.iter().copied().min_by(f64::total_cmp)?;
    let scale = crate::schedule::Scale { factor, speedup };
    let floor = SHORTEST_RUN.as_nanos() as u64;
    let short = jobs
        .iter()
        .filter(|j| scale.apply_u(j.run_ns) < floor)
        .count();
    if short * 100 <= jobs.len() {
        return None;
    }
    let tau_wall = scale.apply(tau_ns) as f64 / 1e6;
    let tau_hint = if tau_wall < SHORTEST_RUN.as_secs_f64() * 1e3 {
        format!(
            "; the bounded slowdown's tau ({} trace s, {tau_wall:.3} ms here) keeps clear of them from --tau {:.0}",
            tau_ns as f64 / 1e9,
            (SHORTEST_RUN.as_secs_f64() * speedup / factor).ceil()
        )
    } else {
        String::new()
    };
    Some(format!(
        "{short} of {} jobs run less than {} ms of wall clock at factor {factor} and speedup {speedup}: \
         a real process's launch can take longer than such a job runs (the rest counts as waiting), and \
         it wakes up to a millisecond or two late on a busy host (its cores held that long), so their \
         waits and slowdowns are the host's more than the trace's{tau_hint}",
        jobs.len(),
        SHORTEST_RUN.as_millis()
    ))
}

/// A warning when the emulation's wall-clock floor between passes
/// (`pass_floor_ms`), which a replay does not scale, comes to a visible
/// share (1 %) of the scheduling interval in trace seconds, or, with a
/// pass after every event, of the bounded slowdown's τ: then passes come
/// later than the twin's, by that much of the trace.
fn visible_floor(
    config: &controller::config::Cluster,
    factors: &[f64],
    speedup: f64,
    tau_ns: i64,
) -> Option<String> {
    let factor = factors.iter().copied().min_by(f64::total_cmp)?;
    let floor_trace_s = config.pass_floor.as_secs_f64() * speedup / factor;
    let interval_s = config.schedule_interval.as_secs_f64();
    let (against, what) = if interval_s > 0.0 {
        (
            interval_s,
            format!("the scheduling interval of {interval_s} trace s"),
        )
    } else {
        (
            tau_ns as f64 / 1e9,
            format!(
                "the bounded slowdown's tau of {} trace s (passes after every event)",
                tau_ns as f64 / 1e9
            ),
        )
    };
    (floor_trace_s > against / 100.0).then(|| {
        format!(
            "pass_floor_ms = {} of wall clock is {:.3} trace s at factor {factor} and speedup \
             {speedup}, {:.0} % of {what}: the emulation's passes come that much later than the \
             twin's. A smaller floor, or a smaller speed-up, holds",
            config.pass_floor.as_secs_f64() * 1e3,
            floor_trace_s,
            floor_trace_s / against * 100.0
        )
    })
}

/// Gang slices a replay would scale below what a turn costs on a real host.
/// A turn may come one scheduling pass late (the interval, scaled, or the
/// emulation's wall-clock floor), and costs a pair of signals; in a slice
/// shorter than 10 passes that is more than a tenth of it, and the run
/// measures turns more than the policy. The twin has no such floor.
fn short_slices(
    config: &controller::config::Cluster,
    factors: &[f64],
    speedup: f64,
) -> Vec<String> {
    let Some(&smallest) = factors.iter().min_by(|a, b| a.total_cmp(b)) else {
        return Vec::new();
    };
    let scale = crate::schedule::Scale {
        factor: smallest,
        speedup,
    };
    let pass = std::time::Duration::from_nanos(
        scale.apply_u(config.schedule_interval.as_nanos().min(u64::MAX as u128) as u64),
    )
    .max(config.pass_floor);
    let floor = (pass * 10).max(std::time::Duration::from_millis(10));
    config
        .partitions
        .iter()
        .filter(|p| p.oversubscribe > 1)
        .filter_map(|p| {
            let wall = scale.duration(p.time_slice);
            (wall < floor).then(|| {
                let need = floor.as_secs_f64() * speedup / smallest;
                format!(
                    "partition {}: its gang time slice of {} trace s runs as {:.3} ms of wall clock at factor {} and speedup {}; \
                     below {} ms (10 scheduling passes) a turn's lateness is more than a tenth of it. \
                     A slice of at least {:.0} trace s (time_slice_s) holds",
                    p.name,
                    p.time_slice.as_secs_f64(),
                    wall.as_secs_f64() * 1e3,
                    smallest,
                    speedup,
                    floor.as_millis(),
                    need.ceil()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replay_warns_of_a_slice_too_short_for_the_host() {
        let config = controller::config::Cluster::from_str(
            "[controller]\npass_floor_ms = 10\n\
             [[nodes]]\nnames = \"n[1-2]\"\ncpus = 4\n\
             [[partitions]]\nname = \"gang\"\nnodes = \"ALL\"\ndefault = true\noversubscribe = 2\ntime_slice_s = 30\n\
             [[partitions]]\nname = \"long\"\nnodes = \"n1\"\noversubscribe = 2\ntime_slice_s = 3000\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let w = super::short_slices(&config, &[1.0, 0.5], 10_000.0);
        // 30 s at 0.5 / 10,000 is 1.5 ms, under 10 passes of 10 ms; 3000 s
        // is 150 ms, which holds.
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("partition gang:") && w[0].contains("1.500 ms"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("at least 2000 trace s"), "{}", w[0]);
        assert!(super::short_slices(&config, &[1.0], 100.0).is_empty());
    }

    #[test]
    fn a_replay_warns_when_the_wall_clock_floor_is_a_visible_share_of_the_interval() {
        let config = |text: &str| {
            controller::config::Cluster::from_str(
                &format!("[controller]\n{text}\n[[nodes]]\nnames = \"n[1-2]\"\ncpus = 4\n"),
                std::path::Path::new("t.toml"),
            )
            .unwrap()
        };
        let tau = 10_000_000_000;
        // No floor: nothing to say.
        assert_eq!(
            super::visible_floor(&config(""), &[1.0], 10_000.0, tau),
            None
        );
        // 0.5 ms at 10,000x is 5 trace s: half of tau with a pass after
        // every event, a twelfth of a 60 s interval.
        let w =
            super::visible_floor(&config("pass_floor_ms = 0.5"), &[1.0], 10_000.0, tau).unwrap();
        assert!(
            w.contains("5.000 trace s") && w.contains("50 % of the bounded"),
            "{w}"
        );
        let w = super::visible_floor(
            &config("pass_floor_ms = 0.5\nschedule_interval_s = 60"),
            &[1.0],
            10_000.0,
            tau,
        )
        .unwrap();
        assert!(
            w.contains("8 % of the scheduling interval of 60 trace s"),
            "{w}"
        );
        // At 10x it is 5 ms of the trace: under 1 %.
        assert_eq!(
            super::visible_floor(&config("pass_floor_ms = 0.5"), &[1.0], 10.0, tau),
            None
        );
    }

    #[test]
    fn a_replay_warns_when_many_jobs_are_shorter_than_a_process_can_honour() {
        let job = |run_s: u64| crate::trace::TraceJob {
            trace_id: 1,
            line: 1,
            submit_ns: 0,
            run_ns: run_s * 1_000_000_000,
            walltime_ns: 0,
            cores: 1,
            cancel_after_ns: None,
            preceding: None,
            trace_run_ns: 0,
            queue: -1,
            partition: -1,
            profile: None,
        };
        // At 0.5 / 10,000, 30 s of the trace is 1.5 ms: short; 3000 s is 150 ms.
        let jobs: Vec<_> = (0..100)
            .map(|i| job(if i < 5 { 30 } else { 3000 }))
            .collect();
        let w = super::short_jobs(&jobs, &[0.5], 10_000.0, 10_000_000_000).unwrap();
        assert!(w.starts_with("5 of 100 jobs run less than 2 ms"), "{w}");
        assert!(w.contains("--tau 40"), "{w}");
        // One in a hundred is within what a replay lives with.
        let few: Vec<_> = (0..100)
            .map(|i| job(if i < 1 { 30 } else { 3000 }))
            .collect();
        assert_eq!(
            super::short_jobs(&few, &[0.5], 10_000.0, 10_000_000_000),
            None
        );
        // A tau already past 2 ms is not mentioned.
        let w = super::short_jobs(&jobs, &[0.5], 10_000.0, 100_000_000_000).unwrap();
        assert!(!w.contains("--tau"), "{w}");
    }

    #[test]
    fn factors_of_a_sweep_get_directories_of_their_own() {
        let label = |f: f64| {
            crate::Point {
                factor: f,
                load: 1.0,
            }
            .label(false, true)
        };
        assert_eq!(label(1.0), "shrink-100");
        assert_eq!(label(0.5), "shrink-050");
        assert_eq!(label(0.995), "shrink-099.5");
        assert_eq!(label(0.0525), "shrink-005.25");
        assert_eq!(label(1.0000001), "shrink-100");
        assert!(super::factors("100:99.9999:0.0001").is_err());
        // A sweep of loads: its own directories, with the factor when that
        // varies too.
        let p = crate::Point {
            factor: 0.5,
            load: 1.5,
        };
        assert_eq!(p.label(true, false), "load-150");
        assert_eq!(p.label(true, true), "shrink-050-load-150");
        assert_eq!(super::loads("100:200:50").unwrap(), [1.0, 1.5, 2.0]);
        let e = super::loads("0").unwrap_err().to_string();
        assert!(e.contains("--load 0: 0 is not a load"), "{e}");
    }

    use super::*;

    #[test]
    fn shrink_sweeps() {
        assert_eq!(
            factors("100:50:10").unwrap(),
            [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
        );
        assert_eq!(factors("100:50:50").unwrap(), [1.0, 0.5]);
        assert_eq!(factors("80").unwrap(), [0.8]);
        assert_eq!(factors("50:100:25").unwrap(), [0.5, 0.75, 1.0]);
        for bad in ["", "x", "100:50", "0", "-5:1:1", "100:50:0"] {
            assert!(factors(bad).is_err(), "{bad:?}");
        }
        // Each message names what is wrong, as typed.
        let e = factors("-50").unwrap_err().to_string();
        assert!(e.contains("-50 is not a factor"), "{e}");
        let e = factors("100:50:0").unwrap_err().to_string();
        assert!(e.contains("the step 0 must be a positive"), "{e}");
        let e = factors("100:50:-10").unwrap_err().to_string();
        assert!(e.contains("the step -10"), "{e}");
        // A range that steps past its end would drop it: refused.
        let e = factors("100:50:30").unwrap_err().to_string();
        assert!(
            e.contains("steps of 30 from 100 do not reach 50: the last would be 70"),
            "{e}"
        );
        assert_eq!(factors("100:40:30").unwrap(), [1.0, 0.7, 0.4]);
    }
}
