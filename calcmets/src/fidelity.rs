//! `calcmets fidelity EMULATED SIMULATED`: how far an emulated run is from
//! its virtual-time twin. Both are results directories of the same replay
//! (same trace slice, factor and cluster); jobs are matched by the trace
//! job they replay (from each run's jobs.csv; by the cluster's job id if
//! one has none, as a fresh cluster numbers jobs in submission order in
//! both), times are taken relative to each
//! run's start (its manifest), and for each job the differences of start,
//! end and suspended time are summarised, then each metric of the two runs
//! is set side by side with its absolute and relative difference.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;
use serde::Serialize;
use serde_json::json;

use crate::inputs;
use crate::metrics::{Params, Summary};

/// One job's instants, relative to its run's start, in nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Times {
    start: i64,
    end: i64,
    suspended: i64,
    completed: bool,
}

struct Run {
    start_ns: i64,
    /// By the key the runs are matched on.
    jobs: HashMap<i64, Times>,
    /// Records with no key (a job jobs.csv does not list): in one run only.
    unkeyed: u64,
    summary: Summary,
    damaged: u64,
}

/// A run's records and metrics; jobs keyed by `keys` (the cluster's job
/// id → the trace job it replays), or by job id without them.
fn load(dir: &Path, keys: Option<&HashMap<u64, i64>>) -> Result<Run> {
    let m = formats::results::Manifest::read(dir)
        .with_context(|| format!("{}: not a results directory", dir.display()))?;
    let path = dir.join(formats::results::MANIFEST);
    let start = m
        .start
        .ok_or_else(|| anyhow!("{}: no \"start\"", path.display()))?;
    let start_ns = (start * 1e9).round() as i64;
    let cores = m
        .cores
        .filter(|&c| c > 0)
        .ok_or_else(|| anyhow!("{}: no \"cores\"", path.display()))?;
    let tau_ns = m
        .tau
        .map_or(crate::DEFAULT_TAU_NS, |t| (t * 1e9).round() as i64);
    let book = crate::results::Book::open(dir)?;
    if !book.finished() {
        bail!(
            "{}: the run did not finish (status {}): only finished runs compare",
            dir.display(),
            book.status.as_str()
        );
    }
    let sources = inputs::expand(&[dir.to_path_buf()])?;
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
        jobs.insert(
            key,
            Times {
                start: r.start - start_ns,
                end: r.end - start_ns,
                suspended: r.suspended_ns(),
                completed: r.status == Status::Completed,
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
    )?;
    for w in warnings {
        eprintln!("calcmets: warning: {w}");
    }
    Ok(Run {
        start_ns,
        jobs,
        unkeyed,
        summary,
        damaged,
    })
}

/// Percentiles of absolute differences, and the mean signed one (the bias).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

fn spread(mut diffs: Vec<i64>) -> Spread {
    let mean = if diffs.is_empty() {
        0.0
    } else {
        diffs.iter().map(|&d| d as f64).sum::<f64>() / diffs.len() as f64 / 1e9
    };
    let mut abs: Vec<i64> = diffs.drain(..).map(i64::abs).collect();
    abs.sort_unstable();
    let at = |q: f64| {
        if abs.is_empty() {
            0.0
        } else {
            abs[crate::dist::rank(q, abs.len()) - 1] as f64 / 1e9
        }
    };
    Spread {
        p50: at(0.5),
        p99: at(0.99),
        max: abs.last().map_or(0.0, |&v| v as f64 / 1e9),
        mean,
    }
}

/// The metrics compared, flattened: (name, emulated, simulated).
fn metric_pairs(e: &Summary, s: &Summary) -> Vec<(String, Option<f64>, Option<f64>)> {
    let mut out = vec![
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

/// Writes the comparison; returns whether the runs hold the same jobs.
pub fn compare(
    emulated: &Path,
    simulated: &Path,
    json: bool,
    out: &mut impl Write,
) -> Result<bool> {
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
    let (ek, sk) = (trace_ids(emulated)?, trace_ids(simulated)?);
    let usable = |k: &HashMap<u64, i64>| {
        !k.is_empty()
            && k.values().all(|&t| t >= 0)
            && k.values().collect::<std::collections::HashSet<_>>().len() == k.len()
    };
    let by_trace = usable(&ek) && usable(&sk);
    let e = load(emulated, by_trace.then_some(&ek))?;
    let s = load(simulated, by_trace.then_some(&sk))?;
    if e.damaged + s.damaged > 0 {
        bail!("damaged records: run `calcmets dump` on both directories to see where");
    }
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut susp = Vec::new();
    let mut only_one = e.unkeyed + s.unkeyed;
    for (id, a) in &e.jobs {
        match s.jobs.get(id) {
            Some(b) if a.completed && b.completed => {
                starts.push(a.start - b.start);
                ends.push(a.end - b.end);
                susp.push(a.suspended - b.suspended);
            }
            Some(_) => {}
            None => only_one += 1,
        }
    }
    only_one += s.jobs.keys().filter(|id| !e.jobs.contains_key(id)).count() as u64;
    let matched = starts.len();
    let (start, end, suspended) = (spread(starts), spread(ends), spread(susp));
    let pairs = metric_pairs(&e.summary, &s.summary);
    if json {
        let metrics: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(name, a, b)| {
                let (abs, rel) = diff(*a, *b);
                (
                    name.clone(),
                    json!({"emulated": a, "simulated": b, "abs": abs, "rel": rel}),
                )
            })
            .collect();
        let v = json!({
            "jobs_compared": matched,
            "jobs_in_one_run_only": only_one,
            "emulated_start": e.start_ns as f64 / 1e9,
            "simulated_start": s.start_ns as f64 / 1e9,
            "per_job": {"start": start, "end": end, "suspended": suspended},
            "metrics": metrics,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(
            out,
            "{matched} jobs compared ({only_one} in one run only); times relative to each run's start"
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "{:<34} {:>11} {:>11} {:>11} {:>11}",
            "per job, emulated - simulated (s)", "|d| p50", "|d| p99", "|d| max", "mean d"
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
        writeln!(
            out,
            "{:<24} {:>12} {:>12} {:>12} {:>9}",
            "metric", "emulated", "simulated", "difference", "relative"
        )?;
        for (name, a, b) in &pairs {
            let (abs, rel) = diff(*a, *b);
            let show = |v: Option<f64>| v.map_or("-".to_string(), crate::report::num);
            writeln!(
                out,
                "{:<24} {:>12} {:>12} {:>12} {:>9}",
                name,
                show(*a),
                show(*b),
                show(abs),
                rel.map_or("-".to_string(), |r| format!("{:.2} %", r * 100.0))
            )?;
        }
    }
    Ok(only_one == 0)
}

/// Emulated − simulated, and that relative to the simulated value.
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

    const S: i64 = 1_000_000_000;

    /// A results directory whose cluster numbered the trace's jobs 1, 2, 3
    /// as `ids`, each running 10 s from its start.
    fn run(dir: &Path, ids: [u64; 3], starts: [i64; 3]) {
        std::fs::create_dir_all(dir.join("records")).unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"start": 1000.0, "cores": 4, "tau": 10.0}"#,
        )
        .unwrap();
        let mut csv = String::from("trace_id,job_id,state,nodes\n");
        let mut bytes = Vec::new();
        for (t, (&id, &b)) in ids.iter().zip(&starts).enumerate() {
            csv.push_str(&format!("{},{id},completed,\"n1\"\n", t + 1));
            let rec = JobRecord {
                id,
                cores: 1,
                node: Cow::Borrowed("n1"),
                submit: 1000 * S,
                start: (1000 + b) * S,
                end: (1010 + b) * S,
                runtime: 10 * S as u64,
                walltime: 0,
                status: Status::Completed,
                flags: Flags::default(),
                suspensions: Vec::new(),
                devices: Vec::new(),
            };
            encode(&rec, &mut bytes).unwrap();
        }
        std::fs::write(dir.join(formats::results::JOBS), csv).unwrap();
        std::fs::write(dir.join("records/jobs.rec"), bytes).unwrap();
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
        assert!(compare(&emu, &sim, true, &mut out).unwrap());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["jobs_compared"], 3);
        assert_eq!(v["jobs_in_one_run_only"], 0);
        // Only the trace's first job started 1 s later than its twin.
        assert_eq!(v["per_job"]["start"]["max"], 1.0);
        assert_eq!(v["per_job"]["start"]["p50"], 0.0);
    }
}
