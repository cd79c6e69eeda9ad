//! calcmets: how every clemu result is read.
//!
//! # How it works
//!
//! [`runs`] groups the command line into runs (a results directory, a trace,
//! or the remaining record files together). Each run is streamed, never
//! loaded whole: records through the [`formats::record`] decoder (damaged
//! frames are counted per file and kind; a file with no readable record in
//! it is an error), traces through [`formats::swf`] on every core
//! ([`trace`]; malformed lines become warnings naming the line, and a file
//! whose lines are mostly malformed is an error). A results directory's
//! [`results::Book`] says which records are its own and whether the run
//! finished; the others are counted apart, and said.
//! Every job goes through one
//! [`metrics::Accum`], which applies docs/design.md's metric definitions with
//! integer sums and [`dist::Dist`] distributions (exact up to 65,536 jobs,
//! an HDR histogram past that), so memory does not grow with the input, and
//! counts what it leaves out by reason (a note on standard error says what,
//! and how to count it).
//! [`report`] prints the runs side by side as a table, JSON or CSV;
//! [`dump`] prints records as JSON lines; [`fidelity`] compares a run with
//! its twin; [`export`] writes a run as Batsim's results; [`plot`] loads the runs' jobs (the one place they are held in
//! memory) and draws SVG charts, aggregated so they stay legible.
//!
//! The binary is a thin `main.rs`: [`run`] returns an [`Outcome`] and `main`
//! maps it to the exit code (0 ok, 1 ran but found a problem with
//! `--strict`, 2 usage or input error; a closed pipe counts as success).

pub mod alike;
pub mod cli;
pub mod clock;
pub mod dist;
pub mod dump;
pub mod export;
pub mod fidelity;
pub mod inputs;
pub mod metrics;
pub mod plot;
pub mod replicas;
pub mod report;
pub mod results;
pub mod runs;
pub mod trace;

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use formats::record::{JobRecord, Status, Suspension};

use crate::cli::{By, Cli, Command, DumpArgs, Format, MetricsArgs, StatusFilter};
use crate::metrics::{Accum, Damage, Exclusion, JobView, Params, Summary};
use crate::report::Named;
use crate::runs::{Run, RunInput};

/// How a run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything read was sound, or problems were only warned about.
    Clean,
    /// Input had damage or malformed lines and `--strict` was given.
    Problems,
}

/// Warnings are printed one per line on standard error; past this many,
/// only their number.
const MAX_WARNINGS_SHOWN: usize = 20;

/// τ of the bounded slowdown when neither `--tau` nor a manifest says.
pub const DEFAULT_TAU_NS: i64 = 10_000_000_000;

pub fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Some(Command::Dump(args)) => dump_records(&args),
        Some(Command::Plot(args)) => {
            let written = plot::plot(&plot::PlotArgs {
                out: args.out,
                inputs: args.inputs,
                cores: args.cores,
                tau_ns: args.tau,
                window: args.window,
                nodes: args.nodes,
                clock: args.clock,
            })?;
            for path in written {
                println!("{}", path.display());
            }
            Ok(Outcome::Clean)
        }
        Some(Command::Export(args)) => {
            let cli::ExportFormat::Batsim = args.format;
            let clock = if args.trace_time {
                clock::ClockKind::Trace
            } else {
                args.clock
            };
            let done = export::batsim(&args.run, &args.out, clock)?;
            for path in &done.files {
                println!("{}", path.display());
            }
            // A schedule of a run that did not finish is not one of its
            // workload: said, as calcmets and plot say it.
            let book = results::Book::open(&args.run)?;
            if let Some(w) =
                book.unfinished_warning(&args.run.display().to_string(), done.completed)
            {
                eprintln!("calcmets: warning: {w}");
            }
            if done.overlapping > 0 {
                eprintln!(
                    "calcmets: note: {} of the {} jobs shared cores with others over their run \
                     (time-slicing or suspension): their allocated_resources overlap",
                    done.overlapping, done.jobs
                );
            }
            Ok(Outcome::Clean)
        }
        Some(Command::Fidelity(args)) => {
            let mut out = io::stdout().lock();
            let same_jobs = fidelity::compare(
                &args.a,
                &args.b,
                &fidelity::Options {
                    json: args.format == Format::Json,
                    force: args.force,
                    clock: args.clock,
                    worst: args.worst,
                },
                &mut out,
            )?;
            out.flush()?;
            Ok(if same_jobs {
                Outcome::Clean
            } else {
                Outcome::Problems
            })
        }
        None => metrics_of(&cli.metrics),
    }
}

fn metrics_of(args: &MetricsArgs) -> Result<Outcome> {
    if args.inputs.is_empty() && args.swf.is_empty() {
        bail!("nothing to read: give record files or directories, or --swf TRACE (see --help)");
    }
    let mut warnings = Vec::new();
    let plan = runs::plan(&args.inputs, &args.swf, args.merge, &mut warnings)?;
    let clocks = runs::clocks(&plan, args.clock)?;
    // A trace beside replays of it is counted as they replayed it: the
    // same jobs, the same statuses counted, the same cores.
    let replay_dirs: Vec<&Path> = plan
        .iter()
        .flat_map(|r| match &r.input {
            RunInput::Replicas(set) => set.iter().collect::<Vec<_>>(),
            _ => vec![r],
        })
        .filter_map(|r| r.dir.as_deref())
        .collect();
    let mut results = Vec::with_capacity(plan.len());
    let mut notes = Vec::new();
    for (run, clock) in plan.iter().zip(&clocks) {
        // τ and the window are given in the clock the figures are in;
        // the metrics are computed in the records' own.
        let tau_ns = run.tau_ns(clock.kind, args.tau);
        // The host's delays are weighed against τ in trace seconds.
        let tau_trace_s = match (clock.kind, args.tau, run.trace_clock) {
            (clock::ClockKind::Trace, _, _) => tau_ns as f64 / 1e9,
            (clock::ClockKind::Wall, Some(t), Some(c)) => t as f64 / 1e9 * c.scale,
            (clock::ClockKind::Wall, _, _) => {
                run.tau_ns(clock::ClockKind::Trace, None) as f64 / 1e9
            }
        };
        warnings.extend(run.latency_warning(tau_trace_s));
        let params = Params {
            tau_ns: clock.records_duration_ns(tau_ns),
            window: args
                .window
                .map(|(a, b)| (clock.records_instant_ns(a), clock.records_instant_ns(b))),
            by_size: args.by == Some(By::Size),
        };
        // With --by events, a results directory is read as two runs: the
        // jobs an event hit, and the others.
        let parts: &[(Option<bool>, &str)] = match (args.by, &run.input, &run.dir) {
            (Some(By::Events), RunInput::Records(_), Some(dir))
                if formats::results::Manifest::read(dir).is_ok_and(|m| m.events.is_none()) =>
            {
                bail!(
                    "{}: --by events: the run had no events (runworkload --events or \
                     --failures), so no job to set apart",
                    run.name
                )
            }
            (Some(By::Events), RunInput::Records(_), Some(_)) => &[
                (Some(true), " (hit by events)"),
                (Some(false), " (untouched)"),
            ],
            (Some(By::Events), _, _) => bail!(
                "{}: --by events needs a results directory of runworkload (its jobs.csv says \
                 which jobs the events hit)",
                run.name
            ),
            _ => &[(None, "")],
        };
        for &(part, suffix) in parts {
            let tau_s = tau_ns as f64 / 1e9;
            let (summary, members) = match &run.input {
                RunInput::Records(sources) => (
                    records_run(run, sources, args, &params, part, &mut warnings)?
                        .in_clock(clock, tau_s),
                    Vec::new(),
                ),
                RunInput::Swf(path) => (
                    swf_run(path, args, &params, &replay_dirs, &mut notes, &mut warnings)?
                        .in_clock(clock, tau_s),
                    Vec::new(),
                ),
                RunInput::Replicas(set) => {
                    // Each replica in its own clock (they started at
                    // different instants), the same kind as the others'.
                    let mut members = Vec::with_capacity(set.len());
                    for m in set {
                        let RunInput::Records(sources) = &m.input else {
                            continue;
                        };
                        let own = match clock.kind {
                            clock::ClockKind::Trace => m.trace_clock.unwrap_or(*clock),
                            clock::ClockKind::Wall => clock::Clock::wall(),
                        };
                        members.push(
                            records_run(m, sources, args, &params, part, &mut warnings)?
                                .in_clock(&own, tau_s),
                        );
                    }
                    (members[0].clone(), members)
                }
            };
            let name = format!("{}{suffix}", run.name);
            if let (Some((t0, t1)), 0) = (args.window, summary.jobs) {
                warnings.push(format!(
                    "{name}: no job counts in the window {}:{}, in {} seconds ({}): is it \
                     in the other clock?",
                    t0 as f64 / 1e9,
                    t1 as f64 / 1e9,
                    clock.kind.as_str(),
                    match clock.kind {
                        clock::ClockKind::Trace => "since the trace's start",
                        clock::ClockKind::Wall => "since the Unix epoch",
                    }
                ));
            }
            notes.extend(exclusion_note(
                &name,
                &summary,
                args.status == StatusFilter::All,
            ));
            results.push(Named {
                name,
                summary,
                members,
            });
        }
    }

    let stdout = io::stdout().lock();
    let mut out = BufWriter::new(stdout);
    match args.format {
        Format::Table => report::table(&mut out, &results)?,
        Format::Json => report::json(&mut out, &results)?,
        Format::Csv => report::csv(&mut out, &results)?,
    }
    out.flush()?;
    for n in &notes {
        eprintln!("calcmets: note: {n}");
    }
    print_warnings(&warnings);
    Ok(if args.strict && !warnings.is_empty() {
        Outcome::Problems
    } else {
        Outcome::Clean
    })
}

fn records_run(
    run: &Run,
    sources: &[inputs::Source],
    args: &MetricsArgs,
    params: &Params,
    part: Option<bool>,
    warnings: &mut Vec<String>,
) -> Result<Summary> {
    // Ask for the core count before reading: a long read that ends in
    // "cannot compute utilization" would waste the user's time. But a
    // file that is no record file at all is said to be that first: no
    // core count would make it one.
    if args.cores.or(run.manifest_cores).is_none() {
        for s in sources {
            if let inputs::Source::File(path) = s {
                if !inputs::starts_with_a_record(path) {
                    inputs::for_each_record(std::slice::from_ref(s), |_| Ok(()))?;
                }
            }
        }
    }
    let cores = args.cores.or(run.manifest_cores).ok_or_else(|| {
        anyhow!(
            "{}: utilization needs the cluster's total cores: pass --cores N \
             (no manifest.json with \"cores\" was found)",
            run.name
        )
    })?;
    let mut book = run.dir.as_deref().map(results::Book::open).transpose()?;
    if let (Some(b), Some(hit)) = (&mut book, part) {
        b.select(hit);
    }
    let capacities = match &args.resources {
        Some(r) => r.0.clone(),
        None => run.manifest_resources.clone(),
    };
    let summary = summarize_records(
        sources,
        params,
        cores,
        capacities,
        args.status == StatusFilter::All,
        book.as_ref(),
        warnings,
    )?;
    if let Some(book) = &book {
        warnings.extend(book.unfinished_warning(&run.name, summary.jobs));
    }
    Ok(summary)
}

/// The metrics of the records in `sources`, taken together. With `book`
/// (the sources are a results directory's), records that are not the
/// run's own are not counted (`not_in_run`) and a warning says so. Damage
/// is counted by kind and described in `warnings`.
pub fn summarize_records(
    sources: &[inputs::Source],
    params: &Params,
    cores: u64,
    capacities: std::collections::BTreeMap<String, u64>,
    all_statuses: bool,
    book: Option<&results::Book>,
    warnings: &mut Vec<String>,
) -> Result<Summary> {
    summarize_moved(
        sources,
        params,
        cores,
        capacities,
        all_statuses,
        book,
        warnings,
        &|_| None,
    )
}

/// A record's start and end moved (its suspensions move with its start,
/// keeping their lengths, which is what the figures without a window
/// take of them), for a figure of what a run would have been without
/// some delay of its own: `calcmets fidelity`'s emulator's delays taken
/// out.
pub type Move<'m> = dyn Fn(&JobRecord<'_>) -> Option<(i64, i64)> + 'm;

/// [`summarize_records`], with each record's start and end as `moved`
/// gives them (`None`: as recorded).
#[allow(clippy::too_many_arguments)]
pub fn summarize_moved(
    sources: &[inputs::Source],
    params: &Params,
    cores: u64,
    capacities: std::collections::BTreeMap<String, u64>,
    all_statuses: bool,
    book: Option<&results::Book>,
    warnings: &mut Vec<String>,
    moved: &Move<'_>,
) -> Result<Summary> {
    let mut acc = Accum::new();
    acc.set_capacities(capacities);
    // A run's records, each once: a job requeued has one record per
    // start, so a second record of one start is the first copied again
    // (a log appended to itself). Loose records are not checked: they
    // are read at ten million a second.
    let mut seen: std::collections::HashSet<(u64, i64)> = std::collections::HashSet::new();
    let mut repeated = 0u64;
    let stats = inputs::for_each_record(sources, |rec: &JobRecord<'_>| {
        // A part of the run (`--by events`): the rest is not read.
        if book.is_some_and(|b| !b.selected(rec.id)) {
            return Ok(());
        }
        if book.is_some_and(|b| !b.owns(rec)) {
            acc.exclude(Exclusion::NotInRun);
            return Ok(());
        }
        if book.is_some() && !seen.insert((rec.id, rec.start)) {
            repeated += 1;
            return Ok(());
        }
        let (start, end) = moved(rec).unwrap_or((rec.start, rec.end));
        let shifted: Vec<Suspension>;
        let suspensions = if start == rec.start {
            &rec.suspensions[..]
        } else {
            let by = start - rec.start;
            shifted = rec
                .suspensions
                .iter()
                .map(|s| Suspension {
                    suspend: s.suspend.saturating_add(by),
                    resume: s.resume.saturating_add(by),
                })
                .collect();
            &shifted[..]
        };
        acc.add(
            params,
            &JobView {
                cores: u64::from(rec.cores),
                submit: rec.submit,
                start,
                end,
                suspensions,
                excluded_status: match rec.status {
                    _ if all_statuses => None,
                    Status::Completed => None,
                    Status::Cancelled => Some(Exclusion::Cancelled),
                    Status::Failed => Some(Exclusion::Failed),
                    Status::Timeout => Some(Exclusion::Timeout),
                }
                .or_else(|| {
                    book.filter(|b| b.has_no_run_time(rec.id))
                        .map(|_| Exclusion::NoRunTime)
                }),
                cancelled: rec.status == Status::Cancelled,
                devices: &rec.devices,
            },
        );
        Ok(())
    })?;
    // Jobs cancelled before they started have no record: jobs.csv tells.
    if let Some(book) = book {
        acc.cancelled_jobs(book.cancelled_before_start(), 0);
    }
    warnings.extend(inputs::damage_report(&stats));
    let damage = inputs::damage(&stats);
    let summary = acc.finish(params, Some(cores), damage);
    if let Some(book) = book {
        if repeated > 0 {
            warnings.push(format!(
                "{}: {repeated} record(s) repeat another of the same job and start (the log \
                 holds a copy of itself?): counted once",
                book.dir.display()
            ));
        }
        let foreign = summary.skipped.excluded_by.not_in_run;
        if foreign > 0 {
            warnings.push(format!(
                "{}: {foreign} record(s) are not of this run (their jobs are not in its jobs.csv, \
                 or started before the run began): not counted",
                book.dir.display()
            ));
        }
    }
    over_full(&summary, cores, warnings);
    Ok(summary)
}

/// A warning when `summary`'s utilization is above 100 %: more core time
/// than `cores` cores hold over its window, which no run can use.
fn over_full(summary: &Summary, cores: u64, warnings: &mut Vec<String>) {
    if let Some(u) = summary.utilization.filter(|u| *u > 1.0 + 1e-9) {
        warnings.push(format!(
            "utilization {:.2} % is above 100 %: the jobs used more core time than {cores} \
             cores hold over the window; are the cores right (--cores), or are records \
             counted twice?",
            u * 100.0
        ));
    }
}

/// What was read and not counted, for standard error: by reason, and how
/// to count it. `None` when everything read counts.
pub fn exclusion_note(run: &str, s: &Summary, all_statuses: bool) -> Option<String> {
    // Records of another run are a warning of their own.
    let parts: Vec<String> = s
        .skipped
        .excluded_by
        .counts()
        .iter()
        .filter(|(why, n)| *n > 0 && *why != Exclusion::NotInRun)
        .map(|(why, n)| format!("{n} {}", why.name()))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let by_status = s
        .skipped
        .excluded_by
        .counts()
        .iter()
        .any(|(why, n)| *n > 0 && why.is_status());
    let hint = if by_status && !all_statuses {
        "; only completed jobs count (--status all counts every status)"
    } else {
        "; a job counts only with a run time and cores"
    };
    Some(format!(
        "{run}: {} job(s) not counted: {}{hint}",
        s.skipped.excluded - s.skipped.excluded_by.not_in_run,
        parts.join(", ")
    ))
}

/// The metrics of a trace: all of it, or beside replays of it (`replays`,
/// their results directories) the jobs they ran, counted as they count
/// them (a note says so).
fn swf_run(
    path: &Path,
    args: &MetricsArgs,
    params: &Params,
    replays: &[&Path],
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<Summary> {
    let replayed = trace::AsReplayed::of_runs(path, replays)?;
    let read = trace::read(
        path,
        params,
        args.status == StatusFilter::All,
        replayed.as_ref().map(|(r, _)| r),
    )?;
    warnings.extend(read.warnings);
    if let Some((r, cores)) = &replayed {
        r.confirm(path)?;
        notes.push(format!(
            "{}: {}",
            runs::trace_name(path),
            r.describe(*cores)
        ));
        let cores = args.cores.unwrap_or(*cores);
        let summary = read.accum.finish(params, Some(cores), Damage::default());
        over_full(&summary, cores, warnings);
        return Ok(summary);
    }
    let cores = args.cores.or_else(|| read.header.cores()).ok_or_else(|| {
        anyhow!(
            "{}: utilization needs the cluster's total cores: the trace has no MaxProcs or \
             MaxNodes header, so pass --cores N",
            path.display()
        )
    })?;
    let summary = read.accum.finish(params, Some(cores), Damage::default());
    over_full(&summary, cores, warnings);
    Ok(summary)
}

fn print_warnings(warnings: &[String]) {
    for w in warnings.iter().take(MAX_WARNINGS_SHOWN) {
        eprintln!("calcmets: warning: {w}");
    }
    if warnings.len() > MAX_WARNINGS_SHOWN {
        eprintln!(
            "calcmets: warning: ... and {} more warnings",
            warnings.len() - MAX_WARNINGS_SHOWN
        );
    }
}

fn dump_records(args: &DumpArgs) -> Result<Outcome> {
    let sources = inputs::expand(&args.inputs)?;
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    let stats = inputs::for_each_record(&sources, |rec| dump::write_jsonl(&mut out, rec))?;
    out.flush()?;
    let report = inputs::damage_report(&stats);
    print_warnings(&report);
    Ok(if args.strict && !report.is_empty() {
        Outcome::Problems
    } else {
        Outcome::Clean
    })
}

/// The nearest-rank percentile `q` of `sorted` (the k-th smallest value,
/// k = max(1, ⌈q·n⌉), as docs/design.md defines percentiles); `None` of
/// nothing.
pub fn nearest_rank(sorted: &[i64], q: f64) -> Option<i64> {
    (!sorted.is_empty()).then(|| sorted[dist::rank(q, sorted.len()) - 1])
}

/// Whether `err` is a closed output pipe (`calcmets dump | head`), which
/// ends the program quietly and successfully.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
