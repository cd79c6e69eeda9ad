//! What a batch script gets when its job starts: its output files, named
//! from Slurm's patterns, and the environment a Slurm job gets. Settled
//! here, at the start, where the job's nodes are known; the agent only
//! writes the script and runs it.

use formats::wire::{ArrayTask, Program};

/// What is known of a job at its start that its script may be told.
pub(super) struct Started<'a> {
    pub id: u64,
    pub name: &'a str,
    pub array: Option<ArrayTask>,
    pub partition: &'a str,
    /// Its nodes, folded.
    pub nodes: &'a str,
    /// Its cores on each of its nodes, in order (node index, cores).
    pub alloc: &'a [(usize, u32)],
    /// The node its script runs on (the first).
    pub first: &'a str,
    /// Memory it holds for each of its cores, in MiB (0: none asked).
    pub mem_per_cpu_mb: u64,
    /// How many times it was requeued before this start.
    pub restarts: u32,
}

/// `program` as the job `s` starts it: its files named, its whole
/// environment.
pub(super) fn start(program: &Program, s: &Started<'_>) -> Program {
    let stdout = stdout_pattern(program, s.array.is_some());
    let mut env = program.env.clone();
    // As slurmstepd: a job that brought no TMPDIR gets its node's
    // (Slurm's TmpFS, /tmp by default), so that `cd $TMPDIR` or
    // `cp x $TMPDIR/` never lands in $HOME or /.
    if !env.iter().any(|(k, _)| k == "TMPDIR") {
        env.push(("TMPDIR".into(), "/tmp".into()));
    }
    env.extend(slurm_env(program, s));
    Program {
        env,
        stdout: expand(stdout, program, s),
        stderr: if program.stderr.is_empty() {
            String::new()
        } else {
            expand(&program.stderr, program, s)
        },
        script: program.script.clone(),
        command: program.command.clone(),
        workdir: program.workdir.clone(),
        user: program.user.clone(),
        signal: program.signal.clone(),
        ntasks: program.ntasks,
        cpus_per_task: program.cpus_per_task,
        tasks_per_node: program.tasks_per_node,
        comment: program.comment.clone(),
        args: program.args.clone(),
        // Asked per node (sbatch --mem), as asked; else what it holds
        // where its script runs: its processes all run there, as a job's
        // batch step does.
        mem_limit_mb: if program.mem_limit_mb > 0 {
            program.mem_limit_mb
        } else {
            s.mem_per_cpu_mb * u64::from(s.alloc.first().map_or(0, |&(_, c)| c))
        },
        partition_limit: program.partition_limit,
        exclusive: program.exclusive,
        open_append: program.open_append,
        // Its nodes are chosen: the agent has no use for them.
        nodelist: String::new(),
        exclude: String::new(),
    }
}

/// The pattern naming `program`'s output file: its own, else Slurm's
/// default (`slurm-%j.out`, `slurm-%A_%a.out` for an array task).
pub(super) fn stdout_pattern(program: &Program, array_task: bool) -> &str {
    match (program.stdout.is_empty(), array_task) {
        (false, _) => &program.stdout,
        (true, true) => "slurm-%A_%a.out",
        (true, false) => "slurm-%j.out",
    }
}

/// Slurm's file name patterns: `%j` the job id, `%A` the array's id (the
/// job's own outside an array), `%a` the task's index (`4294967294`
/// outside one, as Slurm writes it), `%x` the job name, `%N` the first
/// node, `%u` the user, `%n` the node's index in the job and `%t` the
/// task's (0: the batch script's), `%s` the step (`batch`), `%J` the job
/// and step (the job's id for its batch script), `%%` a percent sign. A
/// number between `%` and the letter pads with zeros (`%3a`); another
/// letter stays as it is. A backslash anywhere turns every pattern off,
/// and goes (`out\\%j` is `out%j`), as Slurm's does.
pub(super) fn expand(pattern: &str, program: &Program, s: &Started<'_>) -> String {
    if pattern.contains('\\') {
        return pattern.replace('\\', "");
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*d);
            chars.next();
        }
        let pad = |v: String| match width.parse::<usize>() {
            Ok(w) => format!("{v:0>w$}"),
            Err(_) => v,
        };
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j' | 'J') => out.push_str(&pad(s.id.to_string())),
            Some('A') => out.push_str(&pad(s.array.map_or(s.id, |a| a.job).to_string())),
            Some('a') => out.push_str(&pad(s
                .array
                .map_or("4294967294".to_string(), |a| a.index.to_string()))),
            Some('x') => out.push_str(s.name),
            // Not placed yet (a waiting job's file, as scontrol shows
            // it): left as asked, as Slurm leaves it.
            Some('N') if s.first.is_empty() => {
                out.push('%');
                out.push_str(&width);
                out.push('N');
            }
            Some('N') => out.push_str(s.first),
            Some('u') => out.push_str(&program.user),
            Some('n' | 't') => out.push_str(&pad("0".into())),
            Some('s') => out.push_str("batch"),
            Some(other) => {
                out.push('%');
                out.push_str(&width);
                out.push(other);
            }
            None => {
                out.push('%');
                out.push_str(&width);
            }
        }
    }
    out
}

/// Its tasks on each of its nodes, folded as Slurm folds them: the whole
/// tasks each node's cores hold (at least one); on whole nodes
/// (`--exclusive`), its tasks dealt evenly, the first nodes taking one
/// more, as Slurm deals them.
fn tasks_per_node(program: &Program, alloc: &[(usize, u32)]) -> String {
    let cpt = program.cpus_per_task.max(1);
    let nodes = alloc.len().max(1) as u32;
    if program.exclusive {
        let (each, more) = (program.ntasks / nodes, program.ntasks % nodes);
        formats::nodeset::fold_counts((0..nodes).map(|i| (each + u32::from(i < more)).max(1)))
    } else {
        formats::nodeset::fold_counts(alloc.iter().map(|&(_, c)| (c / cpt).max(1)))
    }
}

/// The variables a Slurm batch job finds set.
fn slurm_env(program: &Program, s: &Started<'_>) -> Vec<(String, String)> {
    let node_count = s.alloc.len();
    let cores_on_first = s.alloc.first().map_or(0, |&(_, c)| c);
    let mut v = vec![
        ("SLURM_JOB_ID", s.id.to_string()),
        ("SLURM_JOBID", s.id.to_string()),
        ("SLURM_JOB_NAME", s.name.to_string()),
        ("SLURM_JOB_NODELIST", s.nodes.to_string()),
        ("SLURM_NODELIST", s.nodes.to_string()),
        ("SLURM_JOB_NUM_NODES", node_count.to_string()),
        ("SLURM_NNODES", node_count.to_string()),
        ("SLURM_CPUS_ON_NODE", cores_on_first.to_string()),
        (
            "SLURM_JOB_CPUS_PER_NODE",
            formats::nodeset::fold_counts(s.alloc.iter().map(|&(_, c)| c)),
        ),
        ("SLURM_TASKS_PER_NODE", tasks_per_node(program, s.alloc)),
        ("SLURM_SUBMIT_DIR", program.workdir.clone()),
        ("SLURM_JOB_PARTITION", s.partition.to_string()),
        ("SLURM_JOB_USER", program.user.clone()),
        ("SLURMD_NODENAME", s.first.to_string()),
        ("SLURM_NODEID", "0".to_string()),
        ("SLURM_CLUSTER_NAME", "clemu".to_string()),
        ("ENVIRONMENT", "BATCH".to_string()),
        ("HOSTNAME", s.first.to_string()),
        ("SLURM_PROCID", "0".to_string()),
        ("SLURM_LOCALID", "0".to_string()),
        // The batch step's task ids on its node, the submitter's
        // scheduling priority, and what a cluster without a topology
        // plugin or node aliases gives, as Slurm 22.05 sets them.
        ("SLURM_GTIDS", "0".to_string()),
        ("SLURM_PRIO_PROCESS", "0".to_string()),
        ("SLURM_NODE_ALIASES", "(null)".to_string()),
        ("SLURM_TOPOLOGY_ADDR", s.first.to_string()),
        ("SLURM_TOPOLOGY_ADDR_PATTERN", "node".to_string()),
    ];
    // Slurm sets it only for a job run again.
    if s.restarts > 0 {
        v.push(("SLURM_RESTART_COUNT", s.restarts.to_string()));
    }
    if let Some(a) = s.array {
        v.push(("SLURM_ARRAY_JOB_ID", a.job.to_string()));
        v.push(("SLURM_ARRAY_TASK_ID", a.index.to_string()));
    }
    v.into_iter().map(|(k, val)| (k.to_string(), val)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> Program {
        Program {
            script: "#!/bin/sh\ntrue\n".into(),
            workdir: "/home/ana/run".into(),
            env: vec![("HOME".into(), "/home/ana".into())],
            stdout: String::new(),
            stderr: String::new(),
            user: "ana".into(),
            signal: None,
            ntasks: 4,
            cpus_per_task: 2,
            tasks_per_node: 0,
            comment: String::new(),
            args: Vec::new(),
            mem_limit_mb: 0,
            command: String::new(),
            partition_limit: false,
            exclusive: false,
            open_append: false,
            nodelist: String::new(),
            exclude: String::new(),
        }
    }

    fn started(array: Option<ArrayTask>) -> Started<'static> {
        Started {
            id: 42,
            name: "fit",
            array,
            partition: "batch",
            nodes: "vn[001-002]",
            alloc: &[(0, 4), (1, 4)],
            first: "vn001",
            mem_per_cpu_mb: 1000,
            restarts: 0,
        }
    }

    #[test]
    fn slurms_patterns_name_the_files() {
        let p = program();
        let task = Some(ArrayTask {
            job: 40,
            index: 2,
            limit: 0,
        });
        assert_eq!(start(&p, &started(None)).stdout, "slurm-42.out");
        assert_eq!(start(&p, &started(task)).stdout, "slurm-40_2.out");
        let s = started(task);
        assert_eq!(
            expand("%x-%j-%A_%3a.%N.%u.%%.%q", &p, &s),
            "fit-42-40_002.vn001.ana.%.%q"
        );
        assert_eq!(expand("out-%a", &p, &started(None)), "out-4294967294");
        assert_eq!(expand("trailing%", &p, &s), "trailing%");
        // The batch script is node 0, task 0, step `batch`, as on Slurm.
        assert_eq!(expand("x-%n-%t-%s-%2t", &p, &s), "x-0-0-batch-00");
        // %J is the batch script's job; a backslash turns patterns off.
        assert_eq!(expand("p7_%J.out", &p, &s), "p7_42.out");
        // Where it runs is not known before it starts.
        let waiting = Started { first: "", ..s };
        assert_eq!(expand("o-%j-%N.out", &p, &waiting), "o-42-%N.out");
        assert_eq!(expand("p6_\\%j.out", &p, &s), "p6_%j.out");
    }

    #[test]
    fn a_batch_script_gets_slurms_variables_of_its_step_and_node() {
        let env: std::collections::HashMap<String, String> =
            slurm_env(&program(), &started(None)).into_iter().collect();
        for (k, v) in [
            ("SLURM_GTIDS", "0"),
            ("SLURM_PRIO_PROCESS", "0"),
            ("SLURM_NODE_ALIASES", "(null)"),
            ("SLURM_TOPOLOGY_ADDR", "vn001"),
            ("SLURM_TOPOLOGY_ADDR_PATTERN", "node"),
            ("SLURM_JOB_CPUS_PER_NODE", "4(x2)"),
        ] {
            assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
        }
    }

    #[test]
    fn tasks_on_whole_nodes_are_dealt_evenly() {
        let mut p = program();
        p.exclusive = true;
        p.cpus_per_task = 1;
        p.ntasks = 3;
        assert_eq!(tasks_per_node(&p, &[(0, 4), (1, 4)]), "2,1");
        p.ntasks = 6;
        assert_eq!(tasks_per_node(&p, &[(0, 4), (1, 4)]), "3(x2)");
        // Not on whole nodes: what each node's cores hold.
        p.exclusive = false;
        assert_eq!(tasks_per_node(&p, &[(0, 4), (1, 2)]), "4,2");
    }

    #[test]
    fn the_script_gets_slurms_variables_after_its_own() {
        let env = start(&program(), &started(None)).env;
        let get = |k: &str| {
            env.iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(env[0], ("HOME".to_string(), "/home/ana".to_string()));
        assert_eq!(get("SLURM_JOB_ID"), Some("42"));
        assert_eq!(get("SLURM_JOB_NODELIST"), Some("vn[001-002]"));
        assert_eq!(get("SLURM_JOB_NUM_NODES"), Some("2"));
        assert_eq!(get("SLURM_CPUS_ON_NODE"), Some("4"));
        assert_eq!(get("SLURM_JOB_CPUS_PER_NODE"), Some("4(x2)"));
        assert_eq!(get("SLURM_TASKS_PER_NODE"), Some("2(x2)"));
        // What only sbatch knows was asked, it sets itself.
        assert_eq!(get("SLURM_NTASKS"), None);
        assert_eq!(get("SLURM_MEM_PER_NODE"), None);
        // Its memory on the node its script runs on bounds its processes.
        assert_eq!(start(&program(), &started(None)).mem_limit_mb, 4000);
        assert_eq!(get("SLURM_SUBMIT_DIR"), Some("/home/ana/run"));
        assert_eq!(get("SLURM_ARRAY_TASK_ID"), None);
        // Its node's TMPDIR unless it brought its own.
        assert_eq!(get("TMPDIR"), Some("/tmp"));
        let mut own = program();
        own.env.push(("TMPDIR".into(), "/scratch/ana".into()));
        let env = start(&own, &started(None)).env;
        let tmpdirs: Vec<&str> = env
            .iter()
            .filter(|(k, _)| k == "TMPDIR")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(tmpdirs, ["/scratch/ana"]);
    }
}
