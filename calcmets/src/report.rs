//! How metrics are printed: a table for people, JSON and CSV for scripts.
//! Several runs print side by side, one column (or JSON object, or CSV row)
//! per run.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::clock::ClockKind;
use crate::metrics::{Stats, Summary};

/// One run's name and metrics.
pub struct Named {
    pub name: String,
    pub summary: Summary,
}

#[derive(Serialize)]
struct JsonRun<'a> {
    run: &'a str,
    #[serde(flatten)]
    summary: &'a Summary,
}

/// One run alone prints the docs/design.md object; several print an array of
/// such objects, each with a leading `run` key naming it.
pub fn json(out: &mut impl Write, runs: &[Named]) -> io::Result<()> {
    match runs {
        [one] => serde_json::to_writer_pretty(&mut *out, &one.summary)?,
        _ => {
            let all: Vec<JsonRun<'_>> = runs
                .iter()
                .map(|r| JsonRun {
                    run: &r.name,
                    summary: &r.summary,
                })
                .collect();
            serde_json::to_writer_pretty(&mut *out, &all)?;
        }
    }
    writeln!(out)
}

/// One row per run (and per size class with `--by size`), columns named
/// after the JSON keys with nesting flattened by `_`.
pub fn csv(out: &mut impl Write, runs: &[Named]) -> io::Result<()> {
    let by_size = runs.iter().any(|r| r.summary.by_size.is_some());
    let mut header: Vec<String> = vec!["run".into()];
    if by_size {
        header.extend(["class", "min_cores", "max_cores"].map(String::from));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut first = true;
    for run in runs {
        let mut push = |class: Option<(&str, u64, u64)>, s: &Summary| -> io::Result<()> {
            let flat = flatten(s)?;
            if first {
                header.extend(flat.iter().map(|(k, _)| k.clone()));
                first = false;
            }
            let mut row = vec![run.name.clone()];
            if by_size {
                match class {
                    Some((c, lo, hi)) => {
                        row.extend([c.to_string(), lo.to_string(), hi.to_string()])
                    }
                    None => row.extend(["all".to_string(), String::new(), String::new()]),
                }
            }
            row.extend(flat.into_iter().map(|(_, v)| v));
            rows.push(row);
            Ok(())
        };
        push(None, &run.summary)?;
        for c in run.summary.by_size.iter().flatten() {
            push(Some((&c.class, c.min_cores, c.max_cores)), &c.summary)?;
        }
    }
    let mut w = csv::Writer::from_writer(out);
    w.write_record(&header)?;
    for row in rows {
        w.write_record(&row)?;
    }
    w.flush()
}

/// The summary's scalar fields as (column, text) pairs, in JSON order.
fn flatten(s: &Summary) -> io::Result<Vec<(String, String)>> {
    let mut v = serde_json::to_value(s)?;
    if let Value::Object(m) = &mut v {
        m.remove("by_size");
    }
    let mut out = Vec::new();
    walk("", &v, &mut out);
    Ok(out)
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
    let each = |f: &dyn Fn(&Summary) -> String| runs.iter().map(|r| f(&r.summary)).collect();
    // Every time says its clock (runs side by side share one: see
    // `clock::choose`).
    let unit = runs
        .first()
        .map_or(ClockKind::Wall, |r| r.summary.clock)
        .unit();
    rows.push(("jobs".into(), each(&|s| s.jobs.to_string())));
    rows.push(("cores".into(), each(&|s| opt_int(s.cores))));
    rows.push((format!("makespan ({unit})"), each(&|s| opt(s.makespan))));
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
            rows.push((format!("{label} {which}"), each(&|s| opt(pick(&get(s))))));
        }
    }
    rows.push((
        "weighted slowdown".into(),
        each(&|s| opt(s.weighted_slowdown)),
    ));
    rows.push((
        "utilization".into(),
        each(&|s| {
            s.utilization
                .map_or("-".into(), |u| format!("{:.2} %", u * 100.0))
        }),
    ));
    // Generic resources, kind by kind, for runs on a cluster with them.
    let kinds: std::collections::BTreeSet<&String> = runs
        .iter()
        .flat_map(|r| r.summary.resources.keys())
        .collect();
    for kind in kinds {
        rows.push((
            format!("utilization {kind}"),
            each(&|s| {
                let u = s.resources.get(kind).and_then(|r| r.utilization);
                u.map_or("-".into(), |u| format!("{:.2} %", u * 100.0))
            }),
        ));
    }
    rows.push((
        "suspended jobs".into(),
        each(&|s| s.suspended_jobs.to_string()),
    ));
    rows.push(("suspensions".into(), each(&|s| s.suspensions.to_string())));
    rows.push((
        format!("suspended time ({unit})"),
        each(&|s| num(s.suspended_time)),
    ));
    rows.push((
        "cancelled jobs".into(),
        each(&|s| {
            let c = s.cancelled;
            if c.jobs == 0 {
                "0".into()
            } else {
                format!("{} ({} before start)", c.jobs, c.before_start)
            }
        }),
    ));
    rows.push((
        "excluded jobs".into(),
        each(&|s| s.skipped.excluded.to_string()),
    ));
    // Damage as `calcmets dump` reports it, kind by kind.
    rows.push((
        "corrupt frames".into(),
        each(&|s| s.skipped.damage.corrupt.to_string()),
    ));
    rows.push((
        "torn frames".into(),
        each(&|s| s.skipped.damage.torn.to_string()),
    ));
    rows.push((
        "frames of unknown version".into(),
        each(&|s| s.skipped.damage.unsupported.to_string()),
    ));

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
                writeln!(out, "{} by job size (cores):", run.name)?;
            } else {
                writeln!(out, "by job size (cores):")?;
            }
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

fn opt_int(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
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
