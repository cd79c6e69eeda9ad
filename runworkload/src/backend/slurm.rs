//! `--backend slurm`: the same replay on a running Slurm cluster (the one
//! `SLURM_CONF` names; `scripts/slurm-local.sh up` makes one), as the
//! originating study ran it. Every job is submitted with `sbatch` at its
//! absolute deadline (the jobs due together are submitted
//! [`SBATCH_AT_ONCE`] at a time: jobs of different sizes cannot share one
//! job array) and runs the same `sigsleep`, which appends its record to the
//! run's record file on this host; its batch script first notes the nodes
//! Slurm gave it. Slurm's job id is kept beside clemu's in `jobs.csv`. The
//! run is over when Slurm lists none of its jobs (they share a job name,
//! `clemu-<label>`).
//!
//! slurmstepd starts the batch script with every signal unblocked: a
//! suspension within the first millisecond or so of a job, before
//! sigsleep's handlers are in place, stops it unseen, and sigsleep flags
//! it as a bare stop when it resumes (clemu's agents start jobs with those
//! signals blocked, so there it cannot happen).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use formats::wire::JobSpec;
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    due_jobs, due_orders, info_of, next_due, trace_jobs, wall_ns, Backend, Jobs, Order, Ran, LEAD,
    SPIN,
};
use crate::Plan;

/// Runs a Slurm command; its standard output, or an error with its
/// standard error.
async fn slurm(program: &str, args: &[String]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("cannot run {program} (is Slurm installed?)"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The cluster's cores, from `sinfo` (allocated/idle/other/total).
async fn total_cores() -> Result<u64> {
    let out = slurm("sinfo", &["-h".into(), "-o".into(), "%C".into()])
        .await
        .context(
            "no Slurm cluster answers (set SLURM_CONF, or scripts/slurm-local.sh up N CPUS)",
        )?;
    out.lines()
        .filter_map(|l| l.trim().rsplit('/').next()?.parse::<u64>().ok())
        .max()
        .filter(|&c| c > 0)
        .ok_or_else(|| anyhow!("sinfo reports no cores: {out:?}"))
}

/// `sbatch` processes at once: one per job due at a deadline would be
/// hundreds at a warm-up, each a connection to slurmctld.
pub const SBATCH_AT_ONCE: usize = 16;

/// The file, in the run's directory, where each job's batch script notes
/// its nodes (`<clemu id> <Slurm node list>`).
const NODES_FILE: &str = "slurm-nodes.txt";

/// A path as one word of a shell command line.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The `sbatch` arguments of one job.
fn sbatch_args(
    name: &str,
    id: u64,
    spec: &JobSpec,
    submit_ns: i64,
    sigsleep: &Path,
    log: &Path,
    nodes: &Path,
) -> Vec<String> {
    let mut args = vec![
        "--parsable".into(),
        "--job-name".into(),
        name.into(),
        "--output".into(),
        "/dev/null".into(),
        "--ntasks".into(),
        spec.cores.to_string(),
    ];
    if let Some(p) = &spec.partition {
        args.extend(["--partition".into(), p.clone()]);
    }
    if spec.walltime_ns > 0 {
        // sigsleep stops itself at its limit; Slurm's, in whole minutes,
        // comes a minute later so that it never cuts a job short.
        let minutes = spec.walltime_ns.div_ceil(60_000_000_000) + 1;
        args.extend(["--time".into(), minutes.to_string()]);
    }
    args.push("--wrap".into());
    // One short line appended (atomic under PIPE_BUF), then the job.
    args.push(format!(
        "echo \"{id} $SLURM_JOB_NODELIST\" >> {}; \
         exec {} --runtime {} --walltime {} --id {id} --cores {} --submit {}.{:09} --node $SLURMD_NODENAME --log {}",
        quoted(nodes),
        quoted(sigsleep),
        secs(spec.runtime_ns),
        secs(spec.walltime_ns),
        spec.cores,
        submit_ns.div_euclid(1_000_000_000),
        submit_ns.rem_euclid(1_000_000_000),
        quoted(log)
    ));
    args
}

/// Each job's nodes, as its batch script noted them (Slurm's node list,
/// folded as clemu folds); a job that never ran has none.
fn node_lists(path: &Path) -> HashMap<u64, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (id, list) = l.split_once(' ')?;
            let set = formats::nodeset::parse(list.trim()).ok()?;
            Some((id.parse().ok()?, formats::nodeset::folded(&set)))
        })
        .collect()
}

/// A running Slurm cluster, the one `SLURM_CONF` names.
pub struct Slurm;

impl Backend for Slurm {
    fn mode(&self) -> &'static str {
        "emulated"
    }

    fn name(&self) -> &'static str {
        "slurm"
    }

    fn controller(&self) -> String {
        "slurm".into()
    }

    fn runs_scaled_config(&self) -> bool {
        false
    }

    fn runs_sigsleep_here(&self) -> bool {
        true
    }

    fn run<'a>(
        &'a self,
        plan: &'a Plan,
        jobs: &'a Jobs<'a>,
        dir: &'a Path,
        stop: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Ran>> {
        Box::pin(replay(plan, jobs, dir, stop))
    }
}

async fn replay(plan: &Plan, run: &Jobs<'_>, dir: &Path, stop: &CancellationToken) -> Result<Ran> {
    let (label, factor, targets, specs, order) =
        (run.label, run.factor, run.targets, run.specs, run.order);
    let cores = total_cores().await?;
    let sigsleep = std::fs::canonicalize(&plan.config.agent.sigsleep)
        .with_context(|| format!("no sigsleep at {}", plan.config.agent.sigsleep.display()))?;
    let records = std::fs::canonicalize(dir.join("records"))?;
    let log = records.join(controller::records::RECORD_FILE);
    let nodes_file = std::fs::canonicalize(dir)?.join(NODES_FILE);
    let name = format!("clemu-{label}");
    let jobs = specs.len();

    let started_wall = wall_ns() + LEAD.as_nanos() as i64;
    let start = Instant::now() + LEAD;
    info!(run = %label, jobs, factor, cores, "replay on Slurm starts");
    // clemu's ids: submission order, from 1, as the controller numbers.
    let mut ids = vec![0u64; jobs];
    let mut slurm_ids = vec![0u64; jobs];
    let mut actual = vec![0i64; jobs];
    let mut submitted = 0;
    let mut interrupted = false;
    let mut done = 0;
    let mut progress = run.progress(plan);
    // Slurm's --begin counts whole seconds: jobs are sent at their
    // deadlines.
    while let Some(at) = next_due(run, targets, submitted, done) {
        // Where the run stands, as far as the replay knows without asking
        // Slurm (the wait below asks it).
        progress.update(&crate::progress::Counts {
            submitted: submitted as u64,
            ..Default::default()
        });
        let due = super::at(start, at);
        let wake = due.checked_sub(SPIN).unwrap_or(due);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = stop.cancelled() => {
                interrupted = true;
                break;
            }
        }
        while Instant::now() < due {
            tokio::task::yield_now().await;
        }
        let now = Instant::now();
        let first = submitted as u64;
        let batch = due_jobs(order, targets, start, now, &mut submitted);
        let orders = due_orders(run.timed, start, now, &mut done);
        let (name, sigsleep, log, nodes_file) = (&name, &sigsleep, &log, &nodes_file);
        let calls: Vec<_> = batch
            .iter()
            .zip(first + 1..)
            .map(|(&i, id)| {
                ids[i] = id;
                let spec = &specs[i];
                // Stamped when its sbatch starts, which may be a while after
                // the deadline when many jobs are due at once.
                async move {
                    let sent = wall_ns();
                    let args = sbatch_args(name, id, spec, sent, sigsleep, log, nodes_file);
                    (i, sent, slurm("sbatch", &args).await)
                }
            })
            .collect();
        let answers: Vec<_> = futures_util::stream::iter(calls)
            .buffer_unordered(SBATCH_AT_ONCE)
            .collect()
            .await;
        for (i, sent, out) in answers {
            actual[i] = sent;
            let out = out.with_context(|| {
                format!(
                    "Slurm refused {}",
                    trace_jobs(&plan.slice, &[i], &plan.workload)
                )
            })?;
            // --parsable: "id" or "id;cluster".
            slurm_ids[i] = out
                .trim()
                .split(';')
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| anyhow!("sbatch said {out:?}, not a job id"))?;
        }
        // Cancelled as the trace's users did: scancel takes a list.
        // (Events are refused with Slurm when the replay is planned.)
        let cancel: Vec<String> = orders
            .iter()
            .filter_map(|t| match t.order {
                Order::Cancel(i) => Some(slurm_ids[i]),
                Order::Event(_) => None,
            })
            .filter(|&id| id != 0)
            .map(|id| id.to_string())
            .collect();
        if !cancel.is_empty() {
            slurm("scancel", &cancel).await?;
        }
    }

    // Over when Slurm lists none of this run's jobs.
    let query = vec![
        "-h".into(),
        "-n".into(),
        name.clone(),
        "-o".into(),
        "%t".into(),
    ];
    let mut interrupted_at = None;
    loop {
        if interrupted {
            interrupted_at.get_or_insert_with(wall_ns);
            warn!(run = %label, "interrupted: cancelling this run's Slurm jobs");
            let _ = slurm("scancel", &["-n".into(), name.clone()]).await;
        }
        let listed = slurm("squeue", &query).await?;
        let states: Vec<&str> = listed.split_whitespace().collect();
        if states.is_empty() {
            break;
        }
        let count = |code: &str| states.iter().filter(|s| **s == code).count() as u64;
        progress.update(&crate::progress::Counts {
            submitted: submitted as u64,
            running: count("R") + count("CG"),
            suspended: count("S"),
            pending: count("PD"),
            over: (submitted as u64).saturating_sub(states.len() as u64),
        });
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            () = stop.cancelled(), if !interrupted => interrupted = true,
        }
    }
    let ended_wall = wall_ns();
    progress.finish();

    let bytes = std::fs::read(&log).unwrap_or_default();
    let (recs, stats) = formats::record::decode_all(&bytes);
    if stats.damaged() > 0 {
        warn!(run = %label, damaged = stats.damaged(), "damaged frames in the record file");
    }
    let nodes = node_lists(&nodes_file);
    let infos: HashMap<u64, _> = recs
        .iter()
        .map(|r| {
            (
                r.id,
                info_of(r, nodes.get(&r.id).cloned().unwrap_or_default()),
            )
        })
        .collect();
    if infos.len() < submitted {
        warn!(run = %label, records = infos.len(), submitted, "some jobs left no record");
    }
    Ok(Ran {
        ids,
        actual,
        infos,
        started_wall,
        ended_wall,
        interrupted_at,
        cores,
        slurm_ids: Some(slurm_ids),
        scheduler: None,
        failure: None,
        events: Vec::new(),
        ties: None,
    })
}
