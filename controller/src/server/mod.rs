//! The server task: sole owner of the [`Cluster`] in the emulation.
//! Connections send it [`Event`]s; it turns each into a transition of the
//! core, runs scheduling passes when the core's [`Scheduler`] says they
//! are due, checks heartbeats and wall-time limits once a second, and
//! carries out the core's [`Effects`]: orders to agents through their
//! links, entries into the journal, replies to clients, once what they
//! depend on is written (and held by the backups, [`crate::replication`]).
//! The disk is never waited for here: the journal is synced on the record
//! sink's thread, and the answers that acknowledge a change wait for that
//! sync to report back ([`Server::synced`]), while passes, starts and ends
//! go on.
//!
//! A backup controller runs the same server on its copy of the tables
//! (`backup.rs`): it schedules nothing and acts on nothing, and only
//! applies what its primary sends.

mod agents;
mod lead;
mod peers;
mod requests;
pub mod timer;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use formats::wire::{FromAgent, Held, JobSpec, Mark, Request, Response, RunSettings, ToAgent};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use crate::core::{AgentId, Clock, Cluster, Effects, Scheduler};
use crate::journal::{Entry, Journal};
use crate::policy::Policy;
use crate::replication::{BackupId, Backups, Following, FromPrimary};

pub use peers::Follower;

/// How often written journal entries are synced when no client waits.
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
/// Events handled together before the journal is committed.
const BATCH: usize = 255;

/// An agent that asks to register. `link` carries what the server sends
/// it.
pub struct AgentUp {
    pub agent: AgentId,
    pub host: String,
    pub nodes: String,
    pub cpus: u32,
    pub memory_mb: u64,
    /// Hosted in the controller's process: records land in the record
    /// directory directly and are not streamed.
    pub local: bool,
    /// What it holds (registering again after losing the controller).
    pub jobs: Vec<(u64, Held)>,
    /// Records of the jobs among them that ended.
    pub records: Vec<u8>,
    /// The mark it keeps as a witness.
    pub mark: Mark,
    /// Whether it serves the mark's cluster since it started (it joins no
    /// other).
    pub bound: bool,
    pub link: mpsc::UnboundedSender<ToAgent>,
    /// Its settings, or what to tell it instead ([`ToAgent::Rejected`] or
    /// [`ToAgent::Elsewhere`]).
    pub reply: oneshot::Sender<Result<RunSettings, ToAgent>>,
}

/// What connections tell the server.
pub enum Event {
    AgentUp(Box<AgentUp>),
    FromAgent {
        agent: AgentId,
        msg: FromAgent,
        /// When it arrived.
        at: Instant,
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
    /// A backup connected (on the primary); `link` carries the state and
    /// the journal to it.
    BackupUp {
        id: BackupId,
        address: String,
        /// The term of the state it holds, and of which cluster.
        held: u64,
        cluster: formats::wire::ClusterId,
        link: mpsc::UnboundedSender<FromPrimary>,
    },
    BackupAck {
        id: BackupId,
        seq: u64,
    },
    BackupGone {
        id: BackupId,
        why: String,
    },
    /// What the backup's follower heard of the primary (on a backup).
    Primary(Following),
}

impl From<Following> for Event {
    fn from(f: Following) -> Event {
        Event::Primary(f)
    }
}

/// This controller's place among the controllers of its config.
pub enum Place {
    /// The only controller.
    Alone,
    /// The primary, and the backups attached to it.
    Primary(Backups),
    /// A backup, following its primary.
    Backup(Follower),
}

/// How long a backup may take to copy the whole state before the primary
/// lets it go (its link's queue would grow meanwhile).
const COPY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// How often a controller with a backup checks who leads.
const LEAD_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Links to connected agents. Unbounded on purpose: the state cannot wait
/// for one slow agent, and what is queued is bounded by the jobs it runs.
type Links = HashMap<AgentId, mpsc::UnboundedSender<ToAgent>>;

/// The server's [`Effects`]: held until [`Server::commit`]. Orders go out
/// only once the journal holds the changes they carry out: a job's process
/// never exists before its start is journaled (an agent in this process
/// would otherwise start it within microseconds, and a `kill -9` in between
/// would restore it as pending).
#[derive(Default)]
struct Outbox {
    orders: Vec<(AgentId, ToAgent)>,
    entries: Vec<Entry>,
    /// Ends agents reported, to acknowledge (so the agents can forget
    /// them) once the journal and the record file hold them.
    ends: Vec<(AgentId, u64)>,
}

impl Effects for Outbox {
    const JOURNALS: bool = true;

    fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
        self.orders.push((agent, msg));
    }

    fn journal(&mut self, entry: Entry) {
        self.entries.push(entry);
    }

    fn end_taken(&mut self, agent: AgentId, job: u64) {
        self.ends.push((agent, job));
    }
}

/// Sends orders to agents, in order.
fn send_orders(orders: Vec<(AgentId, ToAgent)>, links: &Links) {
    if !orders.is_empty() {
        tracing::debug!(n = orders.len(), "orders sent");
    }
    for (agent, msg) in orders {
        if let Some(tx) = links.get(&agent) {
            // A closed link means the agent is going; its AgentGone
            // follows.
            let _ = tx.send(msg);
        }
    }
}

fn send_replies(replies: Vec<(oneshot::Sender<Response>, Response)>) {
    for (reply, resp) in replies {
        let _ = reply.send(resp);
    }
}

/// A sync of the journal and the record file, under way: the last entry
/// it covers, and what waits for it.
struct Syncing {
    /// Which sync it is: a completion of another (one given up on a step
    /// down) must not release what waits for this one.
    n: u64,
    cover: crate::journal::SyncCover,
    replies: Vec<(oneshot::Sender<Response>, Response)>,
    ends: Vec<(AgentId, u64)>,
}

/// Answers that acknowledge nothing journaled (reads, refusals, a
/// shutdown under way), and so wait for no disk nor backup.
fn reads_only(r: &Response) -> bool {
    matches!(
        r,
        Response::ShuttingDown
            | Response::Queue(_)
            | Response::Nodes(_)
            | Response::Hosts(_)
            | Response::Stats(_)
            | Response::Starts(_)
            | Response::NotPrimary(_)
            | Response::Error(_)
    )
}

pub struct Server {
    cluster: Cluster,
    scheduler: Scheduler,
    clock: Clock,
    links: Links,
    out: Outbox,
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
    record_ends: HashMap<u64, (i64, formats::record::Status)>,
    /// Why the records of ended jobs could not be made durable at the
    /// last sync that asked (a full disk), until one can: their agents
    /// are not told to forget them meanwhile.
    records_error: Option<String>,
    journal: Journal,
    /// Answers to clients, sent once what they acknowledge is journaled.
    replies: Vec<(oneshot::Sender<Response>, Response)>,
    /// Answers that acknowledge a change, waiting for the next sync.
    unsynced: Vec<(oneshot::Sender<Response>, Response)>,
    /// The sync under way on the record sink's thread, if any, and how it
    /// tells it is over.
    syncing: Option<Syncing>,
    /// Syncs begun so far.
    syncs: u64,
    synced_tx: mpsc::UnboundedSender<(u64, crate::records::Synced)>,
    synced_rx: mpsc::UnboundedReceiver<(u64, crate::records::Synced)>,
    /// Submissions waiting for room under `max_jobs`, in arrival order. A
    /// client has one request in flight per connection, so this holds at
    /// most one request per connection: a flooding client is slowed down
    /// to the rate jobs end, not buffered.
    held: VecDeque<(Vec<JobSpec>, u64, oneshot::Sender<Response>)>,
    /// This controller's address in `[controller] hosts` (empty without a
    /// list), its place there from 1 (0 without a list), and its term
    /// (`terms.seen`).
    me: String,
    leader: u32,
    term: u64,
    terms: lead::Terms,
    /// What connections read of this controller's place.
    status: std::sync::Arc<crate::replication::Status>,
    place: Place,
    /// The mark agents must acknowledge before this primary acts.
    mark: Mark,
    witnesses: lead::Witnesses,
    /// Agent hosts turned away because of their marks, and why, until
    /// they register: what `stats` says keeps this controller from
    /// leading.
    turned_away: std::collections::BTreeMap<String, String>,
    /// The record file, read again when a backup takes over.
    record_path: std::path::PathBuf,
    /// Wakes the server for a pass at its instant, to the microsecond.
    timer: timer::Precise,
    /// The journal's writes, syncs and folds, which a full or failing
    /// disk makes fail at every commit: logged once a minute.
    write_failures: crate::complaints::Complaint,
    sync_failures: crate::complaints::Complaint,
    fold_failures: crate::complaints::Complaint,
}

impl Server {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster: Cluster,
        clock: Clock,
        journal: Journal,
        policy: Box<dyn Policy>,
        events: mpsc::Receiver<Event>,
        done: CancellationToken,
        records: crate::records::Sink,
        written: crate::records::Written,
    ) -> Server {
        // The emulation passes no faster than its floor, whatever the
        // interval asks (the twin has no floor).
        let interval = cluster
            .config()
            .schedule_interval
            .max(cluster.config().pass_floor);
        let prestart = cluster.config().prestart;
        let (synced_tx, synced_rx) = mpsc::unbounded_channel();
        let mut server = Server {
            cluster,
            scheduler: Scheduler::new(policy, interval).looking_ahead(prestart),
            clock,
            journal,
            replies: Vec::new(),
            unsynced: Vec::new(),
            syncing: None,
            syncs: 0,
            synced_tx,
            synced_rx,
            held: VecDeque::new(),
            links: Links::default(),
            out: Outbox::default(),
            events,
            done,
            stopping: None,
            records,
            recorded: written.executions,
            record_ends: HashMap::new(),
            records_error: None,
            me: String::new(),
            leader: 0,
            term: 0,
            terms: lead::Terms::default(),
            status: Default::default(),
            place: Place::Alone,
            mark: Mark::default(),
            witnesses: lead::Witnesses::default(),
            turned_away: Default::default(),
            record_path: std::path::PathBuf::new(),
            timer: timer::Precise::new(),
            write_failures: crate::complaints::Complaint::new("writing the journal"),
            sync_failures: crate::complaints::Complaint::new(
                "syncing the journal and the record file",
            ),
            fold_failures: crate::complaints::Complaint::new("folding the journal into a snapshot"),
        };
        server.scheduler.attach(&mut server.cluster);
        // A job whose record is in the file ended, even if the controller
        // died before it could note so: its execution must not run again.
        let now = server.clock.now();
        server.cluster.settle(&written.last, now, &mut server.out);
        server
    }

    /// Puts the server in its place among the controllers of its config
    /// (`me` is its address in their list), with the term its state
    /// directory keeps. `record_path`: its record file.
    pub fn placed(
        mut self,
        me: String,
        place: Place,
        record_path: std::path::PathBuf,
        status: std::sync::Arc<crate::replication::Status>,
    ) -> Server {
        let config = self.cluster.config();
        self.terms = lead::load_terms(&config.state_dir);
        self.term = self.terms.seen;
        self.leader = config
            .controllers
            .iter()
            .position(|a| *a == me)
            .map_or(0, |i| i as u32 + 1);
        self.mark = Mark {
            cluster: self.terms.cluster,
            term: self.term,
            leader: self.leader,
            floor: u64::MAX,
        };
        if !matches!(place, Place::Alone) {
            self.witnesses = lead::Witnesses::new(
                config.hosts.iter().map(|h| h.name.clone()),
                config.takeover_timeout,
            );
        }
        self.me = me;
        self.place = place;
        self.record_path = record_path;
        self.status = status;
        self.publish();
        self
    }

    /// Tells connections and the follower task what they read of this
    /// controller's place.
    fn publish(&self) {
        use std::sync::atomic::Ordering;
        self.status.leads.store(self.acts(), Ordering::Relaxed);
        self.status.held.store(self.terms.held, Ordering::Relaxed);
        self.status
            .cluster
            .store(self.terms.cluster.0, Ordering::Relaxed);
    }

    /// Whether this controller acts on the cluster (it is not a backup).
    fn acts(&self) -> bool {
        !matches!(self.place, Place::Backup(_))
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        // Agents on other hosts kill their jobs if the controller goes
        // silent; tell them it is alive every heartbeat period.
        let mut ping = tokio::time::interval(self.cluster.config().agent.heartbeat);
        // Entries are written at once and synced in batches; a client's
        // answer waits for the sync of what it acknowledges.
        let mut sync = tokio::time::interval(SYNC_INTERVAL);
        let mut lead = tokio::time::interval(LEAD_CHECK);
        lead.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Worked out afresh after every event: a job that ends or
            // arrives must not wait for a policy wake-up set earlier.
            // No pass while the journal cannot be written: its starts
            // could not be sent (orders wait for the write), and a job
            // would count a run it never had.
            let unwritable = self.write_failures.failing().is_some();
            let due = match self.stopping {
                Some(_) => None,
                None if !self.acts() || unwritable => None,
                None => self.scheduler.due(&self.cluster),
            };
            let next_pass = due.map(|t| tokio::time::Instant::from_std(self.clock.instant(t)));
            // When the next expected ends are to be prepared for: the
            // loop wakes up then, and looks ahead.
            let next_ahead = match self.stopping {
                Some(_) => None,
                None if !self.acts() || unwritable => None,
                None => self.scheduler.ahead_at(&self.cluster),
            }
            .map(|t| tokio::time::Instant::from_std(self.clock.instant(t)));
            // A pass that is due runs before more events are read: under a
            // steady stream of events the biased select below would
            // otherwise put it off for as long as the stream lasts.
            if next_pass.is_some_and(|t| t <= tokio::time::Instant::now()) {
                self.pass();
            } else if !self
                .wait_and_handle(
                    next_pass, next_ahead, &mut tick, &mut ping, &mut sync, &mut lead, &shutdown,
                )
                .await
            {
                break;
            }
            self.admit_held();
            self.commit().await;
            self.released();
            self.look_ahead().await;
            if let Some(deadline) = self.stopping {
                // A sync under way is let finish: what waits for it is
                // answered as if the controller went on.
                let idle = !self.cluster.has_agents() && self.syncing.is_none();
                if idle || Instant::now() >= deadline {
                    break;
                }
            }
        }
        self.sync().await;
        // The last orders (the ends the sync made durable may be forgotten)
        // under the same rule as all others.
        let orders = std::mem::take(&mut self.out.orders);
        self.release(self.journal.seq(), orders, Vec::new());
        info!("controller stopped");
        self.done.cancel();
    }

    /// Waits for the next event or timer and handles it (with whatever
    /// else is queued, up to a batch); false once no event can come.
    #[allow(clippy::too_many_arguments)]
    async fn wait_and_handle(
        &mut self,
        next_pass: Option<tokio::time::Instant>,
        next_ahead: Option<tokio::time::Instant>,
        tick: &mut tokio::time::Interval,
        ping: &mut tokio::time::Interval,
        sync: &mut tokio::time::Interval,
        lead: &mut tokio::time::Interval,
        shutdown: &CancellationToken,
    ) -> bool {
        tokio::select! {
            // Events first: heartbeats waiting in the queue after a long
            // pass must be seen before agents are judged silent.
            biased;
            // First: what waited for the disk goes as soon as it may.
            r = self.synced_rx.recv(), if self.syncing.is_some() => {
                if let Some((n, r)) = r {
                    self.synced(n, r);
                }
            }
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
            () = self.timer.sleep_until(next_pass.unwrap_or_else(tokio::time::Instant::now)), if next_pass.is_some() => {
                self.pass();
            }
            // Nothing to do here: the loop looks ahead after every wake-up.
            () = tokio::time::sleep_until(next_ahead.unwrap_or_else(tokio::time::Instant::now)), if next_ahead.is_some() => {}
            _ = tick.tick(), if self.acts() => self.tick(),
            _ = lead.tick(), if !matches!(self.place, Place::Alone) => self.lead().await,
            _ = ping.tick(), if self.acts() => self.ping(),
            _ = sync.tick(), if self.journal.dirty() || !self.out.ends.is_empty() => {
                self.begin_sync();
            }
            () = shutdown.cancelled(), if self.stopping.is_none() => self.begin_shutdown(),
        }
        true
    }

    /// Writes the state's new entries to the journal, then sends agents
    /// what they are to do (a crash of this process keeps what was written:
    /// nothing is acted on that a restart would not know); if clients wait
    /// for answers, makes the entries durable before answering, unless the
    /// config answers once they are written (`journal_sync`).
    async fn commit(&mut self) {
        let unwritten = self.write_journal();
        // A backup says it holds only what it wrote.
        if let Place::Backup(_) = self.place {
            if unwritten.is_none() {
                self.confirm();
            }
        }
        let seq = self.journal.seq();
        // No agent hears of a change before it is written: while the
        // journal cannot be written (a full disk), orders wait for it;
        // except once shutting down, when the agents must hear that they
        // are to stop (the orders held before are dropped then:
        // `begin_shutdown`).
        if unwritten.is_none() || self.stopping.is_some() {
            let orders = std::mem::take(&mut self.out.orders);
            self.release(seq, orders, Vec::new());
        }
        self.answer(seq, unwritten);
        // The sync tick comes last in the loop's order, and a steady
        // stream of events (agents' starts and ends, clients answered
        // once written) could keep it from its turn: no sync, no end
        // acknowledged to its agent, no fold. Past an interval, the sync
        // begins here.
        if self.journal.lag() >= SYNC_INTERVAL {
            self.begin_sync();
        }
    }

    /// Answers the clients that wait, for the entries up to `seq`
    /// (`unwritten`: why the write failed, if it did). Answers that
    /// acknowledge a change wait for the disk; the loop does not: the
    /// sync runs on the record sink's thread, and its end comes back as
    /// an event ([`Server::synced`]). A sync asked for while one is under
    /// way is the next one, for all that came meanwhile (a group commit).
    fn answer(&mut self, seq: u64, unwritten: Option<String>) {
        if self.replies.is_empty() {
            return;
        }
        let (reads, acts): (Vec<_>, Vec<_>) =
            self.replies.drain(..).partition(|(_, r)| reads_only(r));
        self.release(seq, Vec::new(), reads);
        if acts.is_empty() {
            return;
        }
        // A write that failed is answered at once, in either mode (its
        // error is in the log already): no sync can cover it.
        if let Some(e) = unwritten {
            return self.cannot_journal(&e, acts);
        }
        if self.cluster.config().sync_before_answer {
            self.unsynced.extend(acts);
            self.begin_sync();
            return;
        }
        // `journal_sync = "background"`: written is enough, as for the
        // orders (a crash of this process keeps it), and the sync follows
        // behind.
        self.release(seq, Vec::new(), acts);
    }

    /// Starts syncing the journal and the record file on the record sink's
    /// thread, for the answers and ends that wait for it, unless a sync is
    /// under way (its end starts the next).
    fn begin_sync(&mut self) {
        if self.syncing.is_some() {
            return;
        }
        // What a write that fails (a full disk) leaves unwritten is not
        // covered, nor are the ends, which may be among it: what was
        // written is synced all the same, and the answers that wait for it
        // (their entries were written at their commit) go.
        let unwritten = self.write_journal().is_some();
        let (file, cover) = match self.journal.sync_written_elsewhere() {
            Ok(f) => f,
            Err(e) => {
                let replies = std::mem::take(&mut self.unsynced);
                return self.sync_failed(&format!("{e:#}"), replies);
            }
        };
        self.syncs += 1;
        let n = self.syncs;
        let ends = if unwritten {
            Vec::new()
        } else {
            std::mem::take(&mut self.out.ends)
        };
        // The record file matters only to the ends: their records are in
        // the sink's queue before this.
        let records = !ends.is_empty();
        self.syncing = Some(Syncing {
            n,
            cover,
            replies: std::mem::take(&mut self.unsynced),
            ends,
        });
        let tx = self.synced_tx.clone();
        self.records.sync_with(file, records, move |r| {
            let _ = tx.send((n, r));
        });
    }

    /// The sync under way is over: what it covers is durable, so what
    /// waited for it goes (or learns that it failed).
    fn synced(&mut self, n: u64, result: crate::records::Synced) {
        let Some(done) = self.syncing.take_if(|s| s.n == n) else {
            return;
        };
        // Asked for only with ends to acknowledge.
        let records = result.records.is_none_or(|r| self.records_synced(r));
        let ends_durable = result.journal.is_ok() && records;
        match result.journal {
            Ok(()) => {
                if let Some(line) = self.sync_failures.worked(Instant::now()) {
                    info!("{line}");
                }
                self.journal.synced(done.cover);
                self.release(done.cover.seq, Vec::new(), done.replies);
                // Clients submitting without pause keep the journal
                // synced: the fold comes here too.
                self.compact();
            }
            Err(e) => self.sync_failed(&format!("cannot sync the journal: {e}"), done.replies),
        }
        if ends_durable {
            self.acknowledge_ends(done.ends);
        } else {
            // Acknowledged by a later sync (the sync tick tries while
            // ends wait): their agents keep them until then.
            self.out.ends.extend(done.ends);
        }
        if !self.unsynced.is_empty() {
            self.begin_sync();
        }
    }

    /// What `replies` acknowledge might not survive a crash: they say so.
    fn sync_failed(&mut self, e: &str, replies: Vec<(oneshot::Sender<Response>, Response)>) {
        if let Some(line) = self.sync_failures.failed(e, Instant::now()) {
            error!("{line}");
        }
        self.cannot_journal(e, replies);
    }

    /// Answers `replies` that the change they acknowledge is made but not
    /// safely on disk, because of `e` (refusals stay as they are). The
    /// change cannot be taken back: the jobs of a submission are queued
    /// and run, and the answer names them, so that no one submits them
    /// again believing them lost.
    fn cannot_journal(&mut self, e: &str, replies: Vec<(oneshot::Sender<Response>, Response)>) {
        let replies = replies
            .into_iter()
            .map(|(reply, resp)| {
                let said = match resp {
                    Response::Error(_) => return (reply, resp),
                    Response::Submitted(ids) => format!(
                        "{} queued, but not safely on disk ({e}): lost if the controller stops \
                         before it can journal them",
                        match ids.as_slice() {
                            [one] => format!("job {one} is"),
                            // A submission's ids follow each other.
                            [first, .., last] => format!("jobs {first} to {last} are"),
                            [] => "no job is".to_string(),
                        }
                    ),
                    _ => format!(
                        "not safely on disk ({e}): what this request changed is lost if the \
                         controller stops before it can journal it"
                    ),
                };
                (reply, Response::Error(said))
            })
            .collect();
        self.release(self.journal.seq(), Vec::new(), replies);
    }

    /// Writes the core's new entries to the journal, and sends the written
    /// frames to the backups. Returns why the write failed, if it did (the
    /// entries wait to be written again).
    fn write_journal(&mut self) -> Option<String> {
        self.journal.append(self.out.entries.drain(..));
        let failed = match self.journal.write() {
            Ok(()) => {
                if let Some(line) = self.write_failures.worked(Instant::now()) {
                    info!("{line}");
                }
                None
            }
            Err(e) => {
                let e = format!("{e:#}");
                if let Some(line) = self.write_failures.failed(&e, Instant::now()) {
                    error!("{line}");
                }
                Some(e)
            }
        };
        if let Place::Primary(backups) = &mut self.place {
            let frames = self.journal.take_outgoing();
            if !frames.is_empty() && !backups.is_empty() {
                backups.send(|| FromPrimary::Entries(frames.clone()));
            }
        }
        failed
    }

    /// Sends orders and answers that depend on entries up to `seq` once
    /// every backup holds those: now, or when they confirm.
    fn release(
        &mut self,
        seq: u64,
        orders: Vec<(AgentId, ToAgent)>,
        replies: Vec<(oneshot::Sender<Response>, Response)>,
    ) {
        // Answers that acknowledge nothing go at once.
        let (reads, acts): (Vec<_>, Vec<_>) = replies.into_iter().partition(|(_, r)| reads_only(r));
        send_replies(reads);
        let backed = self.backed();
        let now = match &mut self.place {
            Place::Primary(backups) => backups.release(seq, orders, acts, backed),
            _ => Some((orders, acts)),
        };
        if let Some((orders, replies)) = now {
            send_orders(orders, &self.links);
            send_replies(replies);
        }
    }

    /// Sends what waited for the backups (and the agents' backing) and may
    /// go now.
    fn released(&mut self) {
        let timeout = self.cluster.config().takeover_timeout;
        if let Place::Primary(backups) = &mut self.place {
            // A backup let go raises the mark first: what waited goes only
            // once the agents hold the new one.
            backups.let_go_late(timeout, COPY_TIMEOUT);
        }
        self.update_mark();
        let backed = self.backed();
        if self.witnesses.note_backing(backed, self.term) {
            self.backing_came();
        }
        if let Place::Primary(backups) = &mut self.place {
            let (orders, replies) = backups.ready(backed);
            send_orders(orders, &self.links);
            send_replies(replies);
        }
    }

    /// On the way out: makes the journal and the record file durable
    /// here and now, then answers whatever waited for a sync and lets
    /// agents forget the ends they reported.
    async fn sync(&mut self) {
        // As [`Server::begin_sync`]: what is written is synced; the ends
        // a failed write may hold stay unacknowledged, kept by their
        // agents.
        let unwritten = self.write_journal().is_some();
        let mut replies = std::mem::take(&mut self.unsynced);
        let mut ends = if unwritten {
            Vec::new()
        } else {
            std::mem::take(&mut self.out.ends)
        };
        if let Some(under_way) = self.syncing.take() {
            replies.splice(0..0, under_way.replies);
            ends.splice(0..0, under_way.ends);
        }
        match self.journal.sync_written() {
            Ok(()) => {
                if let Some(line) = self.sync_failures.worked(Instant::now()) {
                    info!("{line}");
                }
                self.release(self.journal.written(), Vec::new(), replies);
                let records = self.records.flush().await;
                if let Err(e) = &records {
                    // The agents are told to stop, and their ends go with
                    // them: the records stay in each agent's spool file,
                    // on its host.
                    error!(
                        "records of jobs on other hosts are not in {}: {e}; they remain in \
                         their agents' record directories",
                        self.record_path.display()
                    );
                }
                if self.records_synced(records) {
                    self.acknowledge_ends(ends);
                }
            }
            // Unacknowledged, the ends stay with their agents.
            Err(e) => self.sync_failed(&format!("{e:#}"), replies),
        }
    }

    /// Whether the records of the ends a sync covers are durable; keeps
    /// why not for `stats` (the sink logs the failure itself).
    fn records_synced(&mut self, r: std::io::Result<()>) -> bool {
        self.records_error = r
            .err()
            .map(|e| format!("{}: {e}", self.record_path.display()));
        self.records_error.is_none()
    }

    /// Folds a long journal into a snapshot (a no-op while it is short).
    fn compact(&mut self) {
        if self.journal.wants_compaction() {
            match self
                .cluster
                .write_snapshot(&mut self.journal, self.clock.now())
            {
                Ok(()) => {
                    if let Some(line) = self.fold_failures.worked(Instant::now()) {
                        info!("{line}");
                    }
                }
                Err(e) => {
                    if let Some(line) = self.fold_failures.failed(&format!("{e:#}"), Instant::now())
                    {
                        error!("{line}");
                    }
                }
            }
        }
    }

    /// Once a pass's orders have left: the processes of the jobs the next
    /// gang turn will start, started ahead (`[controller] prestart`). After
    /// the orders, not in the pass, so that a turn never waits for the
    /// next one's guess.
    async fn look_ahead(&mut self) {
        let now = self.clock.now().mono;
        // Nothing prepared while the journal cannot be written: its
        // orders would wait, for starts that may never come.
        if !self.acts()
            || self.stopping.is_some()
            || self.write_failures.failing().is_some()
            || !self.scheduler.ahead_due(&self.cluster, now)
        {
            return;
        }
        // The orders just handed to the connections are written first
        // (a woken task runs after the one that woke it).
        tokio::task::yield_now().await;
        let now = self.clock.now();
        self.scheduler
            .prepare_ahead(&self.cluster, now, &mut self.out);
        self.commit().await;
    }

    /// A scheduling pass, now.
    fn pass(&mut self) {
        let now = self.clock.now();
        self.scheduler.pass(&mut self.cluster, now, &mut self.out);
    }

    /// Tells agents and backups this controller is alive: straight to
    /// them (a ping carries no change), and only while it may act, so that
    /// the agents of a primary that lost its majority fence their jobs.
    fn ping(&mut self) {
        if !self.backed() {
            return;
        }
        for agent in self.cluster.remote_agents() {
            if let Some(tx) = self.links.get(&agent) {
                let _ = tx.send(ToAgent::Ping);
            }
        }
        if let Place::Primary(backups) = &self.place {
            backups.send(|| FromPrimary::Ping);
        }
    }

    /// Lets agents forget the ends they reported, now that they are noted.
    fn acknowledge_ends(&mut self, ends: Vec<(AgentId, u64)>) {
        if ends.is_empty() {
            return;
        }
        let remote: HashSet<AgentId> = self.cluster.remote_agents().collect();
        let mut by_agent: HashMap<AgentId, Vec<u64>> = HashMap::new();
        for (agent, job) in ends {
            if remote.contains(&agent) {
                by_agent.entry(agent).or_default().push(job);
            }
        }
        for (agent, jobs) in by_agent {
            self.out.to_agent(agent, ToAgent::Forget(jobs));
        }
    }

    fn tick(&mut self) {
        let now = self.clock.now();
        self.cluster.enforce_walltime(now, &mut self.out);
        self.cluster.lose_overdue(now, &mut self.out);
        for agent in self.cluster.silent_agents(now) {
            self.links.remove(&agent);
            self.witnesses.gone(agent);
            self.cluster
                .agent_down(agent, "no heartbeat", false, now, &mut self.out);
        }
    }

    fn begin_shutdown(&mut self) {
        if !self.acts() {
            // A backup's copy is the primary's: nothing of it is cancelled.
            info!("shutting down");
            self.stopping = Some(Instant::now());
            return;
        }
        info!("shutting down: cancelling jobs, stopping agents and backups");
        if let Place::Primary(backups) = &self.place {
            backups.send(|| FromPrimary::Shutdown);
        }
        // Orders held for a journal that cannot be written (a full disk)
        // are dropped, not sent: no agent hears of a change the journal
        // does not hold. The shutdown's own, which stop every job, go.
        if self.write_failures.failing().is_some() {
            self.out.orders.clear();
        }
        let now = self.clock.now();
        self.cluster.shutdown(now, &mut self.out);
        let grace = self.cluster.config().agent.kill_grace + std::time::Duration::from_secs(5);
        self.stopping = Some(Instant::now() + grace);
    }

    fn handle(&mut self, ev: Event) {
        let ev = match ev {
            Event::AgentUp(up) => match self.judge_mark(up) {
                Some(up) => Event::AgentUp(up),
                None => return,
            },
            ev => ev,
        };
        let Some(ev) = self.peer_event(ev) else {
            return;
        };
        let now = self.clock.now();
        match ev {
            Event::AgentUp(up) => self.agent_up(*up, now),
            Event::FromAgent { agent, msg, at } => {
                self.witnesses.heard(agent, at);
                match msg {
                    FromAgent::Started { job, pid } => debug!(job, pid, "job process started"),
                    FromAgent::Ended { job, exit } => self.job_ended(agent, job, exit, now),
                    FromAgent::Steps { job, steps } => self.cluster.job_steps(agent, job, steps),
                    FromAgent::Heartbeat { running } => self.cluster.heartbeat(agent, running, now),
                    FromAgent::Resources(r) => self.cluster.host_report(agent, r, now),
                    // Handled by the connection (records) or refused there
                    // (a second registration).
                    FromAgent::Records(_) | FromAgent::Register { .. } => {}
                    FromAgent::Marked(mark) => self.witnesses.marked(agent, mark),
                }
            }
            Event::AgentGone { agent, why } => {
                self.links.remove(&agent);
                self.witnesses.gone(agent);
                self.cluster
                    .agent_down(agent, &why, self.stopping.is_some(), now, &mut self.out);
            }
            Event::Records { agent, frames } => self.take_records(agent, &frames),
            Event::Request {
                req: Request::Submit { specs, key },
                reply,
            } if self.stopping.is_none() && !self.has_room(formats::wire::jobs_of(&specs)) => {
                // On a full disk no pass runs, so no room comes: refused
                // as any submission is then, not held.
                if let Some(refused) = self.unjournaled(key) {
                    self.replies.push((reply, refused));
                    return;
                }
                let max = self.cluster.config().max_jobs;
                let n = formats::wire::jobs_of(&specs);
                if n > max {
                    let e = format!("{n} jobs in one request: more than max_jobs = {max}");
                    self.replies.push((reply, Response::Error(e)));
                    return;
                }
                if self.held.is_empty() {
                    info!(
                        max_jobs = max,
                        "the queue is full: submissions wait for jobs to end"
                    );
                }
                self.held.push_back((specs, key, reply));
            }
            Event::Request { req, reply } => {
                let resp = self.request(req, now);
                self.replies.push((reply, resp));
            }
            // Taken by peer_event.
            Event::BackupUp { .. }
            | Event::BackupAck { .. }
            | Event::BackupGone { .. }
            | Event::Primary(_) => {}
        }
    }
}
