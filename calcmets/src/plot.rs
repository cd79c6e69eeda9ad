//! `calcmets plot`: the pictures scheduling papers show, as SVG files.
//!
//! For each run (a results directory, or the loose record files given):
//! `<run>-timeline.svg`, utilization and the queue (pending, running,
//! suspended jobs) over time, and `<run>-gantt.svg`, jobs on nodes with
//! suspended stretches drawn apart. Across runs: `cdf-wait.svg` and
//! `cdf-bsld.svg`, one curve per run, and `bsld-by-size.svg`, mean bounded
//! slowdown by job-size class, one bar per run in each group.
//!
//! Charts stay legible at 100,000 jobs by aggregating before drawing: the
//! timeline is averaged over at most [`BINS`] intervals, curves keep at most
//! [`CURVE_POINTS`] points, and the Gantt chart shows a window of time and
//! nodes (by default the first [`GANTT_NODES`] nodes) and merges what is
//! narrower than a pixel.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::inputs;
use crate::metrics::size_class;
use crate::runs::{self, RunInput};

/// Most intervals the timeline is averaged over.
pub const BINS: usize = 800;
/// Most points of a distribution curve.
pub const CURVE_POINTS: usize = 400;
/// Nodes the Gantt chart shows unless told which.
pub const GANTT_NODES: usize = 64;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 700;
const FONT: &str = "sans-serif";

/// What to draw, and where.
#[derive(Debug, Clone)]
pub struct PlotArgs {
    pub out: PathBuf,
    pub inputs: Vec<PathBuf>,
    pub cores: Option<u64>,
    pub tau_ns: Option<i64>,
    /// Gantt window, in seconds since each run's first submission.
    pub window: Option<(f64, f64)>,
    /// Gantt nodes, as a nodeset.
    pub nodes: Option<String>,
}

/// One job, as the charts need it; times in ns since the run's start.
#[derive(Debug, Clone)]
struct Job {
    id: u64,
    cores: u64,
    /// The node its process ran on (its first).
    node: String,
    /// All its nodes, folded, when the run's jobs.csv says.
    nodes: Option<String>,
    submit: i64,
    start: i64,
    end: i64,
    suspensions: Vec<(i64, i64)>,
    completed: bool,
}

struct Run {
    name: String,
    cores: Option<u64>,
    tau_ns: i64,
    jobs: Vec<Job>,
}

/// Writes every chart; returns the files written.
pub fn plot(args: &PlotArgs) -> Result<Vec<PathBuf>> {
    let runs = load(args)?;
    if runs.is_empty() {
        bail!("nothing to plot: give results directories or record files");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut written = Vec::new();
    let many = runs.len() > 1;
    for run in &runs {
        let stem = if many {
            file_stem(&run.name)
        } else {
            String::new()
        };
        let cores = run.cores.ok_or_else(|| {
            anyhow!(
                "{}: no core count for utilization (give --cores, or a results directory)",
                run.name
            )
        })?;
        let path = args.out.join(format!("{stem}{}timeline.svg", sep(&stem)));
        timeline(&path, run, cores)?;
        written.push(path);
        let path = args.out.join(format!("{stem}{}gantt.svg", sep(&stem)));
        gantt(&path, run, args.window, args.nodes.as_deref())?;
        written.push(path);
    }
    let path = args.out.join("cdf-wait.svg");
    cdf(
        &path,
        &runs,
        "wait",
        "wait time (s, log scale)",
        1e-3,
        |_, j| (j.start - j.submit) as f64 / 1e9,
    )?;
    written.push(path);
    let path = args.out.join("cdf-bsld.svg");
    cdf(
        &path,
        &runs,
        "bounded slowdown",
        "bounded slowdown (log scale)",
        1.0,
        bsld,
    )?;
    written.push(path);
    let path = args.out.join("bsld-by-size.svg");
    by_size(&path, &runs)?;
    written.push(path);
    Ok(written)
}

fn sep(stem: &str) -> &'static str {
    if stem.is_empty() {
        ""
    } else {
        "-"
    }
}

/// A run name as a file name.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn load(args: &PlotArgs) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let plan = runs::plan(&args.inputs, &[], false, &mut warnings)?;
    for w in &warnings {
        eprintln!("calcmets: warning: {w}");
    }
    for run in plan {
        let RunInput::Records(sources) = &run.input else {
            continue;
        };
        let mut jobs = Vec::new();
        let stats = inputs::for_each_record(sources, |r| {
            jobs.push(Job {
                id: r.id,
                cores: u64::from(r.cores),
                node: r.node.to_string(),
                nodes: None,
                submit: r.submit,
                start: r.start,
                end: r.end,
                suspensions: r
                    .suspensions
                    .iter()
                    .map(|s| (s.suspend, s.resume))
                    .collect(),
                completed: r.status == Status::Completed,
            });
            Ok(())
        })?;
        for w in inputs::damage_report(&stats) {
            eprintln!("calcmets: warning: {w}");
        }
        if let Some(dir) = &run.dir {
            let rows = crate::jobs_csv::read(dir)?;
            for j in &mut jobs {
                j.nodes = rows.get(&j.id).and_then(|r| r.nodes.clone());
            }
        }
        let t0 = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        for j in &mut jobs {
            j.submit -= t0;
            j.start -= t0;
            j.end -= t0;
            for s in &mut j.suspensions {
                s.0 -= t0;
                s.1 -= t0;
            }
        }
        out.push(Run {
            name: run.name.clone(),
            cores: args.cores.or(run.manifest_cores),
            tau_ns: args
                .tau_ns
                .or(run.manifest_tau)
                .unwrap_or(crate::DEFAULT_TAU_NS),
            jobs,
        });
    }
    Ok(out)
}

fn bsld(run: &Run, j: &Job) -> f64 {
    let z: i64 = j.suspensions.iter().map(|(s, r)| (r - s).max(0)).sum();
    let r = (j.end - j.start - z).max(1);
    let resp = j.end - j.submit;
    (resp as f64 / r.max(run.tau_ns) as f64).max(1.0)
}

/// The jobs the metrics count: completed, with a positive run time.
fn counted(j: &Job) -> bool {
    let z: i64 = j.suspensions.iter().map(|(s, r)| (r - s).max(0)).sum();
    j.completed && j.end - j.start - z > 0 && j.cores > 0
}

type Svg<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn svg_error<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("{}: cannot draw: {e:?}", path.display())
}

fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

/// The unit of a time axis spanning `secs` seconds: its size in seconds
/// and its name.
fn time_unit(secs: f64) -> (f64, &'static str) {
    if secs > 3.0 * 86_400.0 {
        (86_400.0, "days")
    } else if secs > 3.0 * 3_600.0 {
        (3_600.0, "h")
    } else if secs > 3.0 * 60.0 {
        (60.0, "min")
    } else {
        (1.0, "s")
    }
}

/// Draws the series' legend in a box at `pos`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 15))
        .position(pos)
        .draw()
}

/// Time-weighted averages of step functions over `BINS` intervals.
struct Steps {
    edges: Vec<f64>,
    /// Per series, per bin.
    means: Vec<Vec<f64>>,
}

/// Averages step functions given as (time, series, delta) changes.
fn average(mut changes: Vec<(i64, usize, f64)>, series: usize, t_end: i64) -> Steps {
    changes.sort_by_key(|c| c.0);
    let t_end = t_end.max(1);
    let bins = BINS.min(t_end as usize).max(1);
    let width = t_end as f64 / bins as f64;
    let mut means = vec![Vec::with_capacity(bins); series];
    let mut level = vec![0.0; series];
    let mut acc = vec![0.0; series];
    let mut t = 0.0_f64;
    let mut i = 0;
    for b in 0..bins {
        let hi = (b + 1) as f64 * width;
        acc.fill(0.0);
        loop {
            let next = changes.get(i).map_or(f64::INFINITY, |c| c.0 as f64);
            let until = next.min(hi);
            if until > t {
                for (a, l) in acc.iter_mut().zip(&level) {
                    *a += l * (until - t) / width;
                }
                t = until;
            }
            if next <= hi {
                let (_, s, d) = changes[i];
                level[s] += d;
                i += 1;
            } else {
                break;
            }
        }
        for (m, a) in means.iter_mut().zip(&acc) {
            m.push(*a);
        }
    }
    Steps {
        edges: (0..=bins).map(|b| b as f64 * width / 1e9).collect(),
        means,
    }
}

fn timeline(path: &Path, run: &Run, cores: u64) -> Result<()> {
    const PENDING: usize = 0;
    const RUNNING: usize = 1;
    const SUSPENDED: usize = 2;
    const BUSY: usize = 3;
    let mut changes = Vec::with_capacity(run.jobs.len() * 6);
    let mut t_end = 0;
    for j in &run.jobs {
        let c = j.cores as f64;
        changes.push((j.submit, PENDING, 1.0));
        changes.push((j.start, PENDING, -1.0));
        changes.push((j.start, RUNNING, 1.0));
        changes.push((j.start, BUSY, c));
        for &(s, r) in &j.suspensions {
            changes.extend([(s, RUNNING, -1.0), (s, SUSPENDED, 1.0), (s, BUSY, -c)]);
            changes.extend([(r, RUNNING, 1.0), (r, SUSPENDED, -1.0), (r, BUSY, c)]);
        }
        changes.push((j.end, RUNNING, -1.0));
        changes.push((j.end, BUSY, -c));
        t_end = t_end.max(j.end);
    }
    let mut steps = average(changes, 4, t_end);
    let (unit, unit_name) = time_unit(t_end as f64 / 1e9);
    for e in &mut steps.edges {
        *e /= unit;
    }
    let x_desc = format!("time since the first submission ({unit_name})");
    let x_max = steps.edges.last().copied().unwrap_or(1.0).max(1e-9);
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let root = root
        .titled(&format!("{}: utilization and queue", run.name), (FONT, 24))
        .map_err(&err)?;
    let (top, bottom) = root.split_vertically(HEIGHT / 2 - 20);
    let mut util = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..100.0)
        .map_err(&err)?;
    util.configure_mesh()
        .x_desc(x_desc.as_str())
        .y_desc("utilization (% of cores)")
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    let pct: Vec<(f64, f64)> = steps.means[BUSY]
        .iter()
        .enumerate()
        .map(|(b, v)| (steps.edges[b], v * 100.0 / cores as f64))
        .collect();
    util.draw_series(AreaSeries::new(pct, 0.0, palette(0).mix(0.35)).border_style(palette(0)))
        .map_err(&err)?
        .label(format!(
            "cores busy ({cores} in all), averaged per interval"
        ))
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], palette(0).filled()));
    legend(&mut util, SeriesLabelPosition::UpperRight).map_err(&err)?;

    let y_max = [PENDING, RUNNING, SUSPENDED]
        .iter()
        .flat_map(|&s| steps.means[s].iter().copied())
        .fold(1.0_f64, f64::max)
        * 1.05;
    let mut queue = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(&err)?;
    queue
        .configure_mesh()
        .x_desc(x_desc.as_str())
        .y_desc("jobs (mean per interval)")
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    for (k, (s, name)) in [
        (PENDING, "pending"),
        (RUNNING, "running"),
        (SUSPENDED, "suspended"),
    ]
    .into_iter()
    .enumerate()
    {
        let color = palette(k + 1);
        let pts: Vec<(f64, f64)> = steps.means[s]
            .iter()
            .enumerate()
            .map(|(b, v)| ((steps.edges[b] + steps.edges[b + 1]) / 2.0, *v))
            .collect();
        queue
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(&err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut queue, SeriesLabelPosition::UpperRight).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Evenly spaced quantiles of `values` (sorted in place), as (value, F).
fn curve(values: &mut [f64]) -> Vec<(f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let step = (n / CURVE_POINTS).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (values[i], (i + 1) as f64 / n as f64))
        .collect();
    pts.push((values[n - 1], 1.0));
    pts
}

/// `floor`: the left end of the log-scale axis; smaller values (zero
/// waits) are drawn there.
fn cdf(
    path: &Path,
    runs: &[Run],
    what: &str,
    x_desc: &str,
    floor: f64,
    value: impl Fn(&Run, &Job) -> f64,
) -> Result<()> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|run| {
            let mut v: Vec<f64> = run
                .jobs
                .iter()
                .filter(|j| counted(j))
                .map(|j| value(run, j).max(floor))
                .collect();
            (run.name.clone(), curve(&mut v))
        })
        .collect();
    let hi = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(floor * 10.0, f64::max)
        * 1.5;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Cumulative distribution of {what}"), (FONT, 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((floor..hi).log_scale(), 0.0..1.0)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc(if what == "wait" {
            format!("{x_desc}; waits under 1 ms drawn at 1 ms")
        } else {
            x_desc.to_string()
        })
        .y_desc("fraction of jobs")
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    for (i, (name, pts)) in curves.into_iter().enumerate() {
        let color = palette(i);
        let jobs = pts.len();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(&err)?
            .label(if jobs == 0 {
                format!("{name} (no job)")
            } else {
                name
            })
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

fn class_label(k: u32) -> String {
    if k == 0 {
        "1".into()
    } else {
        let (lo, hi) = ((1u64 << (k - 1)) + 1, 1u64 << k);
        if lo == hi {
            hi.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    }
}

fn by_size(path: &Path, runs: &[Run]) -> Result<()> {
    // Mean bounded slowdown per (run, class).
    let mut means: Vec<BTreeMap<u32, f64>> = Vec::new();
    for run in runs {
        let mut sums: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
        for j in run.jobs.iter().filter(|j| counted(j)) {
            let e = sums.entry(size_class(j.cores)).or_default();
            e.0 += bsld(run, j);
            e.1 += 1;
        }
        means.push(
            sums.into_iter()
                .map(|(k, (s, n))| (k, s / n as f64))
                .collect(),
        );
    }
    let classes: Vec<u32> = {
        let mut all: Vec<u32> = means.iter().flat_map(|m| m.keys().copied()).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let y_max = means
        .iter()
        .flat_map(|m| m.values().copied())
        .fold(1.0_f64, f64::max)
        * 1.1;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let groups = classes.len().max(1);
    let labels = classes.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption("Mean bounded slowdown by job size", (FONT, 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        // Groups centred on whole numbers, where the labels go.
        .build_cartesian_2d(-0.5..groups as f64 - 0.5, 0.0..y_max)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels
                    .get(i as usize)
                    .map(|&k| class_label(k))
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("job size class (cores)")
        .y_desc("mean bounded slowdown")
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    let width = 0.8 / runs.len() as f64;
    for (r, run) in runs.iter().enumerate() {
        let color = palette(r);
        let bars: Vec<Rectangle<(f64, f64)>> = classes
            .iter()
            .enumerate()
            .filter_map(|(g, k)| {
                let v = *means[r].get(k)?;
                let x0 = g as f64 - 0.4 + r as f64 * width;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.95, v)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(&err)?
            .label(run.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// The names of a folded nodeset (as the controller wrote it; empty if it
/// does not parse).
fn expand(folded: &str) -> Vec<String> {
    formats::nodeset::Groups::new()
        .parse(folded)
        .map(|set| formats::nodeset::expand(&set))
        .unwrap_or_default()
}

/// Stretches of one job on one node: (from, to, suspended).
fn stretches(j: &Job) -> Vec<(i64, i64, bool)> {
    let mut out = Vec::with_capacity(1 + 2 * j.suspensions.len());
    let mut from = j.start;
    for &(s, r) in &j.suspensions {
        out.push((from, s, false));
        out.push((s, r, true));
        from = r;
    }
    out.push((from, j.end, false));
    out
}

fn gantt(path: &Path, run: &Run, window: Option<(f64, f64)>, nodes: Option<&str>) -> Result<()> {
    // Nodes shown: those asked for, else the first GANTT_NODES by name.
    let mut names = std::collections::BTreeSet::new();
    for j in &run.jobs {
        match j.nodes.as_deref().map(expand) {
            Some(all) => names.extend(all),
            None => {
                names.insert(j.node.clone());
            }
        }
    }
    let shown: Vec<String> = match nodes {
        Some(expr) => {
            let set = formats::nodeset::Groups::new()
                .parse(expr)
                .map_err(|e| anyhow!("--nodes: {e}"))?;
            let mut v = formats::nodeset::expand(&set);
            v.sort();
            v
        }
        None => names.into_iter().take(GANTT_NODES).collect(),
    };
    let row: HashMap<&str, usize> = shown
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let t_end = run.jobs.iter().map(|j| j.end).max().unwrap_or(0) as f64 / 1e9;
    let (t0, t1) = window.unwrap_or((0.0, t_end.max(1e-3)));
    if t1 <= t0 {
        bail!("--window: the end must come after the start");
    }
    let (unit, unit_name) = time_unit(t1 - t0);
    let (t0, t1) = (t0 / unit, t1 / unit);
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let rows = shown.len().max(1);
    // Each job on each of its nodes that is shown (only its first node
    // when the run does not list them), if the window shows it.
    let (w0, w1) = ((t0 * unit * 1e9) as i64, (t1 * unit * 1e9) as i64);
    let mut placed: Vec<(usize, &Job)> = Vec::new();
    for j in run.jobs.iter().filter(|j| j.end > w0 && j.start < w1) {
        match j.nodes.as_deref().map(expand) {
            Some(all) => placed.extend(all.iter().filter_map(|n| Some((*row.get(n.as_str())?, j)))),
            None => placed.extend(row.get(j.node.as_str()).map(|&r| (r, j))),
        }
    }
    placed.sort_by_key(|(r, j)| (j.start, j.id, *r));
    // Jobs that share a node at once get lanes of its row.
    let mut lane_ends: HashMap<usize, Vec<i64>> = HashMap::new();
    let lanes: Vec<usize> = placed
        .iter()
        .map(|&(r, j)| {
            let ends = lane_ends.entry(r).or_default();
            match ends.iter().position(|&e| e <= j.start) {
                Some(l) => {
                    ends[l] = j.end;
                    l
                }
                None => {
                    ends.push(j.end);
                    ends.len() - 1
                }
            }
        })
        .collect();
    let listed = run.jobs.iter().any(|j| j.nodes.is_some());
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: jobs on nodes ({}jobs sharing a node in lanes)",
                run.name,
                if listed {
                    ""
                } else {
                    "each job on its first node; "
                }
            ),
            (FONT, 22),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(110)
        // Rows centred on whole numbers, where the labels go.
        .build_cartesian_2d(t0..t1, -0.5..rows as f64 - 0.5)
        .map_err(&err)?;
    let labels = shown.clone();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.min(32))
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc(format!("time since the first submission ({unit_name})"))
        .y_desc("node")
        .label_style((FONT, 13))
        .draw()
        .map_err(&err)?;
    // Merge what is narrower than a pixel into its neighbour on the row.
    let px = (t1 - t0) / f64::from(WIDTH);
    let mut running: Vec<Rectangle<(f64, f64)>> = Vec::new();
    let mut suspended: Vec<Rectangle<(f64, f64)>> = Vec::new();
    // Per (row, lane, suspended): the stretch being extended.
    let mut last: HashMap<(usize, usize, bool), (f64, f64, u64)> = HashMap::new();
    let mut flush = |(y, lane, susp): (usize, usize, bool), (a, b, id): (f64, f64, u64)| {
        let n = lane_ends.get(&y).map_or(1, Vec::len) as f64;
        let h = 0.84 / n;
        let lo = y as f64 - 0.42 + lane as f64 * h;
        if susp {
            let grey = RGBColor(170, 170, 170);
            suspended.push(Rectangle::new(
                [(a, lo + h * 0.2), (b, lo + h * 0.8)],
                grey.filled(),
            ));
        } else {
            // Grey is for suspended stretches: the other seven colours.
            let color = palette(id as usize % 7);
            running.push(Rectangle::new(
                [(a, lo + h * 0.05), (b, lo + h * 0.95)],
                color.filled(),
            ));
        }
    };
    for (&(y, j), &lane) in placed.iter().zip(&lanes) {
        for (a, b, susp) in stretches(j) {
            let (a, b) = (
                (a as f64 / 1e9 / unit).max(t0),
                (b as f64 / 1e9 / unit).min(t1),
            );
            if b <= a {
                continue;
            }
            let key = (y, lane, susp);
            match last.get_mut(&key) {
                // Narrower than a pixel: drawn as part of its neighbour.
                Some(cur) if a - cur.1 < px && (b - a < px || cur.1 - cur.0 < px) => {
                    cur.1 = cur.1.max(b);
                }
                Some(cur) => {
                    let prev = std::mem::replace(cur, (a, b, j.id));
                    flush(key, prev);
                }
                None => {
                    last.insert(key, (a, b, j.id));
                }
            }
        }
    }
    for (key, v) in last {
        flush(key, v);
    }
    chart
        .draw_series(running)
        .map_err(&err)?
        .label("running (one color per job)")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], palette(0).filled()));
    chart
        .draw_series(suspended)
        .map_err(&err)?
        .label("suspended")
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 3), (x + 20, y + 3)],
                RGBColor(170, 170, 170).filled(),
            )
        });
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}
