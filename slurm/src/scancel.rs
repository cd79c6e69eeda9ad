//! `scancel`: jobs named by id (a job, an array, one task) and/or by
//! filters, cancelled. As Slurm's, it says nothing when all went well,
//! and nothing of an id that names no job not over.

use anyhow::{bail, Result};
use clap::Parser;
use client::{Request, Response};
use formats::wire::JobState;

use crate::cluster::Cluster;
use crate::squeue::{expand_tasks, named_by};
use crate::text;

#[derive(Debug, Parser)]
#[command(name = "scancel", infer_long_args = true, disable_version_flag = true)]
pub struct Args {
    #[arg(short = 'u', long)]
    user: Option<String>,
    #[arg(short = 'n', long = "name", alias = "jobname")]
    name: Option<String>,
    #[arg(short = 'p', long)]
    partition: Option<String>,
    #[arg(short = 't', long)]
    state: Option<String>,
    #[arg(short = 's', long)]
    signal: Option<String>,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    #[arg(short = 'Q', long)]
    quiet: bool,
    ids: Vec<String>,
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::cluster::parse(&argv)?;
    for id in &args.ids {
        let ok = id
            .split(['_', '[', ']', '-', ','])
            .filter(|p| !p.is_empty())
            .all(|p| p.parse::<u64>().is_ok());
        if !ok {
            bail!("Invalid job id {id}");
        }
    }
    if args.ids.is_empty()
        && args.user.is_none()
        && args.name.is_none()
        && args.partition.is_none()
        && args.state.is_none()
    {
        bail!("No job identification provided");
    }
    if let Some(s) = &args.signal {
        let s = s.to_ascii_uppercase();
        let s = s.trim_start_matches("SIG");
        if !matches!(s, "KILL" | "TERM" | "9" | "15") {
            bail!(
                "--signal={s}: clemu cancels jobs (SIGTERM, then SIGKILL) but sends them no \
                 other signal yet"
            );
        }
    }
    let states = match &args.state {
        Some(s) => text::parse_states(s).map_err(anyhow::Error::msg)?,
        None => None,
    };
    let mut c = Cluster::open().await?;
    let me = text::user_name();
    let ids: Vec<u64> = c
        .jobs(false)
        .await?
        .iter()
        .filter(|j| !j.state.is_final())
        .filter(|j| {
            args.ids.is_empty() || args.ids.iter().any(|want| named_by(&expand_tasks(want), j))
        })
        .filter(|j| states.as_ref().is_none_or(|s| s.contains(&j.state)))
        .filter(|j| args.user.as_ref().is_none_or(|u| text::owned_by(u, j, &me)))
        .filter(|j| args.name.as_ref().is_none_or(|n| *n == j.name))
        .filter(|j| args.partition.as_ref().is_none_or(|p| *p == j.partition))
        .filter(|j| j.state != JobState::Completed)
        .map(|j| j.id)
        .collect();
    if ids.is_empty() {
        return Ok(0);
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
            Ok(0)
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}
