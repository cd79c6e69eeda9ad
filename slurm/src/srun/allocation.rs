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
//! over. A signal that would end srun (Ctrl-C, `SIGTERM`, `SIGHUP`), or
//! its output's reader gone (`SIGPIPE` is ignored for that), cancels the
//! job first, and srun still waits for its end and its last output; a
//! second signal ends srun at once.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use client::Request;
use formats::wire::JobState;
use tokio::signal::unix::{signal, SignalKind};

use crate::cluster::Cluster;

/// The options that shape the allocation outside a job, as sbatch takes
/// them; srun's own `-N -n -c -J --export` shape it too.
#[derive(Debug, Default, ClapArgs)]
pub struct Options {
    #[command(flatten)]
    res: crate::sbatch::Resources,
    /// `--pty`: the task's terminal. clemu's jobs have none.
    #[arg(long)]
    pty: bool,
}

impl Options {
    /// Inside a job: `-D`, where the step's tasks run; `--pty` refused.
    /// The rest shape an allocation, and a step takes the job's (Slurm
    /// would bound the step by them; the job's own bounds hold here).
    pub fn step_dir(&self) -> Result<Option<&str>> {
        if self.pty {
            bail!("--pty: clemu's jobs have no terminal; run the command without it");
        }
        Ok(self.res.chdir())
    }
}

/// How often srun copies new output and asks how the job is.
const POLL: Duration = Duration::from_millis(50);

/// How long srun tries to reach a controller it lost before it gives up
/// on following the job.
const RECONNECT: Duration = Duration::from_secs(60);

/// Makes the allocation, runs the step in it, and returns its status.
pub fn run(args: super::Args) -> Result<u8> {
    if args.alloc.pty {
        bail!("--pty: clemu's jobs have no terminal; run the command without it");
    }
    // A reader gone (`srun ... | head -1`) is a write error to handle,
    // not a signal that ends srun with its job left running.
    // SAFETY: setting a signal's disposition to SIG_IGN is always valid.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(allocate_and_follow(args))
}

/// sbatch's command line for the allocation: its resources, its output
/// in `out` and `err`, and the step as its script. Not requeued: a second
/// run would write over output srun has already copied.
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
        "--ntasks-per-node",
        &args.ntasks_per_node.map(|n| n.to_string()),
    );
    pass(
        "--cpus-per-task",
        &args.cpus_per_task.map(|n| n.to_string()),
    );
    pass("--export", &args.export);
    pass("--nodelist", &args.nodelist);
    pass("--exclude", &args.exclude);
    argv.extend(args.alloc.res.words());
    argv.push(format!("--output={}", out.display()));
    argv.push(format!("--error={}", err.display()));
    argv.push("--no-requeue".into());
    argv
}

/// The step's command line, as the allocation's script runs it: this
/// very program as srun, by its whole path, so that neither `PATH` nor
/// `--export` decides which srun runs the step.
fn step_line(program: &Path, args: &super::Args) -> String {
    let mut words = vec![program.display().to_string(), "srun".to_string()];
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

/// srun's own directory for the job's output, removed when srun ends
/// however it ends (short of SIGKILL: a later srun of the same pid finds
/// it and starts it afresh).
struct Scratch(PathBuf);

impl Scratch {
    fn make() -> Result<Scratch> {
        let conf = crate::cluster::conf_path()?;
        let parent = conf.parent().unwrap_or(Path::new(".")).join("srun");
        let hint = |dir: &Path| {
            format!(
                "cannot make {} for the job's output (srun outside a job follows it through \
                 the cluster's directory)",
                dir.display()
            )
        };
        std::fs::create_dir_all(&parent).with_context(|| hint(&parent))?;
        let dir = parent.join(std::process::id().to_string());
        // Pids are unique among live processes: one there is a killed
        // srun's.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| hint(&dir))?;
        }
        std::fs::create_dir(&dir).with_context(|| hint(&dir))?;
        // Whole: the job runs where `-D` says, and opens these from there.
        Ok(Scratch(dir.canonicalize()?))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn allocate_and_follow(args: super::Args) -> Result<u8> {
    let scratch = Scratch::make()?;
    let (out, err) = (scratch.0.join("out"), scratch.0.join("err"));
    let program = std::env::current_exe().context("cannot find this program's path")?;
    let argv = batch_argv(&args, &out, &err);
    // sbatch tells a batch job the memory it asked; Slurm's srun does not
    // tell its allocation's tasks.
    let script = crate::sbatch::wrapped(&format!(
        "unset SLURM_MEM_PER_NODE SLURM_MEM_PER_CPU\n{}",
        step_line(&program, &args)
    ));
    // A wrapped command has no `#SBATCH` lines: the options are argv's.
    let batch: crate::sbatch::Args = crate::argv::parse(&argv)?;
    let mut ends = Ends::catch()?;
    let mut c = Cluster::open().await?;
    // Interruptible while the controller holds the submission (a cluster
    // at its limit of jobs); it drops a request whose asker is gone.
    let submitted = tokio::select! {
        s = crate::sbatch::submit(&mut c, &batch, script) => {
            s.context("Unable to allocate resources")?
        }
        _ = ends.next() => {
            say("srun: Job allocation request aborted");
            return Ok(1);
        }
    };
    let id = match submitted {
        Ok(s) => s.id,
        Err(refusal) => {
            // sbatch's lines of it, said as Slurm's srun says them: what
            // its client found, then the controller's refusal.
            let lines: Vec<&str> = refusal.split("\nsbatch: error: ").collect();
            let (last, before) = lines.split_last().unwrap_or((&"", &[]));
            for line in before {
                say(&format!("srun: error: {line}"));
            }
            let last = last.trim_start_matches("Batch job submission failed: ");
            say(&format!(
                "srun: error: Unable to allocate resources: {last}"
            ));
            return Ok(1);
        }
    };
    follow(&mut c, id, &mut ends, Tail::new(out), Tail::new(err)).await
}

/// The signals that would end srun, caught: each cancels the job.
struct Ends {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Ends {
    fn catch() -> Result<Ends> {
        Ok(Ends {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }
}

/// One line on srun's standard error; a closed one loses it, not srun.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Copies job `id`'s output to srun's own until the job is over; cancels
/// it on a signal or when no one reads srun's output any more.
async fn follow(
    c: &mut Cluster,
    id: u64,
    ends: &mut Ends,
    mut out: Tail,
    mut err: Tail,
) -> Result<u8> {
    let mut queued = false;
    let mut cancelled = false;
    let mut tick = tokio::time::interval(POLL);
    loop {
        let mut cancel_now = false;
        tokio::select! {
            _ = tick.tick() => {}
            _ = ends.next() => {
                if cancelled {
                    // A second one: srun goes, the job is on its way out.
                    say(&format!("srun: Job step aborted; job {id} is being cancelled"));
                    return Ok(143);
                }
                cancel_now = true;
            }
        }
        let readers_gone = out.copy_to(&mut std::io::stdout()).is_err()
            | err.copy_to(&mut std::io::stderr()).is_err();
        if (cancel_now || readers_gone) && !cancelled {
            cancelled = true;
            cancel(c, id).await;
            say("srun: forcing job termination");
        }
        let job = match c.by_ids(vec![id]).await {
            Ok(jobs) => jobs.into_iter().find(|j| j.id == id),
            Err(e) => {
                reconnect(c, id, &e).await?;
                continue;
            }
        };
        let Some(job) = job else {
            bail!("job {id} is no longer known to the controller");
        };
        // Said once each, as Slurm's srun does, when the job waits.
        if job.state == JobState::Pending && !queued && !cancelled {
            queued = true;
            say(&format!("srun: job {id} queued and waiting for resources"));
        } else if queued && job.start_ns != 0 {
            queued = false;
            say(&format!("srun: job {id} has been allocated resources"));
        }
        if crate::text::over(&job) {
            let _ = out.copy_to(&mut std::io::stdout());
            let _ = err.copy_to(&mut std::io::stderr());
            if job.start_ns == 0 {
                say("srun: error: Unable to allocate resources: Job/step already completing or completed");
            } else if !out.seen() && !err.seen() && job.state == JobState::Failed {
                say(&format!(
                    "srun: error: job {id} failed and its output never appeared in {}: do the \
                     nodes' agents see the cluster's directory?",
                    out.path.parent().unwrap_or(Path::new("")).display()
                ));
            }
            return Ok(status(job.start_ns != 0, job.state, job.exit));
        }
    }
}

/// Cancels the job; a controller that cannot be told is said.
async fn cancel(c: &mut Cluster, id: u64) {
    if let Err(e) = c.call(&Request::Cancel(vec![id])).await {
        say(&format!("srun: error: cannot cancel job {id}: {e:#}"));
    }
}

/// The controller went away (a restart, a failover): a new session to it
/// within [`RECONNECT`], or an error that says the job may still run.
async fn reconnect(c: &mut Cluster, id: u64, why: &anyhow::Error) -> Result<()> {
    let until = tokio::time::Instant::now() + RECONNECT;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Ok(again) = Cluster::open().await {
            *c = again;
            return Ok(());
        }
    }
    bail!(
        "lost the controller ({why:#}) and could not reach it again within {} s: job {id} may \
         still run (scancel {id})",
        RECONNECT.as_secs()
    )
}

/// Over, and its last process gone, so its output is whole.
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

/// A file the job appends to: what was added since last read, copied.
struct Tail {
    path: PathBuf,
    file: Option<File>,
    /// Bytes copied so far.
    at: u64,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            file: None,
            at: 0,
        }
    }

    /// Whether the file was ever there.
    fn seen(&self) -> bool {
        self.file.is_some()
    }

    /// Copies what is new; an error only when `to` cannot be written.
    fn copy_to(&mut self, to: &mut dyn Write) -> std::io::Result<()> {
        if self.file.is_none() {
            // The job makes it when it starts.
            self.file = File::open(&self.path).ok();
        }
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        // Shorter than what was copied: made again from empty (a job
        // run again); copy it from its start.
        if f.metadata().is_ok_and(|m| m.len() < self.at) {
            self.at = 0;
            f.seek(SeekFrom::Start(0))?;
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
            self.at += buf.len() as u64;
            to.write_all(&buf)?;
            to.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> super::super::Args {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        crate::argv::parse(&words).unwrap()
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
                "--error=/c/e",
                "--no-requeue"
            ]
        );
        // The script's shell gives the step back word for word.
        assert_eq!(
            shlex::split(&step_line(Path::new("/x/clemu-slurm"), &a)).unwrap(),
            [
                "/x/clemu-slurm",
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
