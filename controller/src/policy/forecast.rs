//! When pending jobs are expected to start, and where: the policy run on
//! the cluster as it will be at each expected end, every job ending at
//! its limit (a year without one), as Slurm's backfill plans the starts
//! that `squeue --start` shows. Only a guess: jobs end early, and others
//! come.

use std::sync::Arc;

use super::{Active, ActiveState, Decision, Policy, View};

/// A pending job's expected start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub job: u64,
    /// When, on the view's clock.
    pub at_ns: i64,
    /// Its nodes and cores there.
    pub alloc: Vec<(usize, u32)>,
}

/// How far ahead starts are planned: a day, as Slurm's backfill plans
/// (`bf_window`); a job that would start later has no expected start.
pub const WINDOW_NS: i64 = 24 * 3600 * 1_000_000_000;

/// At most so many passes: a queue of thousands behind as many running
/// jobs is a pass per end, and an answer must not wait for all of them.
const MAX_PASSES: usize = 2000;

/// The starts `policy` would make from `v` on, as running jobs end at
/// their expected ends, within [`WINDOW_NS`]: the jobs that can start now
/// first, at `v.now_ns`. Only starts are followed: a policy that
/// suspends or preempts is planned as if it did not.
pub fn forecast(policy: &dyn Policy, mut v: View) -> Vec<Start> {
    let until = v.now_ns.saturating_add(WINDOW_NS);
    let mut out = Vec::new();
    let mut passes = 0;
    while !v.queue.is_empty() && passes < MAX_PASSES {
        passes += 1;
        let started: Vec<(u64, Vec<(usize, u32)>)> = policy
            .decide(&v)
            .list
            .into_iter()
            .filter_map(|d| match d {
                Decision::Start { job, alloc } => Some((job, alloc)),
                _ => None,
            })
            .collect();
        let any = !started.is_empty();
        for (job, alloc) in started {
            start(&mut v, job, &alloc);
            out.push(Start {
                job,
                at_ns: v.now_ns,
                alloc,
            });
        }
        // Started at this instant: another pass then may start more
        // (a job that waited behind them for its place in the queue).
        if any {
            continue;
        }
        // The next end, and every job ending then (or already due).
        let Some(next) = v
            .active
            .iter()
            .filter(|a| a.state == ActiveState::Running)
            .map(|a| a.expected_end_ns.max(v.now_ns))
            .min()
        else {
            break;
        };
        if next > until {
            break;
        }
        end_until(&mut v, next);
        v.now_ns = next;
    }
    out
}

/// `job` out of the queue and running on `alloc` from now.
fn start(v: &mut View, job: u64, alloc: &[(usize, u32)]) {
    let queue = Arc::make_mut(&mut v.queue);
    let Some(i) = queue.iter().position(|q| q.job == job) else {
        return;
    };
    let q = queue.remove(i);
    for &(n, c) in alloc {
        if let Some(node) = v.nodes.get_mut(n) {
            node.free_cpus = node.free_cpus.saturating_sub(c);
            node.free_slots = node.free_slots.saturating_sub(c);
            node.free_mem_mb = node
                .free_mem_mb
                .saturating_sub(u64::from(c) * q.mem_per_cpu_mb);
            for (f, g) in node.free_gres.iter_mut().zip(&q.gres) {
                *f = f.saturating_sub(*g);
            }
        }
    }
    let run = q.estimate_ns.min(i64::MAX as u64) as i64;
    let active = Arc::make_mut(&mut v.active);
    let at = active.partition_point(|a| a.job < job);
    active.insert(
        at,
        Active {
            job,
            partition: q.partition,
            cores: q.cores,
            mem_per_cpu_mb: q.mem_per_cpu_mb,
            alloc: Arc::new(alloc.to_vec()),
            gres: q.gres,
            state: ActiveState::Running,
            since_ns: v.now_ns,
            expected_end_ns: v.now_ns.saturating_add(run),
            remaining_ns: run,
        },
    );
}

/// Every running job expected to end by `t` over, what it held free.
fn end_until(v: &mut View, t: i64) {
    let nodes = &mut v.nodes;
    Arc::make_mut(&mut v.active).retain(|a| {
        if a.state != ActiveState::Running || a.expected_end_ns > t {
            return true;
        }
        for &(n, c) in a.alloc.iter() {
            if let Some(node) = nodes.get_mut(n) {
                node.free_cpus = (node.free_cpus + c).min(node.cpus);
                node.free_slots += c;
                node.free_mem_mb += u64::from(c) * a.mem_per_cpu_mb;
                for (f, g) in node.free_gres.iter_mut().zip(&a.gres) {
                    *f = f.saturating_add(*g);
                }
            }
        }
        false
    });
}
