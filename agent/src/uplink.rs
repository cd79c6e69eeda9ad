//! The agent's link to the controller: registration, then commands routed
//! to node tasks and their events (and finished records) sent back, with a
//! heartbeat each way.
//!
//! What the agent knows of its jobs outlives any one connection. An agent
//! on another host that loses the controller (a restart, a network cut)
//! keeps its jobs running, connects again, and reports them when it
//! registers anew, with the ends and records of those that finished
//! meanwhile; it forgets an ended job only once the controller says it has
//! durably noted it. If it hears nothing from the controller for the fence
//! time it kills its jobs (`SIGKILL`, no record): the controller gives a
//! silent agent's jobs to other nodes after its heartbeat timeout, which is
//! longer, so a job never runs twice at once.
//!
//! With several controllers, the agent holds their list and registers with
//! whichever leads (a backup answers [`ToAgent::Elsewhere`]); it keeps the
//! leader's mark ([`crate::witness`]) and never registers with a controller
//! of an earlier term, so it never takes orders from a deposed primary.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use formats::wire::{
    Conn, Exit, FromAgent, Held, HostReport, Mark, RunSettings, Standing, ToAgent, WireError,
};
use sigsleep::signals::EndWhy;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::node::{self, NodeCmd, NodeContext, NodeHandle};
use crate::records::Spool;
use crate::resources;
use crate::spawn::Launcher;
use crate::witness::{Kept, Witness};

/// How long an agent waits for the answer to its registration (a backup
/// taking over holds it while it gathers a majority).
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Heartbeats between two host reports.
const REPORT_EVERY: u64 = 10;
/// Heartbeats between two host reports at least, when the number of live
/// jobs changed since the last (so that a report follows jobs starting
/// and ending within seconds, without reading /proc every beat).
const REPORT_CHANGED_EVERY: u64 = 2;

/// What an agent hosts and where its jobs write.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub host: String,
    /// Node names, expanded.
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub memory_mb: u64,
    pub sigsleep: PathBuf,
    /// The record file sigsleep appends to: the controller's own for an
    /// agent it hosts, a local spool file (streamed to the controller)
    /// otherwise.
    pub log: PathBuf,
}

/// Runs an agent hosted by the controller itself, over an in-memory pipe:
/// one session, and every job ends with it.
pub async fn serve<T: AsyncRead + AsyncWrite + Unpin>(
    mut conn: Conn<T>,
    spec: AgentSpec,
    shutdown: CancellationToken,
) -> Result<()> {
    let Registration::Accepted(settings) = register(
        &mut conn,
        &spec,
        Vec::new(),
        Vec::new(),
        Mark::default(),
        false,
    )
    .await?
    else {
        bail!("the controller sent its own agent elsewhere");
    };
    let mut agent = Agent::start(spec, settings, Witness::open(None)?, false)?;
    let end = agent.session(&mut conn, &shutdown).await;
    agent.stop(Some(&mut conn)).await;
    match end {
        SessionEnd::Stop => Ok(()),
        SessionEnd::Lost(why) => Err(anyhow!(why)),
    }
}

/// Runs an agent on its own host until the controller tells it to stop or
/// `shutdown` fires, connecting again whenever the connection is lost.
/// `addrs` lists the controllers (comma-separated), the primary first; the
/// first registration must succeed within `patience`.
pub async fn run(
    addrs: &str,
    secret: &[u8],
    spec: AgentSpec,
    patience: Duration,
    shutdown: CancellationToken,
) -> Result<()> {
    let list: Vec<String> = addrs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    if list.is_empty() {
        bail!("no controller address given");
    }
    let mut witness = Witness::open(spec.log.parent())?;
    let deadline = Instant::now() + patience;
    let mut next_say = Instant::now();
    let (mut conn, settings, addr) = loop {
        let round = find(
            &list,
            None,
            secret,
            &spec,
            Vec::new(),
            Vec::new(),
            &mut witness,
        );
        let found = tokio::select! {
            r = round => r?,
            () = shutdown.cancelled() => return Ok(()),
        };
        let why = match found {
            Ok((conn, settings, addr)) => break (conn, settings, addr),
            Err(why) => why,
        };
        let now = Instant::now();
        if now >= deadline {
            bail!("{why}");
        }
        if now >= next_say {
            next_say = now + crate::UNREACHABLE_REPEAT;
            warn!(
                "{why}; retrying for {:.0} s more",
                (deadline - now).as_secs_f64()
            );
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            () = shutdown.cancelled() => return Ok(()),
        }
    };
    let mut agent = Agent::start(spec, settings, witness, true)?;
    agent.controller = addr;
    if list.len() > 1 {
        // Another controller may lead: a silent one is left early enough
        // for the agent to register with the next before its fence.
        let s = &agent.settings;
        let beats = Duration::from_millis(5 * s.heartbeat_ms.max(1));
        agent.silence = Some(beats.min(Duration::from_millis(s.fence_ms / 2)));
    }
    loop {
        match agent.marked(&mut conn).await {
            Ok(()) => match agent.session(&mut conn, &shutdown).await {
                SessionEnd::Stop => break,
                SessionEnd::Lost(why) => warn!("lost the controller: {why}"),
            },
            Err(e) => warn!("lost the controller: {e}"),
        }
        match agent.reconnect(&list, secret, &shutdown).await? {
            Some(c) => conn = c,
            None => break,
        }
    }
    agent.stop(Some(&mut conn)).await;
    Ok(())
}

/// One round over the controllers, in the list's order (a backup that
/// names its primary sends the agent there next): the first that takes
/// the registration, with its settings and address; else why none did,
/// this round. An error when one refused the agent for good.
async fn find(
    list: &[String],
    lost: Option<&str>,
    secret: &[u8],
    spec: &AgentSpec,
    jobs: Vec<(u64, Held)>,
    records: Vec<u8>,
    witness: &mut Witness,
) -> Result<std::result::Result<(Conn<TcpStream>, RunSettings, String), String>> {
    // The controller just lost goes last: it may be cut off, and each
    // attempt at it waits for the connect timeout.
    let mut order: std::collections::VecDeque<&String> =
        list.iter().filter(|a| Some(a.as_str()) != lost).collect();
    order.extend(list.iter().filter(|a| Some(a.as_str()) == lost));
    let mut tried = std::collections::HashSet::new();
    let mut why: Vec<String> = Vec::new();
    // Whether a controller answered, and did not take this agent: then
    // what the agent holds, and what would let it go on, are said too.
    let mut answered = false;
    while let Some(addr) = order.pop_front() {
        if !tried.insert(addr) {
            continue;
        }
        let mut conn = match crate::connect(addr, secret).await {
            Ok(c) => c,
            Err(e) => {
                why.push(format!("{e:#}"));
                continue;
            }
        };
        match register(
            &mut conn,
            spec,
            jobs.clone(),
            records.clone(),
            witness.mark(),
            witness.bound(),
        )
        .await
        {
            Ok(Registration::Accepted(settings)) => {
                let offered = settings.mark;
                answered = true;
                match witness.keep(offered, addr)? {
                    Kept::Kept => {
                        info!(controller = %addr, cluster = %offered.cluster, term = offered.term, "registered");
                        return Ok(Ok((conn, settings, addr.clone())));
                    }
                    Kept::Past => why.push(format!(
                        "controller {addr} took it at term {}, a past term for this agent",
                        offered.term
                    )),
                    Kept::OtherCluster => why.push(format!(
                        "controller {addr} took it for cluster {}, another cluster",
                        offered.cluster
                    )),
                }
                warn!(controller = %addr, "{}: leaving it", why.last().map(String::as_str).unwrap_or_default());
            }
            Ok(Registration::Elsewhere(standing)) => {
                answered = true;
                why.push(format!("controller {addr} is {standing}"));
                if let Some(p) = list.iter().find(|a| **a == standing.primary) {
                    order.push_front(p);
                }
            }
            Err(e) if e.downcast_ref::<Refused>().is_some() => return Err(e),
            Err(e) => why.push(format!("controller {addr}: {e:#}")),
        }
    }
    if answered {
        why.push(held_and_remedy(witness));
    }
    Ok(Err(why.join("; ")))
}

/// What an agent no controller took holds, and what would let it go on
/// (docs/faults.md, "When an agent will not register").
fn held_and_remedy(witness: &Witness) -> String {
    let m = witness.mark();
    if m.cluster.is_none() {
        return "this agent holds no mark: it registers with whichever controller leads".into();
    }
    if witness.bound() {
        format!(
            "this agent holds {m}, the cluster it serves since it started: it registers with              that cluster's primary of term {} or later; a controller of another cluster              takes it only once the agent is restarted",
            m.term
        )
    } else {
        format!(
            "this agent holds {m}, read from its record directory: it registers with that              cluster's primary of term {} or later, or with a controller of another cluster              (the mark then set aside)",
            m.term
        )
    }
}

enum Registration {
    Accepted(RunSettings),
    Elsewhere(Standing),
}

/// Sends the registration and returns the controller's answer. A refusal
/// is final: the agent's nodes or configuration are wrong.
async fn register<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<T>,
    spec: &AgentSpec,
    jobs: Vec<(u64, Held)>,
    records: Vec<u8>,
    mark: Mark,
    bound: bool,
) -> Result<Registration> {
    conn.send(&FromAgent::Register {
        host: spec.host.clone(),
        nodes: formats::nodeset::fold(spec.nodes.iter().map(String::as_str)),
        cpus: spec.cpus,
        memory_mb: spec.memory_mb,
        jobs,
        records,
        mark,
        bound,
    })
    .await
    .context("cannot register")?;
    // A controller that accepts the connection but never answers (its
    // loop stuck) must not hold the agent back from the others.
    let answer = tokio::time::timeout(REGISTER_TIMEOUT, conn.recv::<ToAgent>())
        .await
        .map_err(|_| {
            anyhow!(
                "no answer to registration in {} s",
                REGISTER_TIMEOUT.as_secs()
            )
        })?;
    match answer.context("no answer to registration")? {
        ToAgent::Registered(s) => Ok(Registration::Accepted(s)),
        ToAgent::Elsewhere(primary) => Ok(Registration::Elsewhere(primary)),
        ToAgent::Rejected(why) => Err(anyhow!(Refused(why))),
        other => bail!("the controller answered registration with {other:?}"),
    }
}

/// The controller refused the registration.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the controller refused this agent: {}", self.0)
    }
}

impl std::error::Error for Refused {}

enum SessionEnd {
    /// Told to stop, or `shutdown` fired.
    Stop,
    /// The connection failed or the controller went silent.
    Lost(String),
}

/// A job running or suspended here.
struct Live {
    node: String,
    suspended: bool,
    /// Killed because the controller went silent: its end is reported as
    /// [`Exit::Fenced`], whatever signal ended it.
    fenced: bool,
    /// Its process, once started.
    pid: Option<i32>,
}

/// The agent's side of its jobs, kept across connections.
struct Agent {
    spec: AgentSpec,
    settings: RunSettings,
    nodes: HashMap<String, NodeHandle>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Node tasks report here; this is the only receiver.
    events: mpsc::Receiver<FromAgent>,
    jobs: HashMap<u64, Live>,
    /// Ended jobs the controller has not yet said it noted: exit and the
    /// record frames.
    ended: BTreeMap<u64, (Exit, Vec<u8>)>,
    /// Whether `ended` is kept at all. An agent hosted by the controller
    /// has one session, never registers again, and is never told to
    /// forget: keeping its ends would grow by one entry per job.
    keeps_ended: bool,
    /// Record frames read from the spool whose job has not been reaped yet.
    frames: HashMap<u64, Vec<u8>>,
    spool: Option<Spool>,
    /// Last time anything came from the controller.
    last_heard: Instant,
    witness: Witness,
    /// With several controllers: how long a silent one is waited for
    /// before the agent looks for the one that leads (its jobs go on).
    silence: Option<Duration>,
    /// The controller registered with last.
    controller: String,
}

impl Agent {
    /// `keeps_ended`: whether it reports its ended jobs again when it
    /// registers anew (an agent on its own host), or never registers
    /// again (one hosted by the controller).
    fn start(
        spec: AgentSpec,
        settings: RunSettings,
        witness: Witness,
        keeps_ended: bool,
    ) -> Result<Agent> {
        info!(
            host = %spec.host,
            nodes = spec.nodes.len(),
            mode = ?settings.suspend_mode,
            "registered"
        );
        node::sweep_left_behind();
        let spool = if settings.stream_records {
            Some(Spool::open(&spec.log)?)
        } else {
            None
        };
        let (events_tx, events) = mpsc::channel::<FromAgent>(4096);
        let ctx = Arc::new(NodeContext {
            launcher: Launcher::global().context("cannot start the job launcher")?,
            sigsleep: spec.sigsleep.clone(),
            log: spec.log.clone(),
            settings: settings.clone(),
            events: events_tx,
        });
        let mut nodes = HashMap::with_capacity(spec.nodes.len());
        let mut tasks = Vec::with_capacity(spec.nodes.len());
        for name in &spec.nodes {
            let (handle, task) = node::start(name.clone(), Arc::clone(&ctx));
            nodes.insert(name.clone(), handle);
            tasks.push(task);
        }
        Ok(Agent {
            spec,
            settings,
            nodes,
            tasks,
            events,
            jobs: HashMap::new(),
            ended: BTreeMap::new(),
            keeps_ended,
            frames: HashMap::new(),
            spool,
            last_heard: Instant::now(),
            witness,
            silence: None,
            controller: String::new(),
        })
    }

    /// Tells a controller just registered with which mark this agent now
    /// keeps (its own, which it has just kept).
    async fn marked<T: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        conn: &mut Conn<T>,
    ) -> Result<()> {
        conn.send(&FromAgent::Marked(self.witness.mark()))
            .await
            .map_err(|e| anyhow!("{e}"))
    }

    /// When the jobs are to be killed if the controller stays silent.
    fn fence_at(&self) -> Option<Instant> {
        (self.settings.fence_ms > 0 && !self.jobs.is_empty())
            .then(|| self.last_heard + Duration::from_millis(self.settings.fence_ms))
    }

    fn fence(&mut self) {
        warn!(
            jobs = self.jobs.len(),
            silent_ms = self.last_heard.elapsed().as_millis() as u64,
            "nothing from the controller for the fence time: killing every job (it may run them elsewhere)"
        );
        for (&id, live) in &mut self.jobs {
            if let Some(h) = self.nodes.get(&live.node) {
                h.send(NodeCmd::Kill(id));
            }
            live.fenced = true;
        }
        // Killed jobs report their ends; do not fence them again.
        self.last_heard = Instant::now();
    }

    /// What this agent holds, for a new registration.
    fn held(&self) -> (Vec<(u64, Held)>, Vec<u8>) {
        let mut jobs: Vec<(u64, Held)> = self
            .jobs
            .iter()
            .map(|(&id, l)| {
                let h = if l.suspended {
                    Held::Suspended
                } else {
                    Held::Running
                };
                (id, h)
            })
            .collect();
        let mut records = Vec::new();
        for (&id, (exit, frames)) in &self.ended {
            jobs.push((id, Held::Ended(*exit)));
            records.extend_from_slice(frames);
        }
        (jobs, records)
    }

    /// Takes note of a node's event; returns what to send the controller.
    fn note(&mut self, ev: FromAgent) -> Result<Vec<FromAgent>> {
        match ev {
            FromAgent::Ended { job, exit } => {
                let fenced = self.jobs.remove(&job).is_some_and(|l| l.fenced);
                self.read_spool()?;
                let frames = self.frames.remove(&job).unwrap_or_default();
                // Killed by the fence, the job left no record; one that
                // wrote its record ended on its own just before the fence
                // (its end was still on its way) and keeps its real exit.
                let exit = if fenced && frames.is_empty() {
                    Exit::Fenced
                } else {
                    exit
                };
                if self.keeps_ended {
                    self.ended.insert(job, (exit, frames.clone()));
                }
                let mut out = Vec::with_capacity(2);
                if !frames.is_empty() {
                    out.push(FromAgent::Records(frames));
                }
                out.push(FromAgent::Ended { job, exit });
                Ok(out)
            }
            FromAgent::Started { job, pid } => {
                if let Some(live) = self.jobs.get_mut(&job) {
                    live.pid = i32::try_from(pid).ok();
                }
                Ok(vec![FromAgent::Started { job, pid }])
            }
            other => Ok(vec![other]),
        }
    }

    /// Sorts the spool's new frames by job.
    fn read_spool(&mut self) -> Result<()> {
        let Some(spool) = &mut self.spool else {
            return Ok(());
        };
        for (id, frame) in spool.read_new_by_job()? {
            self.frames.entry(id).or_default().extend_from_slice(&frame);
        }
        Ok(())
    }

    fn route(&mut self, job: u64, cmd: NodeCmd) {
        let Some(live) = self.jobs.get_mut(&job) else {
            // Already ended: the controller learns it from the Ended event.
            debug!(job, ?cmd, "no such job here");
            return;
        };
        match cmd {
            NodeCmd::Suspend(_) => live.suspended = true,
            NodeCmd::Resume(_) => live.suspended = false,
            _ => {}
        }
        if let Some(h) = self.nodes.get(&live.node) {
            h.send(cmd);
        }
    }

    /// Serves one connection until it ends.
    async fn session<T: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        conn: &mut Conn<T>,
        shutdown: &CancellationToken,
    ) -> SessionEnd {
        // The fence counts from the last order or ping, not from this
        // registration: a controller that takes registrations but acts on
        // nothing (it lacks a majority) must not keep jobs alive.
        let beat = Duration::from_millis(self.settings.heartbeat_ms.max(1));
        let mut heartbeat = tokio::time::interval(beat);
        let mut beats: u64 = 0;
        // A host report being made on a blocking thread: it reads /proc for
        // every live job, which must not hold up signals to them.
        let mut report: Option<tokio::task::JoinHandle<HostReport>> = None;
        // (beat, live jobs) of the last report.
        let mut reported: Option<(u64, usize)> = None;
        // Anything from this controller, for leaving a silent one.
        let mut heard = Instant::now();
        loop {
            let fence_at = self.fence_at();
            let give_up_at = self.silence.map(|s| heard + s);
            tokio::select! {
                () = shutdown.cancelled() => return SessionEnd::Stop,
                () = tokio::time::sleep_until(give_up_at.unwrap_or_else(Instant::now)), if give_up_at.is_some() => {
                    return SessionEnd::Lost(format!(
                        "nothing from the controller for {} ms",
                        heard.elapsed().as_millis()
                    ));
                }
                msg = conn.recv::<ToAgent>() => {
                    heard = Instant::now();
                    if !matches!(msg, Ok(ToAgent::Mark(_) | ToAgent::Elsewhere(_))) {
                        self.last_heard = Instant::now();
                    }
                    match msg {
                        Ok(ToAgent::Start(s)) => {
                            let id = s.job;
                            if let Some(h) = self.nodes.get(&s.node) {
                                self.jobs.insert(id, Live { node: s.node.clone(), suspended: false, fenced: false, pid: None });
                                h.send(NodeCmd::Start(Box::new(s)));
                            } else {
                                warn!(job = id, node = %s.node, "start on a node this agent does not host");
                                if self.keeps_ended {
                                    self.ended.insert(id, (Exit::SpawnFailed, Vec::new()));
                                }
                                if let Err(e) = conn.send(&FromAgent::Ended { job: id, exit: Exit::SpawnFailed }).await {
                                    return SessionEnd::Lost(e.to_string());
                                }
                            }
                        }
                        Ok(ToAgent::Prepare { start, claim_within_ms }) => {
                            // A hint: on a node this agent does not host, or
                            // for a job it already runs, there is nothing to do.
                            if let Some(h) = self.nodes.get(&start.node) {
                                if !self.jobs.contains_key(&start.job) {
                                    let until = Instant::now() + Duration::from_millis(claim_within_ms.into());
                                    h.send(NodeCmd::Prepare(Box::new(start), until));
                                }
                            }
                        }
                        Ok(ToAgent::Suspend(id)) => self.route(id, NodeCmd::Suspend(id)),
                        Ok(ToAgent::Resume(id)) => self.route(id, NodeCmd::Resume(id)),
                        Ok(ToAgent::Cancel(id)) => self.route(id, NodeCmd::Cancel(id, EndWhy::Cancelled)),
                        Ok(ToAgent::End { job, why }) => self.route(job, NodeCmd::Cancel(job, end_why(why))),
                        Ok(ToAgent::Kill(id)) => self.route(id, NodeCmd::Kill(id)),
                        Ok(ToAgent::Signal { job, signal, reach }) => self.route(job, NodeCmd::Signal(job, signal, reach)),
                        Ok(ToAgent::Limit { job, walltime_ns }) => self.route(job, NodeCmd::Limit(job, walltime_ns)),
                        Ok(ToAgent::Forget(ids)) => {
                            for id in ids {
                                self.ended.remove(&id);
                            }
                        }
                        Ok(ToAgent::Ping) => {}
                        Ok(ToAgent::Mark(m)) => {
                            match self.witness.keep(m, &self.controller) {
                                Ok(Kept::Kept) => {
                                    if let Err(e) = conn.send(&FromAgent::Marked(m)).await {
                                        return SessionEnd::Lost(e.to_string());
                                    }
                                }
                                Ok(Kept::Past) => return SessionEnd::Lost(format!("a mark of past term {}", m.term)),
                                Ok(Kept::OtherCluster) => return SessionEnd::Lost(format!("a mark of another cluster, {}", m.cluster)),
                                Err(e) => return SessionEnd::Lost(format!("{e:#}")),
                            }
                        }
                        Ok(ToAgent::Elsewhere(_)) => return SessionEnd::Lost("the controller stepped down".into()),
                        Ok(ToAgent::Shutdown) => return SessionEnd::Stop,
                        Ok(other) => return SessionEnd::Lost(format!("the controller sent {other:?} out of turn")),
                        Err(WireError::Closed) => return SessionEnd::Lost("the controller closed the connection".into()),
                        Err(e) => return SessionEnd::Lost(e.to_string()),
                    }
                }
                Some(ev) = self.events.recv() => {
                    let out = match self.note(ev) {
                        Ok(out) => out,
                        Err(e) => return SessionEnd::Lost(format!("{e:#}")),
                    };
                    for msg in out {
                        if let Err(e) = conn.send(&msg).await {
                            return SessionEnd::Lost(e.to_string());
                        }
                    }
                }
                _ = heartbeat.tick() => {
                    let running = self.jobs.len() as u32;
                    if let Err(e) = conn.send(&FromAgent::Heartbeat { running }).await {
                        return SessionEnd::Lost(e.to_string());
                    }
                    let due = match reported {
                        None => true,
                        Some((at, jobs)) => {
                            beats - at >= REPORT_EVERY
                                || (jobs != self.jobs.len() && beats - at >= REPORT_CHANGED_EVERY)
                        }
                    };
                    if due && report.is_none() {
                        reported = Some((beats, self.jobs.len()));
                        let pids: Vec<i32> = self.jobs.values().filter_map(|l| l.pid).collect();
                        report = Some(tokio::task::spawn_blocking(move || resources::report(&pids)));
                    }
                    beats += 1;
                }
                done = async {
                    match report.as_mut() {
                        Some(h) => h.await,
                        None => std::future::pending().await,
                    }
                }, if report.is_some() => {
                    report = None;
                    if let Ok(r) = done {
                        if let Err(e) = conn.send(&FromAgent::Resources(r)).await {
                            return SessionEnd::Lost(e.to_string());
                        }
                    }
                }
                () = tokio::time::sleep_until(fence_at.unwrap_or_else(Instant::now)), if fence_at.is_some() => {
                    self.fence();
                    return SessionEnd::Lost("the controller went silent".into());
                }
            }
        }
    }

    /// Connects and registers again, with what it holds, with whichever
    /// controller of `list` leads, until it works; meanwhile jobs go on
    /// (and are fenced if this takes too long). `None`: `shutdown` fired.
    async fn reconnect(
        &mut self,
        list: &[String],
        secret: &[u8],
        shutdown: &CancellationToken,
    ) -> Result<Option<Conn<TcpStream>>> {
        let mut pause = Duration::from_millis(100);
        // Said at once, then every few seconds: a takeover is normally
        // over before the first line would repeat.
        let mut next_say = Instant::now() + Duration::from_secs(1);
        loop {
            let (jobs, records) = self.held();
            let fence_at = self.fence_at();
            let lost = (list.len() > 1).then_some(self.controller.as_str());
            let attempt = find(
                list,
                lost,
                secret,
                &self.spec,
                jobs,
                records,
                &mut self.witness,
            );
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                r = attempt => Some(r),
                () = tokio::time::sleep_until(fence_at.unwrap_or_else(Instant::now)), if fence_at.is_some() => None,
            };
            match outcome {
                Some(Ok(Ok((conn, _, addr)))) => {
                    info!(controller = %addr, jobs = self.jobs.len(), "registered again");
                    self.controller = addr;
                    return Ok(Some(conn));
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(Err(why))) => {
                    if Instant::now() >= next_say {
                        next_say = Instant::now() + crate::UNREACHABLE_REPEAT;
                        warn!("no controller takes this agent: {why}");
                    } else {
                        debug!("{why}");
                    }
                }
                None => self.fence(),
            }
            // Jobs that end while the controller is away are noted.
            let wait = tokio::time::sleep(pause);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    () = &mut wait => break,
                    () = shutdown.cancelled() => return Ok(None),
                    Some(ev) = self.events.recv() => { self.note(ev)?; }
                }
            }
            // Not too long a pause: a backup may be taking over.
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Ends every job, reporting their ends while the connection lasts.
    async fn stop<T: AsyncRead + AsyncWrite + Unpin>(mut self, mut conn: Option<&mut Conn<T>>) {
        // Dropping the handles asks every node to end its jobs.
        self.nodes.clear();
        while let Some(ev) = self.events.recv().await {
            let Ok(out) = self.note(ev) else { continue };
            if let Some(c) = conn.as_mut() {
                for msg in out {
                    if c.send(&msg).await.is_err() {
                        conn = None;
                        break;
                    }
                }
            }
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The reason of the controller's `End` order, as sigsleep's signal
/// carries it (sigsleep is built without the wire's types).
fn end_why(why: formats::wire::EndWhy) -> EndWhy {
    match why {
        formats::wire::EndWhy::Preempted => EndWhy::Preempted,
        formats::wire::EndWhy::Requeued => EndWhy::Requeued,
    }
}
