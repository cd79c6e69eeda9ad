//! Copies of the primary's state on its backups.
//!
//! A backup controller connects to the primary as a [`Role::Peer`]
//! (authenticated like any peer) and says which entry of the journal it
//! holds last. The primary answers with its whole state at its current
//! sequence number ([`FromPrimary::Snapshot`], then the jobs in parts and
//! its record file), then streams every journal frame it writes, byte for
//! byte, and every record it keeps. The backup appends the frames to its
//! own journal (the same numbers), replays them through the core's own
//! transitions on its copy of the tables, and confirms the last sequence
//! number it holds ([`FromBackup::Ack`]).
//!
//! The primary holds back its answers to clients and its orders to agents
//! until every backup has confirmed the entries they depend on
//! ([`Backups::release`]): an acknowledged submission, and a start an
//! agent carries out, are on the backup before anyone acts on them. A
//! backup that stops confirming for longer than the timeout is let go
//! (the primary goes on alone) and must fetch the whole state again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use formats::wire::{self, BackupLag, ClusterId, Conn, Response, Role, ToAgent, WireError};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::core::AgentId;
use crate::journal::{Head, JobImage};

/// Jobs per part of a snapshot.
const JOBS_PER_PART: usize = 4096;
/// How long a backup that lost its primary waits before trying again.
const RETRY: Duration = Duration::from_millis(200);

/// What the primary sends a backup.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromPrimary {
    /// The primary's state after entry `seq`; `jobs` job images follow in
    /// [`FromPrimary::Jobs`] parts.
    Snapshot {
        seq: u64,
        term: u64,
        cluster: ClusterId,
        jobs: u64,
        head: Head,
    },
    Jobs(Vec<JobImage>),
    /// Record frames: the primary's record file as it stood at the
    /// snapshot, then every record it keeps after it.
    Records(Vec<u8>),
    /// The record file as it stood at the snapshot is all sent: from now
    /// on the backup holds the whole state, and confirms entries.
    RecordFileEnd,
    /// Journal frames as the primary wrote them, following the snapshot.
    Entries(Vec<u8>),
    /// The primary is alive (every heartbeat period).
    Ping,
    /// The cluster stops: the backup stops too, rather than take over.
    Shutdown,
}

/// What a backup sends its primary.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromBackup {
    /// First message: who it is, and the term of the state it holds and
    /// of which cluster (a primary of an earlier term of the same cluster
    /// steps down).
    Hello {
        address: String,
        held: u64,
        cluster: ClusterId,
    },
    /// It holds every entry up to this one.
    Ack(u64),
}

/// What a controller's connections and its follower task read of its
/// place, which the server alone writes.
#[derive(Default)]
pub struct Status {
    /// It is the primary, or the only controller.
    pub leads: std::sync::atomic::AtomicBool,
    /// The term of the state it holds, and the cluster's identity (0:
    /// none yet).
    pub held: AtomicU64,
    pub cluster: AtomicU64,
}

pub type BackupId = u64;
static NEXT_BACKUP: AtomicU64 = AtomicU64::new(1);

pub fn next_id() -> BackupId {
    NEXT_BACKUP.fetch_add(1, Ordering::Relaxed)
}

struct Attached {
    address: String,
    link: mpsc::UnboundedSender<FromPrimary>,
    /// When it attached: a copy that never completes is let go.
    since: Instant,
    /// Last entry it confirmed; `None` while it copies the whole state (it
    /// holds nothing back meanwhile, and cannot take over).
    acked: Option<u64>,
}

type Orders = Vec<(AgentId, ToAgent)>;
type Replies = Vec<(oneshot::Sender<Response>, Response)>;

/// Orders and answers waiting for the backups to hold entry `seq`.
struct Waiting {
    seq: u64,
    since: Instant,
    orders: Orders,
    replies: Replies,
}

/// The primary's backups, and what waits for them. Owned by the server.
#[derive(Default)]
pub struct Backups {
    attached: HashMap<BackupId, Attached>,
    waiting: VecDeque<Waiting>,
    /// The last entry acted on while no backup held everything: a backup
    /// holds everything only once it has confirmed it.
    alone_upto: u64,
}

impl Backups {
    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    pub fn attach(
        &mut self,
        id: BackupId,
        address: String,
        link: mpsc::UnboundedSender<FromPrimary>,
        seq: u64,
    ) {
        info!(backup = %address, seq, "backup attached: copying the state to it");
        self.attached.insert(
            id,
            Attached {
                address,
                link,
                acked: None,
                since: Instant::now(),
            },
        );
    }

    /// Sends a message to every backup.
    pub fn send(&self, msg: impl Fn() -> FromPrimary) {
        for b in self.attached.values() {
            let _ = b.link.send(msg());
        }
    }

    pub fn acked(&mut self, id: BackupId, seq: u64) {
        if let Some(b) = self.attached.get_mut(&id) {
            if b.acked.is_none() {
                info!(backup = %b.address, seq, "backup holds the whole state");
            }
            b.acked = Some(b.acked.map_or(seq, |a| a.max(seq)));
        }
    }

    /// Lets a backup go (it left, or it lags past the timeout).
    pub fn detach(&mut self, id: BackupId, why: &str) {
        if let Some(b) = self.attached.remove(&id) {
            warn!(backup = %b.address, why, "backup detached: the primary goes on alone");
        }
    }

    /// The last entry every backup holds (`u64::MAX` without backups).
    fn held_by_all(&self) -> u64 {
        self.attached
            .values()
            .filter_map(|b| b.acked)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Notes that what depends on entries up to `seq` goes out now: while
    /// no backup holds everything, that is acting alone.
    fn acted(&mut self, seq: u64) {
        if !self.confirming() {
            self.alone_upto = self.alone_upto.max(seq);
        }
    }

    /// Orders and answers that depend on entries up to `seq`: handed back
    /// at once if every backup holds them, nothing waits before them and
    /// the agents back this primary (`backed`), else kept until
    /// [`Backups::ready`] gives them back.
    pub fn release(
        &mut self,
        seq: u64,
        orders: Orders,
        replies: Replies,
        backed: bool,
    ) -> Option<(Orders, Replies)> {
        if backed && self.waiting.is_empty() && seq <= self.held_by_all() {
            self.acted(seq);
            return Some((orders, replies));
        }
        if !orders.is_empty() || !replies.is_empty() {
            self.waiting.push_back(Waiting {
                seq,
                since: Instant::now(),
                orders,
                replies,
            });
        }
        None
    }

    /// Lets go the backups that kept something waiting past `timeout`, or
    /// that have not finished copying the state in `copy_timeout`.
    pub fn let_go_late(&mut self, timeout: Duration, copy_timeout: Duration) {
        let first = self
            .waiting
            .front()
            .filter(|w| w.since.elapsed() > timeout)
            .map(|w| w.seq);
        let late: Vec<(BackupId, &'static str)> = self
            .attached
            .iter()
            .filter_map(|(id, b)| match b.acked {
                Some(a) if first.is_some_and(|f| a < f) => {
                    Some((*id, "it did not confirm the journal in time"))
                }
                None if b.since.elapsed() > copy_timeout => {
                    Some((*id, "it did not finish copying the state in time"))
                }
                _ => None,
            })
            .collect();
        for (id, why) in late {
            self.detach(id, why);
        }
    }

    /// What waited and may go now, in order: what every backup holds, once
    /// the agents back this primary (`backed`).
    pub fn ready(&mut self, backed: bool) -> (Orders, Replies) {
        let held = self.held_by_all();
        let (mut orders, mut replies) = (Vec::new(), Vec::new());
        if !backed {
            return (orders, replies);
        }
        while self.waiting.front().is_some_and(|w| w.seq <= held) {
            if let Some(w) = self.waiting.pop_front() {
                self.acted(w.seq);
                orders.extend(w.orders);
                replies.extend(w.replies);
            }
        }
        (orders, replies)
    }

    /// Whether a backup holds everything acted on: it has confirmed the
    /// whole state, and every entry acted on while none did.
    pub fn confirming(&self) -> bool {
        self.attached
            .values()
            .any(|b| b.acked.is_some_and(|a| a >= self.alone_upto))
    }

    /// What waits, never to be sent: the answers, to say so.
    pub fn abandon(self) -> Replies {
        self.waiting.into_iter().flat_map(|w| w.replies).collect()
    }

    /// Each backup's lag behind entry `seq`.
    pub fn lags(&self, seq: u64) -> Vec<BackupLag> {
        let mut lags: Vec<BackupLag> = self
            .attached
            .values()
            .map(|b| {
                let acked = b.acked.unwrap_or(0);
                BackupLag {
                    address: b.address.clone(),
                    copying: b.acked.is_none(),
                    acked,
                    lag_entries: seq.saturating_sub(acked),
                    lag_ns: self
                        .waiting
                        .iter()
                        .find(|w| w.seq > acked)
                        .map_or(0, |w| w.since.elapsed().as_nanos() as u64),
                }
            })
            .collect();
        lags.sort_by(|a, b| a.address.cmp(&b.address));
        lags
    }
}

/// The whole state at entry `seq`, as messages for a new backup.
pub fn snapshot(
    seq: u64,
    term: u64,
    cluster: ClusterId,
    head: Head,
    jobs: impl ExactSizeIterator<Item = JobImage>,
    link: &mpsc::UnboundedSender<FromPrimary>,
) {
    let _ = link.send(FromPrimary::Snapshot {
        seq,
        term,
        cluster,
        jobs: jobs.len() as u64,
        head,
    });
    let mut part = Vec::with_capacity(JOBS_PER_PART);
    for job in jobs {
        part.push(job);
        if part.len() == JOBS_PER_PART {
            let _ = link.send(FromPrimary::Jobs(std::mem::take(&mut part)));
        }
    }
    if !part.is_empty() {
        let _ = link.send(FromPrimary::Jobs(part));
    }
}

/// What a backup's follower tells its server, as the server's own event
/// (`E: From<Following>`): the server is built on this module, not this
/// module on it.
pub enum Following {
    /// A controller that leads sent its state: `link` carries
    /// confirmations to it.
    Leads {
        address: String,
        /// Its term, and its cluster.
        term: u64,
        cluster: ClusterId,
        link: mpsc::UnboundedSender<FromBackup>,
    },
    /// The primary followed is gone.
    Lost,
    /// What the primary sent.
    Copy(FromPrimary),
}

/// A backup's side: follows whichever of the other controllers leads
/// (each is tried in turn; one that does not lead lets go at once),
/// passing what it sends to the server as [`Following::Copy`], until
/// `done`.
pub async fn follow<E: From<Following> + Send>(
    others: Vec<String>,
    me: String,
    secret: Vec<u8>,
    events: mpsc::Sender<E>,
    status: std::sync::Arc<Status>,
    done: CancellationToken,
) {
    let mut said = false;
    for primary in others.iter().cycle() {
        if status.leads.load(Ordering::Relaxed) {
            // A primary follows nobody (one of a later term finds it).
            tokio::select! {
                () = tokio::time::sleep(RETRY) => continue,
                () = done.cancelled() => return,
            }
        }
        let held = status.held.load(Ordering::Relaxed);
        let cluster = ClusterId(status.cluster.load(Ordering::Relaxed));
        let (why, followed) = tokio::select! {
            r = follow_once(primary, &me, (held, cluster), &secret, &events) => r,
            () = done.cancelled() => return,
        };
        if followed {
            warn!(%primary, "lost the primary: {why}");
            said = false;
        } else if !said {
            info!(%primary, "not following {primary}: {why}; trying the others");
            said = true;
        }
        if followed {
            let _ = events.send(Following::Lost.into()).await;
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = done.cancelled() => return,
        }
    }
}

/// Follows `primary` while it leads: why it ended, and whether it led
/// (sent its state) at all.
async fn follow_once<E: From<Following>>(
    primary: &str,
    me: &str,
    (held, cluster): (u64, ClusterId),
    secret: &[u8],
    events: &mpsc::Sender<E>,
) -> (String, bool) {
    let stream = match tokio::time::timeout(RETRY * 10, TcpStream::connect(primary)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return (format!("cannot connect: {e}"), false),
        Err(_) => return ("cannot connect: no answer".into(), false),
    };
    let _ = stream.set_nodelay(true);
    let mut conn = Conn::new(stream);
    if let Err(e) = wire::connect(&mut conn, secret, Role::Peer).await {
        return (e.to_string(), false);
    }
    let hello = FromBackup::Hello {
        address: me.to_string(),
        held,
        cluster,
    };
    if let Err(e) = conn.send(&hello).await {
        return (e.to_string(), false);
    }
    // A controller that leads answers with its state; one that does not
    // closes the connection.
    let first =
        match tokio::time::timeout(wire::HANDSHAKE_TIMEOUT, conn.recv::<FromPrimary>()).await {
            Ok(Ok(msg @ FromPrimary::Snapshot { .. })) => msg,
            Ok(Ok(other)) => return (format!("it began with {other:?}"), false),
            Ok(Err(WireError::Closed)) => return ("it does not lead".into(), false),
            Ok(Err(e)) => return (e.to_string(), false),
            Err(_) => return ("no answer".into(), false),
        };
    let (term, cluster) = match &first {
        FromPrimary::Snapshot { term, cluster, .. } => (*term, *cluster),
        _ => (0, ClusterId::default()),
    };
    let (link, mut to_primary) = mpsc::unbounded_channel();
    let up = Following::Leads {
        address: primary.to_string(),
        term,
        cluster,
        link,
    };
    if events.send(up.into()).await.is_err()
        || events.send(Following::Copy(first).into()).await.is_err()
    {
        return ("the controller stopped".into(), true);
    }
    info!(%primary, "following the primary");
    loop {
        tokio::select! {
            msg = conn.recv::<FromPrimary>() => match msg {
                Ok(msg) => {
                    if events.send(Following::Copy(msg).into()).await.is_err() {
                        return ("the controller stopped".into(), true);
                    }
                }
                Err(WireError::Closed) => return ("the primary closed the connection".into(), true),
                Err(e) => return (e.to_string(), true),
            },
            out = to_primary.recv() => match out {
                Some(msg) => {
                    if let Err(e) = conn.send(&msg).await {
                        return (e.to_string(), true);
                    }
                }
                None => return ("this controller let the link go".into(), true),
            },
        }
    }
}
