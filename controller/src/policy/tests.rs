//! The built-in policy, pass by pass, over views built by hand.

use std::collections::HashSet;

use super::*;

#[test]
fn every_policy_has_a_name_of_its_own() {
    let mut names: Vec<&str> = all().map(|p| p.name).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "two policies share a name: {names:?}");
    assert!(find("sjf").is_some(), "sjf is in the list");
}

const S: i64 = 1_000_000_000;

fn node(free: u32) -> NodeView {
    NodeView {
        cpus: 4,
        free_cpus: free,
        free_mem_mb: 1 << 20,
        free_slots: free,
        usable: true,
        free_gres: Default::default(),
    }
}

fn job(id: u64, cores: u32, estimate_s: u64) -> Queued {
    Queued {
        job: id,
        partition: 0,
        cores,
        mem_per_cpu_mb: 0,
        estimate_ns: estimate_s * S as u64,
        submit_ns: id as i64,
        gres: Default::default(),
        nodes: None,
        within: None,
    }
}

fn running(id: u64, partition: usize, alloc: Vec<(usize, u32)>, end_s: i64) -> Active {
    Active {
        job: id,
        partition,
        cores: alloc.iter().map(|(_, c)| c).sum(),
        mem_per_cpu_mb: 0,
        alloc: alloc.into(),
        gres: Default::default(),
        state: ActiveState::Running,
        since_ns: 0,
        expected_end_ns: end_s * S,
        remaining_ns: end_s * S,
    }
}

/// `free` cores now on 4 nodes of 4 cores (16 in all), one partition.
fn view(free: [u32; 4], active: Vec<Active>, queue: Vec<Queued>) -> View {
    View {
        now_ns: 100 * S,
        nodes: free.iter().map(|&c| node(c)).collect(),
        partitions: Arc::new(vec![PartitionView {
            nodes: vec![0, 1, 2, 3],
            priority: 0,
            gang: None,
            contiguous: false,
        }]),
        queue: Arc::new(queue),
        active: Arc::new(active),
        happened: Vec::new(),
    }
}

const FCFS: Standard = Standard {
    base: Base::Fcfs,
    preemption: Preemption::Off,
};
const EASY: Standard = Standard {
    base: Base::Easy,
    preemption: Preemption::Off,
};

fn started(d: &Decisions) -> Vec<u64> {
    d.list
        .iter()
        .filter_map(|x| match x {
            Decision::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

#[test]
fn fcfs_starts_in_order_and_stops_at_the_first_that_does_not_fit() {
    let v = view(
        [4, 4, 0, 0],
        vec![],
        vec![job(1, 4, 10), job(2, 2, 10), job(3, 8, 10), job(4, 1, 10)],
    );
    let d = FCFS.decide(&v);
    assert_eq!(
        d.list,
        [
            Decision::Start {
                job: 1,
                alloc: vec![(0, 4)]
            },
            Decision::Start {
                job: 2,
                alloc: vec![(1, 2)]
            }
        ]
    );
}

#[test]
fn easy_backfills_a_small_job_that_ends_before_the_reservation() {
    let active = vec![
        running(10, 0, vec![(2, 4)], 200),
        running(11, 0, vec![(3, 4)], 300),
    ];
    // The head wants all 16: reserved at 300 s with none spare. Job 2
    // (8 cores) ends at 250 s: backfilled. Job 3 finds nothing left.
    let v = view(
        [4, 4, 0, 0],
        active,
        vec![job(1, 16, 500), job(2, 8, 150), job(3, 1, 10)],
    );
    assert_eq!(started(&EASY.decide(&v)), [2]);
}

#[test]
fn easy_does_not_backfill_a_job_that_would_delay_the_head() {
    let active = vec![running(10, 0, vec![(2, 4), (3, 4)], 200)];
    let v = view(
        [4, 4, 0, 0],
        active.clone(),
        vec![job(1, 16, 500), job(2, 2, 300)],
    );
    assert!(started(&EASY.decide(&v)).is_empty());
    let v = view([4, 4, 0, 0], active, vec![job(1, 16, 500), job(2, 2, 100)]);
    assert_eq!(started(&EASY.decide(&v)), [2]);
}

#[test]
fn easy_backfills_long_jobs_into_cores_the_head_will_not_need() {
    let active = vec![running(10, 0, vec![(2, 4), (3, 4)], 200)];
    // The head needs 12: reserved at 200 s with 4 spare. Two long 2-core
    // jobs fit in the spare 4; a third would not.
    let v = view(
        [4, 4, 0, 0],
        active,
        vec![
            job(1, 12, 500),
            job(2, 2, 900),
            job(3, 2, 900),
            job(4, 2, 900),
        ],
    );
    assert_eq!(started(&EASY.decide(&v)), [2, 3]);
}

#[test]
fn easy_does_not_let_a_backfilled_job_take_the_heads_memory() {
    // Two nodes of 4 cores / 4000 MiB; node 0 busy until 200 s. The head
    // wants 6 cores of 1000 MiB: reserved at 200 s with 2 cores spare.
    // A long 1-core job of 4000 MiB fits those spare cores but would
    // take node 1's memory: not backfilled. A short one is.
    let mut v = view(
        [0, 4, 0, 0],
        vec![running(10, 0, vec![(0, 4)], 200)],
        vec![],
    );
    v.nodes.truncate(2);
    Arc::make_mut(&mut v.partitions)[0].nodes = vec![0, 1];
    for n in &mut v.nodes {
        n.free_mem_mb = 4000;
    }
    let head = Queued {
        mem_per_cpu_mb: 1000,
        ..job(1, 6, 500)
    };
    let long = Queued {
        mem_per_cpu_mb: 4000,
        ..job(2, 1, 900)
    };
    v.queue = Arc::new(vec![head, long]);
    assert!(started(&EASY.decide(&v)).is_empty());
    Arc::make_mut(&mut v.queue)[1].estimate_ns = 50 * S as u64;
    assert_eq!(started(&EASY.decide(&v)), [2]);
}

#[test]
fn memory_limits_placement() {
    let mut v = view([4, 4, 4, 4], vec![], vec![]);
    v.nodes[0].free_mem_mb = 1000;
    v.nodes[1].free_mem_mb = 4000;
    v.queue = Arc::new(vec![Queued {
        mem_per_cpu_mb: 1000,
        ..job(1, 5, 10)
    }]);
    let d = FCFS.decide(&v);
    assert_eq!(
        d.list,
        [Decision::Start {
            job: 1,
            alloc: vec![(0, 1), (1, 4)]
        }]
    );
}

/// Adds partition 1 over `nodes` at priority 10 (partition 0 at 1) and
/// queues one 4-core job there: the urgent job preemption is for.
fn queue_urgent(v: &mut View, nodes: Vec<usize>) {
    Arc::make_mut(&mut v.partitions)[0].priority = 1;
    Arc::make_mut(&mut v.partitions).push(PartitionView {
        nodes,
        priority: 10,
        gang: None,
        contiguous: false,
    });
    v.queue = Arc::new(vec![Queued {
        partition: 1,
        ..job(1, 4, 100)
    }]);
}

#[test]
fn preemption_suspends_the_fewest_lowest_priority_jobs() {
    // All 16 cores busy with low-priority jobs: 1 core (job 10), 3 cores
    // (11) on node 0; 4 cores each on nodes 1 (12), 2 (13), 3 (14).
    let mut base = view([4, 4, 4, 4], vec![], vec![]);
    let active = vec![
        running(10, 0, vec![(0, 1)], 900),
        running(11, 0, vec![(0, 3)], 900),
        running(12, 0, vec![(1, 4)], 900),
        running(13, 0, vec![(2, 4)], 900),
        running(14, 0, vec![(3, 4)], 900),
    ];
    for n in &mut base.nodes {
        n.free_cpus = 0;
    }
    base.active = Arc::new(active);
    queue_urgent(&mut base, vec![0, 1, 2, 3]);
    let d = PREEMPT.decide(&base);
    // One victim suffices: a 4-core job (the largest first), the
    // youngest of equal ones, here the highest id (all started at 0).
    assert_eq!(
        d.list,
        [
            Decision::Suspend(12),
            Decision::Start {
                job: 1,
                alloc: vec![(1, 4)]
            }
        ]
    );
}

#[test]
fn preemption_counts_only_the_cores_a_victim_frees_where_the_job_may_run() {
    // The urgent partition has nodes 0 to 2 only, all busy. Job 10 has
    // 3 cores on node 0 and 4 on node 3, job 11 two on node 1 and 4 on
    // node 3 (7 and 6 cores in all), job 12 four on node 2: counted by
    // their size, jobs 10 and 11 would both be suspended; job 12 alone
    // frees the 4 cores the urgent job needs where it may run.
    let mut base = view([3, 2, 4, 8], vec![], vec![]);
    for n in &mut base.nodes {
        n.free_cpus = 0;
    }
    base.active = Arc::new(vec![
        running(10, 0, vec![(0, 3), (3, 4)], 900),
        running(11, 0, vec![(1, 2), (3, 4)], 900),
        running(12, 0, vec![(2, 4)], 900),
    ]);
    queue_urgent(&mut base, vec![0, 1, 2]);
    let d = PREEMPT.decide(&base);
    assert_eq!(
        d.list,
        [
            Decision::Suspend(12),
            Decision::Start {
                job: 1,
                alloc: vec![(2, 4)]
            }
        ]
    );
}

#[test]
fn preempted_jobs_resume_when_their_cores_are_free_oldest_first() {
    let mut v = view([4, 0, 4, 0], vec![], vec![]);
    let mut a = running(12, 0, vec![(1, 4)], 900);
    a.state = ActiveState::Suspended;
    a.since_ns = 50 * S;
    let mut b = running(13, 0, vec![(0, 4)], 900);
    b.state = ActiveState::Suspended;
    b.since_ns = 40 * S;
    v.active = Arc::new(vec![a, b]);
    // Node 1 is busy (its preemptor still runs), node 0 free: only job
    // 13 can resume; a pending job may then use node 2, not node 0.
    v.queue = Arc::new(vec![job(1, 4, 10)]);
    let d = FCFS.decide(&v);
    assert_eq!(
        d.list,
        [
            Decision::Resume(13),
            Decision::Start {
                job: 1,
                alloc: vec![(2, 4)]
            }
        ]
    );
}

fn in_state(mut a: Active, state: ActiveState, since_s: i64) -> Active {
    a.state = state;
    a.since_ns = since_s * S;
    if state != ActiveState::Running {
        a.expected_end_ns = i64::MAX;
    }
    a
}

const PREEMPT: Standard = Standard {
    base: Base::Fcfs,
    preemption: Preemption::Suspend,
};

#[test]
fn preemption_spares_victims_it_can_do_without() {
    // Node 0 has 1 free core. Job 11 (low, 9 cores) holds 1 core of
    // node 0 and two other nodes; job 12 (low) holds node 1. A 4-core
    // urgent job limited to nodes 0-1 needs only job 12 gone.
    let mut v = view([1, 0, 0, 0], vec![], vec![]);
    Arc::make_mut(&mut v.partitions).push(PartitionView {
        nodes: vec![0, 1],
        priority: 10,
        gang: None,
        contiguous: false,
    });
    Arc::make_mut(&mut v.partitions)[0].priority = 1;
    v.active = Arc::new(vec![
        running(10, 1, vec![(0, 3)], 900),
        running(11, 0, vec![(0, 0), (2, 4), (3, 4)], 900),
        running(12, 0, vec![(1, 4)], 900),
    ]);
    Arc::make_mut(&mut v.active)[1].alloc = vec![(0, 1), (2, 4), (3, 4)].into();
    Arc::make_mut(&mut v.active)[1].cores = 9;
    v.nodes[0].free_cpus = 1;
    let mut urgent = job(1, 4, 10);
    urgent.partition = 1;
    v.queue = Arc::new(vec![urgent]);
    let d = PREEMPT.decide(&v);
    assert_eq!(
        d.list,
        [
            Decision::Suspend(12),
            Decision::Start {
                job: 1,
                alloc: vec![(0, 1), (1, 3)]
            }
        ]
    );
}

#[test]
fn jobs_being_cancelled_are_not_victims() {
    let mut v = view([0, 0, 0, 0], vec![], vec![]);
    Arc::make_mut(&mut v.partitions).push(PartitionView {
        nodes: vec![0, 1, 2, 3],
        priority: 10,
        gang: None,
        contiguous: false,
    });
    v.active = Arc::new(vec![in_state(
        running(10, 0, vec![(0, 4), (1, 4), (2, 4), (3, 4)], 900),
        ActiveState::Ending,
        90,
    )]);
    let mut urgent = job(1, 4, 10);
    urgent.partition = 1;
    v.queue = Arc::new(vec![urgent]);
    assert!(PREEMPT.decide(&v).list.is_empty());
}

#[test]
fn a_job_suspended_on_a_drained_node_resumes() {
    let mut v = view([4, 4, 4, 4], vec![], vec![]);
    v.nodes[0].usable = false;
    v.active = Arc::new(vec![in_state(
        running(10, 0, vec![(0, 4)], 900),
        ActiveState::Suspended,
        50,
    )]);
    assert_eq!(PREEMPT.decide(&v).list, [Decision::Resume(10)]);
}

#[test]
fn easy_counts_jobs_resumed_in_the_same_pass_as_releases() {
    // Job 10 (8 cores, 200 s left) resumes on nodes 0-1; job 11 ends at
    // 200 s. The 16-core head can start at 300 s (100 s + 200 s), when
    // both have released: a 4-core job of 900 s on node 3 would delay
    // it and must not be backfilled.
    let mut v = view([4, 4, 0, 4], vec![], vec![]);
    let mut suspended = in_state(
        running(10, 0, vec![(0, 4), (1, 4)], 0),
        ActiveState::Suspended,
        50,
    );
    suspended.remaining_ns = 200 * S;
    v.active = Arc::new(vec![suspended, running(11, 0, vec![(2, 4)], 200)]);
    v.queue = Arc::new(vec![job(1, 16, 500), job(2, 4, 900)]);
    assert_eq!(EASY.decide(&v).list, [Decision::Resume(10)]);
}

#[test]
fn no_start_beyond_k_jobs_per_core() {
    // K = 2 on 3 nodes of 4 cores. Node 0 holds two suspended jobs: it
    // has free cores but no free slot; nothing may start there.
    let mut v = view([4, 0, 0, 4], vec![], vec![]);
    v.nodes.truncate(3);
    for n in &mut v.nodes {
        n.free_slots = 0;
    }
    Arc::make_mut(&mut v.partitions)[0] = PartitionView {
        nodes: vec![0, 1, 2],
        priority: 0,
        gang: Some(Gang {
            oversubscribe: 2,
            slice_ns: 30 * S,
        }),
        contiguous: false,
    };
    v.active = Arc::new(vec![
        in_state(
            running(10, 0, vec![(0, 4), (2, 4)], 0),
            ActiveState::Suspended,
            50,
        ),
        in_state(
            running(11, 0, vec![(0, 4), (1, 4)], 0),
            ActiveState::Suspended,
            60,
        ),
        in_state(running(12, 0, vec![(1, 4)], 900), ActiveState::Running, 90),
        in_state(running(13, 0, vec![(2, 4)], 900), ActiveState::Running, 95),
    ]);
    v.queue = Arc::new(vec![job(1, 4, 10)]);
    for policy in [FCFS, EASY] {
        let d = policy.decide(&v);
        assert!(
            !d.list.iter().any(|x| matches!(x, Decision::Start { .. })),
            "{d:?}"
        );
    }
}

fn gang_view(slice_s: i64) -> View {
    let mut v = view([4, 4, 4, 4], vec![], vec![]);
    v.nodes.truncate(1);
    v.nodes[0].free_slots = 8;
    Arc::make_mut(&mut v.partitions)[0] = PartitionView {
        nodes: vec![0],
        priority: 0,
        gang: Some(Gang {
            oversubscribe: 2,
            slice_ns: slice_s * S,
        }),
        contiguous: false,
    };
    v
}

#[test]
fn gang_rotation_every_slice() {
    // One 4-core node, two 4-core jobs time-sliced every 30 s.
    let mut v = gang_view(30);
    let mut a = running(1, 0, vec![(0, 4)], 900);
    a.since_ns = 80 * S;
    let mut b = running(2, 0, vec![(0, 4)], 900);
    b.state = ActiveState::Suspended;
    b.since_ns = 80 * S;
    v.nodes[0].free_cpus = 0;
    v.nodes[0].free_slots = 0;
    v.active = Arc::new(vec![a.clone(), b.clone()]);
    // 20 s into job 1's slice: nothing to do; ask again at 110 s.
    let d = FCFS.decide(&v);
    assert!(d.list.is_empty(), "{d:?}");
    assert_eq!(d.wake_at_ns, Some(110 * S));
    // At 110 s the slice is over: job 1 is suspended, then job 2
    // resumes on its cores (in that order, or the resume would
    // overbook them).
    v.now_ns = 110 * S;
    let d = FCFS.decide(&v);
    assert_eq!(d.list, [Decision::Suspend(1), Decision::Resume(2)]);
}

#[test]
fn gang_starts_a_new_job_in_turn_and_respects_the_oversubscription() {
    let mut v = gang_view(30);
    v.now_ns = 200 * S;
    let mut a = running(1, 0, vec![(0, 4)], 900);
    a.since_ns = 100 * S;
    v.nodes[0].free_cpus = 0;
    v.nodes[0].free_slots = 4; // K = 2: room for one more 4-core job
    v.active = Arc::new(vec![a]);
    v.queue = Arc::new(vec![
        Queued {
            submit_ns: 150 * S,
            ..job(5, 4, 100)
        },
        Queued {
            submit_ns: 160 * S,
            ..job(6, 4, 100)
        },
    ]);
    let d = FCFS.decide(&v);
    // Job 5 takes job 1's turn; job 6 has no slot (K = 2) and waits.
    assert_eq!(
        d.list,
        [
            Decision::Suspend(1),
            Decision::Start {
                job: 5,
                alloc: vec![(0, 4)]
            },
        ]
    );
    assert!(d.wake_at_ns.is_some());
}

/// Property over many generated views: whatever the policy decides
/// never gives a node more cores or memory than it has free, places
/// each job once, with exactly its cores.
#[test]
fn never_overbooked() {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _ in 0..2000 {
        let n = 1 + rnd(12) as usize;
        let nodes: Vec<NodeView> = (0..n)
            .map(|_| {
                let f = rnd(17) as u32;
                NodeView {
                    cpus: 16,
                    free_cpus: f,
                    free_mem_mb: rnd(64_000),
                    free_slots: f,
                    usable: rnd(5) != 0,
                    free_gres: Default::default(),
                }
            })
            .collect();
        let queue: Vec<Queued> = (0..rnd(30))
            .map(|j| {
                let partition = rnd(2) as usize;
                Queued {
                    job: j,
                    partition,
                    cores: 1 + rnd(40) as u32,
                    mem_per_cpu_mb: rnd(3) * 1000,
                    estimate_ns: rnd(1000) * S as u64,
                    submit_ns: j as i64,
                    gres: Default::default(),
                    // Now and then a node count: 1 to 3 at least, at most
                    // none or a few more.
                    nodes: (rnd(3) == 0).then(|| {
                        let least = 1 + rnd(3) as u32;
                        Span {
                            least,
                            most: [0, least, least + 2][rnd(3) as usize],
                            task_cores: 1 + rnd(3) as u32,
                            even: false,
                        }
                    }),
                    // Now and then nodes named: needed (in its partition, as
                    // the controller checks) or not wanted.
                    within: (rnd(4) == 0).then(|| {
                        let mut excluded = vec![0u64; 1];
                        let mut required = Vec::new();
                        for i in 0..n {
                            match rnd(6) {
                                0 => excluded[0] |= 1 << i,
                                1 if partition == 0 || i % 2 == 0 => required.push(i),
                                _ => {}
                            }
                        }
                        Arc::new(Within { required, excluded })
                    }),
                }
            })
            .collect();
        let v = View {
            now_ns: 10 * S,
            partitions: Arc::new(vec![
                PartitionView {
                    nodes: (0..n).collect(),
                    priority: 0,
                    gang: None,
                    contiguous: false,
                },
                PartitionView {
                    nodes: (0..n).filter(|i| i % 2 == 0).collect(),
                    priority: 0,
                    gang: None,
                    contiguous: false,
                },
            ]),
            nodes,
            queue: Arc::new(queue),
            active: Arc::default(),
            happened: Vec::new(),
        };
        for policy in [FCFS, EASY] {
            let d = policy.decide(&v);
            let mut cpus: Vec<u64> = vec![0; n];
            let mut mem: Vec<u64> = vec![0; n];
            let mut seen = HashSet::new();
            for x in &d.list {
                let Decision::Start { job, alloc } = x else {
                    panic!("unexpected {x:?}");
                };
                assert!(seen.insert(*job), "job {job} placed twice");
                let q = v.queue.iter().find(|q| q.job == *job).unwrap();
                let total: u32 = alloc.iter().map(|(_, c)| c).sum();
                assert_eq!(total, q.cores);
                if let Some(s) = q.nodes {
                    let spans = alloc.len() as u32;
                    let unit = if q.cores.is_multiple_of(s.task_cores) {
                        s.task_cores
                    } else {
                        1
                    };
                    let least = s.least.min(q.cores / unit);
                    assert!(spans >= least, "job {job} on {spans} nodes");
                    assert!(s.most == 0 || spans <= s.most, "job {job} on {spans} nodes");
                    // Whole tasks on each node.
                    assert!(
                        alloc.iter().all(|&(_, c)| c.is_multiple_of(unit)),
                        "{alloc:?}"
                    );
                }
                if let Some(w) = &q.within {
                    let on: Vec<usize> = alloc.iter().map(|&(n, _)| n).collect();
                    assert!(
                        w.required.iter().all(|n| on.contains(n)),
                        "job {job} on {on:?}, not on every node of {:?}",
                        w.required
                    );
                    assert!(
                        on.iter().all(|&n| !w.excludes(n)),
                        "job {job} on {on:?}, a node it excludes"
                    );
                }
                for &(node, c) in alloc {
                    assert!(v.partitions[q.partition].nodes.contains(&node));
                    assert!(v.nodes[node].usable);
                    cpus[node] += u64::from(c);
                    mem[node] += u64::from(c) * q.mem_per_cpu_mb;
                }
            }
            for i in 0..n {
                assert!(
                    cpus[i] <= u64::from(v.nodes[i].free_cpus),
                    "cpus overbooked on {i}"
                );
                assert!(mem[i] <= v.nodes[i].free_mem_mb, "memory overbooked on {i}");
            }
        }
    }
}

#[test]
fn contiguous_placement_takes_the_first_run_of_consecutive_nodes() {
    // Free cores [2, 0, 3, 3]: 4 cores fit first fit on nodes 0 and 2,
    // but node 1 is full, so a contiguous job takes nodes 2 and 3; one of
    // 7 does not fit anywhere, though 8 cores are free.
    let mut v = view([2, 0, 3, 3], vec![], vec![job(1, 4, 10), job(2, 7, 10)]);
    let first_fit = FCFS.decide(&v);
    assert_eq!(
        first_fit.list[0],
        Decision::Start {
            job: 1,
            alloc: vec![(0, 2), (2, 2)]
        }
    );
    Arc::make_mut(&mut v.partitions)[0].contiguous = true;
    let d = FCFS.decide(&v);
    assert_eq!(
        d.list,
        [Decision::Start {
            job: 1,
            alloc: vec![(2, 3), (3, 1)]
        }]
    );
    // A node outside the partition is a gap too.
    Arc::make_mut(&mut v.partitions)[0].nodes = vec![0, 2, 3];
    v.nodes[1].free_cpus = 4;
    let d = FCFS.decide(&v);
    assert_eq!(
        d.list[0],
        Decision::Start {
            job: 1,
            alloc: vec![(2, 3), (3, 1)]
        }
    );
}

fn gpu_node(free_cpus: u32, free_gpus: u8) -> NodeView {
    NodeView {
        free_gres: [free_gpus, 0, 0, 0],
        ..node(free_cpus)
    }
}

fn gpu_job(id: u64, cores: u32, gpus: u8, estimate_s: u64) -> Queued {
    Queued {
        gres: [gpus, 0, 0, 0],
        ..job(id, cores, estimate_s)
    }
}

fn spanning(id: u64, cores: u32, least: u32, most: u32) -> Queued {
    Queued {
        nodes: Some(Span {
            least,
            most,
            task_cores: 1,
            even: false,
        }),
        ..job(id, cores, 100)
    }
}

#[test]
fn a_node_count_lays_a_job_over_its_nodes_as_slurm_does() {
    let v = view([4, 4, 4, 4], vec![], vec![]);
    let free = Free::new(&v);
    // -N 2 -n 4: three and one, as Slurm 22.05 lays it out on empty
    // nodes (packed, it fits one).
    assert_eq!(
        free.try_place(&v, &spanning(1, 4, 2, 2)),
        Some(vec![(0, 3), (1, 1)])
    );
    // -N 3 -n 7: one on each, then the first filled first.
    assert_eq!(
        free.try_place(&v, &spanning(1, 7, 3, 3)),
        Some(vec![(0, 4), (1, 2), (2, 1)])
    );
    // -N 1-4 -n 6: on as many as it may, dealt in turn.
    assert_eq!(
        free.try_place(&v, &spanning(1, 6, 1, 4)),
        Some(vec![(0, 2), (1, 2), (2, 1), (3, 1)])
    );
    // -N 2 -n 7: four and three.
    assert_eq!(
        free.try_place(&v, &spanning(1, 7, 2, 2)),
        Some(vec![(0, 4), (1, 3)])
    );
    // At least 3 nodes with 2 cores: a core on each of two.
    assert_eq!(
        free.try_place(&v, &spanning(1, 2, 3, 0)),
        Some(vec![(0, 1), (1, 1)])
    );
    // -N 1 -n 5 on nodes of 4 never fits.
    assert_eq!(free.try_place(&v, &spanning(1, 5, 1, 1)), None);
    // -N 2 --ntasks-per-node=2: two on each; -n 3 --ntasks-per-node=1:
    // one on each of three.
    let even = |cores, nodes| {
        let mut q = spanning(1, cores, nodes, nodes);
        if let Some(s) = q.nodes.as_mut() {
            s.even = true;
        }
        q
    };
    assert_eq!(free.try_place(&v, &even(4, 2)), Some(vec![(0, 2), (1, 2)]));
    assert_eq!(
        free.try_place(&v, &even(3, 3)),
        Some(vec![(0, 1), (1, 1), (2, 1)])
    );
    // -N 2 -n 3 -c 2: tasks go whole, two on the first node, one on the
    // second, as on Slurm.
    let tasks = Queued {
        nodes: Some(Span {
            least: 2,
            most: 2,
            task_cores: 2,
            even: false,
        }),
        ..job(1, 6, 100)
    };
    assert_eq!(free.try_place(&v, &tasks), Some(vec![(0, 4), (1, 2)]));
}

#[test]
fn tasks_of_several_cores_go_whole_on_a_node_without_a_node_count() {
    let v = view([4, 4, 4, 4], vec![], vec![]);
    let free = Free::new(&v);
    let tasks = |cores, task_cores| Queued {
        nodes: Some(Span {
            least: 0,
            most: 0,
            task_cores,
            even: false,
        }),
        ..job(1, cores, 100)
    };
    // -n 2 -c 3: three on each of two nodes, as on Slurm (not four and
    // two, which would split a task).
    assert_eq!(free.try_place(&v, &tasks(6, 3)), Some(vec![(0, 3), (1, 3)]));
    // -n 4 -c 2: packed, two tasks a node.
    assert_eq!(free.try_place(&v, &tasks(8, 2)), Some(vec![(0, 4), (1, 4)]));
    // -n 5 -c 3: four nodes hold four such tasks, not five.
    assert_eq!(free.try_place(&v, &tasks(15, 3)), None);
}

#[test]
fn a_node_count_takes_nodes_with_room_enough() {
    let v = view([3, 4, 0, 4], vec![], vec![]);
    let free = Free::new(&v);
    // -N 1 -n 4: packed it takes two nodes; on one, node 1 holds it.
    assert_eq!(
        free.try_place(&v, &spanning(1, 4, 1, 1)),
        Some(vec![(1, 4)])
    );
    // -N 2 -n 7: nodes 0 and 1 hold it, dealt as far as node 0 has room.
    assert_eq!(
        free.try_place(&v, &spanning(1, 7, 2, 2)),
        Some(vec![(0, 3), (1, 4)])
    );
    // -N 2 -n 8: 0 and 1 have 7 cores; 1 and 3 have 8.
    assert_eq!(
        free.try_place(&v, &spanning(1, 8, 2, 2)),
        Some(vec![(1, 4), (3, 4)])
    );
    // In a contiguous partition the busy node 2 breaks the run.
    let mut c = v.clone();
    Arc::make_mut(&mut c.partitions)[0].contiguous = true;
    let free = Free::new(&c);
    assert_eq!(free.try_place(&c, &spanning(1, 8, 2, 2)), None);
    assert_eq!(
        free.try_place(&c, &spanning(1, 7, 2, 2)),
        Some(vec![(0, 3), (1, 4)])
    );
}

#[test]
fn placement_takes_only_nodes_with_the_devices_free() {
    let mut v = view([4, 4, 4, 4], vec![], vec![]);
    v.nodes = vec![gpu_node(4, 1), node(4), gpu_node(4, 2), gpu_node(4, 0)];
    let free = Free::new(&v);
    // One GPU on each node it gets: nodes 0 and 2.
    assert_eq!(
        free.try_place(&v, &gpu_job(1, 6, 1, 10)),
        Some(vec![(0, 4), (2, 2)])
    );
    assert_eq!(
        free.try_place(&v, &gpu_job(1, 2, 2, 10)),
        Some(vec![(2, 2)])
    );
    assert_eq!(free.try_place(&v, &gpu_job(1, 9, 1, 10)), None);
    // Taking a job's devices leaves the others.
    let mut free = Free::new(&v);
    let alloc = free.place(&v, &gpu_job(1, 1, 2, 10)).unwrap();
    assert_eq!(alloc, vec![(2, 1)]);
    assert_eq!(free.node(2).free_gres[0], 0);
    assert_eq!(
        free.try_place(&v, &gpu_job(2, 1, 1, 10)),
        Some(vec![(0, 1)])
    );
    // On consecutive nodes only, a node without them breaks the run.
    Arc::make_mut(&mut v.partitions)[0].contiguous = true;
    let free = Free::new(&v);
    assert_eq!(free.try_place(&v, &gpu_job(1, 6, 1, 10)), None);
    assert_eq!(
        free.try_place(&v, &gpu_job(1, 4, 1, 10)),
        Some(vec![(0, 4)])
    );
}

#[test]
fn easy_backfills_nothing_that_would_hold_the_devices_the_head_waits_for() {
    // Node 0 has 2 GPUs and 2 free cores (a job without GPUs holds the
    // rest until 200 s). The head asks 4 cores and both GPUs of a node:
    // only node 0 will do, at 200 s. A long job asking one GPU fits now,
    // on node 0: it would hold a GPU past 200 s, so it must wait; a short
    // one, done by then, may go.
    let mut v = view(
        [2, 4, 4, 4],
        vec![running(9, 0, vec![(0, 2)], 200)],
        vec![
            gpu_job(1, 4, 2, 100),
            gpu_job(2, 1, 1, 1000),
            gpu_job(3, 1, 1, 50),
        ],
    );
    v.nodes[0] = gpu_node(2, 2);
    let started: Vec<u64> = EASY
        .decide(&v)
        .list
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![3]);
}

/// FCFS whose preemption ends its victims (`mode`: cancel or requeue).
fn fcfs_ending_victims(mode: Preemption) -> Standard {
    Standard {
        base: Base::Fcfs,
        preemption: mode,
    }
}

/// Two urgent jobs wait for the victims ended for them: the cores on
/// their way out are shared between them, so that neither ends another
/// job for cores the other already counts on.
#[test]
fn jobs_waiting_for_their_victims_share_the_cores_coming_free() {
    let mut v = view([0, 0, 0, 0], vec![], vec![]);
    v.active = Arc::new(vec![
        running(10, 0, vec![(0, 2)], 900),
        in_state(running(12, 0, vec![(0, 2)], 900), ActiveState::Ending, 5),
        in_state(running(11, 0, vec![(1, 4)], 900), ActiveState::Ending, 5),
        running(13, 0, vec![(2, 4)], 900),
        running(14, 0, vec![(3, 4)], 900),
    ]);
    queue_urgent(&mut v, vec![0, 1, 2, 3]);
    v.queue = Arc::new(vec![
        Queued {
            partition: 1,
            ..job(1, 4, 100)
        },
        Queued {
            partition: 1,
            ..job(2, 2, 100)
        },
    ]);
    for mode in [Preemption::Cancel, Preemption::Requeue] {
        let d = fcfs_ending_victims(mode).decide(&v);
        assert_eq!(d.list, [], "{mode:?}: both wait, no one more ends");
    }
}

#[test]
fn a_victim_that_ends_gives_back_its_gpus_and_one_suspended_keeps_them() {
    // Node 0 has the only GPU, held by low job 10 on 2 of its cores; low
    // jobs 11-13 fill nodes 1-3, which have none. An urgent job of 2 cores
    // and a GPU fits only once job 10 is gone.
    let mut v = view([2, 0, 0, 0], vec![], vec![]);
    v.nodes[0] = gpu_node(2, 0);
    let mut holder = running(10, 0, vec![(0, 2)], 900);
    holder.gres = [1, 0, 0, 0];
    v.active = Arc::new(vec![
        holder,
        running(11, 0, vec![(1, 4)], 900),
        running(12, 0, vec![(2, 4)], 900),
        running(13, 0, vec![(3, 4)], 900),
    ]);
    queue_urgent(&mut v, vec![0, 1, 2, 3]);
    v.queue = Arc::new(vec![Queued {
        partition: 1,
        ..gpu_job(1, 2, 1, 100)
    }]);
    for mode in [Preemption::Cancel, Preemption::Requeue] {
        let d = fcfs_ending_victims(mode).decide(&v);
        assert_eq!(
            d.list,
            [Decision::Preempt {
                job: 10,
                requeue: mode == Preemption::Requeue
            }],
            "{mode:?}: the GPU's holder ends, and no one else"
        );
    }
    // Suspended, job 10 would keep its GPU: no victim frees one.
    assert_eq!(PREEMPT.decide(&v).list, []);
    // Once it is ending, the next pass counts its GPU as coming: the
    // urgent job waits for it and ends no one more.
    Arc::make_mut(&mut v.active)[0].state = ActiveState::Ending;
    let d = fcfs_ending_victims(Preemption::Cancel).decide(&v);
    assert_eq!(d.list, [], "it waits for the GPU on its way back");
}

#[test]
fn an_ending_job_that_a_policy_suspended_gives_back_no_cores() {
    // Low job 10 was suspended by time-slicing on node 0, where low job 11
    // now runs, and is being cancelled: its cores are free already (11
    // holds them), so its end frees none. Low jobs 12-14 fill nodes 1-3.
    // An urgent job of 4 cores must end one of them, not wait for 10.
    let mut v = view([0, 0, 0, 0], vec![], vec![]);
    v.active = Arc::new(vec![
        in_state(
            running(10, 0, vec![(0, 4)], 900),
            ActiveState::EndingSuspended,
            90,
        ),
        running(11, 0, vec![(0, 4)], 900),
        running(12, 0, vec![(1, 4)], 900),
        running(13, 0, vec![(2, 4)], 900),
        running(14, 0, vec![(3, 4)], 900),
    ]);
    queue_urgent(&mut v, vec![0, 1, 2, 3]);
    for mode in [Preemption::Cancel, Preemption::Requeue] {
        let d = fcfs_ending_victims(mode).decide(&v);
        assert_eq!(
            d.list.len(),
            1,
            "{mode:?}: one running job ends for it: {:?}",
            d.list
        );
        assert!(
            matches!(d.list[0], Decision::Preempt { job, .. } if job != 10),
            "{mode:?}: {:?}",
            d.list
        );
    }
    // Ending while it still held its cores, 10 frees them: the urgent job
    // waits for it and ends no one.
    Arc::make_mut(&mut v.active)[0].state = ActiveState::Ending;
    Arc::make_mut(&mut v.active).remove(1);
    let d = fcfs_ending_victims(Preemption::Cancel).decide(&v);
    assert_eq!(d.list, [], "it waits for job 10's cores");
}

/// A job that names nodes: all of them, and more from the first named
/// up, then down, as Slurm adds to them; never a node it excludes.
#[test]
fn named_nodes_are_all_taken_and_excluded_ones_never() {
    let named = |id: u64, cores: u32, least: u32, required: Vec<usize>, excluded: u64| {
        let mut q = job(id, cores, 10);
        q.nodes = (least > 0).then_some(Span {
            least,
            most: least,
            task_cores: 1,
            even: false,
        });
        q.within = Some(Arc::new(Within {
            required,
            excluded: vec![excluded],
        }));
        q
    };
    let start = |q: Queued| {
        let d = EASY.decide(&view([4, 4, 4, 4], vec![], vec![q]));
        match d.list.first() {
            Some(Decision::Start { alloc, .. }) => alloc.clone(),
            other => panic!("{other:?}"),
        }
    };
    // -w node4 -N 2: node[3-4]; -w node2 -N 3: node[2-4].
    assert_eq!(start(named(1, 2, 2, vec![3], 0)), vec![(2, 1), (3, 1)]);
    assert_eq!(
        start(named(1, 3, 3, vec![1], 0)),
        vec![(1, 1), (2, 1), (3, 1)]
    );
    // -w node[1,3] -N 3 fills the gap; -w node2 -n 6 is 4 and 2.
    assert_eq!(
        start(named(1, 3, 3, vec![0, 2], 0)),
        vec![(0, 1), (1, 1), (2, 1)]
    );
    assert_eq!(start(named(1, 6, 0, vec![1], 0)), vec![(1, 4), (2, 2)]);
    // -x node[1-2] -N 2: node[3-4].
    assert_eq!(start(named(1, 2, 2, vec![], 0b11)), vec![(2, 1), (3, 1)]);
    // -w node1 -x node2 -n 8: node1 and the next it may have.
    assert_eq!(start(named(1, 8, 0, vec![0], 0b10)), vec![(0, 4), (2, 4)]);
    // A node named that is full: it waits.
    let v = view([4, 0, 4, 4], vec![], vec![named(1, 1, 0, vec![1], 0)]);
    assert!(EASY.decide(&v).list.is_empty());
}

/// A job waiting for a drained node it names does not hold up the queue
/// behind it, under either base policy.
#[test]
fn a_job_naming_a_drained_node_blocks_no_one() {
    let mut head = job(1, 1, 10);
    head.within = Some(Arc::new(Within {
        required: vec![1],
        excluded: Vec::new(),
    }));
    let mut v = view([4, 4, 4, 4], vec![], vec![head, job(2, 16, 10)]);
    v.nodes[1].usable = false;
    // Job 2 asks all 16 cores: with node 2 down it cannot start either,
    // so ask 12 instead.
    Arc::make_mut(&mut v.queue)[1].cores = 12;
    for policy in [FCFS, EASY] {
        let d = policy.decide(&v);
        assert_eq!(
            d.list,
            [Decision::Start {
                job: 2,
                alloc: vec![(0, 4), (2, 4), (3, 4)]
            }]
        );
    }
}

/// EASY reserves for a head that names a busy node that node alone: a
/// long job behind it starts elsewhere, as Slurm's backfill starts it.
#[test]
fn a_head_naming_a_busy_node_reserves_that_node_alone() {
    let mut head = job(1, 1, 10);
    head.within = Some(Arc::new(Within {
        required: vec![0],
        excluded: Vec::new(),
    }));
    // Node 0 is full until t = 1000 s; the long job would outlast that.
    let busy = running(9, 0, vec![(0, 4)], 1000);
    let v = view([0, 4, 4, 4], vec![busy], vec![head, job(2, 4, 5000)]);
    let d = EASY.decide(&v);
    assert_eq!(
        d.list,
        [Decision::Start {
            job: 2,
            alloc: vec![(1, 4)]
        }]
    );
    // A head asking memory may need more than its named nodes' cores
    // say: it keeps its whole partition, and the long job waits.
    let mut head = job(1, 1, 10);
    head.mem_per_cpu_mb = 100;
    head.within = Some(Arc::new(Within {
        required: vec![0],
        excluded: Vec::new(),
    }));
    let busy = running(9, 0, vec![(0, 4)], 1000);
    let v = view([0, 4, 4, 4], vec![busy], vec![head, job(2, 4, 5000)]);
    assert!(EASY.decide(&v).list.is_empty());
    // A head of three cores on node 0 alone (`-w node1 -N 1`): one that
    // would land on node 0 waits, as it would delay the head.
    let mut head = job(1, 3, 10);
    head.nodes = Some(Span {
        least: 1,
        most: 1,
        task_cores: 1,
        even: false,
    });
    head.within = Some(Arc::new(Within {
        required: vec![0],
        excluded: Vec::new(),
    }));
    let busy = running(9, 0, vec![(0, 2)], 1000);
    let v = view([2, 4, 4, 4], vec![busy], vec![head, job(2, 1, 5000)]);
    let d = EASY.decide(&v);
    assert!(d.list.is_empty(), "{:?}", d.list);
}

/// Expected starts, as Slurm's backfill plans them for `squeue --start`:
/// the queue run forward as running jobs end at their limits; a job that
/// can start now starts now; none beyond a day.
#[test]
fn expected_starts_follow_the_policy_as_jobs_end() {
    // Four nodes full until t = 400 s (now is 100 s): jobs of 4, 8 and
    // 2 cores (estimates 600 s) start then, on nodes 0, 1-2 and 3; one
    // of 12 cores after the first two of them end, at 1000 s.
    let full: Vec<Active> = (0..4)
        .map(|n| running(10 + n as u64, 0, vec![(n, 4)], 400))
        .collect();
    let queue = vec![
        job(1, 4, 600),
        job(2, 8, 600),
        job(3, 2, 600),
        job(4, 12, 600),
    ];
    let v = view([0, 0, 0, 0], full, queue);
    let starts = forecast::forecast(&EASY, v);
    let at = |s: i64| s * S;
    assert_eq!(
        starts,
        [
            forecast::Start {
                job: 1,
                at_ns: at(400),
                alloc: vec![(0, 4)]
            },
            forecast::Start {
                job: 2,
                at_ns: at(400),
                alloc: vec![(1, 4), (2, 4)]
            },
            forecast::Start {
                job: 3,
                at_ns: at(400),
                alloc: vec![(3, 2)]
            },
            forecast::Start {
                job: 4,
                at_ns: at(1000),
                alloc: vec![(0, 4), (1, 4), (2, 4)]
            },
        ]
    );
    // A job that fits now starts now; one behind a job running for a
    // year has no expected start.
    let year = 365 * 24 * 3600;
    let v = view(
        [4, 0, 0, 0],
        (1..4)
            .map(|n| running(10 + n as u64, 0, vec![(n, 4)], year))
            .collect(),
        vec![job(1, 4, 10), job(2, 8, 10)],
    );
    let starts = forecast::forecast(&EASY, v);
    assert_eq!(
        starts,
        [forecast::Start {
            job: 1,
            at_ns: at(100),
            alloc: vec![(0, 4)]
        }]
    );
}

/// The plan stops at a pass that would suspend or preempt (those jobs
/// have no expected start), and a job being ended frees its cores at once.
#[test]
fn expected_starts_stop_at_a_suspension_and_count_ending_jobs_as_gone() {
    struct Suspends;
    impl Policy for Suspends {
        fn decide(&self, _: &View) -> Decisions {
            Decisions {
                list: vec![
                    Decision::Suspend(9),
                    Decision::Start {
                        job: 1,
                        alloc: vec![(0, 4)],
                    },
                ],
                ..Default::default()
            }
        }
    }
    let v = view(
        [0, 4, 4, 4],
        vec![running(9, 0, vec![(0, 4)], 400)],
        vec![job(1, 4, 10)],
    );
    assert!(forecast::forecast(&Suspends, v).is_empty());
    let mut ending = running(9, 0, vec![(0, 4)], 400);
    ending.state = ActiveState::Ending;
    ending.expected_end_ns = i64::MAX;
    let v = view([0, 0, 0, 0], vec![ending], vec![job(1, 4, 10)]);
    assert_eq!(
        forecast::forecast(&EASY, v),
        [forecast::Start {
            job: 1,
            at_ns: 100 * S,
            alloc: vec![(0, 4)]
        }]
    );
}
