//! One replay at one shrinking factor: the jobs scaled and put in
//! submission order, the manifest written (`running`), the jobs run by the
//! plan's backend, and the results directory completed.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use calcmets::metrics::Summary;
use formats::results::Status;
use formats::wire::JobSpec;
use tokio_util::sync::CancellationToken;

use crate::backend::{wall_ns, Jobs, Order, Timed};
use crate::rundir::{write_manifest, write_results, RunDir, RunState};
use crate::schedule::{self, Scale};
use crate::trace::TraceJob;
use crate::{Plan, Point};

/// What one run left behind.
pub struct RunResult {
    pub label: String,
    /// Which replica of its point it is (`None`: run once).
    pub replica: Option<u32>,
    pub dir: PathBuf,
    pub summary: Summary,
    pub interrupted: bool,
}

/// `050` for 50 %; a fraction of a percent is kept (`099.5`), so that no
/// two factors or loads of a sweep share a directory.
pub fn percent_label(fraction: f64) -> String {
    // To a thousandth of a percent (finer ones are refused when the sweep
    // is read), whole percents padded to three digits.
    let text = format!("{:07.3}", fraction * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text.split_once('.') {
        None => format!("{:03}", text.parse::<u64>().unwrap_or(0)),
        Some(_) => text.to_string(),
    }
}

/// The run's orders besides submissions, in the order they are due:
/// each job the trace marks cancelled, cancelled its (scaled) delay after
/// its submission (a follower's submission is this run's: it has none);
/// and the plan's events at their trace instants, shrunk as every time is
/// (an event before the first submission comes at the start; a
/// cancellation, not before its job is submitted). The load does not
/// move them: it compresses the workload's arrivals, and a node's outage
/// or a failure model's intervals are the machine's, which run times and
/// limits, left alone too, are measured against.
fn timed_orders(plan: &Plan, targets: &[i64], scale: Scale) -> Vec<Timed> {
    let jobs: &[TraceJob] = &plan.slice.jobs;
    let links = &plan.links;
    let mut timed: Vec<Timed> = jobs
        .iter()
        .enumerate()
        .filter(|&(i, _)| links[i].is_none())
        .filter_map(|(i, j)| {
            let after = j.cancel_after_ns?;
            Some(Timed {
                at: targets[i].saturating_add(scale.apply_u(after) as i64),
                order: Order::Cancel(i),
            })
        })
        .collect();
    let first = jobs.iter().map(|j| j.submit_ns).min().unwrap_or(0);
    for (k, e) in plan.events.iter().enumerate() {
        let mut at = scale.apply(e.at_ns.saturating_sub(first));
        at = at.max(0);
        if let crate::events::What::Cancel(i) = e.what {
            at = at.max(targets[i]);
        }
        timed.push(Timed {
            at,
            order: Order::Event(k),
        });
    }
    timed.sort_by_key(|t| {
        (
            t.at,
            match t.order {
                Order::Cancel(i) => (0, i),
                Order::Event(k) => (1, k),
            },
        )
    });
    timed
}

/// One run: `point`'s, its `replica`-th of the plan's (`None`: run once).
pub async fn run_point(
    plan: &Plan,
    point: Point,
    replica: Option<u32>,
    run_dir: &RunDir,
    stop: &CancellationToken,
) -> Result<RunResult> {
    let Point { factor, load } = point;
    let label = plan.label(point);
    let dir = run_dir.path.clone();
    std::fs::create_dir_all(dir.join("records"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    // Before the first job: a run whose replay dies is then known as
    // unfinished, never taken for a finished one.
    let _ = write_manifest(
        plan,
        &dir,
        &RunState {
            label: &label,
            factor,
            load,
            replica,
            status: Status::Running,
            cores: plan.config.total_cores(),
            start_ns: wall_ns(),
            end_ns: None,
            counts: None,
            lateness: None,
            error: None,
            scheduler: None,
            events: None,
            latency: None,
            ties: None,
        },
    )?;

    let scale = Scale {
        factor,
        speedup: plan.speedup,
    };
    let trace_jobs = &plan.slice.jobs;
    let targets = schedule::targets(trace_jobs, &plan.schedule, scale, load);
    let links = &plan.links;
    let specs: Vec<JobSpec> = trace_jobs
        .iter()
        .zip(links)
        .map(|(j, link)| JobSpec {
            cores: j.cores,
            // A follower's cancellation cannot be placed (its submission
            // is this run's, not the trace's): it runs what it ran.
            runtime_ns: scale.apply_u(match link {
                Some(_) => j.trace_run_ns,
                None => j.run_ns,
            }),
            walltime_ns: scale.apply_u(j.walltime_ns),
            partition: crate::route::partition_of(&plan.routes, j, &plan.config)
                .map(str::to_string),
            // On a cluster others use too, `controller cancel --name
            // shrink-050` finds this run's jobs.
            name: Some(label.clone()),
            // The job it follows (`after`) gets its id when submitted:
            // the backend fills it in.
            think_ns: link.map(|_| scale.apply_u(j.preceding.map_or(0, |(_, t)| t))),
            gres: j.gres(&plan.config),
            ..Default::default()
        })
        .collect();
    // Followers go when the job they follow does, not at a deadline.
    let mut order: Vec<usize> = (0..trace_jobs.len())
        .filter(|&i| links[i].is_none())
        .collect();
    order.sort_by_key(|&i| (targets[i], i));
    let timed = timed_orders(plan, &targets, scale);
    let config = scale.cluster(&plan.config);
    let jobs = Jobs {
        label: &label,
        factor,
        load,
        replica,
        targets: &targets,
        specs: &specs,
        order: &order,
        after: links,
        timed: &timed,
        config: &config,
    };
    let ran = plan.backend.run(plan, &jobs, &dir, stop).await?;
    let summary = write_results(plan, &dir, &jobs, &ran)?;
    if let Some(why) = &ran.failure {
        // The results are written: records, jobs.csv, metrics of the jobs
        // that ran.
        bail!(
            "{label}: the scheduler stopped deciding: {why} (the jobs it had started ran to their end; results kept in {})",
            dir.display()
        );
    }
    Ok(RunResult {
        label,
        replica,
        dir,
        summary,
        interrupted: ran.interrupted_at.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    #[test]
    fn policy_durations_are_trace_seconds_scaled_as_the_trace() {
        let config = controller::config::Cluster::from_str(
            "[controller]\ntime_slice_s = 30\n\
             [[nodes]]\nnames = \"n[1-2]\"\ncpus = 4\n\
             [[partitions]]\nname = \"gang\"\nnodes = \"ALL\"\ndefault = true\noversubscribe = 2\n\
             [[partitions]]\nname = \"short\"\nnodes = \"n1\"\ntime_slice_s = 1000\nmax_time_s = 3600\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let scale = Scale {
            factor: 0.5,
            speedup: 10_000.0,
        };
        let ran = scale.cluster(&config);
        // 30 trace s x 0.5 / 10,000 = 1.5 ms of wall clock.
        assert_eq!(ran.time_slice, Duration::from_micros(1500));
        assert_eq!(ran.partitions[0].time_slice, Duration::from_micros(1500));
        assert_eq!(ran.partitions[1].time_slice, Duration::from_millis(50));
        assert_eq!(ran.partitions[1].max_time_ns, 180_000_000);
        // No limit stays no limit, and nothing else moves.
        assert_eq!(ran.partitions[0].max_time_ns, 0);
        assert_eq!(ran.schedule_interval, Duration::ZERO);
        // A scheduling interval of the trace is scaled as its times.
        let every_minute = controller::config::Cluster::from_str(
            "[controller]\nschedule_interval_s = 60\npass_floor_ms = 0.5\n\
             [[nodes]]\nnames = \"n[1-2]\"\ncpus = 4\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let ran = scale.cluster(&every_minute);
        assert_eq!(ran.schedule_interval, Duration::from_millis(3));
        assert_eq!(ran.pass_floor, Duration::from_micros(500));
    }
}
