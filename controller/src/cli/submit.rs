//! `controller submit`: jobs sent in batches over one connection, their
//! ids printed as they are acknowledged.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use formats::wire::{JobSpec, Request, Response};
use tokio_util::sync::CancellationToken;

use super::{seconds, Cli, Format, Outcome};

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct SubmitArgs {
    /// Cores per job.
    #[arg(long, value_name = "N")]
    pub cores: u32,
    /// Run time in seconds (time the job sleeps while not suspended).
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub runtime: u64,
    /// Wall-time limit in seconds (0: none).
    #[arg(long, value_name = "SECONDS", value_parser = seconds, default_value = "0")]
    pub walltime: u64,
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// How many identical jobs.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub count: u32,
    /// Jobs per request when submitting many: each request is acknowledged
    /// once journaled, and waits while the controller's queue is full.
    #[arg(long, value_name = "B", default_value_t = 10_000)]
    pub batch: u32,
    /// Memory per core (MiB, or a size like 2G).
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub mem_per_cpu: String,
    /// Name of the jobs, to find them by (`cancel --name`).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Jobs to wait for: these enter the queue once all of them are over,
    /// however they ended (Slurm's `--dependency=afterany`). Comma-separated.
    #[arg(long, value_name = "ID[,ID]", value_delimiter = ',')]
    pub after: Vec<u64>,
    /// With --after: submit the jobs this long after the last of those
    /// ended (their submit instant is then), as a user who thinks before
    /// the next job; without, they wait in the queue from now.
    #[arg(long, value_name = "SECONDS", value_parser = seconds, requires = "after")]
    pub think: Option<u64>,
    /// A job array, as Slurm's: a task per index (`0-99`, `1,3,5-7`,
    /// `0-15:4`), each a job with its own id and record, at most N running
    /// at once with `%N` (`0-99%10`). Prints every task's id.
    #[arg(long, value_name = "INDICES[%N]", value_parser = formats::wire::ArraySpec::parse, conflicts_with = "count")]
    pub array: Option<formats::wire::ArraySpec>,
    /// GPUs on each node the job gets (`--gres gpu:N`). Per node, as
    /// Slurm's `--gres` and `--gpus-per-node`, not per job as its
    /// `--gpus`. The job finds their numbers in CUDA_VISIBLE_DEVICES.
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,
    /// Generic resources on each node the job gets, as Slurm's: NAME:N,
    /// comma-separated (`gpu:2,fpga:1`). A job finds the numbers of its
    /// devices of kind NAME in NAME_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES
    /// for gpu).
    #[arg(long, value_name = "NAME:N[,NAME:N]")]
    pub gres: Option<String>,
}

/// How long a submission may wait for its answer before the user is told
/// why.
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Submits `--count` jobs in requests of `--batch` over one connection and
/// prints their ids as they are acknowledged. A request that waits (past
/// `max_jobs`) is explained on standard error after a second; SIGINT or
/// SIGTERM (`shutdown`) stops at once, the ids accepted so far printed and
/// the request in flight withdrawn (the controller drops it when the
/// connection closes).
pub(super) async fn submit(
    cli: &Cli,
    a: &SubmitArgs,
    addr: &str,
    secret: &[u8],
    shutdown: &CancellationToken,
) -> Result<Outcome> {
    use std::io::Write;
    if a.count == 0 {
        bail!("--count must be at least 1");
    }
    if a.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let mem = crate::config::parse_size_str(&a.mem_per_cpu).context("--mem-per-cpu")?;
    let spec = JobSpec {
        cores: a.cores,
        mem_per_cpu_mb: mem,
        runtime_ns: a.runtime,
        walltime_ns: a.walltime,
        partition: a.partition.clone(),
        name: a.name.clone(),
        after: a.after.clone(),
        think_ns: a.think,
        array: a.array.clone(),
        gres: {
            let mut g = match &a.gres {
                Some(text) => {
                    crate::gres::parse_request(text).map_err(|e| anyhow!("--gres: {e}"))?
                }
                None => Vec::new(),
            };
            if let Some(n) = a.gpus {
                if g.iter().any(|(name, _)| name == crate::gres::GPU) {
                    bail!("--gpus and --gres gpu:N both given: give one");
                }
                g.insert(0, (crate::gres::GPU.into(), n));
            }
            g.retain(|&(_, n)| n > 0);
            g
        },
        ..Default::default()
    };
    let json = cli.format == Format::Json;
    let mut session = client::Session::open(addr, secret).await?;
    let mut all = Vec::new();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut left = a.count;
    let mut outcome = Outcome::Ok;
    while left > 0 {
        let n = left.min(a.batch);
        let req = Request::Submit {
            specs: vec![spec.clone(); n as usize],
            key: formats::wire::submit_key(),
        };
        let call = session.call(&req);
        tokio::pin!(call);
        let mut told = false;
        let answer = loop {
            tokio::select! {
                r = &mut call => break Some(r?),
                () = shutdown.cancelled() => break None,
                () = tokio::time::sleep(QUIET_WAIT), if !told => {
                    told = true;
                    out.flush()?;
                    eprintln!("controller: {}", why_waiting(addr, secret, n).await);
                }
            }
        };
        let Some(answer) = answer else {
            out.flush()?;
            eprintln!(
                "controller: interrupted: {} of {} jobs submitted{}",
                a.count - left,
                a.count,
                if json || a.count == left {
                    ""
                } else {
                    " (ids above)"
                }
            );
            outcome = Outcome::Refused;
            break;
        };
        left -= n;
        match answer {
            Response::Submitted(ids) if json => all.extend(ids),
            Response::Submitted(ids) => {
                for id in ids {
                    writeln!(out, "{id}")?;
                }
                // Each acknowledged batch is shown before the next waits.
                out.flush()?;
            }
            Response::Error(e) => {
                out.flush()?;
                let done = a.count - left - n;
                // Acknowledged, not submitted: a refusal may say that its
                // jobs were queued all the same (a journal it cannot write).
                eprintln!("controller: {e} ({done} of {} jobs acknowledged)", a.count);
                outcome = Outcome::Refused;
                break;
            }
            other => bail!("controller {addr}: unexpected answer {other:?}"),
        }
    }
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    }
    out.flush()?;
    Ok(outcome)
}

/// Why a submission of `n` jobs has no answer yet, asked of the controller
/// over a connection of its own.
async fn why_waiting(addr: &str, secret: &[u8], n: u32) -> String {
    let stats = match client::request(addr, secret, &Request::Stats).await {
        Ok(Response::Stats(s)) => s,
        _ => return format!("waiting for the controller at {addr} to answer"),
    };
    let active: u64 = stats
        .jobs
        .iter()
        .filter(|(st, _)| !st.is_final())
        .map(|(_, n)| n)
        .sum();
    if stats.held_requests > 0 {
        format!(
            "waiting: the controller holds {active} jobs not yet over and its max_jobs is {}; \
             these {n} jobs are accepted as jobs end (Ctrl-C stops)",
            stats.max_jobs
        )
    } else {
        format!("waiting for the controller at {addr} to acknowledge {n} jobs (Ctrl-C stops)")
    }
}
