//! `controller undeploy`: each host's agent stopped, its jobs checked
//! gone, its log fetched if asked, its directory removed.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::remote::{self, Ssh};
use super::{fields, print_table, say_failures, scripts, targets, transport, Args, Report, Target};
use crate::config::Cluster;

/// `controller undeploy`'s own flags.
#[derive(Debug, Clone, clap::Args)]
pub struct UndeployArgs {
    #[command(flatten)]
    pub common: Args,
    /// Fetch each host's agent log into DIR/HOST.log before removing it.
    #[arg(long, value_name = "DIR")]
    pub logs: Option<PathBuf>,
    /// Leave each host's directory in place (binaries, log, spool).
    #[arg(long)]
    pub keep: bool,
}

/// `controller undeploy`; whether every host was stopped clean.
pub async fn undeploy(config: &Cluster, args: &UndeployArgs) -> Result<bool> {
    let targets = targets(config, &args.common)?;
    let ssh = transport(config);
    let dir = &config.deploy.dir;
    let grace = config.agent.kill_grace;
    if args.common.dry_run {
        let mut out = std::io::stdout().lock();
        for t in &targets {
            writeln!(out, "# {} ({})", t.host.name, t.address)?;
            writeln!(
                out,
                "{}   # kill -TERM the agent of {dir}/agent.pid, -KILL after {} s; look for jobs left",
                ssh.ssh_line(t.address),
                grace.as_secs_f64()
            )?;
            if let Some(logs) = &args.logs {
                let to = logs.join(format!("{}.log", t.host.name));
                let fetch = ssh.fetch_line(t.address, &format!("{dir}/agent.log"), &to);
                writeln!(out, "{}", remote::join(&fetch))?;
            }
            if !args.keep {
                writeln!(out, "{}   # rm -rf {dir}", ssh.ssh_line(t.address))?;
            }
        }
        return Ok(true);
    }
    if let Some(logs) = &args.logs {
        std::fs::create_dir_all(logs).with_context(|| format!("cannot make {}", logs.display()))?;
    }
    let reports = futures_util::future::join_all(targets.iter().map(|t| async {
        let state = undeploy_host(&ssh, dir, grace, args, t).await;
        Report {
            name: t.host.name.clone(),
            address: t.address.to_string(),
            nodes: t.nodes.clone(),
            pid: None,
            version: "-".into(),
            state,
        }
    }))
    .await;
    print_table(&reports)?;
    Ok(!say_failures("undeploy", &reports))
}

async fn undeploy_host(
    ssh: &Ssh,
    dir: &str,
    grace: Duration,
    args: &UndeployArgs,
    t: &Target<'_>,
) -> Result<String, String> {
    let out = ssh.run(t.address, &scripts::stop(dir, grace)).await?;
    let f = fields(&out);
    let mut state = f
        .get("agent")
        .copied()
        .unwrap_or("unknown")
        .replace('_', " ");
    let left = f.get("left").map_or("", |l| l.trim());
    if !left.is_empty() {
        return Err(format!(
            "{state}, but job processes are left: pids {left} (their command line names {dir}/bin/sigsleep)"
        ));
    }
    // A log that cannot be fetched is kept where it is, with the rest.
    if let (Some(logs), Some(&"yes")) = (&args.logs, f.get("log")) {
        let to = logs.join(format!("{}.log", t.host.name));
        match ssh.fetch(t.address, &format!("{dir}/agent.log"), &to).await {
            Ok(_) => state.push_str(&format!(", log in {}", to.display())),
            Err(e) => {
                return Err(format!(
                    "{state}, but its log could not be fetched ({e}): {dir} left in place"
                ))
            }
        }
    }
    if !args.keep && f.get("deployed") == Some(&"yes") {
        ssh.run(t.address, &scripts::remove(dir)).await?;
        state.push_str(&format!(", {dir} removed"));
    }
    Ok(state)
}
