//! Across runs: the wait and bounded-slowdown CDFs, and mean bounded
//! slowdown by job size.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::*;

/// The empirical distribution of `values` (sorted in place) as a step
/// curve, (value, F), thinned to about `CURVE_POINTS` steps.
pub(super) fn curve(values: &mut [f64]) -> Vec<(f64, f64)> {
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
pub(super) fn cdf(
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
            format!("{x_desc}; shorter waits drawn at {}", tick(floor))
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
pub(super) fn size_means(jobs: &[Job]) -> BTreeMap<u32, (f64, u64)> {
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

pub(super) fn by_size(path: &Path, runs: &[Run]) -> Result<()> {
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
