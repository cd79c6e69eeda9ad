//! Who leads (docs/faults.md, "Takeover"): the primary's witnesses, a
//! backup's candidacy, taking over and stepping down.
//!
//! The agent hosts of the config are the witnesses. Each agent keeps a
//! mark, (term, floor), and never registers with a controller of an
//! earlier term. A primary acts only while a majority of agent hosts have
//! acknowledged its current mark (and, while it has a backup, only on what
//! the backup holds); short of that for the takeover timeout, it steps
//! down. A backup that has heard nothing from its primary for the takeover
//! timeout holds the registrations of agents that lost it as votes; with a
//! majority of agent hosts it takes the next term, and acts once they
//! acknowledge its mark. An agent that keeps floor `u64::MAX` votes for
//! nobody of the same term: the primary went on without a backup, which
//! then lacks what it did.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use formats::wire::{ClusterId, Mark, Standing, ToAgent};
use tracing::{error, info, warn};

use super::{AgentUp, Place, Server};
use crate::core::AgentId;
use crate::replication::Backups;

/// Name of the file in the state directory that holds the terms and the
/// cluster's identity.
const TERM_FILE: &str = "term";

/// What a controller keeps of terms: the highest it has seen (a new one
/// is taken above it), and the term of the state it holds (the last term
/// whose primary it was, backed, or whose copy it installed), which is
/// what agents judge a candidate by; and the cluster whose history that
/// state is (none before it led or copied anything). The three are kept
/// in one file, written whole: a state directory never pairs one
/// cluster's terms with another's identity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terms {
    pub seen: u64,
    pub held: u64,
    pub cluster: ClusterId,
}

/// The terms kept in `dir` (0 and no cluster before any).
pub fn load_terms(dir: &Path) -> Terms {
    let text = std::fs::read_to_string(dir.join(TERM_FILE)).unwrap_or_default();
    let mut it = text.split_whitespace();
    let mut num = || it.next().and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    let seen = num();
    let held = num().min(seen);
    Terms {
        seen,
        held,
        cluster: it.next().and_then(|c| c.parse().ok()).unwrap_or_default(),
    }
}

/// Keeps `terms` durably in `dir`, before anything is done under them.
pub(super) fn store_terms(dir: &Path, terms: Terms) -> Result<()> {
    let path = dir.join(TERM_FILE);
    let tmp = path.with_extension("tmp");
    let cluster = if terms.cluster.is_none() {
        String::new()
    } else {
        format!(" {}", terms.cluster)
    };
    std::fs::write(&tmp, format!("{} {}{cluster}\n", terms.seen, terms.held))
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .and_then(|()| std::fs::File::open(dir)?.sync_all())
        .with_context(|| format!("cannot keep the term in {}", path.display()))
}

/// The agent hosts that witness, and what each registered agent has
/// acknowledged.
#[derive(Default)]
pub struct Witnesses {
    /// The config's agent hosts; empty for a controller alone, which needs
    /// no witness.
    hosts: HashSet<String>,
    /// Each registered agent: its host, the last mark it acknowledged,
    /// and when it was last heard from.
    agents: HashMap<AgentId, (String, Option<Mark>, Instant)>,
    /// An agent not heard from for this long backs nothing (its link may
    /// be cut, and the agent gone to another controller).
    fresh: std::time::Duration,
    /// Since when this primary has lacked the backing of a majority.
    lacking_since: Option<Instant>,
    /// Whether it had that backing when last looked at.
    backing: bool,
}

impl Witnesses {
    pub fn new(hosts: impl IntoIterator<Item = String>, fresh: std::time::Duration) -> Witnesses {
        Witnesses {
            hosts: hosts.into_iter().collect(),
            fresh,
            ..Witnesses::default()
        }
    }

    pub fn up(&mut self, agent: AgentId, host: String) {
        self.agents.insert(agent, (host, None, Instant::now()));
    }

    /// `agent` was heard from at `at` (when its message arrived, not when
    /// it was handled: a controller that stalled must not take old news
    /// for fresh).
    pub fn heard(&mut self, agent: AgentId, at: Instant) {
        if let Some((_, _, heard)) = self.agents.get_mut(&agent) {
            *heard = (*heard).max(at);
        }
    }

    pub fn marked(&mut self, agent: AgentId, mark: Mark) {
        if let Some((_, m, _)) = self.agents.get_mut(&agent) {
            *m = Some(mark);
        }
    }

    pub fn gone(&mut self, agent: AgentId) {
        self.agents.remove(&agent);
    }

    /// Says when the backing of a majority comes or goes: from then on,
    /// a primary acts, or waits. True when it has just come.
    pub fn note_backing(&mut self, backed: bool, term: u64) -> bool {
        let was = std::mem::replace(&mut self.backing, backed);
        if backed == was || self.hosts.is_empty() {
            return false;
        }
        if backed {
            info!(term, "a majority of agent hosts back this primary: acting");
        } else {
            warn!(
                term,
                "no majority of agent hosts backs this primary: acting on nothing"
            );
        }
        backed
    }

    /// More than half of the agent hosts.
    pub fn majority(&self) -> usize {
        self.hosts.len() / 2 + 1
    }

    /// Whether a majority of agent hosts have acknowledged `mark` (or a
    /// stricter floor of the same term), and were heard from lately.
    /// Always true with no witnesses.
    pub fn back(&self, mark: Mark) -> bool {
        if self.hosts.is_empty() {
            return true;
        }
        let backing: HashSet<&str> = self
            .agents
            .values()
            .filter(|(host, m, heard)| {
                self.hosts.contains(host)
                    && heard.elapsed() < self.fresh
                    && m.is_some_and(|m| {
                        m.cluster == mark.cluster
                            && m.term == mark.term
                            && m.leader == mark.leader
                            && m.floor >= mark.floor
                    })
            })
            .map(|(host, _, _)| host.as_str())
            .collect();
        backing.len() >= self.majority()
    }

    /// Distinct witness hosts among `hosts`.
    pub fn count<'a>(&self, hosts: impl Iterator<Item = &'a str>) -> usize {
        hosts
            .filter(|h| self.hosts.contains(*h))
            .collect::<HashSet<_>>()
            .len()
    }

    pub fn is_witness(&self, host: &str) -> bool {
        self.hosts.contains(host)
    }

    /// Why an agent of `host` may not register: there are witnesses, and
    /// it is none of them. It could never vote, and agents named after
    /// the machine rather than the config would leave every controller
    /// short of a majority.
    pub fn refuses(&self, host: &str) -> Option<String> {
        if self.hosts.is_empty() || self.hosts.contains(host) {
            return None;
        }
        let mut names: Vec<&str> = self.hosts.iter().map(String::as_str).collect();
        names.sort_unstable();
        Some(format!(
            "agent host {host:?} is none of the config's [[agents.host]] ({}): with a backup \
             controller the agent hosts witness which controller leads; start the agent with \
             --host NAME",
            names.join(", ")
        ))
    }
}

impl Server {
    /// The mark this primary must be backed with: its term, itself as the
    /// leader, and floor 0 while a backup holds everything it acted on,
    /// `u64::MAX` while it acts alone.
    pub(super) fn required_mark(&self) -> Mark {
        let alone = match &self.place {
            Place::Primary(backups) => !backups.confirming(),
            _ => true,
        };
        Mark {
            cluster: self.terms.cluster,
            term: self.term,
            leader: self.leader,
            floor: if alone { u64::MAX } else { 0 },
        }
    }

    /// Sends the agents the mark this primary now needs, when it changed:
    /// straight to them, since acts wait for their answers.
    pub(super) fn update_mark(&mut self) {
        if !matches!(self.place, Place::Primary(_)) {
            return;
        }
        let mark = self.required_mark();
        if mark != self.mark {
            self.mark = mark;
            info!(
                term = mark.term,
                alone = mark.floor == u64::MAX,
                "new mark for the agents"
            );
            for tx in self.links.values() {
                let _ = tx.send(ToAgent::Mark(mark));
            }
        }
    }

    /// The backing of a majority has just come: the state this controller
    /// holds is now of its term (kept before anything is acted on), and
    /// the agents hear at once that it lives.
    pub(super) fn backing_came(&mut self) {
        if self.terms.held < self.term {
            let terms = Terms {
                seen: self.terms.seen.max(self.term),
                held: self.term,
                ..self.terms
            };
            if let Err(e) = store_terms(&self.cluster.config().state_dir, terms) {
                error!("{e:#}");
                return self.step_down("cannot keep its term");
            }
            self.terms = terms;
            self.publish();
        }
        for tx in self.links.values() {
            let _ = tx.send(ToAgent::Ping);
        }
    }

    /// Whether this controller may act now: a majority of agent hosts
    /// acknowledged the mark it needs (a backup that left raises it first).
    pub(super) fn backed(&self) -> bool {
        self.witnesses.back(self.required_mark())
    }

    /// Checked every tenth of a second: a primary without backing for the
    /// takeover timeout steps down; a candidate with votes from a majority
    /// takes over.
    pub(super) async fn lead(&mut self) {
        let timeout = self.cluster.config().takeover_timeout;
        match &self.place {
            Place::Primary(_) => {
                if self.backed() {
                    self.witnesses.lacking_since = None;
                } else {
                    let since = *self
                        .witnesses
                        .lacking_since
                        .get_or_insert_with(Instant::now);
                    if since.elapsed() >= timeout {
                        self.step_down("fewer than a majority of agent hosts back it");
                    }
                }
            }
            Place::Backup(f) if f.silent(timeout) => {
                self.drop_primary("nothing from it for the takeover timeout");
            }
            // A controller that holds no cluster's history founds one only
            // as the first of the list: a later one with an empty state
            // directory would start a new history beside the one its
            // primary keeps.
            Place::Backup(_) if self.terms.cluster.is_none() && self.leader != 1 => {}
            Place::Backup(f) => {
                if f.may_take_over(timeout) {
                    let votes = self.witnesses.count(f.votes().map(|v| v.host.as_str()));
                    if votes >= self.witnesses.majority() {
                        self.take_over().await;
                    }
                }
            }
            Place::Alone => {}
        }
        let standing = self.standing(String::new());
        if let Place::Backup(f) = &mut self.place {
            f.expire_votes(timeout, &standing);
        }
    }

    /// Whether an agent's registration may count as a vote for this
    /// backup: its mark does not rule this controller's state out. That
    /// state is of term `held`: a later term's mark rules it out; the same
    /// term's, unless this controller led that term or holds the floor.
    pub(super) fn may_vote(&self, up: &AgentUp) -> bool {
        let m = up.mark;
        let held = self.terms.held;
        self.witnesses.is_witness(&up.host)
            && (m.term < held
                || (m.term == held
                    && (m.leader == 0 || m.leader == self.leader || self.journal.seq() >= m.floor)))
    }

    /// Whether a peer's terms are of this controller's history: the same
    /// cluster, or either has none yet (and so no terms to compare).
    pub(super) fn same_history(&self, cluster: ClusterId) -> bool {
        cluster == self.terms.cluster || cluster.is_none() || self.terms.cluster.is_none()
    }

    /// An agent's mark as this controller reads it (docs/faults.md, "One
    /// cluster, one history"): one of this cluster (or of none) as it is;
    /// another cluster's, from an agent that will set it aside, as no mark
    /// at all. An agent that serves another cluster (or any, while this
    /// controller holds no cluster's history) is turned away, told where
    /// this controller stands.
    pub(super) fn judge_mark(&mut self, mut up: Box<AgentUp>) -> Option<Box<AgentUp>> {
        let m = up.mark;
        if matches!(self.place, Place::Alone) {
            // No other controller could take over: nothing to witness,
            // and no mark to judge (the agent keeps its own).
            up.mark = Mark::default();
            return Some(up);
        }
        if m.cluster.is_none() || m.cluster == self.terms.cluster {
            return Some(up);
        }
        if !up.bound {
            up.mark = Mark::default();
            return Some(up);
        }
        let why = format!(
            "the agent serves cluster {} (term {}) since it started; this controller holds {}",
            m.cluster,
            m.term,
            if self.terms.cluster.is_none() {
                "no cluster's history".to_string()
            } else {
                format!("cluster {}'s", self.terms.cluster)
            }
        );
        self.turn_away(&up.host, &why);
        let _ = up.reply.send(Err(ToAgent::Elsewhere(self.standing(why))));
        None
    }

    /// Notes, for `stats`, that an agent of `host` was turned away
    /// because of its mark.
    pub(super) fn turn_away(&mut self, host: &str, why: &str) {
        if self.turned_away.get(host).map(String::as_str) != Some(why) {
            warn!(host, "agent turned away: {why}");
            self.turned_away.insert(host.to_string(), why.to_string());
        }
    }

    /// Where this controller stands, for an agent it does not take.
    pub(super) fn standing(&self, why: String) -> Standing {
        let (role, primary) = match &self.place {
            Place::Alone => ("alone", self.me.clone()),
            Place::Primary(_) => ("primary", self.me.clone()),
            Place::Backup(f) => match f.followed() {
                Some(p) => ("backup", p.to_string()),
                None => ("candidate", String::new()),
            },
        };
        Standing {
            role: role.into(),
            cluster: self.terms.cluster,
            term: self.term,
            held: self.terms.held,
            primary,
            why,
        }
    }

    /// A majority of agent hosts lost the primary and asked this backup:
    /// it takes the next term and registers them. It acts once they
    /// acknowledge its mark.
    async fn take_over(&mut self) {
        let Place::Backup(f) = &mut self.place else {
            return;
        };
        let votes = f.take_votes();
        let seen = votes.iter().map(|v| v.mark.term).max().unwrap_or(0);
        let term = self.terms.seen.max(seen) + 1;
        let terms = Terms {
            seen: term,
            held: self.terms.held,
            // The first primary of a cluster founds it.
            cluster: if self.terms.cluster.is_none() {
                ClusterId::new()
            } else {
                self.terms.cluster
            },
        };
        if let Err(e) = store_terms(&self.cluster.config().state_dir, terms) {
            error!("cannot take over: {e:#}");
            let standing = self.standing("it cannot keep its term".into());
            for v in votes {
                let _ = v.reply.send(Err(ToAgent::Elsewhere(standing.clone())));
            }
            return;
        }
        self.terms = terms;
        self.term = term;
        self.mark = Mark {
            cluster: terms.cluster,
            term,
            leader: self.leader,
            floor: u64::MAX,
        };
        self.place = Place::Primary(Backups::default());
        self.publish();
        self.journal.ship(true);
        // Records the primary streamed here: the jobs they end are over,
        // and their executions must not be recorded twice.
        // Those that wait for room on the disk count as written: their
        // agents send them again, and each must be taken once.
        if let Err(e) = self.records.flush().await {
            error!("cannot sync the record file: {e}");
        }
        let unwritten = self.records.unwritten().await.unwrap_or_default();
        match crate::records::written(&self.record_path) {
            Ok(mut written) => {
                written.add(&unwritten);
                self.recorded = written.executions;
                let now = self.clock.now();
                self.cluster.await_agents(now);
                self.cluster.settle(&written.last, now, &mut self.out);
            }
            Err(e) => error!("{e:#}"),
        }
        self.scheduler.attach(&mut self.cluster);
        self.witnesses.lacking_since = Some(Instant::now());
        let now = self.clock.now();
        let hosts: Vec<String> = votes.iter().map(|v| v.host.clone()).collect();
        info!(term, voters = ?hosts, "took over as primary");
        for v in votes {
            self.agent_up(v, now);
        }
    }

    /// Stops acting at once: no order, no answer, no record accepted. The
    /// agents are let go (they look for whichever controller leads), and
    /// this controller follows one again, or stands as a candidate.
    pub(super) fn step_down(&mut self, why: &str) {
        if !matches!(self.place, Place::Primary(_)) {
            return;
        }
        warn!(
            term = self.term,
            why, "stepping down: this controller no longer acts"
        );
        let follower = super::Follower::new(
            String::new(),
            &self.cluster.config().state_dir,
            self.cluster.config().takeover_timeout,
            false,
        );
        if let Place::Primary(backups) = std::mem::replace(&mut self.place, Place::Backup(follower))
        {
            // Not acknowledged: clients ask again, of whichever leads (a
            // submission's key makes that safe).
            for (reply, _) in backups.abandon() {
                let _ = reply.send(formats::wire::Response::NotPrimary(String::new()));
            }
        }
        for (_, _, reply) in self.held.drain(..) {
            let _ = reply.send(formats::wire::Response::NotPrimary(String::new()));
        }
        self.publish();
        self.journal.ship(false);
        self.links.clear();
        self.witnesses.agents.clear();
        self.witnesses.lacking_since = None;
        self.witnesses.backing = false;
        self.out.orders.clear();
        // Nothing of this batch is acknowledged either, nor what waited
        // for the disk.
        let syncing = self.syncing.take().map(|s| s.replies).unwrap_or_default();
        for (reply, _) in self
            .replies
            .drain(..)
            .chain(self.unsynced.drain(..))
            .chain(syncing)
        {
            let _ = reply.send(formats::wire::Response::NotPrimary(String::new()));
        }
        self.cluster.release_agents();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

    fn mark(term: u64, floor: u64) -> Mark {
        Mark {
            term,
            leader: 1,
            floor,
            ..Mark::default()
        }
    }

    #[test]
    fn a_primary_is_backed_by_a_majority_of_hosts_that_acknowledged_its_mark() {
        let hosts = ["h1", "h2", "h3"].map(String::from);
        let mut w = Witnesses::new(hosts, MINUTE);
        assert_eq!(w.majority(), 2);
        let m = mark(2, u64::MAX);
        assert!(!w.back(m));
        w.up(1, "h1".into());
        w.up(2, "h1".into());
        w.marked(1, m);
        w.marked(2, m);
        // Two agents of one host are one witness.
        assert!(!w.back(m));
        w.up(3, "h2".into());
        w.marked(3, mark(1, 0));
        // A mark of an earlier term backs nothing.
        assert!(!w.back(m));
        w.marked(3, m);
        assert!(w.back(m));
        // A stricter floor of the same term backs a laxer one, not the
        // other way round.
        assert!(w.back(mark(2, 0)));
        assert!(!w.back(Mark { leader: 2, ..m }));
        w.marked(3, mark(2, 0));
        assert!(!w.back(m));
        // An agent of a host the config does not list is no witness.
        w.up(4, "elsewhere".into());
        w.marked(4, m);
        assert!(!w.back(m));
        w.gone(3);
        w.up(5, "h3".into());
        w.marked(5, m);
        assert!(w.back(m));
    }

    #[test]
    fn an_agent_not_heard_from_lately_backs_nothing() {
        let mut w = Witnesses::new(["h1".to_string()], std::time::Duration::ZERO);
        w.up(1, "h1".into());
        w.marked(1, mark(1, 0));
        w.heard(1, Instant::now());
        assert!(!w.back(mark(1, 0)));
        // Without witnesses (a controller alone), always backed.
        assert!(Witnesses::default().back(mark(7, u64::MAX)));
    }
}
