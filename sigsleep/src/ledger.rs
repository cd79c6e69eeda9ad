//! The job's accounting: turns signal events into suspensions and says when
//! the job is due to end. Pure logic, no system calls, so it is unit-tested.

use formats::record::{Flags, Status, Suspension};

use crate::clock::Stamp;

/// What the signal handlers observed, in the order they ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `SIGTSTP`: the job is being suspended.
    Suspend(Stamp),
    /// `SIGCONT`: the job runs again.
    Resume(Stamp),
    /// `SIGTERM` or `SIGINT` (the signal number): end now, cancelled.
    Terminate(Stamp, i32),
}

/// The time to count, and whether it is the limit's: the run time, or
/// the wall-time limit (0: none) when that is shorter.
fn target(runtime: u64, walltime: u64) -> (i64, bool) {
    let limited = walltime > 0 && walltime < runtime;
    let target = if limited { walltime } else { runtime };
    (i64::try_from(target).unwrap_or(i64::MAX), limited)
}

/// Counted time and suspensions of one job.
#[derive(Debug)]
pub struct Ledger {
    start: Stamp,
    /// Unsuspended nanoseconds to count before the job ends: the requested
    /// run time, or the wall-time limit when that is shorter.
    target: i64,
    /// Whether reaching `target` means the wall-time limit cut the job short.
    limited: bool,
    /// The run time asked, which a new limit is weighed against.
    runtime: u64,
    /// Monotonic nanoseconds spent in closed suspensions.
    suspended: i64,
    /// Start of the suspension in progress, if any.
    open: Option<Stamp>,
    suspensions: Vec<Suspension>,
    flags: Flags,
    /// The signal that asked the job to end early.
    terminated_by: Option<i32>,
    /// The latest instant the deadline was set from: the start, a
    /// resumption, a new limit already past. A job is never due before it.
    known: Stamp,
    /// Whether a stop that came past the due instant counts from it: a
    /// sleep's, whose process was only late to end; not a program's,
    /// which runs until its supervisor ends it.
    stops_by_due: bool,
}

/// How the job ended, ready to be written as a record.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    pub flags: Flags,
    pub suspensions: Vec<Suspension>,
    /// The signal that cancelled the job, if one did.
    pub terminated_by: Option<i32>,
}

impl Ledger {
    /// `runtime` and `walltime` in nanoseconds; a `walltime` of 0 is no limit.
    pub fn new(start: Stamp, runtime: u64, walltime: u64) -> Ledger {
        let (target, limited) = target(runtime, walltime);
        Ledger {
            start,
            target,
            limited,
            runtime,
            suspended: 0,
            open: None,
            // Room for a few suspensions so that the common case never
            // reallocates while the job runs.
            suspensions: Vec::with_capacity(8),
            flags: Flags::default(),
            terminated_by: None,
            known: start,
            stops_by_due: true,
        }
    }

    /// The job is a program: it runs, and may be stopped, until its
    /// supervisor ends it, past its limit as well.
    pub fn run_past_due(&mut self) {
        self.stops_by_due = false;
    }

    /// A new wall-time limit (0: none), counted from the start as the
    /// old one was, learnt at `at`. Already past, the job is due at once,
    /// at `at`. One that comes once a running job was due (its process not
    /// yet woken to end it) changes nothing: that job is over.
    pub fn set_walltime(&mut self, walltime: u64, at: Stamp) {
        let at = self.on_start_clock(at);
        if self.open.is_none() && self.stops_by_due && self.running_deadline() < at.mono {
            return;
        }
        (self.target, self.limited) = target(self.runtime, walltime);
        if self.running_deadline() < at.mono {
            self.learn(at);
        }
    }

    fn learn(&mut self, at: Stamp) {
        if at.mono > self.known.mono {
            self.known = at;
        }
    }

    /// When the job ended, its process having woken at `now` to end it. A
    /// job that counted its time ended when it was due: a process woken
    /// late, on a busy host, is late by the host's doing, not by its job's
    /// run, as a job ended by a batch system's limit ends at the limit.
    /// That instant is never before the deadline was known (a limit
    /// lowered below what had run, a resumption past the deadline), nor
    /// after `now`. A cancelled job ended at `now`.
    pub fn end_at(&self, now: Stamp) -> Stamp {
        let now = self.on_start_clock(now);
        if self.terminated_by.is_some() || self.open.is_some() {
            return now;
        }
        let due = self.due();
        if due.mono >= now.mono {
            return now;
        }
        due
    }

    /// The instant the running job is due to end, never before the
    /// deadline was known.
    fn due(&self) -> Stamp {
        self.at_mono(self.running_deadline().max(self.known.mono))
    }

    /// Instant `at` on the wall clock as the start read it: the start's
    /// wall-clock instant plus the monotonic time since. The two clocks
    /// are read one after the other, so each reading has its own offset
    /// between them; taken from one, every instant of the record agrees
    /// with the others to the nanosecond, and a completed sleep's run is
    /// its run time exactly.
    fn on_start_clock(&self, at: Stamp) -> Stamp {
        self.at_mono(at.mono)
    }

    /// The monotonic instant `mono` on the start's wall clock.
    fn at_mono(&self, mono: i64) -> Stamp {
        Stamp {
            real: self
                .start
                .real
                .saturating_add(mono.saturating_sub(self.start.mono)),
            mono,
        }
    }

    pub fn flag(&mut self, f: Flags) {
        self.flags.insert(f);
    }

    /// Monotonic instant at which the job has counted its time, or `None`
    /// while it is suspended (it then waits for `SIGCONT` without limit).
    pub fn deadline(&self) -> Option<i64> {
        match self.open {
            Some(_) => None,
            None => Some(self.running_deadline()),
        }
    }

    fn running_deadline(&self) -> i64 {
        self.start
            .mono
            .saturating_add(self.target)
            .saturating_add(self.suspended)
    }

    pub fn terminated_by(&self) -> Option<i32> {
        self.terminated_by
    }

    pub fn apply(&mut self, ev: Event) {
        let ev = match ev {
            Event::Suspend(at) => Event::Suspend(self.on_start_clock(at)),
            Event::Resume(at) => Event::Resume(self.on_start_clock(at)),
            Event::Terminate(at, sig) => Event::Terminate(self.on_start_clock(at), sig),
        };
        match ev {
            Event::Suspend(at) => {
                // A second SIGTSTP while suspended (a launcher repeating
                // itself) changes nothing: the first instant stands.
                if self.open.is_none() {
                    // One that found a sleep past its due end (its process
                    // not yet woken to end it) suspends it from there: it
                    // ran its run time, no more.
                    let due = self.due();
                    let late = self.stops_by_due && at.mono > due.mono;
                    self.open = Some(if late { due } else { at });
                }
            }
            Event::Resume(at) => {
                self.learn(at);
                match self.open.take() {
                    Some(from) => self.close(from, at),
                    None => {
                        // A SIGCONT with no SIGTSTP before it: a bare SIGSTOP
                        // stopped the job unseen (or a resume overtook its
                        // suspend, which the kernel then discarded). A stop
                        // began at some unknown instant before `at`, but not
                        // after the deadline: had the job been running then, it
                        // would have ended. Take the latest possible start, so
                        // the job is never made longer than asked; that leaves
                        // a suspension only if the deadline passed meanwhile.
                        self.flags.insert(Flags::BARE_STOP);
                        let from_mono = at.mono.min(self.running_deadline()).max(self.start.mono);
                        if from_mono < at.mono {
                            self.close(self.at_mono(from_mono), at);
                        }
                    }
                }
            }
            Event::Terminate(_, sig) => {
                if self.terminated_by.is_none() {
                    self.terminated_by = Some(sig);
                }
            }
        }
    }

    fn close(&mut self, from: Stamp, to: Stamp) {
        self.suspended += (to.mono - from.mono).max(0);
        self.suspensions.push(Suspension {
            suspend: from.real,
            resume: to.real,
        });
    }

    /// Closes the books at `end`. A suspension still open (the job was
    /// cancelled while suspended) ends at `end`.
    pub fn finish(mut self, end: Stamp) -> Outcome {
        let end = self.on_start_clock(end);
        if let Some(from) = self.open.take() {
            self.close(from, end);
        }
        let status = if self.terminated_by.is_some() {
            Status::Cancelled
        } else if self.limited {
            Status::Timeout
        } else {
            Status::Completed
        };
        Outcome {
            status,
            flags: self.flags,
            suspensions: self.suspensions,
            terminated_by: self.terminated_by,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    /// Wall clock runs 1,000,000 s ahead of the monotonic clock here.
    fn at(secs: i64) -> Stamp {
        Stamp {
            real: (1_000_000 + secs) * S,
            mono: secs * S,
        }
    }

    #[test]
    fn deadline_moves_by_each_suspension() {
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        assert_eq!(l.deadline(), Some(10 * S));
        l.apply(Event::Suspend(at(2)));
        assert_eq!(l.deadline(), None);
        l.apply(Event::Resume(at(5)));
        assert_eq!(l.deadline(), Some(13 * S));
        l.apply(Event::Suspend(at(6)));
        l.apply(Event::Resume(at(7)));
        assert_eq!(l.deadline(), Some(14 * S));
        let out = l.finish(at(14));
        assert_eq!(out.status, Status::Completed);
        assert_eq!(
            out.suspensions,
            vec![
                Suspension {
                    suspend: at(2).real,
                    resume: at(5).real
                },
                Suspension {
                    suspend: at(6).real,
                    resume: at(7).real
                },
            ]
        );
        assert_eq!(out.flags, Flags::default());
    }

    #[test]
    fn slurm_sequence_is_one_suspension() {
        // SIGTSTP, then SIGSTOP 2 s later (invisible), then SIGCONT.
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Suspend(at(1)));
        l.apply(Event::Resume(at(4)));
        let out = l.finish(at(13));
        assert_eq!(out.suspensions.len(), 1);
        assert!(!out.flags.contains(Flags::BARE_STOP));
    }

    #[test]
    fn bare_stop_before_the_deadline_is_flagged_with_no_time_claimed() {
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Resume(at(6)));
        assert_eq!(l.deadline(), Some(10 * S));
        let out = l.finish(at(10));
        assert!(out.flags.contains(Flags::BARE_STOP));
        assert_eq!(out.suspensions, vec![]);
    }

    #[test]
    fn bare_stop_across_the_deadline_counts_the_time_past_it() {
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Resume(at(25)));
        assert_eq!(l.deadline(), Some(25 * S));
        let out = l.finish(at(25));
        assert_eq!(
            out.suspensions,
            vec![Suspension {
                suspend: at(10).real,
                resume: at(25).real
            }]
        );
    }

    #[test]
    fn terminate_while_suspended_closes_the_suspension_at_the_end() {
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Suspend(at(3)));
        l.apply(Event::Terminate(at(8), libc::SIGTERM));
        l.apply(Event::Resume(at(8)));
        assert_eq!(l.terminated_by(), Some(libc::SIGTERM));
        let out = l.finish(at(8));
        assert_eq!(out.status, Status::Cancelled);
        assert_eq!(out.suspensions.len(), 1);
        assert_eq!(out.suspensions[0].resume, at(8).real);
    }

    #[test]
    fn wall_time_shorter_than_run_time_ends_in_timeout() {
        let l = Ledger::new(at(0), 100 * S as u64, 30 * S as u64);
        assert_eq!(l.deadline(), Some(30 * S));
        assert_eq!(l.finish(at(30)).status, Status::Timeout);
        let l = Ledger::new(at(0), 30 * S as u64, 30 * S as u64);
        assert_eq!(l.finish(at(30)).status, Status::Completed);
    }

    #[test]
    fn a_new_limit_moves_the_deadline_and_says_how_it_ends() {
        let mut l = Ledger::new(at(0), 100 * S as u64, 30 * S as u64);
        l.apply(Event::Suspend(at(10)));
        l.apply(Event::Resume(at(15)));
        // Raised: counted from the start, suspensions left out.
        l.set_walltime(60 * S as u64, at(16));
        assert_eq!(l.deadline(), Some(65 * S));
        // Lifted: the run time is the end, and the job completes.
        l.set_walltime(0, at(17));
        assert_eq!(l.deadline(), Some(105 * S));
        // Lowered below what ran: due at once, a timeout.
        l.set_walltime(5 * S as u64, at(18));
        assert_eq!(l.deadline(), Some(10 * S));
        assert_eq!(l.finish(at(20)).status, Status::Timeout);
        let mut l = Ledger::new(at(0), 100 * S as u64, 30 * S as u64);
        l.set_walltime(0, at(1));
        assert_eq!(l.finish(at(100)).status, Status::Completed);
    }

    #[test]
    fn repeated_suspend_keeps_the_first_instant() {
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Suspend(at(1)));
        l.apply(Event::Suspend(at(2)));
        l.apply(Event::Resume(at(3)));
        assert_eq!(l.deadline(), Some(12 * S));
    }

    #[test]
    fn a_job_that_counted_its_time_ended_when_it_was_due() {
        let ms = |secs: i64, ms: i64| Stamp {
            real: at(secs).real + ms * 1_000_000,
            mono: at(secs).mono + ms * 1_000_000,
        };
        // Woken 3 ms late: its run is its run time, suspensions apart.
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Suspend(at(2)));
        l.apply(Event::Resume(at(5)));
        assert_eq!(l.end_at(ms(13, 3)), at(13));
        // On time, or early (the wall clock read first): as read.
        assert_eq!(l.end_at(ms(12, 999)), ms(12, 999));
        // At its limit, as at its run time.
        let l = Ledger::new(at(0), 100 * S as u64, 30 * S as u64);
        assert_eq!(l.end_at(ms(30, 2)), at(30));
        // A limit lowered below what had run ends it when it came.
        let mut l = Ledger::new(at(0), 100 * S as u64, 0);
        l.set_walltime(5 * S as u64, at(20));
        assert_eq!(l.end_at(ms(20, 1)), at(20));
        // One that comes after the deadline, before the process woke:
        // the job was over.
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.set_walltime(60 * S as u64, ms(10, 1));
        assert_eq!(l.end_at(ms(10, 2)), at(10));
        l.set_walltime(5 * S as u64, ms(10, 1));
        assert_eq!(l.end_at(ms(10, 2)), at(10));
        assert_eq!(l.finish(ms(10, 2)).status, Status::Completed);
        // Suspended once past its due end (before its process woke to end
        // it): suspended from there, and ended when let go again.
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Suspend(ms(10, 2)));
        l.apply(Event::Resume(at(12)));
        assert_eq!(l.end_at(ms(12, 1)), at(12));
        let out = l.finish(at(12));
        assert_eq!(
            out.suspensions,
            vec![Suspension {
                suspend: at(10).real,
                resume: at(12).real
            }]
        );
        // A program's stop is when it came: it ran until then.
        let mut l = Ledger::new(at(0), u64::MAX, 10 * S as u64);
        l.run_past_due();
        l.apply(Event::Suspend(ms(10, 2)));
        l.apply(Event::Resume(at(12)));
        assert_eq!(l.finish(at(12)).suspensions[0].suspend, ms(10, 2).real);
        // Cancelled: when it was told.
        let mut l = Ledger::new(at(0), 10 * S as u64, 0);
        l.apply(Event::Terminate(at(4), libc::SIGTERM));
        assert_eq!(l.end_at(ms(4, 1)), ms(4, 1));
    }
}
