//! `<run>-gantt.svg`: jobs on nodes, suspended stretches drawn apart.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::*;

/// The names of a folded nodeset (as the controller wrote it; empty if it
/// does not parse).
pub(super) fn expand(folded: &str) -> Vec<String> {
    formats::nodeset::Groups::new()
        .parse(folded)
        .map(|set| formats::nodeset::expand(&set))
        .unwrap_or_default()
}

/// Stretches of one job on one node: (from, to, suspended).
pub(super) fn stretches(j: &Job) -> Vec<(i64, i64, bool)> {
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
pub(super) struct Placed<'a> {
    pub(super) row: usize,
    pub(super) job: &'a Job,
    pub(super) slot: u64,
    pub(super) width: u64,
}

/// Gives each job on each row a band of core slots that no other job
/// holds meanwhile (first fit, lowest slots first); returns the slots
/// each row needs: its cores, or more where jobs share them (a job
/// suspended while another runs on its cores, gang time-slicing).
pub(super) fn place_on_cores<'a>(
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

pub(super) fn gantt(
    path: &Path,
    run: &Run,
    window: Option<(f64, f64)>,
    nodes: Option<&str>,
) -> Result<()> {
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
        .x_desc(format!(
            "time since the first submission ({} {unit_name})",
            run.clock.as_str()
        ))
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
pub(super) fn busy_color(share: f64) -> RGBColor {
    blend(WHITE, palette(0), 0.12 + 0.88 * share)
}
