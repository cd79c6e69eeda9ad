//! Gang time-slicing (Slurm's `PreemptMode=GANG` with
//! `OverSubscribe=FORCE:K`): up to K jobs share each core of a partition,
//! and a job that has had its slice gives its cores to the one that has
//! waited longest.

use std::collections::HashSet;

use super::alloc::Free;
use super::{Active, ActiveState, Decision, Decisions, View};

/// Gang time-slicing of partition `p`: running jobs whose slice is over
/// give way to the jobs that have waited longest (suspended or pending).
pub(super) fn rotate(
    v: &View,
    p: usize,
    free: &mut Free,
    out: &mut Decisions,
    done: &mut HashSet<u64>,
) {
    let Some(gang) = v.time_slicing(p) else {
        return;
    };
    // Waiting jobs, longest waiting first: suspended ones since their
    // suspension, pending ones since their submission.
    let mut waiting: Vec<(i64, Waiter)> = v
        .active
        .iter()
        .enumerate()
        .filter(|(_, a)| a.partition == p && a.state == ActiveState::Suspended)
        .map(|(i, a)| (a.since_ns, Waiter::Suspended(i)))
        .chain(
            v.queue
                .iter()
                .enumerate()
                .filter(|(_, q)| q.partition == p && !done.contains(&q.job))
                .map(|(i, q)| (q.submit_ns, Waiter::Pending(i))),
        )
        .collect();
    if waiting.is_empty() {
        return;
    }
    waiting.sort_by_key(|(since, w)| (*since, w.key(v)));
    let mut expired: Vec<&Active> = v
        .active
        .iter()
        .filter(|a| {
            a.partition == p
                && a.state == ActiveState::Running
                && v.now_ns - a.since_ns >= gang.slice_ns
        })
        .collect();
    expired.sort_by_key(|a| (a.since_ns, a.job));
    // Tentatively take every expired job off its cores; those whose cores
    // nobody takes simply go on running.
    for a in &expired {
        free.give_back(a);
    }
    let mut granted = Vec::new();
    // The longest-waiting suspended job that cannot have its cores back
    // yet: its nodes are reserved for it, or younger jobs could keep
    // taking them turn after turn and a job spread over several nodes
    // would starve.
    let mut reserved = false;
    for (_, w) in &waiting {
        match *w {
            Waiter::Suspended(i) => {
                let a = &v.active[i];
                if free.fits_alloc(&a.alloc) {
                    free.take_alloc(&a.alloc);
                    granted.push(Decision::Resume(a.job));
                    done.insert(a.job);
                } else if !reserved {
                    free.block(&a.alloc);
                    reserved = true;
                }
            }
            Waiter::Pending(i) => {
                let q = &v.queue[i];
                if let Some(alloc) = free.place(v, q) {
                    granted.push(Decision::Start { job: q.job, alloc });
                    done.insert(q.job);
                }
            }
        }
    }
    let served = granted.len();
    let mut displaced = 0;
    for a in &expired {
        // Cores nobody took go back to their job, reserved or not.
        if free.still_free(&a.alloc) {
            free.take_alloc(&a.alloc);
        } else {
            out.list.push(Decision::Suspend(a.job));
            done.insert(a.job);
            displaced += 1;
        }
    }
    // Decisions are carried out in order: the displaced jobs must be off
    // the cores before the waiting ones are given them.
    out.list.append(&mut granted);
    // Someone still waits: ask again when the first running job's slice
    // ends (the jobs started or resumed now end theirs a slice from now).
    if waiting.len() - served + displaced > 0 {
        let next = v
            .active
            .iter()
            .filter(|a| {
                a.partition == p && a.state == ActiveState::Running && !done.contains(&a.job)
            })
            .map(|a| a.since_ns + gang.slice_ns)
            .filter(|&t| t > v.now_ns)
            .fold(v.now_ns + gang.slice_ns, i64::min);
        out.wake_at_ns = Some(out.wake_at_ns.map_or(next, |w| w.min(next)));
    }
}

#[derive(Debug, Clone, Copy)]
enum Waiter {
    /// Index into `View::active`.
    Suspended(usize),
    /// Index into `View::queue`.
    Pending(usize),
}

impl Waiter {
    /// Tie-break between equal waiting times: job id.
    fn key(&self, v: &View) -> u64 {
        match *self {
            Waiter::Suspended(i) => v.active[i].job,
            Waiter::Pending(i) => v.queue[i].job,
        }
    }
}
