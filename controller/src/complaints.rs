//! Failures that come back at every commit, such as a full or failing
//! disk under the journal. Each is logged once when it starts, then at
//! most once a minute with how often it came back meanwhile, and once
//! when it ends. A disk that fails for an hour under a steady stream of
//! submissions writes about sixty lines, not one per commit.

use std::time::{Duration, Instant};

/// How often a failure that keeps coming back is logged again.
const AGAIN: Duration = Duration::from_secs(60);

/// One kind of failure: whether it is failing now, and what of it the
/// log has not said yet.
pub(crate) struct Complaint {
    /// What fails, as the line that says it works again names it.
    what: &'static str,
    failing: Option<Failing>,
}

struct Failing {
    /// The last failure, as it was said.
    last: String,
    since: Instant,
    /// When the log last said it.
    said: Instant,
    /// Failures since the log last said it.
    unsaid: u64,
    /// Failures since it began.
    times: u64,
}

impl Complaint {
    pub(crate) fn new(what: &'static str) -> Complaint {
        Complaint {
            what,
            failing: None,
        }
    }

    /// It failed with `e` at `now`: the line to log, if one is due.
    pub(crate) fn failed(&mut self, e: &str, now: Instant) -> Option<String> {
        let Some(f) = &mut self.failing else {
            self.failing = Some(Failing {
                last: e.to_string(),
                since: now,
                said: now,
                unsaid: 0,
                times: 1,
            });
            return Some(e.to_string());
        };
        f.times += 1;
        f.unsaid += 1;
        e.clone_into(&mut f.last);
        if now.duration_since(f.said) < AGAIN {
            return None;
        }
        let line = format!(
            "{e} (again: {} failures in the last {} s)",
            f.unsaid,
            now.duration_since(f.said).as_secs()
        );
        f.said = now;
        f.unsaid = 0;
        Some(line)
    }

    /// The last failure, while it fails.
    pub(crate) fn failing(&self) -> Option<&str> {
        self.failing.as_ref().map(|f| f.last.as_str())
    }

    /// It worked at `now`: the line to log if it was failing.
    pub(crate) fn worked(&mut self, now: Instant) -> Option<String> {
        let f = self.failing.take()?;
        Some(format!(
            "{} works again, after {} failures over {} s",
            self.what,
            f.times,
            now.duration_since(f.since).as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_that_keeps_coming_back_is_said_once_a_minute_and_its_end_once() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = Complaint::new("the journal's write");
        assert_eq!(c.worked(at(0)), None, "nothing to say of what never failed");
        assert_eq!(c.failing(), None);
        assert_eq!(c.failed("disk full", at(1)).as_deref(), Some("disk full"));
        assert_eq!(c.failing(), Some("disk full"));
        // Every commit for the next minute fails silently...
        for s in 2..61 {
            assert_eq!(c.failed("disk full", at(s)), None);
        }
        // ... and the first past it says how often.
        assert_eq!(
            c.failed("disk full", at(61)).as_deref(),
            Some("disk full (again: 60 failures in the last 60 s)")
        );
        assert_eq!(c.failed("disk full", at(62)), None);
        assert_eq!(
            c.worked(at(70)).as_deref(),
            Some("the journal's write works again, after 62 failures over 69 s")
        );
        assert_eq!(c.failing(), None);
        assert_eq!(c.worked(at(71)), None);
        // A new failure is said at once.
        assert_eq!(c.failed("disk full", at(72)).as_deref(), Some("disk full"));
    }
}
