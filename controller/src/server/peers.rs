//! The server's side of replication: on the primary, backups that attach,
//! confirm and leave; on a backup, the copy it keeps of its primary's
//! state, and its refusal to act on anything else.

use std::path::Path;
use std::time::{Duration, Instant};

use formats::wire::{ClusterId, Replication, Request, Response, Standing, ToAgent};
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::{AgentUp, Event, Place, Server};
use crate::core::Cluster;
use crate::journal::{Head, JobImage, Recovered, Snapshot};
use crate::replication::{self, Following, FromBackup, FromPrimary};

/// Name of the file in the state directory that says a copy of the
/// primary's state is under way: its record file is not whole, and this
/// controller must not lead before a copy completes.
const COPYING_FILE: &str = "copying";

/// A backup's view of its primary, and its candidacy while it has none.
pub struct Follower {
    /// The primary's address (empty when unknown).
    primary: String,
    /// Confirmations to the primary, while connected.
    link: Option<mpsc::UnboundedSender<FromBackup>>,
    /// A snapshot arriving in parts.
    copying: Option<Copying>,
    /// A copy began and its record file is not all here yet.
    partial: bool,
    /// The snapshot entry of the copy under way: the mark in the state
    /// directory holds it, so that the end of an older copy never removes
    /// a newer one's.
    copy_seq: u64,
    /// Last entry confirmed to the primary.
    confirmed: u64,
    /// Last time the primary was heard from.
    last_heard: Instant,
    /// Agents that lost the primary and registered here, waiting for this
    /// backup to take over (or to send them back to the primary).
    votes: Vec<(Instant, Box<AgentUp>)>,
}

impl Follower {
    /// A backup of `primary` (empty: unknown yet). One whose state
    /// directory holds an unfinished copy may not lead. `eager`: it may
    /// take over at once (the first controller of the list, starting);
    /// else only after the takeover timeout without a primary, so that
    /// when all start together the first of the list leads.
    pub fn new(primary: String, state_dir: &Path, timeout: Duration, eager: bool) -> Follower {
        let now = Instant::now();
        Follower {
            primary,
            link: None,
            copying: None,
            partial: state_dir.join(COPYING_FILE).exists(),
            copy_seq: 0,
            confirmed: 0,
            last_heard: if eager {
                now.checked_sub(timeout).unwrap_or(now)
            } else {
                now
            },
            votes: Vec::new(),
        }
    }

    /// The primary it follows, while it does.
    pub(super) fn followed(&self) -> Option<&str> {
        self.link.as_ref().map(|_| self.primary.as_str())
    }

    /// Whether it holds the primary's whole state (and confirms entries).
    fn whole(&self) -> bool {
        self.link.is_some() && self.copying.is_none() && !self.partial
    }

    /// Whether the primary it follows has been silent for `timeout` (its
    /// link may be cut: packets vanish, and the connection never fails).
    pub(super) fn silent(&self, timeout: Duration) -> bool {
        self.link.is_some() && self.last_heard.elapsed() >= timeout
    }

    /// Whether it may take over now: no primary for the timeout, and a
    /// whole copy.
    pub(super) fn may_take_over(&self, timeout: Duration) -> bool {
        self.link.is_none()
            && self.copying.is_none()
            && !self.partial
            && self.last_heard.elapsed() >= timeout
    }

    /// The votes of agents still waiting.
    pub(super) fn votes(&self) -> impl Iterator<Item = &AgentUp> {
        self.votes
            .iter()
            .filter(|(_, v)| !v.reply.is_closed())
            .map(|(_, v)| &**v)
    }

    pub(super) fn take_votes(&mut self) -> Vec<AgentUp> {
        self.votes
            .drain(..)
            .map(|(_, v)| *v)
            .filter(|v| !v.reply.is_closed())
            .collect()
    }

    /// Sends back votes held too long: their agents try the list again.
    /// A candidate holds them for three takeover timeouts. A backup that
    /// still hears its primary holds them half a timeout: an agent that
    /// lost the primary a little before this backup did (their silences
    /// count from different messages) waits here rather than going round
    /// the list, but one that alone lost a live primary goes back to it
    /// well before its fence.
    pub(super) fn expire_votes(&mut self, timeout: Duration, standing: &Standing) {
        let age = if self.link.is_some() {
            timeout / 2
        } else {
            3 * timeout
        };
        let (old, kept): (Vec<_>, Vec<_>) = self
            .votes
            .drain(..)
            .partition(|(at, _)| at.elapsed() >= age);
        self.votes = kept;
        for (_, v) in old {
            let _ = v.reply.send(Err(ToAgent::Elsewhere(standing.clone())));
        }
    }

    /// Sends every vote back to the primary now followed.
    fn release_votes(&mut self, standing: &Standing) {
        for (_, v) in self.votes.drain(..) {
            let _ = v.reply.send(Err(ToAgent::Elsewhere(standing.clone())));
        }
    }
}

struct Copying {
    seq: u64,
    expected: u64,
    jobs: Vec<JobImage>,
    head: Head,
}

impl Server {
    /// Handles an event of replication; gives back any other event.
    pub(super) fn peer_event(&mut self, ev: Event) -> Option<Event> {
        match ev {
            Event::BackupUp {
                id,
                address,
                held,
                cluster,
                link,
            } => {
                if self.same_history(cluster)
                    && held > self.term
                    && matches!(self.place, Place::Primary(_))
                {
                    // A controller holds the state of a later term: this
                    // one is deposed.
                    self.step_down(&format!("{address} holds the state of term {held}"));
                } else if cluster != self.terms.cluster && !cluster.is_none() {
                    // Another cluster's terms say nothing of this one's:
                    // the backup takes this cluster's history whole.
                    info!(backup = %address, other = %cluster, held, "a backup held another cluster's state: it takes this one's");
                }
                self.backup_up(id, address, link)
            }
            Event::BackupAck { id, seq } => {
                if let Place::Primary(backups) = &mut self.place {
                    backups.acked(id, seq);
                }
            }
            Event::BackupGone { id, why } => {
                if let Place::Primary(backups) = &mut self.place {
                    backups.detach(id, &why);
                }
            }
            Event::Primary(Following::Leads {
                address,
                term,
                cluster,
                link,
            }) => {
                let same = self.same_history(cluster);
                if same && term > self.term && matches!(self.place, Place::Primary(_)) {
                    self.step_down(&format!("{address} leads at the later term {term}"));
                }
                if same && term < self.terms.held {
                    // A primary of an earlier term than the state this one
                    // holds: it is deposed, its state older.
                    warn!(primary = %address, term, held = self.terms.held, "not following a primary of a past term");
                    return None;
                }
                if let Place::Backup(f) = &mut self.place {
                    f.primary = address;
                    f.link = Some(link);
                    f.copying = None;
                    f.confirmed = 0;
                    f.last_heard = Instant::now();
                }
                let standing = self.standing(String::new());
                if let Place::Backup(f) = &mut self.place {
                    f.release_votes(&standing);
                }
            }
            Event::Primary(Following::Lost) => {
                if let Place::Backup(f) = &mut self.place {
                    f.link = None;
                }
            }
            Event::Primary(Following::Copy(msg)) => self.copy(msg),
            ev if self.acts() => return Some(ev),
            ev => self.refuse(ev),
        }
        None
    }

    /// A backup connected: it gets the whole state as of the journal's
    /// last entry, then every entry after it.
    fn backup_up(
        &mut self,
        id: replication::BackupId,
        address: String,
        link: mpsc::UnboundedSender<FromPrimary>,
    ) {
        if !matches!(self.place, Place::Primary(_)) {
            // Backups look for the primary among all controllers.
            tracing::debug!(backup = %address, "not the primary: a backup's link refused");
            return;
        }
        // Entries the core made in this batch go to the backups already
        // attached; the snapshot includes them.
        self.write_journal();
        let at = self.journal.seq();
        let now = self.clock.now();
        info!(backup = %address, seq = at, "sending the whole state to a backup");
        replication::snapshot(
            at,
            self.term,
            self.terms.cluster,
            self.cluster.snapshot_head(),
            self.cluster.images(now),
            &link,
        );
        let records = link.clone();
        self.records.read_all(move |part| {
            let _ = records.send(if part.is_empty() {
                FromPrimary::RecordFileEnd
            } else {
                FromPrimary::Records(part)
            });
        });
        if let Place::Primary(backups) = &mut self.place {
            backups.attach(id, address, link, at);
        }
    }

    /// On a backup: what the primary sent.
    fn copy(&mut self, msg: FromPrimary) {
        let state_dir = self.cluster.config().state_dir.clone();
        let Place::Backup(f) = &mut self.place else {
            return;
        };
        if f.link.is_none() {
            // Sent before this backup let the link go.
            return;
        }
        f.last_heard = Instant::now();
        match msg {
            FromPrimary::Ping => {}
            FromPrimary::Shutdown => {
                info!("the primary stops the cluster: stopping");
                self.stopping = Some(Instant::now());
            }
            FromPrimary::Snapshot {
                seq,
                term,
                cluster,
                jobs,
                head,
            } => self.begin_copy(seq, term, cluster, jobs, head),
            FromPrimary::Jobs(part) => match &mut f.copying {
                Some(c) => {
                    c.jobs.extend(part);
                    self.maybe_install();
                }
                None => self.drop_primary("jobs outside a snapshot"),
            },
            FromPrimary::Records(frames) => self.records.append(frames),
            FromPrimary::RecordFileEnd => {
                // The records reach the file before the mark of this copy
                // (not of a later one) goes.
                self.records
                    .then_remove(state_dir.join(COPYING_FILE), f.copy_seq.to_string());
                f.partial = false;
            }
            FromPrimary::Entries(frames) => {
                if f.copying.is_some() {
                    return self.drop_primary("entries before the snapshot was whole");
                }
                match self.journal.append_frames(&frames) {
                    Ok(entries) => {
                        let now = self.clock.now();
                        self.cluster.replay_entries(entries, now);
                    }
                    Err(e) => self.drop_primary(&format!("{e:#}")),
                }
            }
        }
    }

    /// A snapshot begins: the state held here becomes that term's (kept
    /// first: a restart must not judge this copy by an older term), and
    /// the copy is marked as under way until its record file is whole.
    fn begin_copy(&mut self, seq: u64, term: u64, cluster: ClusterId, jobs: u64, head: Head) {
        if self.same_history(cluster) && term < self.terms.held {
            return self.drop_primary("its term is older than the state held here");
        }
        if cluster != self.terms.cluster {
            info!(
                cluster = %cluster,
                before = %self.terms.cluster,
                "copying the state of the cluster the primary leads"
            );
        }
        let state_dir = self.cluster.config().state_dir.clone();
        // The copy is of the primary's cluster: its identity comes in the
        // same write as its term.
        let terms = super::lead::Terms {
            seen: self.terms.seen.max(term),
            held: term,
            cluster,
        };
        if let Err(e) = super::lead::store_terms(&state_dir, terms) {
            error!("{e:#}");
            return self.drop_primary("cannot keep the term");
        }
        self.terms = terms;
        self.term = terms.seen;
        self.publish();
        let marker = state_dir.join(COPYING_FILE);
        let marked = std::fs::write(&marker, seq.to_string())
            .and_then(|()| std::fs::File::open(&marker)?.sync_all())
            .and_then(|()| std::fs::File::open(&state_dir)?.sync_all());
        if let Err(e) = marked {
            error!("cannot mark the copy as under way: {e}");
            return self.drop_primary("cannot write the state directory");
        }
        if let Place::Backup(f) = &mut self.place {
            f.partial = true;
            f.copy_seq = seq;
            f.copying = Some(Copying {
                seq,
                expected: jobs,
                jobs: Vec::new(),
                head,
            });
        }
        // The primary's record file replaces this one's.
        self.records.truncate();
        self.maybe_install();
    }

    /// Installs a snapshot once all its jobs are in: the journal and the
    /// tables become the primary's.
    fn maybe_install(&mut self) {
        let Place::Backup(f) = &mut self.place else {
            return;
        };
        let Some(c) = f.copying.take_if(|c| c.jobs.len() as u64 >= c.expected) else {
            return;
        };
        if let Err(e) = self.journal.install(c.seq, &c.head, c.jobs.iter().cloned()) {
            error!("cannot keep the primary's state: {e:#}");
            return self.drop_primary("cannot write the copy");
        }
        let snapshot = Snapshot::of(c.seq, c.head, c.jobs);
        let now = self.clock.now();
        let config = std::sync::Arc::clone(self.cluster.config());
        self.cluster = Cluster::copy(
            config,
            Recovered {
                snapshot,
                entries: Vec::new(),
            },
            now,
        );
        info!(
            seq = c.seq,
            jobs = self.cluster.active_jobs(),
            "holding the primary's state"
        );
    }

    /// Lets the primary's link go: the backup connects again and fetches
    /// the whole state.
    pub(super) fn drop_primary(&mut self, why: &str) {
        if let Place::Backup(f) = &mut self.place {
            if f.link.is_some() {
                warn!(primary = %f.primary, why, "dropping the link to the primary");
            }
            f.link = None;
            f.copying = None;
        }
    }

    /// On a backup: confirms to the primary the entries now written.
    pub(super) fn confirm(&mut self) {
        let seq = self.journal.seq();
        if let Place::Backup(f) = &mut self.place {
            if f.whole() && (seq > f.confirmed || f.confirmed == 0) {
                if let Some(link) = &f.link {
                    // After the records sent before these entries are
                    // written: an agent forgets an end's record once the
                    // primary hears the backup holds its entry.
                    let link = link.clone();
                    self.records.then(move || {
                        let _ = link.send(FromBackup::Ack(seq));
                    });
                    f.confirmed = seq;
                }
            }
        }
    }

    /// On a backup: what only the primary does is refused, naming it; an
    /// agent that lost the primary is held as a vote.
    fn refuse(&mut self, ev: Event) {
        // The primary is named only while followed: a candidate's last one
        // may be dead.
        let primary = match &self.place {
            Place::Backup(f) => f.followed().unwrap_or_default().to_string(),
            _ => String::new(),
        };
        match ev {
            Event::AgentUp(up) => {
                if self.stopping.is_some() {
                    let _ = up.reply.send(Err(ToAgent::Rejected(
                        "the controller is shutting down".into(),
                    )));
                    return;
                }
                let may_vote = self.may_vote(&up);
                let timeout = self.cluster.config().takeover_timeout;
                if let Place::Backup(f) = &mut self.place {
                    // Held once this backup may take over, or while it
                    // holds a whole copy and may soon (see `expire_votes`).
                    // Before, the agent goes round the list (to the first
                    // controller, when all start together).
                    if may_vote && (f.may_take_over(timeout) || f.whole()) {
                        info!(host = %up.host, "an agent lost the primary: holding its vote");
                        f.votes.push((Instant::now(), up));
                        return;
                    }
                }
                let why = if may_vote || !self.witnesses.is_witness(&up.host) {
                    String::new()
                } else {
                    let why = format!(
                        "the agent holds {}, which rules out this controller's state of term {}",
                        up.mark, self.terms.held
                    );
                    self.turn_away(&up.host, &why);
                    why
                };
                let _ = up.reply.send(Err(ToAgent::Elsewhere(self.standing(why))));
            }
            Event::Request {
                req: Request::Stats,
                reply,
            } => {
                let stats = self.stats();
                self.replies.push((reply, Response::Stats(Box::new(stats))));
            }
            // Its copy's nodes, as `controller nodes --addr` it shows them
            // (with where it stands, and whom it turned away).
            Event::Request {
                req: Request::Nodes,
                reply,
            } => {
                let nodes = self.cluster.node_infos();
                self.replies.push((reply, Response::Nodes(nodes)));
            }
            // For the metrics endpoint: a backup has no agents.
            Event::Request {
                req: Request::Hosts,
                reply,
            } => {
                self.replies.push((reply, Response::Hosts(Vec::new())));
            }
            Event::Request {
                req: Request::Shutdown,
                reply,
            } => {
                self.stopping = Some(Instant::now());
                self.replies.push((reply, Response::ShuttingDown));
            }
            Event::Request { reply, .. } => {
                self.replies.push((reply, Response::NotPrimary(primary)));
            }
            // Nothing else reaches a backup: agents are refused.
            _ => {}
        }
    }

    /// This controller's place, for stats.
    pub(super) fn replication(&self) -> Replication {
        let seq = self.journal.seq();
        let (role, primary, backups) = match &self.place {
            Place::Alone => ("alone", self.me.clone(), Vec::new()),
            Place::Primary(b) => ("primary", self.me.clone(), b.lags(seq)),
            // Without its primary, it stands as a candidate.
            Place::Backup(f) if f.link.is_none() => ("candidate", f.primary.clone(), Vec::new()),
            Place::Backup(f) => ("backup", f.primary.clone(), Vec::new()),
        };
        Replication {
            role: role.into(),
            address: self.me.clone(),
            primary,
            term: self.term,
            seq,
            backups,
            cluster: self.terms.cluster,
            turned_away: self
                .turned_away
                .iter()
                .map(|(host, why)| format!("{host}: {why}"))
                .collect(),
        }
    }
}
