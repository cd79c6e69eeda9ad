//! How metrics are printed: a table for people, JSON and CSV for scripts.
//! Several runs print side by side, one column (or JSON object, or CSV row)
//! per run.

use std::io::{self, Write};

use serde_json::Value;

use crate::clock::ClockKind;
use crate::metrics::{Stats, Summary};
use crate::replicas::Estimate;

/// One run's name and metrics; for the replicas of one replay, each
/// replica's too (`summary` is then the first's).
pub struct Named {
    pub name: String,
    pub summary: Summary,
    /// The replicas' summaries; empty for a run alone.
    pub members: Vec<Summary>,
}

impl Named {
    /// A run alone.
    pub fn one(name: String, summary: Summary) -> Named {
        Named {
            name,
            summary,
            members: Vec::new(),
        }
    }

    /// Its figure `get` as the table shows it: the run's, or the replicas'
    /// mean ± the half-width of its 95 % interval.
    fn cell(&self, get: &dyn Fn(&Summary) -> Option<f64>, fmt: fn(f64) -> String) -> String {
        if self.members.is_empty() {
            return get(&self.summary).map_or("-".into(), fmt);
        }
        let values: Vec<f64> = self.members.iter().filter_map(get).collect();
        match Estimate::of(&values) {
            Some(e) => format!("{} ± {}", fmt(e.mean), fmt(e.half)),
            None => "-".into(),
        }
    }

    /// As JSON: the summary, or for replicas their number and, leaf by
    /// leaf, the mean of each figure and its interval's half-width.
    fn json(&self) -> io::Result<Value> {
        if self.members.is_empty() {
            return Ok(serde_json::to_value(&self.summary)?);
        }
        let each = self
            .members
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        let (mean, ci95) = crate::replicas::combine(&each);
        Ok(serde_json::json!({
            "replicas": self.members.len(),
            "clock": self.summary.clock,
            "mean": mean,
            "ci95": ci95,
        }))
    }
}

/// One run alone prints the docs/design.md object; several print an array of
/// such objects, each with a leading `run` key naming it. The replicas of
/// a replay print as `replicas`, `mean` and `ci95` (each figure's mean, and
/// the half-width of its 95 % interval).
pub fn json(out: &mut impl Write, runs: &[Named]) -> io::Result<()> {
    let named = |r: &Named| -> io::Result<Value> {
        let mut obj = serde_json::Map::new();
        obj.insert("run".into(), Value::String(r.name.clone()));
        if let Value::Object(m) = r.json()? {
            obj.extend(m);
        }
        Ok(Value::Object(obj))
    };
    match runs {
        [one] if one.members.is_empty() => serde_json::to_writer_pretty(&mut *out, &one.summary)?,
        [one] => serde_json::to_writer_pretty(&mut *out, &named(one)?)?,
        _ => {
            let all = runs.iter().map(named).collect::<io::Result<Vec<_>>>()?;
            serde_json::to_writer_pretty(&mut *out, &all)?;
        }
    }
    writeln!(out)
}

/// One row per run (and per size class with `--by size`), columns named
/// after the JSON keys with nesting flattened by `_`.
pub fn csv(out: &mut impl Write, runs: &[Named]) -> io::Result<()> {
    let by_size = runs.iter().any(|r| r.summary.by_size.is_some());
    // Replicas add their number, and each figure's interval after all.
    let sets = runs.iter().any(|r| !r.members.is_empty());
    let mut header: Vec<String> = vec!["run".into()];
    if sets {
        header.push("replicas".into());
    }
    if by_size {
        header.extend(["class", "min_cores", "max_cores"].map(String::from));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut first = true;
    for run in runs {
        let mut push =
            |class: Option<(&str, u64, u64)>, values: Value, ci: Option<Value>| -> io::Result<()> {
                let flat = flatten(values);
                if first {
                    header.extend(flat.iter().map(|(k, _)| k.clone()));
                    if sets {
                        header.extend(flat.iter().map(|(k, _)| format!("{k}_ci95")));
                    }
                    first = false;
                }
                let mut row = vec![run.name.clone()];
                if sets {
                    row.push(run.members.len().max(1).to_string());
                }
                if by_size {
                    match class {
                        Some((c, lo, hi)) => {
                            row.extend([c.to_string(), lo.to_string(), hi.to_string()])
                        }
                        None => row.extend(["all".to_string(), String::new(), String::new()]),
                    }
                }
                let n = flat.len();
                row.extend(flat.into_iter().map(|(_, v)| v));
                if sets {
                    match ci {
                        Some(ci) => row.extend(flatten(ci).into_iter().map(|(_, v)| v)),
                        None => row.extend(std::iter::repeat_n(String::new(), n)),
                    }
                }
                rows.push(row);
                Ok(())
            };
        if run.members.is_empty() {
            push(None, serde_json::to_value(&run.summary)?, None)?;
            for c in run.summary.by_size.iter().flatten() {
                push(
                    Some((&c.class, c.min_cores, c.max_cores)),
                    serde_json::to_value(&c.summary)?,
                    None,
                )?;
            }
        } else {
            let v = run.json()?;
            push(None, v["mean"].clone(), Some(v["ci95"].clone()))?;
        }
    }
    let mut w = csv::Writer::from_writer(out);
    w.write_record(&header)?;
    for row in rows {
        w.write_record(&row)?;
    }
    w.flush()
}

/// A summary's scalar fields as (column, text) pairs, in JSON order.
fn flatten(mut v: Value) -> Vec<(String, String)> {
    if let Value::Object(m) = &mut v {
        m.remove("by_size");
    }
    let mut out = Vec::new();
    walk("", &v, &mut out);
    out
}

fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}_{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                walk(&key(k), v, out);
            }
        }
        Value::Array(a) if prefix == "window" => {
            for (name, v) in ["start", "end"].iter().zip(a) {
                walk(&key(name), v, out);
            }
        }
        Value::Null if prefix == "window" => {
            out.push((key("start"), String::new()));
            out.push((key("end"), String::new()));
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(text) => out.push((prefix.to_string(), text.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// A readable table: one row per figure, one column per run.
pub fn table(out: &mut impl Write, runs: &[Named]) -> io::Result<()> {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    // Each run's figure (the replicas' mean ± its interval).
    let each = |get: &dyn Fn(&Summary) -> Option<f64>, fmt: fn(f64) -> String| -> Vec<String> {
        runs.iter().map(|r| r.cell(get, fmt)).collect()
    };
    // Every time says its clock (runs side by side share one: see
    // `clock::choose`).
    let unit = runs
        .first()
        .map_or(ClockKind::Wall, |r| r.summary.clock)
        .unit();
    rows.push(("jobs".into(), each(&|s| Some(s.jobs as f64), count)));
    rows.push(("cores".into(), each(&|s| s.cores.map(|c| c as f64), count)));
    rows.push((format!("makespan ({unit})"), each(&|s| s.makespan, num)));
    // One τ for all columns when they agree; "run's" when runs differ.
    let taus: Vec<f64> = runs.iter().map(|r| r.summary.tau).collect();
    let same_tau = taus.windows(2).all(|w| w[0] == w[1]);
    type StatsOf = fn(&Summary) -> Stats;
    let stats: [(&str, StatsOf); 4] = [
        ("wait", |s| s.wait),
        ("response", |s| s.response),
        ("slowdown", |s| s.slowdown),
        ("bounded slowdown", |s| s.bounded_slowdown),
    ];
    for (label, get) in stats {
        let label = match label {
            "wait" | "response" => format!("{label} ({unit})"),
            // τ as given: `10`, `0.0005`.
            "bounded slowdown" if same_tau => format!(
                "bounded slowdown (tau {} {unit})",
                taus.first().copied().unwrap_or(10.0)
            ),
            "bounded slowdown" => "bounded slowdown (each run's tau)".to_string(),
            other => other.to_string(),
        };
        for (which, pick) in [
            ("mean", (|s: &Stats| s.mean) as fn(&Stats) -> Option<f64>),
            ("p50", |s| s.p50),
            ("p95", |s| s.p95),
            ("p99", |s| s.p99),
            ("max", |s| s.max),
        ] {
            rows.push((format!("{label} {which}"), each(&|s| pick(&get(s)), num)));
        }
    }
    rows.push((
        "weighted slowdown".into(),
        each(&|s| s.weighted_slowdown, num),
    ));
    rows.push(("utilization".into(), each(&|s| s.utilization, percent)));
    // Generic resources, kind by kind, for runs on a cluster with them.
    let kinds: std::collections::BTreeSet<&String> = runs
        .iter()
        .flat_map(|r| r.summary.resources.keys())
        .collect();
    for kind in kinds {
        rows.push((
            format!("utilization {kind}"),
            each(
                &|s| s.resources.get(kind).and_then(|r| r.utilization),
                percent,
            ),
        ));
    }
    rows.push((
        "suspended jobs".into(),
        each(&|s| Some(s.suspended_jobs as f64), count),
    ));
    rows.push((
        "suspensions".into(),
        each(&|s| Some(s.suspensions as f64), count),
    ));
    rows.push((
        format!("suspended time ({unit})"),
        each(&|s| Some(s.suspended_time), num),
    ));
    rows.push((
        "cancelled jobs".into(),
        runs.iter()
            .map(|r| {
                let c = r.summary.cancelled;
                match (r.members.is_empty(), c.jobs) {
                    (false, _) => r.cell(&|s| Some(s.cancelled.jobs as f64), count),
                    (true, 0) => "0".into(),
                    (true, _) => format!("{} ({} before start)", c.jobs, c.before_start),
                }
            })
            .collect(),
    ));
    rows.push((
        "excluded jobs".into(),
        each(&|s| Some(s.skipped.excluded as f64), count),
    ));
    // Damage as `calcmets dump` reports it, kind by kind.
    rows.push((
        "corrupt frames".into(),
        each(&|s| Some(s.skipped.damage.corrupt as f64), count),
    ));
    rows.push((
        "torn frames".into(),
        each(&|s| Some(s.skipped.damage.torn as f64), count),
    ));
    rows.push((
        "frames of unknown version".into(),
        each(&|s| Some(s.skipped.damage.unsupported as f64), count),
    ));
    if runs.iter().any(|r| !r.members.is_empty()) {
        rows.push((
            "replicas".into(),
            runs.iter()
                .map(|r| r.members.len().max(1).to_string())
                .collect(),
        ));
    }

    // A lone run of loose record files has no name worth a column title.
    let header: Vec<String> = match runs {
        [one] if one.name == "records" => vec!["value".into()],
        _ => runs.iter().map(|r| r.name.clone()).collect(),
    };
    print_grid(out, "metric", &header, &rows)?;

    for run in runs {
        if let Some(classes) = &run.summary.by_size {
            writeln!(out)?;
            if runs.len() > 1 {
                write!(out, "{} by job size (cores)", run.name)?;
            } else {
                write!(out, "by job size (cores)")?;
            }
            writeln!(out, "; wait and response in {unit}:")?;
            let cols = [
                "jobs",
                "wait mean",
                "wait p95",
                "resp mean",
                "sld mean",
                "bsld mean",
                "bsld p95",
                "util",
            ]
            .map(String::from);
            let rows: Vec<(String, Vec<String>)> = classes
                .iter()
                .map(|c| {
                    let s = &c.summary;
                    (
                        c.class.clone(),
                        vec![
                            s.jobs.to_string(),
                            opt(s.wait.mean),
                            opt(s.wait.p95),
                            opt(s.response.mean),
                            opt(s.slowdown.mean),
                            opt(s.bounded_slowdown.mean),
                            opt(s.bounded_slowdown.p95),
                            s.utilization
                                .map_or("-".into(), |u| format!("{:.2} %", u * 100.0)),
                        ],
                    )
                })
                .collect();
            print_grid(out, "cores", &cols, &rows)?;
        }
    }
    if runs.iter().any(|r| r.summary.approximate) {
        writeln!(
            out,
            "\npercentiles of runs with more than 65,536 jobs are within 0.1 % of the exact value"
        )?;
    }
    if runs.iter().any(|r| !r.members.is_empty()) {
        writeln!(
            out,
            "\nreplicas: each figure is their mean ± the half-width of its 95 % interval"
        )?;
    }
    Ok(())
}

fn print_grid(
    out: &mut impl Write,
    corner: &str,
    header: &[String],
    rows: &[(String, Vec<String>)],
) -> io::Result<()> {
    let w0 = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .chain([corner.len()])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|(_, v)| v[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    write!(out, "{corner:<w0$}")?;
    for (h, w) in header.iter().zip(&widths) {
        write!(out, "  {h:>w$}")?;
    }
    writeln!(out)?;
    for (label, vals) in rows {
        write!(out, "{label:<w0$}")?;
        for (v, w) in vals.iter().zip(&widths) {
            write!(out, "  {v:>w$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), num)
}

/// A count: whole, unless it is the mean of replicas' counts.
fn count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn percent(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

/// Enough digits to read, not so many as to drown: 4 significant digits
/// for small numbers, one decimal for larger ones.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || a >= 1e5 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}
