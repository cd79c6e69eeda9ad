//! The server's side of replication: on the primary, backups that attach,
//! confirm and leave; on a backup, the copy it keeps of its primary's
//! state, and its refusal to act on anything else.

use std::collections::BTreeMap;
use std::time::Instant;

use formats::wire::{JobInfo, Replication, Request, Response};
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::{Event, Place, Server};
use crate::core::Cluster;
use crate::journal::{JobImage, Recovered, Snapshot};
use crate::replication::{self, FromBackup, FromPrimary};

/// A backup's view of its primary.
pub struct Follower {
    /// The primary's address.
    primary: String,
    /// Confirmations to the primary, while connected.
    link: Option<mpsc::UnboundedSender<FromBackup>>,
    /// A snapshot arriving in parts.
    copying: Option<Copying>,
    /// The primary's record file is all here.
    records_in: bool,
    /// Last entry confirmed to the primary.
    confirmed: u64,
}

impl Follower {
    pub fn new(primary: String) -> Follower {
        Follower {
            primary,
            link: None,
            copying: None,
            records_in: false,
            confirmed: 0,
        }
    }

    /// Whether it holds the primary's whole state (and confirms entries).
    fn whole(&self) -> bool {
        self.link.is_some() && self.copying.is_none() && self.records_in
    }
}

struct Copying {
    seq: u64,
    next_id: u64,
    expected: u64,
    jobs: Vec<JobImage>,
    history: Vec<JobInfo>,
    drained: Vec<(String, String)>,
}

impl Server {
    /// Handles an event of replication; gives back any other event.
    pub(super) fn peer_event(&mut self, ev: Event) -> Option<Event> {
        match ev {
            Event::BackupUp {
                id,
                address,
                seq,
                link,
            } => self.backup_up(id, address, seq, link),
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
            Event::PrimaryUp {
                address,
                link,
                hello,
            } => {
                let seq = self.journal.seq();
                if let Place::Backup(f) = &mut self.place {
                    f.primary = address;
                    f.link = Some(link);
                    f.copying = None;
                    f.records_in = false;
                    f.confirmed = 0;
                    let _ = hello.send((self.term, seq));
                }
            }
            Event::PrimaryGone => {
                if let Place::Backup(f) = &mut self.place {
                    f.link = None;
                }
            }
            Event::Copy(msg) => self.copy(msg),
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
        seq: u64,
        link: mpsc::UnboundedSender<FromPrimary>,
    ) {
        if !matches!(self.place, Place::Primary(_)) {
            warn!(
                backup = %address,
                "a controller connected as a backup, but this one is not a primary with backups \
                 in controller.hosts: refused"
            );
            return;
        }
        // Entries the core made in this batch go to the backups already
        // attached; the snapshot includes them.
        self.write_journal();
        let at = self.journal.seq();
        let now = self.clock.now();
        info!(backup = %address, holds = seq, sending = at, "sending the whole state to a backup");
        replication::snapshot(
            at,
            self.term,
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
        let Place::Backup(f) = &mut self.place else {
            return;
        };
        match msg {
            FromPrimary::Snapshot {
                seq,
                term,
                next_id,
                jobs,
                history,
                drained,
            } => {
                self.term = self.term.max(term);
                f.records_in = false;
                f.copying = Some(Copying {
                    seq,
                    next_id,
                    expected: jobs,
                    jobs: Vec::new(),
                    history,
                    drained,
                });
                // The primary's record file replaces this one's.
                self.records.truncate();
                self.maybe_install();
            }
            FromPrimary::Jobs(part) => match &mut f.copying {
                Some(c) => {
                    c.jobs.extend(part);
                    self.maybe_install();
                }
                None => self.drop_primary("jobs outside a snapshot"),
            },
            FromPrimary::Records(frames) => self.records.append(frames),
            FromPrimary::RecordFileEnd => f.records_in = true,
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

    /// Installs a snapshot once all its jobs are in: the journal and the
    /// tables become the primary's.
    fn maybe_install(&mut self) {
        let Place::Backup(f) = &mut self.place else {
            return;
        };
        let Some(c) = f.copying.take_if(|c| c.jobs.len() as u64 >= c.expected) else {
            return;
        };
        if let Err(e) = self.journal.install(
            c.seq,
            c.next_id,
            c.jobs.iter().cloned(),
            &c.history,
            &c.drained,
        ) {
            error!("cannot keep the primary's state: {e:#}");
            return self.drop_primary("cannot write the copy");
        }
        let snapshot = Snapshot {
            seq: c.seq,
            next_id: c.next_id,
            jobs: c
                .jobs
                .into_iter()
                .map(|j| (j.id, j))
                .collect::<BTreeMap<_, _>>(),
            history: c.history,
            drained: c.drained,
        };
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
    fn drop_primary(&mut self, why: &str) {
        if let Place::Backup(f) = &mut self.place {
            warn!(primary = %f.primary, why, "dropping the link to the primary");
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
                    let _ = link.send(FromBackup::Ack(seq));
                    f.confirmed = seq;
                }
            }
        }
    }

    /// On a backup: what only the primary does is refused, naming it.
    fn refuse(&mut self, ev: Event) {
        let primary = match &self.place {
            Place::Backup(f) => f.primary.clone(),
            _ => String::new(),
        };
        match ev {
            Event::AgentUp { reply, .. } => {
                let _ = reply.send(Err(format!(
                    "{} is a backup controller; its primary is {primary}",
                    self.me
                )));
            }
            Event::Request {
                req: Request::Stats,
                reply,
            } => {
                let stats = self.stats();
                self.replies.push((reply, Response::Stats(Box::new(stats))));
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
            Place::Backup(f) => ("backup", f.primary.clone(), Vec::new()),
        };
        Replication {
            role: role.into(),
            address: self.me.clone(),
            primary,
            term: self.term,
            seq,
            backups,
        }
    }
}
