//! The cluster configuration file (TOML): what the user wrote, checked and
//! resolved into a [`Cluster`] description that `serve` and the clients use.
//!
//! Paths in the file are relative to the file's directory; paths on the
//! command line are relative to the working directory.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::settings::{AgentSettings, SuspendMode};
use anyhow::{anyhow, bail, Context, Result};
use formats::nodeset::{self, Groups};

use crate::gres;

mod contact;
mod controllers;
use serde::Deserialize;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    controller: ControllerSection,
    #[serde(default)]
    agents: AgentsSection,
    #[serde(default)]
    nodes: Vec<NodesSection>,
    #[serde(default)]
    groups: BTreeMap<String, String>,
    #[serde(default)]
    partitions: Vec<PartitionSection>,
    batsim: Option<crate::batsim::Section>,
    #[serde(default)]
    workload: WorkloadSection,
}

/// `[workload]`: how `runworkload` maps a trace's jobs onto this cluster.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadSection {
    /// What trace jobs ask of each node's generic resources: the first
    /// rule a job matches.
    #[serde(default)]
    gres: Vec<gres::TraceRuleSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerSection {
    listen: Option<String>,
    /// Every controller's address, the primary first; a controller serves
    /// as the one its `listen` names.
    hosts: Option<Vec<String>>,
    /// Seconds a backup waits without news of its primary before it takes
    /// over.
    takeover_timeout_s: Option<f64>,
    secret_file: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    record_dir: Option<PathBuf>,
    policy: Option<String>,
    /// "suspend", "cancel" or "requeue": what jobs of higher-priority
    /// partitions do to lower ones in their way.
    preemption: Option<String>,
    /// Seconds a requeued job waits before it may start again (Slurm's
    /// 121; trace seconds under a replay).
    requeue_delay_s: Option<f64>,
    /// Gang scheduling time slice, in seconds.
    time_slice_s: Option<f64>,
    /// Least time between two scheduling passes, in seconds (trace
    /// seconds under a replay); 0: a pass after every event.
    schedule_interval_s: Option<f64>,
    /// The emulation's least wall-clock time between two passes, ms.
    pass_floor_ms: Option<f64>,
    /// Gone: wall-clock, it meant another thing at every speed-up. Only
    /// read to say so.
    schedule_interval_ms: Option<u64>,
    /// Start the processes of the jobs a gang turn will start ahead of it,
    /// held (default true).
    prestart: Option<bool>,
    /// Seconds past a job's wall-time limit before the controller cancels
    /// it (sigsleep itself stops at the limit; this is the safety net).
    timeout_grace_ms: Option<u64>,
    /// Fold the journal into a snapshot past this many MiB.
    journal_compact_mb: Option<u64>,
    /// "answer" (default): an answer that acknowledges a change waits
    /// until the change is on disk; "background": only until it is
    /// written, as slurmctld answers before its state save.
    journal_sync: Option<String>,
    /// Jobs not yet over that the controller keeps (Slurm's MaxJobCount);
    /// submissions past it wait.
    max_jobs: Option<u64>,
    /// Where to answer `GET /metrics` (Prometheus); none by default.
    metrics_listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsSection {
    local: Option<bool>,
    sigsleep: Option<PathBuf>,
    suspend_mode: Option<String>,
    /// Jobs wait under real-time scheduling (default true).
    realtime: Option<bool>,
    /// Whence a job's run counts: "start" (the controller's, default) or
    /// "launch" (its process's first instant).
    run_from: Option<String>,
    suspend_grace_ms: Option<u64>,
    kill_grace_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    heartbeat_timeout_ms: Option<u64>,
    #[serde(default)]
    host: Vec<HostSection>,
    /// `controller deploy`: see [`crate::deploy::settings::Settings`].
    deploy_dir: Option<String>,
    ssh_options: Option<String>,
    controller_address: Option<String>,
    fanout: Option<usize>,
    clush: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSection {
    name: String,
    nodes: String,
    /// Where `controller deploy` reaches it: an ssh destination.
    address: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodesSection {
    names: String,
    cpus: u32,
    #[serde(default)]
    memory: Option<toml::Value>,
    /// GPUs per node: `resources = { gpu = N }`.
    #[serde(default)]
    gpus: u32,
    /// Other countable resources per node, by name.
    #[serde(default)]
    resources: BTreeMap<String, u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionSection {
    name: String,
    #[serde(default = "all_nodes")]
    nodes: String,
    #[serde(default)]
    priority: u32,
    #[serde(default)]
    default: bool,
    /// Largest wall time a job may ask for, in seconds (0: no limit).
    #[serde(default)]
    max_time_s: u64,
    /// Jobs per core (gang time-slicing when above 1).
    #[serde(default)]
    oversubscribe: Option<u32>,
    /// This partition's gang time slice, in seconds [default: the
    /// controller's `time_slice_s`].
    #[serde(default)]
    time_slice_s: Option<f64>,
    /// What becomes of a job whose node is lost: "requeue" (default, as
    /// Slurm's JobRequeue=1) or "fail" (state node_fail).
    #[serde(default)]
    on_node_fail: Option<String>,
    /// Place each job on consecutive nodes (Slurm's `--contiguous`); on
    /// one-core nodes, what Batsim schedulers call consecutive resources.
    #[serde(default)]
    contiguous: bool,
}

/// Default of `[controller] max_jobs`: a million queued jobs take well
/// under a GiB (BENCHMARKS.md, "Submission load").
pub const DEFAULT_MAX_JOBS: u64 = 1_000_000;

/// Most nodes a cluster may have (a 3,600-node cluster is the usual size).
pub const MAX_NODES: usize = 1_000_000;

fn all_nodes() -> String {
    "ALL".into()
}

#[derive(Debug, Clone)]
pub struct NodeDef {
    pub name: String,
    pub cpus: u32,
    pub memory_mb: u64,
    /// Devices of each generic resource ([`Cluster::kinds`]).
    pub devices: gres::Counts,
}

#[derive(Debug, Clone)]
pub struct PartitionDef {
    pub name: String,
    /// Indices into [`Cluster::nodes`].
    pub nodes: Vec<usize>,
    pub priority: u32,
    pub default: bool,
    pub max_time_ns: u64,
    /// Jobs per core; above 1, gang time-slicing.
    pub oversubscribe: u32,
    /// How long a job of a time-slicing partition runs before it may have
    /// to give its cores to another.
    pub time_slice: Duration,
    /// A job whose node is lost goes back to the queue (else it ends as
    /// `node_fail`).
    pub requeue: bool,
    /// Jobs go on consecutive nodes only.
    pub contiguous: bool,
}

#[derive(Debug, Clone)]
pub struct HostDef {
    pub name: String,
    pub nodes: Vec<usize>,
    /// Its ssh destination (`root@vm03`, `vm03`), for `controller deploy`.
    pub address: Option<String>,
}

/// Longest duration a config may give (a week): longer ones are typing
/// mistakes, and would overflow the clocks they are added to.
const MAX_MS: u64 = 7 * 24 * 3600 * 1000;

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Where the file is, for messages.
    pub source: PathBuf,
    /// SHA-256 of the file's text, hex: which config a run's manifest
    /// says it ran, so that runs of different clusters are told apart.
    pub source_sha256: String,
    pub listen: String,
    /// `[controller] hosts`: the controllers, primary first (empty: one
    /// controller, at `listen`).
    pub controllers: Vec<String>,
    /// How long a backup waits without news of its primary before it
    /// takes over; also how long a primary acts without the backing of a
    /// majority of agent hosts before it steps down.
    pub takeover_timeout: Duration,
    pub secret_file: PathBuf,
    pub state_dir: PathBuf,
    pub record_dir: PathBuf,
    /// A name of [`crate::policy::all`].
    pub policy: String,
    /// What jobs of higher-priority partitions do to lower-priority ones.
    pub preemption: crate::policy::Preemption,
    /// How long a job requeued on request or by preemption waits before it
    /// may start again (trace seconds under a replay, which scales it).
    pub requeue_delay: Duration,
    /// Gang scheduling's time slice.
    pub time_slice: Duration,
    /// Least time between two scheduling passes (`schedule_interval_s`):
    /// trace seconds under a replay, which scales it as the trace's
    /// times; zero for a pass after every event.
    pub schedule_interval: Duration,
    /// The emulation's own least wall-clock time between passes
    /// (`pass_floor_ms`), never scaled: the twin has none.
    pub pass_floor: Duration,
    /// Whether the processes of the jobs the policy will start at its
    /// next wake-up (a gang turn) are started ahead, held.
    pub prestart: bool,
    pub timeout_grace: Duration,
    /// Journal size (bytes) past which it is folded into a snapshot.
    pub journal_compact_bytes: u64,
    /// Whether answers that acknowledge a change wait until it is on disk
    /// (`journal_sync = "answer"`), or only until it is written to the
    /// journal file (`"background"`): then a crash of the controller still
    /// loses nothing, a crash of its host what the sync behind the answers
    /// (about 100 ms, plus the disk's own time) had not covered yet.
    pub sync_before_answer: bool,
    /// Jobs not yet over, at most; a submission that would pass it waits
    /// until enough jobs have ended.
    pub max_jobs: usize,
    /// Address of the Prometheus metrics endpoint, if any.
    pub metrics_listen: Option<String>,
    pub nodes: Vec<NodeDef>,
    /// The nodes' names read for folding ([`Cluster::fold`]), on the
    /// first fold: the Slurm commands load the config at every call and
    /// most never fold, and on 10,000 nodes reading the names costs them
    /// more than the rest of their work.
    folder: std::sync::OnceLock<crate::folding::Folder>,
    pub groups: Groups,
    pub partitions: Vec<PartitionDef>,
    /// Whether `serve` hosts every node in its own process.
    pub local_agents: bool,
    /// How nodes are laid out on agent hosts (one local agent per host).
    pub hosts: Vec<HostDef>,
    pub agent: AgentSettings,
    pub heartbeat_timeout: Duration,
    /// The `[batsim]` section, with `policy = "batsim"`.
    pub batsim: Option<crate::batsim::Settings>,
    /// The generic resources its nodes have.
    pub kinds: gres::Kinds,
    /// `[[workload.gres]]`: what replayed trace jobs ask of them.
    pub trace_gres: Vec<gres::TraceRule>,
    /// How `controller deploy` starts agents on their hosts.
    pub deploy: crate::deploy::settings::Settings,
}

impl Cluster {
    /// This controller's place in `[controller] hosts` (the one its
    /// `listen` names): 0 is the primary. `None` when no list is given.
    pub fn controller_index(&self) -> Result<Option<usize>> {
        if self.controllers.is_empty() {
            return Ok(None);
        }
        match self.controllers.iter().position(|a| *a == self.listen) {
            Some(i) => Ok(Some(i)),
            None => bail!(
                "{}: this controller listens on {}, which is not one of controller.hosts ({}): \
                 start each controller with serve --listen set to its own entry",
                self.source.display(),
                self.listen,
                self.controllers.join(", ")
            ),
        }
    }

    pub fn load(path: &Path) -> Result<Cluster> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        Cluster::from_str(&text, path)
    }

    /// Parses a config; `path` is where it came from (for relative paths
    /// and messages).
    pub fn from_str(text: &str, path: &Path) -> Result<Cluster> {
        let name = path.display();
        let file: File = toml::from_str(text).map_err(|e| {
            // toml's message spans several lines (it quotes the source);
            // keep the first, which names the line and the problem.
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("").trim().to_string();
            let detail = msg.lines().last().unwrap_or("").trim().to_string();
            anyhow!("{name}: {first} {detail}")
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };

        let mut groups = Groups::new();
        for (g, expr) in &file.groups {
            groups.define(g, expr);
        }
        let mut nodes = Vec::new();
        let (kinds, resources) =
            gres::node_kinds(file.nodes.iter().map(|n| (n.gpus, &n.resources)))
                .map_err(|e| anyhow!("{name}: {e}"))?;
        for (i, n) in file.nodes.iter().enumerate() {
            let set = groups
                .parse(&n.names)
                .map_err(|e| anyhow!("{name}: nodes[{i}].names: {e}"))?;
            if n.cpus == 0 {
                bail!("{name}: nodes[{i}] ({}): cpus must be at least 1", n.names);
            }
            let memory_mb = match &n.memory {
                None => 0,
                Some(v) => parse_size(v).map_err(|e| anyhow!("{name}: nodes[{i}].memory: {e}"))?,
            };
            if nodes.len() + set.len() > MAX_NODES {
                bail!("{name}: nodes[{i}]: more than {MAX_NODES} nodes in all");
            }
            let devices = kinds.counts_of(&resources[i]);
            nodes.reserve(set.len());
            nodes.extend(set.iter().map(|node| NodeDef {
                name: node,
                cpus: n.cpus,
                memory_mb,
                devices,
            }));
        }
        // Every Slurm command loads the config, so on a cluster of 10,000
        // nodes this map is on each sbatch's path: sized once, and keyed
        // by the names the nodes own rather than copies.
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            if index.insert(n.name.as_str(), i).is_some() {
                bail!("{name}: node {} is defined twice", n.name);
            }
        }
        if nodes.is_empty() {
            bail!("{name}: no [[nodes]]: a cluster needs at least one node");
        }
        let resolve = |what: &str, expr: &str| -> Result<Vec<usize>> {
            if expr == "ALL" {
                return Ok((0..nodes.len()).collect());
            }
            let set = groups
                .parse(expr)
                .map_err(|e| anyhow!("{name}: {what}: {e}"))?;
            // More names than nodes: some are not nodes, and listing a
            // billion of them to find out would take long.
            if set.len() > nodes.len() {
                bail!(
                    "{name}: {what}: {} names, more than the {} nodes in [[nodes]]",
                    set.len(),
                    nodes.len()
                );
            }
            let mut found = set
                .iter()
                .map(|n| {
                    index
                        .get(n.as_str())
                        .copied()
                        .ok_or_else(|| anyhow!("{name}: {what}: node {n} is not in [[nodes]]"))
                })
                .collect::<Result<Vec<usize>>>()?;
            // Placement walks a partition's nodes in the order [[nodes]]
            // declares them, whatever order the node set was written in.
            found.sort_unstable();
            Ok(found)
        };

        let slice = |key: &str, secs: f64| -> Result<Duration> {
            if !(secs > 0.0 && secs <= MAX_MS as f64 / 1e3) {
                bail!(
                    "{name}: {key} must be a positive number of seconds, at most {} (a week)",
                    MAX_MS / 1000
                );
            }
            Ok(Duration::from_secs_f64(secs))
        };
        let time_slice = slice(
            "controller.time_slice_s",
            file.controller.time_slice_s.unwrap_or(30.0),
        )?;
        if let Some(ms) = file.controller.schedule_interval_ms {
            bail!(
                "{name}: controller.schedule_interval_ms = {ms} is no longer read: it was wall \
                 clock, so a replay's scheduler ran at another pace at every speed-up. Set \
                 schedule_interval_s, the least time between passes in the trace's seconds \
                 under a replay (as Slurm's sched_interval; 0, the default: a pass after every \
                 event), and pass_floor_ms for a wall-clock floor"
            );
        }
        // Zero is allowed for these: every event, no floor.
        let at_most_a_week = |key: &str, secs: f64| -> Result<Duration> {
            if !(secs >= 0.0 && secs <= MAX_MS as f64 / 1e3) {
                bail!(
                    "{name}: {key} must be a number of seconds from 0 to {} (a week)",
                    MAX_MS / 1000
                );
            }
            Ok(Duration::from_secs_f64(secs))
        };
        let schedule_interval = at_most_a_week(
            "controller.schedule_interval_s",
            file.controller.schedule_interval_s.unwrap_or(0.0),
        )?;
        let pass_floor = at_most_a_week(
            "controller.pass_floor_ms (in seconds)",
            file.controller.pass_floor_ms.unwrap_or(0.0) / 1e3,
        )?;
        let requeue_delay = at_most_a_week(
            "controller.requeue_delay_s",
            file.controller.requeue_delay_s.unwrap_or(121.0),
        )?;
        let mut partitions = Vec::new();
        for p in &file.partitions {
            if partitions.iter().any(|q: &PartitionDef| q.name == p.name) {
                bail!("{name}: partition {} is defined twice", p.name);
            }
            partitions.push(PartitionDef {
                name: p.name.clone(),
                nodes: resolve(&format!("partition {}", p.name), &p.nodes)?,
                priority: p.priority,
                default: p.default,
                max_time_ns: p.max_time_s.saturating_mul(1_000_000_000),
                oversubscribe: match p.oversubscribe {
                    None => 1,
                    Some(0) => bail!(
                        "{name}: partition {}: oversubscribe must be at least 1",
                        p.name
                    ),
                    Some(k) => k,
                },
                time_slice: match p.time_slice_s {
                    None => time_slice,
                    Some(s) => slice(&format!("partition {}: time_slice_s", p.name), s)?,
                },
                requeue: match p.on_node_fail.as_deref() {
                    None | Some("requeue") => true,
                    Some("fail") => false,
                    Some(other) => bail!(
                        "{name}: partition {}: on_node_fail: unknown {other:?} (known: requeue, fail)",
                        p.name
                    ),
                },
                contiguous: p.contiguous,
            });
        }
        if partitions.is_empty() {
            partitions.push(PartitionDef {
                name: "batch".into(),
                nodes: (0..nodes.len()).collect(),
                priority: 0,
                default: true,
                max_time_ns: 0,
                oversubscribe: 1,
                time_slice,
                requeue: true,
                contiguous: false,
            });
        }
        if partitions.len() > 64 {
            bail!("{name}: more than 64 partitions");
        }
        match partitions.iter().filter(|p| p.default).count() {
            0 => partitions[0].default = true,
            1 => {}
            _ => bail!("{name}: more than one partition has default = true"),
        }

        let mut hosts = Vec::new();
        for h in &file.agents.host {
            if hosts.iter().any(|o: &HostDef| o.name == h.name) {
                bail!("{name}: agents.host {} is defined twice", h.name);
            }
            if let Some(a) = &h.address {
                // ssh would read a leading '-' as an option of its own.
                if a.is_empty()
                    || a.starts_with('-')
                    || a.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    bail!(
                        "{name}: agents.host {}: address {a:?} is no ssh destination ([user@]host)",
                        h.name
                    );
                }
            }
            hosts.push(HostDef {
                name: h.name.clone(),
                nodes: resolve(&format!("agents.host {}", h.name), &h.nodes)?,
                address: h.address.clone(),
            });
        }
        let mut seen = vec![false; nodes.len()];
        for h in &hosts {
            for &n in &h.nodes {
                if std::mem::replace(&mut seen[n], true) {
                    bail!("{name}: node {} is on two agent hosts", nodes[n].name);
                }
            }
        }
        if hosts.is_empty() {
            hosts.push(HostDef {
                name: "local".into(),
                nodes: (0..nodes.len()).collect(),
                address: None,
            });
        }

        let c = &file.controller;
        let policy = c.policy.clone().unwrap_or_else(|| "easy".into());
        let Some(entry) = crate::policy::find(&policy) else {
            let known: Vec<&str> = crate::policy::all().map(|p| p.name).collect();
            bail!(
                "{name}: controller.policy: unknown policy {policy:?} (known: {})",
                known.join(", ")
            );
        };
        let preemption = match c.preemption.as_deref() {
            None => crate::policy::Preemption::Off,
            Some(s) => crate::policy::Preemption::parse(s).ok_or_else(|| {
                let known: Vec<&str> = crate::policy::Preemption::NAMES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect();
                anyhow!(
                    "{name}: controller.preemption: unknown mode {s:?} (known: {})",
                    known.join(", ")
                )
            })?,
        };
        let batsim = match (&file.batsim, policy.as_str()) {
            (b, "batsim") => Some(
                crate::batsim::Settings::from_section(
                    b.as_ref(),
                    nodes.iter().map(|n| (n.name.clone(), n.cpus)).collect(),
                    &kinds,
                )
                .map_err(|e| anyhow!("{name}: {e}"))?,
            ),
            (Some(_), _) => {
                bail!("{name}: a [batsim] section needs controller.policy = \"batsim\"")
            }
            (None, _) => None,
        };
        let max_jobs = match c.max_jobs.unwrap_or(DEFAULT_MAX_JOBS) {
            0 => bail!("{name}: controller.max_jobs must be at least 1"),
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let sync_before_answer = match c.journal_sync.as_deref() {
            None | Some("answer") => true,
            Some("background") => false,
            Some(other) => bail!(
                "{name}: controller.journal_sync is \"answer\" or \"background\", not {other:?}"
            ),
        };
        if !entry.suspends {
            if preemption != crate::policy::Preemption::Off {
                bail!("{name}: policy {policy:?} does not preempt jobs: preemption needs fcfs or easy");
            }
            if let Some(p) = partitions.iter().find(|p| p.oversubscribe > 1) {
                bail!(
                    "{name}: policy {policy:?} does not suspend jobs: partition {} time-slices \
                     (oversubscribe), which needs fcfs or easy",
                    p.name
                );
            }
        }
        let state_dir = match &c.state_dir {
            Some(p) => rel(p.clone()),
            None => default_state_dir(path),
        };
        let a = &file.agents;
        let suspend_mode = match a.suspend_mode.as_deref() {
            None => SuspendMode::Tstp,
            Some(s) => {
                SuspendMode::parse(s).map_err(|e| anyhow!("{name}: agents.suspend_mode: {e}"))?
            }
        };
        let run_from_launch = match a.run_from.as_deref() {
            None | Some("start") => false,
            Some("launch") => true,
            Some(other) => bail!(
                "{name}: agents.run_from = {other:?}: expected \"start\" (the controller's start) \
                 or \"launch\" (the process's first instant)"
            ),
        };
        let mut agent = AgentSettings {
            suspend_mode,
            realtime: a.realtime.unwrap_or(true),
            run_from_launch,
            ..AgentSettings::default()
        };
        if let Some(p) = &a.sigsleep {
            agent.sigsleep = rel(p.clone());
        }
        let ms = |key: &str, v: Option<u64>, default: u64| -> Result<Duration> {
            match v {
                Some(v) if v > MAX_MS => {
                    bail!("{name}: {key} = {v} is more than a week ({MAX_MS} ms)")
                }
                v => Ok(Duration::from_millis(v.unwrap_or(default))),
            }
        };
        agent.suspend_grace = ms(
            "agents.suspend_grace_ms",
            a.suspend_grace_ms,
            agent.suspend_grace.as_millis() as u64,
        )?;
        agent.kill_grace = ms(
            "agents.kill_grace_ms",
            a.kill_grace_ms,
            agent.kill_grace.as_millis() as u64,
        )?;
        if a.heartbeat_ms == Some(0) {
            bail!("{name}: agents.heartbeat_ms must be positive");
        }
        agent.heartbeat = ms(
            "agents.heartbeat_ms",
            a.heartbeat_ms,
            agent.heartbeat.as_millis() as u64,
        )?;
        let heartbeat_timeout = ms(
            "agents.heartbeat_timeout_ms",
            a.heartbeat_timeout_ms,
            10 * agent.heartbeat.as_millis() as u64,
        )?;
        // Agents kill their jobs after half the timeout without news, which
        // must leave them a few heartbeats.
        if heartbeat_timeout < 4 * agent.heartbeat {
            bail!("{name}: agents.heartbeat_timeout_ms must be at least 4 heartbeats");
        }
        let (controllers, takeover_timeout) =
            controllers::of(c, a, !file.agents.host.is_empty(), heartbeat_timeout)
                .map_err(|e| anyhow!("{name}: {e}"))?;
        // With a backup, only agents of listed hosts may register (they
        // witness which controller leads): a node on none could never be
        // served.
        if !controllers.is_empty() {
            if let Some(n) = seen.iter().position(|&s| !s) {
                bail!(
                    "{name}: node {} is on no [[agents.host]]: with a backup controller, \
                     every node's agent registers under its host's name",
                    nodes[n].name
                );
            }
        }
        let trace_gres = gres::trace_rules(&file.workload.gres, &kinds, &resources)
            .map_err(|e| anyhow!("{name}: {e}"))?;
        let listen = c
            .listen
            .clone()
            .unwrap_or_else(|| formats::wire::DEFAULT_ADDR.into());
        let deploy = crate::deploy::settings::Settings::new(
            a.deploy_dir.clone(),
            a.ssh_options.as_deref(),
            a.controller_address.clone(),
            a.fanout,
            a.clush,
            &controllers,
            &listen,
        )
        .map_err(|e| anyhow!("{name}: {e}"))?;
        Ok(Cluster {
            source: path.to_path_buf(),
            source_sha256: crate::deploy::settings::sha256_hex(text.as_bytes()),
            kinds,
            trace_gres,
            deploy,
            controllers,
            takeover_timeout,
            listen,
            secret_file: c
                .secret_file
                .clone()
                .map(rel)
                .unwrap_or_else(|| state_dir.join("secret")),
            record_dir: c
                .record_dir
                .clone()
                .map(rel)
                .unwrap_or_else(|| state_dir.join("records")),
            state_dir,
            policy,
            preemption,
            requeue_delay,
            time_slice,
            schedule_interval,
            pass_floor,
            prestart: c.prestart.unwrap_or(true),
            timeout_grace: ms("controller.timeout_grace_ms", c.timeout_grace_ms, 10_000)?,
            journal_compact_bytes: c.journal_compact_mb.unwrap_or(64).saturating_mul(1 << 20),
            sync_before_answer,
            max_jobs,
            metrics_listen: c.metrics_listen.clone(),
            folder: std::sync::OnceLock::new(),
            nodes,
            groups,
            partitions,
            local_agents: a.local.unwrap_or(false),
            hosts,
            agent,
            heartbeat_timeout,
            batsim,
        })
    }

    /// Puts the state directory at `dir`, and with it what the config keeps
    /// inside it: by default the secret and the record directory, so that
    /// two clusters with state directories of their own never share a
    /// record file.
    pub fn move_state_dir(&mut self, dir: &Path) {
        let moved = |p: &Path| {
            p.strip_prefix(&self.state_dir)
                .ok()
                .map(|rest| dir.join(rest))
        };
        if let Some(p) = moved(&self.secret_file) {
            self.secret_file = p;
        }
        if let Some(p) = moved(&self.record_dir) {
            self.record_dir = p;
        }
        self.state_dir = dir.to_path_buf();
    }

    pub fn total_cores(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.cpus)).sum()
    }

    /// The cores of a partition's nodes.
    pub fn partition_cores(&self, p: &PartitionDef) -> u64 {
        p.nodes.iter().map(|&n| u64::from(self.nodes[n].cpus)).sum()
    }

    /// The cores of a partition's nodes that have `asks` (name, count) of
    /// generic resources each.
    pub fn gres_cores(&self, p: &PartitionDef, asks: &[(String, u32)]) -> u64 {
        let Ok(want) = self.kinds.request(asks) else {
            return 0;
        };
        p.nodes
            .iter()
            .map(|&n| &self.nodes[n])
            .filter(|n| n.devices.iter().zip(&want).all(|(has, w)| has >= w))
            .map(|n| u64::from(n.cpus))
            .sum()
    }

    /// The node names of `idx`, folded: in the time of their runs when
    /// they are of one bracket and in order, as a job's nodes are
    /// ([`crate::folding`]).
    pub fn fold(&self, idx: &[usize]) -> String {
        self.fold_each(idx.iter().copied())
    }

    /// The nodes of an allocation (node, cores), folded as [`Cluster::fold`]
    /// folds them, without first making a list of their indices (megabytes
    /// for the widest jobs, on the path of their start).
    pub fn fold_alloc(&self, alloc: &[(usize, u32)]) -> String {
        self.fold_each(alloc.iter().map(|&(n, _)| n))
    }

    /// Reads the nodes' names for [`Cluster::fold`] now, rather than at
    /// the first fold.
    pub fn ready_to_fold(&self) -> &crate::folding::Folder {
        self.folder
            .get_or_init(|| crate::folding::Folder::new(self.nodes.iter().map(|n| n.name.as_str())))
    }

    fn fold_each(&self, idx: impl Iterator<Item = usize> + Clone) -> String {
        self.ready_to_fold()
            .fold(idx.clone())
            .unwrap_or_else(|| nodeset::fold(idx.map(|i| self.nodes[i].name.as_str())))
    }
}

/// A per-user, per-config directory under the temporary directory, so that
/// `serve` and the clients of the same config file agree on where the
/// secret is without writing into the directory the config lives in.
fn default_state_dir(config: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    abs.hash(&mut h);
    let stem = config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cluster".into());
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir()
        .join(format!("clemu-{uid}"))
        .join(format!("{stem}-{:08x}", h.finish() as u32))
}

/// A memory size: a number of MiB, or a string with a unit (K, M, G, T,
/// powers of 1024; "64G", "512M").
pub fn parse_size(v: &toml::Value) -> Result<u64> {
    match v {
        toml::Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        toml::Value::String(s) => parse_size_str(s),
        other => bail!("expected MiB or a size like \"64G\", got {other}"),
    }
}

pub fn parse_size_str(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("expected a size like \"64G\", got {s:?}"))?;
    let mib = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" | "M" => n,
        "K" => n.div_ceil(1024),
        "G" => n * 1024,
        "T" => n * 1024 * 1024,
        _ => bail!("unknown size unit in {s:?} (use K, M, G or T)"),
    };
    Ok(mib)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Cluster> {
        Cluster::from_str(text, Path::new("/etc/clemu/test.toml"))
    }

    #[test]
    fn a_full_config() {
        let c = load(
            r#"
            [controller]
            listen = "0.0.0.0:9000"
            policy = "fcfs"
            state_dir = "state"

            [agents]
            local = true
            suspend_mode = "slurm"

            [[agents.host]]
            name = "h1"
            nodes = "vn[1-2]"

            [[agents.host]]
            name = "h2"
            nodes = "vn[3-4]"

            [[nodes]]
            names = "vn[1-4]"
            cpus = 16
            memory = "64G"

            [groups]
            low = "vn[1-2]"

            [[partitions]]
            name = "low"
            nodes = "@low"
            priority = 1

            [[partitions]]
            name = "high"
            nodes = "ALL"
            priority = 10
            default = true
            "#,
        )
        .unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.nodes[0].memory_mb, 65536);
        assert_eq!(c.total_cores(), 64);
        assert_eq!(c.policy, "fcfs");
        assert_eq!(c.state_dir, PathBuf::from("/etc/clemu/state"));
        assert_eq!(c.secret_file, PathBuf::from("/etc/clemu/state/secret"));
        assert_eq!(c.partitions[0].nodes, vec![0, 1]);
        assert!(c.partitions[1].default && !c.partitions[0].default);
        assert_eq!(c.hosts.len(), 2);
        assert_eq!(c.agent.suspend_mode, SuspendMode::Slurm);
        assert!(!c.agent.run_from_launch);
        assert!(c.local_agents);
        let launch =
            load("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[agents]\nrun_from = \"launch\"\n");
        assert!(launch.unwrap().agent.run_from_launch);
        assert_eq!(c.fold(&[0, 1, 3]), "vn[1-2,4]");
    }

    #[test]
    fn a_state_dir_moves_what_the_config_keeps_in_it() {
        let mut c = load("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n").unwrap();
        c.move_state_dir(Path::new("/srv/a"));
        assert_eq!(c.state_dir, PathBuf::from("/srv/a"));
        assert_eq!(c.secret_file, PathBuf::from("/srv/a/secret"));
        assert_eq!(c.record_dir, PathBuf::from("/srv/a/records"));
        // What the config put elsewhere stays where it is.
        let mut c = load(
            "[controller]\nrecord_dir = \"/data/rec\"\nsecret_file = \"/etc/s\"\n\
             [[nodes]]\nnames = \"vn1\"\ncpus = 1\n",
        )
        .unwrap();
        c.move_state_dir(Path::new("/srv/b"));
        assert_eq!(c.record_dir, PathBuf::from("/data/rec"));
        assert_eq!(c.secret_file, PathBuf::from("/etc/s"));
    }

    #[test]
    fn mistakes_name_what_is_wrong() {
        for (text, needle) in [
            ("[[nodes]]\nnames = \"vn[1-2]\"\ncpus = 0\n", "cpus must be at least 1"),
            ("[[nodes]]\nnames = \"vn[1-2\"\ncpus = 1\n", "nodes[0].names"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\nmemory = \"3X\"\n", "unknown size unit"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ncolour = 3\n", "unknown field"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[[partitions]]\nname = \"p\"\nnodes = \"vn2\"\n", "vn2 is not in"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[controller]\npolicy = \"lottery\"\n", "unknown policy"),
            ("[[nodes]]\nnames = \"vn1,vn1\"\ncpus = 1\n[[nodes]]\nnames = \"vn1\"\ncpus = 2\n", "defined twice"),
            ("", "no [[nodes]]"),
            ("[[nodes]\n", "test.toml"),
            // Durations that would overflow the clocks they are added to.
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[controller]\ntime_slice_s = 1e30\n", "time_slice_s"),
            // Wall clock, it meant another pace at every speed-up: said,
            // with what to write instead.
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[controller]\nschedule_interval_ms = 10\n", "schedule_interval_ms = 10 is no longer read"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[controller]\nschedule_interval_s = -1\n", "schedule_interval_s must be a number of seconds from 0"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[agents]\nheartbeat_ms = 9223372036854775807\n", "heartbeat_ms"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[agents]\nkill_grace_ms = 9223372036854775807\n", "more than a week"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 2\nresources = { gpu = 1 }\n", "gpus and resources.gpu"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\nresources = { a = 1, b = 1, c = 1, d = 1, e = 1 }\n", "more than the 4"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\nresources = { \"Fast-GPU\" = 1 }\n", "not a resource name"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 65\n", "more than the 64"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[[agents.host]]\nname = \"h1\"\nnodes = \"vn1\"\naddress = \"-oProxyCommand=x\"\n", "agents.host h1: address \"-oProxyCommand=x\" is no ssh destination"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[[agents.host]]\nname = \"h1\"\nnodes = \"vn1\"\naddress = \"\"\n", "is no ssh destination"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 1\n[[workload.gres]]\nqueue = 2\nresources = { fpga = 1 }\n", "workload.gres[0] asks for fpga"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 4\n[[nodes]]\nnames = \"vn2\"\ncpus = 1\ngpus = 2\n[[workload.gres]]\ngpus = 6\n", "workload.gres[0] asks for 6 gpu per node, but no node has more than 4"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 4\n[[workload.gres]]\ngpus = 2\nresources = { gpu = 3 }\n", "asks for 5 gpu per node, but no node has more than 4"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[[workload.gres]]\nqueue = 2\ncolour = 1\n", "unknown field"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\ngpus = 1\n[controller]\npolicy = \"batsim\"\n", "no generic resources (gpu)"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[controller]\nhosts = [\"127.0.0.1:7817\"]\n", "lists one controller (127.0.0.1:7817)"),
            ("[[nodes]]\nnames = \"vn[1-2]\"\ncpus = 1\n[controller]\nhosts = [\"a:1\", \"b:1\"]\nsecret_file = \"/s\"\n[[agents.host]]\nname = \"h1\"\nnodes = \"vn1\"\n", "node vn2 is on no [[agents.host]]"),
            ("[[nodes]]\nnames = \"vn1\"\ncpus = 1\n[agents]\nrun_from = \"exec\"\n", "agents.run_from = \"exec\": expected \"start\""),
        ] {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(err.contains("test.toml"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn generic_resources_of_nodes_and_of_trace_jobs() {
        let c = load(
            "[[nodes]]\nnames = \"g[1-2]\"\ncpus = 8\ngpus = 4\nresources = { nvme = 1 }\n\
             [[nodes]]\nnames = \"c[1-2]\"\ncpus = 8\n\
             [[workload.gres]]\nqueue = 3\ngpus = 2\n\
             [[workload.gres]]\nprofile = \"io\"\nresources = { nvme = 1 }\n",
        )
        .unwrap();
        assert_eq!(c.kinds.names(), ["gpu", "nvme"]);
        assert_eq!(c.nodes[0].devices, [4, 1, 0, 0]);
        assert_eq!(c.nodes[3].devices, [0; 4]);
        let asks = |queue, profile| {
            let job = crate::gres::TraceJobKey {
                id: 1,
                queue,
                partition: -1,
                profile,
            };
            crate::gres::for_trace_job(&c.trace_gres, &job)
        };
        assert_eq!(asks(3, None), vec![("gpu".to_string(), 2)]);
        assert_eq!(asks(1, Some("io")), vec![("nvme".to_string(), 1)]);
        assert_eq!(asks(1, None), vec![]);
        assert_eq!(c.trace_gres[0].to_string(), "queue=3 -> gpu:2");
    }

    #[test]
    fn sizes() {
        for (s, mib) in [
            ("512", 512),
            ("512M", 512),
            ("64G", 65536),
            ("1T", 1 << 20),
            ("2048K", 2),
            ("8GiB", 8192),
        ] {
            assert_eq!(parse_size_str(s).unwrap(), mib, "{s}");
        }
        assert!(parse_size_str("G").is_err());
    }
}
