//! Across the factors of a sweep: mean bounded slowdown by shrinking
//! factor, one line per sweep (the directory that holds its runs, as
//! `runworkload --out` made it), as the originating study draws it.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::*;

/// Whether the runs span at least two shrinking factors: only then is
/// there a sweep to draw.
pub(super) fn is_sweep(runs: &[Run]) -> bool {
    let mut factors: Vec<f64> = runs.iter().filter_map(|r| r.factor).collect();
    factors.sort_by(f64::total_cmp);
    factors.dedup();
    factors.len() >= 2
}

/// Mean bounded slowdown of the jobs the metrics count; `None` without
/// any.
fn mean_bsld(jobs: &[Job]) -> Option<f64> {
    let (sum, n) = jobs
        .iter()
        .filter_map(|j| j.figures.as_ref())
        .fold((0.0, 0u64), |(s, n), f| (s + f.bounded_slowdown, n + 1));
    (n > 0).then(|| sum / n as f64)
}

pub(super) fn by_factor(path: &Path, runs: &[Run]) -> Result<()> {
    // Series in the order they first appear; points by factor.
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in runs {
        let (Some(f), Some(m)) = (r.factor, mean_bsld(&r.jobs)) else {
            continue;
        };
        match series.iter_mut().find(|(s, _)| *s == r.series) {
            Some((_, pts)) => pts.push((f * 100.0, m)),
            None => series.push((r.series.clone(), vec![(f * 100.0, m)])),
        }
    }
    for (_, pts) in &mut series {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let xs = || series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let (x_lo, x_hi) = (
        xs().fold(f64::INFINITY, f64::min),
        xs().fold(f64::NEG_INFINITY, f64::max),
    );
    let pad = ((x_hi - x_lo) * 0.05).max(1.0);
    let y_hi = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(1.0_f64, f64::max)
        * 1.12;
    let err = svg_error(path);
    let root: Svg = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let items: Vec<(String, Key)> = series
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), Key::Line(palette(i), Some(marker(i)))))
        .collect();
    let body = header(
        &root,
        "Mean bounded slowdown by shrinking factor",
        "one line per sweep; a smaller factor packs the same jobs into less time",
        &items,
    )
    .map_err(&err)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo - pad)..(x_hi + pad), 0.0..y_hi)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("shrinking factor (%)")
        .y_desc("mean bounded slowdown")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FONT, 15))
        .draw()
        .map_err(&err)?;
    for (i, (_, pts)) in series.iter().enumerate() {
        let color = palette(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(&err)?;
        for p in pts {
            let at = chart.backend_coord(p);
            draw_marker(&root, marker(i), at, color).map_err(&err)?;
        }
    }
    root.present().map_err(&err)?;
    Ok(())
}
