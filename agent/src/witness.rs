//! The mark an agent keeps as a witness for the controllers
//! (docs/faults.md, "Takeover"): the cluster it belongs to, the highest
//! term it has seen there, the controller that leads in it, and the least
//! journal entry another controller must hold to take over from it. It is
//! kept in the agent's record directory, so that an agent that restarts
//! still refuses a controller of a past term.
//!
//! A mark speaks for one cluster only ("One cluster, one history"). An
//! agent that has not yet served any cluster since it started sets aside a
//! mark of another cluster than the controller that takes it, saying so:
//! that mark is what an earlier cluster left on the host. Once it serves a
//! cluster, it joins no other until it is restarted.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use formats::wire::Mark;
use tracing::warn;

/// Name of the file in the record directory.
const FILE: &str = "mark";

pub struct Witness {
    /// Where the mark is kept; `None` for an agent in the controller's own
    /// process, which lives and dies with it.
    path: Option<PathBuf>,
    mark: Mark,
    /// Whether the mark is of the cluster this agent has served since it
    /// started (rather than read from its directory).
    bound: bool,
}

/// What [`Witness::keep`] made of a controller's mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Kept,
    /// Of an earlier term, or of this term from another controller than
    /// the one that leads it.
    Past,
    /// Of another cluster than the one this agent serves.
    OtherCluster,
}

impl Witness {
    /// The mark kept in `dir`, if any. A damaged one is an error: an agent
    /// that forgot its term could take orders from a deposed controller.
    pub fn open(dir: Option<&Path>) -> Result<Witness> {
        let path = dir.map(|d| d.join(FILE));
        let mut mark = Mark::default();
        if let Some(p) = &path {
            match std::fs::read_to_string(p) {
                Ok(text) => mark = parse(&text, p)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
            }
        }
        Ok(Witness {
            path,
            mark,
            bound: false,
        })
    }

    pub fn mark(&self) -> Mark {
        self.mark
    }

    /// Whether this agent serves the mark's cluster since it started.
    pub fn bound(&self) -> bool {
        self.bound
    }

    /// Keeps `m`, a mark `from` (a controller's address) sends, unless it
    /// is of an earlier term, or of this term from another controller than
    /// the one that leads it (within a term, only its primary sends marks,
    /// and its floor moves both ways), or of another cluster than the one
    /// this agent serves. A mark of another cluster, read from the
    /// directory and not yet served, is set aside first, with a line.
    pub fn keep(&mut self, m: Mark, from: &str) -> Result<Kept> {
        let known = self.mark;
        if m.cluster.is_none() {
            // A controller alone (no other could take over) witnesses
            // nothing: the agent keeps the mark it holds, for its cluster.
            return Ok(Kept::Kept);
        }
        if known.cluster != m.cluster && !known.cluster.is_none() {
            if self.bound {
                return Ok(Kept::OtherCluster);
            }
            warn!(
                "set aside the mark of another cluster ({known}){}: controller {from} leads \
                 cluster {}",
                self.path
                    .as_ref()
                    .map(|p| format!(" kept in {}", p.display()))
                    .unwrap_or_default(),
                m.cluster
            );
            self.mark = Mark::default();
        } else if m.term < known.term
            || (m.term == known.term && known.leader != 0 && m.leader != known.leader)
        {
            return Ok(Kept::Past);
        }
        if m != self.mark {
            if let Some(path) = &self.path {
                // Written whole, then renamed: a crash leaves the old or the new.
                let tmp = path.with_extension("tmp");
                std::fs::write(
                    &tmp,
                    format!("{} {} {} {}\n", m.term, m.leader, m.floor, m.cluster),
                )
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, path))
                .and_then(|()| match path.parent() {
                    Some(dir) => std::fs::File::open(dir)?.sync_all(),
                    None => Ok(()),
                })
                .with_context(|| format!("cannot keep the mark in {}", path.display()))?;
            }
            self.mark = m;
        }
        self.bound = true;
        Ok(Kept::Kept)
    }
}

/// A mark file: "TERM LEADER FLOOR CLUSTER". One of three fields was
/// written before marks named their cluster: no controller of that
/// protocol can reach this agent, so it is set aside.
fn parse(text: &str, p: &Path) -> Result<Mark> {
    let f: Vec<&str> = text.split_whitespace().collect();
    let num = |s: &str| s.parse::<u64>().ok();
    match f[..] {
        [term, leader, floor, cluster] => {
            if let (Some(term), Some(leader), Some(floor), Ok(cluster)) =
                (num(term), num(leader), num(floor), cluster.parse())
            {
                if let Ok(leader) = u32::try_from(leader) {
                    return Ok(Mark {
                        cluster,
                        term,
                        leader,
                        floor,
                    });
                }
            }
        }
        [term, leader, floor] if [term, leader, floor].iter().all(|s| num(s).is_some()) => {
            warn!(
                "set aside the mark in {} (term {term}, leader {leader}): it was kept before \
                 marks named their cluster",
                p.display()
            );
            return Ok(Mark::default());
        }
        _ => {}
    }
    anyhow::bail!(
        "{}: not a mark (\"TERM LEADER FLOOR CLUSTER\"); remove it only if no controller of \
         its cluster runs a later term",
        p.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::wire::ClusterId;

    fn mark(cluster: u64, term: u64, leader: u32, floor: u64) -> Mark {
        Mark {
            cluster: ClusterId(cluster),
            term,
            leader,
            floor,
        }
    }

    #[test]
    fn a_mark_survives_a_restart_and_never_goes_back_a_term() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(w.mark(), Mark::default());
        assert!(!w.bound());
        assert_eq!(w.keep(mark(7, 2, 1, u64::MAX), "a").unwrap(), Kept::Kept);
        assert!(w.bound());
        assert_eq!(w.keep(mark(7, 2, 1, 0), "a").unwrap(), Kept::Kept);
        // An earlier term, or another leader of the same term: refused.
        assert_eq!(w.keep(mark(7, 1, 1, 0), "a").unwrap(), Kept::Past);
        assert_eq!(w.keep(mark(7, 2, 2, 0), "b").unwrap(), Kept::Past);
        assert_eq!(w.keep(mark(7, 3, 2, 0), "b").unwrap(), Kept::Kept);
        // Another cluster, once this one is served: refused whatever its term.
        assert_eq!(w.keep(mark(8, 9, 1, 0), "c").unwrap(), Kept::OtherCluster);
        let again = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(again.mark(), mark(7, 3, 2, 0));
        std::fs::write(dir.path().join(FILE), "garbage").unwrap();
        let e = Witness::open(Some(dir.path())).err().unwrap().to_string();
        assert!(e.contains("mark") && e.contains("not a mark"), "{e}");
    }

    #[test]
    fn what_an_earlier_cluster_left_is_set_aside_by_a_new_agent_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Witness::open(Some(dir.path())).unwrap();
        first.keep(mark(7, 2, 2, u64::MAX), "b").unwrap();
        // A new agent on the host, and a new cluster at its first term.
        let mut next = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(next.mark(), mark(7, 2, 2, u64::MAX));
        assert_eq!(next.keep(mark(9, 1, 1, u64::MAX), "a").unwrap(), Kept::Kept);
        assert_eq!(next.mark(), mark(9, 1, 1, u64::MAX));
        // Its own cluster's rules hold from then on, and the old one is refused.
        assert_eq!(
            next.keep(mark(7, 5, 1, 0), "x").unwrap(),
            Kept::OtherCluster
        );
        assert_eq!(next.keep(mark(9, 0, 1, 0), "a").unwrap(), Kept::Past);
        assert_eq!(
            Witness::open(Some(dir.path())).unwrap().mark(),
            mark(9, 1, 1, u64::MAX)
        );
        // A controller alone marks nothing: the mark held stays.
        assert_eq!(next.keep(Mark::default(), "alone").unwrap(), Kept::Kept);
        assert_eq!(next.mark(), mark(9, 1, 1, u64::MAX));
        // A mark of the same cluster read from the directory is honoured.
        let mut same = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(same.keep(mark(9, 0, 2, 0), "b").unwrap(), Kept::Past);
        // One kept before marks named their cluster is set aside.
        std::fs::write(dir.path().join(FILE), "2 2 18446744073709551615\n").unwrap();
        assert_eq!(
            Witness::open(Some(dir.path())).unwrap().mark(),
            Mark::default()
        );
    }
}
