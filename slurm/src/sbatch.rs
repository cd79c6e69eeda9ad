//! `sbatch`: a batch script (a file, standard input, or `--wrap`) and its
//! options, from the command line and the script's `#SBATCH` lines, made
//! into a job for the controller.

use std::io::Read as _;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use client::{Request, Response};
use formats::wire::{submit_key, ArraySpec, DepKind, JobSpec, Program};

use crate::cluster::Cluster;
use crate::text;

#[derive(Debug, Parser)]
#[command(
    name = "sbatch",
    infer_long_args = true,
    args_override_self = true,
    disable_version_flag = true
)]
pub struct Args {
    #[command(flatten)]
    res: Resources,
    #[arg(short = 'J', long = "job-name")]
    job_name: Option<String>,
    #[arg(short = 'o', long)]
    output: Option<String>,
    #[arg(short = 'e', long)]
    error: Option<String>,
    #[arg(short = 'n', long)]
    ntasks: Option<u32>,
    #[arg(short = 'N', long)]
    nodes: Option<String>,
    #[arg(short = 'c', long = "cpus-per-task")]
    cpus_per_task: Option<u32>,
    #[arg(long = "ntasks-per-node")]
    ntasks_per_node: Option<u32>,
    #[arg(long = "gpus-per-node")]
    gpus_per_node: Option<String>,
    #[arg(short = 'a', long)]
    array: Option<String>,
    #[arg(short = 'H', long)]
    hold: bool,
    #[arg(long)]
    export: Option<String>,
    #[arg(long)]
    signal: Option<String>,
    // The last of the two given wins, as on Slurm.
    #[arg(long, overrides_with = "no_requeue")]
    requeue: bool,
    #[arg(long = "no-requeue", overrides_with = "requeue")]
    no_requeue: bool,
    #[arg(long)]
    begin: Option<String>,
    #[arg(long)]
    parsable: bool,
    #[arg(long)]
    wrap: Option<String>,
    #[arg(short = 'Q', long)]
    quiet: bool,
    /// Return once the job is over, with its exit status.
    #[arg(short = 'W', long)]
    wait: bool,
    /// Accepted and not used: clemu has no accounts, QOS, mail,
    /// constraints or exclusive nodes; and it is one cluster, which
    /// `-M` may name (`cluster::reach`).
    #[arg(short = 'A', long)]
    account: Option<String>,
    #[arg(short = 'q', long)]
    qos: Option<String>,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    #[arg(long = "mail-type")]
    mail_type: Option<String>,
    #[arg(long = "mail-user")]
    mail_user: Option<String>,
    #[arg(short = 'C', long)]
    constraint: Option<String>,
    /// Slurm's `--hint`: told to the job (`SLURM_HINT`); clemu's nodes
    /// have a thread per core and bind no task, so it changes nothing
    /// else, as on Slurm with such nodes.
    #[arg(long)]
    hint: Option<String>,
    /// `--open-mode=append|truncate`: its output files kept and added to,
    /// or emptied first (the default, as Slurm's `JobFileAppend=0`).
    #[arg(long = "open-mode")]
    open_mode: Option<String>,
    /// `--exclusive[=user|mcs]`.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    exclusive: Option<String>,
    /// Nodes the job must have, each (a node set, or a file of names).
    #[arg(short = 'w', long)]
    nodelist: Option<String>,
    /// Nodes it must not have.
    #[arg(short = 'x', long)]
    exclude: Option<String>,
    /// The script and its arguments ([`crate::argv`] finds where they
    /// begin).
    #[arg(trailing_var_arg = true)]
    script: Vec<String>,
}

/// The options that shape a job's allocation, which srun outside a job
/// takes too, with the same flags.
#[derive(Debug, Default, clap::Args)]
pub struct Resources {
    #[arg(short = 'p', long)]
    partition: Option<String>,
    #[arg(short = 't', long)]
    time: Option<String>,
    #[arg(long)]
    mem: Option<String>,
    #[arg(long = "mem-per-cpu")]
    mem_per_cpu: Option<String>,
    #[arg(long)]
    gres: Option<String>,
    #[arg(short = 'G', long)]
    gpus: Option<String>,
    #[arg(short = 'D', long)]
    chdir: Option<String>,
    #[arg(short = 'd', long)]
    dependency: Option<String>,
    #[arg(long)]
    comment: Option<String>,
}

impl Resources {
    /// Those given, as sbatch's `--flag=value` words.
    pub fn words(&self) -> Vec<String> {
        [
            ("--partition", &self.partition),
            ("--time", &self.time),
            ("--mem", &self.mem),
            ("--mem-per-cpu", &self.mem_per_cpu),
            ("--gres", &self.gres),
            ("--gpus", &self.gpus),
            ("--chdir", &self.chdir),
            ("--dependency", &self.dependency),
            ("--comment", &self.comment),
        ]
        .into_iter()
        .filter_map(|(flag, v)| v.as_ref().map(|v| format!("{flag}={v}")))
        .collect()
    }

    /// Where the job runs (`-D`), if given.
    pub fn chdir(&self) -> Option<&str> {
        self.chdir.as_deref()
    }
}

/// What `#SBATCH` lines say: the words after each, up to the first line
/// that is neither a comment nor blank, as Slurm reads them.
pub fn directives(script: &str) -> Result<Vec<String>> {
    Ok(directive_lines(script)?
        .into_iter()
        .flat_map(|(_, words)| words)
        .collect())
}

/// The `#SBATCH` lines' words, line by line, with each line's number.
fn directive_lines(script: &str) -> Result<Vec<(usize, Vec<String>)>> {
    let mut lines = Vec::new();
    for (n, line) in script.lines().enumerate().skip(1) {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if !l.starts_with('#') {
            break;
        }
        // A directive starts its line, as Slurm reads them: an indented
        // `#SBATCH` is a comment.
        let Some(rest) = line.strip_prefix("#SBATCH") else {
            continue;
        };
        let split = shlex::split(rest)
            .ok_or_else(|| anyhow!("script line {}: unbalanced quotes: {line}", n + 1))?;
        let words: Vec<String> = split
            .into_iter()
            .take_while(|w| !w.starts_with('#'))
            .collect();
        lines.push((n + 1, words));
    }
    Ok(lines)
}

/// The script `--wrap` makes of a command, as sbatch writes it.
pub fn wrapped(command: &str) -> String {
    format!("#!/bin/sh\n# This script was generated by sbatch --wrap.\n\n{command}\n")
}

/// `sbatch ARGS`: prints what Slurm prints and returns the exit status.
pub async fn main(argv: Vec<String>) -> Result<u8> {
    let first = crate::argv::parse::<Args>(&argv)?;
    let script = match (&first.wrap, first.script.first()) {
        (Some(w), None) => wrapped(w),
        (Some(_), Some(_)) => bail!("script arguments not permitted with --wrap option"),
        (None, Some(path)) => {
            // Worded as Slurm's, with no more of the cause.
            std::fs::read_to_string(path).map_err(|_| anyhow!("Unable to open file {path}"))?
        }
        (None, None) => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the script from standard input")?;
            s
        }
    };
    if !script.starts_with("#!") {
        bail!(
            "This does not look like a batch script.  The first\nsbatch: error: line must start \
             with #! followed by the path to an interpreter.\nsbatch: error: For instance: \
             #!/bin/sh"
        );
    }
    // Refused as Slurm's sbatch refuses it: `/bin/bash\r` is no
    // interpreter, and the job would fail on its node. (`--wrap` is not
    // looked at, as on Slurm.)
    if first.wrap.is_none() && script.contains("\r\n") {
        bail!(
            "Batch script contains DOS line breaks (\\r\\n)\nsbatch: error: instead of expected \
             UNIX line breaks (\\n)."
        );
    }
    let args = with_directives(&argv, &script, first)?;
    if args.res.mem.is_some() && args.res.mem_per_cpu.is_some() {
        eprintln!("sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
        return Ok(1);
    }
    refuse_as_slurm(&args)?;
    // Named, the cluster is said with the job's id, as Slurm's sbatch
    // says it.
    let on = match crate::cluster::reach("sbatch", args.clusters.as_deref()) {
        Ok(true) => Some(crate::cluster::NAME),
        Ok(false) => None,
        Err(code) => return Ok(code),
    };
    let mut c = Cluster::open().await?;
    // As Slurm's sbatch says a refusal (its reason is clemu's).
    let s = match submit(&mut c, &args, script)
        .await
        .context("Batch job submission failed")?
    {
        Ok(submitted) => submitted,
        Err(refusal) => {
            eprintln!("sbatch: error: {refusal}");
            // Options that make no job: Slurm's sbatch exits 255 for most,
            // and 1 for what its controller refuses, a partition it does
            // not have and generic resources it cannot read.
            let one = [
                REFUSED,
                NO_PARTITION,
                BAD_GRES,
                NO_MEMORY,
                NO_CPUS,
                BAD_HINT,
                BAD_NODE_COUNT,
            ];
            return Ok(if one.iter().any(|r| refusal.starts_with(r)) {
                1
            } else {
                255
            });
        }
    };
    match (s.parsable, on) {
        (true, None) => println!("{}", s.id),
        (true, Some(on)) => println!("{};{on}", s.id),
        (false, _) if s.quiet => {}
        (false, None) => println!("Submitted batch job {}", s.id),
        (false, Some(on)) => println!("Submitted batch job {} on cluster {on}", s.id),
    }
    if s.wait {
        // Said before the wait, as Slurm's sbatch says it.
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        return wait_over(&mut c, s.id).await;
    }
    Ok(0)
}

/// What Slurm's sbatch refuses before submitting, in its words: no tasks
/// or cores per task, and an array index beyond its `MaxArraySize`.
fn refuse_as_slurm(args: &Args) -> Result<()> {
    for (value, option) in [
        (args.ntasks, "--ntasks"),
        (args.cpus_per_task, "--cpus-per-task"),
    ] {
        if value == Some(0) {
            bail!("Invalid numeric value \"0\" for {option}.");
        }
    }
    if let Some(a) = &args.array {
        let highest =
            ArraySpec::parse(a).map_or(0, |a| a.indices.iter().copied().max().unwrap_or(0));
        if highest as usize >= ArraySpec::MAX_TASKS {
            bail!("Batch job submission failed: Invalid job array specification");
        }
    }
    Ok(())
}

/// A submission's job, and what sbatch was asked to do after.
pub struct Submitted {
    pub id: u64,
    quiet: bool,
    parsable: bool,
    wait: bool,
}

/// How often `--wait` asks whether the job is over.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// `--wait`: once job `id` (every task, for an array) is over, its exit
/// status as Slurm's sbatch gives it: the script's exit code, 1 for a
/// script ended by a signal; an array's highest.
async fn wait_over(c: &mut Cluster, id: u64) -> Result<u8> {
    // An array's tasks have the ids that follow its own.
    let ids: Vec<u64> = (id..=id.saturating_add(ArraySpec::MAX_TASKS as u64)).collect();
    loop {
        let jobs: Vec<_> = c
            .by_ids(ids.clone())
            .await?
            .into_iter()
            .filter(|j| j.id == id || j.array.is_some_and(|t| t.job == id))
            .collect();
        if jobs.is_empty() {
            bail!("job {id} is no longer known to the controller");
        }
        if jobs.iter().all(text::over) {
            let status = |j: &formats::wire::JobInfo| match j.exit {
                (_, sig) if sig > 0 => 1,
                (code, _) => code.min(255) as u8,
            };
            return Ok(jobs.iter().map(status).max().unwrap_or(0));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// sbatch's options: `script`'s `#SBATCH` lines, then `argv`'s, which
/// win. `plain` is `argv` parsed alone: the options when the script has
/// no such line.
pub fn with_directives(argv: &[String], script: &str, plain: Args) -> Result<Args> {
    let lines = directive_lines(script)?;
    let env = from_environment(&argv[0])?;
    if lines.is_empty() && env.is_empty() {
        return Ok(plain);
    }
    let mut all = vec![argv[0].clone()];
    let asks_memory = |a: &Args| a.res.mem.is_some() || a.res.mem_per_cpu.is_some();
    let mut memory = asks_memory(&plain);
    for (n, words) in lines {
        // Each line alone, so that one Slurm option clemu does not take
        // is refused with its line, and never eats the words after it.
        let mut line = vec![argv[0].clone()];
        line.extend(words.iter().cloned());
        let alone =
            crate::argv::parse::<Args>(&line).map_err(|e| anyhow!("script line {n}: {e}"))?;
        if let Some(w) = alone.script.first() {
            bail!("script line {n}: {w:?} is not an option");
        }
        memory |= asks_memory(&alone);
        all.extend(words);
    }
    // After the script's lines and before the command's: what a variable
    // says overrides the first and yields to the second, as on Slurm. A
    // memory option given either way replaces the variables' memory
    // (`SBATCH_MEM_PER_CPU` set for a site, `--mem` asked by a job), where
    // both would be refused together.
    all.extend(
        env.into_iter()
            .filter(|w| !(memory && (w.starts_with("--mem=") || w.starts_with("--mem-per-cpu=")))),
    );
    all.extend(argv[1..].iter().cloned());
    crate::argv::parse::<Args>(&all)
}

/// Slurm's sbatch input variables, the option each stands for, and
/// whether it takes the variable's value (a flag's is ignored, as Slurm
/// ignores it: `SBATCH_REQUEUE=0` requeues). The last ones name options
/// clemu does not take: refused, with the variable's name.
const INPUT_VARS: &[(&str, &str, bool)] = &[
    ("SBATCH_ACCOUNT", "--account", true),
    ("SBATCH_ARRAY_INX", "--array", true),
    ("SBATCH_CLUSTERS", "--clusters", true),
    ("SBATCH_CONSTRAINT", "--constraint", true),
    ("SBATCH_EXCLUSIVE", "--exclusive", true),
    ("SBATCH_EXPORT", "--export", true),
    ("SBATCH_GPUS", "--gpus", true),
    ("SBATCH_GPUS_PER_NODE", "--gpus-per-node", true),
    ("SBATCH_GRES", "--gres", true),
    ("SBATCH_HINT", "--hint", true),
    ("SBATCH_JOB_NAME", "--job-name", true),
    ("SBATCH_MEM_PER_CPU", "--mem-per-cpu", true),
    ("SBATCH_MEM_PER_NODE", "--mem", true),
    ("SBATCH_NO_REQUEUE", "--no-requeue", false),
    ("SBATCH_OPEN_MODE", "--open-mode", true),
    ("SBATCH_PARTITION", "--partition", true),
    ("SBATCH_QOS", "--qos", true),
    ("SBATCH_REQUEUE", "--requeue", false),
    ("SBATCH_SIGNAL", "--signal", true),
    ("SBATCH_TIMELIMIT", "--time", true),
    ("SBATCH_WAIT", "--wait", false),
    ("SBATCH_ACCTG_FREQ", "--acctg-freq", true),
    ("SBATCH_CORE_SPEC", "--core-spec", true),
    ("SBATCH_CPUS_PER_GPU", "--cpus-per-gpu", true),
    ("SBATCH_DEBUG", "--verbose", false),
    ("SBATCH_DISTRIBUTION", "--distribution", true),
    ("SBATCH_GET_USER_ENV", "--get-user-env", false),
    ("SBATCH_GPUS_PER_TASK", "--gpus-per-task", true),
    ("SBATCH_MEM_PER_GPU", "--mem-per-gpu", true),
    ("SBATCH_NO_KILL", "--no-kill", false),
    ("SBATCH_OVERCOMMIT", "--overcommit", false),
    ("SBATCH_PROFILE", "--profile", true),
    ("SBATCH_RESERVATION", "--reservation", true),
    ("SBATCH_SPREAD_JOB", "--spread-job", false),
    ("SBATCH_USE_MIN_NODES", "--use-min-nodes", false),
    ("SBATCH_WAIT_ALL_NODES", "--wait-all-nodes", true),
    ("SBATCH_WCKEY", "--wckey", true),
];

/// The options the submitter's `SBATCH_*` variables give, each checked
/// alone so that a refusal names its variable.
fn from_environment(program: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    for &(var, option, valued) in INPUT_VARS {
        let Some(value) = std::env::var_os(var) else {
            continue;
        };
        let word = if valued {
            let value = value
                .into_string()
                .map_err(|_| anyhow!("{var}: not valid UTF-8"))?;
            format!("{option}={value}")
        } else {
            option.to_string()
        };
        crate::argv::parse::<Args>(&[program.to_string(), word.clone()])
            .map_err(|e| anyhow!("{var}: {e}"))?;
        words.push(word);
    }
    Ok(words)
}

/// The job `args` ask for, running `script`, submitted, with what sbatch
/// was asked to do after; or why the options make no job.
pub async fn submit(
    c: &mut Cluster,
    args: &Args,
    script: String,
) -> Result<std::result::Result<Submitted, String>> {
    // Dependencies name arrays and tasks: the queue says which jobs they
    // are, so that the controller gets them exactly (`exact_deps`).
    // An array's tasks have the ids that follow its own, one per index.
    let jobs = match &args.res.dependency {
        Some(d) => {
            let ids = named_ids(d)
                .into_iter()
                .flat_map(|id| id..=id.saturating_add(ArraySpec::MAX_TASKS as u64))
                .collect::<std::collections::BTreeSet<u64>>();
            c.by_ids(ids.into_iter().collect()).await?
        }
        None => Vec::new(),
    };
    let resolve = |id: u64, index: Option<u32>| -> Vec<u64> {
        let of_array: Vec<u64> = jobs
            .iter()
            .filter(|j| {
                j.array
                    .is_some_and(|t| t.job == id && index.is_none_or(|i| i == t.index))
            })
            .map(|j| j.id)
            .collect();
        match (index, of_array.is_empty()) {
            // A job the controller does not know: none (Slurm ignores it).
            (None, true) if jobs.iter().any(|j| j.id == id) => vec![id],
            (None, true) => Vec::new(),
            _ => of_array,
        }
    };
    let mut spec = match spec(args, script, &resolve) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // A partition the cluster has not: Slurm's sbatch says so, then its
    // controller's refusal.
    if let Some(p) = spec.partition.as_deref().filter(|p| !p.contains(',')) {
        if !c.config.partitions.iter().any(|q| q.name == p) {
            return Ok(Err(format!(
                "{NO_PARTITION}: {p}\nsbatch: error: {REFUSED}: Invalid partition name specified"
            )));
        }
    }
    if let Some(list) = spec.partition.as_deref().filter(|p| p.contains(',')) {
        spec.partition = Some(one_of(c, list, spec.cores).await?);
    }
    // Memory no node of the partition has, per node (`--mem`) or for one
    // task's cores (`--mem-per-cpu`): refused, as Slurm's controller
    // refuses it, rather than left pending for ever.
    let on_a_node = match (&args.res.mem, spec.program.as_deref()) {
        (Some(_), Some(p)) => p.mem_limit_mb,
        (_, p) => spec.mem_per_cpu_mb * u64::from(p.map_or(1, |p| p.cpus_per_task.max(1))),
    };
    let partition = spec
        .partition
        .clone()
        .unwrap_or_else(|| c.default_partition().to_string());
    let cfg = &c.config;
    let largest = cfg
        .partitions
        .iter()
        .find(|p| p.name == partition)
        .and_then(|p| p.nodes.iter().map(|&n| cfg.nodes[n].memory_mb).max());
    if largest.is_some_and(|m| on_a_node > m) {
        return Ok(Err(format!(
            "{NO_MEMORY}\nsbatch: error: {REFUSED}: Requested node configuration is not available"
        )));
    }
    // More tasks on a node (`--ntasks-per-node`) than any node's cores
    // hold: refused as Slurm refuses them, not run on fewer.
    let per_node = spec.program.as_deref().map_or(0, |p| {
        u64::from(p.tasks_per_node) * u64::from(p.cpus_per_task.max(1))
    });
    let roomiest = cfg
        .partitions
        .iter()
        .find(|p| p.name == partition)
        .and_then(|p| p.nodes.iter().map(|&n| cfg.nodes[n].cpus).max());
    if roomiest.is_some_and(|c| per_node > u64::from(c)) {
        return Ok(Err(format!(
            "{NO_CPUS}\nsbatch: error: {REFUSED}: Requested node configuration is not available"
        )));
    }
    // Whole nodes for `--exclusive` alone (or `=exclusive`); `=user`,
    // `=mcs` and `=oversubscribe` only say who may share them.
    if args
        .exclusive
        .as_deref()
        .is_some_and(|e| e.is_empty() || e.eq_ignore_ascii_case("exclusive"))
    {
        let cpus: Vec<u32> = cfg
            .partitions
            .iter()
            .find(|p| p.name == partition)
            .map(|p| p.nodes.iter().map(|&n| cfg.nodes[n].cpus).collect())
            .unwrap_or_default();
        whole_nodes(&mut spec, args, &cpus);
    }
    let ids = match c
        .call(&Request::Submit {
            specs: vec![spec],
            key: submit_key(),
        })
        .await?
    {
        Response::Submitted(ids) => ids,
        other => bail!("unexpected answer: {other:?}"),
    };
    let id = ids
        .first()
        .ok_or_else(|| anyhow!("Batch job submission failed: no job was made"))?;
    Ok(Ok(Submitted {
        id: *id,
        quiet: args.quiet,
        parsable: args.parsable,
        wait: args.wait,
    }))
}

/// Whether `word` is one of `names`, in any case, as Slurm reads its
/// options' values.
fn named_in(word: &str, names: &[&str]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(word))
}

/// `--exclusive` on a partition whose nodes have `cpus` cores each: the
/// job asks every core of as many nodes as hold its tasks whole (at
/// least `-N`'s, at most its range's), and without `-n` a node's worth of
/// tasks on each, as Slurm's gives it. A job no such nodes can hold, and
/// one on nodes of several sizes, is left as asked: the controller
/// refuses the first, and the second gets what it asked (docs/slurm.md).
fn whole_nodes(spec: &mut JobSpec, args: &Args, cpus: &[u32]) {
    let (Some(&size), Some(program)) = (cpus.first(), spec.program.as_deref_mut()) else {
        return;
    };
    let cpt = program.cpus_per_task.max(1);
    if size == 0 || cpt > size || cpus.iter().any(|&c| c != size) {
        return;
    }
    let on_each = size / cpt;
    let need = program.ntasks.div_ceil(on_each).max(1);
    let nodes = match spec.nodes {
        Some((least, most)) if most >= least && need > most => return,
        Some((least, _)) => least.max(need),
        None => need,
    };
    if args.ntasks.is_none() && args.ntasks_per_node.is_none() {
        program.ntasks = nodes.saturating_mul(on_each);
    }
    program.exclusive = true;
    spec.nodes = Some((nodes, nodes));
    spec.cores = nodes.saturating_mul(size);
    // Memory per node, shared by all its cores now.
    if program.mem_limit_mb > 0 && args.res.mem_per_cpu.is_none() {
        spec.mem_per_cpu_mb = program.mem_limit_mb.div_ceil(u64::from(size));
    }
}

/// The partition a job asking several (`-p a,b`) goes to: the first of
/// them with `cores` free now, else the first, where Slurm's controller
/// takes the one where it would start earliest. Each must exist, as
/// Slurm's sbatch checks.
async fn one_of(c: &mut Cluster, list: &str, cores: u32) -> Result<String> {
    let names: Vec<&str> = list.split(',').filter(|n| !n.is_empty()).collect();
    if let Some(bad) = names
        .iter()
        .find(|n| !c.config.partitions.iter().any(|p| p.name == **n))
    {
        bail!("{NO_PARTITION}: {bad}");
    }
    let nodes = c.nodes().await?;
    let free: std::collections::HashMap<&str, u64> = nodes
        .iter()
        .filter(|n| {
            matches!(
                n.state,
                formats::wire::NodeState::Idle | formats::wire::NodeState::Mixed
            )
        })
        .map(|n| {
            (
                n.name.as_str(),
                u64::from(n.cpus.saturating_sub(n.alloc_cpus)),
            )
        })
        .collect();
    let cfg = &c.config;
    let free_in = |name: &str| -> u64 {
        cfg.partitions
            .iter()
            .find(|p| p.name == name)
            .map_or(0, |p| {
                p.nodes
                    .iter()
                    .map(|&i| free.get(cfg.nodes[i].name.as_str()).copied().unwrap_or(0))
                    .sum()
            })
    };
    let chosen = names
        .iter()
        .find(|n| free_in(n) >= u64::from(cores))
        .or(names.first())
        .ok_or_else(|| anyhow!("invalid partition specified: {list}"))?;
    Ok(chosen.to_string())
}

/// The jobs and arrays a `--dependency` names (`12` of `afterok:12_3`),
/// those that read as ids; `dependencies` says what is wrong with others.
fn named_ids(text: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = text
        .split([',', '?'])
        .flat_map(|item| item.split(':').skip(1))
        .filter_map(|id| id.split(['_', '+']).next()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// How Slurm's sbatch begins a refusal by its controller.
const REFUSED: &str = "Batch job submission failed";
/// sbatch's words for a partition the cluster has not.
const NO_PARTITION: &str = "invalid partition specified";
/// sbatch's words for a `--gres` it cannot read.
const NO_MEMORY: &str = "Memory specification can not be satisfied";
const BAD_GRES: &str = "Invalid generic resource (gres) specification";
/// sbatch's words for a `--hint` it does not know.
const BAD_HINT: &str = "unrecognized --hint argument";
/// Fewer nodes than `-w` names: Slurm's sbatch says so and exits 1.
const BAD_NODE_COUNT: &str = "invalid number of nodes";
/// sbatch's words for more tasks on a node than its cores hold.
const NO_CPUS: &str = "CPU count per node can not be satisfied";

/// What `--dependency` says, as the controller takes it.
#[derive(Debug, Default, PartialEq)]
struct Dependencies {
    any: Vec<u64>,
    ok: Vec<u64>,
    not_ok: Vec<u64>,
    start: Vec<u64>,
    corr: Vec<u64>,
    /// (job, ns): `+MINUTES` after a job.
    delays: Vec<(u64, u64)>,
    singleton: bool,
    /// `?` between them: any one met is enough.
    any_of: bool,
    /// Each in the order asked, by the first job it names.
    order: Vec<(DepKind, u64)>,
}

/// The jobs a dependency names: job `id`, or the task of index `Some(i)`
/// of array `id`. An array's id names every task of it.
type Resolve<'a> = &'a dyn Fn(u64, Option<u32>) -> Vec<u64>;

/// `--dependency`: `after` (started), `afterany`, `afterok`,
/// `afternotok` with `:`-separated jobs (an array's id: every task of it;
/// `A_I`: one task), which `resolve` finds, `aftercorr` with arrays (each
/// task waits for the one of its index), and `singleton`; separated by
/// `,` (all must hold) or `?` (any one), not both. A job may have a delay
/// in minutes (`after:12+5`). A job the controller does not know is left
/// out, as Slurm leaves it out; what does not read as a dependency is
/// Slurm's "Job dependency problem".
fn dependencies(text: &str, resolve: Resolve<'_>) -> Result<Dependencies> {
    let problem = || anyhow!("{REFUSED}: Job dependency problem");
    let mut d = Dependencies {
        any_of: text.contains('?'),
        ..Default::default()
    };
    if d.any_of && text.contains(',') {
        return Err(problem());
    }
    for item in text.split([',', '?']).filter(|s| !s.is_empty()) {
        let mut parts = item.split(':');
        let kind = parts.next().unwrap_or("");
        if kind == "singleton" {
            d.singleton = true;
            d.order.push((DepKind::Singleton, 0));
            continue;
        }
        let (list, which) = match kind {
            "after" => (&mut d.start, DepKind::After),
            "afterany" => (&mut d.any, DepKind::AfterAny),
            "afterok" => (&mut d.ok, DepKind::AfterOk),
            "afternotok" => (&mut d.not_ok, DepKind::AfterNotOk),
            "aftercorr" => (&mut d.corr, DepKind::AfterCorr),
            "afterburstbuffer" | "expand" => {
                bail!("--dependency={kind} is not supported by clemu yet")
            }
            _ => return Err(problem()),
        };
        let mut named = false;
        for word in parts {
            named = true;
            let (id, delay_ns) = match word.split_once('+') {
                Some((id, minutes)) => {
                    let m: u64 = minutes.parse().map_err(|_| problem())?;
                    (id, m.saturating_mul(60_000_000_000))
                }
                None => (word, 0),
            };
            if kind == "aftercorr" {
                // The array itself: the controller pairs the tasks (and
                // refuses a job it does not know).
                let array = id.parse().map_err(|_| problem())?;
                list.push(array);
                d.order.push((which, array));
                continue;
            }
            let jobs = match id.split_once('_') {
                Some((a, i)) => resolve(
                    a.parse().map_err(|_| problem())?,
                    Some(i.parse().map_err(|_| problem())?),
                ),
                None => resolve(id.parse().map_err(|_| problem())?, None),
            };
            // A job named twice in one kind counts once, as first named.
            let jobs: Vec<u64> = jobs.into_iter().filter(|j| !list.contains(j)).collect();
            if delay_ns > 0 {
                d.delays.extend(jobs.iter().map(|&j| (j, delay_ns)));
            }
            if let Some(&first) = jobs.first() {
                d.order.push((which, first));
            }
            list.extend(jobs);
        }
        if !named {
            return Err(problem());
        }
    }
    Ok(d)
}

/// The job `args` describe, running `script`.
fn spec(args: &Args, script: String, resolve: Resolve<'_>) -> Result<JobSpec> {
    // -N MIN[-MAX]
    let span: Option<(u32, u32)> = match &args.nodes {
        None => None,
        Some(n) => {
            let bad = || anyhow!("Invalid node count specification: {n}");
            let (least, most) = match n.split_once('-') {
                Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
                None => {
                    let a = n.parse().map_err(|_| bad())?;
                    (a, a)
                }
            };
            // Worded, and exiting, as Slurm 22.05's sbatch: the first its
            // controller's refusal, the second its own.
            if least == 0 {
                bail!("{REFUSED}: Node count specification invalid");
            }
            if most < least {
                bail!("Maximum node count {most} is less than minimum node count {least}");
            }
            Some((least, most))
        }
    };
    // --ntasks-per-node T: without -N, as many nodes as the tasks need at
    // T each (`-n 3 --ntasks-per-node=1` is three nodes); more tasks than
    // the nodes asked hold at T each are refused, as Slurm refuses them.
    let span = match (args.ntasks_per_node.filter(|&t| t > 0), span, args.ntasks) {
        (Some(t), None, Some(n)) => Some((n.div_ceil(t), n.div_ceil(t))),
        (Some(t), Some((least, _)), Some(n)) if u64::from(n) > u64::from(least) * u64::from(t) => {
            bail!("{REFUSED}: Requested node configuration is not available")
        }
        _ => span,
    };
    // -w: at least as many nodes as it names.
    let mut required = match &args.nodelist {
        Some(l) => named_nodes(l)?,
        None => Vec::new(),
    };
    let span = match (u32::try_from(required.len()).unwrap_or(u32::MAX), span) {
        (0, span) => span,
        (k, None) => Some((k, 0)),
        (k, Some((_, most))) if most < k => bail!("{BAD_NODE_COUNT} (-N {k}-{most})"),
        (k, Some((least, most))) => Some((least.max(k), most)),
    };
    let nodes = span.map(|(least, _)| least);
    let cpus_per_task = args.cpus_per_task.unwrap_or(1).max(1);
    let too_many = || anyhow!("Invalid number of tasks or CPUs per task: too many");
    let per_node = match args.ntasks_per_node {
        Some(t) => Some(t.checked_mul(nodes.unwrap_or(1)).ok_or_else(too_many)?),
        None => None,
    };
    let ntasks = args.ntasks.or(per_node).or(nodes).unwrap_or(1).max(1);
    // Fewer tasks than nodes: as many nodes as tasks, as Slurm's sbatch.
    let span = span.map(|(least, most)| {
        if ntasks < least {
            eprintln!(
                "sbatch: Warning: can't run {ntasks} processes on {least} nodes, setting nnodes to {ntasks}"
            );
        }
        (least.min(ntasks), most.min(ntasks))
    });
    // Then only the first nodes named, as many as its tasks.
    required.truncate(ntasks as usize);
    let cores = ntasks.checked_mul(cpus_per_task).ok_or_else(too_many)?;
    let mem_per_cpu_mb = match (&args.res.mem_per_cpu, &args.res.mem) {
        (Some(m), _) => {
            text::parse_mem_mb(m).ok_or_else(|| anyhow!("Invalid --mem-per-cpu specification"))?
        }
        // Per node: shared by the cores it holds there.
        (None, Some(m)) => text::parse_mem_mb(m)
            .ok_or_else(|| anyhow!("Invalid --mem specification"))?
            .div_ceil(u64::from(cores.div_ceil(nodes.unwrap_or(1).max(1)))),
        (None, None) => 0,
    };
    // What sbatch itself puts in the job's environment, as Slurm's does:
    // only what was asked (a job without -n has no SLURM_NTASKS).
    let mut env = exported(args.export.as_deref());
    let mut asked = |name: &str, value: String| env.push((name.to_string(), value));
    if args.ntasks.is_some() || per_node.is_some() {
        asked("SLURM_NTASKS", ntasks.to_string());
        asked("SLURM_NPROCS", ntasks.to_string());
    }
    if args.cpus_per_task.is_some() {
        asked("SLURM_CPUS_PER_TASK", cpus_per_task.to_string());
    }
    if let Some(t) = args.ntasks_per_node {
        asked("SLURM_NTASKS_PER_NODE", t.to_string());
    }
    if let Some(h) = &args.hint {
        asked("SLURM_HINT", h.clone());
    }
    // Who submitted it, and from where: the job's own, as Slurm's.
    asked("SLURM_JOB_UID", nix::unistd::getuid().to_string());
    asked("SLURM_JOB_GID", nix::unistd::getgid().to_string());
    // The account and QOS it is charged to, as a Slurm with accounting
    // says them (its users' only account: `sacctmgr`).
    if let Some(account) = crate::accounts::account_of(&text::user_name()) {
        asked("SLURM_JOB_ACCOUNT", account.to_string());
        asked("SLURM_JOB_QOS", crate::accounts::QOS.to_string());
    }
    if let Ok(host) = nix::unistd::gethostname() {
        asked("SLURM_SUBMIT_HOST", host.to_string_lossy().into_owned());
    }
    match (&args.res.mem_per_cpu, &args.res.mem) {
        (Some(_), _) => asked("SLURM_MEM_PER_CPU", mem_per_cpu_mb.to_string()),
        // `--mem=0` (all of each node's) is said by none, as on Slurm.
        (None, Some(m)) => match text::parse_mem_mb(m).unwrap_or_default() {
            0 => {}
            mb => asked("SLURM_MEM_PER_NODE", mb.to_string()),
        },
        (None, None) => {}
    }
    // Whole nodes are not kept for the job (docs/slurm.md), but what
    // Slurm's sbatch refuses is refused.
    if let Some(how) = &args.exclusive {
        if !named_in(how, &["", "exclusive", "oversubscribe", "user", "mcs"]) {
            bail!("Invalid --exclusive specification");
        }
    }
    if let Some(h) = &args.hint {
        const HINTS: [&str; 4] = [
            "compute_bound",
            "memory_bound",
            "multithread",
            "nomultithread",
        ];
        if !named_in(h, &HINTS) {
            bail!("{BAD_HINT} \"{h}\", see --hint=help");
        }
    }
    // Slurm reads the first letter alone.
    let open_append = match args.open_mode.as_deref().map(|m| m.chars().next()) {
        None => false,
        Some(Some('a' | 'A')) => true,
        Some(Some('t' | 'T')) => false,
        Some(_) => bail!("Invalid --open-mode specification"),
    };
    // Mail is not sent, but a type Slurm does not know is refused as
    // Slurm's sbatch refuses it.
    if let Some(types) = &args.mail_type {
        const MAIL: [&str; 13] = [
            "NONE",
            "BEGIN",
            "END",
            "FAIL",
            "REQUEUE",
            "ALL",
            "INVALID_DEPEND",
            "STAGE_OUT",
            "TIME_LIMIT",
            "TIME_LIMIT_90",
            "TIME_LIMIT_80",
            "TIME_LIMIT_50",
            "ARRAY_TASKS",
        ];
        // Empty items are skipped (`ALL,,END`), as strtok skips them.
        let mut items = types.split(',').filter(|t| !t.is_empty()).peekable();
        if items.peek().is_none() || !items.all(|t| named_in(t, &MAIL)) {
            bail!("Invalid --mail-type specification");
        }
    }
    let walltime_ns = match &args.res.time {
        Some(t) => text::parse_time_limit(t)
            .and_then(|s| s.checked_mul(1_000_000_000))
            .ok_or_else(|| anyhow!("Invalid --time specification"))?,
        None => 0,
    };
    let mut gres = Vec::new();
    if let Some(g) = &args.res.gres {
        for item in g.split(',').filter(|s| !s.is_empty()) {
            let parts: Vec<&str> = item.split(':').collect();
            let (name, count) = match parts.as_slice() {
                [name] => (*name, 1),
                [name, n] | [name, _, n] => (*name, n.parse().map_err(|_| anyhow!("{BAD_GRES}"))?),
                _ => bail!("{BAD_GRES}"),
            };
            gres.push((name.to_string(), count));
        }
    }
    // clemu gives generic resources per node: --gpus asks them of each.
    if let Some(g) = args.res.gpus.as_ref().or(args.gpus_per_node.as_ref()) {
        let n = g.rsplit(':').next().and_then(|n| n.parse().ok());
        gres.push((
            "gpu".into(),
            n.ok_or_else(|| anyhow!("Invalid --gpus specification"))?,
        ));
    }
    let deps = match &args.res.dependency {
        Some(d) => dependencies(d, resolve)?,
        None => Dependencies::default(),
    };
    let begin_ns = match &args.begin {
        Some(b) => Some(
            // Nothing said (0) is no time either, as Slurm's sbatch has it.
            text::parse_begin(b)
                .inspect_err(|e| eprintln!("{e}"))
                .ok()
                .filter(|&s| s != 0)
                .and_then(|s| s.checked_mul(1_000_000_000))
                .ok_or_else(|| anyhow!("Invalid --begin specification"))?,
        ),
        None => None,
    };
    let array = match &args.array {
        Some(a) => Some(
            ArraySpec::parse(a)
                .map_err(|_| anyhow!("{REFUSED}: Invalid job array specification"))?,
        ),
        None => None,
    };
    if let Some(a) = &array {
        env.extend(array_env(a));
    }
    let here = std::env::current_dir().context("the current directory")?;
    let workdir = match &args.res.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => here.join(d).display().to_string(),
        None => here.display().to_string(),
    };
    Ok(JobSpec {
        cores,
        mem_per_cpu_mb,
        runtime_ns: 0,
        walltime_ns,
        partition: args.res.partition.clone(),
        // Slurm names a job after its script, `wrap` or `sbatch`.
        name: Some(args.job_name.clone().unwrap_or_else(|| {
            match (&args.wrap, args.script.first()) {
                (Some(_), _) => "wrap".into(),
                (None, Some(p)) => p.rsplit('/').next().unwrap_or(p).to_string(),
                (None, None) => "sbatch".into(),
            }
        })),
        after: deps.any,
        after_ok: deps.ok,
        after_not_ok: deps.not_ok,
        after_start: deps.start,
        after_corr: deps.corr,
        delays: deps.delays,
        any_dep: deps.any_of,
        dep_order: deps.order,
        singleton: deps.singleton,
        begin_ns,
        array,
        gres,
        program: Some(Box::new(Program {
            script,
            workdir,
            env,
            stdout: args.output.clone().unwrap_or_default(),
            stderr: args.error.clone().unwrap_or_default(),
            user: text::user_name(),
            signal: args
                .signal
                .as_deref()
                .map(text::signal_spec)
                .transpose()
                .map_err(anyhow::Error::msg)?,
            ntasks,
            cpus_per_task,
            tasks_per_node: args.ntasks_per_node.unwrap_or(0),
            comment: args.res.comment.clone().unwrap_or_default(),
            // What follows the script's path is its arguments.
            args: args.script.iter().skip(1).cloned().collect(),
            // --mem is per node, whatever the node count: the bound of
            // the processes on the job's first node. Else the controller
            // sets it at the start, from the memory held per core there.
            mem_limit_mb: match (&args.res.mem_per_cpu, &args.res.mem) {
                (None, Some(m)) => text::parse_mem_mb(m).unwrap_or_default(),
                _ => 0,
            },
            command: match (&args.wrap, args.script.first()) {
                // As Slurm's sbatch names it: a bare name found here (made
                // absolute), a path with a slash as given (`../run.sh`).
                (None, Some(path)) if path.contains('/') => path.clone(),
                (None, Some(path)) => here.join(path).display().to_string(),
                _ => String::new(),
            },
            partition_limit: false,
            exclusive: false,
            open_append,
            nodelist: formats::nodeset::fold(required.iter().map(String::as_str)),
            exclude: match &args.exclude {
                Some(x) => formats::nodeset::fold(named_nodes(x)?.iter().map(String::as_str)),
                None => String::new(),
            },
        })),
        hold: args.hold,
        nodes: span,
        exact_deps: true,
        requeue: match (args.requeue, args.no_requeue) {
            (_, true) => Some(false),
            (true, _) => Some(true),
            _ => None,
        },
        ..Default::default()
    })
}

/// The nodes `-w` or `-x` names, in order, each once: a node set
/// (`node[1-3],node7`), or, with a slash, a file of names (as Slurm
/// reads one). Names no node has are the controller's to refuse.
pub(crate) fn named_nodes(list: &str) -> Result<Vec<String>> {
    let bad = || anyhow!("{REFUSED}: Invalid node name specified");
    let text = if list.contains('/') {
        std::fs::read_to_string(list).with_context(|| format!("{list}: cannot read it"))?
    } else {
        list.to_string()
    };
    let words: Vec<&str> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let set = formats::nodeset::parse(&words.join(",")).map_err(|_| bad())?;
    let mut names = formats::nodeset::expand(&set);
    names.sort_by_cached_key(|a| numeric_order(a));
    names.dedup();
    if names.is_empty() {
        return Err(bad());
    }
    Ok(names)
}

/// A node name as a key that orders `node2` before `node10`.
fn numeric_order(name: &str) -> (String, u64, usize) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (stem.to_string(), number.parse().unwrap_or(0), digits)
}

/// What every task of array `a` is told of it, as Slurm tells it: how
/// many tasks, the lowest and highest index, and the step between
/// indices (1 unless they are evenly spaced).
fn array_env(a: &ArraySpec) -> Vec<(String, String)> {
    let (min, max) = (
        a.indices.iter().min().copied().unwrap_or(0),
        a.indices.iter().max().copied().unwrap_or(0),
    );
    let mut sorted = a.indices.clone();
    sorted.sort_unstable();
    let gaps: Vec<u32> = sorted.windows(2).map(|w| w[1] - w[0]).collect();
    let step = match gaps.first() {
        Some(&g) if gaps.iter().all(|&x| x == g) => g,
        _ => 1,
    };
    [
        ("SLURM_ARRAY_TASK_COUNT", a.indices.len() as u32),
        ("SLURM_ARRAY_TASK_MIN", min),
        ("SLURM_ARRAY_TASK_MAX", max),
        ("SLURM_ARRAY_TASK_STEP", step),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The environment `--export` passes: everything (`ALL`, the default),
/// or (`NONE`, or only variables named) a login's environment with the
/// variables named, with values given (`A=1`) or taken from here;
/// `ALL,A=1` adds to everything. This is the job's whole environment
/// before Slurm's variables: the agent adds none of its own.
fn exported(export: Option<&str>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let items: Vec<&str> = export.unwrap_or("ALL").split(',').collect();
    if items.iter().any(|i| i.eq_ignore_ascii_case("ALL")) {
        env.extend(std::env::vars());
    } else {
        env.extend(login_env());
    }
    // As Slurm 22.05's sbatch says it: what --export was, unless it was
    // `ALL` alone (the default), even `ALL,A=1`.
    if let Some(e) = export.filter(|e| !e.eq_ignore_ascii_case("ALL")) {
        env.push(("SLURM_GET_USER_ENV".into(), "1".into()));
        env.push(("SLURM_EXPORT_ENV".into(), e.to_string()));
    }
    for item in items {
        if item.eq_ignore_ascii_case("ALL") || item.eq_ignore_ascii_case("NONE") || item.is_empty()
        {
            continue;
        }
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match std::env::var(item) {
                Ok(v) => (item.to_string(), v),
                Err(_) => continue,
            },
        };
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    env
}

/// What a job gets without the submitter's environment, as Slurm gives
/// it the user's login environment (`--get-user-env`): who the user is,
/// their home and shell, and a plain `PATH` with this cluster's commands
/// first (and `CLEMU_CONF`), so that its `srun` is clemu's.
fn login_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(u) = crate::users::by_uid(nix::unistd::getuid().as_raw()) {
        env.push(("HOME".into(), u.home));
        env.push(("USER".into(), u.name.clone()));
        env.push(("LOGNAME".into(), u.name));
        env.push(("SHELL".into(), u.shell));
    }
    let mut path = String::new();
    if let Some(conf) = std::env::var_os(crate::cluster::CONF_VAR) {
        let conf = std::path::PathBuf::from(conf);
        if let Some(dir) = conf.parent() {
            path = format!("{}:", dir.join("bin").display());
        }
        env.push((crate::cluster::CONF_VAR.into(), conf.display().to_string()));
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    env.push(("PATH".into(), path));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_tasks(id: u64, i: Option<u32>) -> Vec<u64> {
        i.map_or(vec![id], |_| Vec::new())
    }

    #[test]
    fn an_arrays_tasks_are_told_its_count_bounds_and_step_as_on_slurm() {
        let told = |spec: &str| -> Vec<String> {
            array_env(&ArraySpec::parse(spec).unwrap())
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        // Measured on Slurm 22.05: COUNT, MIN, MAX, STEP.
        assert_eq!(told("1,3,5-7"), ["5", "1", "7", "1"]);
        assert_eq!(told("0-15:4"), ["4", "0", "12", "4"]);
        assert_eq!(told("2-4%1"), ["3", "2", "4", "1"]);
        assert_eq!(told("5"), ["1", "5", "5", "1"]);
    }

    #[test]
    fn a_dependency_names_its_jobs_and_arrays() {
        assert_eq!(
            named_ids("afterok:12_3:7,afterany:12,singleton,afternotok:x:9_y"),
            [7, 9, 12]
        );
        assert!(named_ids("singleton").is_empty());
    }

    #[test]
    fn directives_stop_at_the_first_command() {
        let s = "#!/bin/sh\n#SBATCH -J fit\n\n# a comment\n#SBATCH --time=5 # five minutes\n\
                 echo hi\n#SBATCH -p late\n";
        assert_eq!(directives(s).unwrap(), ["-J", "fit", "--time=5"]);
        // Indented, a directive is a comment.
        let s = "#!/bin/sh\n#SBATCH -J fit\n  #SBATCH -J not\necho hi\n";
        assert_eq!(directives(s).unwrap(), ["-J", "fit"]);
    }

    #[test]
    fn the_command_line_wins_over_the_script() {
        let argv = ["sbatch", "-J", "fit", "-J", "cli", "s.sh"];
        let a = Args::try_parse_from(argv).unwrap();
        assert_eq!(a.job_name.as_deref(), Some("cli"));
        assert_eq!(a.script, ["s.sh"]);
    }

    #[test]
    fn tasks_cores_memory_and_limits_make_the_job() {
        let a = Args::try_parse_from([
            "sbatch",
            "-n",
            "4",
            "-c",
            "2",
            "--mem",
            "800",
            "-t",
            "1:00:00",
            "--gres",
            "gpu:2",
            "--comment",
            "c1",
            "--wrap",
            "true",
        ])
        .unwrap();
        let s = spec(&a, wrapped("true"), &no_tasks).unwrap();
        assert_eq!(s.cores, 8);
        assert_eq!(s.mem_per_cpu_mb, 100);
        assert_eq!(s.walltime_ns, 3_600_000_000_000);
        assert_eq!(s.gres, [("gpu".to_string(), 2)]);
        assert_eq!(s.name.as_deref(), Some("wrap"));
        let p = s.program.unwrap();
        assert_eq!((p.ntasks, p.cpus_per_task), (4, 2));
        assert_eq!(p.comment, "c1");
    }

    #[test]
    fn exclusive_asks_whole_nodes_of_a_partition_of_one_size() {
        let whole = |argv: &[&str], cpus: &[u32]| {
            let mut all = vec!["sbatch", "--exclusive"];
            all.extend(argv);
            all.extend(["--wrap", "true"]);
            let a = Args::try_parse_from(all).unwrap();
            let mut s = spec(&a, wrapped("true"), &no_tasks).unwrap();
            whole_nodes(&mut s, &a, cpus);
            let p = s.program.unwrap();
            (s.nodes, s.cores, p.ntasks, p.exclusive)
        };
        // As many 4-core nodes as hold its tasks whole, every core of each;
        // without -n, a node's worth of tasks.
        assert_eq!(whole(&[], &[4, 4]), (Some((1, 1)), 4, 4, true));
        assert_eq!(whole(&["-n", "6"], &[4, 4]), (Some((2, 2)), 8, 6, true));
        assert_eq!(
            whole(&["-n", "2", "-c", "3"], &[4, 4]),
            (Some((2, 2)), 8, 2, true)
        );
        assert_eq!(
            whole(&["-N", "2", "-c", "2"], &[4, 4]),
            (Some((2, 2)), 8, 4, true)
        );
        // At least -N's nodes, more within its range if its tasks need
        // them.
        assert_eq!(
            whole(&["-N", "2-4", "-n", "12"], &[4, 4]),
            (Some((3, 3)), 12, 12, true)
        );
        // What no such nodes hold, or nodes of several sizes: left as asked.
        assert!(!whole(&["-N", "2", "-n", "12"], &[4, 4]).3);
        assert!(!whole(&["-c", "8"], &[4, 4]).3);
        assert_eq!(whole(&["-n", "2"], &[4, 8]), (None, 2, 2, false));
    }

    #[test]
    fn sizes_past_what_a_job_can_hold_are_refused_not_wrapped() {
        let a = Args::try_parse_from([
            "sbatch", "-n", "65536", "-c", "65536", "--mem", "1G", "--wrap", "true",
        ])
        .unwrap();
        assert!(spec(&a, wrapped("true"), &no_tasks).is_err());
        let a =
            Args::try_parse_from(["sbatch", "--begin", "2300-01-01", "--wrap", "true"]).unwrap();
        assert!(spec(&a, wrapped("true"), &no_tasks).is_err());
    }

    #[test]
    fn dependencies_read_as_slurm_writes_them() {
        // Array 4 has tasks 4 (index 0) and 5 (index 1).
        let resolve = |id: u64, i: Option<u32>| match (id, i) {
            (4, None) => vec![4, 5],
            (4, Some(0)) => vec![4],
            (4, Some(1)) => vec![5],
            (_, Some(_)) | (99, None) => vec![],
            (id, None) => vec![id],
        };
        assert_eq!(
            dependencies(
                "afterany:3:4_1:4_0,afterok:4,afternotok:7:8,singleton",
                &resolve
            )
            .unwrap(),
            Dependencies {
                any: vec![3, 5, 4],
                ok: vec![4, 5],
                not_ok: vec![7, 8],
                singleton: true,
                // In the order asked, each by the first job it names.
                order: vec![
                    (DepKind::AfterAny, 3),
                    (DepKind::AfterAny, 5),
                    (DepKind::AfterAny, 4),
                    (DepKind::AfterOk, 4),
                    (DepKind::AfterNotOk, 7),
                    (DepKind::AfterNotOk, 8),
                    (DepKind::Singleton, 0),
                ],
                ..Default::default()
            }
        );
        assert_eq!(
            dependencies("after:3:4_1?aftercorr:4?afterok:7", &resolve).unwrap(),
            Dependencies {
                start: vec![3, 5],
                corr: vec![4],
                ok: vec![7],
                any_of: true,
                order: vec![
                    (DepKind::After, 3),
                    (DepKind::After, 5),
                    (DepKind::AfterCorr, 4),
                    (DepKind::AfterOk, 7),
                ],
                ..Default::default()
            }
        );
        // A delay in minutes, on an array's every task; jobs the
        // controller does not know (99, task 9 of 9) are left out.
        assert_eq!(
            dependencies("after:3+5:4+1:99:3,afterok:99:9_9,afterany:7+2", &resolve).unwrap(),
            Dependencies {
                start: vec![3, 4, 5],
                any: vec![7],
                delays: vec![
                    (3, 300_000_000_000),
                    (4, 60_000_000_000),
                    (5, 60_000_000_000),
                    (7, 120_000_000_000)
                ],
                // A job named twice, or not known, is not named again.
                order: vec![
                    (DepKind::After, 3),
                    (DepKind::After, 4),
                    (DepKind::AfterAny, 7)
                ],
                ..Default::default()
            }
        );
        for bad in [
            "afterok:1?afterany:2,afterok:3",
            "aftercorr:4_1",
            "afterany",
            "afterok:x",
            "bogus:3",
            "after:3+x",
        ] {
            let e = dependencies(bad, &resolve).unwrap_err().to_string();
            assert_eq!(
                e, "Batch job submission failed: Job dependency problem",
                "{bad}"
            );
        }
        // The singleton is one of the dependencies `?` joins.
        assert_eq!(
            dependencies("singleton?afterok:1", &resolve).unwrap(),
            Dependencies {
                ok: vec![1],
                singleton: true,
                any_of: true,
                order: vec![(DepKind::Singleton, 0), (DepKind::AfterOk, 1)],
                ..Default::default()
            }
        );
    }

    #[test]
    fn export_none_passes_a_logins_environment_and_names_pass_their_values() {
        let none = exported(Some("NONE"));
        let names: Vec<&str> = none.iter().map(|(k, _)| k.as_str()).collect();
        assert!(
            names.contains(&"HOME") && names.contains(&"PATH"),
            "{names:?}"
        );
        assert!(none.contains(&("SLURM_EXPORT_ENV".into(), "NONE".into())));
        // Nothing of the submitter's own beyond a login's.
        let login = [
            "HOME",
            "USER",
            "LOGNAME",
            "SHELL",
            "PATH",
            "CLEMU_CONF",
            "SLURM_GET_USER_ENV",
            "SLURM_EXPORT_ENV",
        ];
        assert!(names.iter().all(|n| login.contains(n)), "{names:?}");
        let named = exported(Some("NONE,A=1"));
        assert!(named.contains(&("A".to_string(), "1".to_string())));
        assert_eq!(named.len(), none.len() + 1);
        assert!(exported(None).iter().any(|(k, _)| k == "PATH"));
        // Slurm's own two say what --export was, unless it was ALL alone.
        let says = |e: Option<&str>| {
            let env = exported(e);
            let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            (get("SLURM_EXPORT_ENV"), get("SLURM_GET_USER_ENV"))
        };
        for alone in [None, Some("ALL"), Some("all")] {
            let (export, get) = says(alone);
            // The submitter's own, if it runs in a job, passes as any.
            assert_eq!(
                (export, get),
                (
                    std::env::var("SLURM_EXPORT_ENV").ok(),
                    std::env::var("SLURM_GET_USER_ENV").ok()
                ),
                "{alone:?}"
            );
        }
        assert_eq!(
            says(Some("ALL,BAR=2")),
            (Some("ALL,BAR=2".into()), Some("1".into()))
        );
    }
}
