//! What the controller expects to happen next, and the cluster as it will
//! be then: what the scheduler prepares a coming pass from.
//!
//! A job's run time is given at its submission, so the controller knows
//! when each running job's process will end: its first start, plus the
//! time it was suspended, plus its run time (its wall-time limit if that
//! is shorter). [`Cluster::ends`] keeps those instants, updated wherever a
//! job starts, stops running or runs again (`set_active`, `started`,
//! `release`). The jobs held for an instant (a begin, `JobSpec::begin_ns`,
//! as a replay sends its jobs ahead; a think time) are known too, in
//! `Cluster::releases`. [`Cluster::next_events`] gives the next of those
//! instants, with the jobs that end or arrive within a moment of it;
//! [`Cluster::view_after`] the policy's view of the cluster then. The
//! scheduler runs the policy on that view and has the agents start, held,
//! the processes of the jobs it would start then
//! (`Scheduler::prepare_ahead`). It is only a guess: the pass at the real
//! event decides, and a held process no start claims is killed without a
//! record.

use std::sync::Arc;

use super::tables::Cluster;
use super::Now;
use crate::policy::{ActiveState, View};

/// What the controller expects next ([`Cluster::next_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// When (monotonic ns).
    pub at: i64,
    /// Running jobs expected to end then.
    pub ending: Vec<u64>,
    /// Held jobs to enter the queue then.
    pub arriving: Vec<u64>,
}

impl Cluster {
    /// Notes when running job `id`'s process should end, from its run
    /// time (none for a job not running, nor for a program).
    pub(super) fn expect_end(&mut self, id: u64) {
        self.forget_end(id);
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let (Some(start), None) = (job.started_mono, job.suspended_since) else {
            return;
        };
        // A program's run time is unknown (its spec's is 0): it ends when
        // it ends, and no pass is prepared for it.
        if job.spec.program.is_some() {
            return;
        }
        let mut run = job.spec.runtime_ns;
        if job.spec.walltime_ns > 0 {
            run = run.min(job.spec.walltime_ns);
        }
        let at = start
            .saturating_add(job.suspended_total)
            .saturating_add(run.min(i64::MAX as u64) as i64);
        self.ends.insert((at, id));
        self.end_of.insert(id, at);
    }

    /// Forgets job `id`'s expected end: it is not running any more.
    pub(super) fn forget_end(&mut self, id: u64) {
        if let Some(at) = self.end_of.remove(&id) {
            self.ends.remove(&(at, id));
        }
    }

    /// The next instant (monotonic ns) at which running jobs are expected
    /// to end (it may be past: a process that started late ends late) or
    /// held jobs to enter the queue, whichever comes first; and the jobs
    /// that end, and those that arrive, within `within` ns of it, which a
    /// pass then would likely see together. `None` with nothing to expect.
    pub fn next_events(&self, within: i64) -> Option<Expected> {
        self.events_after(None, within)
    }

    /// How many held jobs are to arrive.
    pub fn arrivals_len(&self) -> usize {
        self.releases.len()
    }

    /// [`Cluster::next_events`] among those expected after `after`
    /// (monotonic ns; all of them with `None`): the group that follows
    /// another.
    pub fn events_after(&self, after: Option<i64>, within: i64) -> Option<Expected> {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, |t| Excluded((t, u64::MAX)));
        let from = (from, Unbounded);
        let first_end = self.ends.range(from).next().map(|&(at, _)| at);
        let first_arrival = self.releases.range(from).next().map(|&(at, _)| at);
        let at = match (first_end, first_arrival) {
            (Some(e), Some(a)) => e.min(a),
            (e, a) => e.or(a)?,
        };
        let until = at.saturating_add(within);
        let upto = |set: &std::collections::BTreeSet<(i64, u64)>| {
            set.range(from)
                .take_while(|(t, _)| *t <= until)
                .map(|&(_, id)| id)
                .collect()
        };
        Some(Expected {
            at,
            ending: upto(&self.ends),
            arriving: upto(&self.releases),
        })
    }

    /// What the policy would see at `then` were the jobs `ending` over and
    /// the held jobs `arriving` in the queue by then, and nothing else
    /// changed: the ending jobs' cores, slots, memory and devices free and
    /// they out of the active jobs; the arriving ones queued at their
    /// places, submitted then.
    pub fn view_after(&self, then: Now, ending: &[u64], arriving: &[u64]) -> View {
        let mut view = self.view(then);
        if !arriving.is_empty() {
            let queue = Arc::make_mut(&mut view.queue);
            let key = |q: &crate::policy::Queued| {
                (
                    std::cmp::Reverse(view.partitions[q.partition].priority),
                    q.submit_ns,
                    q.job,
                )
            };
            for &id in arriving {
                let Some(job) = self.jobs.get(&id).filter(|j| j.held) else {
                    continue;
                };
                let mut q = job.as_queued();
                q.submit_ns = job.release_at.unwrap_or(then.mono);
                let k = key(&q);
                let at = queue.partition_point(|o| key(o) < k);
                queue.insert(at, q);
            }
        }
        let mut gone = Vec::with_capacity(ending.len());
        for &id in ending {
            let Some(i) = self.active_at(id) else {
                continue;
            };
            let a = &self.active[i];
            // Only a running job frees its cores by ending.
            if a.state != ActiveState::Running {
                continue;
            }
            for &(n, c) in a.alloc.iter() {
                let node = &mut view.nodes[n];
                node.free_cpus = (node.free_cpus + c).min(node.cpus);
                node.free_slots += c;
                node.free_mem_mb += u64::from(c) * a.mem_per_cpu_mb;
            }
            if let Some(job) = self.jobs.get(&id) {
                for (n, masks) in &job.devices {
                    if let Some(free) = view.nodes.get_mut(*n).map(|v| &mut v.free_gres) {
                        for (f, m) in free.iter_mut().zip(masks.iter()) {
                            *f = f.saturating_add(m.count_ones() as u8);
                        }
                    }
                }
            }
            gone.push(id);
        }
        if !gone.is_empty() {
            // Sorted, so that a thousand jobs ending among a thousand
            // running is not a million comparisons.
            gone.sort_unstable();
            Arc::make_mut(&mut view.active).retain(|a| gone.binary_search(&a.job).is_err());
        }
        view
    }
}
