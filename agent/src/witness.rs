//! The mark an agent keeps as a witness for the controllers
//! (docs/faults.md, "Takeover"): the highest term it has seen, and the
//! least journal entry a controller must hold to take over from that
//! term's primary. It is kept in the agent's record directory, so that an
//! agent that restarts still refuses a controller of a past term.

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
}

impl Witness {
    /// The mark kept in `dir`, if any.
    pub fn open(dir: Option<&Path>) -> Witness {
        let path = dir.map(|d| d.join(FILE));
        let mark = path
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| {
                let mut it = text.split_whitespace().map(str::parse::<u64>);
                match (it.next(), it.next()) {
                    (Some(Ok(term)), Some(Ok(floor))) => Some(Mark { term, floor }),
                    _ => {
                        warn!("the agent's mark file is damaged: starting from term 0");
                        None
                    }
                }
            })
            .unwrap_or_default();
        Witness { path, mark }
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
