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

/// At most so many passes, and so much time: the controller answers
/// nothing else meanwhile. A queue of thousands behind as many running
/// jobs is a pass per end; the jobs past the last pass have no expected
/// start.
const MAX_PASSES: usize = 2000;
const BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// The starts `policy` would make from `v` on, as running jobs end at
/// their expected ends (a job being ended, at once), within
/// [`WINDOW_NS`]: the jobs that can start now first, at `v.now_ns`. Only
/// starts are followed: at a pass that would suspend, resume or preempt
/// a job (gang scheduling, preemption), the plan stops, and the jobs not
/// yet planned have no expected start.
pub fn forecast(policy: &dyn Policy, mut v: View) -> Vec<Start> {
    let began = std::time::Instant::now();
    let until = v.now_ns.saturating_add(WINDOW_NS);
    let mut out = Vec::new();
    let mut passes = 0;
    while !v.queue.is_empty() && passes < MAX_PASSES && began.elapsed() < BUDGET {
        passes += 1;
        let decided = policy.decide(&v);
        let mut started = Vec::with_capacity(decided.list.len());
        for d in decided.list {
            match d {
                Decision::Start { job, alloc } => started.push((job, alloc)),
                _ => return out,
            }
        }
        if !started.is_empty() {
            start_all(&mut v, &started);
            out.extend(started.into_iter().map(|(job, alloc)| Start {
                job,
                at_ns: v.now_ns,
                alloc,
            }));
            // Another pass at this instant may start more (a job that
            // waited behind them for its place in the queue).
            continue;
        }
        // The next end (or the policy's own wake-up), and every job
        // ending by then.
        let next_end = v
            .active
            .iter()
            .filter_map(|a| match a.state {
                ActiveState::Running => Some(a.expected_end_ns.max(v.now_ns)),
                ActiveState::Ending | ActiveState::EndingSuspended => Some(v.now_ns),
                _ => None,
            })
            .min();
        let wake = decided.wake_at_ns.filter(|&w| w > v.now_ns);
        let Some(next) = [next_end, wake].into_iter().flatten().min() else {
            break;
        };
        if next > until {
            break;
        }
        // Nothing ended and nothing is due: no pass can differ.
        if end_until(&mut v, next) == 0 && next == v.now_ns && wake.is_none() {
            break;
        }
        v.now_ns = next;
    }
    out
}

/// The jobs `started` out of the queue (in one sweep of it) and running
/// on their allocations from now.
fn start_all(v: &mut View, started: &[(u64, Vec<(usize, u32)>)]) {
    // By job id, each with its place in `started`.
    let mut ids: Vec<(u64, usize)> = started.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
    ids.sort_unstable();
    let mut taken = Vec::with_capacity(ids.len());
    Arc::make_mut(&mut v.queue).retain(|q| match ids.binary_search_by_key(&q.job, |&(j, _)| j) {
        Ok(k) => {
            taken.push((q.clone(), ids[k].1));
            false
        }
        Err(_) => true,
    });
    for (q, i) in taken {
        start(v, q, &started[i].1);
    }
}

/// Queued job `q` running on `alloc` from now.
fn start(v: &mut View, q: super::Queued, alloc: &[(usize, u32)]) {
    let job = q.job;
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

/// Every running job expected to end by `t` over, and every job being
/// ended, what it held free; how many.
fn end_until(v: &mut View, t: i64) -> usize {
    let nodes = &mut v.nodes;
    let before = v.active.len();
    Arc::make_mut(&mut v.active).retain(|a| {
        let ends = match a.state {
            ActiveState::Running => a.expected_end_ns <= t,
            ActiveState::Ending => true,
            // Its cores were free already; its memory and devices go.
            ActiveState::EndingSuspended => true,
            _ => false,
        };
        if !ends {
            return true;
        }
        let cores_held = a.state != ActiveState::EndingSuspended;
        for &(n, c) in a.alloc.iter() {
            if let Some(node) = nodes.get_mut(n) {
                if cores_held {
                    node.free_cpus = (node.free_cpus + c).min(node.cpus);
                }
                node.free_slots += c;
                node.free_mem_mb += u64::from(c) * a.mem_per_cpu_mb;
                for (f, g) in node.free_gres.iter_mut().zip(&a.gres) {
                    *f = f.saturating_add(*g);
                }
            }
        }
        false
    });
    before - v.active.len()
}
