//! Shortest job first: a complete policy in one file, registered as
//! `policy = "sjf"`. Copy it to start your own.
//!
//! Each pass it tries the pending jobs from the shortest expected run time
//! (wall-time limit, else run time) to the longest, oldest first among
//! equals, and starts every one that fits now. It makes no reservation, so
//! a large job may wait as long as shorter ones keep arriving: the classic
//! trade of mean wait against fairness that EASY backfilling avoids.
//! It suspends nothing, so it ignores gang partitions and preemption.

use super::{Decision, Decisions, Entry, Free, Policy, View};

/// How a config names it (`list.rs` lists it).
pub const ENTRY: Entry = Entry {
    name: "sjf",
    about: "shortest job first, no reservation (the example policy)",
    suspends: false,
    make: |_| Box::new(ShortestFirst),
};

#[derive(Debug, Clone, Copy, Default)]
pub struct ShortestFirst;

impl Policy for ShortestFirst {
    fn decide(&self, view: &View) -> Decisions {
        let mut free = Free::new(view);
        let mut order: Vec<_> = view.queue.iter().collect();
        order.sort_by_key(|q| (q.estimate_ns, q.submit_ns, q.job));
        let mut out = Decisions::default();
        for q in order {
            if let Some(alloc) = free.place(view, q) {
                out.list.push(Decision::Start { job: q.job, alloc });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{NodeView, PartitionView, Queued};
    use std::sync::Arc;

    const S: u64 = 1_000_000_000;

    fn queued(job: u64, cores: u32, estimate_s: u64) -> Queued {
        Queued {
            job,
            partition: 0,
            cores,
            mem_per_cpu_mb: 0,
            estimate_ns: estimate_s * S,
            submit_ns: job as i64,
            gres: Default::default(),
            nodes: None,
            within: None,
        }
    }

    #[test]
    fn short_jobs_go_first_and_fill_the_gaps() {
        // 8 free cores on one node; a long 8-core job queued first, then
        // two short 4-core jobs: the short ones start, the long one waits.
        let view = View {
            now_ns: 0,
            nodes: vec![NodeView {
                cpus: 8,
                free_cpus: 8,
                free_mem_mb: 1 << 20,
                free_slots: 8,
                usable: true,
                free_gres: Default::default(),
            }],
            partitions: Arc::new(vec![PartitionView {
                nodes: vec![0],
                priority: 0,
                gang: None,
                contiguous: false,
            }]),
            queue: Arc::new(vec![queued(1, 8, 100), queued(2, 4, 10), queued(3, 4, 5)]),
            active: Arc::default(),
            happened: Vec::new(),
        };
        let started: Vec<u64> = ShortestFirst
            .decide(&view)
            .list
            .iter()
            .map(|d| match d {
                Decision::Start { job, .. } => *job,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(started, [3, 2]);
    }
}
