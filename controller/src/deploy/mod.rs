//! `controller deploy` and `undeploy`: the agents of a cluster on its own
//! machines, started and stopped over ssh.
//!
//! # How it works
//!
//! Each `[[agents.host]]` with an `address` (an ssh destination) gets one
//! directory, `[agents] deploy_dir` (relative to the remote user's home
//! unless absolute), and nothing outside it: `bin/agent` and
//! `bin/sigsleep` (the static binaries beside this controller),
//! `secret` (mode 600), `records/` (the agent's record spool),
//! `agent.log` and `agent.pid`. Every host's steps run in a task of its
//! own; at most `[agents] fanout` of their commands run at once
//! ([`remote`]), as ClusterShell's fanout bounds its connections:
//!
//! - deploy: look (a running agent, and of which binary; the free disk;
//!   the binaries already there), then make the directory, copy what
//!   differs, and start the agent detached with the host's nodes, cores
//!   and memory from the config; then wait until the controller has
//!   every node registered, and print a table, host by host. A host whose
//!   agent already runs this binary for these nodes is left alone, so a
//!   second deploy changes nothing; one that runs another agent, lacks
//!   disk or cannot be reached is one line naming the host, and the
//!   others go on.
//! - undeploy: `SIGTERM` to the agent (which ends its jobs), `SIGKILL`
//!   after `[agents] kill_grace_ms`, a look for any job process left,
//!   the log fetched if asked, and the directory removed.
//!
//! `--dry-run` prints every command instead of running it.

mod remote;
mod scripts;
pub mod settings;
mod undeploy;

pub use settings::{sha256_hex, Settings};
pub use undeploy::{undeploy, UndeployArgs};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use formats::wire::{NodeState, Request, Response};

use crate::config::{Cluster, HostDef};
use remote::{quote, Ssh};

/// `controller deploy`'s and `undeploy`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Only these agent hosts (their names in `[[agents.host]]`, as a
    /// nodeset: `h[1-3]`) [default: every one].
    #[arg(long, value_name = "NODESET")]
    pub hosts: Option<String>,
    /// Print every command instead of running it.
    #[arg(long)]
    pub dry_run: bool,
}

/// One host to act on.
struct Target<'a> {
    host: &'a HostDef,
    address: &'a str,
    nodes: String,
}

/// How one host ended up.
struct Report {
    name: String,
    address: String,
    nodes: String,
    pid: Option<u32>,
    version: String,
    /// What was done (`started`, `already up`, `stopped`...), or why not.
    state: Result<String, String>,
}

/// The binaries this controller deploys: beside it, as the build puts
/// them.
struct Binaries {
    agent: PathBuf,
    sigsleep: PathBuf,
    agent_sha: String,
    sigsleep_sha: String,
    version: String,
    bytes: u64,
}

impl Binaries {
    fn find() -> Result<Binaries> {
        let exe = std::env::current_exe().context("cannot find this program's path")?;
        let dir = exe.parent().unwrap_or(Path::new("."));
        let agent = dir.join("agent");
        // Its musl build where there is a fresh one, as a local agent runs.
        let sigsleep = agent::settings::sigsleep_in(dir).unwrap_or_else(|| dir.join("sigsleep"));
        for b in [&agent, &sigsleep] {
            if !b.is_file() {
                bail!(
                    "cannot find {} beside this controller: build every binary \
                     (cargo build --release)",
                    b.display()
                );
            }
        }
        let sha = |p: &Path| -> Result<String> {
            let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
            Ok(sha256_hex(&bytes))
        };
        let bytes = std::fs::metadata(&agent)?.len() + std::fs::metadata(&sigsleep)?.len();
        Ok(Binaries {
            agent_sha: sha(&agent)?,
            sigsleep_sha: sha(&sigsleep)?,
            version: env!("CARGO_PKG_VERSION").to_string(),
            agent,
            sigsleep,
            bytes,
        })
    }

    /// `0.1.0 (3fa2c1d0e4b2)`: the release and the build.
    fn label(&self, sha: &str) -> String {
        format!("{} ({})", self.version, &sha[..sha.len().min(12)])
    }
}

/// The hosts to act on: those `--hosts` names (every one by default),
/// each with its address; a config that cannot be deployed is refused.
fn targets<'a>(config: &'a Cluster, args: &Args) -> Result<Vec<Target<'a>>> {
    let name = config.source.display();
    if config.local_agents {
        bail!("{name}: agents.local = true: the controller hosts its agents itself; deploy needs agents.local = false and [[agents.host]] entries with an address");
    }
    let chosen = match &args.hosts {
        None => None,
        Some(set) => Some(formats::nodeset::expand(
            &formats::nodeset::parse(set).map_err(|e| anyhow!("--hosts: {e}"))?,
        )),
    };
    if let Some(chosen) = &chosen {
        if let Some(unknown) = chosen
            .iter()
            .find(|h| !config.hosts.iter().any(|c| &c.name == *h))
        {
            bail!("--hosts: {name} has no agent host {unknown}");
        }
    }
    let mut out = Vec::new();
    for host in &config.hosts {
        if chosen.as_ref().is_some_and(|c| !c.contains(&host.name)) {
            continue;
        }
        let address = host.address.as_deref().ok_or_else(|| {
            anyhow!(
                "{name}: agents.host {} has no address (the ssh destination deploy reaches it at)",
                host.name
            )
        })?;
        out.push(Target {
            host,
            address,
            nodes: config.fold(&host.nodes),
        });
    }
    if out.is_empty() {
        bail!("{name}: no [[agents.host]] to deploy");
    }
    Ok(out)
}

/// The agent's arguments on its host, its paths under `root`, the
/// directory made absolute: what a running agent's command line is
/// compared with.
fn agent_args(config: &Cluster, t: &Target<'_>, root: &str) -> Vec<String> {
    let first = t.host.nodes.first().map(|&n| &config.nodes[n]);
    let (cpus, memory) = first.map_or((1, 0), |n| (n.cpus, n.memory_mb));
    vec![
        format!("{root}/bin/agent"),
        "--controller".into(),
        config.deploy.controller_address.clone(),
        "--nodes".into(),
        t.nodes.clone(),
        "--cpus".into(),
        cpus.to_string(),
        "--memory".into(),
        memory.to_string(),
        "--host".into(),
        t.host.name.clone(),
        "--secret-file".into(),
        format!("{root}/secret"),
        "--record-dir".into(),
        format!("{root}/records"),
        "--sigsleep".into(),
        format!("{root}/bin/sigsleep"),
    ]
}

/// The same, as the start script runs it: `root` a shell word of its own
/// (the script's `"$d"`), everything else quoted.
fn agent_command(config: &Cluster, t: &Target<'_>, root: &str) -> String {
    // A NUL cannot be in a config value: it marks where the root goes.
    agent_args(config, t, "\0")
        .iter()
        .map(|a| match a.split_once('\0') {
            Some((before, after)) => {
                let q = |s: &str| {
                    if s.is_empty() {
                        String::new()
                    } else {
                        quote(s)
                    }
                };
                format!("{}{root}{}", q(before), q(after))
            }
            None => quote(a),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `key=value` lines, as the scripts print them.
fn fields(out: &str) -> BTreeMap<&str, &str> {
    out.lines().filter_map(|l| l.split_once('=')).collect()
}

/// Free disk a host needs beyond the binaries: the log and the record
/// spool of a long run.
const MARGIN_KB: u64 = 64 * 1024;

async fn deploy_host(config: &Cluster, ssh: &Ssh, bin: &Binaries, t: &Target<'_>) -> Report {
    let mut report = Report {
        name: t.host.name.clone(),
        address: t.address.to_string(),
        nodes: t.nodes.clone(),
        pid: None,
        version: "-".into(),
        state: Err(String::new()),
    };
    report.state = deploy_steps(config, ssh, bin, t, &mut report).await;
    report
}

async fn deploy_steps(
    config: &Cluster,
    ssh: &Ssh,
    bin: &Binaries,
    t: &Target<'_>,
    report: &mut Report,
) -> Result<String, String> {
    let dir = &config.deploy.dir;
    let seen = ssh.run(t.address, &scripts::inspect(dir)).await?;
    let f = fields(&seen);
    if f.get("deployed") == Some(&"yes")
        && f.get("mark") != Some(&"yes")
        && f.get("empty") != Some(&"yes")
    {
        return Err(format!(
            "{dir} is there, not empty, and deploy did not make it (no {}): give \
             agents.deploy_dir a directory of their own",
            scripts::MARK
        ));
    }
    if let Some(pid) = f.get("pid").and_then(|p| p.parse::<u32>().ok()) {
        let sha = f.get("running_sha").copied().unwrap_or("");
        let args = f.get("running_args").copied().unwrap_or("").trim();
        let root = f.get("root").copied().unwrap_or("");
        report.pid = Some(pid);
        report.version = bin.label(sha);
        return if sha != bin.agent_sha {
            Err(format!(
                "runs an agent of another build ({}), pid {pid}: undeploy it first",
                &sha[..sha.len().min(12)]
            ))
        } else if args != agent_args(config, t, root).join(" ") {
            Err(format!(
                "runs an agent started otherwise (other nodes, sizes, host name or controller), \
                 pid {pid}: undeploy it first"
            ))
        } else {
            Ok("already up".into())
        };
    }
    let fresh = |key: &str, sha: &str| f.get(key).copied() != Some(sha);
    let copy_agent = fresh("agent_sha", &bin.agent_sha);
    let copy_sigsleep = fresh("sigsleep_sha", &bin.sigsleep_sha);
    let need_kb = MARGIN_KB
        + if copy_agent || copy_sigsleep {
            bin.bytes / 1024
        } else {
            0
        };
    let free_kb: u64 = f.get("free_kb").and_then(|v| v.parse().ok()).unwrap_or(0);
    if free_kb < need_kb {
        return Err(format!(
            "{} MiB free for {dir}, {} MiB needed",
            free_kb / 1024,
            need_kb / 1024
        ));
    }
    ssh.run(t.address, &scripts::prepare(dir)).await?;
    let mut files: Vec<&Path> = Vec::new();
    if copy_agent {
        files.push(&bin.agent);
    }
    if copy_sigsleep {
        files.push(&bin.sigsleep);
    }
    if !files.is_empty() {
        ssh.copy(&files, t.address, &format!("{dir}/bin/")).await?;
    }
    ssh.copy(
        &[config.secret_file.as_path()],
        t.address,
        &format!("{dir}/secret"),
    )
    .await?;
    let started = ssh
        .run(
            t.address,
            &scripts::start(dir, &agent_command(config, t, "\"$d\"")),
        )
        .await?;
    let pid = fields(&started)
        .get("pid")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| {
            format!(
                "the agent did not start: {}",
                started.trim().replace('\n', "; ")
            )
        })?;
    report.pid = Some(pid);
    report.version = bin.label(&bin.agent_sha);
    Ok("started".into())
}

/// Prints what deploy would run on each host.
fn dry_run_deploy(
    config: &Cluster,
    ssh: &Ssh,
    bin: &Binaries,
    targets: &[Target<'_>],
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let dir = &config.deploy.dir;
    for t in targets {
        let h = &t.host.name;
        writeln!(out, "# {h} ({}): nodes {}", t.address, t.nodes)?;
        writeln!(
            out,
            "{}   # look: a running agent, free disk, binaries there",
            ssh.ssh_line(t.address)
        )?;
        writeln!(
            out,
            "{}   # mkdir -p {dir}/bin {dir}/records",
            ssh.ssh_line(t.address)
        )?;
        let bins: [&Path; 2] = [&bin.agent, &bin.sigsleep];
        writeln!(
            out,
            "{}   # unless the same build is there",
            remote::join(&ssh.scp_line(&bins, t.address, &format!("{dir}/bin/")))
        )?;
        writeln!(
            out,
            "{}",
            remote::join(&ssh.scp_line(
                &[config.secret_file.as_path()],
                t.address,
                &format!("{dir}/secret")
            ))
        )?;
        writeln!(
            out,
            "{}   # setsid {} >> {dir}/agent.log 2>&1 &",
            ssh.ssh_line(t.address),
            agent_command(config, t, &quote(dir))
        )?;
    }
    Ok(())
}

/// Waits (up to `patience`) until the controller has every node of the
/// hosts started or already up registered; marks the others.
async fn wait_registered(
    config: &Cluster,
    addr: &str,
    secret: &[u8],
    reports: &mut [Report],
    patience: Duration,
) {
    let deadline = Instant::now() + patience;
    let mut last_error = String::new();
    loop {
        let mut pending = 0;
        match client::request(addr, secret, &Request::Nodes).await {
            Ok(Response::Nodes(nodes)) => {
                let up: BTreeMap<&str, (&str, NodeState)> = nodes
                    .iter()
                    .map(|n| (n.name.as_str(), (n.host.as_str(), n.state)))
                    .collect();
                for r in reports.iter_mut() {
                    let Ok(state) = &r.state else { continue };
                    if state.ends_with("registered") {
                        continue;
                    }
                    let host = config.hosts.iter().find(|h| h.name == r.name);
                    let all = host.is_some_and(|h| {
                        h.nodes.iter().all(|&n| {
                            up.get(config.nodes[n].name.as_str())
                                .is_some_and(|(agent, s)| *agent == r.name && *s != NodeState::Down)
                        })
                    });
                    if all {
                        r.state = Ok(format!("{state}, registered"));
                    } else {
                        pending += 1;
                    }
                }
            }
            Ok(other) => last_error = format!("unexpected answer: {other:?}"),
            Err(e) => last_error = format!("{e:#}"),
        }
        if pending == 0 && last_error.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for r in reports.iter_mut() {
                if let Ok(state) = &r.state {
                    if !state.ends_with("registered") {
                        let why = if last_error.is_empty() {
                            format!(
                                "its nodes did not register in {} s (its log: {}/agent.log on the host)",
                                patience.as_secs(),
                                config.deploy.dir
                            )
                        } else {
                            format!("the controller at {addr} does not answer: {last_error}")
                        };
                        r.state = Err(format!("{state}, but {why}"));
                    }
                }
            }
            return;
        }
        last_error.clear();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn print_table(reports: &[Report]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let mut rows = vec![[
        "HOST".to_string(),
        "ADDRESS".into(),
        "NODES".into(),
        "PID".into(),
        "VERSION".into(),
        "STATE".into(),
    ]];
    for r in reports {
        rows.push([
            r.name.clone(),
            r.address.clone(),
            r.nodes.clone(),
            r.pid.map_or("-".into(), |p| p.to_string()),
            r.version.clone(),
            match &r.state {
                Ok(s) => s.clone(),
                Err(e) => format!("FAILED: {e}"),
            },
        ]);
    }
    let width: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::new();
        for c in 0..5 {
            let _ = write!(line, "{:<w$}  ", r[c], w = width[c]);
        }
        writeln!(out, "{line}{}", r[5])?;
    }
    Ok(())
}

/// One line on standard error per host that failed; whether any did.
fn say_failures(what: &str, reports: &[Report]) -> bool {
    let mut failed = false;
    for r in reports {
        if let Err(e) = &r.state {
            eprintln!("controller: {what}: host {} ({}): {e}", r.name, r.address);
            failed = true;
        }
    }
    failed
}

/// `controller deploy`; whether every host came up.
pub async fn deploy(config: &Cluster, args: &Args, addr: &str) -> Result<bool> {
    let targets = targets(config, args)?;
    let bin = Binaries::find()?;
    let ssh = transport(config);
    check_controller_address(config)?;
    if args.dry_run {
        dry_run_deploy(config, &ssh, &bin, &targets)?;
        return Ok(true);
    }
    // The agents need the controller to register with: it runs first.
    let secret = config.client_secret(None)?;
    client::request(addr, &secret, &Request::Stats)
        .await
        .with_context(|| {
            format!(
                "start the controller first (controller serve --config {} --detach)",
                config.source.display()
            )
        })?;
    let mut reports =
        futures_util::future::join_all(targets.iter().map(|t| deploy_host(config, &ssh, &bin, t)))
            .await;
    wait_registered(config, addr, &secret, &mut reports, Duration::from_secs(30)).await;
    print_table(&reports)?;
    Ok(!say_failures("deploy", &reports))
}

/// ssh and scp, or clush when the config asks for it and it is there.
fn transport(config: &Cluster) -> Ssh {
    let d = &config.deploy;
    let clush = d.clush
        && std::process::Command::new("clush")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if d.clush && !clush {
        eprintln!("controller: agents.clush = true, but clush is not installed: using ssh and scp");
    }
    Ssh::new(d.ssh_options.clone(), d.fanout, clush)
}

/// Agents must be told an address they can reach.
fn check_controller_address(config: &Cluster) -> Result<()> {
    for a in config
        .deploy
        .controller_address
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        let host = a.rsplit_once(':').map_or(a, |(h, _)| h);
        if matches!(host, "0.0.0.0" | "[::]" | "::" | "") {
            bail!(
                "{}: agents would be told to reach the controller at {a}, which is no address \
                 they can reach: set [agents] controller_address to the controller's address \
                 on the agents' network",
                config.source.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(agents: &str) -> Cluster {
        Cluster::from_str(
            &format!(
                "[controller]\nlisten = \"0.0.0.0:7817\"\n[agents]\n{agents}\n\
                 [[agents.host]]\nname = \"h1\"\nnodes = \"n[1-2]\"\naddress = \"root@vm1\"\n\
                 [[agents.host]]\nname = \"h2\"\nnodes = \"n[3-4]\"\naddress = \"vm2\"\n\
                 [[nodes]]\nnames = \"n[1-4]\"\ncpus = 8\nmemory = \"16G\"\n"
            ),
            Path::new("c.toml"),
        )
        .unwrap()
    }

    fn args(hosts: Option<&str>) -> Args {
        Args {
            hosts: hosts.map(String::from),
            dry_run: true,
        }
    }

    #[test]
    fn the_hosts_to_deploy_and_what_their_agents_are_told() {
        let c = config("local = false\ncontroller_address = \"10.0.0.1:7817\"");
        let all = targets(&c, &args(None)).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!((all[1].address, all[1].nodes.as_str()), ("vm2", "n[3-4]"));
        let one = targets(&c, &args(Some("h[2]"))).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(
            agent_command(&c, &one[0], "\"$d\""),
            "\"$d\"/bin/agent --controller 10.0.0.1:7817 --nodes 'n[3-4]' --cpus 8 \
             --memory 16384 --host h2 --secret-file \"$d\"/secret --record-dir \"$d\"/records \
             --sigsleep \"$d\"/bin/sigsleep"
        );
        check_controller_address(&c).unwrap();
    }

    #[test]
    fn what_cannot_be_deployed_is_refused_with_why() {
        let local = config("local = true");
        let e = targets(&local, &args(None)).err().unwrap().to_string();
        assert!(e.contains("agents.local = true"), "{e}");
        let c = config("local = false");
        let e = targets(&c, &args(Some("h9"))).err().unwrap().to_string();
        assert!(e.contains("no agent host h9"), "{e}");
        let e = check_controller_address(&c).unwrap_err().to_string();
        assert!(
            e.contains("0.0.0.0:7817") && e.contains("controller_address"),
            "{e}"
        );
        // Written as agents read it: spaces around entries and a trailing
        // comma are fine.
        let c = config("local = false\ncontroller_address = \"10.0.0.1:7817 , [::1]:7817,\"");
        check_controller_address(&c).unwrap();
        for (agents, needle) in [
            ("deploy_dir = \"/\"", "deploy_dir"),
            ("deploy_dir = \"a/../..\"", "deploy_dir"),
            ("ssh_options = \"-o 'ProxyCommand=x\"", "unbalanced quotes"),
            ("controller_address = \"nonsense\"", "not HOST:PORT"),
            (
                "controller_address = \"10.0.0.1:7817,10.0.0.2\"",
                "\"10.0.0.2\" is not HOST:PORT",
            ),
            ("deploy_dir = \"~/clemu\"", "without ~/"),
            ("deploy_dir = \"my agents\"", "letters, digits"),
            ("deploy_dir = \"a$(x)\"", "letters, digits"),
        ] {
            let e = Cluster::from_str(
                &format!("[agents]\n{agents}\n[[nodes]]\nnames = \"n1\"\ncpus = 1\n"),
                Path::new("c.toml"),
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(needle) && e.contains("c.toml"), "{agents}: {e}");
        }
    }

    #[test]
    fn a_scripts_answer_is_read_key_by_key() {
        let f = fields("deployed=yes\nfree_kb=123\nrunning_args= /x/agent --nodes n[1-2] \n");
        assert_eq!(f["free_kb"], "123");
        assert_eq!(f["running_args"], " /x/agent --nodes n[1-2] ");
    }
}
