//! EASY backfilling: once the queue's head is blocked it gets a
//! reservation (the earliest time enough cores free up, from the running
//! jobs' expected ends), and a later job may start now only if it cannot
//! delay it. Named `easy` (the default): the built-in policy
//! ([`super::Standard`]) with this base.

use std::collections::{HashMap, HashSet};

use super::alloc::Free;
use super::{ActiveState, Decision, Decisions, Queued, View};

/// When `q` would end if it started now.
fn end_of(v: &View, q: &Queued) -> i64 {
    v.now_ns
        .saturating_add(q.estimate_ns.min(i64::MAX as u64) as i64)
}

/// The cores a job decided on in this pass holds: those of the start
/// decision at this index, or those of this active job (resumed). Kept by
/// index, not copied: the widest jobs' lists are megabytes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Held {
    Start(usize),
    Active(usize),
}

impl Held {
    fn alloc<'a>(self, v: &'a View, decisions: &'a [Decision]) -> &'a [(usize, u32)] {
        match self {
            Held::Start(i) => match decisions.get(i) {
                Some(Decision::Start { alloc, .. }) => alloc,
                _ => &[],
            },
            Held::Active(i) => v.active.get(i).map_or(&[], |a| &a.alloc),
        }
    }
}

/// Expected ends of the jobs started or resumed by `decisions`, for the
/// EASY reservation: they will release their cores too.
pub(super) fn decided_ends(v: &View, decisions: &[Decision]) -> Vec<(i64, Held)> {
    let started: HashSet<u64> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    let mut ends: Vec<(i64, Held)> = Vec::new();
    if !started.is_empty() {
        let estimate: HashMap<u64, i64> = v
            .queue
            .iter()
            .filter(|q| started.contains(&q.job))
            .map(|q| (q.job, end_of(v, q)))
            .collect();
        for (i, d) in decisions.iter().enumerate() {
            if let Decision::Start { job, .. } = d {
                if let Some(&end) = estimate.get(job) {
                    ends.push((end, Held::Start(i)));
                }
            }
        }
    }
    for d in decisions {
        if let Decision::Resume(job) = d {
            if let Ok(i) = v.active.binary_search_by_key(job, |a| a.job) {
                let a = &v.active[i];
                ends.push((v.now_ns.saturating_add(a.remaining_ns), Held::Active(i)));
            }
        }
    }
    ends
}

pub(super) fn easy(
    v: &View,
    free: &mut Free,
    out: &mut Decisions,
    done: &HashSet<u64>,
    earlier: Vec<(i64, Held)>,
) {
    // Expected ends of the jobs started in this pass before the head
    // blocked, which the head's reservation must count as releases.
    let mut started = earlier;
    let mut reservation: Option<Reservation> = None;
    for q in v
        .queue
        .iter()
        .filter(|q| !done.contains(&q.job) && !v.waits_for_nodes(q))
    {
        match &mut reservation {
            None => match free.place(v, q) {
                Some(alloc) => {
                    started.push((end_of(v, q), Held::Start(out.list.len())));
                    out.list.push(Decision::Start { job: q.job, alloc });
                }
                None => reservation = Some(Reservation::for_head(v, free, q, &started, &out.list)),
            },
            Some(r) => {
                // Cheap test first: most of a long queue does not fit.
                if !free.might_fit(q) {
                    continue;
                }
                let ends_in_time = end_of(v, q) <= r.shadow_ns;
                // A job that would still run at the head's start can go
                // only on spare cores: where every core it could get is
                // on the head's nodes, more cores than are spare is a no
                // without looking for a place (on a large machine most of
                // a long queue is turned down here).
                if !ends_in_time
                    && r.covers[q.partition]
                    && (!r.head_cores_only || q.cores > r.extra)
                {
                    continue;
                }
                let Some(alloc) = free.try_place(v, q) else {
                    continue;
                };
                let on_head_nodes: u32 = alloc
                    .iter()
                    .filter(|(n, _)| r.head_nodes[*n])
                    .map(|(_, c)| c)
                    .sum();
                // The reservation counts cores only: when the head needs
                // memory or devices, a job that would still run at its
                // start could take them, so only jobs ending in time go.
                // Off the head's nodes it cannot delay it, whatever it
                // holds.
                let spare_ok =
                    on_head_nodes == 0 || (r.head_cores_only && on_head_nodes <= r.extra);
                if ends_in_time || spare_ok {
                    if !ends_in_time {
                        r.extra -= on_head_nodes;
                    }
                    free.take(v, q, &alloc);
                    out.list.push(Decision::Start { job: q.job, alloc });
                }
            }
        }
    }
}

/// The blocked head's reserved start and what is spare at that time.
struct Reservation {
    /// Whether the head asks cores only, no memory and no generic
    /// resource (so spare cores are truly spare).
    head_cores_only: bool,
    shadow_ns: i64,
    /// Cores on the head's partition free at the shadow time beyond what
    /// the head needs.
    extra: u32,
    head_nodes: Vec<bool>,
    /// By partition: whether all its usable nodes are the head's.
    covers: Vec<bool>,
}

impl Reservation {
    fn for_head(
        v: &View,
        free: &Free,
        head: &Queued,
        started: &[(i64, Held)],
        decisions: &[Decision],
    ) -> Reservation {
        let mut head_nodes = vec![false; v.nodes.len()];
        let within = head.within.as_deref();
        // A head that names nodes enough to hold it (`-w`) can have no
        // other: its reservation is on them alone. (Counted in cores: a
        // head asking memory or devices keeps its whole partition.)
        let only_named = within.filter(|w| {
            !w.required.is_empty()
                && head.mem_per_cpu_mb == 0
                && !crate::gres::any(&head.gres)
                && head
                    .nodes
                    .is_none_or(|s| s.least as usize <= w.required.len())
                && w.required
                    .iter()
                    .map(|&n| v.nodes.get(n).map_or(0, |node| u64::from(node.cpus)))
                    .sum::<u64>()
                    >= u64::from(head.cores)
        });
        for &n in &v.partitions[head.partition].nodes {
            if v.nodes[n].usable
                && !within.is_some_and(|w| w.excludes(n))
                && only_named.is_none_or(|w| w.required.binary_search(&n).is_ok())
            {
                head_nodes[n] = true;
            }
        }
        let on_head = |alloc: &[(usize, u32)]| -> u32 {
            alloc
                .iter()
                .filter(|(n, _)| head_nodes[*n])
                .map(|(_, c)| c)
                .sum()
        };
        // Releases: running jobs at their expected ends, and the jobs this
        // pass just started, at now + estimate.
        let mut releases: Vec<(i64, u32)> = v
            .active
            .iter()
            .filter(|a| a.state == ActiveState::Running)
            .map(|a| (a.expected_end_ns, on_head(&a.alloc)))
            .collect();
        releases.extend(
            started
                .iter()
                .map(|&(end, held)| (end, on_head(held.alloc(v, decisions)))),
        );
        releases.sort_unstable();
        let mut avail = if within.is_some() {
            (0..v.nodes.len())
                .filter(|&n| head_nodes[n])
                .map(|n| u64::from(free.node(n).free_cpus))
                .sum()
        } else {
            free.partition_free(head.partition)
        };
        // No release in sight (the cores are held by suspended or held
        // jobs): no time to backfill into, and nothing spare.
        let mut shadow_ns = v.now_ns;
        let mut extra = 0;
        for (end, cores) in releases {
            avail += u64::from(cores);
            if avail >= u64::from(head.cores) {
                shadow_ns = end.max(v.now_ns);
                extra = (avail - u64::from(head.cores)).min(u64::from(u32::MAX)) as u32;
                break;
            }
        }
        let covers = v
            .partitions
            .iter()
            .map(|p| p.nodes.iter().all(|&n| head_nodes[n] || !v.nodes[n].usable))
            .collect();
        Reservation {
            head_cores_only: head.mem_per_cpu_mb == 0
                && !crate::gres::any(&head.gres)
                && head.nodes.is_none()
                && head.within.is_none(),
            shadow_ns,
            extra,
            head_nodes,
            covers,
        }
    }
}
