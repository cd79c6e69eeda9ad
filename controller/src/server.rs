//! The server task: sole owner of the [`Cluster`]. Connections send it
//! [`Event`]s; it applies them, runs the scheduling policy in batches (a
//! "needs scheduling" flag and a minimum interval between passes), checks
//! heartbeats and wall-time limits once a second, and sends what agents
//! must do through their links.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use formats::wire::{Exit, FromAgent, Held, JobSpec, Request, Response, RunSettings, ToAgent};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use crate::journal::Journal;
use crate::policy::Policy;

/// How often written journal entries are synced when no client waits.
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
/// Events handled together before the journal is committed.
const BATCH: usize = 255;
use crate::state::{AgentId, Clock, Cluster, Now, Outbox};

/// What connections tell the server.
pub enum Event {
    /// An agent asks to register. `link` carries what the server sends it.
    AgentUp {
        agent: AgentId,
        host: String,
        nodes: String,
        cpus: u32,
        memory_mb: u64,
        /// Hosted in the controller's process: records land in the record
        /// directory directly and are not streamed.
        local: bool,
        /// What it holds (registering again after losing the controller).
        jobs: Vec<(u64, Held)>,
        /// Records of the jobs among them that ended.
        records: Vec<u8>,
        link: mpsc::UnboundedSender<ToAgent>,
        reply: oneshot::Sender<Result<RunSettings, String>>,
    },
    FromAgent {
        agent: AgentId,
        msg: FromAgent,
    },
    AgentGone {
        agent: AgentId,
        why: String,
    },
    /// Finished records an agent sent.
    Records {
        agent: AgentId,
        frames: Vec<u8>,
    },
    Request {
        req: Request,
        reply: oneshot::Sender<Response>,
    },
}

/// Links to connected agents. Unbounded on purpose: the state cannot wait
/// for one slow agent, and what is queued is bounded by the jobs it runs.
/// Messages are held until [`Links::flush`], which the server calls once
/// the journal holds the changes they carry out: a job's process never
/// exists before its start is journaled (an agent in this process would
/// otherwise start it within microseconds, and a `kill -9` in between
/// would restore it as pending).
#[derive(Default)]
struct Links {
    txs: HashMap<AgentId, mpsc::UnboundedSender<ToAgent>>,
    held: Vec<(AgentId, ToAgent)>,
}

impl Outbox for Links {
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
        self.held.push((agent, msg));
    }
}

impl Links {
    /// Sends what was held, in order.
    fn flush(&mut self) {
        for (agent, msg) in self.held.drain(..) {
            if let Some(tx) = self.txs.get(&agent) {
                // A closed link means the agent is going; its AgentGone
                // follows.
                let _ = tx.send(msg);
            }
        }
    }
}

pub struct Server {
    pub cluster: Cluster,
    policy: Box<dyn Policy>,
    clock: Clock,
    /// When the policy asked to be run again (gang time slices).
    wake_at: Option<i64>,
    links: Links,
    events: mpsc::Receiver<Event>,
    /// Cancelled when the server has finished: the listener and the local
    /// agents stop.
    done: CancellationToken,
    /// Set once a shutdown was asked for: when it must be over by.
    stopping: Option<Instant>,
    /// Where checked records from agents go.
    records: crate::records::Sink,
    /// (job, start) of every record in the record file that came through
    /// the server: an execution's record is written once.
    recorded: HashSet<(u64, i64)>,
    /// End instants of kept records whose job's end is not handled yet
    /// (an agent sends a job's record just before its end).
    record_ends: HashMap<u64, i64>,
    journal: Journal,
    /// Answers to clients, sent once what they acknowledge is journaled.
    replies: Vec<(oneshot::Sender<Response>, Response)>,
    /// Submissions waiting for room under `max_jobs`, in arrival order. A
    /// client has one request in flight per connection, so this holds at
    /// most one request per connection: a flooding client is slowed down
    /// to the rate jobs end, not buffered.
    held: VecDeque<(Vec<JobSpec>, oneshot::Sender<Response>)>,
}

impl Server {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut cluster: Cluster,
        clock: Clock,
        journal: Journal,
        policy: Box<dyn Policy>,
        events: mpsc::Receiver<Event>,
        done: CancellationToken,
        records: crate::records::Sink,
        recorded: HashSet<(u64, i64)>,
    ) -> Server {
        cluster.journaling = true;
        Server {
            cluster,
            policy,
            clock,
            journal,
            replies: Vec::new(),
            held: VecDeque::new(),
            wake_at: None,
            links: Links::default(),
            events,
            done,
            stopping: None,
            records,
            recorded,
            record_ends: HashMap::new(),
        }
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
        let interval = self.cluster.config.schedule_interval;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        // Agents on other hosts kill their jobs if the controller goes
        // silent; tell them it is alive every heartbeat period.
        let mut ping = tokio::time::interval(self.cluster.config.agent.heartbeat);
        // Entries are written at once and synced in batches; a client's
        // answer waits for the sync of what it acknowledges.
        let mut sync = tokio::time::interval(SYNC_INTERVAL);
        // (A machine up for less than the interval has no such instant.)
        let mut last_pass = Instant::now()
            .checked_sub(interval)
            .unwrap_or_else(Instant::now);
        loop {
            // Worked out afresh after every event: a job that ends or
            // arrives must not wait for a policy wake-up set earlier.
            let due = if self.stopping.is_some() {
                None
            } else if self.cluster.needs_schedule {
                Some(last_pass + interval)
            } else {
                self.wake_at
                    .map(|w| self.clock.instant(w).max(last_pass + interval))
            };
            let next_pass = due.map(tokio::time::Instant::from_std);
            // A pass that is due runs before more events are read: under a
            // steady stream of events the biased select below would
            // otherwise put it off for as long as the stream lasts.
            if next_pass.is_some_and(|t| t <= tokio::time::Instant::now()) {
                let started = Instant::now();
                if self.pass() {
                    last_pass = started;
                }
            } else if !self
                .wait_and_handle(
                    next_pass,
                    &mut last_pass,
                    &mut tick,
                    &mut ping,
                    &mut sync,
                    &shutdown,
                )
                .await
            {
                break;
            }
            self.admit_held();
            self.commit().await;
            if let Some(deadline) = self.stopping {
                if self.cluster.agents.is_empty() || Instant::now() >= deadline {
                    break;
                }
            }
        }
        self.sync().await;
        self.links.flush();
        info!("controller stopped");
        self.done.cancel();
    }

    /// Waits for the next event or timer and handles it (with whatever
    /// else is queued, up to a batch); false once no event can come.
    async fn wait_and_handle(
        &mut self,
        next_pass: Option<tokio::time::Instant>,
        last_pass: &mut Instant,
        tick: &mut tokio::time::Interval,
        ping: &mut tokio::time::Interval,
        sync: &mut tokio::time::Interval,
        shutdown: &CancellationToken,
    ) -> bool {
        tokio::select! {
            // Events first: heartbeats waiting in the queue after a long
            // pass must be seen before agents are judged silent.
            biased;
            ev = self.events.recv() => match ev {
                Some(ev) => {
                    self.handle(ev);
                    // Whatever else is waiting goes in the same batch
                    // (one journal sync for all of it).
                    for _ in 0..BATCH {
                        let Ok(ev) = self.events.try_recv() else { break };
                        self.handle(ev);
                    }
                }
                None => return false,
            },
            () = tokio::time::sleep_until(next_pass.unwrap_or_else(tokio::time::Instant::now)), if next_pass.is_some() => {
                let started = Instant::now();
                if self.pass() {
                    *last_pass = started;
                }
            }
            _ = tick.tick() => self.tick(),
            _ = ping.tick() => self.ping(),
            _ = sync.tick(), if self.journal.dirty() || !self.cluster.forget.is_empty() => {
                self.sync().await;
            }
            () = shutdown.cancelled(), if self.stopping.is_none() => self.begin_shutdown(),
        }
        true
    }

    /// Writes the state's new entries to the journal, then sends agents
    /// what they are to do (a crash of this process keeps what was written:
    /// nothing is acted on that a restart would not know); if clients wait
    /// for answers, makes the entries durable before answering.
    async fn commit(&mut self) {
        self.journal.append(self.cluster.journal.drain(..));
        if let Err(e) = self.journal.write() {
            error!("{e:#}");
        }
        self.links.flush();
        if self.replies.is_empty() {
            return;
        }
        let failed = self.journal.sync().err().map(|e| format!("{e:#}"));
        for (reply, resp) in self.replies.drain(..) {
            let resp = match &failed {
                // What it acknowledges might not survive a crash: say so.
                Some(e) if !matches!(resp, Response::Error(_)) => {
                    Response::Error(format!("the controller cannot journal: {e}"))
                }
                _ => resp,
            };
            let _ = reply.send(resp);
        }
        if let Some(e) = failed {
            error!("{e}");
            return;
        }
        // Clients submitting without pause keep the journal synced, so the
        // interval sync (which also compacts) may never come round.
        self.compact();
    }

    /// Makes the journal and the record file durable, then lets agents
    /// forget the ends they reported, and folds a long journal.
    async fn sync(&mut self) {
        self.journal.append(self.cluster.journal.drain(..));
        if let Err(e) = self.journal.sync() {
            error!("{e:#}");
            return;
        }
        if !self.cluster.forget.is_empty() {
            if let Err(e) = self.records.flush().await {
                error!("cannot sync the record file: {e}");
                return;
            }
            self.acknowledge_ends();
        }
        self.compact();
    }

    /// Folds a long journal into a snapshot (a no-op while it is short).
    fn compact(&mut self) {
        if self.journal.wants_compaction() {
            if let Err(e) = self
                .cluster
                .write_snapshot(&mut self.journal, self.clock.now())
            {
                error!("{e:#}");
            }
        }
    }

    /// A scheduling pass; false if it was skipped, with nothing to decide
    /// (then it does not count against the minimum interval).
    fn pass(&mut self) -> bool {
        let took = Instant::now();
        let now = self.clock.now();
        self.cluster.needs_schedule = false;
        let woken = self.wake_at.is_some_and(|w| w <= now.mono);
        if !self.cluster.anything_waits() && !woken {
            // Nothing waits: no policy could start, resume or rotate
            // anything.
            self.wake_at = None;
            return false;
        }
        let view = self.cluster.view(now);
        let decisions = self.policy.decide(&view);
        let n = decisions.list.len();
        self.wake_at = decisions.wake_at_ns;
        self.cluster.apply(decisions.list, now, &mut self.links);
        let took = took.elapsed();
        self.cluster.counters.pass(took);
        debug!(
            queued = view.queue.len(),
            decisions = n,
            ?took,
            "scheduling pass"
        );
        true
    }

    fn ping(&mut self) {
        for (id, a) in &self.cluster.agents {
            if !a.local {
                self.links.to_agent(*id, ToAgent::Ping);
            }
        }
    }

    /// Lets agents forget the ends they reported, now that they are noted.
    fn acknowledge_ends(&mut self) {
        if self.cluster.forget.is_empty() {
            return;
        }
        let mut by_agent: HashMap<AgentId, Vec<u64>> = HashMap::new();
        for (agent, job) in self.cluster.forget.drain(..) {
            if self.cluster.agents.get(&agent).is_some_and(|a| !a.local) {
                by_agent.entry(agent).or_default().push(job);
            }
        }
        for (agent, jobs) in by_agent {
            self.links.to_agent(agent, ToAgent::Forget(jobs));
        }
    }

    fn tick(&mut self) {
        let now = self.clock.now();
        self.cluster.enforce_walltime(now, &mut self.links);
        self.cluster.lose_overdue(now, &mut self.links);
        for agent in self.cluster.silent_agents(now) {
            self.links.txs.remove(&agent);
            self.cluster
                .agent_down(agent, "no heartbeat", false, now, &mut self.links);
        }
    }

    fn begin_shutdown(&mut self) {
        info!("shutting down: cancelling jobs, stopping agents");
        let now = self.clock.now();
        self.cluster.shutdown(now, &mut self.links);
        let grace = self.cluster.config.agent.kill_grace + std::time::Duration::from_secs(5);
        self.stopping = Some(Instant::now() + grace);
    }

    fn handle(&mut self, ev: Event) {
        let now = self.clock.now();
        match ev {
            Event::AgentUp {
                agent,
                host,
                nodes,
                cpus,
                memory_mb,
                local,
                jobs,
                records,
                link,
                reply,
            } => {
                if self.stopping.is_some() {
                    let _ = reply.send(Err("the controller is shutting down".to_string()));
                    return;
                }
                // Linked first: reconciling may already have orders for it.
                self.links.txs.insert(agent, link);
                let ends = match self.cluster.agent_up(
                    agent,
                    &host,
                    &nodes,
                    cpus,
                    memory_mb,
                    local,
                    &jobs,
                    now,
                    &mut self.links,
                ) {
                    Ok(ends) => ends,
                    Err(e) => {
                        self.links.txs.remove(&agent);
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                // The records of jobs that ended while it was away, before
                // those ends (a record is kept only for a job still running
                // on this agent).
                self.take_records(agent, &records);
                for (id, exit) in ends {
                    self.job_ended(agent, id, exit, now);
                }
                let fence = self.cluster.config.heartbeat_timeout / 2;
                let _ = reply.send(Ok(self.cluster.config.agent.run_settings(!local, fence)));
            }
            Event::FromAgent { agent, msg } => match msg {
                FromAgent::Started { job, pid } => debug!(job, pid, "job process started"),
                FromAgent::Ended { job, exit } => self.job_ended(agent, job, exit, now),
                FromAgent::Heartbeat { running } => self.cluster.heartbeat(agent, running, now),
                FromAgent::Resources(r) => self.cluster.host_report(agent, r, now),
                // Handled by the connection (records) or refused there
                // (a second registration).
                FromAgent::Records(_) | FromAgent::Register { .. } => {}
            },
            Event::AgentGone { agent, why } => {
                self.links.txs.remove(&agent);
                self.cluster
                    .agent_down(agent, &why, self.stopping.is_some(), now, &mut self.links);
            }
            Event::Records { agent, frames } => self.take_records(agent, &frames),
            Event::Request {
                req: Request::Submit(specs),
                reply,
            } if self.stopping.is_none() && !self.has_room(specs.len()) => {
                let max = self.cluster.config.max_jobs;
                if specs.len() > max {
                    let e = format!(
                        "{} jobs in one request: more than max_jobs = {max}",
                        specs.len()
                    );
                    self.replies.push((reply, Response::Error(e)));
                    return;
                }
                if self.held.is_empty() {
                    info!(
                        max_jobs = max,
                        "the queue is full: submissions wait for jobs to end"
                    );
                }
                self.held.push_back((specs, reply));
            }
            Event::Request { req, reply } => {
                let resp = self.request(req, now);
                self.replies.push((reply, resp));
            }
        }
    }

    /// Whether `n` more jobs fit under `max_jobs` behind those waiting.
    fn has_room(&self, n: usize) -> bool {
        self.held.is_empty() && self.cluster.jobs.len() + n <= self.cluster.config.max_jobs
    }

    /// Accepts the waiting submissions that now fit, in order; refuses them
    /// all once shutting down.
    fn admit_held(&mut self) {
        // A client that gave up (Ctrl-C) closed its end: what it asked for
        // is dropped, never accepted behind its back.
        self.held.retain(|(_, reply)| !reply.is_closed());
        while let Some((specs, _)) = self.held.front() {
            let fits = self.cluster.jobs.len() + specs.len() <= self.cluster.config.max_jobs;
            if !fits && self.stopping.is_none() {
                return;
            }
            let Some((specs, reply)) = self.held.pop_front() else {
                return;
            };
            let resp = self.request(Request::Submit(specs), self.clock.now());
            self.replies.push((reply, resp));
        }
    }

    /// A job's process ended: at the instant its record gives, if it sent
    /// one (sigsleep's own clock, and right even for a job that ended
    /// while this controller was away), else now.
    fn job_ended(&mut self, agent: AgentId, id: u64, exit: Exit, now: Now) {
        let started = self.cluster.jobs.get(&id).map_or(i64::MAX, |j| j.start_ns);
        let at = match self.record_ends.remove(&id) {
            // A record of an earlier execution (whose end never came: its
            // agent was lost) ends before this one started; a host clock
            // ahead of this one's is held to now.
            Some(end) if end >= started => Now {
                wall: end.min(now.wall),
                ..now
            },
            _ => now,
        };
        self.cluster.job_ended(agent, id, exit, at);
    }

    /// Keeps the intact records an agent sent of jobs it runs, once per
    /// execution (an agent that registers again sends the records of jobs
    /// that ended meanwhile, which may have arrived before), and notes
    /// when each ended, for its end (a record whose end never comes is
    /// dropped at the job's next end).
    fn take_records(&mut self, agent: AgentId, frames: &[u8]) {
        if frames.is_empty() {
            return;
        }
        let cluster = &self.cluster;
        let recorded = &mut self.recorded;
        let ends = &mut self.record_ends;
        let (kept, dropped) = crate::records::check(frames, |r| {
            let keep = cluster
                .jobs
                .get(&r.id)
                .is_some_and(|j| j.agent == Some(agent))
                && recorded.insert((r.id, r.start));
            if keep {
                ends.insert(r.id, r.end);
            }
            keep
        });
        if dropped > 0 {
            tracing::warn!(
                agent,
                dropped,
                "dropped records of jobs this agent does not run, or had already sent"
            );
        }
        self.records.append(kept);
    }

    fn request(&mut self, req: Request, now: Now) -> Response {
        match req {
            Request::Submit(specs) => {
                if self.stopping.is_some() {
                    return Response::Error("the controller is shutting down".into());
                }
                match self.cluster.submit(specs, now) {
                    Ok(ids) => Response::Submitted(ids),
                    Err(e) => Response::Error(e),
                }
            }
            Request::Queue { all } => Response::Queue(self.cluster.queue(all)),
            Request::Nodes => Response::Nodes(self.cluster.node_infos()),
            Request::Stats => {
                let mut stats = self.cluster.stats();
                stats.journal_unsynced = self.journal.unsynced_entries();
                stats.journal_lag_ns = self.journal.lag().as_nanos() as u64;
                stats.held_requests = self.held.len() as u64;
                stats.held_jobs = self.held.iter().map(|(s, _)| s.len() as u64).sum();
                Response::Stats(stats)
            }
            Request::Hosts => Response::Hosts(self.cluster.hosts(now)),
            Request::Cancel(ids) => Response::Jobs(self.cluster.cancel(&ids, now, &mut self.links)),
            Request::CancelMatching(filter) => {
                let (ids, mut outcomes) = self.cluster.matching(&filter);
                outcomes.extend(self.cluster.cancel(&ids, now, &mut self.links));
                Response::Jobs(outcomes)
            }
            Request::Suspend(ids) => {
                Response::Jobs(self.cluster.suspend(&ids, now, &mut self.links))
            }
            Request::Resume(ids) => Response::Jobs(self.cluster.resume(&ids, now, &mut self.links)),
            Request::Drain { nodes, reason } => match self.cluster.drain(&nodes, &reason) {
                Ok(n) => Response::Drained(n),
                Err(e) => Response::Error(e),
            },
            Request::Undrain { nodes } => match self.cluster.undrain(&nodes) {
                Ok(n) => Response::Drained(n),
                Err(e) => Response::Error(e),
            },
            // Answered by the connection through the record sink.
            Request::Records(_) => Response::Error("records are read by the connection".into()),
            Request::Jobs(ids) => Response::Queue(self.cluster.jobs_info(&ids)),
            Request::Shutdown => {
                if self.stopping.is_none() {
                    self.begin_shutdown();
                }
                Response::ShuttingDown
            }
        }
    }
}
