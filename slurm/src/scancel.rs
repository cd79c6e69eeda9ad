//! `scancel`: jobs named by id (a job, an array, one task, one step:
//! `JOB.STEP`) and/or by filters, cancelled, or sent a signal (`--signal`: to their steps'
//! tasks, the batch script with `--batch`, every process with `--full`).
//! As Slurm's, it says nothing when all went well, and nothing of an id
//! that names no job not over.

use anyhow::{bail, Result};
use clap::Parser;
use client::{Request, Response};
use formats::wire::{JobState, Reach};

use crate::cluster::Cluster;
use crate::squeue::{expand_tasks, named_by};
use crate::text;

#[derive(Debug, Parser)]
#[command(name = "scancel", infer_long_args = true, disable_version_flag = true)]
pub struct Args {
    #[arg(short = 'u', long, overrides_with = "me")]
    user: Option<String>,
    /// Whoever runs scancel's jobs: `-u` themselves; the last of the two
    /// given wins, as on Slurm.
    #[arg(long, overrides_with = "user")]
    me: bool,
    #[arg(short = 'n', long = "name", alias = "jobname")]
    name: Option<String>,
    #[arg(short = 'p', long)]
    partition: Option<String>,
    #[arg(short = 't', long)]
    state: Option<String>,
    #[arg(short = 's', long)]
    signal: Option<String>,
    #[arg(short = 'b', long)]
    batch: bool,
    #[arg(short = 'f', long)]
    full: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    #[arg(short = 'Q', long)]
    quiet: bool,
    /// Says each job it acts on, as Slurm's `-v` (`-vv` says no more).
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    verbose: u8,
    ids: Vec<String>,
}

/// Whether `id` is a job id as Slurm's scancel takes one: a job (not 0),
/// then an array's task (`_3`), tasks (`_[1-3,7]`) or none (`_`); ids
/// may be listed with commas.
fn valid_id(id: &str) -> bool {
    if step_id(id).is_some() {
        return true;
    }
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let range = |r: &str| match r.split_once('-') {
        Some((a, b)) => number(a) && number(b),
        None => number(r),
    };
    // A list's commas inside brackets are the tasks'.
    let parts = text::top_level_pieces(id);
    !parts.is_empty()
        && parts.iter().all(|part| {
            let (job, tasks) = part.split_once('_').unwrap_or((part, ""));
            let tasks_ok = match tasks.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                Some(list) => list.split(',').all(range),
                None => tasks.is_empty() || number(tasks),
            };
            number(job) && job.bytes().any(|b| b != b'0') && tasks_ok
        })
}

/// A step's id, `JOB.STEP`.
fn step_id(id: &str) -> Option<(u64, u32)> {
    let (job, step) = id.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(job) || !digits(step) {
        return None;
    }
    Some((job.parse().ok().filter(|&j| j > 0)?, step.parse().ok()?))
}

/// `signal` to the tasks of step `step` of job `job`, whose srun is told
/// they were cancelled; Slurm's error for a job that runs no such step.
async fn signal_step(c: &mut Cluster, job: u64, step: u32, signal: i32) -> Result<u8> {
    let req = Request::Signal {
        ids: vec![job],
        signal,
        reach: Reach::Step(step),
    };
    match c.call(&req).await? {
        Response::Jobs(outcomes) if outcomes.iter().all(|o| o.error.is_none()) => Ok(0),
        Response::Jobs(_) => {
            eprintln!(
                "scancel: error: Kill job error on job step id {job}.{step}: Invalid job id \
                 specified"
            );
            Ok(1)
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::argv::parse_plain(&argv)?;
    if let Err(code) = crate::cluster::reach("scancel", args.clusters.as_deref()) {
        return Ok(code);
    }
    if let Some(id) = args.ids.iter().find(|id| !valid_id(id)) {
        bail!("Invalid job id {id}");
    }
    // Said, and nothing cancelled, as Slurm's scancel says it.
    for u in args.user.iter().flat_map(|u| u.split(',')) {
        if u.parse::<u32>().is_err() && text::uid_of(u).is_none() {
            bail!("Invalid user name: {u}");
        }
    }
    if args.ids.is_empty()
        && args.user.is_none()
        && !args.me
        && args.name.is_none()
        && args.partition.is_none()
        && args.state.is_none()
    {
        bail!("No job identification provided");
    }
    let signal = match &args.signal {
        Some(s) => match text::signal_number(s) {
            Some(n) => Some(n),
            None => {
                eprintln!("Unknown job signal: {s}");
                return Ok(1);
            }
        },
        None => None,
    };
    // SIGKILL to the whole job is a cancel, as Slurm's controller takes it.
    let signal = signal.filter(|&n| n != libc::SIGKILL || (args.batch && !args.full));
    let reach = match (args.batch, args.full) {
        (_, true) => Reach::Full,
        (true, false) => Reach::Batch,
        (false, false) => Reach::Steps,
    };
    // One state, as Slurm's scancel takes it.
    let states = match args.state.as_deref().map(|s| (s, text::parse_states(s))) {
        Some((s, Ok(states))) if !s.contains(',') => states,
        Some((s, _)) => {
            eprintln!("Invalid job state specified: {s}");
            eprintln!("Valid job states are PENDING, RUNNING, and SUSPENDED");
            return Ok(1);
        }
        None => None,
    };
    let mut c = Cluster::open().await?;
    let ids_given: Vec<&String> = args.ids.iter().filter(|id| step_id(id).is_none()).collect();
    let me = text::user_name();
    let filtered = args.user.is_some()
        || args.me
        || args.name.is_some()
        || args.partition.is_some()
        || args.state.is_some();
    // Whether job `j` passes the filters given (all, without any).
    let passes = |j: &formats::wire::JobInfo| {
        states.as_ref().is_none_or(|s| s.contains(&j.state))
            && args.user.as_ref().is_none_or(|u| text::owned_by(u, j, &me))
            && (!args.me || text::owned_by(&me, j, &me))
            && args.name.as_ref().is_none_or(|n| *n == j.name)
            && args.partition.as_ref().is_none_or(|p| *p == j.partition)
    };
    // What `-v` says: "Terminating job 12" (or "Signal 10 to job 12") for
    // each id as given, or, with filters, for each job they match; and
    // "Terminating step 12.0" ("Signal 10 to step 12.0") for a step.
    let say = |id: &str| {
        if args.verbose > 0 {
            let what = if step_id(id).is_some() { "step" } else { "job" };
            match signal {
                Some(n) => eprintln!("scancel: Signal {n} to {what} {id}"),
                None => eprintln!("scancel: Terminating {what} {id}"),
            }
        }
    };
    // Steps (`JOB.STEP`) first, each on its own, of a job the filters
    // pass, as Slurm's scancel filters them; SIGKILL unless a signal is
    // given, as it ends a step.
    let mut status = 0;
    let steps: Vec<(u64, u32)> = args.ids.iter().filter_map(|id| step_id(id)).collect();
    let steps_jobs = match (filtered, steps.is_empty()) {
        (true, false) => c.by_ids(steps.iter().map(|&(j, _)| j).collect()).await?,
        _ => Vec::new(),
    };
    for (job, step) in steps {
        if filtered && !steps_jobs.iter().any(|j| j.id == job && passes(j)) {
            continue;
        }
        say(&format!("{job}.{step}"));
        let sig = signal.unwrap_or(libc::SIGKILL);
        status = status.max(signal_step(&mut c, job, step, sig).await?);
    }
    // Ids given, all of steps: no job is named, whatever the filters.
    if !args.ids.is_empty() && ids_given.is_empty() {
        return Ok(status);
    }
    if !filtered {
        ids_given.iter().for_each(|id| say(id));
    }
    let jobs: Vec<_> = c
        .jobs(false)
        .await?
        .into_iter()
        .filter(|j| !j.state.is_final())
        .filter(|j| {
            ids_given.is_empty()
                || ids_given
                    .iter()
                    .any(|want| named_by(&expand_tasks(want), j))
        })
        .filter(|j| passes(j))
        .filter(|j| j.state != JobState::Completed)
        .collect();
    if filtered {
        jobs.iter().for_each(|j| say(&text::job_id(j)));
    } else if args.verbose > 0 {
        // An id no job has, past or present: Slurm's -v says so (and
        // exits 0, as without -v it says nothing).
        let known = c.jobs(true).await?;
        for id in &ids_given {
            let named = expand_tasks(id);
            if !known.iter().any(|j| named_by(&named, j)) {
                eprintln!(
                    "scancel: error: Kill job error on job id {id}: Invalid job id specified"
                );
            }
        }
    }
    let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
    if ids.is_empty() {
        return Ok(status);
    }
    if let Some(signal) = signal {
        return Ok(status.max(signal_jobs(&mut c, ids, signal, reach).await?));
    }
    match c.call(&Request::Cancel(ids)).await? {
        Response::Jobs(outcomes) => {
            for o in outcomes {
                if let Some(e) = o.error {
                    // Over between the look and the cancel: as Slurm.
                    if !e.contains("no active job") {
                        eprintln!("scancel: error: Kill job error on job id {}: {e}", o.id);
                    }
                }
            }
            Ok(status)
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}

/// `--signal`: Slurm's message for each job the signal could not reach,
/// but none for a job already over; the exit status is Slurm's, its
/// error number's low byte.
async fn signal_jobs(c: &mut Cluster, ids: Vec<u64>, signal: i32, reach: Reach) -> Result<u8> {
    match c.call(&Request::Signal { ids, signal, reach }).await? {
        Response::Jobs(outcomes) => {
            let mut status = 0;
            for o in outcomes {
                let Some(e) = o.error else { continue };
                let code = match e.as_str() {
                    "Job script not specified" => 2009,
                    "Job can not be altered now, try again later" => 2020,
                    "Job/step already completing or completed" => 2021,
                    _ => 1,
                };
                if code != 2021 {
                    eprintln!("scancel: error: Kill job error on job id {}: {e}", o.id);
                }
                status = status.max((code & 0xff) as u8);
            }
            Ok(status)
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}
