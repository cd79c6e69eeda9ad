//! A virtual node: one lightweight task that owns the job processes started
//! on it (and those started ahead of their jobs, held, until a start claims
//! them or their time runs out), turns commands into real signals (to
//! their process groups, and a cancel's to sigsleep, which passes it on),
//! and reports how each ended.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use formats::wire::{Exit, FromAgent, Reach, RunSettings, StartJob, StepInfo, SuspendMode};
use futures_util::stream::{FuturesUnordered, StreamExt};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::{sleep_until, Duration, Instant};
use tracing::{debug, warn};

use crate::spawn::Launcher;
use sigsleep::signals::EndWhy;

/// What a node task is asked to do.
#[derive(Debug)]
pub enum NodeCmd {
    /// Boxed: a node's channel allocates room for 32 commands up front,
    /// which with the job inline is 2 KiB per idle node.
    Start(Box<StartJob>),
    /// Start the job's process held, ahead of its `Start`; kill it if no
    /// `Start` with the same fields claims it by then.
    Prepare(Box<StartJob>, Instant),
    Suspend(u64),
    Resume(u64),
    /// End the job: a cancel, or for the reason its program is told.
    Cancel(u64, EndWhy),
    /// `SIGKILL` at once, without a record: the agent lost the controller
    /// and this execution of the job no longer counts.
    Kill(u64),
    /// A signal to part of a batch script's job (`scancel --signal`).
    Signal(u64, i32, Reach),
    /// A running job's new wall-time limit, in nanoseconds (0: none).
    Limit(u64, u64),
}

/// Shared by every node task of an agent.
pub struct NodeContext {
    pub launcher: Launcher,
    pub sigsleep: PathBuf,
    /// The record file sigsleep appends to.
    pub log: PathBuf,
    pub settings: RunSettings,
    /// Events for the controller; the uplink holds the receiver. Bounded:
    /// a node waits rather than piling events up if the uplink lags.
    pub events: mpsc::Sender<FromAgent>,
}

/// A job process this node owns.
struct Job {
    pid: i32,
    /// Its process's [`crate::spawn::Spawned::born`]: which process the
    /// pid is.
    born: i64,
    /// The start it runs for (`StartJob::start_ns`): a Start that names
    /// it again is the same start repeated, not run again.
    start: i64,
    /// Told to end (cancelled, killed, or set aside for `next`): a repeat
    /// of its start is not answered any more.
    ending: bool,
    /// Another start of the job, come while this process was still
    /// there: made once it is gone. Meanwhile this process is signalled
    /// no more (its pid may be another's once it is reaped), and what is
    /// asked of the job is kept for that start.
    next: Option<Box<StartJob>>,
    /// An end (a cancel) asked while `next` waits: that start is made all
    /// the same and ended at once, as a job ended right after its start,
    /// so that its end comes with its own record, not the killed
    /// process's.
    next_end: Option<EndWhy>,
    /// A suspension asked while `next` waits (and not resumed since).
    next_suspended: bool,
    /// A start that waited and was dropped by a Kill: never made, though
    /// said again.
    dropped: Option<i64>,
    suspended: bool,
    /// `slurm` mode: when to follow the `SIGTSTP` with a `SIGSTOP`.
    stop_at: Option<Instant>,
    /// After a cancel: when `SIGTERM` has had its chance.
    kill_at: Option<Instant>,
    /// It runs a program: the directory of its files ([`program_dir`]),
    /// where how it ended is read.
    program: Option<PathBuf>,
    /// Killed at once ([`NodeCmd::Kill`]): whether it ended on its own
    /// first is read from the record file ([`recorded`]), not from its exit.
    killed: bool,
    /// The record file's length when the process was started: its record,
    /// if it wrote one, is past here.
    log_from: u64,
}

/// A job's process started ahead of the job ([`NodeCmd::Prepare`]), held
/// until its `Start` claims it.
struct Prepared {
    pid: i32,
    born: i64,
    /// What it was started with: a `Start` that differs does not claim it.
    start: Box<StartJob>,
    /// Killed if still unclaimed then.
    until: Instant,
    /// Fires when it has said it ended or been reaped. Kept here, not among the
    /// node's job exits, until a start claims it: a process replaced is
    /// waited for before its successor starts ([`Prepared::kill`]).
    exit: oneshot::Receiver<Exit>,
}

impl Prepared {
    /// Whether it is still alive (not yet reaped): a pid that ended may be
    /// another process's by now, and must not be signalled.
    fn alive(&mut self) -> bool {
        matches!(
            self.exit.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        )
    }

    /// Kills it and waits until it is gone, so that one job never has two
    /// processes at once, even for the instant before a fresh held process
    /// has named itself held.
    async fn kill(mut self) {
        if self.alive() {
            signal(self.pid, self.born, Signal::SIGKILL);
            gone(self.pid, self.exit).await;
        }
    }
}

/// A held process asked of the spawner for a coming job and not started
/// yet: its start waits behind every start decided now, so the node's
/// commands never wait for it (a node whose next job's start waited behind
/// its held process, itself behind every other node's starts, stalled the
/// whole agent under a stream of short jobs). A start of its job takes it
/// if it has come, else gives it up (the spawner then skips it, or kills
/// it if it started meanwhile).
struct Preparing {
    start: Box<StartJob>,
    until: Instant,
    answer: crate::spawn::Answer,
}

impl Preparing {
    /// The process, if the spawner has started it by now; else it is
    /// given up.
    fn take(mut self) -> Option<Prepared> {
        match self.answer.try_recv() {
            Ok(Ok(spawned)) => Some(Prepared {
                pid: spawned.pid,
                born: spawned.born,
                start: self.start,
                until: self.until,
                exit: spawned.exit,
            }),
            _ => None,
        }
    }
}

/// A node's processes started ahead of their jobs, in their three stages.
/// Boxed, and there only while it holds any: most nodes never hold one,
/// and three maps inline would be 144 bytes of every idle node's task.
#[derive(Default)]
struct Ahead {
    /// Asked of the spawner, not answered yet.
    preparing: HashMap<u64, Preparing>,
    /// Started and held, until a start claims them.
    prepared: HashMap<u64, Prepared>,
    /// Killed when their time ran out, until reaped: a start of the same
    /// job waits for its one to be gone.
    dying: HashMap<u64, (i32, oneshot::Receiver<Exit>)>,
}

impl Ahead {
    fn is_empty(&self) -> bool {
        self.preparing.is_empty() && self.prepared.is_empty() && self.dying.is_empty()
    }

    /// Held processes whose time ran out by `now` are killed (those asked
    /// for and started meanwhile too; those not started are given up), and
    /// those killed before and reaped since are forgotten.
    fn expire(&mut self, now: Instant) {
        let late: Vec<u64> = self
            .preparing
            .iter()
            .filter(|(_, p)| p.until <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            if let Some(p) = self.preparing.remove(&id).and_then(Preparing::take) {
                self.prepared.insert(id, p);
            }
        }
        let expired: Vec<u64> = self
            .prepared
            .iter()
            .filter(|(_, p)| p.until <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            if let Some(mut p) = self.prepared.remove(&id) {
                if p.alive() {
                    debug!(job = id, pid = p.pid, "prepared process unclaimed in time");
                    signal(p.pid, p.born, Signal::SIGKILL);
                    self.dying.insert(id, (p.pid, p.exit));
                }
            }
        }
        // Those reaped since need no wait.
        self.dying.retain(|_, (_, exit)| {
            matches!(exit.try_recv(), Err(oneshot::error::TryRecvError::Empty))
        });
    }

    /// The held process of job `id`, asked for or started, taken out; one
    /// asked for and not started yet is given up.
    fn take(&mut self, id: u64) -> Option<Prepared> {
        let early = self.preparing.remove(&id).and_then(Preparing::take);
        self.prepared.remove(&id).or(early)
    }
}

/// The first of `ahead`'s held processes asked for that the spawner has
/// answered for.
async fn next_answer(
    ahead: &mut Option<Box<Ahead>>,
) -> (u64, std::io::Result<crate::spawn::Spawned>) {
    std::future::poll_fn(|cx| {
        let Some(ahead) = ahead.as_mut() else {
            return std::task::Poll::Pending;
        };
        for (&id, p) in ahead.preparing.iter_mut() {
            let answer = std::future::Future::poll(std::pin::Pin::new(&mut p.answer), cx);
            if let std::task::Poll::Ready(r) = answer {
                let r = r.unwrap_or_else(|_| Err(std::io::Error::other("the spawner is gone")));
                return std::task::Poll::Ready((id, r));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// How long a process killed with SIGKILL may take to be reaped before
/// the node goes on without it (it blocks this node's commands meanwhile;
/// SIGKILL takes effect at once unless the process is stuck in the
/// kernel, which no wait would mend).
const REAPED_WITHIN: Duration = Duration::from_secs(2);

/// Waits until the process `pid`, killed, has been reaped.
async fn gone(pid: i32, exit: oneshot::Receiver<Exit>) {
    if tokio::time::timeout(REAPED_WITHIN, exit).await.is_err() {
        warn!(
            pid,
            "a process not reaped {} s after SIGKILL",
            REAPED_WITHIN.as_secs()
        );
    }
}

/// A node's mailbox: its commands in order and a wake-up for its task.
/// Lighter than a channel, which allocates room for 32 commands up front
/// (with 100,000 idle nodes per agent, that would be most of the agent).
/// Unbounded on purpose: the uplink must never wait on a node (nodes wait
/// on the uplink's event channel, so both waiting would deadlock);
/// commands are bounded by the jobs the controller placed here.
#[derive(Default)]
struct Mailbox {
    state: Mutex<Mail>,
    wake: Notify,
}

#[derive(Default)]
struct Mail {
    cmds: VecDeque<NodeCmd>,
    /// The handle is gone: end the jobs, then the task.
    closed: bool,
}

impl Mailbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Mail> {
        // Nothing panics while holding it; a poisoned lock is still sound.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next command; `None` once the handle is dropped and every
    /// command sent before was taken.
    async fn recv(&self) -> Option<NodeCmd> {
        loop {
            {
                let mut mail = self.lock();
                if let Some(cmd) = mail.cmds.pop_front() {
                    return Some(cmd);
                }
                if mail.closed {
                    return None;
                }
            }
            // A wake-up given before this wait is kept (a permit), so none
            // is lost between the check above and here.
            self.wake.notified().await;
        }
    }
}

/// A node's handle, the only one. Dropping it ends the node's task, which
/// first ends its jobs.
pub struct NodeHandle(Arc<Mailbox>);

impl NodeHandle {
    pub fn send(&self, cmd: NodeCmd) {
        self.0.lock().cmds.push_back(cmd);
        self.0.wake.notify_one();
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_one();
    }
}

pub fn start(name: String, ctx: Arc<NodeContext>) -> (NodeHandle, tokio::task::JoinHandle<()>) {
    let mailbox = Arc::new(Mailbox::default());
    let task = tokio::spawn(run(name, Arc::clone(&mailbox), ctx));
    (NodeHandle(mailbox), task)
}

/// `sig` to the process group of job process `pid`, if that is still
/// ours: one reaped an instant ago, its exit not yet seen by its node, is
/// left alone, since its pid may be another process's already.
fn signal(pid: i32, born: i64, sig: Signal) {
    let sent = crate::spawn::while_unreaped(pid, born, || {
        // The job's process group is its pid (spawned with pgroup 0).
        killpg(Pid::from_raw(pid), sig)
    });
    if let Some(Err(e)) = sent {
        debug!(pid, ?sig, %e, "signal not delivered");
    }
}

/// `sig` to the processes of the job run by sigsleep `pid` that `reach`
/// names (sigsleep itself is never one: it is the job's supervisor, not a
/// process of Slurm's job).
/// A step's tasks (`Reach::Step`) are found below the srun that wrote
/// itself down in the job's directory `dir` (`step-N.srun`), whatever
/// they made of their environment; when the signal ends the step, that
/// srun is told first (`step-N.cancelled`: the signal and when, wall ns),
/// so that it says the step was cancelled, as Slurm's step daemon says
/// it.
fn signal_part(pid: i32, born: i64, sig: i32, reach: Reach, dir: Option<&Path>) {
    // Its supervisor unreaped, the tree read below it is the job's.
    crate::spawn::while_unreaped(pid, born, || signal_tree(pid, sig, reach, dir));
}

fn signal_tree(pid: i32, sig: i32, reach: Reach, dir: Option<&Path>) {
    let pids = match reach {
        Reach::Steps => sigsleep::tree::step_tasks_of(pid),
        Reach::Batch => sigsleep::tree::program_of(pid).into_iter().collect(),
        Reach::Full => sigsleep::tree::descendants_of(pid),
        Reach::Step(n) => {
            // Its srun said who it is (`step-N.srun`: pid, start ticks).
            let srun = dir
                .and_then(|d| std::fs::read_to_string(d.join(format!("step-{n}.srun"))).ok())
                .and_then(|t| {
                    let (p, ticks) = t.trim().split_once(' ')?;
                    Some((p.parse::<i32>().ok()?, ticks.parse::<u64>().ok()?))
                });
            let tasks = srun.map_or_else(Vec::new, |(srun, ticks)| {
                sigsleep::tree::srun_tasks(pid, srun, ticks)
            });
            // Told only of what ends a step, as Slurm's step daemon says
            // only those (a trapped SIGUSR1 ends nothing).
            let ends = sig == libc::SIGKILL || sig == libc::SIGTERM;
            if let (Some(dir), false, true) = (dir, tasks.is_empty(), ends) {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let told = std::fs::write(
                    dir.join(format!("step-{n}.cancelled")),
                    format!("{sig} {now}\n"),
                );
                if let Err(e) = told {
                    debug!(pid, step = n, %e, "cannot tell srun its step is cancelled");
                }
            }
            tasks
        }
    };
    debug!(
        pid,
        sig,
        ?reach,
        processes = pids.len(),
        "signal to part of a job"
    );
    for p in pids {
        // SAFETY: plain kill(2). A pid read from /proc an instant ago may
        // have ended since; reuse that fast is as unlikely as it is with
        // Slurm's own process tracking.
        unsafe { libc::kill(p, sig) };
    }
}

/// Sends an event to the uplink. The event and the send's state live on
/// the heap while it waits: inline, they would be part of every node
/// task's size, idle or not (as would the timer's below).
fn report(ctx: &NodeContext, event: FromAgent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
    Box::pin(async move {
        let _ = ctx.events.send(event).await;
    })
}

async fn timer(at: Option<Instant>) {
    match at {
        Some(t) => Box::pin(sleep_until(t)).await,
        None => std::future::pending().await,
    }
}

async fn run(name: String, rx: Arc<Mailbox>, ctx: Arc<NodeContext>) {
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    let mut ahead: Option<Box<Ahead>> = None;
    let mut exits = FuturesUnordered::new();
    let suspend_grace = Duration::from_millis(ctx.settings.suspend_grace_ms);
    let kill_grace = Duration::from_millis(ctx.settings.kill_grace_ms);
    let mut closing = false;
    loop {
        let next_timer = jobs
            .values()
            .flat_map(|j| [j.stop_at, j.kill_at])
            .flatten()
            .chain(ahead.iter().flat_map(|a| {
                a.prepared
                    .values()
                    .map(|p| p.until)
                    .chain(a.preparing.values().map(|p| p.until))
            }))
            .min();
        tokio::select! {
            cmd = rx.recv(), if !closing => match cmd {
                None => {
                    // The agent is going away: end every job, then stop.
                    closing = true;
                    for job in jobs.values_mut() {
                        job.ending = true;
                        job.next = None;
                        cancel(job, kill_grace, EndWhy::Cancelled);
                    }
                    if let Some(a) = ahead.as_mut() {
                        let taken: Vec<Prepared> =
                            a.preparing.drain().filter_map(|(_, p)| p.take()).collect();
                        for mut p in a.prepared.drain().map(|(_, p)| p).chain(taken) {
                            if p.alive() {
                                signal(p.pid, p.born, Signal::SIGKILL);
                            }
                        }
                    }
                }
                Some(NodeCmd::Start(s)) => {
                    let id = s.job;
                    if let Some(j) = jobs.get_mut(&id) {
                        // A start said twice (a message repeated on the
                        // way) is the job already running: a second
                        // process would write a second record. The
                        // controller hears of the one there is.
                        if j.start == s.start_ns {
                            debug!(job = id, node = %name, pid = j.pid, "start repeated: runs already");
                            if !j.ending {
                                let pid = j.pid as u32;
                                report(&ctx, FromAgent::Started { job: id, pid }).await;
                            }
                            continue;
                        }
                        if j.next.as_ref().is_some_and(|n| n.start_ns == s.start_ns)
                            || j.dropped == Some(s.start_ns)
                        {
                            debug!(job = id, node = %name, "start repeated: waits already, or dropped");
                            continue;
                        }
                        // Another start while its old process is still
                        // there (restarted after a lost node before that
                        // one was reaped): it waits until the old one is
                        // gone, as a held process's successor does, since
                        // both would use the job's one directory. One
                        // told to end already ends in its own time (its
                        // record is written); else it is killed now.
                        debug!(job = id, node = %name, pid = j.pid, "start waits for the old process");
                        j.next = Some(s);
                        j.next_end = None;
                        j.next_suspended = false;
                        j.stop_at = None;
                        if !j.ending {
                            j.ending = true;
                            j.kill_at = None;
                            kill_now(j);
                        }
                        continue;
                    }
                    // The job is stored before the report's await: a
                    // value alive across an await is part of the task's
                    // size, on every node, idle or not.
                    let started = Box::pin(begin(&ctx, &name, s, &mut ahead))
                        .await
                        .map(|(job, spawned)| keep(&mut jobs, &mut exits, id, job, exit_of(id, spawned)));
                    if let Some(pid) = started {
                        report(&ctx, FromAgent::Started { job: id, pid: pid as u32 }).await;
                    }
                }
                Some(NodeCmd::Prepare(s, until)) => {
                    let id = s.job;
                    if jobs.contains_key(&id) {
                        continue;
                    }
                    // Asked again for a later turn (the one before ended
                    // early): the same process waits for it.
                    let a = ahead.get_or_insert_with(Default::default);
                    if let Some(p) = a.prepared.get_mut(&id).filter(|p| p.start == s) {
                        p.until = p.until.max(until);
                        continue;
                    }
                    if let Some(p) = a.preparing.get_mut(&id).filter(|p| p.start == s) {
                        p.until = p.until.max(until);
                        continue;
                    }
                    if let Some(p) = a.take(id) {
                        Box::pin(p.kill()).await;
                    }
                    if let Some((pid, exit)) = a.dying.remove(&id) {
                        Box::pin(gone(pid, exit)).await;
                    }
                    // Asked of the spawner; the node goes on meanwhile. A
                    // process that cannot be prepared is started at the
                    // job's start, as any; so is a program (the controller
                    // never asks: its environment names its nodes).
                    if s.program.is_some() {
                        continue;
                    }
                    if let Ok((answer, _)) = queue_launch(&ctx, &s, true) {
                        a.preparing.insert(id, Preparing { start: s, until, answer });
                    }
                }
                Some(NodeCmd::Suspend(id)) => {
                    if let Some(job) = jobs.get_mut(&id) {
                        if job.next.is_some() {
                            job.next_suspended = true;
                        } else if !job.suspended {
                            suspend(job, ctx.settings.suspend_mode, suspend_grace);
                            debug!(job = id, node = %name, "suspended");
                        }
                    }
                }
                Some(NodeCmd::Resume(id)) => {
                    if let Some(job) = jobs.get_mut(&id) {
                        if job.next.is_some() {
                            job.next_suspended = false;
                        } else if job.suspended {
                            job.suspended = false;
                            job.stop_at = None;
                            signal(job.pid, job.born, Signal::SIGCONT);
                            debug!(job = id, node = %name, "resumed");
                        }
                    }
                }
                Some(NodeCmd::Cancel(id, why)) => {
                    if let Some(job) = jobs.get_mut(&id) {
                        if job.next.is_some() {
                            job.next_end = Some(why);
                            continue;
                        }
                        // Killed already (its pid may be another's soon).
                        if job.ending && job.kill_at.is_none() {
                            continue;
                        }
                        job.ending = true;
                        cancel(job, kill_grace, why);
                    }
                }
                Some(NodeCmd::Kill(id)) => {
                    if let Some(job) = jobs.get_mut(&id) {
                        // A start that waits is not made: what the
                        // controller hears is this process's end.
                        job.dropped = job.next.take().map(|n| n.start_ns);
                        if !std::mem::replace(&mut job.ending, true) || job.kill_at.is_some() {
                            job.kill_at = None;
                            job.killed = true;
                            kill_now(job);
                        }
                    }
                }
                Some(NodeCmd::Signal(id, sig, reach)) => {
                    // Not to a process set aside for a start that waits;
                    // nor kept for that start: sent as it begins, it would
                    // find no process of the program yet.
                    if let Some(job) = jobs.get(&id).filter(|j| j.program.is_some() && j.next.is_none()) {
                        signal_part(job.pid, job.born, sig, reach, job.program.as_deref());
                    }
                }
                Some(NodeCmd::Limit(id, walltime_ns)) => {
                    if let Some(s) = jobs.get_mut(&id).and_then(|j| j.next.as_mut()) {
                        // For the start that waits: made with it.
                        s.walltime_ns = walltime_ns;
                        continue;
                    }
                    if let Some(job) = jobs.get(&id) {
                        let sent = crate::spawn::while_unreaped(job.pid, job.born, || {
                            sigsleep::signals::send_limit(job.pid, walltime_ns)
                        });
                        if let Some(Err(e)) = sent {
                            warn!(job = id, "cannot send the new limit: {e}");
                        }
                    }
                }
            },
            (id, answer) = next_answer(&mut ahead),
                if ahead.as_ref().is_some_and(|a| !a.preparing.is_empty()) =>
            {
                let Some(a) = ahead.as_mut() else {
                    continue;
                };
                let Some(p) = a.preparing.remove(&id) else {
                    continue;
                };
                if let Ok(spawned) = answer {
                    debug!(job = id, node = %name, pid = spawned.pid, "prepared");
                    a.prepared.insert(id, Prepared {
                        pid: spawned.pid,
                        born: spawned.born,
                        start: p.start,
                        until: p.until,
                        exit: spawned.exit,
                    });
                }
            }
            Some((id, pid, exit)) = exits.next() => {
                if jobs.get(&id).is_none_or(|j| j.pid != pid) {
                    continue;
                }
                // Only the fields still needed: the whole job, alive
                // across the awaits below, would make every node's task
                // larger.
                let Some(Job { next, next_end, next_suspended, program, killed, log_from, .. }) = jobs.remove(&id) else {
                    continue;
                };
                if let Some(s) = next {
                    // Ended for a start that came meanwhile: the
                    // controller counts that one, not this end. What was
                    // asked of the job meanwhile is the new one's.
                    if let Some(dir) = program {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    let started = match Box::pin(begin(&ctx, &name, s, &mut ahead)).await {
                        Some((mut new, spawned)) => {
                            if let Some(why) = next_end {
                                new.ending = true;
                                cancel(&mut new, kill_grace, why);
                            } else if next_suspended {
                                suspend(&mut new, ctx.settings.suspend_mode, suspend_grace);
                            }
                            Some(keep(&mut jobs, &mut exits, id, new, exit_of(id, spawned)))
                        }
                        None => None,
                    };
                    if let Some(pid) = started {
                        report(&ctx, FromAgent::Started { job: id, pid: pid as u32 }).await;
                    }
                    continue;
                }
                // Killed: it ended on its own first if, and only if, its
                // record was written (a SIGKILL can land between the
                // record and the exit it would have said, either way).
                let record = killed.then(|| recorded(&ctx.log, log_from, id)).and_then(|r| {
                    // Unread, the process's own exit stands, as before
                    // this check.
                    r.inspect_err(|e| warn!(job = id, %e, "cannot read {}", ctx.log.display()))
                        .ok()
                });
                let exit = if let Some(dir) = program {
                    let (exit, steps) = program_ended(&dir, exit);
                    if !steps.is_empty() {
                        report(&ctx, FromAgent::Steps { job: id, steps }).await;
                    }
                    match record {
                        Some(None) => Exit::Signal(libc::SIGKILL),
                        _ => exit,
                    }
                } else {
                    match (record, exit) {
                        (Some(Some(status)), Exit::Signal(_)) => exit_of_record(status),
                        _ => exit,
                    }
                };
                debug!(job = id, node = %name, ?exit, "ended");
                report(&ctx, FromAgent::Ended { job: id, exit }).await;
            }
            () = timer(next_timer), if next_timer.is_some() => {
                let now = Instant::now();
                if let Some(a) = ahead.as_mut() {
                    a.expire(now);
                }
                for job in jobs.values_mut() {
                    if job.stop_at.is_some_and(|t| t <= now) {
                        job.stop_at = None;
                        signal(job.pid, job.born, Signal::SIGSTOP);
                    }
                    if job.kill_at.is_some_and(|t| t <= now) {
                        job.kill_at = None;
                        kill_now(job);
                    }
                }
            }
        }
        if ahead.as_ref().is_some_and(|a| a.is_empty()) {
            ahead = None;
        }
        if closing && jobs.is_empty() {
            return;
        }
    }
}

/// Kills `job`'s processes at once. A program's may have left its process
/// group (`setsid`, a daemon): they are sigsleep's descendants still (it
/// is their subreaper), so they are stopped, that none forks meanwhile,
/// then killed, before the group is, sigsleep with it.
fn kill_now(job: &Job) {
    crate::spawn::while_unreaped(job.pid, job.born, || {
        if job.program.is_some() {
            for sig in [libc::SIGSTOP, libc::SIGSTOP, libc::SIGKILL] {
                for p in sigsleep::tree::descendants_of(job.pid) {
                    // SAFETY: plain kill(2) of processes read from /proc
                    // just now, below a sigsleep not yet reaped, which
                    // reaps them: as in `signal_tree`.
                    unsafe { libc::kill(p, sig) };
                }
            }
        }
        killpg(Pid::from_raw(job.pid), Signal::SIGKILL)
    });
}

/// Suspends `job` as the agent's suspension mode says.
fn suspend(job: &mut Job, mode: SuspendMode, grace: Duration) {
    job.suspended = true;
    match mode {
        SuspendMode::Tstp => signal(job.pid, job.born, Signal::SIGTSTP),
        SuspendMode::Slurm => {
            signal(job.pid, job.born, Signal::SIGTSTP);
            job.stop_at = Some(Instant::now() + grace);
        }
        SuspendMode::Stop => signal(job.pid, job.born, Signal::SIGSTOP),
    }
}

/// `SIGTERM` to sigsleep alone (it records the job as cancelled and passes
/// the signal on to every process of a program, so that each hears it
/// once, as under Slurm: a script's trap runs once), queued with `why`
/// when the job ends for more than a cancel, then `SIGCONT` if it
/// is suspended so that it can act on it, and `SIGKILL` if it has not ended
/// after the grace period.
fn cancel(job: &mut Job, grace: Duration, why: EndWhy) {
    if job.kill_at.is_some() {
        return;
    }
    let sent = crate::spawn::while_unreaped(job.pid, job.born, || match why {
        EndWhy::Cancelled => {
            kill(Pid::from_raw(job.pid), Signal::SIGTERM).map_err(|e| e.to_string())
        }
        why => sigsleep::signals::send_end(job.pid, why).map_err(|e| e.to_string()),
    });
    if let Some(Err(e)) = sent {
        debug!(pid = job.pid, %e, "cancel not delivered");
    }
    if job.suspended {
        job.suspended = false;
        job.stop_at = None;
        signal(job.pid, job.born, Signal::SIGCONT);
    }
    job.kill_at = Some(Instant::now() + grace);
}

/// Starts job `s` on this node, with the process held for it if one was
/// prepared as the job is placed, else a new one: the job's entry and its
/// process, or `None` when it could not be started (the controller is
/// told it ended so).
async fn begin(
    ctx: &NodeContext,
    name: &str,
    s: Box<StartJob>,
    ahead: &mut Option<Box<Ahead>>,
) -> Option<(Job, crate::spawn::Spawned)> {
    let id = s.job;
    if let Some((pid, exit)) = ahead.as_mut().and_then(|a| a.dying.remove(&id)) {
        Box::pin(gone(pid, exit)).await;
    }
    let claimed = match ahead.as_mut().and_then(|a| a.take(id)) {
        Some(mut p) => {
            if s.claims(&p.start) && p.alive() {
                Some(p)
            } else {
                // Placed otherwise than foreseen (or gone).
                Box::pin(p.kill()).await;
                None
            }
        }
        None => None,
    };
    // Before the process can write its record.
    let log_from = std::fs::metadata(&ctx.log).map_or(0, |m| m.len());
    let job = |pid, born, program| Job {
        pid,
        born,
        start: s.start_ns,
        ending: false,
        next: None,
        next_end: None,
        next_suspended: false,
        dropped: None,
        suspended: false,
        stop_at: None,
        kill_at: None,
        program,
        killed: false,
        log_from,
    };
    if let Some(p) = claimed {
        let (pid, born) = (p.pid, p.born);
        // The start's instant rides on the signal: the job's run counts
        // from the controller's start.
        let from = if ctx.settings.run_from_launch {
            0
        } else {
            s.start_ns
        };
        let sent =
            crate::spawn::while_unreaped(pid, born, || sigsleep::signals::send_start(pid, from));
        if let Some(Err(e)) = sent {
            debug!(job = id, pid, %e, "start not delivered");
        }
        debug!(job = id, node = %name, pid, "started (prepared)");
        let spawned = crate::spawn::Spawned {
            pid,
            born,
            exit: p.exit,
        };
        return Some((job(pid, born, None), spawned));
    }
    // Boxed: held inline, its state would make every idle node's task
    // larger.
    match Box::pin(launch(ctx, &s, false)).await {
        Ok((spawned, program)) => {
            debug!(job = id, node = %name, pid = spawned.pid, "started");
            Some((job(spawned.pid, spawned.born, program), spawned))
        }
        Err(e) => {
            warn!(job = id, node = %name, %e, "cannot start {}", ctx.sigsleep.display());
            report(
                ctx,
                FromAgent::Ended {
                    job: id,
                    exit: Exit::SpawnFailed,
                },
            )
            .await;
            None
        }
    }
}

/// The status of job `id`'s record in the record file `log` past byte
/// `from`, if one was written there (the last, if several). Damaged
/// frames are skipped, as every reader of the file skips them.
fn recorded(log: &Path, from: u64, id: u64) -> std::io::Result<Option<formats::record::Status>> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(log)?;
    file.seek(SeekFrom::Start(from))?;
    let mut found = None;
    formats::record::RecordReader::new(std::io::BufReader::new(file)).for_each_record(
        |rec| -> std::io::Result<()> {
            if rec.id == id {
                found = Some(rec.status);
            }
            Ok(())
        },
    )?;
    Ok(found)
}

/// The exit sigsleep says for a sleep that ended with this record.
fn exit_of_record(status: formats::record::Status) -> Exit {
    use formats::record::Status;
    Exit::Code(match status {
        Status::Completed => 0,
        Status::Timeout => sigsleep::EXIT_TIMEOUT,
        Status::Cancelled => 128 + libc::SIGTERM,
        Status::Failed => sigsleep::EXIT_LOG,
    })
}

/// The exit of job `id`'s process `spawned`, as the node task awaits it.
/// Keeps a job just started, and the wait for its exit among those the
/// task awaits; its pid, to report.
fn keep<E>(
    jobs: &mut HashMap<u64, Job>,
    exits: &mut FuturesUnordered<E>,
    id: u64,
    job: Job,
    exit: E,
) -> i32 {
    let pid = job.pid;
    jobs.insert(id, job);
    exits.push(exit);
    pid
}

async fn exit_of(id: u64, spawned: crate::spawn::Spawned) -> (u64, i32, Exit) {
    // A dropped sender means the reaper lost the child: report it as killed.
    (
        id,
        spawned.pid,
        spawned.exit.await.unwrap_or(Exit::Signal(9)),
    )
}

/// Where the files of one launch of job `id`'s program are while it runs:
/// its script, and the line sigsleep leaves on how it ended; removed when
/// it ends. Under [`programs_root`], named by host, agent process, job and
/// launch (`HOST-PID-JOB-N`), so that no two agents share one, even where
/// hosts share the directory (a `TMPDIR` on a network file system, or
/// containers of one host sharing `/dev/shm`), and a job started again
/// on this agent while its last process is still being killed (requeued
/// from a failed node) never shares that process's files.
fn program_dir(id: u64) -> PathBuf {
    static LAUNCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    programs_root().join(format!("{}-{}-{id}-{n}", host_tag(), std::process::id()))
}

/// This host, as job directories name it: its name (hosts that share a
/// directory have names of their own, and a name outlives a restart, so
/// that what a killed agent left on a disk is swept after one); `none`
/// where it has none that fits a file name, and then nothing is swept.
fn host_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .filter(|h| !h.is_empty() && !h.contains('/') && h != "none")
            .unwrap_or_else(|| "none".into())
    })
}

/// Removes, once per process, the job files that agents killed before
/// they could clean up left under [`programs_root`]: those named by a
/// process that is gone. In memory (`/dev/shm`), they would otherwise
/// hold the host's memory until it reboots: 4 KiB a job, 72 MB once for
/// an agent killed with 18,000 jobs started. Runs on its own thread; the
/// number removed is logged.
pub fn sweep_left_behind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("clemu-sweep".into())
            .spawn(|| {
                let root = programs_root();
                let n = sweep_root(root, host_tag());
                if n > 0 {
                    tracing::info!(
                        dir = %root.display(),
                        jobs = n,
                        "removed the files of jobs left by agents no longer running"
                    );
                }
            });
    });
}

/// Whether process `pid` is gone: none has it, or the one that has it
/// has ended and waits to be reaped (a zombie, whose command line is
/// empty: a controller killed with its agents can stay one for seconds
/// when its parent is slow to reap).
fn agent_gone(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)
        || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
}

/// [`sweep_left_behind`] in `root`: removes each `HOST-PID-JOB-N` entry of
/// host `host` whose process is gone (in this process's view: an agent in
/// another pid namespace under the same host name, sharing the directory,
/// would look gone too, which is why such containers should not share
/// one). Returns how many.
fn sweep_root(root: &Path, host: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    if host == "none" {
        return 0;
    }
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let pid = name.to_str().and_then(|n| left_by(n, host));
            pid.is_some_and(agent_gone)
        })
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// The agent process that left job directory `name` on host `host`: the
/// name is `HOST-PID-JOB-N` (`HOST-PID-JOB` before launches were
/// numbered), read from the right, since a host name may hold dashes
/// (and `login` must not take `login-2`'s directories for its own).
fn left_by(name: &str, host: &str) -> Option<i32> {
    [4, 3].into_iter().find_map(|parts| {
        let mut p = name.rsplitn(parts, '-');
        let numbers: Vec<&str> = p.by_ref().take(parts - 1).collect();
        let ours = p.next() == Some(host)
            && numbers.len() == parts - 1
            && numbers.iter().all(|n| n.parse::<u64>().is_ok());
        numbers
            .last()
            .filter(|_| ours)
            .and_then(|pid| pid.parse::<i32>().ok())
            .filter(|&pid| pid > 0)
    })
}

/// `clemu-jobs-UID` in `TMPDIR` if it is set, else in `/dev/shm` if
/// programs may run there, else in `/tmp`; in either of the last two only
/// if that directory is this user's alone. Three files made and removed
/// per job are cheap in memory; on a disk's file system (ext4 looking for
/// an inode not recently freed) they cost a sixth of the host's
/// throughput of short jobs (BENCHMARKS.md, "Where a job's files go").
/// systemd-logind's `RemoveIPC` may empty a user's `/dev/shm` when they
/// log out: each job makes its directory again, and a running script is
/// already open.
fn programs_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        // SAFETY: getuid cannot fail.
        let name = format!("clemu-jobs-{}", unsafe { libc::getuid() });
        let tmpdir = std::env::var_os("TMPDIR").filter(|d| !d.is_empty());
        programs_root_among(tmpdir.map(PathBuf::from), Path::new("/dev/shm"), &name)
    })
}

/// [`programs_root`]'s choice, `shm` standing for `/dev/shm`.
fn programs_root_among(tmpdir: Option<PathBuf>, shm: &Path, name: &str) -> PathBuf {
    if let Some(d) = tmpdir {
        return d.join(name);
    }
    let runs_programs = nix::sys::statvfs::statvfs(shm).is_ok_and(|v| {
        use nix::sys::statvfs::FsFlags;
        !v.flags()
            .intersects(FsFlags::ST_NOEXEC | FsFlags::ST_RDONLY)
    });
    if runs_programs && ours_alone(&shm.join(name)) {
        return shm.join(name);
    }
    let tmp = Path::new("/tmp").join(name);
    // Not ours alone: each job's files fail to be written, and it fails,
    // rather than run a script someone else could have changed.
    let _ = ours_alone(&tmp);
    tmp
}

/// Makes `dir` (mode 0700) unless it is there, and whether it is this
/// user's alone: a directory, not a link, owned by this user, that no one
/// else may write to. In a directory others may write to, they could
/// replace a job's script before it runs.
fn ours_alone(dir: &Path) -> bool {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0)
}

/// Writes a job's script in `dir`, its launch's [`program_dir`], where
/// sigsleep will run it.
fn write_script(dir: &Path, script: &str) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let make = || std::fs::DirBuilder::new().mode(0o700).create(dir);
    match make() {
        // Left by an earlier agent that had this pid (and so was not
        // swept): nothing of its job may pass for this one's.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_dir_all(dir)?;
            make()?;
        }
        // The root itself is gone (emptied at a logout, say).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        other => other?,
    }
    let path = dir.join("slurm_script");
    // Executable by its owner from the start: no moment at which another
    // mode holds.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o700)
        .open(&path)?
        .write_all(script.as_bytes())?;
    Ok(path)
}

/// How a job's program ended, from the line sigsleep left in `dir`
/// (`exit` as its process ended, when there is none); its files are
/// removed.
fn program_ended(dir: &Path, exit: Exit) -> (Exit, Vec<StepInfo>) {
    let line = std::fs::read_to_string(dir.join("exit")).unwrap_or_default();
    let steps = steps_in(dir);
    let _ = std::fs::remove_dir_all(dir);
    (parse_exit_line(&line).map_or(exit, Exit::Ran), steps)
}

/// The steps srun left in a job's directory (`step-N`), by number; one
/// whose srun was killed before it wrote its line is left out.
fn steps_in(dir: &std::path::Path) -> Vec<StepInfo> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut steps: Vec<StepInfo> = entries
        .flatten()
        .filter_map(|e| {
            let n: u32 = e
                .file_name()
                .to_str()?
                .strip_prefix("step-")?
                .parse()
                .ok()?;
            StepInfo::parse(n, &std::fs::read_to_string(e.path()).ok()?)
        })
        .collect();
    steps.sort_by_key(|s| s.id);
    steps
}

/// `STATE CODE SIGNAL`, as sigsleep's `--exit-file` writes it.
fn parse_exit_line(line: &str) -> Option<formats::wire::Ran> {
    use formats::wire::{Ran, RanState};
    let mut f = line.split_whitespace();
    let state = match f.next()? {
        "completed" => RanState::Completed,
        "failed" => RanState::Failed,
        "cancelled" => RanState::Cancelled,
        "timeout" => RanState::Timeout,
        "out_of_memory" => RanState::OutOfMemory,
        _ => return None,
    };
    Some(Ran {
        state,
        code: f.next()?.parse().ok()?,
        signal: f.next()?.parse().ok()?,
    })
}

/// Starts job `s`'s process; `held`, ahead of the job's start. With the
/// directory of its program's files, if it runs one.
async fn launch(
    ctx: &NodeContext,
    s: &StartJob,
    held: bool,
) -> std::io::Result<(crate::spawn::Spawned, Option<PathBuf>)> {
    let (answer, dir) = queue_launch(ctx, s, held)?;
    match crate::spawn::answered(answer).await {
        Ok(spawned) => Ok((spawned, dir)),
        Err(e) => {
            if let Some(dir) = dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            Err(e)
        }
    }
}

/// Asks the spawner for job `s`'s process, without waiting for it; with
/// the directory of its program's files, if it runs one.
fn queue_launch(
    ctx: &NodeContext,
    s: &StartJob,
    held: bool,
) -> std::io::Result<(crate::spawn::Answer, Option<PathBuf>)> {
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    // An instant as sigsleep reads one: Unix seconds, to the nanosecond.
    let instant = |ns: i64| {
        format!(
            "{}.{:09}",
            ns.div_euclid(1_000_000_000),
            ns.rem_euclid(1_000_000_000)
        )
    };
    let mut args = vec![
        "--walltime".into(),
        secs(s.walltime_ns),
        "--id".into(),
        s.job.to_string(),
        "--cores".into(),
        s.cores.to_string(),
        "--submit".into(),
        instant(s.submit_ns),
        "--node".into(),
        s.node.clone(),
        "--log".into(),
        ctx.log.display().to_string(),
        "--die-with-parent".into(),
        std::process::id().to_string(),
        "--end-fd".into(),
        crate::spawn::END_FD.to_string(),
    ];
    if held {
        args.push("--held".into());
    } else if s.start_ns > 0 && !ctx.settings.run_from_launch {
        // Its run counts from the controller's start, its launch within it.
        args.extend(["--started".into(), instant(s.start_ns)]);
    }
    if ctx.settings.realtime {
        args.push("--realtime".into());
    }
    let mut env = Vec::new();
    if !s.devices.is_empty() {
        for part in device_args(&s.devices, DEVICES_ARG_MAX) {
            args.push("--devices".into());
            args.push(part.to_string());
        }
    }
    let dir = match &s.program {
        None => {
            args.extend(["--runtime".into(), secs(s.runtime_ns)]);
            None
        }
        Some(p) => {
            let dir = program_dir(s.job);
            let script = write_script(&dir, &p.script).inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&dir);
            })?;
            env.extend(p.env.iter().cloned());
            // The job's own directory, gone when it ends: srun counts the
            // job's steps there.
            env.push(("CLEMU_JOB_DIR".to_string(), dir.display().to_string()));
            args.extend(program_args(ctx, &dir, p));
            args.extend(["--".into(), script.display().to_string()]);
            args.extend(p.args.iter().cloned());
            Some(dir)
        }
    };
    if !s.devices.is_empty() {
        env.extend(visible_devices(&s.devices, &s.node));
    }
    // A held process waits behind every start decided now.
    let priority = if held {
        crate::spawn::Priority::Ahead
    } else {
        crate::spawn::Priority::Now
    };
    // A batch script's environment is the one its submission carries,
    // as Slurm's --export says: nothing of the agent's own.
    match ctx
        .launcher
        .queue(&ctx.sigsleep, &args, &env, s.program.is_some(), priority)
    {
        Ok(answer) => Ok((answer, dir)),
        Err(e) => {
            if let Some(dir) = dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            Err(e)
        }
    }
}

/// sigsleep's flags for running program `p` from `dir`, its launch's
/// [`program_dir`]: its directory,
/// its files (relative ones under its directory), `--signal`, and a kill
/// wait inside the agent's own cancel grace, so that sigsleep has ended
/// every process of the job before the agent's SIGKILL could cut it short.
fn program_args(ctx: &NodeContext, dir: &Path, p: &formats::wire::Program) -> Vec<String> {
    let under = |f: &str| {
        let path = std::path::Path::new(&p.workdir).join(f);
        path.display().to_string()
    };
    let secs = |ms: u64| format!("{}.{:03}", ms / 1000, ms % 1000);
    let mut args = vec![
        "--chdir".into(),
        p.workdir.clone(),
        "--stdout".into(),
        under(&p.stdout),
        "--exit-file".into(),
        dir.join("exit").display().to_string(),
        "--kill-wait".into(),
        secs(ctx.settings.kill_grace_ms / 2),
        "--suspend-grace".into(),
        secs(ctx.settings.suspend_grace_ms),
    ];
    if !p.stderr.is_empty() {
        args.extend(["--stderr".into(), under(&p.stderr)]);
    }
    if let Some(sig) = &p.signal {
        args.extend(["--signal".into(), sig.clone()]);
    }
    if p.mem_limit_mb > 0 {
        args.extend(["--mem-limit".into(), p.mem_limit_mb.to_string()]);
    }
    if p.open_append {
        args.push("--open-append".into());
    }
    args
}

/// The longest `--devices` argument given to a job. Linux refuses to start
/// a process with any one argument over 128 KiB (`MAX_ARG_STRLEN`), which
/// a job on some 7,000 GPU nodes would pass; sigsleep adds up repeated
/// `--devices`, so a long list goes as several.
const DEVICES_ARG_MAX: usize = 64 << 10;

/// `devices` (entries joined by `;`) cut between entries into parts of at
/// most `max` bytes each (an entry longer than that is a part of its own).
fn device_args(devices: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = devices.trim_matches(';');
    while rest.len() > max {
        // Cut at a ';', an ASCII byte, so always between characters.
        let b = rest.as_bytes();
        let cut = match b[..=max].iter().rposition(|&c| c == b';') {
            Some(i) if i > 0 => i,
            _ => b.iter().position(|&c| c == b';').unwrap_or(b.len()),
        };
        parts.push(&rest[..cut]);
        rest = rest[(cut + 1).min(rest.len())..].trim_start_matches(';');
    }
    if !rest.is_empty() {
        parts.push(rest);
    }
    parts
}

/// The variables through which a job learns which devices it holds on the
/// node it runs on (`devices`' entries for `node`): one per kind, the
/// numbers comma-separated, named as CUDA names its own. A text the
/// controller sent that does not parse gives none (the record still says
/// what it was given).
fn visible_devices(devices: &str, node: &str) -> Vec<(String, String)> {
    let list = formats::record::Devices::parse_list(devices).unwrap_or_default();
    list.iter()
        .filter(|d| d.node == node)
        .map(|d| {
            let ids: Vec<String> = d.ids.iter().map(u32::to_string).collect();
            (formats::wire::visible_devices_var(&d.kind), ids.join(","))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node `vn1` whose jobs run `job` (a shell script) in place of
    /// sigsleep, with what it reports; the directory holds its files.
    fn node_running(
        dir: &Path,
        job: &str,
    ) -> (
        NodeHandle,
        tokio::task::JoinHandle<()>,
        mpsc::Receiver<FromAgent>,
    ) {
        node_running_with(dir, job, 200)
    }

    /// [`node_running`] with its time from a cancel's `SIGTERM` to the
    /// `SIGKILL`.
    fn node_running_with(
        dir: &Path,
        job: &str,
        kill_grace_ms: u64,
    ) -> (
        NodeHandle,
        tokio::task::JoinHandle<()>,
        mpsc::Receiver<FromAgent>,
    ) {
        let (ctx, from_node) = context(dir, job, kill_grace_ms);
        let (node, task) = start("vn1".into(), ctx);
        (node, task, from_node)
    }

    /// What [`node_running_with`]'s node shares with its agent.
    fn context(
        dir: &Path,
        job: &str,
        kill_grace_ms: u64,
    ) -> (Arc<NodeContext>, mpsc::Receiver<FromAgent>) {
        let path = dir.join("job");
        std::fs::write(&path, job).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let (events, from_node) = mpsc::channel(16);
        let ctx = Arc::new(NodeContext {
            launcher: Launcher::global().unwrap(),
            sigsleep: path,
            log: dir.join("rec"),
            settings: RunSettings {
                heartbeat_ms: 1000,
                suspend_mode: SuspendMode::Tstp,
                suspend_grace_ms: 0,
                kill_grace_ms,
                stream_records: false,
                fence_ms: 0,
                mark: Default::default(),
                realtime: false,
                run_from_launch: false,
            },
            events,
        });
        (ctx, from_node)
    }

    /// Bytes, in a debug build: 608 when this was written, 992 before the
    /// job and the event were no longer held across awaits.
    const MAX_NODE_TASK: usize = 640;

    /// Every node's task is this future, idle or not, so what it holds
    /// across its awaits is paid once per node: the controller's memory
    /// per idle node (BENCHMARKS.md, "Slurm's commands on clemu") grew by
    /// a quarter when a job and a reported event were held so.
    #[test]
    fn a_node_task_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, _events) = context(dir.path(), "#!/bin/sh\n", 200);
        let task = run("vn1".into(), Arc::new(Mailbox::default()), ctx);
        let size = std::mem::size_of_val(&task);
        assert!(
            size <= MAX_NODE_TASK,
            "a node's task is {size} bytes, more than {MAX_NODE_TASK}: box what is held across an await"
        );
    }

    /// Job 7 on `vn1`, on `cores` cores.
    fn job7(cores: u32) -> StartJob {
        StartJob {
            job: 7,
            node: "vn1".into(),
            cores,
            runtime_ns: 1_000_000_000,
            walltime_ns: 0,
            submit_ns: 0,
            start_ns: 0,
            devices: String::new(),
            program: None,
        }
    }

    /// The lines of `path` once it has `n` of them (or `secs` have passed).
    async fn lines(path: &Path, n: usize, secs: u64) -> Vec<String> {
        until(path, secs, |l| l.len() >= n).await
    }

    /// Regression (chaos seed 2026, round 15): a process started ahead of
    /// its job, then placed otherwise, was killed and its successor
    /// started at once, so that for an instant the job had two processes.
    /// The instant is short on an idle host (the kill lands before the
    /// successor runs); under load it was long enough to be seen.
    #[tokio::test]
    async fn a_held_process_placed_otherwise_is_gone_before_its_successor_starts() {
        let dir = tempfile::tempdir().unwrap();
        let starts = dir.path().join("starts");
        // Says which process it is, and whether the first one started for
        // the job is still there, then waits as a job would.
        let job = format!(
            "#!/bin/sh\nf={s}\nfirst=$(head -n1 $f 2>/dev/null)\necho $$ >> $f\n\
             [ -n \"$first\" ] && [ -e /proc/$first ] && echo overlap $first >> $f\n\
             exec sleep 30\n",
            s = starts.display()
        );
        let (node, task, mut from_node) = node_running(dir.path(), &job);
        node.send(NodeCmd::Prepare(
            Box::new(job7(4)),
            Instant::now() + Duration::from_secs(30),
        ));
        let held = lines(&starts, 1, 10).await;
        assert_eq!(held.len(), 1, "the held process never ran");
        // Placed on 8 cores, not the 4 foreseen: the held one goes.
        node.send(NodeCmd::Start(Box::new(job7(8))));
        let Some(FromAgent::Started { job: 7, pid }) = from_node.recv().await else {
            panic!("no start reported");
        };
        let seen = lines(&starts, 2, 10).await;
        assert_eq!(seen, [held[0].clone(), pid.to_string()]);
        drop(node);
        task.await.unwrap();
    }

    /// The lines of `path` once `done` holds for them (or `secs` have
    /// passed).
    async fn until(path: &Path, secs: u64, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<String> = text.lines().map(String::from).collect();
            if done(&lines) || std::time::Instant::now() > deadline {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The pid of the next start of job 7 the node reports.
    async fn started(rx: &mut mpsc::Receiver<FromAgent>) -> u32 {
        loop {
            match rx.recv().await {
                Some(FromAgent::Started { job: 7, pid }) => return pid,
                Some(_) => continue,
                None => panic!("no start reported"),
            }
        }
    }

    /// A start said twice runs one process, and both are answered with it;
    /// another start of the job (after a kill, or without one) runs once
    /// the process before it is gone.
    #[tokio::test]
    async fn a_start_said_twice_runs_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let starts = dir.path().join("starts");
        // Says which process it is, and whether the one before it is
        // still there, then waits as a job would.
        let job = format!(
            "#!/bin/sh\nf={s}\nlast=$(tail -n1 $f 2>/dev/null)\necho $$ >> $f\n\
             [ -n \"$last\" ] && [ -e /proc/$last ] && echo overlap $last >> $f\n\
             exec sleep 30\n",
            s = starts.display()
        );
        let (node, task, mut from_node) = node_running(dir.path(), &job);
        node.send(NodeCmd::Start(Box::new(job7(4))));
        node.send(NodeCmd::Start(Box::new(job7(4))));
        let first = started(&mut from_node).await;
        assert_eq!(started(&mut from_node).await, first);
        let said = |pid: u32, lines: &[String]| lines.iter().any(|l| *l == pid.to_string());
        assert!(said(first, &until(&starts, 30, |l| said(first, l)).await));
        // A second process, started with the first, would have said so
        // by now.
        assert_eq!(lines(&starts, 2, 2).await, [first.to_string()]);
        // Killed, then started anew (a requeue after a lost node can come
        // before the old process is reaped): a start, not a repeat.
        node.send(NodeCmd::Kill(7));
        node.send(NodeCmd::Start(Box::new(StartJob {
            start_ns: 5,
            ..job7(4)
        })));
        let second = started(&mut from_node).await;
        assert_ne!(second, first);
        // Another start with no kill before it: the node ends the old
        // process first.
        node.send(NodeCmd::Start(Box::new(StartJob {
            start_ns: 9,
            ..job7(4)
        })));
        let third = started(&mut from_node).await;
        assert_ne!(third, second);
        // The second may have been killed before it said so; no process
        // ever saw the one before it still there.
        let seen = until(&starts, 30, |l| said(third, l)).await;
        assert!(said(third, &seen), "{seen:?}");
        assert!(seen.iter().all(|l| !l.starts_with("overlap")), "{seen:?}");
        assert_eq!(seen.first(), Some(&first.to_string()), "{seen:?}");
        drop(node);
        task.await.unwrap();
    }

    /// Regression (a fresh-clone CI run, `runworkload`'s failure test: 101
    /// records for 100 jobs): a job killed for a failed node just after
    /// its sigsleep wrote its record, and before it said its exit, was
    /// reported killed, so the controller ran it again and a second record
    /// followed the first. A killed job's end is now what its record says:
    /// over, if it wrote one; lost, if not.
    #[tokio::test]
    async fn a_killed_job_that_wrote_its_record_ended_on_its_own() {
        use crate::records::frame_of_test_record;
        for writes in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let frame = dir.path().join("frame");
            std::fs::write(&frame, frame_of_test_record(7)).unwrap();
            // An earlier run's record of the job, there before this start:
            // not this run's.
            std::fs::write(dir.path().join("rec"), frame_of_test_record(7)).unwrap();
            let marker = dir.path().join("written");
            // As sigsleep between its record and its exit: the record
            // appended (or not), the process still there.
            let job = format!(
                "#!/bin/sh\n{append}echo x > {m}\nexec sleep 30\n",
                append = if writes {
                    format!(
                        "cat {} >> {}\n",
                        frame.display(),
                        dir.path().join("rec").display()
                    )
                } else {
                    String::new()
                },
                m = marker.display()
            );
            let (node, task, mut from_node) = node_running(dir.path(), &job);
            node.send(NodeCmd::Start(Box::new(job7(4))));
            started(&mut from_node).await;
            assert_eq!(lines(&marker, 1, 30).await, ["x"], "the job never ran");
            node.send(NodeCmd::Kill(7));
            let exit = loop {
                match from_node.recv().await {
                    Some(FromAgent::Ended { job: 7, exit }) => break exit,
                    Some(_) => continue,
                    None => panic!("no end reported"),
                }
            };
            let want = if writes {
                Exit::Code(0)
            } else {
                Exit::Signal(libc::SIGKILL)
            };
            assert_eq!(exit, want, "record written: {writes}");
            drop(node);
            task.await.unwrap();
        }
    }

    /// A cancel that comes while a start waits for the process before it
    /// to be gone: that start is made and ended at once, so that the end
    /// the controller hears (and, with sigsleep, the record) is its own,
    /// not the killed process's.
    #[tokio::test]
    async fn a_cancel_while_a_start_waits_ends_that_start() {
        let dir = tempfile::tempdir().unwrap();
        // Lets in the SIGTERM a job starts with blocked, as sigsleep does,
        // and ends by it; a SIGKILL would be the grace's end.
        let job = "#!/usr/bin/env python3\nimport signal, time\n\
                   signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])\n\
                   time.sleep(30)\n";
        let (node, task, mut from_node) = node_running_with(dir.path(), job, 30_000);
        node.send(NodeCmd::Start(Box::new(job7(4))));
        let first = started(&mut from_node).await;
        let again = || {
            NodeCmd::Start(Box::new(StartJob {
                start_ns: 5,
                ..job7(4)
            }))
        };
        node.send(again());
        node.send(NodeCmd::Cancel(7, EndWhy::Cancelled));
        // The waiting start said again (a message repeated on the way)
        // is the same start: still cancelled.
        node.send(again());
        let within = Duration::from_secs(10);
        let second = tokio::time::timeout(within, started(&mut from_node))
            .await
            .expect("the waiting start was never made");
        assert_ne!(second, first);
        let end = tokio::time::timeout(within, async {
            loop {
                match from_node.recv().await {
                    Some(FromAgent::Ended { job: 7, exit }) => return exit,
                    Some(_) => continue,
                    None => panic!("no end reported"),
                }
            }
        })
        .await
        .expect("no end reported");
        // Its SIGTERM, not the SIGKILL of the one before.
        assert_eq!(end, Exit::Signal(libc::SIGTERM));
        drop(node);
        task.await.unwrap();
    }

    /// A job suspended, then started anew while its old process is still
    /// there: the new start runs (the suspension was the old one's), and a
    /// suspension asked while it waits is its own.
    #[tokio::test]
    async fn a_start_that_waits_takes_only_what_was_asked_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        // Lets in the SIGTSTP a job starts with blocked, as sigsleep does
        // (one sent before stops it there), then says so.
        let job = format!(
            "#!/usr/bin/env python3\nimport os, signal, time\n\
             signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTSTP])\n\
             open('{r}', 'a').write(str(os.getpid()) + '\\n')\n\
             time.sleep(30)\n",
            r = ready.display()
        );
        let (node, task, mut from_node) = node_running(dir.path(), &job);
        let has = |pid: u32| move |l: &[String]| l.iter().any(|x| *x == pid.to_string());
        let state = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()?
                        .split_whitespace()
                        .next()
                        .map(String::from)
                })
        };
        node.send(NodeCmd::Start(Box::new(job7(4))));
        let first = started(&mut from_node).await;
        node.send(NodeCmd::Suspend(7));
        node.send(NodeCmd::Start(Box::new(StartJob {
            start_ns: 5,
            ..job7(4)
        })));
        let second = started(&mut from_node).await;
        assert_ne!(second, first);
        assert!(has(second)(&until(&ready, 30, has(second)).await));
        assert_ne!(state(second).as_deref(), Some("T"), "the new start runs");
        // Suspended while its start waits: it starts suspended.
        node.send(NodeCmd::Start(Box::new(StartJob {
            start_ns: 9,
            ..job7(4)
        })));
        node.send(NodeCmd::Suspend(7));
        let third = started(&mut from_node).await;
        assert_ne!(third, second);
        // Stopped as it lets the signal in, before it can say it is ready.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while state(third).as_deref() != Some("T") && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            state(third).as_deref(),
            Some("T"),
            "the suspension asked after it"
        );
        drop(node);
        task.await.unwrap();
    }

    #[test]
    fn a_long_device_list_is_cut_between_entries() {
        let list = "vn1:gpu=0,1;vn2:gpu=0,1;vn3:gpu=0,1";
        assert_eq!(device_args(list, 100), [list]);
        // 11 bytes an entry: two fit in 24, the third goes alone.
        assert_eq!(
            device_args(list, 24),
            ["vn1:gpu=0,1;vn2:gpu=0,1", "vn3:gpu=0,1"]
        );
        assert_eq!(
            device_args(list, 11),
            ["vn1:gpu=0,1", "vn2:gpu=0,1", "vn3:gpu=0,1"]
        );
        // An entry longer than the bound is a part of its own.
        assert_eq!(
            device_args(list, 5),
            ["vn1:gpu=0,1", "vn2:gpu=0,1", "vn3:gpu=0,1"]
        );
        assert_eq!(device_args(";;vn1:gpu=0;", 3), ["vn1:gpu=0"]);
        // Put back together, the parts are the list.
        let long: Vec<String> = (0..9000).map(|i| format!("vn{i:04}:gpu=0,1,2,3")).collect();
        let long = long.join(";");
        let parts = device_args(&long, DEVICES_ARG_MAX);
        assert!(parts.len() > 1 && parts.iter().all(|p| p.len() <= DEVICES_ARG_MAX));
        assert_eq!(parts.join(";"), long);
    }

    #[test]
    fn job_files_go_to_tmpdir_if_set_else_to_memory_where_programs_run() {
        let shm = tempfile::tempdir().unwrap();
        let given = Some(PathBuf::from("/scratch"));
        assert_eq!(
            programs_root_among(given, shm.path(), "clemu-jobs-7"),
            Path::new("/scratch/clemu-jobs-7")
        );
        assert_eq!(
            programs_root_among(None, shm.path(), "clemu-jobs-7"),
            shm.path().join("clemu-jobs-7")
        );
        assert!(shm.path().join("clemu-jobs-7").is_dir());
        assert_eq!(
            programs_root_among(None, Path::new("/nonexistent"), "clemu-jobs-7"),
            Path::new("/tmp/clemu-jobs-7")
        );
        // One others may write to is not taken.
        use std::os::unix::fs::PermissionsExt;
        let open = shm.path().join("clemu-jobs-8");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(
            programs_root_among(None, shm.path(), "clemu-jobs-8"),
            Path::new("/tmp/clemu-jobs-8")
        );
        let _ = std::fs::remove_dir(Path::new("/tmp/clemu-jobs-8"));
        let _ = std::fs::remove_dir(Path::new("/tmp/clemu-jobs-7"));
    }

    #[test]
    fn files_of_jobs_whose_agent_is_gone_are_swept_and_no_others() {
        let root = tempfile::tempdir().unwrap();
        // No process has the pid `pid_max`: pids stay below it. (A child
        // spawned and reaped here could be reaped by the spawner tests'
        // reaper first.)
        let gone_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let ours = std::process::id();
        let dirs = [
            // Named before launches were numbered, and after.
            format!("0123456789ab-{gone_pid}-1"),
            format!("0123456789ab-{gone_pid}-20-7"),
            format!("host-a-{gone_pid}-6-0"),
            format!("0123456789ab-{ours}-3-0"),
            // Another host's, sharing the directory: its agents are not
            // this host's processes; nor are those of a host whose name
            // begins with this one's.
            format!("ba9876543210-{gone_pid}-5-1"),
            format!("0123456789ab-{gone_pid}-{gone_pid}-9-0"),
            "0123456789ab-not-a-pid".to_string(),
            "0123456789ab-0-4-0".to_string(),
        ];
        for d in &dirs {
            std::fs::create_dir(root.path().join(d)).unwrap();
            std::fs::write(root.path().join(d).join("slurm_script"), "true").unwrap();
        }
        assert_eq!(sweep_root(root.path(), "none"), 0);
        assert_eq!(sweep_root(root.path(), "host-a"), 1);
        assert_eq!(sweep_root(root.path(), "0123456789ab"), 2);
        let mut left: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut kept = dirs[3..].to_vec();
        kept.sort();
        assert_eq!(left, kept);
        assert_eq!(
            sweep_root(&root.path().join("nonexistent"), "0123456789ab"),
            0
        );
    }

    #[test]
    fn a_job_directory_left_by_an_earlier_agent_of_this_pid_is_emptied() {
        let id = u64::MAX - 17;
        let dir = program_dir(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("exit"), "exited 3\n").unwrap();
        let script = write_script(&dir, "#!/bin/sh\ntrue\n").unwrap();
        assert_eq!(script, dir.join("slurm_script"));
        assert!(!dir.join("exit").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A job started again while its last process is still being killed
    /// (requeued from a failed node onto another node of this agent) has
    /// files of its own: the old process's end neither reads the new
    /// one's line nor removes its files.
    #[test]
    fn a_job_started_again_never_shares_its_last_launch_files() {
        let id = u64::MAX - 18;
        let (old, new) = (program_dir(id), program_dir(id));
        assert_ne!(old, new);
        write_script(&old, "#!/bin/sh\ntrue\n").unwrap();
        let script = write_script(&new, "#!/bin/sh\nfalse\n").unwrap();
        std::fs::write(new.join("exit"), "failed 1 0\n").unwrap();
        let (exit, _) = program_ended(&old, Exit::Code(0));
        assert_eq!(exit, Exit::Code(0));
        assert!(!old.exists());
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "#!/bin/sh\nfalse\n"
        );
        assert!(new.join("exit").exists());
        std::fs::remove_dir_all(&new).unwrap();
    }
}
