//! The built-in policy: each pass, gang time-slicing, preemption by
//! suspension, resumption, then a base policy for the rest of the queue
//! (see the module docs of [`crate::policy`]).

use std::collections::HashSet;

use super::alloc::Free;
use super::easy::{decided_ends, easy};
use super::fcfs::fcfs;
use super::gang::rotate;
use super::preempt::{preempt, resume};
use super::{Decisions, Entry, Policy, Preemption, View};

/// `fcfs`: the built-in policy with the FCFS base.
pub const FCFS: Entry = Entry {
    name: "fcfs",
    about: "first come, first served, with gang time-slicing and preemption",
    suspends: true,
    make: |c| {
        Box::new(Standard {
            base: Base::Fcfs,
            preemption: c.preemption,
        })
    },
};

/// `easy` (the default): the built-in policy with the EASY base.
pub const EASY: Entry = Entry {
    name: "easy",
    about: "EASY backfilling, with gang time-slicing and preemption",
    suspends: true,
    make: |c| {
        Box::new(Standard {
            base: Base::Easy,
            preemption: c.preemption,
        })
    },
};

/// The base policy for starting jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// Start jobs in queue order while they fit; the first that does not
    /// fit blocks everything behind it.
    Fcfs,
    /// EASY backfilling: once the queue's head is blocked it gets a
    /// reservation (the earliest time enough cores free up, from the
    /// running jobs' expected ends), and a later job may start now only if
    /// it cannot delay that reservation: it ends before the reserved start,
    /// or it uses only cores the head will not need then. The reservation
    /// counts cores, not memory.
    Easy,
}

/// The built-in policy (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standard {
    pub base: Base,
    /// What higher-priority partitions' jobs do to lower-priority ones.
    pub preemption: Preemption,
}

impl Policy for Standard {
    fn decide(&self, v: &View) -> Decisions {
        let mut free = Free::new(v);
        let mut out = Decisions::default();
        // Jobs already decided on in this pass.
        let mut done: HashSet<u64> = HashSet::new();
        for p in 0..v.partitions.len() {
            if v.partitions[p].gang.is_some_and(|g| g.oversubscribe > 1) {
                rotate(v, p, &mut free, &mut out, &mut done);
            }
        }
        if self.preemption != Preemption::Off {
            preempt(v, self.preemption, &mut free, &mut out, &mut done);
        }
        resume(v, &mut free, &mut out, &mut done);
        match self.base {
            Base::Fcfs => fcfs(v, &mut free, &mut out, &done),
            Base::Easy => {
                let earlier = decided_ends(v, &out.list);
                easy(v, &mut free, &mut out, &done, earlier);
            }
        }
        out
    }
}
