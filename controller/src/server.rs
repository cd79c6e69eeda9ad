//! The server task: sole owner of the [`Cluster`]. Connections send it
//! [`Event`]s; it applies them, runs the scheduling policy in batches (a
//! "needs scheduling" flag and a minimum interval between passes), checks
//! heartbeats and wall-time limits once a second, and sends what agents
//! must do through their links.

use std::collections::HashMap;
use std::time::Instant;

use formats::wire::{FromAgent, Request, Response, RunSettings, ToAgent};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::policy::Policy;
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
#[derive(Default)]
struct Links(HashMap<AgentId, mpsc::UnboundedSender<ToAgent>>);

impl Outbox for Links {
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
        if let Some(tx) = self.0.get(&agent) {
            // A closed link means the agent is going; its AgentGone follows.
            let _ = tx.send(msg);
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
}

impl Server {
    pub fn new(
        cluster: Cluster,
        policy: Box<dyn Policy>,
        events: mpsc::Receiver<Event>,
        done: CancellationToken,
        records: crate::records::Sink,
    ) -> Server {
        Server {
            cluster,
            policy,
            clock: Clock::start(),
            wake_at: None,
            links: Links::default(),
            events,
            done,
            stopping: None,
            records,
        }
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
        let interval = self.cluster.config.schedule_interval;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut last_pass = Instant::now() - interval;
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
                continue;
            }
            tokio::select! {
                // Events first: heartbeats waiting in the queue after a long
                // pass must be seen before agents are judged silent.
                biased;
                ev = self.events.recv() => match ev {
                    Some(ev) => self.handle(ev),
                    None => break,
                },
                () = tokio::time::sleep_until(next_pass.unwrap_or_else(tokio::time::Instant::now)), if next_pass.is_some() => {
                    let started = Instant::now();
                    if self.pass() {
                        last_pass = started;
                    }
                }
                _ = tick.tick() => self.tick(),
                () = shutdown.cancelled(), if self.stopping.is_none() => self.begin_shutdown(),
            }
            if let Some(deadline) = self.stopping {
                if self.cluster.agents.is_empty() || Instant::now() >= deadline {
                    break;
                }
            }
        }
        info!("controller stopped");
        self.done.cancel();
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
        self.cluster.counters.passes += 1;
        self.cluster.counters.last_pass = took;
        debug!(
            queued = view.queue.len(),
            decisions = n,
            ?took,
            "scheduling pass"
        );
        true
    }

    fn tick(&mut self) {
        let now = self.clock.now();
        self.cluster.enforce_walltime(now, &mut self.links);
        for agent in self.cluster.silent_agents(now) {
            self.links.0.remove(&agent);
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
                link,
                reply,
            } => {
                let result = if self.stopping.is_some() {
                    Err("the controller is shutting down".to_string())
                } else {
                    self.cluster
                        .agent_up(agent, &host, &nodes, cpus, memory_mb, now)
                        .map(|()| self.cluster.config.agent.run_settings(!local))
                };
                if result.is_ok() {
                    self.links.0.insert(agent, link);
                }
                let _ = reply.send(result);
            }
            Event::FromAgent { agent, msg } => match msg {
                FromAgent::Started { job, pid } => debug!(job, pid, "job process started"),
                FromAgent::Ended { job, exit } => self.cluster.job_ended(agent, job, exit, now),
                FromAgent::Heartbeat { running } => self.cluster.heartbeat(agent, running, now),
                // Handled by the connection (records) or refused there
                // (a second registration).
                FromAgent::Records(_) | FromAgent::Register { .. } => {}
            },
            Event::AgentGone { agent, why } => {
                self.links.0.remove(&agent);
                self.cluster
                    .agent_down(agent, &why, self.stopping.is_some(), now, &mut self.links);
            }
            Event::Records { agent, frames } => {
                let cluster = &self.cluster;
                let (kept, dropped) = crate::records::check(&frames, |r| {
                    cluster
                        .jobs
                        .get(&r.id)
                        .is_some_and(|j| j.agent == Some(agent))
                });
                if dropped > 0 {
                    tracing::warn!(
                        agent,
                        dropped,
                        "dropped records of jobs this agent does not run"
                    );
                }
                self.records.append(kept);
            }
            Event::Request { req, reply } => {
                let resp = self.request(req, now);
                let _ = reply.send(resp);
            }
        }
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
            Request::Stats => Response::Stats(self.cluster.stats()),
            Request::Cancel(ids) => Response::Jobs(self.cluster.cancel(&ids, now, &mut self.links)),
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
