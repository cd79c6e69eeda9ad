//! `srun` outside a job: an allocation of its own, as Slurm's srun makes
//! one, whose step runs the command; srun follows its output and returns
//! its exit status.
//!
//! The allocation is a batch job whose script is this same `srun` with
//! the step's options (sbatch's `--wrap`), so the step is the one srun
//! runs inside any job: same tasks, variables, labels and step lines.
//! The job writes its standard output and error to two files in the
//! cluster's directory, which srun copies to its own as they grow (so
//! the agents must see that directory, as with `clemu-slurm up`, where
//! everything runs on one host), until the controller says the job is
//! over. A signal that would end srun (Ctrl-C, `SIGTERM`, `SIGHUP`)
//! cancels the job first, and srun still waits for its end and its last
//! output.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use client::Request;
use formats::wire::{JobInfo, JobState};
use tokio::signal::unix::{signal, SignalKind};

use crate::cluster::Cluster;

/// The options that shape the allocation; srun's own `-N -n -c -J
/// --export` shape it too.
#[derive(Debug, Default, ClapArgs)]
pub struct Options {
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
    /// `--pty`: the task's terminal. clemu's jobs have none.
    #[arg(long)]
    pty: bool,
}

impl Options {
    /// The first of these options given, as the user would write it.
    pub fn given(&self) -> Option<&'static str> {
        [
            (self.partition.is_some(), "--partition"),
            (self.time.is_some(), "--time"),
            (self.mem.is_some(), "--mem"),
            (self.mem_per_cpu.is_some(), "--mem-per-cpu"),
            (self.gres.is_some(), "--gres"),
            (self.gpus.is_some(), "--gpus"),
            (self.chdir.is_some(), "--chdir"),
            (self.dependency.is_some(), "--dependency"),
            (self.comment.is_some(), "--comment"),
            (self.pty, "--pty"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// How often srun copies new output and asks how the job is.
const POLL: Duration = Duration::from_millis(50);

/// Makes the allocation, runs the step in it, and returns its status.
pub fn run(args: super::Args) -> Result<u8> {
    if args.alloc.pty {
        bail!("--pty: clemu's jobs have no terminal; run the command without it");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(allocate_and_follow(args))
}

/// sbatch's command line for the allocation: its resources, its output
/// in `out` and `err`, and the step as its script.
fn batch_argv(args: &super::Args, out: &Path, err: &Path) -> Vec<String> {
    let mut argv = vec!["sbatch".to_string()];
    let mut pass = |flag: &str, value: &Option<String>| {
        if let Some(v) = value {
            argv.push(format!("{flag}={v}"));
        }
    };
    // As Slurm's srun: the job is named after the command.
    let name = args.job_name.clone().or_else(|| {
        let c = &args.command[0];
        Some(c.rsplit('/').next().unwrap_or(c).to_string())
    });
    pass("--job-name", &name);
    pass("--nodes", &args.nodes);
    pass("--ntasks", &args.ntasks.map(|n| n.to_string()));
    pass(
        "--cpus-per-task",
        &args.cpus_per_task.map(|n| n.to_string()),
    );
    pass("--export", &args.export);
    let a = &args.alloc;
    pass("--partition", &a.partition);
    pass("--time", &a.time);
    pass("--mem", &a.mem);
    pass("--mem-per-cpu", &a.mem_per_cpu);
    pass("--gres", &a.gres);
    pass("--gpus", &a.gpus);
    pass("--chdir", &a.chdir);
    pass("--dependency", &a.dependency);
    pass("--comment", &a.comment);
    argv.push(format!("--output={}", out.display()));
    argv.push(format!("--error={}", err.display()));
    argv
}

/// The step's command line, as the allocation's script runs it.
fn step_line(args: &super::Args) -> String {
    let mut words = vec!["srun".to_string()];
    let mut pass = |flag: &str, value: &Option<String>| {
        if let Some(v) = value {
            words.push(format!("{flag}={v}"));
        }
    };
    pass("--output", &args.output);
    pass("--error", &args.error);
    pass("--mpi", &args.mpi);
    pass("--cpu-bind", &args.cpu_bind);
    if args.label {
        words.push("--label".into());
    }
    words.push("--".into());
    words.extend(args.command.iter().cloned());
    words
        .iter()
        .map(|w| shlex::try_quote(w).map(|q| q.into_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map(|q| q.join(" "))
        // A NUL cannot reach a command line anyway.
        .unwrap_or_default()
}

async fn allocate_and_follow(args: super::Args) -> Result<u8> {
    let conf = crate::cluster::conf_path()?;
    let dir = conf
        .parent()
        .unwrap_or(Path::new("."))
        .join("srun")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "cannot make {} for the job's output (srun outside a job follows it through the \
             cluster's directory)",
            dir.display()
        )
    })?;
    // Whole: the job runs where `-D` says, and opens these from there.
    let dir = dir.canonicalize()?;
    let result = allocate_in(&args, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn allocate_in(args: &super::Args, dir: &Path) -> Result<u8> {
    let (out, err) = (dir.join("out"), dir.join("err"));
    let argv = batch_argv(args, &out, &err);
    let script = crate::sbatch::wrapped(&step_line(args));
    // Catch the signals before the job exists, so that none leaves it
    // behind.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut c = Cluster::open().await?;
    let submitted = crate::sbatch::submit(&mut c, &argv, script)
        .await
        .context("Unable to allocate resources")?;
    let id = match submitted {
        Ok((id, _, _)) => id,
        Err(refusal) => {
            eprintln!("srun: error: Unable to allocate resources: {refusal}");
            return Ok(1);
        }
    };
    let mut follow = Follow {
        out: Tail::new(out),
        err: Tail::new(err),
    };
    let mut queued = false;
    let mut cancelled = false;
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = interrupt.recv() => cancelled |= cancel(&mut c, id, cancelled).await?,
            _ = terminate.recv() => cancelled |= cancel(&mut c, id, cancelled).await?,
            _ = hangup.recv() => cancelled |= cancel(&mut c, id, cancelled).await?,
        }
        follow.copy();
        let job = c.by_ids(vec![id]).await?.into_iter().find(|j| j.id == id);
        let Some(job) = job else {
            // Forgotten by a controller that came back without it.
            bail!("job {id} is no longer known to the controller");
        };
        // Said once each, as Slurm's srun does, when the job waits.
        if job.state == JobState::Pending && !queued && !cancelled {
            queued = true;
            eprintln!("srun: job {id} queued and waiting for resources");
        } else if queued && job.start_ns != 0 {
            queued = false;
            eprintln!("srun: job {id} has been allocated resources");
        }
        if over(&job) {
            follow.copy();
            if job.start_ns == 0 {
                eprintln!(
                    "srun: error: Unable to allocate resources: Job/step already completing or \
                     completed"
                );
            }
            return Ok(status(job.start_ns != 0, job.state, job.exit));
        }
    }
}

/// Cancels the job once; says so as Slurm's srun does.
async fn cancel(c: &mut Cluster, id: u64, already: bool) -> Result<bool> {
    if !already {
        eprintln!("srun: forcing job termination");
        c.call(&Request::Cancel(vec![id])).await?;
    }
    Ok(true)
}

/// Over, and its last process gone, so its output is whole.
fn over(job: &JobInfo) -> bool {
    !matches!(
        job.state,
        JobState::Pending | JobState::Running | JobState::Suspended
    ) && !job.completing
}

/// srun's exit status for the job: its script's (the step's, which is
/// the highest of its tasks'), or 128 plus the signal that ended it; a
/// job ended from outside (cancelled, at its limit, preempted) with
/// nothing else to say is its `SIGTERM`'s, one killed for its memory its
/// `SIGKILL`'s; and 1 for an allocation that never ran.
fn status(started: bool, state: JobState, exit: (u32, u32)) -> u8 {
    if !started {
        return 1;
    }
    match (exit, state) {
        ((_, sig), _) if sig > 0 => 128u32.saturating_add(sig).min(255) as u8,
        ((code, _), _) if code > 0 => code.min(255) as u8,
        (_, JobState::Completed) => 0,
        (_, JobState::Cancelled | JobState::Timeout | JobState::Preempted) => 143,
        (_, JobState::OutOfMemory) => 137,
        _ => 1,
    }
}

/// The job's two output files, copied to srun's own.
struct Follow {
    out: Tail,
    err: Tail,
}

impl Follow {
    fn copy(&mut self) {
        self.out.copy_to(&mut std::io::stdout().lock());
        self.err.copy_to(&mut std::io::stderr().lock());
    }
}

/// A file another process appends to: what was added since last read.
struct Tail {
    path: PathBuf,
    file: Option<File>,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail { path, file: None }
    }

    fn copy_to(&mut self, to: &mut dyn Write) {
        if self.file.is_none() {
            // The job makes it when it starts.
            self.file = File::open(&self.path).ok();
        }
        let Some(f) = &mut self.file else { return };
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
            let _ = to.write_all(&buf);
            let _ = to.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(words: &[&str]) -> super::super::Args {
        super::super::Args::try_parse_from(words).unwrap()
    }

    #[test]
    fn the_allocation_gets_the_resources_and_the_step_its_own_options() {
        let a = args(&[
            "srun",
            "-N",
            "2",
            "-n",
            "4",
            "-p",
            "debug",
            "-t",
            "5",
            "-l",
            "-o",
            "t-%t.out",
            "sh",
            "-c",
            "echo 'a b' $X",
        ]);
        let argv = batch_argv(&a, Path::new("/c/o"), Path::new("/c/e"));
        assert_eq!(
            argv,
            [
                "sbatch",
                "--job-name=sh",
                "--nodes=2",
                "--ntasks=4",
                "--partition=debug",
                "--time=5",
                "--output=/c/o",
                "--error=/c/e"
            ]
        );
        // The script's shell gives the step back word for word.
        assert_eq!(
            shlex::split(&step_line(&a)).unwrap(),
            [
                "srun",
                "--output=t-%t.out",
                "--label",
                "--",
                "sh",
                "-c",
                "echo 'a b' $X"
            ]
        );
    }

    #[test]
    fn the_status_is_the_steps_or_the_signal_that_ended_it() {
        use JobState::*;
        assert_eq!(status(true, Failed, (3, 0)), 3);
        assert_eq!(status(true, Completed, (0, 0)), 0);
        assert_eq!(status(true, Cancelled, (0, 15)), 143);
        assert_eq!(status(true, Timeout, (0, 0)), 143);
        assert_eq!(status(true, OutOfMemory, (0, 0)), 137);
        assert_eq!(status(true, NodeFail, (0, 0)), 1);
        assert_eq!(status(true, Failed, (300, 0)), 255);
        assert_eq!(status(false, Cancelled, (0, 0)), 1);
    }
}
