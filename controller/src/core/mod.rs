//! The scheduling core: the cluster's tables and the only code that
//! changes them, shared by the emulation (`server`), the virtual-time twin
//! (`sim`) and a restart (`restore`).
//!
//! # How it works
//!
//! [`Cluster`] owns the tables (`tables.rs`): nodes, jobs, the queue and
//! active jobs as policies see them, agents, counters. Its fields are
//! private to this module; everything outside reads them through methods
//! (`reads.rs`) and changes them through transitions:
//!
//! - `jobs.rs`: submit, start, suspend, resume, cancel, end, and
//!   carrying out a policy's decisions, each checked first;
//! - `agents.rs`: agents registering, reporting, going silent,
//!   and what happens to their jobs; drains; shutdown;
//! - `changes.rs`: the state changes themselves, one function each. The
//!   transitions above call them after their checks; a restart calls the
//!   same functions for each journal entry (`restore.rs`), so a change is
//!   written once.
//!
//! What a transition wants done outside the tables leaves through one
//! interface, [`Effects`]: orders to agents, journal entries, ends to
//! acknowledge. The server implements it with its agent links and journal;
//! the twin with its event queue of simulated processes.
//!
//! [`Scheduler`] is the one driver of scheduling: it says when a pass is
//! due (something changed, at most once per `schedule_interval`, or when
//! the policy asked to be woken) and runs it: a [`View`](crate::policy::View)
//! of the tables to the policy, its decisions back through the checked
//! transitions. The server and the twin both call it; only their clocks
//! differ.

mod agents;
mod ahead;
mod changes;
mod effects;
mod jobs;
mod programs;
mod reads;
mod restore;
mod scheduler;
mod tables;

#[cfg(test)]
mod tests;

pub use ahead::Expected;
pub use effects::{Discard, Effects};
pub use scheduler::Scheduler;
pub use tables::{AgentId, Cluster, HISTORY};

use std::time::Duration;

/// An instant on both clocks the core uses: `mono` (nanoseconds on a
/// monotonic clock, what durations and policies use) and `wall`
/// (CLOCK_REALTIME nanoseconds, what users and records see). The server
/// reads the real clocks; the twin makes them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub mono: i64,
    pub wall: i64,
}

/// The server's clock: monotonic nanoseconds since it started.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Now {
        Now {
            mono: self.epoch.elapsed().as_nanos() as i64,
            wall: wall_ns(),
        }
    }

    /// The real instant of monotonic time `mono`.
    pub fn instant(&self, mono: i64) -> std::time::Instant {
        self.epoch + Duration::from_nanos(mono.max(0) as u64)
    }
}

/// CLOCK_REALTIME nanoseconds now.
pub fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}
