//! Scheduling policies: pure functions from a [`Snapshot`] of the cluster
//! to the jobs to start now and where. No I/O, no clock, no shared state:
//! the same code can drive the emulation and a simulation, and tests build
//! snapshots by hand.
//!
//! Placement is first fit over a partition's usable nodes: a job of `c`
//! cores takes whatever free cores (and the memory they need) nodes have,
//! in node order, until it has `c`. A node is never given more cores or
//! memory than it has free.

/// A node as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeNode {
    pub cpus: u32,
    pub mem_mb: u64,
    /// Up (agent connected) and not drained.
    pub usable: bool,
}

/// A pending job, in queue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub job: u64,
    pub partition: usize,
    pub cores: u32,
    pub mem_per_cpu_mb: u64,
    /// How long it is expected to run: its wall-time limit, or its run
    /// time when it has none (nanoseconds).
    pub estimate_ns: u64,
}

/// A job holding resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub job: u64,
    /// When it is expected to release its resources (same clock as `now`).
    pub expected_end_ns: i64,
    /// (node, cores) it holds.
    pub alloc: Vec<(usize, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub now_ns: i64,
    pub nodes: Vec<FreeNode>,
    /// Node indices of each partition.
    pub partitions: Vec<Vec<usize>>,
    /// Pending jobs, highest priority first, then oldest first.
    pub queue: Vec<Queued>,
    pub running: Vec<Running>,
}

/// Start `job` on these (node, cores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub job: u64,
    pub alloc: Vec<(usize, u32)>,
}

/// The policies clemu knows.
pub trait Policy {
    fn schedule(&self, snapshot: &Snapshot) -> Vec<Start>;
}

/// Strict first come, first served: start jobs in queue order while they
/// fit; the first that does not fit blocks everything behind it.
pub struct Fcfs;

/// EASY backfilling: like FCFS, but once the queue's head is blocked it
/// gets a reservation (the earliest time enough cores free up, from the
/// running jobs' expected ends), and a later job may start now only if it
/// cannot delay that reservation: it ends before the reserved start, or it
/// uses only cores the head will not need then.
pub struct Easy;

impl Policy for Fcfs {
    fn schedule(&self, s: &Snapshot) -> Vec<Start> {
        let mut free = Free::new(s);
        let mut starts = Vec::new();
        for q in &s.queue {
            match free.place(s, q) {
                Some(alloc) => starts.push(Start { job: q.job, alloc }),
                None => break,
            }
        }
        starts
    }
}

impl Policy for Easy {
    fn schedule(&self, s: &Snapshot) -> Vec<Start> {
        let mut free = Free::new(s);
        let mut starts = Vec::new();
        // Expected ends of the jobs started before the head blocked, which
        // the head's reservation must count as releases.
        let mut ends = Vec::new();
        let mut reservation: Option<Reservation> = None;
        for q in &s.queue {
            match &mut reservation {
                None => match free.place(s, q) {
                    Some(alloc) => {
                        ends.push(end_of(s, q));
                        starts.push(Start { job: q.job, alloc });
                    }
                    None => reservation = Some(Reservation::for_head(s, &free, q, &starts, &ends)),
                },
                Some(r) => {
                    // Cheap test first: most of a long queue does not fit.
                    if !free.might_fit(q) {
                        continue;
                    }
                    let ends_in_time = end_of(s, q) <= r.shadow_ns;
                    let Some(alloc) = free.try_place(s, q) else {
                        continue;
                    };
                    let on_head_nodes: u32 = alloc
                        .iter()
                        .filter(|(n, _)| r.head_nodes[*n])
                        .map(|(_, c)| c)
                        .sum();
                    if ends_in_time || on_head_nodes <= r.extra {
                        if !ends_in_time {
                            r.extra -= on_head_nodes;
                        }
                        free.take(s, q, &alloc);
                        starts.push(Start { job: q.job, alloc });
                    }
                }
            }
        }
        starts
    }
}

/// When `q` would end if it started now.
fn end_of(s: &Snapshot, q: &Queued) -> i64 {
    s.now_ns
        .saturating_add(q.estimate_ns.min(i64::MAX as u64) as i64)
}

/// The blocked head's reserved start and what is spare at that time.
struct Reservation {
    shadow_ns: i64,
    /// Cores on the head's partition free at the shadow time beyond what
    /// the head needs.
    extra: u32,
    head_nodes: Vec<bool>,
}

impl Reservation {
    fn for_head(
        s: &Snapshot,
        free: &Free,
        head: &Queued,
        started: &[Start],
        ends: &[i64],
    ) -> Reservation {
        let mut head_nodes = vec![false; s.nodes.len()];
        for &n in &s.partitions[head.partition] {
            if s.nodes[n].usable {
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
        let mut releases: Vec<(i64, u32)> = s
            .running
            .iter()
            .map(|r| (r.expected_end_ns, on_head(&r.alloc)))
            .collect();
        for (st, &end) in started.iter().zip(ends) {
            releases.push((end, on_head(&st.alloc)));
        }
        releases.sort_unstable();
        let mut avail = free.partition_free[head.partition];
        let mut shadow_ns = i64::MAX;
        let mut extra = 0;
        for (end, cores) in releases {
            avail += u64::from(cores);
            if avail >= u64::from(head.cores) {
                shadow_ns = end.max(s.now_ns);
                extra = (avail - u64::from(head.cores)).min(u64::from(u32::MAX)) as u32;
                break;
            }
        }
        Reservation {
            shadow_ns,
            extra,
            head_nodes,
        }
    }
}

/// Free resources during one pass, as jobs are placed.
struct Free {
    nodes: Vec<FreeNode>,
    /// Free cores on usable nodes of each partition: lets a job that
    /// cannot fit be turned down without looking at any node.
    partition_free: Vec<u64>,
    node_partitions: Vec<Vec<usize>>,
}

impl Free {
    fn new(s: &Snapshot) -> Free {
        let mut node_partitions = vec![Vec::new(); s.nodes.len()];
        let partition_free = s
            .partitions
            .iter()
            .enumerate()
            .map(|(p, nodes)| {
                nodes
                    .iter()
                    .map(|&n| {
                        node_partitions[n].push(p);
                        if s.nodes[n].usable {
                            u64::from(s.nodes[n].cpus)
                        } else {
                            0
                        }
                    })
                    .sum()
            })
            .collect();
        Free {
            nodes: s.nodes.clone(),
            partition_free,
            node_partitions,
        }
    }

    fn might_fit(&self, q: &Queued) -> bool {
        self.partition_free
            .get(q.partition)
            .is_some_and(|&f| f >= u64::from(q.cores))
    }

    /// Where `q` would go now, without taking anything.
    fn try_place(&self, s: &Snapshot, q: &Queued) -> Option<Vec<(usize, u32)>> {
        if q.cores == 0 || !self.might_fit(q) {
            return None;
        }
        let mut need = q.cores;
        let mut alloc = Vec::new();
        for &n in &s.partitions[q.partition] {
            let node = &self.nodes[n];
            if !node.usable || node.cpus == 0 {
                continue;
            }
            let by_mem = node
                .mem_mb
                .checked_div(q.mem_per_cpu_mb)
                .unwrap_or(u64::MAX)
                .min(u64::from(u32::MAX)) as u32;
            let take = node.cpus.min(need).min(by_mem);
            if take > 0 {
                alloc.push((n, take));
                need -= take;
                if need == 0 {
                    return Some(alloc);
                }
            }
        }
        None
    }

    fn take(&mut self, _s: &Snapshot, q: &Queued, alloc: &[(usize, u32)]) {
        for &(n, c) in alloc {
            let node = &mut self.nodes[n];
            node.cpus -= c;
            node.mem_mb -= u64::from(c) * q.mem_per_cpu_mb;
            for &p in &self.node_partitions[n] {
                self.partition_free[p] -= u64::from(c);
            }
        }
    }

    fn place(&mut self, s: &Snapshot, q: &Queued) -> Option<Vec<(usize, u32)>> {
        let alloc = self.try_place(s, q)?;
        self.take(s, q, &alloc);
        Some(alloc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn node(cpus: u32) -> FreeNode {
        FreeNode {
            cpus,
            mem_mb: 1 << 20,
            usable: true,
        }
    }

    fn job(id: u64, cores: u32, estimate_s: u64) -> Queued {
        Queued {
            job: id,
            partition: 0,
            cores,
            mem_per_cpu_mb: 0,
            estimate_ns: estimate_s * S as u64,
        }
    }

    /// `free` cores now on 4 nodes of 4 cores (16 in all).
    fn snapshot(free: [u32; 4], running: Vec<Running>, queue: Vec<Queued>) -> Snapshot {
        Snapshot {
            now_ns: 100 * S,
            nodes: free.iter().map(|&c| node(c)).collect(),
            partitions: vec![vec![0, 1, 2, 3]],
            queue,
            running,
        }
    }

    fn started(starts: &[Start]) -> Vec<u64> {
        starts.iter().map(|s| s.job).collect()
    }

    #[test]
    fn fcfs_starts_in_order_and_stops_at_the_first_that_does_not_fit() {
        let s = snapshot(
            [4, 4, 0, 0],
            vec![],
            vec![job(1, 4, 10), job(2, 2, 10), job(3, 8, 10), job(4, 1, 10)],
        );
        let starts = Fcfs.schedule(&s);
        assert_eq!(started(&starts), [1, 2]);
        assert_eq!(starts[0].alloc, [(0, 4)]);
        assert_eq!(starts[1].alloc, [(1, 2)]);
    }

    #[test]
    fn easy_backfills_a_small_job_that_ends_before_the_reservation() {
        // 8 cores busy until t = 200 s (two jobs), 8 free. The head wants 12:
        // reserved at 200 s, with 4 spare then.
        let running = vec![
            Running {
                job: 10,
                expected_end_ns: 200 * S,
                alloc: vec![(2, 4)],
            },
            Running {
                job: 11,
                expected_end_ns: 300 * S,
                alloc: vec![(3, 4)],
            },
        ];
        let s = snapshot(
            [4, 4, 0, 0],
            running,
            vec![
                job(1, 16, 500), // head: needs all 16, reserved at 300 s, 0 spare
                job(2, 8, 150),  // ends at 250 <= 300: backfilled
                job(3, 1, 10),   // nothing left now
            ],
        );
        let starts = Easy.schedule(&s);
        assert_eq!(started(&starts), [2]);
    }

    #[test]
    fn easy_does_not_backfill_a_job_that_would_delay_the_head() {
        let running = vec![Running {
            job: 10,
            expected_end_ns: 200 * S,
            alloc: vec![(2, 4), (3, 4)],
        }];
        let s = snapshot(
            [4, 4, 0, 0],
            running,
            // Head needs 16: reserved at 200 s with nothing spare. Job 2 fits
            // now but runs to 400 s: it would delay the head.
            vec![job(1, 16, 500), job(2, 2, 300)],
        );
        assert!(Easy.schedule(&s).is_empty());
        // FCFS would not start it either; with a short run time EASY does.
        let s = snapshot(
            [4, 4, 0, 0],
            vec![Running {
                job: 10,
                expected_end_ns: 200 * S,
                alloc: vec![(2, 4), (3, 4)],
            }],
            vec![job(1, 16, 500), job(2, 2, 100)],
        );
        assert_eq!(started(&Easy.schedule(&s)), [2]);
    }

    #[test]
    fn easy_backfills_long_jobs_into_cores_the_head_will_not_need() {
        let running = vec![Running {
            job: 10,
            expected_end_ns: 200 * S,
            alloc: vec![(2, 4), (3, 4)],
        }];
        let s = snapshot(
            [4, 4, 0, 0],
            running,
            // Head needs 12: reserved at 200 s with 4 spare. Two long 2-core
            // jobs fit in the spare 4; a third long one would not.
            vec![
                job(1, 12, 500),
                job(2, 2, 900),
                job(3, 2, 900),
                job(4, 2, 900),
            ],
        );
        assert_eq!(started(&Easy.schedule(&s)), [2, 3]);
    }

    #[test]
    fn memory_limits_placement() {
        let mut s = snapshot([4, 4, 4, 4], vec![], vec![]);
        s.nodes[0].mem_mb = 1000;
        s.nodes[1].mem_mb = 4000;
        s.queue = vec![Queued {
            mem_per_cpu_mb: 1000,
            ..job(1, 5, 10)
        }];
        let starts = Fcfs.schedule(&s);
        // Node 0 has memory for 1 core, node 1 for 4.
        assert_eq!(starts[0].alloc, [(0, 1), (1, 4)]);
    }

    #[test]
    fn unusable_nodes_get_nothing() {
        let mut s = snapshot([4, 4, 4, 4], vec![], vec![job(1, 8, 10)]);
        s.nodes[0].usable = false;
        assert_eq!(Fcfs.schedule(&s)[0].alloc, [(1, 4), (2, 4)]);
    }

    /// Property over many generated snapshots: whatever either policy
    /// decides never gives a node more cores or memory than it has free,
    /// places each job once, with exactly its cores.
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
            let nodes: Vec<FreeNode> = (0..n)
                .map(|_| FreeNode {
                    cpus: rnd(17) as u32,
                    mem_mb: rnd(64_000),
                    usable: rnd(5) != 0,
                })
                .collect();
            let queue: Vec<Queued> = (0..rnd(30))
                .map(|j| Queued {
                    job: j,
                    partition: rnd(2) as usize,
                    cores: 1 + rnd(40) as u32,
                    mem_per_cpu_mb: rnd(3) * 1000,
                    estimate_ns: rnd(1000) * S as u64,
                })
                .collect();
            let running = (0..rnd(5))
                .map(|j| Running {
                    job: 100 + j,
                    expected_end_ns: (rnd(1000) as i64) * S,
                    alloc: vec![(rnd(n as u64) as usize, 1 + rnd(8) as u32)],
                })
                .collect();
            let s = Snapshot {
                now_ns: 10 * S,
                partitions: vec![(0..n).collect(), (0..n).filter(|i| i % 2 == 0).collect()],
                nodes,
                queue,
                running,
            };
            for starts in [Fcfs.schedule(&s), Easy.schedule(&s)] {
                let mut cpus: Vec<u64> = vec![0; n];
                let mut mem: Vec<u64> = vec![0; n];
                let mut seen = std::collections::HashSet::new();
                for st in &starts {
                    assert!(seen.insert(st.job), "job {} placed twice", st.job);
                    let q = s.queue.iter().find(|q| q.job == st.job).unwrap();
                    let total: u32 = st.alloc.iter().map(|(_, c)| c).sum();
                    assert_eq!(total, q.cores);
                    for &(node, c) in &st.alloc {
                        assert!(s.partitions[q.partition].contains(&node));
                        assert!(s.nodes[node].usable);
                        cpus[node] += u64::from(c);
                        mem[node] += u64::from(c) * q.mem_per_cpu_mb;
                    }
                }
                for i in 0..n {
                    assert!(
                        cpus[i] <= u64::from(s.nodes[i].cpus),
                        "cpus overbooked on {i}"
                    );
                    assert!(mem[i] <= s.nodes[i].mem_mb, "memory overbooked on {i}");
                }
            }
        }
    }
}
