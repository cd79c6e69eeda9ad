//! Across the runs of a sweep: mean bounded slowdown by shrinking factor,
//! as the originating study draws it, and by load (`runworkload --load`),
//! one line per sweep (the directory that holds its runs, as `runworkload
//! --out` made it; per factor or load too when the sweep varies both).

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::*;

/// What a sweep varies.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Axis {
    Factor,
    Load,
}

impl Axis {
    fn of(self, r: &Run) -> Option<f64> {
        match self {
            Axis::Factor => r.factor,
            Axis::Load => r.load,
        }
    }

    fn other(self) -> Axis {
        match self {
            Axis::Factor => Axis::Load,
            Axis::Load => Axis::Factor,
        }
    }
}

/// How many different values of `axis` the runs span.
fn values(runs: &[Run], axis: Axis) -> usize {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| axis.of(r)).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v.len()
}

/// Whether the runs span at least two values of `axis`: only then is
/// there a sweep to draw.
pub(super) fn is_sweep(runs: &[Run], axis: Axis) -> bool {
    values(runs, axis) >= 2
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

pub(super) fn by_axis(path: &Path, runs: &[Run], axis: Axis) -> Result<()> {
    // Series in the order they first appear (per value of the other
    // axis when that varies too); points by this axis's value.
    let other = axis.other();
    let split = values(runs, other) >= 2;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in runs {
        let (Some(f), Some(m)) = (axis.of(r), mean_bsld(&r.jobs)) else {
            continue;
        };
        let name = match (split, other.of(r)) {
            (true, Some(v)) => {
                let what = match other {
                    Axis::Factor => "factor",
                    Axis::Load => "load",
                };
                format!("{}, {what} {} %", r.series, tick(v * 100.0))
            }
            _ => r.series.clone(),
        };
        match series.iter_mut().find(|(s, _)| *s == name) {
            Some((_, pts)) => pts.push((f * 100.0, m)),
            None => series.push((name, vec![(f * 100.0, m)])),
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
    let (title, note, x_desc) = match axis {
        Axis::Factor => (
            "Mean bounded slowdown by shrinking factor",
            "one line per sweep; a factor scales arrivals and run times alike: the load stays \
             the trace's",
            "shrinking factor (%)",
        ),
        Axis::Load => (
            "Mean bounded slowdown by load",
            "one line per sweep; a load of L % divides inter-arrival times by L/100, run times \
             as they are",
            "load (% of the trace's)",
        ),
    };
    let body = header(&root, title, note, &items).map_err(&err)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo - pad)..(x_hi + pad), 0.0..y_hi)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
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
