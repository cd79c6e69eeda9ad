//! Preemption (Slurm's `preempt/partition_prio` with `PreemptMode`
//! SUSPEND, CANCEL or REQUEUE), and the resumption of the jobs it
//! suspended.
//!
//! A suspended victim's cores are free at once, so its preemptor starts
//! in the same pass. A cancelled or requeued one holds its cores until its
//! process is gone: its preemptor waits, the nodes it will take kept from
//! every other job, and later passes count the cores of jobs already
//! ending before choosing more victims.

use std::collections::HashSet;

use super::alloc::Free;
use super::{Active, ActiveState, Decision, Decisions, Preemption, View};

/// Pending jobs that do not fit suspend, cancel or requeue (`mode`) jobs
/// of lower-priority partitions.
pub(super) fn preempt(
    v: &View,
    mode: Preemption,
    free: &mut Free,
    out: &mut Decisions,
    done: &mut HashSet<u64>,
) {
    // Jobs above the lowest priority that holds (or waits to resume on, or
    // is giving back) cores are this step's: they may preempt lower ones,
    // and those that fit start before suspended lower ones resume.
    let lowest = v
        .active
        .iter()
        .filter(|a| match a.state {
            ActiveState::Running | ActiveState::Suspended => true,
            ActiveState::Ending | ActiveState::EndingSuspended => mode.ends_victims(),
            _ => false,
        })
        .map(|a| v.partitions[a.partition].priority)
        .min();
    let Some(lowest) = lowest else { return };
    // Priorities whose first job could not be placed, even by preemption:
    // later jobs of the same priority do not jump it here (the base policy
    // may still backfill them).
    let mut stuck: HashSet<u32> = HashSet::new();
    // Where victims end (cancel, requeue): what will be free once the
    // jobs on their way out are gone, shared by the jobs waiting for them
    // (each takes its part), so that two of them do not both count the
    // same cores, nor one end a job for cores already coming.
    let ends = mode.ends_victims();
    let mut pool: Option<Free> = ends.then(|| {
        let mut p = free.clone();
        for a in &v.active[..] {
            match a.state {
                ActiveState::Ending => p.give_back_ended(a),
                // Its cores are free already (a policy suspended it).
                ActiveState::EndingSuspended => p.give_back_held(a),
                _ => {}
            }
        }
        p
    });
    let release = |f: &mut Free, a: &Active| {
        if ends {
            f.give_back_ended(a);
        } else {
            f.give_back(a);
        }
    };
    for q in v.queue.iter() {
        let prio = v.partitions[q.partition].priority;
        if prio <= lowest
            || done.contains(&q.job)
            || v.time_slicing(q.partition).is_some()
            || stuck.contains(&prio)
            || v.waits_for_nodes(q)
        {
            continue;
        }
        // It fits as it is: start it now, before suspended jobs of lower
        // priority resume onto those cores.
        if let Some(alloc) = free.place(v, q) {
            if let Some(p) = &mut pool {
                p.take(v, q, &alloc);
            }
            out.list.push(Decision::Start { job: q.job, alloc });
            done.insert(q.job);
            continue;
        }
        let on_part: Vec<bool> = {
            let mut m = vec![false; v.nodes.len()];
            for &n in &v.partitions[q.partition].nodes {
                m[n] = v.nodes[n].usable;
            }
            m
        };
        // Once the jobs on their way out are gone, it fits: it waits for
        // them, and no one else takes its nodes meanwhile.
        let base = pool.clone().unwrap_or_else(|| free.clone());
        if let Some(p) = &mut pool {
            if let Some(alloc) = base.try_place(v, q) {
                p.take(v, q, &alloc);
                free.block(&alloc);
                done.insert(q.job);
                continue;
            }
        }
        // Victims: running jobs of lower priority with cores on the nodes
        // the job may use; lowest priority first, then those that free the
        // most cores there (fewest victims: a job's cores elsewhere are no
        // use to it), then the youngest.
        let useful = |a: &Active| -> u32 {
            a.alloc
                .iter()
                .filter(|(n, _)| on_part[*n])
                .map(|(_, c)| c)
                .sum()
        };
        let mut candidates: Vec<&Active> = v
            .active
            .iter()
            .filter(|a| {
                a.state == ActiveState::Running
                    && !done.contains(&a.job)
                    && v.partitions[a.partition].priority < prio
                    && a.alloc.iter().any(|(n, _)| on_part[*n])
            })
            .collect();
        candidates.sort_by_key(|a| {
            (
                v.partitions[a.partition].priority,
                std::cmp::Reverse(useful(a)),
                std::cmp::Reverse(a.since_ns),
                a.job,
            )
        });
        let mut trial = base.clone();
        let mut chosen: Vec<&Active> = Vec::new();
        let mut fits = false;
        for a in candidates {
            release(&mut trial, a);
            chosen.push(a);
            if trial.try_place(v, q).is_some() {
                fits = true;
                break;
            }
        }
        if !fits {
            stuck.insert(prio);
            continue;
        }
        // Just enough: drop every victim the job fits without, trying the
        // last chosen (the least preferred) first.
        let mut i = chosen.len();
        while i > 0 {
            i -= 1;
            let mut without = base.clone();
            for (k, a) in chosen.iter().enumerate() {
                if k != i {
                    release(&mut without, a);
                }
            }
            if without.try_place(v, q).is_some() {
                chosen.remove(i);
            }
        }
        let mut trial = base.clone();
        for a in &chosen {
            release(&mut trial, a);
        }
        let Some(alloc) = trial.try_place(v, q) else {
            continue;
        };
        // Spare victims the placement does not touch.
        let used: HashSet<usize> = alloc.iter().map(|(n, _)| *n).collect();
        for a in chosen {
            if !a.alloc.iter().any(|(n, _)| used.contains(n)) {
                continue;
            }
            done.insert(a.job);
            if let Some(p) = &mut pool {
                // Its cores are the job's once it is gone.
                p.give_back_ended(a);
                out.list.push(Decision::Preempt {
                    job: a.job,
                    requeue: mode == Preemption::Requeue,
                });
            } else {
                free.give_back(a);
                out.list.push(Decision::Suspend(a.job));
            }
        }
        done.insert(q.job);
        if let Some(p) = &mut pool {
            // Its cores are not free yet: it waits, and no one else takes
            // its nodes meanwhile.
            p.take(v, q, &alloc);
            free.block(&alloc);
            continue;
        }
        free.take(v, q, &alloc);
        out.list.push(Decision::Start { job: q.job, alloc });
    }
}

/// Jobs the policy suspended (outside gang partitions) resume, oldest
/// suspension first, as soon as their cores are free.
pub(super) fn resume(v: &View, free: &mut Free, out: &mut Decisions, done: &mut HashSet<u64>) {
    let mut suspended: Vec<&Active> = v
        .active
        .iter()
        .filter(|a| {
            a.state == ActiveState::Suspended
                && v.time_slicing(a.partition).is_none()
                && !done.contains(&a.job)
        })
        .collect();
    suspended.sort_by_key(|a| {
        (
            std::cmp::Reverse(v.partitions[a.partition].priority),
            a.since_ns,
            a.job,
        )
    });
    let mut reserved = false;
    for a in suspended {
        if free.fits_alloc(&a.alloc) {
            free.take_alloc(&a.alloc);
            out.list.push(Decision::Resume(a.job));
            done.insert(a.job);
        } else if !reserved {
            // The first in line keeps its nodes: jobs started in the gaps
            // could otherwise keep a job spread over several nodes
            // suspended for ever.
            free.block(&a.alloc);
            reserved = true;
        }
    }
}
