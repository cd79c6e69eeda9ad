//! `<run>-timeline.svg`: utilization and the queue over time.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::*;

/// Time-weighted averages of step functions over `BINS` intervals.
pub(super) struct Steps {
    pub(super) edges: Vec<f64>,
    /// Per series, per bin.
    pub(super) means: Vec<Vec<f64>>,
}

/// Averages step functions given as (time, series, delta) changes.
pub(super) fn average(mut changes: Vec<(i64, usize, f64)>, series: usize, t_end: i64) -> Steps {
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

pub(super) fn timeline(path: &Path, run: &Run, cores: u64) -> Result<()> {
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
    let x_desc = format!(
        "time since the first submission ({} {unit_name})",
        run.clock.as_str()
    );
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
        &format!(
            "means over intervals of {} of {} time",
            duration_label(bin),
            run.clock.as_str()
        ),
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
