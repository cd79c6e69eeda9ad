//! The ends the controller expects, and the cluster as it will be after
//! them: what the scheduler prepares a coming pass from.
//!
//! A job's run time is given at its submission, so the controller knows
//! when each running job's process will end: its first start, plus the
//! time it was suspended, plus its run time (its wall-time limit if that
//! is shorter). [`Cluster::ends`] keeps those instants, updated wherever a
//! job starts, stops running or runs again (`set_active`, `started`,
//! `release`). [`Cluster::next_ends`] gives the next of them, with the jobs
//! that end within a moment of it; [`Cluster::view_after`] the policy's view
//! of the cluster once those jobs are gone. The scheduler runs the policy
//! on that view and has the agents start, held, the processes of the jobs
//! it would start then (`Scheduler::prepare_ahead`). It is only a guess:
//! the pass at the real end decides, and a held process no start claims is
//! killed without a record.

use std::sync::Arc;

use super::tables::Cluster;
use super::Now;
use crate::policy::{ActiveState, View};

impl Cluster {
    /// Notes when running job `id`'s process should end, from its run
    /// time (none for a job not running).
    pub(super) fn expect_end(&mut self, id: u64) {
        self.forget_end(id);
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let (Some(start), None) = (job.started_mono, job.suspended_since) else {
            return;
        };
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

    /// The next instant (monotonic ns) running jobs are expected to end
    /// (it may be past: a process that started late ends late), and the
    /// jobs expected to end within `within` ns of it, all of which a pass
    /// then would likely see over. `None` with no running job.
    pub fn next_ends(&self, within: i64) -> Option<(i64, Vec<u64>)> {
        let &(first, _) = self.ends.first()?;
        let until = first.saturating_add(within);
        let jobs = self
            .ends
            .iter()
            .take_while(|(at, _)| *at <= until)
            .map(|&(_, id)| id)
            .collect();
        Some((first, jobs))
    }

    /// What the policy would see at `then` were the jobs `ending` over by
    /// then and nothing else changed: their cores, slots, memory and
    /// devices free, and they out of the active jobs.
    pub fn view_after(&self, then: Now, ending: &[u64]) -> View {
        let mut view = self.view(then);
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
            for &(n, c) in &a.alloc {
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
            Arc::make_mut(&mut view.active).retain(|a| !gone.contains(&a.job));
        }
        view
    }
}
