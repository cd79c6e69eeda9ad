//! `srun` inside a job's allocation: a job step that runs a command once
//! per task, each with its `SLURM_PROCID`, `SLURM_LOCALID` and
//! `SLURM_STEPID`, and returns the highest exit status of them.
//!
//! The tasks run where the batch script runs, as children of this
//! process: sigsleep, which supervises the job, suspends, resumes and
//! kills them with the rest of the job. Steps are numbered from 0 in
//! each job, in the job's own directory (`CLEMU_JOB_DIR`, which the agent
//! sets and removes).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;

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
    /// Accepted and not used: the step runs on the job's first node, with
    /// the job's cores.
    #[arg(short = 'N', long)]
    nodes: Option<String>,
    #[arg(short = 'c', long = "cpus-per-task")]
    cpus_per_task: Option<u32>,
    #[arg(short = 'J', long = "job-name")]
    job_name: Option<String>,
    #[arg(long)]
    mpi: Option<String>,
    #[arg(long)]
    export: Option<String>,
    #[arg(long = "cpu-bind")]
    cpu_bind: Option<String>,
    #[arg(short = 'l', long)]
    label: bool,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<String>,
}

/// The environment variable naming the job's own directory.
pub const JOB_DIR_VAR: &str = "CLEMU_JOB_DIR";

pub fn main(argv: &[String]) -> Result<u8> {
    let args: Args = crate::cluster::parse(argv)?;
    if args.label {
        bail!("--label is not supported by clemu yet");
    }
    let job = std::env::var("SLURM_JOB_ID").map_err(|_| {
        anyhow!(
            "srun runs only inside a job's allocation in clemu (submit the command with sbatch)"
        )
    })?;
    let ntasks = match args.ntasks {
        Some(n) => n,
        None => std::env::var("SLURM_NTASKS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1),
    }
    .max(1);
    let step = next_step(std::env::var_os(JOB_DIR_VAR).map(PathBuf::from).as_deref())?;
    let node = std::env::var("SLURMD_NODENAME").unwrap_or_default();
    let out_file = |pattern: &Option<String>, task: u32| -> Option<String> {
        pattern.as_ref().map(|p| expand(p, &job, step, task, &node))
    };
    // A file shared by every task is opened once, so that none truncates
    // what another wrote.
    let shared_out = match &args.output {
        Some(p) if !per_task(p) => Some(create(&expand(p, &job, step, 0, &node))?),
        _ => None,
    };
    let shared_err = match &args.error {
        Some(p) if !per_task(p) => Some(create(&expand(p, &job, step, 0, &node))?),
        _ => None,
    };
    let mut children = Vec::new();
    for task in 0..ntasks {
        let mut cmd = Command::new(&args.command[0]);
        cmd.args(&args.command[1..])
            .env("SLURM_PROCID", task.to_string())
            .env("SLURM_LOCALID", task.to_string())
            .env("SLURM_STEPID", step.to_string())
            .env("SLURM_STEP_ID", step.to_string())
            .env("SLURM_NODEID", "0")
            .env("SLURM_STEP_NUM_TASKS", ntasks.to_string())
            .env("SLURM_STEP_NUM_NODES", "1")
            .env("SLURM_STEP_NODELIST", &node)
            .env("SLURM_NTASKS", ntasks.to_string())
            .env("SLURM_NPROCS", ntasks.to_string());
        let stdout = match (&shared_out, out_file(&args.output, task)) {
            (Some(f), _) => Stdio::from(f.try_clone()?),
            (None, Some(path)) => Stdio::from(create(&path)?),
            (None, None) => Stdio::inherit(),
        };
        let stderr = match (&shared_err, out_file(&args.error, task)) {
            (Some(f), _) => Stdio::from(f.try_clone()?),
            (None, Some(path)) => Stdio::from(create(&path)?),
            (None, None) => Stdio::inherit(),
        };
        cmd.stdout(stdout).stderr(stderr);
        let child = cmd
            .spawn()
            .with_context(|| format!("{}: task {task}: cannot run {}", node, args.command[0]))?;
        children.push((task, child));
    }
    let mut worst = 0u8;
    for (task, mut child) in children {
        let status = child.wait()?;
        let code = match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(c), _) => c as u8,
            (None, Some(sig)) => {
                eprintln!("srun: error: {node}: task {task}: killed by signal {sig}");
                (128 + sig) as u8
            }
            (None, None) => 1,
        };
        if code != 0 && status.code().is_some() {
            eprintln!("srun: error: {node}: task {task}: Exited with exit code {code}");
        }
        worst = worst.max(code);
    }
    Ok(worst)
}

/// Whether a file pattern names a file per task (`%t`).
fn per_task(pattern: &str) -> bool {
    pattern.contains("%t")
}

/// srun's file patterns: `%j` the job, `%s` the step, `%t` the task, `%N`
/// the node, `%n` the node's rank (0), `%%` a percent sign.
fn expand(pattern: &str, job: &str, step: u32, task: u32, node: &str) -> String {
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
            Some('n') => out.push('0'),
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

fn create(path: &str) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot open {path}"))
}

/// The next step's number in the job: counted in `dir/steps` (0 for the
/// first; 0 always when the job has no directory).
fn next_step(dir: Option<&Path>) -> Result<u32> {
    let Some(dir) = dir else { return Ok(0) };
    let path = dir.join("steps");
    let step = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    std::fs::write(&path, (step + 1).to_string())
        .with_context(|| format!("cannot count steps in {}", path.display()))?;
    Ok(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_job_step_task_and_node() {
        assert_eq!(
            expand("out-%j.%s.%t-%N%%", "12", 1, 3, "node4"),
            "out-12.1.3-node4%"
        );
        assert!(per_task("x-%t") && !per_task("x-%j"));
    }

    #[test]
    fn steps_count_from_zero_in_the_jobs_directory() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(next_step(Some(d.path())).unwrap(), 0);
        assert_eq!(next_step(Some(d.path())).unwrap(), 1);
        assert_eq!(next_step(None).unwrap(), 0);
    }
}
