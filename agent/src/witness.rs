//! The mark an agent keeps as a witness for the controllers
//! (docs/faults.md, "Takeover"): the highest term it has seen, the
//! controller that leads in it, and the least journal entry another
//! controller must hold to take over from it. It is kept in the agent's
//! record directory, so that an agent that restarts still refuses a
//! controller of a past term.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use formats::wire::Mark;

/// Name of the file in the record directory.
const FILE: &str = "mark";

pub struct Witness {
    /// Where the mark is kept; `None` for an agent in the controller's own
    /// process, which lives and dies with it.
    path: Option<PathBuf>,
    mark: Mark,
}

impl Witness {
    /// The mark kept in `dir`, if any. A damaged one is an error: an agent
    /// that forgot its term could take orders from a deposed controller.
    pub fn open(dir: Option<&Path>) -> Result<Witness> {
        let path = dir.map(|d| d.join(FILE));
        let mut mark = Mark::default();
        if let Some(p) = &path {
            match std::fs::read_to_string(p) {
                Ok(text) => {
                    let mut it = text.split_whitespace().map(str::parse::<u64>);
                    match (it.next(), it.next(), it.next(), it.next()) {
                        (Some(Ok(term)), Some(Ok(leader)), Some(Ok(floor)), None)
                            if leader <= u64::from(u32::MAX) =>
                        {
                            mark = Mark {
                                term,
                                leader: leader as u32,
                                floor,
                            }
                        }
                        _ => anyhow::bail!(
                            "{}: not a mark (\"TERM LEADER FLOOR\"); remove it only if no \
                             controller of this cluster runs a later term",
                            p.display()
                        ),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
            }
        }
        Ok(Witness { path, mark })
    }

    pub fn mark(&self) -> Mark {
        self.mark
    }

    /// Keeps `m` unless it is of an earlier term, or of this term from
    /// another controller than the one that leads it (within a term, only
    /// its primary sends marks, and its floor moves both ways). False when
    /// refused.
    pub fn keep(&mut self, m: Mark) -> Result<bool> {
        let known = self.mark;
        if m.term < known.term
            || (m.term == known.term && known.leader != 0 && m.leader != known.leader)
        {
            return Ok(false);
        }
        if m == self.mark {
            return Ok(true);
        }
        if let Some(path) = &self.path {
            // Written whole, then renamed: a crash leaves the old or the new.
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, format!("{} {} {}\n", m.term, m.leader, m.floor))
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, path))
                .and_then(|()| match path.parent() {
                    Some(dir) => std::fs::File::open(dir)?.sync_all(),
                    None => Ok(()),
                })
                .with_context(|| format!("cannot keep the mark in {}", path.display()))?;
        }
        self.mark = m;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(term: u64, leader: u32, floor: u64) -> Mark {
        Mark {
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
        assert!(w.keep(mark(2, 1, u64::MAX)).unwrap());
        assert!(w.keep(mark(2, 1, 0)).unwrap());
        // An earlier term, or another leader of the same term: refused.
        assert!(!w.keep(mark(1, 1, 0)).unwrap());
        assert!(!w.keep(mark(2, 2, 0)).unwrap());
        assert!(w.keep(mark(3, 2, 0)).unwrap());
        let again = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(again.mark(), mark(3, 2, 0));
        std::fs::write(dir.path().join(FILE), "garbage").unwrap();
        let e = Witness::open(Some(dir.path())).err().unwrap().to_string();
        assert!(e.contains("mark") && e.contains("not a mark"), "{e}");
    }
}
