//! The `controller` command line: `serve`, the client subcommands, and
//! `nodeset`. What the user typed becomes a request; [`run`] carries it
//! out and returns the exit code's meaning.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use formats::wire::{JobFilter, JobState, Request, Response};
use tokio_util::sync::CancellationToken;

mod submit;
use crate::config::Cluster;
use client::tables;
use submit::submit;
pub use submit::SubmitArgs;

const EXAMPLES: &str = "\
Examples:
  controller serve --config configs/demo.toml
  controller --config configs/demo.toml submit --cores 16 --runtime 60 --count 4
  controller --config configs/demo.toml queue
  controller --config configs/demo.toml suspend 3
  controller --config configs/demo.toml nodes --format json
  controller --config configs/demo.toml drain 'vn[001-004]' --reason maintenance
  controller nodeset -f 'vn[0000-3599]!vn[0100-0199]'

Exit status: 0 ok, 1 done but something was refused (an unknown job id, a
submission the cluster cannot run), 2 usage error or no controller.";

#[derive(Debug, Parser)]
#[command(
    name = "controller",
    version,
    about = "clemu's controller: run the emulated cluster, or talk to it",
    after_help = EXAMPLES,
    // `--runtime -5` reaches the checks that say what is wrong with it.
    allow_negative_numbers = true
)]
pub struct Cli {
    /// Cluster configuration file (TOML).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Controller address for client commands, or a comma-separated list
    /// (the request goes to the one that leads) [default: the config's
    /// `[controller] hosts`, else the running controller's, from its state
    /// directory, else the config's listen].
    #[arg(long, global = true, value_name = "ADDR")]
    pub addr: Option<String>,
    /// Shared secret file [default: the config's].
    #[arg(long, global = true, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Output of queue, nodes, stats and submit.
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller (and, with `[agents] local = true`, its agents).
    Serve {
        /// Address to listen on [default: the config's listen].
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Directory for the secret and runtime state.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Directory the job records go to.
        #[arg(long, value_name = "DIR")]
        record_dir: Option<PathBuf>,
        /// Answer `GET /metrics` (Prometheus text format) at this address
        /// [default: the config's metrics_listen, else none].
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// Run in the background: return once the controller listens,
        /// printing its pid (as slurmctld without -D).
        #[arg(long)]
        detach: bool,
        /// With --detach, where the controller logs [default:
        /// controller.log in its state directory].
        #[arg(long, value_name = "FILE", requires = "detach")]
        log: Option<PathBuf>,
    },
    /// Submit jobs; prints their ids.
    Submit(SubmitArgs),
    /// Jobs waiting and running.
    Queue {
        /// Also jobs that are over.
        #[arg(long)]
        all: bool,
    },
    /// Nodes and their state; with --hosts, each agent's host: load,
    /// memory, live job processes and their memory.
    Nodes {
        #[arg(long)]
        hosts: bool,
    },
    /// Counts and counters of the whole cluster.
    Stats,
    /// Cancel jobs: these ids, or every job not over that matches the
    /// filters (as Slurm's `scancel`); prints the ids cancelled by filter.
    Cancel(CancelArgs),
    /// Write the records of these jobs (none given: every job the
    /// controller remembers) to standard output, for calcmets (`controller
    /// records | calcmets --cores N -`); jobs not over have none yet.
    Records {
        #[arg(value_name = "JOBID")]
        ids: Vec<u64>,
    },
    /// Wait until these jobs (or, with none given, every job not yet over)
    /// are over; exit 1 if any of them did not complete.
    Wait {
        #[arg(value_name = "JOBID")]
        ids: Vec<u64>,
    },
    /// Suspend running jobs (their processes get real signals).
    Suspend {
        #[arg(required = true, value_name = "JOBID")]
        ids: Vec<u64>,
    },
    /// Resume suspended jobs.
    Resume {
        #[arg(required = true, value_name = "JOBID")]
        ids: Vec<u64>,
    },
    /// Take nodes out of scheduling (running jobs go on).
    Drain {
        nodes: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Put drained nodes back.
    Undrain { nodes: String },
    /// Nodes fail: down, their jobs killed and requeued, or over as
    /// node_fail (per partition); prints the jobs hit.
    Fail {
        nodes: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Failed nodes are up again.
    Repair { nodes: String },
    /// Say that no more jobs will be submitted: a Batsim scheduler
    /// (`policy = "batsim"`) hears `no_more_static_job_to_submit` once no
    /// job waits out of the queue (`--after`, an array at its limit).
    /// runworkload says it after its last submission.
    NoMoreJobs,
    /// Cancel every job, stop the agents and the controller.
    Shutdown,
    /// Start the agents on their hosts over ssh (`[[agents.host]]`
    /// addresses): copy the binaries and the secret into `[agents]
    /// deploy_dir`, start one agent per host, wait until every node is
    /// registered, and print a table host by host. Hosts already up with
    /// this build and these nodes are left alone; exit 1 if some host
    /// failed (each named on standard error).
    Deploy(crate::deploy::Args),
    /// Stop the agents deploy started (SIGTERM, SIGKILL after
    /// kill_grace_ms), check that no job process is left, and remove
    /// their directories; exit 1 if some host failed.
    Undeploy(crate::deploy::UndeployArgs),
    /// Nodeset notation, as ClusterShell's `nodeset`.
    Nodeset(NodesetArgs),
    /// The scheduling policies a config can name (`[controller] policy`).
    Policies,
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["ids", "all", "state", "partition", "name"])
))]
pub struct CancelArgs {
    /// Jobs to cancel (with filters: those of them that match).
    #[arg(value_name = "JOBID")]
    pub ids: Vec<u64>,
    /// Every job not yet over (that matches the other filters).
    #[arg(long)]
    pub all: bool,
    /// Only jobs in this state: pending, running or suspended (repeat or
    /// separate with commas for several).
    #[arg(long, value_name = "STATE", value_delimiter = ',', value_parser = active_state)]
    pub state: Vec<JobState>,
    /// Only jobs of this partition.
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// Only jobs of this name (`submit --name`).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

fn active_state(s: &str) -> Result<JobState, String> {
    match JobState::parse(&s.to_ascii_lowercase()) {
        Some(st) if !st.is_final() => Ok(st),
        _ => Err(format!(
            "{s:?}: a job not yet over is pending, running or suspended"
        )),
    }
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("mode").required(true).args(["fold", "expand", "count"])))]
pub struct NodesetArgs {
    /// Fold into the most compact form.
    #[arg(short = 'f', long)]
    pub fold: bool,
    /// Expand into names.
    #[arg(short = 'e', long)]
    pub expand: bool,
    /// Count the nodes.
    #[arg(short = 'c', long)]
    pub count: bool,
    /// Separator of expanded names.
    #[arg(short = 'S', long, default_value = " ")]
    pub separator: String,
    /// Nodesets; several are taken together (union). `@group` names come
    /// from --config. None: read them from standard input, separated by
    /// spaces or lines.
    #[arg(value_name = "NODESET")]
    pub exprs: Vec<String>,
}

fn seconds(s: &str) -> Result<u64, String> {
    formats::seconds::duration_ns(s)
}

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Done, but something was refused.
    Refused,
}

fn load(cli: &Cli) -> Result<Cluster> {
    let path = cli
        .config
        .as_ref()
        .ok_or_else(|| anyhow!("--config FILE is required"))?;
    Cluster::load(path)
}

/// The config `serve` runs: the file, with the command line's overrides.
pub fn serve_config(cli: &Cli) -> Result<Cluster> {
    let Command::Serve {
        listen,
        state_dir,
        record_dir,
        metrics_listen,
        ..
    } = &cli.command
    else {
        bail!("not serve");
    };
    let mut config = load(cli)?;
    if let Some(l) = listen {
        config.listen = l.clone();
    }
    if let Some(d) = state_dir {
        config.move_state_dir(d);
    }
    if let Some(s) = &cli.secret_file {
        config.secret_file = s.clone();
    }
    if let Some(d) = record_dir {
        config.record_dir = d.clone();
    }
    if let Some(m) = metrics_listen {
        config.metrics_listen = Some(m.clone());
    }
    Ok(config)
}

/// Runs the command. `ready`: a detached `serve`'s way to tell the
/// process that waits for it ([`crate::detach`]).
pub async fn run(
    cli: Cli,
    shutdown: CancellationToken,
    ready: Option<crate::detach::Ready>,
) -> Result<Outcome> {
    match &cli.command {
        Command::Nodeset(a) => nodeset(&cli, a),
        Command::Policies => {
            for p in crate::policy::all() {
                writeln!(std::io::stdout(), "{:<8} {}", p.name, p.about)?;
            }
            Ok(Outcome::Ok)
        }
        Command::Serve { .. } => {
            let config = serve_config(&cli)?;
            crate::serve_then(config, shutdown, move || {
                if let Some(r) = ready {
                    r.notify();
                }
            })
            .await?;
            Ok(Outcome::Ok)
        }
        Command::Deploy(a) => {
            let mut config = load(&cli)?;
            // The controller's secret is the one the agents get.
            if let Some(s) = &cli.secret_file {
                config.secret_file = s.clone();
            }
            let addr = config.client_address(cli.addr.as_deref());
            let all_up = crate::deploy::deploy(&config, a, &addr).await?;
            Ok(if all_up {
                Outcome::Ok
            } else {
                Outcome::Refused
            })
        }
        Command::Undeploy(a) => {
            let config = load(&cli)?;
            let clean = crate::deploy::undeploy(&config, a).await?;
            Ok(if clean { Outcome::Ok } else { Outcome::Refused })
        }
        _ => client_command(&cli, &shutdown).await,
    }
}

async fn client_command(cli: &Cli, shutdown: &CancellationToken) -> Result<Outcome> {
    let config = load(cli)?;
    let addr = config.client_address(cli.addr.as_deref());
    let secret = config.client_secret(cli.secret_file.as_deref())?;
    let req = match &cli.command {
        Command::Submit(a) => return submit(cli, a, &addr, &secret, shutdown).await,
        Command::Queue { all } => Request::Queue { all: *all },
        Command::Nodes { hosts: false } => Request::Nodes,
        Command::Nodes { hosts: true } => Request::Hosts,
        Command::Stats => Request::Stats,
        Command::Cancel(a)
            if a.all || !a.state.is_empty() || a.partition.is_some() || a.name.is_some() =>
        {
            Request::CancelMatching(JobFilter {
                ids: a.ids.clone(),
                states: a.state.clone(),
                partition: a.partition.clone(),
                name: a.name.clone(),
            })
        }
        Command::Cancel(a) => Request::Cancel(a.ids.clone()),
        Command::Wait { ids } => return wait(ids, &addr, &secret, shutdown).await,
        Command::Records { ids } => return records(ids, &addr, &secret).await,
        Command::Deploy(_) | Command::Undeploy(_) => unreachable_command()?,
        Command::Suspend { ids } => Request::Suspend(ids.clone()),
        Command::Resume { ids } => Request::Resume(ids.clone()),
        Command::Drain { nodes, reason } => Request::Drain {
            nodes: nodes.clone(),
            reason: reason.clone(),
        },
        Command::Undrain { nodes } => Request::Undrain {
            nodes: nodes.clone(),
        },
        Command::Fail { nodes, reason } => Request::Fail {
            nodes: nodes.clone(),
            reason: reason.clone(),
        },
        Command::Repair { nodes } => Request::Repair {
            nodes: nodes.clone(),
        },
        Command::Shutdown => Request::Shutdown,
        Command::NoMoreJobs => Request::NoMoreJobs,
        Command::Serve { .. } | Command::Nodeset(_) | Command::Policies => unreachable_command()?,
    };
    let json = cli.format == Format::Json;
    let mut session = client::Session::open(&addr, &secret).await?;
    if matches!(
        req,
        Request::Stats | Request::Hosts | Request::Nodes | Request::Shutdown
    ) {
        session.to_leader().await?;
    }
    let resp = session.call(&req).await?;
    if matches!(cli.command, Command::Nodes { .. }) && !json && !config.controllers.is_empty() {
        // With several controllers: which one answered, and how it stands.
        if let Response::Stats(s) = session.call(&Request::Stats).await? {
            writeln!(
                std::io::stdout(),
                "{}",
                tables::replication_line(&s.replication)
            )?;
        }
    }
    let print_json = |v: serde_json::Value| -> Result<()> {
        writeln!(std::io::stdout(), "{}", serde_json::to_string_pretty(&v)?)?;
        Ok(())
    };
    match resp {
        Response::Submitted(_) | Response::Starts(_) => {
            bail!("controller {addr}: unexpected answer to {req:?}")
        }
        Response::Queue(jobs) => {
            if json {
                print_json(tables::queue_json(&jobs))?;
            } else {
                write!(
                    std::io::stdout(),
                    "{}",
                    tables::queue_table(&jobs, crate::core::wall_ns())
                )?;
            }
        }
        Response::Nodes(nodes) => {
            if json {
                print_json(tables::nodes_json(&nodes))?;
            } else {
                write!(std::io::stdout(), "{}", tables::nodes_table(&nodes))?;
            }
        }
        Response::Hosts(hosts) => {
            if json {
                print_json(tables::hosts_json(&hosts))?;
            } else {
                write!(std::io::stdout(), "{}", tables::hosts_table(&hosts))?;
            }
        }
        Response::Stats(s) => {
            if json {
                print_json(tables::stats_json(&s))?;
            } else {
                write!(std::io::stdout(), "{}", tables::stats_table(&s))?;
            }
        }
        Response::Jobs(outcomes) => {
            let mut refused = false;
            let mut acted = Vec::new();
            for o in outcomes {
                match o.error {
                    Some(e) => {
                        eprintln!("controller: job {}: {e}", o.id);
                        refused = true;
                    }
                    None => acted.push(o.id),
                }
            }
            // Jobs chosen by filter: say which, as submit says which it
            // made.
            if matches!(req, Request::CancelMatching(_)) {
                if json {
                    print_json(serde_json::json!(acted))?;
                } else {
                    let mut out = std::io::stdout().lock();
                    for id in &acted {
                        writeln!(out, "{id}")?;
                    }
                    if acted.is_empty() {
                        eprintln!("controller: no job matched");
                    }
                }
            }
            return Ok(if refused {
                Outcome::Refused
            } else {
                Outcome::Ok
            });
        }
        Response::Drained(nodes) => writeln!(std::io::stdout(), "{nodes}")?,
        Response::Failed { nodes, jobs } => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{nodes}")?;
            for j in jobs {
                writeln!(out, "job {j}: killed (node failed)")?;
            }
        }
        Response::Records(frames) => {
            std::io::stdout().write_all(&frames)?;
        }
        Response::ShuttingDown => eprintln!("controller: shutting down"),
        Response::Noted => {}
        Response::NotPrimary(primary) => {
            eprintln!("controller: {addr} is a backup; ask the primary, {primary}");
            return Ok(Outcome::Refused);
        }
        Response::Error(e) => {
            eprintln!("controller: {e}");
            return Ok(Outcome::Refused);
        }
    }
    Ok(Outcome::Ok)
}

/// Ids per request when asking about many jobs: keeps each answer far
/// below the frame limit.
const CHUNK: usize = 20_000;

/// Writes the records of `ids` (none: every job the controller remembers)
/// to standard output. Only records of these very jobs: a record with the
/// job's id but not its submit instant is another cluster's (a record
/// directory reused after its state directory was removed).
async fn records(ids: &[u64], addr: &str, secret: &[u8]) -> Result<Outcome> {
    use std::io::IsTerminal;
    let mut stdout = std::io::stdout().lock();
    if stdout.is_terminal() {
        bail!(
            "records are binary: redirect them to a file (controller records > jobs.rec) or pipe \
             them to calcmets (controller records | calcmets --cores N -)"
        );
    }
    let mut session = client::Session::open(addr, secret).await?;
    let infos = match session.call(&Request::Queue { all: true }).await? {
        Response::Queue(q) => q,
        other => bail!("controller {addr}: unexpected answer {other:?}"),
    };
    let submit: std::collections::HashMap<u64, i64> = infos
        .iter()
        .filter(|j| ids.is_empty() || ids.contains(&j.id))
        .map(|j| (j.id, j.submit_ns))
        .collect();
    let mut outcome = Outcome::Ok;
    for id in ids.iter().filter(|id| !submit.contains_key(id)) {
        eprintln!("controller: job {id}: no such job");
        outcome = Outcome::Refused;
    }
    let mut wanted: Vec<u64> = submit.keys().copied().collect();
    wanted.sort_unstable();
    let mut written = std::collections::HashSet::new();
    for chunk in wanted.chunks(CHUNK) {
        let frames = match session.call(&Request::Records(chunk.to_vec())).await? {
            Response::Records(f) => f,
            Response::Error(e) => bail!("controller {addr}: {e}"),
            other => bail!("controller {addr}: unexpected answer {other:?}"),
        };
        let mut out = Vec::with_capacity(frames.len());
        let mut reader = formats::record::RecordReader::new(&frames[..]);
        reader.for_each_record(|r| -> std::io::Result<()> {
            if submit.get(&r.id) == Some(&r.submit) {
                written.insert(r.id);
                formats::record::encode(r, &mut out).map_err(std::io::Error::other)?;
            }
            Ok(())
        })?;
        stdout.write_all(&out)?;
    }
    stdout.flush()?;
    let without = wanted.len() - written.len();
    if without > 0 {
        eprintln!(
            "controller: {without} of {} jobs have no record (not over yet, or never started)",
            wanted.len()
        );
    }
    Ok(outcome)
}

/// Waits until `ids` (none: every job not over when it starts) are over.
/// Refused (exit 1) if any of them ended otherwise than completed, or is
/// unknown, or SIGINT/SIGTERM stopped the wait.
async fn wait(
    ids: &[u64],
    addr: &str,
    secret: &[u8],
    shutdown: &CancellationToken,
) -> Result<Outcome> {
    let mut session = client::Session::open(addr, secret).await?;
    let ids: Vec<u64> = if ids.is_empty() {
        match session.call(&Request::Queue { all: false }).await? {
            Response::Queue(q) => q.into_iter().map(|j| j.id).collect(),
            other => bail!("controller {addr}: unexpected answer {other:?}"),
        }
    } else {
        ids.to_vec()
    };
    loop {
        let infos = match session.call(&Request::Jobs(ids.clone())).await? {
            Response::Queue(q) => q,
            other => bail!("controller {addr}: unexpected answer {other:?}"),
        };
        if infos.iter().all(|j| j.state.is_final()) {
            let mut outcome = Outcome::Ok;
            for id in &ids {
                match infos.iter().find(|j| j.id == *id) {
                    None => {
                        eprintln!("controller: job {id}: no such job");
                        outcome = Outcome::Refused;
                    }
                    Some(j) if j.state != JobState::Completed => {
                        eprintln!("controller: job {id} ended {}", j.state.as_str());
                        outcome = Outcome::Refused;
                    }
                    Some(_) => {}
                }
            }
            return Ok(outcome);
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            () = shutdown.cancelled() => {
                eprintln!("controller: interrupted: jobs not over yet");
                return Ok(Outcome::Refused);
            }
        }
    }
}

fn unreachable_command() -> Result<Request> {
    Err(anyhow!("not a client command"))
}

fn nodeset(cli: &Cli, a: &NodesetArgs) -> Result<Outcome> {
    let groups = match &cli.config {
        Some(_) => load(cli)?.groups,
        None => formats::nodeset::Groups::new(),
    };
    let stdin;
    let exprs: Vec<&str> = if a.exprs.is_empty() {
        stdin = std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?;
        stdin.split_whitespace().collect()
    } else {
        a.exprs.iter().map(String::as_str).collect()
    };
    // The union of the arguments, each read on its own: one with operators
    // other than `,` goes in parentheses (they apply left to right).
    let mut all = String::new();
    for e in exprs {
        if !all.is_empty() {
            all.push(',');
        }
        if e.contains(['!', '&', '^']) {
            all.push('(');
            all.push_str(e);
            all.push(')');
        } else {
            all.push_str(e);
        }
    }
    let set = groups.parse(&all).map_err(|e| anyhow!(e))?;
    let mut out = std::io::stdout().lock();
    if a.count {
        writeln!(out, "{}", formats::nodeset::count(&set))?;
    } else if a.expand {
        writeln!(out, "{}", formats::nodeset::expand(&set).join(&a.separator))?;
    } else {
        writeln!(out, "{}", formats::nodeset::folded(&set))?;
    }
    out.flush()?;
    Ok(Outcome::Ok)
}
