//! The scheduler driver: when a pass runs, and running it. The server
//! and the twin both use it, on their own clocks, so passes follow the
//! same rules in the emulation and in virtual time.

use std::time::{Duration, Instant};

use tracing::{debug, debug_span};

use formats::wire::ToAgent;

use super::ahead::Expected;
use super::{Cluster, Effects, Now};
use crate::policy::{Decision, Policy};

/// A wake-up closer than this is not looked ahead to: a process started
/// now would hardly be ready sooner than one started at the turn.
const LOOK_AHEAD_MIN_NS: i64 = 2_000_000;
/// How long past the wake-up a process started ahead waits to be claimed
/// (the pass may run late) before its agent kills it.
const CLAIM_GRACE_NS: i64 = 1_000_000_000;
/// How far ahead of the next expected end of a job its pass is prepared:
/// time enough for the processes to be started (a millisecond or two
/// each, one after another), little enough that the guess seldom goes
/// stale, and no process is held for long.
const ENDS_AHEAD_NS: i64 = 100_000_000;
/// Ends this close to the next one are taken with it: a pass would most
/// likely see them over together.
const ENDS_TOGETHER_NS: i64 = 200_000;

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
    /// The expected events last prepared for, and the queue's length and
    /// the number of jobs to arrive then: once each, unless the queue
    /// changed or a job was sent ahead (the group after may then be one
    /// to prepare, [`Scheduler::prepare_ahead`]).
    ends_prepared: Option<(Expected, usize, usize)>,
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
            ends_prepared: None,
        }
    }

    /// Has the processes of the jobs the policy will start at the wake-up
    /// it asks for, and at the next expected end of a job, started ahead of
    /// them, held (`[controller] prestart`).
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

    /// When the pending jobs are expected to start, and where: the policy
    /// run forward from now (`policy::forecast`); none for a policy that
    /// must not be asked but to decide (an external scheduler).
    pub fn expected_starts(
        &self,
        cluster: &Cluster,
        now: super::Now,
    ) -> Vec<formats::wire::ExpectedStart> {
        if !self.policy.may_look_ahead() {
            return Vec::new();
        }
        crate::policy::forecast::forecast(self.policy.as_ref(), cluster.view(now))
            .into_iter()
            .map(|s| formats::wire::ExpectedStart {
                id: s.job,
                at_ns: now.wall.saturating_add(s.at_ns.saturating_sub(now.mono)),
                nodes: cluster.config.fold_alloc(&s.alloc),
            })
            .collect()
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
        view.done();
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

    /// Whether looking ahead may do anything: it is on, the policy still
    /// decides and may be asked about a future it will not see, and jobs
    /// are pending or to arrive.
    fn may_look_ahead(&self, cluster: &Cluster) -> bool {
        self.look_ahead
            && self.failed.is_none()
            && (cluster.pending().next().is_some() || cluster.next_release().is_some())
            && self.policy.may_look_ahead()
    }

    /// The policy asked to be woken at a time not looked ahead to yet.
    fn turn_due(&self) -> bool {
        self.wake_at.is_some() && self.wake_at != self.looked_ahead_to
    }

    /// The next expected ends and arrivals, taken together (see
    /// [`ENDS_TOGETHER_NS`]), the queue's length and the number of jobs
    /// to arrive: their key for [`Scheduler::ends_prepared`].
    fn next_events(&self, cluster: &Cluster) -> Option<(Expected, usize, usize)> {
        let e = cluster.next_events(self.interval.max(ENDS_TOGETHER_NS))?;
        Some((e, cluster.queue_len(), cluster.arrivals_len()))
    }

    /// Expected ends or arrivals within [`ENDS_AHEAD_NS`] of `now`
    /// (monotonic ns), not prepared for yet.
    fn ends_due(&self, cluster: &Cluster, now: i64) -> bool {
        self.next_events(cluster).is_some_and(|key| {
            key.0.at.saturating_sub(now) <= ENDS_AHEAD_NS
                && Some(&key) != self.ends_prepared.as_ref()
        })
    }

    /// Whether [`Scheduler::prepare_ahead`] has something to do at `now`
    /// (monotonic ns): looking ahead is on, jobs are pending, and the
    /// policy asked to be woken at a time not looked ahead to yet, or jobs
    /// are to end soon and their pass is not prepared yet.
    pub fn ahead_due(&self, cluster: &Cluster, now: i64) -> bool {
        self.may_look_ahead(cluster) && (self.turn_due() || self.ends_due(cluster, now))
    }

    /// When (monotonic ns) the next expected ends and arrivals are to be
    /// prepared for: [`ENDS_AHEAD_NS`] before them; the server wakes up
    /// then.
    pub fn ahead_at(&self, cluster: &Cluster) -> Option<i64> {
        if !self.may_look_ahead(cluster) {
            return None;
        }
        let key = self.next_events(cluster)?;
        (Some(&key) != self.ends_prepared.as_ref()).then(|| key.0.at.saturating_sub(ENDS_AHEAD_NS))
    }

    /// Runs the policy on the cluster as it will be at the wake-up it asked
    /// for, and at the next expected end of jobs (those jobs over), if
    /// nothing happens before, and has the processes of the jobs it would
    /// start then started now, held: at the pass, a start is a `SIGCONT`
    /// rather than a process to spawn (a millisecond or two each, one
    /// after another). Only a guess: the pass decides, and a process it
    /// does not claim is killed without a record. Once per wake-up and per
    /// group of ends (again if the queue changed); the server calls it
    /// after the pass's own orders have left.
    pub fn prepare_ahead<F: Effects>(&mut self, cluster: &Cluster, now: Now, fx: &mut F) {
        if !self.may_look_ahead(cluster) {
            return;
        }
        if self.turn_due() {
            if let Some(at) = self.wake_at {
                self.looked_ahead_to = Some(at);
                if at - now.mono >= LOOK_AHEAD_MIN_NS {
                    let then = Now {
                        mono: at,
                        wall: now.wall.saturating_add(at - now.mono),
                    };
                    let view = cluster.view(then);
                    self.prepare_starts(cluster, &view, at, now, &[], fx);
                    view.done();
                }
            }
        }
        if self.ends_due(cluster, now.mono) {
            if let Some(key) = self.next_events(cluster) {
                // Ends already due (jobs of no length end as they start,
                // or a process ended late) are not prepared for, nor what
                // follows them: their pass comes at once, and a stream of
                // such jobs had every job's process started twice, once
                // held and once at its start.
                let prepared = self.prepare_group(cluster, &key.0, &[], now, fx);
                // A group to come that starts nothing (ends with an empty
                // queue) changes nothing but what its ends free, so the
                // group after it is foreseen as well, those ends taken
                // with it: an end is known only once its process has
                // ended, later than foreseen as often as not, and an
                // arrival soon after it would otherwise find nothing
                // prepared.
                if prepared.is_empty() && key.0.at > now.mono {
                    let within = self.interval.max(ENDS_TOGETHER_NS);
                    let next = cluster
                        .events_after(Some(key.0.at.saturating_add(within)), within)
                        .filter(|n| n.at.saturating_sub(now.mono) <= ENDS_AHEAD_NS);
                    if let Some(mut next) = next {
                        next.ending.splice(0..0, key.0.ending.iter().copied());
                        self.prepare_group(cluster, &next, &key.0.arriving, now, fx);
                    }
                }
                self.ends_prepared = Some(key);
            }
        }
    }

    /// Prepares the pass at the expected events `e` (with `before`, held
    /// jobs that arrive before them): the policy on the cluster as it
    /// will be once those ends and arrivals are in. Arrivals taken with
    /// ends may come first: an end reaches the controller tens of
    /// microseconds after its process's, and one expected just after an
    /// arrival comes after it. Their starts without those ends are
    /// prepared too, where they go elsewhere, so that either order finds
    /// its processes held. Returns the starts asked for.
    fn prepare_group<F: Effects>(
        &mut self,
        cluster: &Cluster,
        e: &Expected,
        before: &[u64],
        now: Now,
        fx: &mut F,
    ) -> Vec<(u64, String)> {
        if e.at <= now.mono {
            return Vec::new();
        }
        let then = Now {
            mono: e.at,
            wall: now.wall.saturating_add(e.at - now.mono),
        };
        let arriving: Vec<u64> = before.iter().chain(&e.arriving).copied().collect();
        let view = cluster.view_after(then, &e.ending, &arriving);
        let mut prepared = self.prepare_starts(cluster, &view, e.at, now, &[], fx);
        view.done();
        if !e.ending.is_empty() && !arriving.is_empty() {
            let view = cluster.view_after(then, &[], &arriving);
            let more = self.prepare_starts(cluster, &view, e.at, now, &prepared, fx);
            view.done();
            prepared.extend(more);
        }
        prepared
    }

    /// Has the processes of the jobs the policy would start in `view` (the
    /// cluster at `at`, monotonic ns) started now, held, but for those of
    /// `already` (job, first node): a second process for a job on a node
    /// would replace the first. Returns those it asked for.
    fn prepare_starts<F: Effects>(
        &mut self,
        cluster: &Cluster,
        view: &crate::policy::View,
        at: i64,
        now: Now,
        already: &[(u64, String)],
        fx: &mut F,
    ) -> Vec<(u64, String)> {
        let decisions = self.policy.decide(view);
        let claim_within_ms = ((at - now.mono)
            .saturating_add(self.interval)
            .saturating_add(CLAIM_GRACE_NS)
            / 1_000_000)
            .clamp(0, u32::MAX.into()) as u32;
        let mut asked = Vec::new();
        for d in decisions.list {
            if let Decision::Start { job, alloc } = d {
                if let Some((agent, start)) = cluster.start_order_ahead(job, &alloc) {
                    if already.iter().any(|(j, n)| *j == job && *n == start.node) {
                        continue;
                    }
                    asked.push((job, start.node.clone()));
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
        asked
    }
}
