//! calcmets's command line (clap derive): what the user typed. `lib.rs`
//! turns it into checked parameters.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::clock::ClockKind;

const EXAMPLES: &str = "\
Examples:
  calcmets results/shrink-100                  metrics of one replay run
  calcmets results/                            every run in it, side by side
  calcmets --swf trace.swf.gz results/shrink-100
                                               a run beside its original trace
  calcmets --cores 57600 --format json jobs.rec
  calcmets --by size --format csv results/
  calcmets dump jobs.rec | head
  calcmets fidelity emulated/shrink-100 simulated/shrink-100
  calcmets export --format batsim --out batsim results/shrink-100

Runs: a directory holding manifest.json (as runworkload leaves one per
shrinking factor) is a run of its own, as is each such directory directly
inside a given one and each --swf trace; other files and directories are
read together as one run. Directories are searched recursively for *.rec.

Exit status: 0 ok, 1 ran but found damaged or malformed input with
--strict, 2 usage or input error.";

#[derive(Debug, Parser)]
#[command(
    name = "calcmets",
    version,
    about = "Scheduling metrics from clemu job records or SWF traces",
    long_about = "Scheduling metrics from clemu job records or SWF traces: wait, response, \
                  slowdown, bounded slowdown, weighted slowdown, utilization, makespan and \
                  suspensions, as defined in docs/design.md (\"Metric definitions\").",
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    // `--tau -1` reaches the checks that say what is wrong with it.
    allow_negative_numbers = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every record as one JSON object per line.
    Dump(DumpArgs),
    /// Compare two runs of one replay, typically an emulated run with its
    /// virtual-time twin (`runworkload --simulate`): per-job differences and
    /// the metrics side by side, in trace seconds. Runs of another slice,
    /// factor, load, config or policy are refused with what differs.
    Fidelity(FidelityArgs),
    /// Write a run as another tool's results: `--format batsim` writes
    /// Batsim's jobs.csv and schedule.json, which evalys reads.
    Export(ExportArgs),
    /// Draw charts (SVG): utilization and queue over time and jobs on
    /// nodes for each run; distributions of wait and bounded slowdown and
    /// bounded slowdown by job size across runs.
    Plot(PlotCli),
}

#[derive(Debug, Args)]
pub struct PlotCli {
    /// Directory the charts are written to.
    #[arg(long, value_name = "DIR", default_value = "plots")]
    pub out: PathBuf,
    /// Total cores, for utilization [default: each run's manifest.json].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub cores: Option<u64>,
    /// τ of the bounded slowdown, in seconds of the clock drawn [default:
    /// the run's manifest.json, else 10].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub tau: Option<i64>,
    /// The clock of the time axes and waits: `trace` (the workload's
    /// seconds) or `wall` (the records' own) [default: trace for results
    /// directories, wall for loose record files].
    #[arg(long, value_enum)]
    pub clock: Option<ClockKind>,
    /// Time window of the Gantt chart, in seconds since the run's first
    /// submission, in the clock drawn [default: the whole run].
    #[arg(long, value_name = "T0:T1", value_parser = plot_window, allow_hyphen_values = true)]
    pub window: Option<(f64, f64)>,
    /// Nodes of the Gantt chart, as a nodeset [default: the first 64 nodes
    /// that ran jobs].
    #[arg(long, value_name = "NODESET")]
    pub nodes: Option<String>,
    /// Results directories (one per run, as runworkload leaves them; a
    /// directory holding several is several runs) or record files.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
}

fn plot_window(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected T0:T1 in seconds, got {s:?}"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("not a number of seconds: {v:?}"))
    };
    let (a, b) = (num(a)?, num(b)?);
    if b <= a {
        return Err(format!("T1 must be after T0 in {s:?}"));
    }
    Ok((a, b))
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// What to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Directory the files are written to (created if need be).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The clock of the times written: `trace`, the trace's seconds
    /// (× speedup ÷ factor), as a Batsim scheduler saw them, or `wall`,
    /// the run's own.
    #[arg(long, value_enum, default_value_t = ClockKind::Trace)]
    pub clock: ClockKind,
    /// The same as `--clock trace` (the default), for scripts written
    /// before it was.
    #[arg(long, hide = true)]
    pub trace_time: bool,
    /// The results directory of one run.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Batsim's jobs.csv (its columns, in its order; clemu's after) and
    /// schedule.json.
    Batsim,
}

#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The clock of every time: `trace` (the workload's seconds) or
    /// `wall` (each run's own).
    #[arg(long, value_enum, default_value_t = ClockKind::Trace)]
    pub clock: ClockKind,
    /// Compare runs that are not the same replay (another slice, factor,
    /// load, config or policy), saying what differs.
    #[arg(long)]
    pub force: bool,
    /// Also list the N jobs whose starts differ most between the two runs:
    /// each one's wait in both and its share of the summed start
    /// differences (a mean wait apart is often a few jobs that took
    /// another turn).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub worst: usize,
    /// Results directory of one run (typically the emulated one).
    pub a: PathBuf,
    /// Results directory of the other (typically its twin, `runworkload
    /// --simulate`).
    pub b: PathBuf,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// τ of the bounded slowdown, in seconds of the clock the figures are
    /// in [default: the run's manifest.json, else 10].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub tau: Option<i64>,
    /// Total cores of the cluster, for utilization [default: the run's
    /// manifest.json, or the trace's MaxProcs, else MaxNodes].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub cores: Option<u64>,
    /// Devices of each generic resource in the cluster, for their
    /// utilization: NAME=N, comma-separated (`gpu=64,fpga=8`) [default:
    /// the run's manifest.json].
    #[arg(long, value_name = "NAME=N[,NAME=N]", value_parser = resources)]
    pub resources: Option<ResourceCounts>,
    /// Keep the jobs submitted in [T0, T1) and count, for utilization, only
    /// the executed core-seconds inside it. Seconds of the clock the
    /// figures are in: in trace seconds since the trace's start (as SWF
    /// submit times are) for traces and replays, since the Unix epoch for
    /// records in the wall clock.
    #[arg(long, value_name = "T0:T1", value_parser = window, allow_hyphen_values = true)]
    pub window: Option<(i64, i64)>,
    /// Break the metrics down: by job-size class (`size`: 1, 2, 3-4, 5-8,
    /// ... cores), or, for results directories, into the jobs an event of
    /// the replay hit and the others (`events`: `runworkload --events`,
    /// `--failures`).
    #[arg(long, value_enum, value_name = "size|events")]
    pub by: Option<By>,
    /// Read a workload trace (SWF, plain or gzip) as a run of its own; may
    /// be repeated.
    #[arg(long = "swf", value_name = "TRACE")]
    pub swf: Vec<PathBuf>,
    /// Which jobs count: `completed` (records: status completed; SWF:
    /// status 1 or -1) or `all` (every status; SWF: every non-partial line).
    #[arg(long, value_enum, default_value_t = StatusFilter::Completed)]
    pub status: StatusFilter,
    /// The clock of every time printed: `trace`, the workload's seconds
    /// (a replay's times × speedup ÷ factor), or `wall`, the records' own
    /// [default: trace for results directories and traces, wall for loose
    /// record files].
    #[arg(long, value_enum)]
    pub clock: Option<ClockKind>,
    /// Read every record input as one run, even results directories.
    #[arg(long)]
    pub merge: bool,
    /// Exit with status 1 on any warning (damaged frames, malformed lines).
    #[arg(long)]
    pub strict: bool,
    /// Record files, directories (searched recursively for *.rec) or results
    /// directories; `-` reads records from standard input.
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Size,
    Events,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    Completed,
    All,
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = DumpFormat::Jsonl)]
    pub format: DumpFormat,
    /// Exit with status 1 if any input holds damaged frames.
    #[arg(long)]
    pub strict: bool,
    /// Record files, or directories searched recursively for `*.rec`; `-`
    /// reads standard input.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DumpFormat {
    /// One JSON object per line.
    Jsonl,
}

fn seconds(s: &str) -> Result<i64, String> {
    // A duration fits i64 nanoseconds by construction.
    formats::seconds::duration_ns(s).map(|ns| ns as i64)
}

fn window(s: &str) -> Result<(i64, i64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected T0:T1, got {s:?}"))?;
    let parse = |v: &str| {
        formats::seconds::parse_ns(v).ok_or_else(|| format!("{v:?} is not a time in seconds"))
    };
    let (t0, t1) = (parse(a)?, parse(b)?);
    if t1 <= t0 {
        return Err(format!("the window {s:?} ends before it starts"));
    }
    Ok((t0, t1))
}

/// `--resources gpu=64,fpga=8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceCounts(pub std::collections::BTreeMap<String, u64>);

fn resources(s: &str) -> Result<ResourceCounts, String> {
    let mut out = std::collections::BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, n) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not NAME=N"))?;
        let n: u64 = n
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{item:?}: the count must be a positive integer"))?;
        out.insert(name.to_string(), n);
    }
    if out.is_empty() {
        return Err("give NAME=N".into());
    }
    Ok(ResourceCounts(out))
}
