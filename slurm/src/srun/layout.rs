//! Where a step's tasks go among its job's nodes, as Slurm 22.05's srun
//! lays them out inside an allocation (each rule measured on it, 4-core
//! nodes; the cases are the tests below).
//!
//! - **How many nodes**: `-N` (the most of a range), else the job's, at
//!   least as many as `-w` names; no more than its tasks, with Slurm's
//!   warning (srun's own `_opt_verify`, as is `--ntasks-per-node`, kept
//!   only when the tasks over the least nodes come to it).
//! - **Which**: those `-w` names (the first so many, with Slurm's error
//!   line when `-N` allows fewer), then the job's others in its order,
//!   never one `-x` names; in the job's order.
//! - **How many tasks on each**: no more tasks' cores (`-c` each) than
//!   the step's nodes hold in the job; dealt one per node in turn, each
//!   node taking what its cores hold (one at least), nor more than
//!   `--ntasks-per-node`, the rest then one per node in turn; numbered
//!   node by node.
//!
//! What runs where is only said: every task runs on the host of the
//! job's script, as children of srun. A task is told its node
//! (`SLURMD_NODENAME`, `SLURM_NODEID`) as it would be on Slurm.

/// The job a step runs in, from its script's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its nodes, in order (`SLURM_JOB_NODELIST`).
    pub nodes: Vec<String>,
    /// Its cores on each (`SLURM_JOB_CPUS_PER_NODE`).
    pub cpus: Vec<u32>,
}

/// What the step asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    /// `-N`: the least and most nodes; `None` (or `-N 0`): the job's.
    pub nodes: Option<(u32, u32)>,
    /// `-n`, else the job's `SLURM_NTASKS`; `None`: a task per node
    /// (times `--ntasks-per-node`).
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub tasks_per_node: Option<u32>,
    pub cpus_per_task: u32,
    /// `-w`, in the order given.
    pub nodelist: Vec<String>,
    /// `-x`.
    pub exclude: Vec<String>,
}

/// The most tasks one step may have: more could not all be started on
/// one host anyway, and a count from a hand-set environment must not
/// make srun allocate without bound.
pub const MAX_TASKS: u32 = 1 << 20;

/// The step's nodes, in the job's order: each node's index in the job,
/// and its tasks there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub nodes: Vec<(usize, u32)>,
    /// Slurm's warnings, said before the step runs.
    pub warnings: Vec<String>,
}

/// Why the step cannot be laid out: Slurm's lines (`srun: error: ...`
/// each) and exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub lines: Vec<String>,
    pub code: u8,
}

impl Layout {
    /// Each task's node (its index in the step) and its number on that
    /// node (`SLURM_NODEID`, `SLURM_LOCALID`), task by task.
    pub fn tasks(&self) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for (i, &(_, n)) in self.nodes.iter().enumerate() {
            out.extend((0..n).map(|local| (i, local)));
        }
        out
    }

    /// The tasks on each of the step's nodes, folded as Slurm folds them
    /// (`SLURM_STEP_TASKS_PER_NODE`: `3(x2),1`).
    pub fn tasks_per_node(&self) -> String {
        formats::nodeset::fold_counts(self.nodes.iter().map(|&(_, n)| n))
    }
}

/// Lays out the step `ask` in job `job_id`, whose nodes and cores are
/// `job`, as Slurm's srun and controller would.
pub fn lay_out(job: &Job, job_id: &str, ask: &Ask) -> Result<Layout, Refused> {
    let refuse = |line: String| Refused {
        lines: vec![line],
        code: 1,
    };
    let not_available = || {
        refuse(format!(
            "Unable to create step for job {job_id}: Requested node configuration is not \
             available"
        ))
    };
    let too_many = || {
        refuse(format!(
            "Unable to create step for job {job_id}: More processors requested than permitted"
        ))
    };
    let index: std::collections::HashMap<&str, usize> = job
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut is_named = vec![false; job.nodes.len()];
    let mut named = Vec::new();
    for name in &ask.nodelist {
        let i = *index.get(name.as_str()).ok_or_else(not_available)?;
        if !std::mem::replace(&mut is_named[i], true) {
            named.push(i);
        }
    }
    let mut excluded = vec![false; job.nodes.len()];
    for i in ask.exclude.iter().filter_map(|n| index.get(n.as_str())) {
        excluded[*i] = true;
    }
    if named.iter().any(|&i| excluded[i]) {
        return Err(not_available());
    }
    let open: Vec<usize> = (0..job.nodes.len()).filter(|&i| !excluded[i]).collect();
    if open.is_empty() {
        return Err(refuse("Hostlist is empty!  Can't run job.".into()));
    }
    // Slurm's srun's own reading of its options (`_opt_verify`): the
    // job's node count unless -N; -w beyond -N's most cut; at least
    // the nodes -w names; fewer tasks than that, fewer nodes.
    let mut warnings = Vec::new();
    let all = job.nodes.len() as u32;
    let (mut least, mut most) = ask.nodes.unwrap_or((all, all));
    if ask.nodes.is_some() && named.len() > most as usize {
        warnings.push(format!(
            "error: Required nodelist includes more nodes than permitted by max-node count \
             ({} > {most}). Eliminating nodes from the nodelist.",
            named.len()
        ));
        named.truncate(most as usize);
    }
    least = least.max(named.len() as u32);
    let mut tasks_per_node = ask.tasks_per_node;
    let ntasks = match ask.ntasks {
        Some(n) => {
            most = most.min(n);
            if n < least {
                warnings.push(format!(
                    "Warning: can't run {n} processes on {least} nodes, setting nnodes to {n}"
                ));
                least = n;
                most = most.max(least);
                // Slurm's srun has sorted its list by now: the first in
                // the job's order are kept.
                named.sort_unstable();
                named.truncate(n as usize);
            }
            if let Some(t) = tasks_per_node.filter(|&t| least > 0 && t != n / least) {
                if n > t {
                    warnings.push(format!(
                        "Warning: can't honor --ntasks-per-node set to {t} which doesn't match \
                         the requested tasks {n} with the number of requested nodes {least}. \
                         Ignoring --ntasks-per-node."
                    ));
                }
                tasks_per_node = None;
            }
            n
        }
        None => least.saturating_mul(tasks_per_node.unwrap_or(1)),
    }
    .max(1);
    let have = open.len() as u32;
    if least > have {
        let mut lines = Vec::new();
        if excluded.contains(&true) {
            lines.push("Are required nodes explicitly excluded?".into());
        }
        lines.push(format!("Only allocated {have} nodes asked for {least}"));
        return Err(Refused { lines, code: 1 });
    }
    let count = most.min(have).max(least).max(1) as usize;
    let mut chosen = named;
    let mut taken = vec![false; job.nodes.len()];
    for &i in &chosen {
        taken[i] = true;
    }
    for &i in &open {
        if chosen.len() >= count {
            break;
        }
        if !taken[i] {
            taken[i] = true;
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    // No more tasks' cores than the step's nodes hold in the job.
    let cpt = ask.cpus_per_task.max(1);
    let cores_of = |i: usize| job.cpus.get(i).copied().unwrap_or(1);
    let cores: u64 = chosen.iter().map(|&i| u64::from(cores_of(i))).sum();
    if u64::from(ntasks) * u64::from(cpt) > cores || ntasks > MAX_TASKS {
        return Err(too_many());
    }
    // Dealt in turns, a task to each node whose cores hold one more (a
    // node holds one at least), as far as `--ntasks-per-node` lets it;
    // what is left then, one to each in turn.
    let room: Vec<u32> = chosen
        .iter()
        .map(|&i| {
            let fits = (cores_of(i) / cpt).max(1);
            tasks_per_node.map_or(fits, |t| fits.min(t.max(1)))
        })
        .collect();
    let tasks = deal(ntasks, &room);
    // A node with no task is no node of the step.
    let nodes = chosen
        .into_iter()
        .zip(tasks)
        .filter(|&(_, t)| t > 0)
        .collect();
    Ok(Layout { nodes, warnings })
}

/// `n` tasks dealt in turns to nodes that take at most `room` each (the
/// first nodes first in each turn), then what is left one to each in
/// turn: counted, not dealt one by one.
fn deal(n: u32, room: &[u32]) -> Vec<u32> {
    let n = u64::from(n);
    let upto = |level: u64| -> u64 { room.iter().map(|&r| u64::from(r).min(level)).sum() };
    let full: u64 = room.iter().map(|&r| u64::from(r)).sum();
    if full <= n {
        // Every node full, the rest over them all.
        let extra = n - full;
        let k = room.len().max(1) as u64;
        return room
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let more = extra / k + u64::from((i as u64) < extra % k);
                u32::try_from(u64::from(r) + more).unwrap_or(u32::MAX)
            })
            .collect();
    }
    // The most whole turns that do not deal more than n.
    let (mut lo, mut hi) = (0u64, u64::from(room.iter().copied().max().unwrap_or(0)));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if upto(mid) <= n {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut left = n - upto(lo);
    room.iter()
        .map(|&r| {
            let mut t = u64::from(r).min(lo);
            if left > 0 && u64::from(r) > lo {
                t += 1;
                left -= 1;
            }
            t as u32
        })
        .collect()
}

/// `-N`'s value as Slurm's srun reads it (`2`, `1-3`, `0`: the job's),
/// or its error line and exit status.
pub fn node_count(text: &str) -> Result<Option<(u32, u32)>, Refused> {
    let bad = || Refused {
        lines: vec![format!("\"{text}\" is not a valid node count")],
        code: 255,
    };
    let (least, most) = match text.split_once('-') {
        Some((a, b)) => (
            a.parse::<u32>().map_err(|_| bad())?,
            b.parse::<u32>().map_err(|_| bad())?,
        ),
        None => {
            let n = text.parse::<u32>().map_err(|_| bad())?;
            (n, n)
        }
    };
    if most < least {
        return Err(Refused {
            lines: vec![format!(
                "Maximum node count {most} is less than minimum node count {least}"
            )],
            code: 255,
        });
    }
    Ok((least > 0).then_some((least, most)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cpus: &[u32]) -> Job {
        Job {
            nodes: (1..=cpus.len()).map(|i| format!("node{i}")).collect(),
            cpus: cpus.to_vec(),
        }
    }

    fn ask(ntasks: u32) -> Ask {
        Ask {
            ntasks: Some(ntasks),
            cpus_per_task: 1,
            ..Ask::default()
        }
    }

    fn names(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    /// The step's nodes (1-based, as named) and its tasks on each.
    fn placed(job: &Job, a: &Ask) -> Vec<(usize, u32)> {
        lay_out(job, "7", a)
            .unwrap()
            .nodes
            .into_iter()
            .map(|(i, t)| (i + 1, t))
            .collect()
    }

    fn refused(job: &Job, a: &Ask) -> Vec<String> {
        lay_out(job, "7", a).unwrap_err().lines
    }

    // Each case as Slurm 22.05 laid it out, on 4-core nodes.

    #[test]
    fn tasks_are_dealt_in_turns_within_each_nodes_cores_and_numbered_node_by_node() {
        // `-N 2 -n 4`: Slurm gave the job 3 cores on node1, 1 on node2.
        let j = job(&[3, 1]);
        assert_eq!(placed(&j, &ask(4)), [(1, 3), (2, 1)]);
        assert_eq!(placed(&j, &ask(3)), [(1, 2), (2, 1)]);
        let l = lay_out(&j, "7", &ask(4)).unwrap();
        assert_eq!(l.tasks(), [(0, 0), (0, 1), (0, 2), (1, 0)]);
        assert_eq!(l.tasks_per_node(), "3,1");
        assert_eq!(
            refused(&j, &ask(5)),
            ["Unable to create step for job 7: More processors requested than permitted"]
        );
        // Whole nodes: `-N 3 --exclusive`.
        let j = job(&[4, 4, 4]);
        assert_eq!(placed(&j, &ask(3)), [(1, 1), (2, 1), (3, 1)]);
        assert_eq!(placed(&j, &ask(6)), [(1, 2), (2, 2), (3, 2)]);
        let c2 = Ask {
            cpus_per_task: 2,
            ..ask(5)
        };
        assert_eq!(placed(&j, &c2), [(1, 2), (2, 2), (3, 1)]);
        let n2 = Ask {
            nodes: Some((2, 2)),
            ..ask(7)
        };
        assert_eq!(placed(&j, &n2), [(1, 4), (2, 3)]);
        let per = Ask {
            nodes: Some((2, 2)),
            tasks_per_node: Some(3),
            ..ask(6)
        };
        assert_eq!(lay_out(&j, "7", &per).unwrap().tasks_per_node(), "3(x2)");
        // `-N 1-2 -n 3`: the most nodes of the range.
        let range = Ask {
            nodes: Some((1, 2)),
            ..ask(3)
        };
        assert_eq!(placed(&j, &range), [(1, 2), (2, 1)]);
        // A node whose cores in the job hold less than a task's still
        // takes one (`-n 2 -c 2` on 3 and 1 cores).
        let short = Ask {
            cpus_per_task: 2,
            ..ask(2)
        };
        assert_eq!(placed(&job(&[3, 1]), &short), [(1, 1), (2, 1)]);
        let over = Ask {
            cpus_per_task: 2,
            ..ask(3)
        };
        assert!(lay_out(&job(&[3, 1]), "7", &over).is_err());
    }

    #[test]
    fn fewer_tasks_than_nodes_take_the_first_nodes_with_slurms_warning() {
        let j = job(&[4, 4, 4]);
        let l = lay_out(&j, "7", &ask(2)).unwrap();
        assert_eq!(l.nodes, [(0, 1), (1, 1)]);
        assert_eq!(
            l.warnings,
            ["Warning: can't run 2 processes on 3 nodes, setting nnodes to 2"]
        );
        // With -N too, as Slurm's srun reads its options.
        let l = lay_out(&j, "7", &ask(2).with_nodes(3)).unwrap();
        assert_eq!(l.nodes, [(0, 1), (1, 1)]);
        assert_eq!(
            l.warnings,
            ["Warning: can't run 2 processes on 3 nodes, setting nnodes to 2"]
        );
        assert!(lay_out(&j, "7", &ask(2).with_nodes(2))
            .unwrap()
            .warnings
            .is_empty());
    }

    #[test]
    fn tasks_per_node_is_kept_or_ignored_as_slurms_srun_decides() {
        let j = job(&[4, 4, 4]);
        // No tasks asked: that many on each node.
        let per = |t: u32, nodes: (u32, u32), n: Option<u32>| Ask {
            nodes: Some(nodes),
            ntasks: n,
            tasks_per_node: Some(t),
            cpus_per_task: 1,
            ..Ask::default()
        };
        assert_eq!(placed(&j, &per(3, (2, 2), None)), [(1, 3), (2, 3)]);
        // Tasks over the least nodes, rounded down, must be it.
        let kept = lay_out(&j, "7", &per(2, (2, 2), Some(5))).unwrap();
        assert!(kept.warnings.is_empty());
        assert_eq!(kept.tasks_per_node(), "3,2");
        let l = lay_out(&j, "7", &per(2, (1, 2), Some(4))).unwrap();
        assert_eq!(
            l.warnings,
            [
                "Warning: can't honor --ntasks-per-node set to 2 which doesn't match the \
                 requested tasks 4 with the number of requested nodes 1. Ignoring \
                 --ntasks-per-node."
            ]
        );
        assert_eq!(l.tasks_per_node(), "2(x2)");
    }

    #[test]
    fn huge_counts_are_counted_not_dealt_and_never_overflow() {
        let j = job(&[u32::MAX, u32::MAX]);
        let l = lay_out(&j, "7", &ask(MAX_TASKS)).unwrap();
        assert_eq!(l.tasks_per_node(), "524288(x2)");
        assert!(lay_out(&j, "7", &ask(MAX_TASKS + 1)).is_err());
        assert!(lay_out(&j, "7", &ask(4_000_000_000)).is_err());
        let wide = Ask {
            cpus_per_task: u32::MAX,
            ..ask(2)
        };
        assert_eq!(placed(&j, &wide), [(1, 1), (2, 1)]);
        // Turns: 1,1,1 then 2,-,2 then 3,-,-; then one more to each in
        // turn.
        assert_eq!(deal(4, &[3, 1, 2]), [2, 1, 1]);
        assert_eq!(deal(5, &[3, 1, 2]), [2, 1, 2]);
        assert_eq!(deal(6, &[3, 1, 2]), [3, 1, 2]);
        assert_eq!(deal(7, &[3, 1, 2]), [4, 1, 2]);
        assert_eq!(deal(11, &[3, 1, 2]), [5, 3, 3]);
    }

    #[test]
    fn named_nodes_come_first_then_the_jobs_others_in_its_order() {
        let j = job(&[4, 4, 4]);
        let w = |list: &[&str], n: u32, nodes: Option<(u32, u32)>| Ask {
            nodelist: names(list),
            nodes,
            ..ask(n)
        };
        assert_eq!(placed(&j, &w(&["node2"], 1, None)), [(2, 1)]);
        assert_eq!(placed(&j, &w(&["node2", "node3"], 1, None)), [(2, 1)]);
        assert_eq!(placed(&j, &w(&["node3", "node1"], 1, None)), [(1, 1)]);
        // More names than -N allows: the last ones dropped, with Slurm's
        // error line.
        let cut = lay_out(&j, "7", &w(&["node2", "node3"], 1, Some((1, 1)))).unwrap();
        assert_eq!(cut.nodes, [(1, 1)]);
        assert_eq!(
            cut.warnings,
            [
                "error: Required nodelist includes more nodes than permitted by max-node count \
              (2 > 1). Eliminating nodes from the nodelist."
            ]
        );
        assert_eq!(placed(&j, &w(&["node2"], 1, Some((1, 1)))), [(2, 1)]);
        assert_eq!(
            placed(&j, &w(&["node1", "node3"], 2, None)),
            [(1, 1), (3, 1)]
        );
        assert_eq!(
            placed(&j, &w(&["node2"], 2, Some((2, 2)))),
            [(1, 1), (2, 1)]
        );
        assert_eq!(
            placed(&j, &w(&["node3"], 3, None)),
            [(1, 1), (2, 1), (3, 1)]
        );
        assert_eq!(placed(&j, &w(&["node3"], 4, Some((1, 1)))), [(3, 4)]);
        assert_eq!(
            refused(&j, &w(&["node3"], 5, Some((1, 1)))),
            ["Unable to create step for job 7: More processors requested than permitted"]
        );
        for list in [&["node9"][..], &["node2", "node9"]] {
            assert_eq!(
                refused(&j, &w(list, 3, None)),
                ["Unable to create step for job 7: Requested node configuration is not available"]
            );
        }
        // `-w node2 -n 2` where node2 holds one core of the job: node1 too.
        assert_eq!(
            placed(&job(&[3, 1]), &w(&["node2"], 2, None)),
            [(1, 1), (2, 1)]
        );
    }

    #[test]
    fn excluded_nodes_are_left_out_or_the_step_is_refused_as_slurm_refuses_it() {
        let j = job(&[4, 4, 4]);
        let x = |list: &[&str], n: u32, nodes: Option<(u32, u32)>| Ask {
            exclude: names(list),
            nodes,
            ..ask(n)
        };
        assert_eq!(
            placed(&j, &x(&["node2"], 2, Some((2, 2)))),
            [(1, 1), (3, 1)]
        );
        assert_eq!(placed(&j, &x(&["node1"], 1, Some((1, 1)))), [(2, 1)]);
        assert_eq!(
            refused(&j, &x(&["node2"], 3, None)),
            [
                "Are required nodes explicitly excluded?",
                "Only allocated 2 nodes asked for 3"
            ]
        );
        assert_eq!(
            refused(&job(&[4, 4]), &x(&["node1", "node2"], 2, None)),
            ["Hostlist is empty!  Can't run job."]
        );
        assert_eq!(
            refused(&job(&[4, 4]), &ask(4).with_nodes(3)),
            ["Only allocated 2 nodes asked for 3"]
        );
    }

    impl Ask {
        fn with_nodes(self, n: u32) -> Ask {
            Ask {
                nodes: Some((n, n)),
                ..self
            }
        }
    }

    #[test]
    fn node_counts_are_read_as_slurms_srun_reads_them() {
        assert_eq!(node_count("2"), Ok(Some((2, 2))));
        assert_eq!(node_count("1-2"), Ok(Some((1, 2))));
        assert_eq!(node_count("0"), Ok(None));
        assert_eq!(
            node_count("2-1").unwrap_err().lines,
            ["Maximum node count 1 is less than minimum node count 2"]
        );
        let x = node_count("x").unwrap_err();
        assert_eq!(
            (x.lines, x.code),
            (vec!["\"x\" is not a valid node count".into()], 255)
        );
    }
}
