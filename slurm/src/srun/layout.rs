//! Where a step's tasks go among its job's nodes, as Slurm 22.05's srun
//! lays them out inside an allocation (each rule measured on it, 4-core
//! nodes; the cases are the tests below).
//!
//! - **How many nodes**: `-N` (the most of a range), else the job's; no
//!   more than its tasks, with Slurm's warning when `-N` was not given.
//! - **Which**: those `-w` names (the first so many), then the job's
//!   others in its order, never one `-x` names; in the job's order.
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
    pub ntasks: u32,
    /// `--ntasks-per-node`, when it is honoured.
    pub tasks_per_node: Option<u32>,
    pub cpus_per_task: u32,
    /// `-w`, in the order given.
    pub nodelist: Vec<String>,
    /// `-x`.
    pub exclude: Vec<String>,
}

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

/// Lays out the step `ask` in job `job` (step `step`'s number only goes
/// into Slurm's words).
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
    let index = |name: &str| job.nodes.iter().position(|n| n == name);
    let mut named = Vec::new();
    for name in &ask.nodelist {
        let i = index(name).ok_or_else(not_available)?;
        if !named.contains(&i) {
            named.push(i);
        }
    }
    let excluded: Vec<usize> = ask.exclude.iter().filter_map(|n| index(n)).collect();
    if named.iter().any(|i| excluded.contains(i)) {
        return Err(not_available());
    }
    let open: Vec<usize> = (0..job.nodes.len())
        .filter(|i| !excluded.contains(i))
        .collect();
    if open.is_empty() {
        return Err(refuse("Hostlist is empty!  Can't run job.".into()));
    }
    let mut warnings = Vec::new();
    let (least, mut count) = match ask.nodes {
        Some((least, most)) => (least, most),
        None => {
            let all = job.nodes.len() as u32;
            if ask.ntasks < all {
                warnings.push(format!(
                    "Warning: can't run {} processes on {all} nodes, setting nnodes to {}",
                    ask.ntasks, ask.ntasks
                ));
                (ask.ntasks, ask.ntasks)
            } else {
                (all, all)
            }
        }
    };
    let have = open.len() as u32;
    if least > have {
        let mut lines = Vec::new();
        if !excluded.is_empty() {
            lines.push("Are required nodes explicitly excluded?".into());
        }
        lines.push(format!("Only allocated {have} nodes asked for {least}"));
        return Err(Refused { lines, code: 1 });
    }
    count = count.min(have).min(ask.ntasks).max(1);
    let mut chosen: Vec<usize> = named.iter().copied().take(count as usize).collect();
    for &i in &open {
        if chosen.len() >= count as usize {
            break;
        }
        if !chosen.contains(&i) {
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    // No more tasks' cores than the step's nodes hold in the job.
    let cpt = ask.cpus_per_task.max(1);
    let cores: u64 = chosen
        .iter()
        .map(|&i| u64::from(job.cpus.get(i).copied().unwrap_or(1)))
        .sum();
    if u64::from(ask.ntasks) * u64::from(cpt) > cores {
        return Err(too_many());
    }
    // Dealt in turns, a task to each node whose cores hold one more (a
    // node holds one at least); what is left then, one to each in turn.
    let room: Vec<u32> = chosen
        .iter()
        .map(|&i| {
            let fits = (job.cpus.get(i).copied().unwrap_or(1) / cpt).max(1);
            ask.tasks_per_node.map_or(fits, |t| fits.min(t))
        })
        .collect();
    let mut tasks = vec![0u32; chosen.len()];
    let mut left = ask.ntasks;
    let mut crowded = false;
    while left > 0 {
        let mut dealt = false;
        for (t, &r) in tasks.iter_mut().zip(&room) {
            if left > 0 && (crowded || *t < r) {
                *t += 1;
                left -= 1;
                dealt = true;
            }
        }
        crowded |= !dealt;
    }
    // A node with no task is no node of the step.
    let nodes = chosen
        .into_iter()
        .zip(tasks)
        .filter(|&(_, t)| t > 0)
        .collect();
    Ok(Layout { nodes, warnings })
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
            ntasks,
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
        let one = Ask {
            nodes: Some((2, 2)),
            ..ask(2)
        };
        assert!(lay_out(&j, "7", &one).unwrap().warnings.is_empty());
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
            refused(&job(&[4, 4]), &ask(2).with_nodes(3)),
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
