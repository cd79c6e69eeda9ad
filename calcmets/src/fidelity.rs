//! `calcmets fidelity A B`: how far one run of a replay is from another,
//! typically an emulated run from its virtual-time twin. Both must be the
//! same replay (same trace slice, factor, load, config and policy:
//! [`crate::alike`]), or the comparison is refused with what differs,
//! unless `--force`; each side is labelled by what it is (emulated, twin,
//! Slurm, a Batsim scheduler). Jobs are matched by the trace job they
//! replay (from each run's jobs.csv; by the cluster's job id if one has
//! none, as a fresh cluster numbers jobs in submission order in both),
//! times are taken relative to each run's start and given in trace
//! seconds (each run's own compression undone), and for each job the
//! differences of start, end and suspended time are summarised; then each
//! metric of the two runs is set side by side with its absolute and
//! relative difference.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;
use serde::Serialize;
use serde_json::json;

use crate::clock::{Clock, ClockKind};
use crate::inputs;
use crate::metrics::{Params, Summary};

/// One job's instants, relative to its run's start, in nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Times {
    submit: i64,
    start: i64,
    /// When the run decided to start it: the pass, where an emulated run
    /// says (its process began a host's delay later), else its start.
    decided: i64,
    end: i64,
    suspended: i64,
    completed: bool,
    cores: u32,
}

struct Run {
    /// What it is (`emulated`, `twin`, ...), and its directory.
    label: String,
    start_ns: i64,
    /// Its clock: what its times are converted with.
    clock: Clock,
    /// By the key the runs are matched on.
    jobs: HashMap<i64, Times>,
    /// Records with no key (a job jobs.csv does not list): in one run only.
    unkeyed: u64,
    summary: Summary,
    damaged: u64,
    /// An emulated run's own delays, and its figures without them.
    delays: Option<Delays>,
}

/// What an emulated run's machinery added to each job it completed: from
/// the pass that started it (jobs.csv's `start_ns`) to its record's start,
/// and its record's run beyond its run time (none for a sleep, which ends
/// when due, but for the readings of its clocks; a process's waking where
/// records say when it ended). Both are in every figure of the run: a job's
/// response holds them, and they hold its nodes from the next job. Its
/// figures with each job moved back to start at its pass and run its run
/// time exactly say how much of a difference from a twin those delays
/// make directly; what they did to later jobs stays in.
struct Delays {
    /// Jobs moved: completed, and whose records began at or after their
    /// pass (a host whose clock lags the controller's leaves its jobs as
    /// they are).
    jobs: u64,
    start: Spread,
    over: Spread,
    summary: Summary,
}

/// A run's records and metrics in `kind`'s clock; jobs keyed by `keys`
/// (the cluster's job id → the trace job it replays), or by job id
/// without them.
fn load(dir: &Path, kind: ClockKind, keys: Option<&HashMap<u64, i64>>) -> Result<Run> {
    let m =
        formats::results::Manifest::read(dir).with_context(|| crate::results::not_a_run(dir))?;
    let path = dir.join(formats::results::MANIFEST);
    let start = m
        .start
        .ok_or_else(|| anyhow!("{}: no \"start\"", path.display()))?;
    let start_ns = (start * 1e9).round() as i64;
    let cores = m
        .cores
        .filter(|&c| c > 0)
        .ok_or_else(|| anyhow!("{}: no \"cores\"", path.display()))?;
    let clock = match kind {
        ClockKind::Wall => Clock::wall(),
        ClockKind::Trace => Clock::of_manifest(&m).ok_or_else(|| {
            anyhow!(
                "{}: no factor and speed-up to give its times in trace seconds (--clock wall)",
                path.display()
            )
        })?,
    };
    let tau_s = match kind {
        ClockKind::Trace => m.tau_in_trace(),
        ClockKind::Wall => m.tau,
    }
    .unwrap_or(crate::DEFAULT_TAU_NS as f64 / 1e9);
    let tau_ns = clock.records_duration_ns((tau_s * 1e9).round() as i64);
    let book = crate::results::Book::open(dir)?;
    if !book.finished() {
        bail!(
            "{}: the run did not finish (status {}): only finished runs compare",
            dir.display(),
            book.status.as_str()
        );
    }
    let sources = inputs::expand(&[dir.to_path_buf()])?;
    // The pass that started each job, by the cluster's id: a run through
    // Slurm has none of clemu's (its jobs.csv's start is the job's own).
    let passes: HashMap<u64, i64> = if m.mode == "emulated" && m.backend != "slurm" {
        crate::results::jobs_by_id(dir)?
            .into_iter()
            .filter_map(|(id, row)| Some((id, row.start_ns.filter(|&t| t > 0)?)))
            .collect()
    } else {
        HashMap::new()
    };
    let mut jobs = HashMap::new();
    let mut unkeyed = 0;
    let stats = inputs::for_each_record(&sources, |r| {
        if !book.owns(r) {
            return Ok(());
        }
        let key = match keys {
            Some(k) => k.get(&r.id).copied(),
            None => i64::try_from(r.id).ok(),
        };
        let Some(key) = key else {
            unkeyed += 1;
            return Ok(());
        };
        // Relative to the run's start, in its clock.
        let k = clock.scale;
        let at = |t: i64| (t.saturating_sub(start_ns) as f64 * k).round() as i64;
        jobs.insert(
            key,
            Times {
                submit: at(r.submit),
                start: at(r.start),
                decided: at(passes
                    .get(&r.id)
                    .copied()
                    .filter(|&p| p <= r.start)
                    .unwrap_or(r.start)),
                end: at(r.end),
                suspended: (r.suspended_ns() as f64 * k).round() as i64,
                completed: r.status == Status::Completed,
                cores: r.cores,
            },
        );
        Ok(())
    })?;
    let damaged = stats.iter().map(|(_, s)| s.damaged()).sum();
    let params = Params {
        tau_ns,
        window: None,
        by_size: false,
    };
    let mut warnings = Vec::new();
    let summary = crate::summarize_records(
        &sources,
        &params,
        cores,
        Default::default(),
        false,
        Some(&book),
        &mut warnings,
    )?
    .in_clock(&clock, tau_s);
    for w in warnings {
        eprintln!("calcmets: warning: {w}");
    }
    let delays = own_delays(&passes, &sources, &book, &params, cores, &clock, tau_s)?;
    Ok(Run {
        label: crate::alike::label(&m),
        clock,
        start_ns,
        jobs,
        unkeyed,
        summary,
        damaged,
        delays,
    })
}

/// [`Delays`] of an emulated run, from when each job's pass was
/// (`passes`, by the cluster's job id; `None` without any).
fn own_delays(
    passes: &HashMap<u64, i64>,
    sources: &[inputs::Source],
    book: &crate::results::Book,
    params: &Params,
    cores: u64,
    clock: &Clock,
    tau_s: f64,
) -> Result<Option<Delays>> {
    if passes.is_empty() {
        return Ok(None);
    }
    // A job's run time, as its process was to count it (its limit, if
    // shorter, ends it first).
    let run = |r: &formats::record::JobRecord<'_>| {
        let run = if r.walltime > 0 {
            r.runtime.min(r.walltime)
        } else {
            r.runtime
        };
        i64::try_from(run).unwrap_or(i64::MAX)
    };
    // Only the start jobs.csv holds: a job started again (requeued) has
    // earlier records that began before its last pass.
    let moved = |r: &formats::record::JobRecord<'_>| {
        let pass = *passes.get(&r.id)?;
        (r.status == Status::Completed && book.owns(r) && pass <= r.start).then(|| {
            (
                pass,
                pass.saturating_add(run(r)).saturating_add(r.suspended_ns()),
            )
        })
    };
    let (mut starts, mut overs) = (Vec::new(), Vec::new());
    let k = clock.scale;
    let scaled = |ns: i64| (ns as f64 * k).round() as i64;
    // Each record once, as the figures count them.
    let mut seen = std::collections::HashSet::new();
    inputs::for_each_record(sources, |r| {
        if let Some(pass) = moved(r).map(|(pass, _)| pass) {
            if seen.insert((r.id, r.start)) {
                starts.push(scaled(r.start.saturating_sub(pass)));
                let ran = r
                    .end
                    .saturating_sub(r.start)
                    .saturating_sub(r.suspended_ns());
                overs.push(scaled(ran.saturating_sub(run(r))));
            }
        }
        Ok(())
    })?;
    if starts.is_empty() {
        return Ok(None);
    }
    let summary = crate::summarize_moved(
        sources,
        params,
        cores,
        Default::default(),
        false,
        Some(book),
        &mut Vec::new(),
        &moved,
    )?
    .in_clock(clock, tau_s);
    Ok(Some(Delays {
        jobs: starts.len() as u64,
        start: quantiles(starts),
        over: quantiles(overs),
        summary,
    }))
}

/// Percentiles, largest and mean of signed values (nanoseconds of the
/// clock compared), in seconds.
fn quantiles(mut v: Vec<i64>) -> Spread {
    v.sort_unstable();
    let at = |q: f64| {
        if v.is_empty() {
            0.0
        } else {
            v[crate::dist::rank(q, v.len()) - 1] as f64 / 1e9
        }
    };
    Spread {
        p50: at(0.5),
        p99: at(0.99),
        max: v.last().map_or(0.0, |&x| x as f64 / 1e9),
        mean: mean_s(&v),
    }
}

/// Percentiles, largest and mean: of absolute differences with their
/// signed mean, the bias ([`spread`]); or of signed values ([`quantiles`]).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

fn spread(diffs: Vec<i64>) -> Spread {
    Spread {
        mean: mean_s(&diffs),
        ..quantiles(diffs.into_iter().map(i64::abs).collect())
    }
}

/// The mean of nanoseconds, in seconds (0 of none).
fn mean_s(v: &[i64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1e9
    }
}

/// The metrics compared, flattened: (name, emulated, simulated).
fn metric_pairs(e: &Summary, s: &Summary) -> Vec<(String, Option<f64>, Option<f64>)> {
    let mut out = vec![
        // What every other figure is over: the jobs that count.
        ("jobs".to_string(), Some(e.jobs as f64), Some(s.jobs as f64)),
        ("makespan".to_string(), e.makespan, s.makespan),
        ("utilization".to_string(), e.utilization, s.utilization),
        (
            "weighted_slowdown".to_string(),
            e.weighted_slowdown,
            s.weighted_slowdown,
        ),
        (
            "suspended_time".to_string(),
            Some(e.suspended_time),
            Some(s.suspended_time),
        ),
        (
            "suspensions".to_string(),
            Some(e.suspensions as f64),
            Some(s.suspensions as f64),
        ),
    ];
    for (name, a, b) in [
        ("wait", &e.wait, &s.wait),
        ("response", &e.response, &s.response),
        ("slowdown", &e.slowdown, &s.slowdown),
        ("bounded_slowdown", &e.bounded_slowdown, &s.bounded_slowdown),
    ] {
        for (q, x, y) in [
            ("mean", a.mean, b.mean),
            ("p50", a.p50, b.p50),
            ("p95", a.p95, b.p95),
            ("p99", a.p99, b.p99),
            ("max", a.max, b.max),
        ] {
            out.push((format!("{name}_{q}"), x, y));
        }
    }
    out
}

/// How to compare.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub json: bool,
    /// Compare runs that are not the same replay, saying what differs.
    pub force: bool,
    /// The clock of every time: trace seconds unless asked.
    pub clock: ClockKind,
    /// How many of the jobs whose starts differ most to list.
    pub worst: usize,
}

/// One job both runs completed, where their starts differ: in nanoseconds
/// of the clock compared.
#[derive(Debug, Clone, Copy)]
struct Apart {
    key: i64,
    cores: u32,
    wait_a: i64,
    wait_b: i64,
    start: i64,
    /// When each run decided to start it ([`Times::decided`]), relative
    /// to that run's start.
    at_a: i64,
    at_b: i64,
}

/// The first two jobs the runs decide to start in the other order (by
/// their passes, where a run says: a host's delay between a pass and a
/// process is no decision), in b's order:
/// `(q, p)` where b starts `q` before `p` and a starts `p` first; `None`
/// when a keeps b's order throughout. Jobs b starts at one instant have
/// no order between them. Where two runs of one replay part, a decision
/// went the other way or its events came in another order: what to look
/// at to see why their figures differ (the runs' jobs.csv around then).
fn parting(all: &[Apart]) -> Option<(Apart, Apart)> {
    let mut by_b: Vec<&Apart> = all.iter().collect();
    by_b.sort_unstable_by_key(|j| (j.at_b, j.at_a, j.key));
    // Of the jobs b started before the instant at hand, the one a started
    // last.
    let mut latest: Option<&Apart> = None;
    for group in by_b.chunk_by(|x, y| x.at_b == y.at_b) {
        // Sorted by a's start within the group: the first is a's first.
        if let Some(q) = latest.filter(|q| group[0].at_a < q.at_a) {
            return Some((*q, *group[0]));
        }
        let last = group[group.len() - 1];
        if latest.is_none_or(|q| last.at_a > q.at_a) {
            latest = Some(last);
        }
    }
    None
}

/// The `n` jobs whose starts differ most, largest first (ties by key),
/// and the sum of every job's start difference, signed: what a job's
/// share of the mean wait's difference is taken of, when the runs submit
/// alike.
fn most_apart(mut all: Vec<Apart>, n: usize) -> (Vec<Apart>, i128) {
    // Wide: 200,000 jobs half a day late each overflow nanoseconds in i64.
    let sum = all.iter().map(|j| i128::from(j.start)).sum();
    all.sort_unstable_by_key(|j| (std::cmp::Reverse(j.start.unsigned_abs()), j.key));
    all.truncate(n);
    (all, sum)
}

/// Writes the comparison of `a` with `b`; returns whether the runs hold
/// the same jobs. Refused, with what differs, for runs that are not the
/// same replay (unless `force`).
pub fn compare(a: &Path, b: &Path, opts: &Options, out: &mut impl Write) -> Result<bool> {
    // Replicas on either side: their figures' intervals are compared.
    let (set_a, set_b) = (crate::runs::replica_dirs(a)?, crate::runs::replica_dirs(b)?);
    if set_a.is_some() || set_b.is_some() {
        if opts.worst > 0 {
            bail!(
                "--worst lists jobs of two single runs, and {} is a set of replicas: give one \
                 replica's directory on each side",
                if set_a.is_some() { a } else { b }.display()
            );
        }
        let a_dirs = set_a.unwrap_or_else(|| vec![a.to_path_buf()]);
        let b_dirs = set_b.unwrap_or_else(|| vec![b.to_path_buf()]);
        return compare_sets((a, &a_dirs), (b, &b_dirs), opts, out);
    }
    let (side_a, side_b) = (
        crate::alike::Side::read(a).with_context(|| crate::results::not_a_run(a))?,
        crate::alike::Side::read(b).with_context(|| crate::results::not_a_run(b))?,
    );
    let mut unlike = crate::alike::differences(&side_a, &side_b);
    if opts.clock == ClockKind::Wall {
        // In the records' own clock, runs at different speeds give times
        // on different scales.
        let speed = |m: &formats::results::Manifest| m.trace_per_wall().unwrap_or(1.0);
        let (x, y) = (speed(&side_a.manifest), speed(&side_b.manifest));
        if (x - y).abs() > 1e-9 * x.abs().max(1.0) {
            unlike.push(format!(
                "clock: in wall seconds, one trace second is {} s of one run and {} s of the \
                 other (their speed-ups and factors differ; the trace clock, the default, \
                 compares them)",
                crate::report::num(1.0 / x),
                crate::report::num(1.0 / y)
            ));
        }
    }
    refuse_unlike(a, b, &unlike, opts.force)?;
    if let Some(w) = crate::alike::unknowable(&side_a, &side_b) {
        eprintln!("calcmets: warning: {w}");
    }
    for (name, side) in [("a", &side_a), ("b", &side_b)] {
        if let Some(n) = on_ties(name, &side.manifest) {
            eprintln!("calcmets: note: {n}");
        }
    }
    // Trace ids when both runs say which trace job each of theirs replays:
    // a run on a cluster others used too does not number its jobs from 1.
    // (A trace may number two jobs alike, or none: then ids, as a fresh
    // cluster numbers the jobs of both in submission order.)
    let trace_ids = |dir: &Path| -> Result<HashMap<u64, i64>> {
        Ok(crate::results::jobs_by_id(dir)?
            .into_iter()
            .map(|(id, row)| (id, row.trace_id))
            .collect())
    };
    let (ak, bk) = (trace_ids(a)?, trace_ids(b)?);
    let usable = |k: &HashMap<u64, i64>| {
        !k.is_empty()
            && k.values().all(|&t| t >= 0)
            && k.values().collect::<std::collections::HashSet<_>>().len() == k.len()
    };
    let by_trace = usable(&ak) && usable(&bk);
    let mut e = load(a, opts.clock, by_trace.then_some(&ak))?;
    let mut s = load(b, opts.clock, by_trace.then_some(&bk))?;
    if e.damaged + s.damaged > 0 {
        bail!("damaged records: run `calcmets dump` on both directories to see where");
    }
    // Two runs of one kind are told apart by their directories.
    if e.label == s.label {
        e.label = format!("{} ({})", e.label, a.display());
        s.label = format!("{} ({})", s.label, b.display());
    }
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut susp = Vec::new();
    let mut apart = Vec::new();
    let mut only_one = e.unkeyed + s.unkeyed;
    for (id, x) in &e.jobs {
        match s.jobs.get(id) {
            Some(y) if x.completed && y.completed => {
                starts.push(x.start - y.start);
                apart.push(Apart {
                    key: *id,
                    cores: x.cores,
                    wait_a: x.start - x.submit,
                    wait_b: y.start - y.submit,
                    start: x.start - y.start,
                    at_a: x.decided,
                    at_b: y.decided,
                });
                ends.push(x.end - y.end);
                susp.push(x.suspended - y.suspended);
            }
            Some(_) => {}
            None => only_one += 1,
        }
    }
    only_one += s.jobs.keys().filter(|id| !e.jobs.contains_key(id)).count() as u64;
    let matched = starts.len();
    let (start, end, suspended) = (spread(starts), spread(ends), spread(susp));
    let parted = parting(&apart);
    let (worst, sum_start) = most_apart(apart, opts.worst);
    let secs = |ns: i64| ns as f64 / 1e9;
    let share = |d: i64| (sum_start != 0).then(|| d as f64 / sum_start as f64);
    let summed = sum_start as f64 / 1e9;
    let key_name = if by_trace { "trace job" } else { "job id" };
    let pairs = metric_pairs(&e.summary, &s.summary);
    // Jobs that count on one side only (a status, a run time of 0): every
    // figure is then over other jobs, whatever the runs replayed.
    let counted_alike = e.summary.jobs == s.summary.jobs;
    if !counted_alike {
        eprintln!(
            "calcmets: warning: the runs count different jobs ({} vs {}), so each figure is \
             over its own run's: see which each leaves out, and why, under `skipped` in \
             `calcmets --format json` of each",
            e.summary.jobs, s.summary.jobs
        );
    }
    let unit = opts.clock.unit();
    let later = against_later(
        &pairs,
        [side_a.manifest.ties.as_ref(), side_b.manifest.ties.as_ref()],
    );
    let delays_out = delays_out(&e, &s);
    if opts.json {
        let metrics: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(name, x, y)| {
                let (abs, rel) = diff(*x, *y);
                (
                    name.clone(),
                    json!({"a": x, "b": y, "abs": abs, "rel": rel}),
                )
            })
            .collect();
        let side = |r: &Run, dir: &Path| {
            json!({"label": r.label, "dir": dir.display().to_string(),
                   "start": r.start_ns as f64 / 1e9, "trace_per_wall": r.clock.scale})
        };
        let v = json!({
            "clock": opts.clock.as_str(),
            "a": side(&e, a),
            "b": side(&s, b),
            "unlike": unlike,
            "ties": {"a": side_a.manifest.ties, "b": side_b.manifest.ties,
                     "against_later": later.iter().map(|(side, rels)| {
                         (side.to_string(), rels.iter().map(|(n, r)| (n.to_string(), json!(r)))
                             .collect::<serde_json::Map<_, _>>().into())
                     }).collect::<serde_json::Map<String, serde_json::Value>>()},
            "jobs_compared": matched,
            "jobs_in_one_run_only": only_one,
            "per_job": {"start": start, "end": end, "suspended": suspended},
            "metrics": metrics,
            "parting": parted.map(|(q, p)| {
                let job = |j: Apart| json!({"job": j.key, "start_a": secs(j.at_a), "start_b": secs(j.at_b)});
                json!({"key": key_name, "first_in_b": job(q), "first_in_a": job(p)})
            }),
            "own_delays": delays_out.iter().map(|(side, d, rels)| {
                (side.to_string(), json!({
                    "jobs": d.jobs, "start": d.start, "run_over": d.over,
                    "relative_without": rels.iter().map(|(n, r)| (n.to_string(), json!(r)))
                        .collect::<serde_json::Map<_, _>>(),
                }))
            }).collect::<serde_json::Map<String, serde_json::Value>>(),
        });
        let mut v = v;
        if opts.worst > 0 {
            v["most_apart"] = json!({
                "key": key_name,
                "start_differences_summed": summed,
                "jobs": worst.iter().map(|j| json!({
                    "job": j.key, "cores": j.cores, "wait_a": secs(j.wait_a),
                    "wait_b": secs(j.wait_b), "start": secs(j.start), "share": share(j.start),
                })).collect::<Vec<_>>(),
            });
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        // Named with its directory once: the label may hold it already.
        let named = |label: &str, dir: &Path| {
            let dir = format!("({})", dir.display());
            if label.ends_with(&dir) {
                label.to_string()
            } else {
                format!("{label} {dir}")
            }
        };
        writeln!(out, "a: {}", named(&e.label, a))?;
        writeln!(out, "b: {}", named(&s.label, b))?;
        writeln!(
            out,
            "{matched} jobs compared ({only_one} in one run only); times in {unit}, relative to \
             each run's start"
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "{:<34} {:>11} {:>11} {:>11} {:>11}",
            format!("per job, a - b ({unit})"),
            "|d| p50",
            "|d| p99",
            "|d| max",
            "mean d"
        )?;
        for (name, sp) in [
            ("start", start),
            ("end", end),
            ("suspended time", suspended),
        ] {
            writeln!(
                out,
                "{:<34} {:>11} {:>11} {:>11} {:>11}",
                name,
                crate::report::num(sp.p50),
                crate::report::num(sp.p99),
                crate::report::num(sp.max),
                crate::report::num(sp.mean)
            )?;
        }
        writeln!(out)?;
        match parted {
            Some((q, p)) => writeln!(
                out,
                "the runs first start two jobs in another order ({unit}, when each decided): b \
                 starts {key_name} {} \
                 at {} before {} at {}; a starts {} at {} before {} at {}",
                q.key,
                crate::report::num(secs(q.at_b)),
                p.key,
                crate::report::num(secs(p.at_b)),
                p.key,
                crate::report::num(secs(p.at_a)),
                q.key,
                crate::report::num(secs(q.at_a)),
            )?,
            None => writeln!(out, "the runs start every job in the same order")?,
        }
        for (side, d, _) in &delays_out {
            writeln!(out)?;
            writeln!(
                out,
                "{:<34} {:>11} {:>11} {:>11} {:>11}",
                format!("{side}'s own delays, {} jobs ({unit})", d.jobs),
                "p50",
                "p99",
                "max",
                "mean"
            )?;
            for (name, sp) in [
                ("its start after its pass", d.start),
                ("its run beyond its run time", d.over),
            ] {
                writeln!(
                    out,
                    "{:<34} {:>11} {:>11} {:>11} {:>11}",
                    name,
                    crate::report::num(sp.p50),
                    crate::report::num(sp.p99),
                    crate::report::num(sp.max),
                    crate::report::num(sp.mean)
                )?;
            }
        }
        if opts.worst > 0 {
            writeln!(out)?;
            writeln!(
                out,
                "the {} jobs whose starts differ most ({unit}); share: of every job's start \
                 difference, summed ({})",
                worst.len(),
                crate::report::num(summed)
            )?;
            writeln!(
                out,
                "{:<12} {:>6} {:>12} {:>12} {:>12} {:>9}",
                key_name, "cores", "wait a", "wait b", "start a - b", "share"
            )?;
            for j in &worst {
                writeln!(
                    out,
                    "{:<12} {:>6} {:>12} {:>12} {:>12} {:>9}",
                    j.key,
                    j.cores,
                    crate::report::num(secs(j.wait_a)),
                    crate::report::num(secs(j.wait_b)),
                    crate::report::num(secs(j.start)),
                    share(j.start).map_or("-".to_string(), |r| format!("{:.1} %", r * 100.0))
                )?;
            }
        }
        writeln!(out)?;
        let (wa, wb) = (
            e.label.chars().count().max(12),
            s.label.chars().count().max(12),
        );
        writeln!(
            out,
            "{:<28} {:>wa$} {:>wb$} {:>12} {:>9}",
            format!("metric ({unit})"),
            e.label,
            s.label,
            "a - b",
            "relative"
        )?;
        for (name, x, y) in &pairs {
            let (abs, rel) = diff(*x, *y);
            let show = |v: Option<f64>| v.map_or("-".to_string(), crate::report::num);
            writeln!(
                out,
                "{:<28} {:>wa$} {:>wb$} {:>12} {:>9}",
                name,
                show(*x),
                show(*y),
                show(abs),
                rel.map_or("-".to_string(), |r| format!("{:.2} %", r * 100.0))
            )?;
        }
        for (side, rels) in &later {
            let nudge = if *side == "a" { &side_a } else { &side_b }
                .manifest
                .ties
                .as_ref()
                .map_or(1, |t| t.nudge_ns);
            let cells: Vec<String> = rels
                .iter()
                .map(|(n, r)| {
                    let r = r.map_or("-".to_string(), |r| format!("{:.2} %", r * 100.0));
                    format!("{n} {r}")
                })
                .collect();
            writeln!(
                out,
                "relative, with {side} as it runs {nudge} ns later (its ties): {}",
                cells.join(", ")
            )?;
        }
        for (side, _, rels) in &delays_out {
            writeln!(
                out,
                "relative, with {side}'s own delays taken out (each job started at its pass and \
                 ran its run time exactly; what they did to later jobs stays in): {}",
                percents(rels)
            )?;
        }
    }
    Ok(only_one == 0 && counted_alike)
}

/// Whether two replays, each run several times (`runworkload
/// --replicas`), agree: metric by metric, each side's mean with its 95 %
/// interval across its replicas, and whether the intervals overlap. The
/// replicas of each side must be the same replay as the other side's.
/// Metrics apart are a finding, said, not a failure: returns true.
fn compare_sets(
    (a, a_dirs): (&Path, &[std::path::PathBuf]),
    (b, b_dirs): (&Path, &[std::path::PathBuf]),
    opts: &Options,
    out: &mut impl Write,
) -> Result<bool> {
    use crate::replicas::Estimate;
    let side = |d: &Path| crate::alike::Side::read(d).with_context(|| crate::results::not_a_run(d));
    let (first_a, first_b) = (side(&a_dirs[0])?, side(&b_dirs[0])?);
    let unlike = crate::alike::differences(&first_a, &first_b);
    refuse_unlike(a, b, &unlike, opts.force)?;
    if let Some(w) = crate::alike::unknowable(&first_a, &first_b) {
        eprintln!("calcmets: warning: {w}");
    }
    let summaries = |dirs: &[std::path::PathBuf]| -> Result<Vec<Summary>> {
        dirs.iter()
            .map(|d| load(d, opts.clock, None).map(|r| r.summary))
            .collect()
    };
    let (sa, sb) = (summaries(a_dirs)?, summaries(b_dirs)?);
    let (mut la, mut lb) = (
        crate::alike::label(&first_a.manifest),
        crate::alike::label(&first_b.manifest),
    );
    if la == lb {
        la = format!("{la} ({})", a.display());
        lb = format!("{lb} ({})", b.display());
    }
    // Metric by metric: (name, a's estimate, b's).
    let names: Vec<String> = metric_pairs(&sa[0], &sb[0])
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let estimate = |set: &[Summary], k: usize| -> Option<Estimate> {
        let values: Vec<f64> = set.iter().filter_map(|s| metric_pairs(s, s)[k].1).collect();
        Estimate::of(&values)
    };
    // Metric, a's estimate, b's, whether they agree.
    type Row = (String, Option<Estimate>, Option<Estimate>, Option<bool>);
    let rows: Vec<Row> = names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let (x, y) = (estimate(&sa, k), estimate(&sb, k));
            let agree = match (x, y) {
                (Some(x), Some(y)) => x.agrees(&y),
                _ => None,
            };
            (n.clone(), x, y, agree)
        })
        .collect();
    let all_agree = rows.iter().all(|r| r.3 != Some(false));
    let unit = opts.clock.unit();
    if opts.json {
        let est = |e: &Option<Estimate>| {
            e.map_or(
                serde_json::Value::Null,
                |e| json!({"mean": e.mean, "ci95": (e.n > 1).then_some(e.half), "replicas": e.n}),
            )
        };
        let metrics: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(n, x, y, agree)| (n.clone(), json!({"a": est(x), "b": est(y), "agree": agree})))
            .collect();
        let v = json!({
            "clock": opts.clock.as_str(),
            "a": {"label": la, "dir": a.display().to_string(), "replicas": sa.len()},
            "b": {"label": lb, "dir": b.display().to_string(), "replicas": sb.len()},
            "unlike": unlike,
            "metrics": metrics,
            "all_agree": all_agree,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        let runs = |n: usize, dir: &Path| match n {
            1 => format!("one run, {}", dir.display()),
            n => format!("{n} replicas of {}", dir.display()),
        };
        writeln!(out, "a: {la} ({})", runs(sa.len(), a))?;
        writeln!(out, "b: {lb} ({})", runs(sb.len(), b))?;
        writeln!(
            out,
            "each figure: the replicas' mean ± the half-width of its 95 % interval, in {unit}; \
             they agree when the intervals overlap{}",
            if sa.len() == 1 || sb.len() == 1 {
                "; a single run has no interval, and agrees when it lies within the other \
                 side's 95 % prediction interval (where its next replica would)"
            } else {
                ""
            }
        )?;
        writeln!(out)?;
        let cell = |e: &Option<Estimate>| {
            e.map_or("-".to_string(), |e| match e.n {
                1 => crate::report::num(e.mean),
                _ => format!(
                    "{} ± {}",
                    crate::report::num(e.mean),
                    crate::report::num(e.half)
                ),
            })
        };
        writeln!(
            out,
            "{:<24} {:>26} {:>26} {:>7}",
            "metric", "a", "b", "agree"
        )?;
        for (n, x, y, agree) in &rows {
            writeln!(
                out,
                "{:<24} {:>26} {:>26} {:>7}",
                n,
                cell(x),
                cell(y),
                agree.map_or("-", |g| if g { "yes" } else { "NO" })
            )?;
        }
        let disagree: Vec<&str> = rows
            .iter()
            .filter(|r| r.3 == Some(false))
            .map(|r| r.0.as_str())
            .collect();
        writeln!(out)?;
        if disagree.is_empty() {
            writeln!(out, "every metric agrees within the replicas' intervals")?;
        } else {
            writeln!(
                out,
                "outside each other's intervals: {}",
                disagree.join(", ")
            )?;
        }
    }
    Ok(true)
}

/// What run `name` says of its ties, when it is a twin whose schedule
/// hangs on the order of events at one instant: a difference of that size
/// from it is that order, which no emulated run keeps.
fn on_ties(name: &str, m: &formats::results::Manifest) -> Option<String> {
    let t = m.ties.as_ref().filter(|t| t.notable())?;
    Some(format!(
        "{name} is a twin whose schedule hangs on the order of events at one instant: with \
         every start, end and arrival {} ns later its figures move ({}). A difference that size \
         is that order, which no emulated run (nor real system) keeps, not the emulation's \
         cost: the comparison also gives the figures against {name} 1 ns later; or compare \
         replica sets (runworkload --replicas, and the twin's with --latencies)",
        t.nudge_ns,
        t.moved(),
    ))
}

/// Figures by name, each a − b relative.
type Figures = Vec<(&'static str, Option<f64>)>;

/// a − b, relative, with a twin that hangs on ties taken as it runs 1 ns
/// later (its manifest's `ties`), for the figures the nudge measured: what
/// an emulation can be held to, since no emulated run keeps the order of
/// events at one instant. One entry per side with notable ties, named by
/// that side.
fn against_later(
    pairs: &[(String, Option<f64>, Option<f64>)],
    ties: [Option<&formats::results::Ties>; 2],
) -> Vec<(&'static str, Figures)> {
    let figure = |name: &str| {
        pairs
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or((None, None), |(_, a, b)| (*a, *b))
    };
    let mut out = Vec::new();
    for (side, t) in ["a", "b"].into_iter().zip(ties) {
        let Some(t) = t.filter(|t| t.notable()) else {
            continue;
        };
        let rels = [
            ("wait_mean", t.wait_mean),
            ("bounded_slowdown_mean", t.bounded_slowdown_mean),
        ]
        .into_iter()
        .map(|(name, moved)| {
            let (a, b) = figure(name);
            let later = |x: Option<f64>| Some(x? * (1.0 + moved?));
            let rel = match side {
                "a" => diff(later(a), b).1,
                _ => diff(a, later(b)).1,
            };
            (name, rel)
        })
        .collect();
        out.push((side, rels));
    }
    out
}

/// For each side that is an emulated run: its own delays, and a − b
/// relative with them taken out of that side ([`Delays`]).
fn delays_out<'r>(a: &'r Run, b: &'r Run) -> Vec<(&'static str, &'r Delays, Figures)> {
    let figures = |x: &Summary, y: &Summary| -> Figures {
        let pairs = metric_pairs(x, y);
        ["wait_mean", "bounded_slowdown_mean", "utilization"]
            .into_iter()
            .map(|name| {
                let rel = pairs
                    .iter()
                    .find(|(n, _, _)| n == name)
                    .and_then(|(_, x, y)| diff(*x, *y).1);
                (name, rel)
            })
            .collect()
    };
    let mut out = Vec::new();
    if let Some(d) = &a.delays {
        out.push(("a", d, figures(&d.summary, &b.summary)));
    }
    if let Some(d) = &b.delays {
        out.push(("b", d, figures(&a.summary, &d.summary)));
    }
    out
}

/// `name x.xx %, ...`.
fn percents(figures: &Figures) -> String {
    figures
        .iter()
        .map(|(n, r)| {
            let r = r.map_or("-".to_string(), |r| format!("{:.2} %", r * 100.0));
            format!("{n} {r}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses runs that are not the same replay, saying what differs; with
/// `force`, says it and goes on.
fn refuse_unlike(a: &Path, b: &Path, unlike: &[String], force: bool) -> Result<()> {
    if !unlike.is_empty() && !force {
        bail!(
            "{} and {} are not the same replay, so their differences would not be the \
             emulation's: {}; compare runs of one slice, factor, load, config and policy, or \
             pass --force to compare them anyway",
            a.display(),
            b.display(),
            unlike.join("; ")
        );
    }
    for d in unlike {
        eprintln!("calcmets: note: compared though they differ (--force): {d}");
    }
    Ok(())
}

/// a − b, and that relative to b.
fn diff(a: Option<f64>, b: Option<f64>) -> (Option<f64>, Option<f64>) {
    match (a, b) {
        (Some(a), Some(b)) => (Some(a - b), (b != 0.0).then(|| (a - b) / b)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::record::{encode, Flags, JobRecord};
    use std::borrow::Cow;

    #[test]
    fn a_twin_that_hangs_on_ties_is_also_compared_as_it_runs_later() {
        use formats::results::Ties;
        let pairs = vec![
            ("utilization".to_string(), Some(0.5), Some(0.5)),
            ("wait_mean".to_string(), Some(105.0), Some(100.0)),
            ("bounded_slowdown_mean".to_string(), Some(4.0), Some(2.0)),
        ];
        let tied = Ties {
            nudge_ns: 1,
            wait_mean: Some(0.05),
            bounded_slowdown_mean: Some(1.0),
        };
        // b exact is 100 and 2; 1 ns later, 105 and 4: a is those.
        let later = against_later(&pairs, [None, Some(&tied)]);
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].0, "b");
        for (name, rel) in &later[0].1 {
            assert!(rel.unwrap().abs() < 1e-12, "{name}: {rel:?}");
        }
        // On side a: a 1 ns later against b as it is.
        let later = against_later(&pairs, [Some(&tied), None]);
        let rel = |n: &str| later[0].1.iter().find(|(m, _)| *m == n).unwrap().1.unwrap();
        assert!((rel("wait_mean") - (110.25 / 100.0 - 1.0)).abs() < 1e-12);
        assert!((rel("bounded_slowdown_mean") - 3.0).abs() < 1e-12);
        // A twin that does not hang on ties, or a run that is no twin:
        // nothing to add.
        let calm = Ties {
            nudge_ns: 1,
            wait_mean: Some(0.001),
            bounded_slowdown_mean: Some(0.0),
        };
        assert!(against_later(&pairs, [Some(&calm), None]).is_empty());
        assert!(against_later(&pairs, [None, None]).is_empty());
    }

    const S: i64 = 1_000_000_000;

    /// Job `id`'s record: one core on n1, submitted at 1,000 s, asking
    /// 10 s, completed.
    fn completed(id: u64, start: i64, end: i64) -> JobRecord<'static> {
        JobRecord {
            id,
            cores: 1,
            node: Cow::Borrowed("n1"),
            submit: 1000 * S,
            start,
            end,
            runtime: 10 * S as u64,
            walltime: 0,
            status: Status::Completed,
            flags: Flags::default(),
            suspensions: Vec::new(),
            devices: Vec::new(),
            program: None,
        }
    }

    /// A results directory whose cluster numbered the trace's jobs 1, 2, 3
    /// as `ids`, each running 10 s from its start.
    fn run(dir: &Path, ids: [u64; 3], starts: [i64; 3]) {
        std::fs::create_dir_all(dir.join("records")).unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"start": 1000.0, "cores": 4, "tau": 10.0}"#,
        )
        .unwrap();
        let mut csv = String::from("trace_id,job_id,state,nodes,runtime_trace_s\n");
        let mut bytes = Vec::new();
        for (t, (&id, &b)) in ids.iter().zip(&starts).enumerate() {
            csv.push_str(&format!("{},{id},completed,\"n1\",10\n", t + 1));
            encode(&completed(id, (1000 + b) * S, (1010 + b) * S), &mut bytes).unwrap();
        }
        std::fs::write(dir.join(formats::results::JOBS), csv).unwrap();
        std::fs::write(dir.join("records/jobs.rec"), bytes).unwrap();
    }

    #[test]
    fn the_first_two_jobs_started_in_another_order_are_found() {
        let j = |key, at_a, at_b| Apart {
            key,
            cores: 1,
            wait_a: 0,
            wait_b: 0,
            start: at_a - at_b,
            at_a,
            at_b,
        };
        let keys = |x: Option<(Apart, Apart)>| x.map(|(q, p)| (q.key, p.key));
        // Jobs b starts together may come in any order in a.
        assert_eq!(keys(parting(&[j(1, 5, 0), j(2, 3, 0), j(3, 9, 4)])), None);
        // b: 1 at 0, 2 at 4, 3 at 5; a: 1 at 1, 3 at 6, 2 at 7.
        assert_eq!(
            keys(parting(&[j(1, 1, 0), j(2, 7, 4), j(3, 6, 5)])),
            Some((2, 3))
        );
        // The first parting, not a later one.
        assert_eq!(
            keys(parting(&[j(1, 3, 0), j(2, 2, 1), j(3, 10, 5), j(4, 9, 6)])),
            Some((1, 2))
        );
        // Of jobs b starts together, the one a starts last is the bar.
        assert_eq!(
            keys(parting(&[j(1, 5, 0), j(2, 3, 0), j(3, 4, 4)])),
            Some((1, 3))
        );
        assert_eq!(keys(parting(&[])), None);
    }

    #[test]
    fn an_emulated_runs_own_delays_are_measured_and_taken_out() {
        let dir = tempfile::tempdir().unwrap();
        let (emu, sim) = (dir.path().join("emu"), dir.path().join("sim"));
        // The twin starts trace jobs 1, 2, 3 at 1, 2 and 3 s, each for
        // its 10 s; the emulation's passes are at the same instants, its
        // processes begin 0.2 s later and run 0.1 s over. At a speed-up
        // of 10, that is 2 and 1 trace s.
        run(&sim, [1, 2, 3], [1, 2, 3]);
        std::fs::write(
            sim.join("manifest.json"),
            r#"{"start": 1000.0, "cores": 4, "tau": 10.0, "mode": "simulated",
                "speedup": 10.0, "factor": 1.0}"#,
        )
        .unwrap();
        std::fs::create_dir_all(emu.join("records")).unwrap();
        std::fs::write(
            emu.join("manifest.json"),
            r#"{"start": 1000.0, "cores": 4, "tau": 10.0, "mode": "emulated",
                "speedup": 10.0, "factor": 1.0}"#,
        )
        .unwrap();
        let mut csv = String::from("trace_id,job_id,state,nodes,runtime_trace_s,start_ns\n");
        let mut bytes = Vec::new();
        for id in 1..=3u64 {
            let pass = (1000 + id as i64) * S;
            csv.push_str(&format!("{id},{id},completed,\"n1\",10,{pass}\n"));
            let start = pass + S / 5;
            let rec = completed(id, start, start + 10 * S + S / 10);
            encode(&rec, &mut bytes).unwrap();
        }
        std::fs::write(emu.join(formats::results::JOBS), csv).unwrap();
        std::fs::write(emu.join("records/jobs.rec"), bytes).unwrap();
        let opts = Options {
            json: true,
            force: false,
            clock: ClockKind::Trace,
            worst: 0,
        };
        let mut out = Vec::new();
        compare(&emu, &sim, &opts, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let close =
            |x: &serde_json::Value, want: f64| x.as_f64().is_some_and(|x| (x - want).abs() < 1e-9);
        // With them, a waits 2 trace s more on 20.
        assert!(close(&v["metrics"]["wait_mean"]["rel"], 0.1), "{v}");
        let own = &v["own_delays"];
        assert_eq!(
            own.as_object().unwrap().len(),
            1,
            "the twin has none: {own}"
        );
        assert_eq!(own["a"]["jobs"], 3, "{own}");
        assert!(close(&own["a"]["start"]["p50"], 2.0), "{own}");
        assert!(close(&own["a"]["run_over"]["max"], 1.0), "{own}");
        // Without them, a is its twin.
        for figure in ["wait_mean", "bounded_slowdown_mean", "utilization"] {
            assert!(
                close(&own["a"]["relative_without"][figure], 0.0),
                "{figure}: {own}"
            );
        }
        // And the table says so.
        let mut table = Vec::new();
        compare(
            &emu,
            &sim,
            &Options {
                json: false,
                ..opts
            },
            &mut table,
        )
        .unwrap();
        let table = String::from_utf8(table).unwrap();
        assert!(table.contains("its start after its pass"), "{table}");
        assert!(
            table.contains("wait_mean 0.00 %, bounded_slowdown_mean 0.00 %, utilization 0.00 %"),
            "{table}"
        );
        // The twin against the emulation: b's are taken out.
        let mut out = Vec::new();
        compare(&sim, &emu, &opts, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(
            close(&v["own_delays"]["b"]["relative_without"]["wait_mean"], 0.0),
            "{v}"
        );
    }

    #[test]
    fn jobs_are_matched_by_the_trace_job_they_replay() {
        // The emulated run shared its cluster: its ids start at 41, and
        // it ran the trace's third job first.
        let dir = tempfile::tempdir().unwrap();
        let (emu, sim) = (dir.path().join("emu"), dir.path().join("sim"));
        run(&emu, [42, 43, 41], [1, 2, 0]);
        run(&sim, [1, 2, 3], [0, 2, 0]);
        let mut out = Vec::new();
        let opts = Options {
            json: true,
            force: false,
            clock: ClockKind::Wall,
            worst: 0,
        };
        assert!(compare(&emu, &sim, &opts, &mut out).unwrap());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["jobs_compared"], 3);
        assert_eq!(v["jobs_in_one_run_only"], 0);
        // Only the trace's first job started 1 s later than its twin.
        assert_eq!(v["per_job"]["start"]["max"], 1.0);
        assert_eq!(v["per_job"]["start"]["p50"], 0.0);
        assert!(v.get("most_apart").is_none(), "listed unasked");
    }

    #[test]
    fn the_jobs_whose_starts_differ_most_are_listed_with_their_share() {
        let dir = tempfile::tempdir().unwrap();
        let (emu, sim) = (dir.path().join("emu"), dir.path().join("sim"));
        // Trace job 3 starts 6 s late, job 1 3 s early, job 2 alike.
        run(&emu, [1, 2, 3], [0, 2, 6]);
        run(&sim, [1, 2, 3], [3, 2, 0]);
        let mut out = Vec::new();
        let opts = Options {
            json: true,
            force: false,
            clock: ClockKind::Wall,
            worst: 2,
        };
        compare(&emu, &sim, &opts, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let apart = &v["most_apart"];
        assert_eq!(apart["key"], "trace job");
        assert_eq!(apart["start_differences_summed"], 3.0);
        let jobs = apart["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (&jobs[0]["job"], &jobs[0]["start"], &jobs[0]["share"]),
            (&json!(3), &json!(6.0), &json!(2.0))
        );
        assert_eq!(
            (&jobs[0]["wait_a"], &jobs[0]["wait_b"]),
            (&json!(6.0), &json!(0.0))
        );
        assert_eq!(
            (&jobs[1]["job"], &jobs[1]["start"]),
            (&json!(1), &json!(-3.0))
        );
        // In the table too, largest first.
        let mut table = Vec::new();
        compare(
            &emu,
            &sim,
            &Options {
                json: false,
                ..opts
            },
            &mut table,
        )
        .unwrap();
        let table = String::from_utf8(table).unwrap();
        let three = table.find("\n3 ").expect("job 3 listed");
        let one = table.find("\n1 ").expect("job 1 listed");
        assert!(three < one, "{table}");
        assert!(table.contains("200.0 %"), "{table}");
    }
}
