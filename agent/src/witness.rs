//! The mark an agent keeps as a witness for the controllers
//! (docs/faults.md, "Takeover"): the highest term it has seen, and the
//! least journal entry a controller must hold to take over from that
//! term's primary. It is kept in the agent's record directory, so that an
//! agent that restarts still refuses a controller of a past term.

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
                    match (it.next(), it.next(), it.next()) {
                        (Some(Ok(term)), Some(Ok(floor)), None) => mark = Mark { term, floor },
                        _ => anyhow::bail!(
                            "{}: not a mark (\"TERM FLOOR\"); remove it only if no controller of \
                             this cluster runs a later term",
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

    /// Keeps `m` unless it is of an earlier term (within a term, only its
    /// primary sends marks, and its floor moves both ways). False when
    /// refused.
    pub fn keep(&mut self, m: Mark) -> Result<bool> {
        if m.term < self.mark.term {
            return Ok(false);
        }
        if m == self.mark {
            return Ok(true);
        }
        if let Some(path) = &self.path {
            // Written whole, then renamed: a crash leaves the old or the new.
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, format!("{} {}\n", m.term, m.floor))
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, path))
                .with_context(|| format!("cannot keep the mark in {}", path.display()))?;
        }
        self.mark = m;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_survives_a_restart_and_never_goes_back_a_term() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(w.mark(), Mark::default());
        assert!(w
            .keep(Mark {
                term: 2,
                floor: u64::MAX
            })
            .unwrap());
        assert!(w.keep(Mark { term: 2, floor: 0 }).unwrap());
        assert!(!w.keep(Mark { term: 1, floor: 0 }).unwrap());
        let again = Witness::open(Some(dir.path())).unwrap();
        assert_eq!(again.mark(), Mark { term: 2, floor: 0 });
        std::fs::write(dir.path().join(FILE), "garbage").unwrap();
        let e = Witness::open(Some(dir.path())).err().unwrap().to_string();
        assert!(e.contains("mark") && e.contains("not a mark"), "{e}");
    }
}
