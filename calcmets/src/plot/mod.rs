//! `calcmets plot`: the pictures scheduling papers show, as SVG files.
//!
//! For each run (a results directory, or `records` for the loose record
//! files given): `<run>-timeline.svg`, utilization and the queue (pending,
//! running, suspended jobs) over time, and `<run>-gantt.svg`, jobs on
//! nodes with suspended stretches drawn apart. Across runs: `cdf-wait.svg`
//! and `cdf-bsld.svg`, one curve per run, and `bsld-by-size.svg`, mean
//! bounded slowdown by job-size class, one bar per run in each group; when
//! the runs span several shrinking factors, `bsld-by-factor.svg`, mean
//! bounded slowdown by factor, one line per sweep, and likewise
//! `bsld-by-load.svg` for several loads (`sweep.rs`).
//! Titles and legends sit in a band above each plot, never over data.
//!
//! Charts stay legible at 100,000 jobs by aggregating before drawing: the
//! timeline is averaged over at most [`BINS`] intervals, curves keep at most
//! [`CURVE_POINTS`] steps, and the Gantt chart shows a window of time and
//! nodes (by default the first [`GANTT_NODES`] nodes), each job as a band
//! as tall as its share of the node's cores, merging what is narrower than
//! a pixel; past [`GANTT_JOBS`] jobs in view it shows how busy each node
//! was over time instead.
//!
//! This file loads the runs and holds what every chart shares (palette,
//! markers, the title band); `timeline.rs`, `gantt.rs` and `cdf.rs` (the
//! CDFs and the by-size bars) draw one kind of chart each.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::clock::ClockKind;
use crate::inputs;
use crate::metrics::{class_label, job_figures, size_class, Exclusion, JobFigures, JobView};
use crate::runs::{self, RunInput};

mod cdf;
mod gantt;
mod sweep;
mod timeline;

use cdf::{by_size, cdf};
use gantt::gantt;
use timeline::timeline;

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
    /// τ in seconds of the clock drawn (ns).
    pub tau_ns: Option<i64>,
    /// Gantt window, in seconds since each run's first submission, in
    /// the clock drawn.
    pub window: Option<(f64, f64)>,
    /// The clock drawn: trace seconds for replays unless asked.
    pub clock: Option<ClockKind>,
    /// Gantt nodes, as a nodeset.
    pub nodes: Option<String>,
}

/// One job, as the charts need it; times in ns of the run's clock since
/// its first submission.
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
    /// The clock its times are in.
    clock: ClockKind,
    /// The shrinking factor and the load, when its manifest says.
    factor: Option<f64>,
    load: Option<f64>,
    /// The sweep it belongs to: the directory holding its results
    /// directory.
    series: String,
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
    // Runs drawn together share a clock (`clock::choose`). A trace's
    // waits are whole seconds: shorter ones are drawn at 1 s; the wall
    // clock of a replay at 1 ms.
    let kind = runs[0].clock;
    let floor = match kind {
        ClockKind::Trace => 1.0,
        ClockKind::Wall => 1e-3,
    };
    let path = args.out.join("cdf-wait.svg");
    cdf(
        &path,
        &runs,
        "wait",
        &format!("wait time ({}, log scale)", kind.unit()),
        floor,
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
    for (axis, file) in [
        (sweep::Axis::Factor, "bsld-by-factor.svg"),
        (sweep::Axis::Load, "bsld-by-load.svg"),
    ] {
        if sweep::is_sweep(&runs, axis) {
            let path = args.out.join(file);
            sweep::by_axis(&path, &runs, axis)?;
            written.push(path);
        }
    }
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
    // Replicas are drawn one by one, each named after its replica.
    let plan: Vec<runs::Run> = runs::plan(&args.inputs, &[], false, &mut warnings)?
        .into_iter()
        .flat_map(|r| match r.input {
            RunInput::Replicas(set) => set
                .into_iter()
                .enumerate()
                .map(|(k, m)| runs::Run {
                    name: format!("{} r{:02}", m.name, k + 1),
                    ..m
                })
                .collect(),
            _ => vec![r],
        })
        .collect();
    for w in &warnings {
        eprintln!("calcmets: warning: {w}");
    }
    let clocks = runs::clocks(&plan, args.clock)?;
    for (run, clock) in plan.into_iter().zip(clocks) {
        let RunInput::Records(sources) = &run.input else {
            continue;
        };
        let book = run
            .dir
            .as_deref()
            .map(crate::results::Book::open)
            .transpose()?;
        let tau_ns = run.tau_ns(clock.kind, args.tau_ns);
        let mut foreign = 0u64;
        // The jobs as read, and whether each counts by its status.
        let mut jobs: Vec<(Job, Option<Exclusion>)> = Vec::new();
        let stats = inputs::for_each_record(sources, |r| {
            if book.as_ref().is_some_and(|b| !b.owns(r)) {
                foreign += 1;
                return Ok(());
            }
            let job = Job {
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
                figures: None,
            };
            // The charts show what the metrics count: completed jobs.
            let status = match r.status {
                Status::Completed => None,
                Status::Cancelled => Some(Exclusion::Cancelled),
                Status::Failed => Some(Exclusion::Failed),
                Status::Timeout => Some(Exclusion::Timeout),
            };
            jobs.push((job, status));
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
        // Times since the first submission, in the run's clock; the
        // figures from those, with τ in that clock.
        let t0 = jobs.iter().map(|(j, _)| j.submit).min().unwrap_or(0);
        let at = |t: i64| (t.saturating_sub(t0) as f64 * clock.scale).round() as i64;
        let jobs: Vec<Job> = jobs
            .into_iter()
            .map(|(mut j, status)| {
                // (Saturating: a damaged record's instants may be anything.)
                j.submit = at(j.submit);
                j.start = at(j.start);
                j.end = at(j.end);
                for s in &mut j.suspensions {
                    *s = (at(s.0), at(s.1));
                }
                let susp: Vec<formats::record::Suspension> = j
                    .suspensions
                    .iter()
                    .map(|&(suspend, resume)| formats::record::Suspension { suspend, resume })
                    .collect();
                let view = JobView {
                    cores: j.cores,
                    submit: j.submit,
                    start: j.start,
                    end: j.end,
                    suspensions: &susp,
                    excluded_status: status,
                    cancelled: status == Some(Exclusion::Cancelled),
                    devices: &[],
                };
                j.figures = job_figures(&view, tau_ns).ok();
                j
            })
            .collect();
        let mut jobs = jobs;
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
        let manifest = run
            .dir
            .as_deref()
            .and_then(|d| formats::results::Manifest::read(d).ok());
        out.push(Run {
            clock: clock.kind,
            factor: manifest.as_ref().map(|m| m.factor).filter(|f| *f > 0.0),
            load: manifest.as_ref().map(|m| m.load).filter(|l| *l > 0.0),
            series: run
                .dir
                .as_deref()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .map_or_else(|| "runs".to_string(), |n| n.to_string_lossy().into_owned()),
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

/// `a` and `b` mixed, `t` of `b`.
fn blend(a: RGBColor, b: RGBColor, t: f64) -> RGBColor {
    let mix = |x: u8, y: u8| (f64::from(x) * (1.0 - t) + f64::from(y) * t).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::cdf::{curve, size_means};
    use super::gantt::{place_on_cores, stretches};
    use super::timeline::average;
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
            cancelled: false,
            devices: &[],
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
                    cancelled: false,
                    devices: &[],
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
