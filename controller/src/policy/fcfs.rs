//! First come, first served: jobs start in queue order while they fit,
//! and the first that does not fit blocks everything behind it. Named
//! `fcfs`: the built-in policy ([`super::Standard`]) with this base.

use std::collections::HashSet;

use super::alloc::Free;
use super::{Decision, Decisions, View};

pub(super) fn fcfs(v: &View, free: &mut Free, out: &mut Decisions, done: &HashSet<u64>) {
    for q in v
        .queue
        .iter()
        .filter(|q| !done.contains(&q.job) && !v.waits_for_nodes(q))
    {
        match free.place(v, q) {
            Some(alloc) => out.list.push(Decision::Start { job: q.job, alloc }),
            None => break,
        }
    }
}
