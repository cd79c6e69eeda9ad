//! `srun` inside a job's allocation: a job step that runs a command once
//! per task, each with its `SLURM_PROCID`, `SLURM_LOCALID` and
//! `SLURM_STEPID` (`-l`: its lines labelled with its number), and returns
//! the highest exit status of them. Outside a job, srun first makes the
//! allocation, a job of its own that runs the step ([`allocation`]).
//!
//! Each task is told its node among the job's as Slurm's srun would lay
//! it out ([`layout`]: `-N`, `-w`, `-x`, the job's cores on each node),
//! but all run where the batch script runs, as children of this process:
//! sigsleep, which supervises the job, suspends, resumes and kills them
//! with the rest of the job. Steps are numbered from 0 in
//! each job, in the job's own directory (`CLEMU_JOB_DIR`, which the agent
//! sets and removes).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{bail, Context, Result};
use clap::Parser;
use formats::wire::StepInfo;

pub mod allocation;
pub mod layout;

#[derive(Debug, Parser)]
#[command(name = "srun", infer_long_args = true, disable_version_flag = true)]
pub struct Args {
    #[arg(short = 'n', long)]
    ntasks: Option<u32>,
    #[arg(short = 'o', long)]
    output: Option<String>,
    #[arg(short = 'e', long)]
    error: Option<String>,
    /// Accepted: task output is never buffered by srun here.
    #[arg(short = 'u', long)]
    unbuffered: bool,
    /// Inside a job, the step's nodes among the job's ([`layout`]);
    /// outside, the allocation's.
    #[arg(short = 'N', long)]
    nodes: Option<String>,
    #[arg(short = 'c', long = "cpus-per-task")]
    cpus_per_task: Option<u32>,
    /// Nodes the step (or the allocation, outside a job) must have.
    #[arg(short = 'w', long)]
    nodelist: Option<String>,
    /// Nodes it must not have.
    #[arg(short = 'x', long)]
    exclude: Option<String>,
    /// Outside a job, the allocation's; inside one, honoured when it
    /// agrees with the tasks and the step's nodes, as Slurm's srun.
    #[arg(long = "ntasks-per-node")]
    ntasks_per_node: Option<u32>,
    #[arg(short = 'J', long = "job-name")]
    job_name: Option<String>,
    #[arg(long)]
    mpi: Option<String>,
    #[arg(long)]
    export: Option<String>,
    /// The allocation's options, outside a job; inside one, `-D` is where
    /// the tasks run, and the others are taken.
    #[command(flatten)]
    alloc: allocation::Options,
    #[arg(long = "cpu-bind")]
    cpu_bind: Option<String>,
    /// Taken, and only told to the tasks (`SLURM_CPUS_ON_NODE`): a step's
    /// tasks run bound to no CPUs, so steps share the job's CPUs whatever
    /// these say
    /// (`srun -n 1 --exact CMD &`, a task farm, starts every step at once
    /// where Slurm starts as many as the job's CPUs hold, and the others
    /// as they free). Outside a job, `--exclusive` is the allocation's, as
    /// sbatch's: taken, with no effect.
    #[arg(long)]
    exact: bool,
    #[arg(long)]
    overlap: bool,
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    exclusive: Option<String>,
    #[arg(short = 'l', long)]
    label: bool,
    /// The command and its arguments ([`crate::argv`] finds where they
    /// begin).
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

/// The environment variable naming the job's own directory.
pub const JOB_DIR_VAR: &str = "CLEMU_JOB_DIR";

pub fn main(argv: &[String]) -> Result<u8> {
    let args: Args = crate::argv::parse(argv)?;
    // Refused as Slurm's srun refuses them.
    if args.command.is_empty() {
        eprintln!("srun: fatal: No command given to execute.");
        return Ok(1);
    }
    for (value, option) in [
        (args.ntasks, "--ntasks"),
        (args.cpus_per_task, "--cpus-per-task"),
        (args.ntasks_per_node, "--ntasks-per-node"),
    ] {
        if value == Some(0) {
            eprintln!("srun: error: Invalid numeric value \"0\" for {option}.");
            return Ok(1);
        }
    }
    let Ok(job) = std::env::var("SLURM_JOB_ID") else {
        return allocation::run(args);
    };
    if job.parse::<u64>().is_err() {
        eprintln!("srun: error: Invalid numeric value \"{job}\" for --jobid.");
        return Ok(1);
    }
    // A job's own directory is there while it runs, and only then: a
    // SLURM_JOB_ID without it (an ended job's, or one set by hand) is
    // refused as Slurm's srun refuses a job its controller does not
    // have running, rather than run on this host.
    let Some(dir) = std::env::var_os(JOB_DIR_VAR)
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
    else {
        eprintln!(
            "srun: error: Unable to confirm allocation for job {job}: Invalid job id specified\n\
             srun: Check SLURM_JOB_ID environment variable. Expired or invalid job {job}"
        );
        return Ok(1);
    };
    let step_dir = args.alloc.step_dir()?;
    let Step { job: held, layout } = match step_of(&args, &job)? {
        Ok(s) => s,
        Err(refused) => {
            for line in refused.lines {
                eprintln!("srun: error: {line}");
            }
            return Ok(refused.code);
        }
    };
    for w in &layout.warnings {
        eprintln!("srun: {w}");
    }
    let tasks = layout.tasks();
    let ntasks = tasks.len() as u32;
    let step_nodes: Vec<&str> = layout
        .nodes
        .iter()
        .map(|&(i, _)| held.nodes[i].as_str())
        .collect();
    let step_nodelist = formats::nodeset::fold(step_nodes.iter().copied());
    let tasks_per_node = layout.tasks_per_node();
    // Each node's tasks, by number (`SLURM_GTIDS`).
    let mut first = 0u32;
    let gtids: Vec<String> = layout
        .nodes
        .iter()
        .map(|&(_, n)| {
            let ids: Vec<String> = (first..first + n).map(|t| t.to_string()).collect();
            first += n;
            ids.join(",")
        })
        .collect();
    // A step that asks its cores (`-c`, `--exact`) has only those on
    // each node; else every core the job has there, as Slurm 22.05.
    let cores_on = |i: usize| -> u32 {
        let (node, n) = layout.nodes[i];
        let all = held.cpus.get(node).copied().unwrap_or(1);
        match args.cpus_per_task {
            Some(c) => (u64::from(n) * u64::from(c.max(1))).min(u64::from(all)) as u32,
            None if args.exact => n.min(all),
            None => all,
        }
    };
    // As Slurm's srun says how it dealt them: one per node at most is
    // `cyclic`, more is `block`.
    let distribution = if ntasks as usize <= step_nodes.len() {
        "cyclic"
    } else {
        "block"
    };
    // SAFETY: umask(2) cannot fail; the mask is put back at once, and
    // this program starts no thread that creates files meanwhile.
    let umask = unsafe {
        let mask = libc::umask(0);
        libc::umask(mask);
        format!("{mask:04o}")
    };
    let step = next_step(&dir)?;
    // Who runs the step, for `scancel JOB.STEP`: this process, and when
    // it started (its pid alone could be another's by then).
    let me = std::process::id() as i32;
    let _ = std::fs::write(
        dir.join(format!("step-{step}.srun")),
        format!("{me} {}\n", sigsleep::tree::start_ticks(me)),
    );
    // What sacct shows of the step (`JOB.N`): written now, so that a step
    // the job's end cuts short is known, and again at its end.
    let mut info = StepInfo {
        id: step,
        name: args.command[0]
            .rsplit('/')
            .next()
            .unwrap_or(&args.command[0])
            .to_string(),
        start_ns: wall_ns(),
        end_ns: 0,
        ntasks,
        nodes: step_nodelist.clone(),
        cpus: u32::try_from(
            (0..layout.nodes.len())
                .map(|i| u64::from(cores_on(i)))
                .sum::<u64>(),
        )
        .unwrap_or(u32::MAX),
        exit: (0, 0),
        cpu_ns: 0,
        max_rss_kib: 0,
        cancelled: false,
    };
    let note = |info: &StepInfo| {
        // A step file that cannot be written loses sacct's line, not the
        // step.
        let _ = std::fs::write(dir.join(format!("step-{step}")), info.line());
    };
    note(&info);
    // Standard error goes with standard output unless -e says otherwise,
    // as in Slurm.
    let error = args.error.clone().or_else(|| args.output.clone());
    let mut files = Files::default();
    let mut children = Vec::new();
    // Tasks whose command could not be executed, with their exit codes.
    let mut failed: Vec<(u32, u8)> = Vec::new();
    // -l: each line a task writes, prefixed with its number as Slurm
    // does (`%*d: `, as wide as the highest task number).
    let width = ntasks.saturating_sub(1).to_string().len();
    let mut copiers = Vec::new();
    let (to_out, to_err) = (shared(std::io::stdout()), shared(std::io::stderr()));
    // One line at a time, whatever its destination: two destinations may
    // be one file (`2>&1`, or -o and -e naming the same).
    let one_line = Arc::new(Mutex::new(()));
    let cancelled = dir.join(format!("step-{step}.cancelled"));
    for (task, &(at, local)) in (0u32..).zip(&tasks) {
        // Cancelled while its tasks start: no more of them.
        if cancelled.exists() {
            break;
        }
        let node = step_nodes[at];
        let mut cmd = Command::new(&args.command[0]);
        if let Some(d) = step_dir {
            cmd.current_dir(d);
        }
        cmd.args(&args.command[1..])
            .env("SLURM_PROCID", task.to_string())
            .env("SLURM_LOCALID", local.to_string())
            .env("SLURM_STEPID", step.to_string())
            .env("SLURM_STEP_ID", step.to_string())
            .env("SLURM_NODEID", at.to_string())
            .env("SLURMD_NODENAME", node)
            .env("SLURM_TOPOLOGY_ADDR", node)
            .env("SLURM_CPUS_ON_NODE", cores_on(at).to_string())
            .env("SLURM_GTIDS", &gtids[at])
            .env("SLURM_STEP_NUM_TASKS", ntasks.to_string())
            .env("SLURM_STEP_NUM_NODES", step_nodes.len().to_string())
            .env("SLURM_STEP_NODELIST", &step_nodelist)
            .env("SLURM_STEP_TASKS_PER_NODE", &tasks_per_node)
            // The step's own, where the job's were: Slurm's srun sets
            // them for its tasks (the job's stay in SLURM_JOB_*, and in
            // SLURM_NODELIST).
            .env("SLURM_NNODES", step_nodes.len().to_string())
            .env("SLURM_TASKS_PER_NODE", &tasks_per_node)
            .env("SLURM_NTASKS", ntasks.to_string())
            .env("SLURM_NPROCS", ntasks.to_string())
            .env("SLURM_DISTRIBUTION", distribution)
            .env("SLURM_UMASK", &umask);
        if let Ok(cpus) = std::env::var("SLURM_JOB_CPUS_PER_NODE") {
            cmd.env("SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0", cpus);
        }
        if args.label {
            cmd.env("SLURM_LABELIO", "1");
        }
        // The step's own -c, as Slurm's srun gives it to its tasks.
        if let Some(c) = args.cpus_per_task {
            cmd.env("SLURM_CPUS_PER_TASK", c.to_string());
        }
        let mut stream = |pattern: &Option<String>| -> Result<Stdio> {
            Ok(match pattern {
                Some(p) => Stdio::from(files.open(&expand(p, &job, step, task, (node, at)))?),
                None => Stdio::inherit(),
            })
        };
        let started = if args.label {
            let mut dest = |pattern: &Option<String>, inherit: &Shared| -> Result<Shared> {
                Ok(match pattern {
                    Some(p) => shared(files.open(&expand(p, &job, step, task, (node, at)))?),
                    None => Arc::clone(inherit),
                })
            };
            dest(&args.output, &to_out).and_then(|out| {
                let err = dest(&error, &to_err)?;
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                let mut child = cmd.spawn().with_context(|| {
                    format!("{node}: task {task}: cannot run {}", args.command[0])
                })?;
                let prefix = format!("{task:>width$}: ");
                if let Some(o) = child.stdout.take() {
                    copiers.push(label_lines(o, prefix.clone(), out, Arc::clone(&one_line)));
                }
                if let Some(e) = child.stderr.take() {
                    copiers.push(label_lines(e, prefix, err, Arc::clone(&one_line)));
                }
                Ok(child)
            })
        } else {
            stream(&args.output).and_then(|out| {
                let err = stream(&error)?;
                cmd.stdout(out).stderr(err);
                cmd.spawn()
                    .with_context(|| format!("{node}: task {task}: cannot run {}", args.command[0]))
            })
        };
        // A command that cannot be executed fails its task as Slurm's
        // slurmstepd fails it: its execve error on the task's standard
        // error, and the error number as its exit code.
        let unexecutable = started.as_ref().err().and_then(|e| {
            e.chain()
                .find_map(|c| c.downcast_ref::<std::io::Error>())
                .filter(|io| {
                    matches!(
                        io.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                    )
                })
                .and_then(|io| Some((io.raw_os_error()?, io.to_string())))
        });
        if let Some((errno, text)) = unexecutable {
            let why = text.split(" (os error").next().unwrap_or(&text).to_string();
            let line = format!(
                "slurmstepd-{node}: error: execve(): {}: {why}\n",
                args.command[0]
            );
            match &error {
                Some(p) => {
                    use std::io::Write as _;
                    let mut f = files.open(&expand(p, &job, step, task, (node, at)))?;
                    f.write_all(line.as_bytes())?;
                }
                None => eprint!("{line}"),
            }
            failed.push((task, u8::try_from(errno).unwrap_or(1)));
            continue;
        }
        match started {
            Ok(child) => children.push((task, child)),
            Err(e) => {
                // None of the step is left behind.
                for (_, mut c) in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
    }
    let mut worst = 0u8;
    let mut signal = 0;
    // A task ended by SIGTERM or SIGKILL: Slurm's srun says, once all are
    // over, that the step was.
    let mut forced = false;
    // How each task that did not end well ended, in Slurm's words.
    let mut ends: Vec<(u32, String)> = Vec::new();
    for (task, code) in failed {
        ends.push((task, format!("Exited with exit code {code}")));
        worst = worst.max(code);
    }
    for (task, mut child) in children {
        let status = child.wait()?;
        let code = match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(c), _) => {
                if c != 0 {
                    ends.push((task, format!("Exited with exit code {c}")));
                }
                c as u8
            }
            (None, Some(sig)) => {
                let core = if std::os::unix::process::ExitStatusExt::core_dumped(&status) {
                    " (core dumped)"
                } else {
                    ""
                };
                ends.push((task, format!("{}{core}", signal_name(sig))));
                forced |= sig == libc::SIGTERM || sig == libc::SIGKILL;
                signal = signal.max(sig as u32);
                (128 + sig) as u8
            }
            (None, None) => 1,
        };
        worst = worst.max(code);
    }
    // Cancelled (`scancel JOB.STEP`): said as Slurm's step daemon and
    // srun say it, before how its tasks ended.
    let cancel = std::fs::read_to_string(&cancelled).ok().and_then(|t| {
        let (sig, at) = t.trim().split_once(' ')?;
        Some((sig.parse::<i32>().ok()?, at.parse::<i64>().ok()?))
    });
    if let Some((sig, at_ns)) = cancel {
        // Ended by scancel itself (sacct: `CANCELLED by UID`), not only
        // sent a signal (`--signal`).
        info.cancelled = sig == libc::SIGKILL;
        if sig == libc::SIGKILL {
            eprintln!(
                "srun: Job step aborted: Waiting up to {} seconds for job step to finish.",
                kill_wait_s() + 2
            );
            forced = false;
        }
        let at = sigsleep::supervise::local_date(at_ns.div_euclid(1_000_000_000))
            .unwrap_or_else(|| "Unknown".into());
        eprintln!(
            "slurmstepd: error: *** STEP {job}.{step} ON {} CANCELLED AT {at} ***",
            step_nodes.first().copied().unwrap_or_default()
        );
    }
    for (node, ids, what) in alike_ends(ends, |t| tasks[t as usize].0) {
        let node = step_nodes[node];
        match ids.as_slice() {
            [one] => eprintln!("srun: error: {node}: task {one}: {what}"),
            _ => eprintln!("srun: error: {node}: tasks {}: {what}", ranges(&ids)),
        }
    }
    if forced {
        eprintln!("srun: Force Terminated StepId={job}.{}", info.id);
    }
    // Its tasks, all reaped, are the only children srun had.
    for c in copiers {
        let _ = c.join();
    }
    let (cpu_ns, max_rss_kib) = sigsleep::tree::children_usage();
    info.end_ns = wall_ns();
    info.exit = if signal > 0 {
        (0, signal)
    } else {
        (u32::from(worst), 0)
    };
    info.cpu_ns = cpu_ns;
    info.max_rss_kib = max_rss_kib;
    note(&info);
    Ok(worst)
}

/// The cluster's `KillWait` (what `scontrol show config` says), else
/// Slurm's default.
fn kill_wait_s() -> u128 {
    crate::cluster::conf_path()
        .and_then(|p| controller::config::Cluster::load(&p))
        .map_or(30, |c| crate::cluster::kill_wait_s(&c))
}

/// Tasks' ends grouped as Slurm's srun says them: one line for the tasks
/// of a node that ended alike, the step's nodes in order, each node's
/// lines in the order of their first task.
fn alike_ends(
    mut ends: Vec<(u32, String)>,
    node_of: impl Fn(u32) -> usize,
) -> Vec<(usize, Vec<u32>, String)> {
    ends.sort_by_key(|&(t, _)| (node_of(t), t));
    let mut out: Vec<(usize, Vec<u32>, String)> = Vec::new();
    for (task, what) in ends {
        let node = node_of(task);
        match out.iter_mut().find(|(n, _, w)| *n == node && *w == what) {
            Some((_, ids, _)) => ids.push(task),
            None => out.push((node, vec![task], what)),
        }
    }
    out
}

/// Task numbers in order as Slurm writes them: runs as `0-3`, apart by
/// commas (`0,2`, `0-2,5`), as squeue folds an array's tasks.
fn ranges(ids: &[u32]) -> String {
    formats::intervals::format(ids).replace(' ', ",")
}

/// A step's job, as its environment says it, and where the step's tasks
/// go in it.
struct Step {
    job: layout::Job,
    layout: layout::Layout,
}

/// Lays out the step `args` asks in job `job`; Slurm's refusal as an
/// answer.
fn step_of(args: &Args, job: &str) -> Result<std::result::Result<Step, layout::Refused>> {
    let var = |name: &str| -> Option<u32> { std::env::var(name).ok()?.parse().ok() };
    let refused = |why: &str| layout::Refused {
        lines: vec![format!("Unable to create step for job {job}: {why}")],
        code: 1,
    };
    // No more names than a cluster has nodes: a hand-set list must not
    // make srun allocate without bound.
    let nodes: Vec<String> = std::env::var("SLURM_JOB_NODELIST")
        .ok()
        .and_then(|l| formats::nodeset::parse(&l).ok())
        .filter(|s| formats::nodeset::count(s) <= layout::MAX_TASKS as usize)
        .map(|s| formats::nodeset::expand(&s))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| vec![std::env::var("SLURMD_NODENAME").unwrap_or_default()]);
    let cpus = std::env::var("SLURM_JOB_CPUS_PER_NODE")
        .ok()
        .and_then(|c| formats::nodeset::unfold_counts(&c, nodes.len()))
        .filter(|c| c.len() == nodes.len())
        .unwrap_or_else(|| vec![1; nodes.len()]);
    let held = layout::Job { nodes, cpus };
    let count = match args.nodes.as_deref().map(layout::node_count).transpose() {
        Ok(c) => c.flatten(),
        Err(r) => return Ok(Err(r)),
    };
    // SLURM_NTASKS_PER_NODE is srun's --ntasks-per-node, as on Slurm.
    let tasks_per_node = args
        .ntasks_per_node
        .or_else(|| var("SLURM_NTASKS_PER_NODE"));
    let named = |list: &Option<String>| -> Option<Vec<String>> {
        match list {
            Some(l) => crate::sbatch::named_nodes(l).ok(),
            None => Some(Vec::new()),
        }
    };
    let (Some(nodelist), Some(exclude)) = (named(&args.nodelist), named(&args.exclude)) else {
        return Ok(Err(refused("Invalid node name specified")));
    };
    // A node to leave out that the job does not have must still be one
    // of the cluster's.
    let ours: std::collections::HashSet<&str> = held.nodes.iter().map(String::as_str).collect();
    if exclude.iter().any(|n| !ours.contains(n.as_str())) {
        if let Ok(config) =
            crate::cluster::conf_path().and_then(|p| controller::config::Cluster::load(&p))
        {
            if exclude
                .iter()
                .any(|n| !config.nodes.iter().any(|c| &c.name == n))
            {
                return Ok(Err(refused("Invalid node name specified")));
            }
        }
    }
    let ask = layout::Ask {
        nodes: count,
        // -n, else the job's (srun takes SLURM_NTASKS as its -n).
        ntasks: args.ntasks.or_else(|| var("SLURM_NTASKS")),
        tasks_per_node,
        cpus_per_task: args
            .cpus_per_task
            .or_else(|| var("SLURM_CPUS_PER_TASK"))
            .unwrap_or(1),
        nodelist,
        exclude,
    };
    Ok(layout::lay_out(&held, job, &ask).map(|layout| Step { job: held, layout }))
}

/// A signal as the C library describes it (`Terminated`, `Killed`,
/// `Interrupt`), as Slurm's srun says how a task ended.
pub(crate) fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a valid C string for any number; it is
    // copied at once, before another call could reuse its buffer.
    unsafe {
        let p = libc::strsignal(sig);
        if p.is_null() {
            format!("Signal {sig}")
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Where labelled lines go: srun's own output or a step file, written a
/// whole line at a time by the tasks' copiers.
type Shared = Arc<Mutex<Box<dyn Write + Send>>>;

fn shared(w: impl Write + Send + 'static) -> Shared {
    Arc::new(Mutex::new(Box::new(w)))
}

/// Copies what a task writes to `to`, each line after `prefix`, in one
/// write made under `one_line`.
fn label_lines(
    from: impl Read + Send + 'static,
    prefix: String,
    to: Shared,
    one_line: Arc<Mutex<()>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut lines = BufReader::new(from);
        let mut line = prefix.clone().into_bytes();
        while matches!(lines.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let _turn = one_line.lock().unwrap_or_else(PoisonError::into_inner);
            let mut w = to.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = w.write_all(&line);
            let _ = w.flush();
            line.truncate(prefix.len());
        }
    })
}

/// The step's output files, each opened (and emptied) once, whichever
/// tasks and streams write to it, so that none truncates what another
/// wrote.
#[derive(Default)]
struct Files(Vec<(String, File)>);

impl Files {
    fn open(&mut self, path: &str) -> Result<File> {
        if let Some((_, f)) = self.0.iter().find(|(p, _)| p == path) {
            return Ok(f.try_clone()?);
        }
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("cannot open {path}"))?;
        self.0.push((path.to_string(), f.try_clone()?));
        Ok(f)
    }
}

/// srun's file patterns: `%j` the job, `%s` the step, `%t` the task, `%N`
/// the task's node and `%n` that node's number in the step, `%%` a
/// percent sign.
fn expand(pattern: &str, job: &str, step: u32, task: u32, (node, at): (&str, usize)) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(job),
            Some('s') => out.push_str(&step.to_string()),
            Some('t') => out.push_str(&task.to_string()),
            Some('N') => out.push_str(node),
            Some('n') => out.push_str(&at.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The next step's number in the job: the first N for which this srun
/// creates `dir/step-N` (creating is atomic, so two sruns at once never
/// get the same).
fn next_step(dir: &Path) -> Result<u32> {
    for n in 0..u32::MAX {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(format!("step-{n}")))
        {
            Ok(_) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot count steps in {}", dir.display()))
            }
        }
    }
    bail!("no step number left in {}", dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_job_step_task_and_node() {
        assert_eq!(
            expand("out-%j.%s.%t-%N-%n%%", "12", 1, 3, ("node4", 1)),
            "out-12.1.3-node4-1%"
        );
    }

    #[test]
    fn tasks_that_end_alike_on_a_node_are_said_in_one_line_as_slurm_says_them() {
        // Six tasks on two nodes (0-3 and 4-5), as measured on Slurm.
        let node_of = |t: u32| usize::from(t >= 4);
        let exit = |c: u32| format!("Exited with exit code {c}");
        let ends = (0..6).map(|t| (t, exit(t % 2 + 1))).collect();
        assert_eq!(
            alike_ends(ends, node_of),
            [
                (0, vec![0, 2], exit(1)),
                (0, vec![1, 3], exit(2)),
                (1, vec![4], exit(1)),
                (1, vec![5], exit(2)),
            ]
        );
        let ends = [5, 4, 2, 1, 0].map(|t| (t, exit(3))).to_vec();
        let said: Vec<String> = alike_ends(ends, node_of)
            .into_iter()
            .map(|(n, ids, _)| format!("{n}:{}", ranges(&ids)))
            .collect();
        assert_eq!(said, ["0:0-2", "1:4-5"]);
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn steps_count_from_zero_in_the_jobs_directory() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(next_step(d.path()).unwrap(), 0);
        assert_eq!(next_step(d.path()).unwrap(), 1);
    }
}
