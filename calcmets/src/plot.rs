//! `calcmets plot`: the pictures scheduling papers show, as SVG files.
//!
//! For each run (a results directory, or `records` for the loose record
//! files given): `<run>-timeline.svg`, utilization and the queue (pending,
//! running, suspended jobs) over time, and `<run>-gantt.svg`, jobs on
//! nodes with suspended stretches drawn apart. Across runs: `cdf-wait.svg`
//! and `cdf-bsld.svg`, one curve per run, and `bsld-by-size.svg`, mean
//! bounded slowdown by job-size class, one bar per run in each group.
//! Titles and legends sit in a band above each plot, never over data.
//!
//! Charts stay legible at 100,000 jobs by aggregating before drawing: the
//! timeline is averaged over at most [`BINS`] intervals, curves keep at most
//! [`CURVE_POINTS`] steps, and the Gantt chart shows a window of time and
//! nodes (by default the first [`GANTT_NODES`] nodes), each job as a band
//! as tall as its share of the node's cores, merging what is narrower than
//! a pixel; past [`GANTT_JOBS`] jobs in view it shows how busy each node
//! was over time instead.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::inputs;
use crate::metrics::{class_label, job_figures, size_class, Exclusion, JobFigures, JobView};
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
    /// Its wait, bounded slowdown, ... as the metrics count them; `None`
    /// for a job they do not count (not completed, no run time).
    figures: Option<JobFigures>,
}

struct Run {
    name: String,
    cores: Option<u64>,
    /// Nodes of the cluster, when its manifest says.
    nodes: Option<u64>,
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
    for run in &runs {
        // Named after the run whatever their number, so that a script
        // finds a run's charts in the same place every time.
        let stem = file_stem(&run.name);
        let cores = run.cores.ok_or_else(|| {
            anyhow!(
                "{}: no core count for utilization (give --cores, or a results directory)",
                run.name
            )
        })?;
        let path = args.out.join(format!("{stem}-timeline.svg"));
        timeline(&path, run, cores)?;
        written.push(path);
        let path = args.out.join(format!("{stem}-gantt.svg"));
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
        |f| f.wait_ns as f64 / 1e9,
    )?;
    written.push(path);
    let path = args.out.join("cdf-bsld.svg");
    cdf(
        &path,
        &runs,
        "bounded slowdown",
        "bounded slowdown (log scale)",
        1.0,
        |f| f.bounded_slowdown,
    )?;
    written.push(path);
    let path = args.out.join("bsld-by-size.svg");
    by_size(&path, &runs)?;
    written.push(path);
    Ok(written)
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
        let book = run
            .dir
            .as_deref()
            .map(crate::results::Book::open)
            .transpose()?;
        let tau_ns = args
            .tau_ns
            .or(run.manifest_tau)
            .unwrap_or(crate::DEFAULT_TAU_NS);
        let mut foreign = 0u64;
        let mut jobs = Vec::new();
        let stats = inputs::for_each_record(sources, |r| {
            if book.as_ref().is_some_and(|b| !b.owns(r)) {
                foreign += 1;
                return Ok(());
            }
            let view = JobView {
                cores: u64::from(r.cores),
                submit: r.submit,
                start: r.start,
                end: r.end,
                suspensions: &r.suspensions,
                // The charts show what the metrics count: completed jobs.
                excluded_status: match r.status {
                    Status::Completed => None,
                    Status::Cancelled => Some(Exclusion::Cancelled),
                    Status::Failed => Some(Exclusion::Failed),
                    Status::Timeout => Some(Exclusion::Timeout),
                },
            };
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
                figures: job_figures(&view, tau_ns).ok(),
            });
            Ok(())
        })?;
        for w in inputs::damage_report(&stats) {
            eprintln!("calcmets: warning: {w}");
        }
        if foreign > 0 {
            eprintln!(
                "calcmets: warning: {}: {foreign} record(s) are not of this run: not drawn",
                run.name
            );
        }
        let completed = jobs.iter().filter(|j| j.figures.is_some()).count() as u64;
        if let Some(w) = book
            .as_ref()
            .and_then(|b| b.unfinished_warning(&run.name, completed))
        {
            eprintln!("calcmets: warning: {w}");
        }
        if let Some(dir) = &run.dir {
            let rows = crate::results::jobs_by_id(dir)?;
            for j in &mut jobs {
                j.nodes = rows
                    .get(&j.id)
                    .map(|r| r.nodes.clone())
                    .filter(|n| !n.is_empty());
            }
        }
        let t0 = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        for j in &mut jobs {
            // (Saturating: a damaged record's instants may be anything.)
            j.submit = j.submit.saturating_sub(t0);
            j.start = j.start.saturating_sub(t0);
            j.end = j.end.saturating_sub(t0);
            for s in &mut j.suspensions {
                s.0 = s.0.saturating_sub(t0);
                s.1 = s.1.saturating_sub(t0);
            }
        }
        out.push(Run {
            name: run.name.clone(),
            cores: args.cores.or(run.manifest_cores),
            nodes: run.dir.as_deref().and_then(runs::manifest_nodes),
            jobs,
        });
    }
    Ok(out)
}

type Svg<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn svg_error<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("{}: cannot draw: {e:?}", path.display())
}

type DrawResult<T> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

/// Colours of runs and jobs; grey is kept for suspended stretches.
fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(57, 59, 121),
    ];
    COLORS[i % COLORS.len()]
}

/// Suspended stretches in the Gantt chart.
const GREY: RGBColor = RGBColor(170, 170, 170);

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

/// A tick label: no trailing `.0`, powers of ten past 10,000 as `1e5`.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e4 && (a.log10() - a.log10().round()).abs() < 1e-9 {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}1e{}", a.log10().round() as i32)
    } else if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        format!("{}", v.round() as i64)
    } else {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The mark a run's curve carries every few points, so that curves that
/// coincide stay told apart.
#[derive(Clone, Copy)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Cross,
}

fn marker(i: usize) -> Marker {
    [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Cross,
    ][i % 4]
}

/// Draws `m` at `(x, y)` (pixels) on `area`.
fn draw_marker(area: &Svg, m: Marker, (x, y): (i32, i32), color: RGBColor) -> DrawResult<()> {
    match m {
        Marker::Circle => area.draw(&Circle::new((x, y), 4, color.filled())),
        Marker::Square => area.draw(&Rectangle::new(
            [(x - 4, y - 4), (x + 4, y + 4)],
            color.filled(),
        )),
        Marker::Triangle => area.draw(&Polygon::new(
            vec![(x, y - 5), (x - 5, y + 4), (x + 5, y + 4)],
            color.filled(),
        )),
        Marker::Cross => {
            area.draw(&PathElement::new(
                [(x - 4, y - 4), (x + 4, y + 4)],
                color.stroke_width(2),
            ))?;
            area.draw(&PathElement::new(
                [(x - 4, y + 4), (x + 4, y - 4)],
                color.stroke_width(2),
            ))
        }
    }
}

/// What a legend entry shows.
#[derive(Clone, Copy)]
enum Key {
    /// A filled box (areas, bars, job stretches).
    Fill(RGBColor),
    /// A line, with a run's marker if it has one.
    Line(RGBColor, Option<Marker>),
}

const LEGEND_FONT: u32 = 15;

/// Draws `title` (and under it `note`, smaller, if not empty) and the
/// legend `items` in a band at the top of `area`, and returns the area
/// under it for the plot: a legend never covers data.
fn header<'a>(
    area: &Svg<'a>,
    title: &str,
    note: &str,
    items: &[(String, Key)],
) -> DrawResult<Svg<'a>> {
    let (width, _) = area.dim_in_pixel();
    let width = width as i32;
    let centred =
        |size| TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(title.to_string(), (width / 2, 8), centred(22)))?;
    let mut y = 42;
    if !note.is_empty() {
        area.draw(&Text::new(note.to_string(), (width / 2, 36), centred(14)))?;
        y += 20;
    }
    // Entries left to right, centred, wrapping; widths from the text.
    let entry_width =
        |label: &str| 34 + (label.chars().count() as i32 * LEGEND_FONT as i32) / 2 + 24;
    let mut rows: Vec<Vec<&(String, Key)>> = vec![Vec::new()];
    let mut used = 0;
    for item in items {
        let w = entry_width(&item.0);
        if used + w > width - 40 && used > 0 {
            rows.push(Vec::new());
            used = 0;
        }
        used += w;
        if let Some(r) = rows.last_mut() {
            r.push(item);
        }
    }
    for row in rows.iter().filter(|r| !r.is_empty()) {
        let total: i32 = row.iter().map(|(l, _)| entry_width(l)).sum();
        let mut x = (width - total) / 2;
        for (label, key) in row {
            match *key {
                Key::Fill(c) => {
                    area.draw(&Rectangle::new([(x, y - 6), (x + 24, y + 6)], c.filled()))?
                }
                Key::Line(c, m) => {
                    area.draw(&PathElement::new([(x, y), (x + 24, y)], c.stroke_width(2)))?;
                    if let Some(m) = m {
                        draw_marker(area, m, (x + 12, y), c)?;
                    }
                }
            }
            let style = TextStyle::from((FONT, LEGEND_FONT).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(label.clone(), (x + 32, y), style))?;
            x += entry_width(label);
        }
        y += 22;
    }
    let band = if items.is_empty() {
        y as u32 - 2
    } else {
        y as u32 + 2
    };
    Ok(area.split_vertically(band).1)
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
    let bin = steps.edges.get(1).copied().unwrap_or(0.0) * unit;
    let x_desc = format!("time since the first submission ({unit_name})");
    let x_max = steps.edges.last().copied().unwrap_or(1.0).max(1e-9);
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let queue_series = [
        (PENDING, "pending jobs"),
        (RUNNING, "running jobs"),
        (SUSPENDED, "suspended jobs"),
    ];
    let mut items = vec![(
        format!("cores busy ({cores} in all)"),
        Key::Fill(blend(WHITE, palette(0), 0.35)),
    )];
    for (k, (_, name)) in queue_series.iter().enumerate() {
        items.push((name.to_string(), Key::Line(palette(k + 1), None)));
    }
    let body = header(
        &root,
        &format!("{}: utilization and queue", run.name),
        &format!("means over intervals of {}", duration_label(bin)),
        &items,
    )
    .map_err(&err)?;
    let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 / 2);
    let mut util = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..100.0)
        .map_err(&err)?;
    util.configure_mesh()
        .x_desc(x_desc.as_str())
        .y_desc("utilization (% of cores)")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    let pct: Vec<(f64, f64)> = steps.means[BUSY]
        .iter()
        .enumerate()
        .map(|(b, v)| (steps.edges[b], v * 100.0 / cores as f64))
        .collect();
    util.draw_series(AreaSeries::new(pct, 0.0, palette(0).mix(0.35)).border_style(palette(0)))
        .map_err(&err)?;

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
        .y_desc("jobs")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    for (k, (s, _)) in queue_series.into_iter().enumerate() {
        let color = palette(k + 1);
        let pts: Vec<(f64, f64)> = steps.means[s]
            .iter()
            .enumerate()
            .map(|(b, v)| ((steps.edges[b] + steps.edges[b + 1]) / 2.0, *v))
            .collect();
        queue
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(&err)?;
    }
    root.present().map_err(&err)?;
    Ok(())
}

/// A duration for a title: `1.2 s`, `35 min`.
fn duration_label(secs: f64) -> String {
    let (unit, name) = time_unit(secs * 3.0);
    let v = secs / unit;
    if v >= 10.0 {
        format!("{v:.0} {name}")
    } else {
        format!("{} {name}", tick((v * 100.0).round() / 100.0))
    }
}

/// The empirical distribution of `values` (sorted in place) as a step
/// curve, (value, F), thinned to about `CURVE_POINTS` steps.
fn curve(values: &mut [f64]) -> Vec<(f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let step = (n / CURVE_POINTS).max(1);
    let mut pts = Vec::with_capacity(2 * CURVE_POINTS + 4);
    let mut below = 0.0;
    for i in (0..n).step_by(step).chain([n - 1]) {
        let f = (i + 1) as f64 / n as f64;
        if f <= below {
            continue;
        }
        // F jumps at each value: across, then up.
        pts.push((values[i], below));
        pts.push((values[i], f));
        below = f;
    }
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
    value: impl Fn(&JobFigures) -> f64,
) -> Result<()> {
    // Per run: its name, its jobs, its curve.
    type Curve = (String, usize, Vec<(f64, f64)>);
    let curves: Vec<Curve> = runs
        .iter()
        .map(|run| {
            let mut v: Vec<f64> = run
                .jobs
                .iter()
                .filter_map(|j| j.figures.as_ref())
                .map(|f| value(f).max(floor))
                .collect();
            (run.name.clone(), v.len(), curve(&mut v))
        })
        .collect();
    let hi = curves
        .iter()
        .flat_map(|(_, _, c)| c.iter().map(|p| p.0))
        .fold(floor * 10.0, f64::max)
        * 1.5;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let items: Vec<(String, Key)> = curves
        .iter()
        .enumerate()
        .map(|(i, (name, n, _))| {
            let label = if *n == 0 {
                format!("{name} (no job)")
            } else {
                format!("{name} ({n} jobs)")
            };
            (label, Key::Line(palette(i), Some(marker(i))))
        })
        .collect();
    let body = header(
        &root,
        &format!("Cumulative distribution of {what}"),
        "",
        &items,
    )
    .map_err(&err)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        // A little below the floor, so that its tick is labelled.
        .build_cartesian_2d((floor * 0.8..hi).log_scale(), 0.0..1.0)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc(if what == "wait" {
            format!("{x_desc}; waits under 1 ms drawn at 1 ms")
        } else {
            x_desc.to_string()
        })
        .y_desc("fraction of jobs")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    let runs_drawn = curves.len().max(1) as f64;
    for (i, (_, _, pts)) in curves.into_iter().enumerate() {
        let color = palette(i);
        // A mark every MARK_EVERY pixels along the curve, each run's
        // shifted by a share of that, so that runs whose curves coincide
        // still show each.
        const MARK_EVERY: f64 = 80.0;
        let mut marks: Vec<(i32, i32)> = Vec::new();
        let mut to_next = MARK_EVERY * (0.5 + i as f64 / runs_drawn);
        let mut prev: Option<(i32, i32)> = None;
        for p in &pts {
            let at = chart.backend_coord(p);
            if let Some(q) = prev {
                let d = f64::from(at.0 - q.0).hypot(f64::from(at.1 - q.1));
                to_next -= d;
                if to_next <= 0.0 {
                    marks.push(at);
                    to_next = MARK_EVERY;
                }
            }
            prev = Some(at);
        }
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(&err)?;
        for at in marks {
            draw_marker(&root, marker(i), at, color).map_err(&err)?;
        }
    }
    root.present().map_err(&err)?;
    Ok(())
}

/// Mean bounded slowdown and job count per size class of the jobs the
/// metrics count.
fn size_means(jobs: &[Job]) -> BTreeMap<u32, (f64, u64)> {
    let mut sums: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
    for j in jobs {
        if let Some(f) = &j.figures {
            let e = sums.entry(size_class(j.cores)).or_default();
            e.0 += f.bounded_slowdown;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, (s / n as f64, n)))
        .collect()
}

fn by_size(path: &Path, runs: &[Run]) -> Result<()> {
    let means: Vec<BTreeMap<u32, (f64, u64)>> = runs.iter().map(|r| size_means(&r.jobs)).collect();
    let classes: Vec<u32> = {
        let mut all: Vec<u32> = means.iter().flat_map(|m| m.keys().copied()).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let y_max = means
        .iter()
        .flat_map(|m| m.values().map(|v| v.0))
        .fold(1.0_f64, f64::max)
        * 1.12;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let items: Vec<(String, Key)> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| (run.name.clone(), Key::Fill(palette(r))))
        .collect();
    let body = header(
        &root,
        "Mean bounded slowdown by job size",
        "the number over a bar is its jobs",
        &items,
    )
    .map_err(&err)?;
    let groups = classes.len().max(1);
    let labels = classes.clone();
    let mut chart = ChartBuilder::on(&body)
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
        .y_label_formatter(&|v| tick(*v))
        .x_desc("job size class (cores)")
        .y_desc("mean bounded slowdown")
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    let width = 0.8 / runs.len() as f64;
    // Counts only where a bar is wide enough to hold one.
    let bar_px = f64::from(WIDTH) * width / groups as f64;
    let count_font = if bar_px >= 26.0 { 12 } else { 9 };
    let show_counts = bar_px >= 12.0;
    for (r, _) in runs.iter().enumerate() {
        let color = palette(r);
        let mut bars = Vec::new();
        let mut counts = Vec::new();
        for (g, k) in classes.iter().enumerate() {
            let Some(&(v, n)) = means[r].get(k) else {
                continue;
            };
            let x0 = g as f64 - 0.4 + r as f64 * width;
            bars.push(Rectangle::new(
                [(x0, 0.0), (x0 + width * 0.95, v)],
                color.filled(),
            ));
            counts.push(Text::new(
                n.to_string(),
                (x0 + width * 0.475, v),
                TextStyle::from((FONT, count_font).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            ));
        }
        chart.draw_series(bars).map_err(&err)?;
        if show_counts {
            chart.draw_series(counts).map_err(&err)?;
        }
    }
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

/// One job on one node row of the Gantt chart: its share of the node's
/// cores (`slot`, `width` in core slots from the bottom of the row).
struct Placed<'a> {
    row: usize,
    job: &'a Job,
    slot: u64,
    width: u64,
}

/// Gives each job on each row a band of core slots that no other job
/// holds meanwhile (first fit, lowest slots first); returns the slots
/// each row needs: its cores, or more where jobs share them (a job
/// suspended while another runs on its cores, gang time-slicing).
fn place_on_cores<'a>(
    jobs: Vec<(usize, &'a Job, u64)>,
    rows: usize,
    per_node: u64,
) -> (Vec<Placed<'a>>, Vec<u64>) {
    let mut jobs = jobs;
    jobs.sort_by_key(|(r, j, _)| (j.start, j.id, *r));
    // Per row: (end, slot, width) of the bands in use.
    let mut busy: Vec<Vec<(i64, u64, u64)>> = vec![Vec::new(); rows];
    let mut height = vec![per_node; rows];
    let mut out = Vec::with_capacity(jobs.len());
    for (row, job, width) in jobs {
        let bands = &mut busy[row];
        bands.retain(|&(end, _, _)| end > job.start);
        bands.sort_by_key(|b| b.1);
        let mut slot = 0;
        for &(_, s, w) in bands.iter() {
            if s >= slot + width {
                break;
            }
            slot = slot.max(s + w);
        }
        bands.push((job.end, slot, width));
        height[row] = height[row].max(slot + width);
        out.push(Placed {
            row,
            job,
            slot,
            width,
        });
    }
    (out, height)
}

/// Jobs in the Gantt chart's view past which each node's occupancy is
/// drawn instead of its jobs: beyond it, bars are a pixel or two tall or
/// wide and the chart is a texture.
pub const GANTT_JOBS: usize = 2_000;

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
    let all_nodes = names.len();
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
    let rows = shown.len().max(1);
    // Cores a node has: the cluster's over its nodes, when the manifest
    // says; a job's share of each of its nodes, its cores over them.
    let per_node = match (run.cores, run.nodes) {
        (Some(c), Some(n)) if n > 0 => (c / n).max(1),
        _ => 1,
    };
    let (w0, w1) = ((t0 * unit * 1e9) as i64, (t1 * unit * 1e9) as i64);
    let mut on_rows: Vec<(usize, &Job, u64)> = Vec::new();
    let mut jobs_in_view = 0;
    for j in run.jobs.iter().filter(|j| j.end > w0 && j.start < w1) {
        let listed = j.nodes.as_deref().map(expand);
        let (names, count): (Vec<&str>, u64) = match &listed {
            Some(all) => (all.iter().map(String::as_str).collect(), all.len() as u64),
            None => (vec![j.node.as_str()], 1),
        };
        let share = j.cores.div_ceil(count.max(1)).max(1);
        let before = on_rows.len();
        on_rows.extend(names.iter().filter_map(|n| Some((*row.get(n)?, j, share))));
        if on_rows.len() > before {
            jobs_in_view += 1;
        }
    }
    let listed = run.jobs.iter().any(|j| j.nodes.is_some());
    let node_range = match (shown.first(), shown.last()) {
        (Some(a), Some(b)) if shown.len() > 1 => format!("{a} to {b}"),
        (Some(a), _) => a.clone(),
        _ => "no node".into(),
    };
    let subset = if nodes.is_none() && shown.len() < all_nodes {
        format!(
            "nodes {node_range}, the first {} of {all_nodes}",
            shown.len()
        )
    } else {
        format!("nodes {node_range}")
    };
    let dense = jobs_in_view > GANTT_JOBS;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let (title, note, items) = if dense {
        (
            format!("{}: how busy each node was", run.name),
            format!(
                "{subset}; {jobs_in_view} jobs, too many to draw one by one (--window and \
                 --nodes show fewer)"
            ),
            vec![
                (
                    "a quarter of its cores".to_string(),
                    Key::Fill(busy_color(0.25)),
                ),
                ("half".to_string(), Key::Fill(busy_color(0.5))),
                ("all".to_string(), Key::Fill(busy_color(1.0))),
                ("only suspended jobs".to_string(), Key::Fill(GREY)),
            ],
        )
    } else {
        (
            format!("{}: jobs on nodes", run.name),
            format!(
                "{subset}{}",
                if listed {
                    ""
                } else {
                    "; each job on its first node"
                }
            ),
            vec![
                (
                    "running (a colour per job; height: its share of the node's cores)".to_string(),
                    Key::Fill(palette(0)),
                ),
                ("suspended".to_string(), Key::Fill(GREY)),
            ],
        )
    };
    let body = header(&root, &title, &note, &items).map_err(&err)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .x_label_area_size(45)
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
        .x_label_formatter(&|v| tick(*v))
        .x_desc(format!("time since the first submission ({unit_name})"))
        .y_desc("node")
        .label_style((FONT, 13))
        .draw()
        .map_err(&err)?;
    let to_axis = |ns: i64| ns as f64 / 1e9 / unit;
    if dense {
        let bins = 600usize;
        let bin_w = (t1 - t0) / bins as f64;
        // Per row and bin: core-time of running jobs, time with one
        // suspended.
        let mut ran = vec![vec![0.0f64; bins]; rows];
        let mut held = vec![vec![0.0f64; bins]; rows];
        let cover = |grid: &mut Vec<Vec<f64>>, r: usize, a: f64, b: f64, weight: f64| {
            let (a, b) = (a.max(t0), b.min(t1));
            if b <= a {
                return;
            }
            let first = ((a - t0) / bin_w) as usize;
            let last = (((b - t0) / bin_w) as usize).min(bins - 1);
            for (k, cell) in grid[r].iter_mut().enumerate().take(last + 1).skip(first) {
                let lo = t0 + k as f64 * bin_w;
                *cell += weight * (b.min(lo + bin_w) - a.max(lo)).max(0.0);
            }
        };
        for &(r, j, share) in &on_rows {
            let cores = share as f64 / per_node as f64;
            for (a, b, susp) in stretches(j) {
                if susp {
                    cover(&mut held, r, to_axis(a), to_axis(b), 1.0);
                } else {
                    cover(&mut ran, r, to_axis(a), to_axis(b), cores);
                }
            }
        }
        let mut cells = Vec::new();
        for r in 0..rows {
            for k in 0..bins {
                // The share of the node's cores busy over the bin.
                let busy = (ran[r][k] / bin_w).min(1.0);
                let susp_share = (held[r][k] / bin_w).min(1.0);
                let color = if busy > 0.0 {
                    busy_color(busy)
                } else if susp_share > 0.0 {
                    GREY
                } else {
                    continue;
                };
                let x = t0 + k as f64 * bin_w;
                cells.push(Rectangle::new(
                    [(x, r as f64 - 0.45), (x + bin_w, r as f64 + 0.45)],
                    color.filled(),
                ));
            }
        }
        chart.draw_series(cells).map_err(&err)?;
        root.present().map_err(&err)?;
        return Ok(());
    }

    let (placed, height) = place_on_cores(on_rows, rows, per_node);
    // Narrower than a pixel: merged into the bar before it in the band;
    // a bar gets a gap of a third of a pixel at its end, so that jobs of
    // one colour side by side stay two.
    let px = (t1 - t0) / f64::from(WIDTH);
    let mut running: Vec<Rectangle<(f64, f64)>> = Vec::new();
    let mut suspended: Vec<Rectangle<(f64, f64)>> = Vec::new();
    // Per band (row, first slot, slots, suspended): the stretch being
    // extended (from, to, job).
    type Band = (usize, u64, u64, bool);
    let mut last: HashMap<Band, (f64, f64, u64)> = HashMap::new();
    let mut flush = |(r, slot, width, susp): Band, (a, b, id): (f64, f64, u64)| {
        let h = 0.9 / height[r] as f64;
        let lo = r as f64 - 0.45 + slot as f64 * h;
        let hi = lo + width as f64 * h;
        let b = if b - a > 3.0 * px { b - px / 3.0 } else { b };
        if susp {
            let pad = (hi - lo) * 0.2;
            suspended.push(Rectangle::new(
                [(a, lo + pad), (b, hi - pad)],
                GREY.filled(),
            ));
        } else {
            let pad = (hi - lo) * 0.04;
            let color = palette(id as usize);
            running.push(Rectangle::new(
                [(a, lo + pad), (b, hi - pad)],
                color.filled(),
            ));
        }
    };
    for p in &placed {
        for (a, b, susp) in stretches(p.job) {
            let (a, b) = (to_axis(a).max(t0), to_axis(b).min(t1));
            if b <= a {
                continue;
            }
            let key = (p.row, p.slot, p.width, susp);
            match last.get_mut(&key) {
                Some(cur) if a - cur.1 < px && (b - a < px || cur.1 - cur.0 < px) => {
                    cur.1 = cur.1.max(b);
                }
                Some(cur) => {
                    let prev = std::mem::replace(cur, (a, b, p.job.id));
                    flush(key, prev);
                }
                None => {
                    last.insert(key, (a, b, p.job.id));
                }
            }
        }
    }
    for (key, v) in last {
        flush(key, v);
    }
    chart.draw_series(running).map_err(&err)?;
    chart.draw_series(suspended).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// The Gantt chart's shade for a node with `share` of its cores busy.
fn busy_color(share: f64) -> RGBColor {
    blend(WHITE, palette(0), 0.12 + 0.88 * share)
}

/// `a` and `b` mixed, `t` of `b`.
fn blend(a: RGBColor, b: RGBColor, t: f64) -> RGBColor {
    let mix = |x: u8, y: u8| (f64::from(x) * (1.0 - t) + f64::from(y) * t).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Accum, Params};
    use formats::record::Suspension;

    const S: i64 = 1_000_000_000;

    /// A job as `load` makes it, its figures from the metrics code.
    fn job(id: u64, cores: u64, submit: i64, start: i64, end: i64, susp: &[(i64, i64)]) -> Job {
        let suspensions: Vec<Suspension> = susp
            .iter()
            .map(|&(s, r)| Suspension {
                suspend: s * S,
                resume: r * S,
            })
            .collect();
        let view = JobView {
            cores,
            submit: submit * S,
            start: start * S,
            end: end * S,
            suspensions: &suspensions,
            excluded_status: None,
        };
        Job {
            id,
            cores,
            node: "vn1".into(),
            nodes: None,
            submit: submit * S,
            start: start * S,
            end: end * S,
            suspensions: susp.iter().map(|&(s, r)| (s * S, r * S)).collect(),
            figures: job_figures(&view, 10 * S).ok(),
        }
    }

    #[test]
    fn bounded_slowdown_by_size_is_the_metrics_own() {
        let jobs = vec![
            job(1, 1, 0, 10, 12, &[]),        // short: bounded by τ
            job(2, 1, 0, 50, 150, &[]),       // r 100, R 150: 1.5
            job(3, 4, 0, 0, 60, &[(10, 30)]), // suspended 20 s: r 40, R 60
            job(4, 4, 0, 5, 5, &[]),          // no run time: not counted
        ];
        assert!(jobs[3].figures.is_none());
        let means = size_means(&jobs);
        // Against calcmets' own --by size over the same jobs.
        let p = Params {
            tau_ns: 10 * S,
            window: None,
            by_size: true,
        };
        let mut acc = Accum::new();
        for j in &jobs {
            let susp: Vec<Suspension> = j
                .suspensions
                .iter()
                .map(|&(s, r)| Suspension {
                    suspend: s,
                    resume: r,
                })
                .collect();
            acc.add(
                &p,
                &JobView {
                    cores: j.cores,
                    submit: j.submit,
                    start: j.start,
                    end: j.end,
                    suspensions: &susp,
                    excluded_status: None,
                },
            );
        }
        let classes = acc
            .finish(&p, Some(8), crate::metrics::Damage::default())
            .by_size
            .unwrap();
        assert_eq!(means.len(), classes.len());
        for c in classes {
            let k = size_class(c.min_cores);
            let (mean, n) = means[&k];
            assert_eq!(n, c.summary.jobs, "class {}", c.class);
            let want = c.summary.bounded_slowdown.mean.unwrap();
            assert!(
                (mean - want).abs() < 1e-9,
                "class {}: {mean} vs {want}",
                c.class
            );
        }
        assert_eq!(means[&0], ((12.0 / 10.0 + 1.5) / 2.0, 2));
    }

    #[test]
    fn a_distribution_is_a_step_curve_up_to_one() {
        let mut v = vec![3.0, 1.0, 2.0, 2.0];
        // At each value: across to it, then up by its share (two jobs of
        // 2.0: two steps up at the same value).
        assert_eq!(
            curve(&mut v),
            [
                (1.0, 0.0),
                (1.0, 0.25),
                (2.0, 0.25),
                (2.0, 0.5),
                (2.0, 0.5),
                (2.0, 0.75),
                (3.0, 0.75),
                (3.0, 1.0),
            ]
        );
        assert!(curve(&mut []).is_empty());
    }

    #[test]
    fn a_job_runs_in_stretches_between_its_suspensions() {
        let j = job(1, 2, 0, 0, 60, &[(10, 20), (30, 35)]);
        assert_eq!(
            stretches(&j),
            [
                (0, 10 * S, false),
                (10 * S, 20 * S, true),
                (20 * S, 30 * S, false),
                (30 * S, 35 * S, true),
                (35 * S, 60 * S, false),
            ]
        );
    }

    #[test]
    fn jobs_sharing_a_node_get_bands_of_their_own() {
        let (a, b, c) = (
            job(1, 2, 0, 0, 10, &[]),
            job(2, 2, 0, 5, 15, &[]),
            job(3, 2, 0, 12, 20, &[]),
        );
        let (placed, height) = place_on_cores(vec![(0, &a, 2), (0, &b, 2), (0, &c, 2)], 1, 4);
        let slots: Vec<(u64, u64)> = placed.iter().map(|p| (p.job.id, p.slot)).collect();
        // b overlaps a: above it; c comes after a ended: a's band again.
        assert_eq!(slots, [(1, 0), (2, 2), (3, 0)]);
        assert_eq!(height, [4]);
    }

    #[test]
    fn a_step_function_is_averaged_over_its_bins() {
        // One series: 4 from 0 to the middle of the run, then 0.
        let steps = average(vec![(0, 0, 4.0), (50, 0, -4.0)], 1, 100);
        let whole: f64 = steps.means[0].iter().sum::<f64>() / steps.means[0].len() as f64;
        assert!((whole - 2.0).abs() < 1e-9, "{whole}");
        assert_eq!(steps.edges.len(), steps.means[0].len() + 1);
    }
}
