//! The scheduler driver: when a pass runs, and running it. The server
//! and the twin both use it, on their own clocks, so passes follow the
//! same rules in the emulation and in virtual time.

use std::time::{Duration, Instant};

use tracing::{debug, debug_span};

use formats::wire::ToAgent;

use super::{Cluster, Effects, Now};
use crate::policy::{Decision, Policy};

/// A wake-up closer than this is not looked ahead to: a process started
/// now would hardly be ready sooner than one started at the turn.
const LOOK_AHEAD_MIN_NS: i64 = 2_000_000;
/// How long past the wake-up a process started ahead waits to be claimed
/// (the pass may run late) before its agent kills it.
const CLAIM_GRACE_NS: i64 = 1_000_000_000;

pub struct Scheduler {
    policy: Box<dyn Policy>,
    /// Least time between two passes, in ns.
    interval: i64,
    /// When (monotonic ns) the last pass that decided something ran.
    last_pass: Option<i64>,
    /// When the policy asked to be asked again (gang time slices).
    wake_at: Option<i64>,
    /// Why the policy can decide nothing more, once it cannot.
    failed: Option<String>,
    /// Whether to start ahead the processes of the jobs the policy will
    /// start at its wake-up (the emulation; the twin has no processes).
    look_ahead: bool,
    /// The wake-up last looked ahead to: once each.
    looked_ahead_to: Option<i64>,
}

impl Scheduler {
    pub fn new(policy: Box<dyn Policy>, interval: Duration) -> Scheduler {
        Scheduler {
            policy,
            interval: interval.as_nanos().min(i64::MAX as u128) as i64,
            last_pass: None,
            wake_at: None,
            failed: None,
            look_ahead: false,
            looked_ahead_to: None,
        }
    }

    /// Has the processes of the jobs the policy will start at the wake-up
    /// it asks for started ahead of it, held (`[controller] prestart`).
    pub fn looking_ahead(mut self, on: bool) -> Scheduler {
        self.look_ahead = on;
        self
    }

    /// Readies the cluster for this scheduler's policy: one that relays
    /// events to an external scheduler has them kept.
    pub fn attach(&self, cluster: &mut Cluster) {
        if self.policy.wants_events() {
            cluster.keep_events();
        }
    }

    /// Why the policy stopped deciding, if it did (an external scheduler
    /// that died or stopped answering). Then the jobs it had not started,
    /// or had suspended, were cancelled: none could ever run again.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Whether a pass follows every event (an interval of 0), rather than
    /// every instant: a job's end is seen alone, as a scheduler that
    /// reacts to each event sees it.
    pub fn every_event(&self) -> bool {
        self.interval == 0
    }

    /// The policy's figures for the run's manifest.
    pub fn report(&self) -> Option<formats::scheduler::SchedulerReport> {
        self.policy.report()
    }

    /// When (monotonic ns) the next pass is due, or `None` while nothing
    /// asks for one: as soon as the interval allows after something that
    /// may let a job start happened; else when the policy asked to be
    /// woken, and never twice at one instant.
    pub fn due(&self, cluster: &Cluster) -> Option<i64> {
        let earliest = self
            .last_pass
            .map_or(i64::MIN, |t| t.saturating_add(self.interval));
        if self.failed.is_some() {
            // Only to cancel what is submitted still (the twin submits
            // on; the server refuses), or released from a wait.
            return cluster
                .pending()
                .next()
                .or_else(|| cluster.waiting_outside().next())
                .map(|_| earliest);
        }
        if cluster.wants_pass || cluster.has_events() {
            return Some(earliest);
        }
        let after_last = self.last_pass.map_or(i64::MIN, |t| t.saturating_add(1));
        // A held job's release is a submission: it comes at its instant,
        // not the interval's.
        let woken = self.wake_at.map(|w| w.max(earliest).max(after_last));
        match (woken, cluster.next_release()) {
            (Some(w), Some(r)) => Some(w.min(r)),
            (w, r) => w.or(r),
        }
    }

    /// A scheduling pass at `now`: the policy's decisions carried out
    /// through `fx`. False if it was skipped with nothing to decide (then
    /// it does not count against the interval).
    pub fn pass<F: Effects>(&mut self, cluster: &mut Cluster, now: Now, fx: &mut F) -> bool {
        let took = Instant::now();
        cluster.release_due(now, fx);
        if self
            .last_pass
            .is_some_and(|t| now.mono < t.saturating_add(self.interval))
        {
            // Woken for a release only: the pass it wants follows when the
            // interval allows, as for any submission.
            return false;
        }
        cluster.wants_pass = false;
        let woken = self.wake_at.is_some_and(|w| w <= now.mono);
        if self.failed.is_some() {
            // Nothing decides any more: a job submitted or released since
            // could never start.
            let late: Vec<u64> = cluster.pending().chain(cluster.waiting_outside()).collect();
            if late.is_empty() {
                return false;
            }
            cluster.cancel(&late, now, fx);
            return true;
        }
        if !cluster.anything_waits() && !woken && !cluster.has_events() {
            // Nothing waits: no policy could start, resume or rotate
            // anything.
            self.wake_at = None;
            return false;
        }
        let span = debug_span!(
            "pass",
            n = cluster.counters.passes + 1,
            decisions = tracing::field::Empty
        );
        let _in = span.enter();
        self.last_pass = Some(now.mono);
        let mut view = cluster.view(now);
        view.happened = cluster.take_events();
        let decisions = self.policy.decide(&view);
        let queued = view.queue.len();
        // The view shares the queue and the active jobs with the cluster:
        // held while the decisions are applied, it would make every
        // change copy them whole (each active job's allocation with it).
        drop(view);
        let n = decisions.list.len();
        span.record("decisions", n);
        self.wake_at = decisions.wake_at_ns;
        let refused = cluster.apply(decisions.list, now, fx);
        if !refused.is_empty() {
            self.policy.refused(&refused);
        }
        if let Some(why) = self.policy.failure() {
            // Jobs only the policy could start or resume: none ever will.
            let orphans: Vec<u64> = cluster
                .pending()
                .chain(cluster.policy_suspended())
                .chain(cluster.waiting_outside())
                .collect();
            tracing::error!(
                cancelled = orphans.len(),
                "the scheduler stopped deciding: {why}; its waiting and suspended jobs are \
                 cancelled, its running ones go on to their end"
            );
            self.failed = Some(why);
            cluster.forget_events();
            cluster.cancel(&orphans, now, fx);
        }
        let took = took.elapsed();
        cluster.counters.pass(took);
        debug!(queued, decisions = n, ?took, "scheduling pass");
        true
    }

    /// Whether [`Scheduler::prepare_ahead`] has something to do: looking
    /// ahead is on, the policy asked to be woken at a time not looked
    /// ahead to yet, and jobs are pending.
    pub fn ahead_due(&self, cluster: &Cluster) -> bool {
        self.look_ahead
            && self.failed.is_none()
            && self.wake_at.is_some()
            && self.wake_at != self.looked_ahead_to
            && cluster.pending().next().is_some()
            && self.policy.may_look_ahead()
    }

    /// Runs the policy on the cluster as it will be at the wake-up it asked
    /// for, if nothing happens before, and has the processes of the jobs it
    /// would start then started now, held: at the turn, a start is a
    /// `SIGCONT` rather than a process to spawn (a few hundred
    /// microseconds each, one after another). Only a guess: the turn's own
    /// pass decides, and a process it does not claim is killed without a
    /// record. Once per wake-up; the server calls it after the pass's own
    /// orders have left.
    pub fn prepare_ahead<F: Effects>(&mut self, cluster: &Cluster, now: Now, fx: &mut F) {
        if !self.ahead_due(cluster) {
            return;
        }
        let Some(at) = self.wake_at else { return };
        self.looked_ahead_to = Some(at);
        if at - now.mono < LOOK_AHEAD_MIN_NS {
            return;
        }
        let then = Now {
            mono: at,
            wall: now.wall.saturating_add(at - now.mono),
        };
        let view = cluster.view(then);
        let decisions = self.policy.decide(&view);
        drop(view);
        let claim_within_ms = ((at - now.mono)
            .saturating_add(self.interval)
            .saturating_add(CLAIM_GRACE_NS)
            / 1_000_000)
            .clamp(0, u32::MAX.into()) as u32;
        for d in decisions.list {
            if let Decision::Start { job, alloc } = d {
                if let Some((agent, start)) = cluster.start_order_ahead(job, &alloc) {
                    fx.to_agent(
                        agent,
                        ToAgent::Prepare {
                            start,
                            claim_within_ms,
                        },
                    );
                }
            }
        }
    }
}
