//! The state changes, one function each. They assume the change is legal:
//! a live transition (`jobs.rs`, `agents.rs`)
//! checks first, then calls one of them and says what follows through its
//! `Effects`; a restart calls the same function for each
//! journal entry (`restore.rs`). Counters and effects are
//! the callers' business: a replayed change did its effects long ago.

use std::sync::Arc;

use formats::wire::{ArrayTask, HoldKind, JobState};
use tracing::{info, warn};

use super::tables::{
    Cluster, Job, Kept, SuspendedBy, HISTORY, KEEP_FINISHED_MAX, KEEP_FINISHED_NS,
};
use super::Now;
use crate::gres::{self, Masks};
use crate::policy::{no_alloc, Active, ActiveState, Alloc, Happened};

/// Why a job waits that can never run: a job it waits for ended
/// otherwise than it waits for (Slurm's reason, word for word).
const NEVER: &str = "DependencyNeverSatisfied";

impl Cluster {
    /// A submission's key is kept, with the jobs it made.
    pub(super) fn keyed(&mut self, key: u64, first: u64, count: u32) {
        self.keys.insert(key, first, count);
    }

    /// A job is accepted: into the queue, or, if it waits for others,
    /// held until they are over.
    pub(super) fn admitted(&mut self, mut job: Job, now: Now) {
        let id = job.id;
        // Checked at submission (a restored job whose kinds are gone from
        // the config asks none of them).
        job.gres = self
            .config
            .kinds
            .request(&job.spec.gres)
            .unwrap_or_default();
        self.next_id = self.next_id.max(id + 1);
        if job.held && job.spec.waits_for().next().is_none() {
            if let Some(h) = job.hold {
                job.reason = h.reason().into();
                self.jobs.insert(id, Box::new(job));
                return;
            }
            // Held only until its begin instant.
            job.reason = "BeginTime".into();
            self.jobs.insert(id, Box::new(job));
            self.deps_over(id, now);
            return;
        }
        if job.held {
            // Counted from the tables, so that a restart counts the same.
            job.deps_left = 0;
            job.singleton_left = 0;
            // With `?`, one dependency met is enough, and only all of them
            // failing means it can never run.
            let any = job.spec.any_dep;
            let mut met = false;
            let deps: Vec<u64> = job.spec.waits_for().collect();
            for dep in deps {
                let start_only = job.spec.waits_to_start(dep);
                if let Some(d) = self.jobs.get(&dep) {
                    if start_only && d.started_mono.is_some() {
                        job.deps_end = job.deps_end.max(d.start_ns);
                        job.delay_from(dep, d.start_ns);
                        met = true;
                        continue;
                    }
                    job.deps_left += 1;
                    if job.spec.singleton_jobs.contains(&dep) {
                        job.singleton_left += 1;
                    }
                    let waiters = if start_only {
                        &mut self.start_waiters
                    } else {
                        &mut self.waiters
                    };
                    waiters.entry(dep).or_default().push(id);
                } else if let Some(info) = self.done.get(&dep) {
                    job.deps_end = job.deps_end.max(info.end_ns);
                    // From its start, or its end had it never started.
                    let began = if info.start_ns > 0 {
                        info.start_ns
                    } else {
                        info.end_ns
                    };
                    job.delay_from(dep, began);
                    let ok = job.spec.satisfied_by(dep, Some(info.state));
                    met |= ok;
                    job.never |= !any && !ok;
                } else {
                    // Forgotten (out of the history, or dropped at a
                    // restore): how it ended is not known, so a wait for
                    // one kind of end can no longer be satisfied.
                    let ok = job.spec.satisfied_by(dep, None);
                    met |= ok;
                    job.never |= !any && !ok;
                }
            }
            // With `?`, a singleton whose jobs are all over is met.
            met |= any && job.spec.singleton && job.singleton_left == 0;
            if any && met {
                job.deps_left = 0;
            } else if any && job.deps_left == 0 {
                job.never = true;
            }
            job.reason = if let Some(h) = job.hold {
                h.reason().into()
            } else if job.never {
                NEVER.into()
            } else {
                "Dependency".into()
            };
            let over = job.deps_left == 0 && !job.never && job.hold.is_none();
            self.jobs.insert(id, Box::new(job));
            if over {
                self.deps_over(id, now);
            }
            return;
        }
        self.ready(job);
    }

    /// A job that may run enters the queue, unless it is a task of an
    /// array at its limit: then it waits for one of the array's tasks to
    /// end.
    fn ready(&mut self, mut job: Job) {
        if let Some(t) = job.array.filter(|t| t.limit > 0) {
            let a = self.arrays.entry(t.job).or_default();
            if a.live >= t.limit {
                a.waiting.push_back(job.id);
                job.throttled = true;
                job.reason = "JobArrayTaskLimit".into();
                self.jobs.insert(job.id, Box::new(job));
                return;
            }
            a.live += 1;
        }
        self.queued(job);
    }

    /// A job enters the queue.
    fn queued(&mut self, job: Job) {
        let (id, partition) = (job.id, job.partition);
        let q = job.as_queued();
        let at_ns = job.submit_mono.max(job.since_mono);
        if self.happened.is_some() {
            // A job let into the queue late (released, or its array's
            // turn) is news from then on, for a scheduler that keeps time.
            self.record_event(Happened::Submitted {
                job: id,
                at_ns,
                cores: job.spec.cores,
                walltime_ns: job.spec.walltime_ns,
                runtime_ns: job.spec.runtime_ns,
            });
        }
        self.jobs.insert(id, Box::new(job));
        self.enqueue(partition, q);
        self.wants_pass = true;
        self.tell_no_more(at_ns);
    }

    /// Counts job `id`'s cores and memory on the nodes of `alloc`: what a
    /// restart does before [`Cluster::started`] (a start checks each node
    /// and charges it in one go, so that the widest jobs walk their nodes
    /// once).
    pub(super) fn charge(&mut self, id: u64, alloc: &[(usize, u32)]) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let mem_per_cpu = job.spec.mem_per_cpu_mb;
        for &(n, c) in alloc {
            self.loads[n].charge(c, u64::from(c) * mem_per_cpu);
        }
    }

    /// A pending job starts on `alloc` (node, cores), whose nodes count
    /// its cores and memory already ([`Cluster::charge`]), its process on
    /// the agent of the first node (none while restoring), on `host`. It
    /// takes the devices it asks of each node: the lowest free ones, or
    /// those it was given (`devices`, a restart's).
    pub(super) fn started(
        &mut self,
        id: u64,
        alloc: Vec<(usize, u32)>,
        host: Option<String>,
        devices: Option<Vec<(usize, Masks)>>,
        now: Now,
    ) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let devices = match devices {
            Some(given) => {
                for (n, held) in &given {
                    if let Some(free) = self.device_free.get_mut(*n) {
                        for (f, h) in free.iter_mut().zip(held) {
                            *f &= !h;
                        }
                    }
                }
                given
            }
            None if gres::any(&job.gres) => alloc
                .iter()
                .filter_map(|&(n, _)| {
                    let free = self.device_free.get_mut(n)?;
                    // Checked before the start: never short.
                    Some((n, gres::take(free, &job.gres).unwrap_or_default()))
                })
                .collect(),
            None => Vec::new(),
        };
        let (partition, cores) = (job.partition, job.spec.cores);
        let mem_per_cpu = job.spec.mem_per_cpu_mb;
        let gres = job.gres;
        let estimate = job.estimate_ns().min(i64::MAX as u64) as i64;
        self.unqueue(id, partition);
        let alloc = Alloc::new(alloc);
        let active = Active {
            job: id,
            partition,
            cores,
            mem_per_cpu_mb: mem_per_cpu,
            alloc: Arc::clone(&alloc),
            gres,
            state: ActiveState::Running,
            since_ns: now.mono,
            expected_end_ns: now.mono.saturating_add(estimate),
            remaining_ns: estimate,
        };
        let list = Arc::make_mut(&mut self.active);
        let at = list.partition_point(|a| a.job < id);
        list.insert(at, active);
        let nodes = self.config.fold_alloc(&alloc);
        let agent = alloc.first().and_then(|&(n, _)| self.nodes[n].agent);
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        // Its partition's limit is its own once it runs, as Slurm's
        // start makes it (a requeue keeps it).
        if let Some(p) = job.spec.program.as_mut() {
            p.partition_limit = false;
        }
        job.state = JobState::Running;
        job.start_ns = now.wall;
        job.started_mono = Some(now.mono);
        job.since_mono = now.mono;
        job.agent = agent;
        job.host = host;
        job.nodes = nodes;
        job.alloc = alloc;
        job.devices = devices;
        self.expect_end(id);
        self.wake_start_waiters(id, now);
    }

    /// A running job is suspended: `by` the policy (its cores become free)
    /// or an administrator (it keeps them).
    pub(super) fn suspended(&mut self, id: u64, by: SuspendedBy, now: Now) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        job.state = JobState::Suspended;
        job.suspended_by = Some(by);
        job.suspended_since = Some(now.mono);
        job.suspensions.push((now.wall, 0));
        job.since_mono = now.mono;
        if by == SuspendedBy::Policy {
            for &(n, c) in job.alloc.iter() {
                self.loads[n].alloc_cpus -= c;
            }
            self.policy_suspended += 1;
            self.wants_pass = true;
        }
        let state = match by {
            SuspendedBy::Policy => ActiveState::Suspended,
            SuspendedBy::Admin => ActiveState::Held,
        };
        self.set_active(id, state, now.mono, remaining);
        self.record_event(Happened::Suspended {
            job: id,
            at_ns: now.mono,
        });
    }

    /// A suspended job runs again (one the policy suspended takes its
    /// cores back).
    pub(super) fn resumed(&mut self, id: u64, now: Now) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.suspended_by == Some(SuspendedBy::Policy) {
            for &(n, c) in job.alloc.iter() {
                self.loads[n].alloc_cpus += c;
            }
            self.policy_suspended -= 1;
        }
        job.state = JobState::Running;
        job.suspended_by = None;
        if let Some(s) = job.suspended_since.take() {
            job.suspended_total += now.mono - s;
        }
        if let Some(last) = job.suspensions.last_mut() {
            last.1 = now.wall;
        }
        job.since_mono = now.mono;
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        self.set_active(id, ActiveState::Running, now.mono, remaining);
        self.record_event(Happened::Resumed {
            job: id,
            at_ns: now.mono,
        });
    }

    /// A started job was told to end: it will end `as_state`. No policy may
    /// suspend or resume it now.
    pub(super) fn ending(&mut self, id: u64, as_state: JobState, now: Now) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.ending_as = Some(as_state);
        job.ending_ns = now.wall;
        let state = ending_state(job);
        self.set_active(id, state, now.mono, 0);
    }

    /// A job gives back what it holds.
    fn release(&mut self, id: u64) {
        self.forget_end(id);
        if let Some(i) = self.active_at(id) {
            Arc::make_mut(&mut self.active).remove(i);
        }
        if let Some(job) = self.jobs.get_mut(&id) {
            // A job the policy suspended has given its cores back already.
            let holds_cores = job.suspended_by != Some(SuspendedBy::Policy);
            if !holds_cores {
                self.policy_suspended -= 1;
            }
            let held = std::mem::replace(&mut job.alloc, no_alloc());
            if !held.is_empty() {
                job.node_cpus = held.iter().map(|&(_, c)| c).collect();
            }
            // The devices go back with the nodes (once: a job released
            // holds none), only those the node has; the job keeps their
            // list, for its history.
            if !held.is_empty() {
                for (n, devices) in &job.devices {
                    if let Some(free) = self.device_free.get_mut(*n) {
                        let mut back = gres::all_free(&self.config.nodes[*n].devices);
                        for (b, d) in back.iter_mut().zip(devices) {
                            *b &= d;
                        }
                        gres::give(free, &back);
                    }
                }
            }
            for &(n, c) in held.iter() {
                let node = &mut self.loads[n];
                if holds_cores {
                    node.alloc_cpus -= c;
                }
                node.slot_cpus -= c;
                node.alloc_mem_mb -= u64::from(c) * job.spec.mem_per_cpu_mb;
            }
        }
        self.wants_pass = true;
    }

    /// A job is over: out of the tables, into the history; the jobs held
    /// for it are one closer to their release.
    pub(super) fn finished(&mut self, id: u64, state: JobState, reason: String, now: Now) {
        self.release(id);
        if let Some(p) = self.jobs.get(&id).map(|j| j.partition) {
            self.unqueue(id, p);
        }
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        // Over before its release: nothing to wake for.
        if let Some(at) = job.release_at {
            self.releases.remove(&(at, id));
        }
        if let Some(t) = job.array.filter(|t| t.limit > 0) {
            // A task held for its dependencies was not live either.
            self.array_task_over(t, !job.throttled && !job.held, now);
        }
        self.record_event(Happened::Ended {
            job: id,
            at_ns: now.mono,
            state,
        });
        job.state = state;
        job.end_ns = now.wall;
        // Ended held, it keeps the hold's reason, as Slurm's job does.
        job.reason = job.hold.map_or(reason, |h| h.reason().into());
        job.ending_as = None;
        // Ended while suspended (cancelled, lost), or as the suspension was
        // decided: a finished job has no open suspension.
        if let Some(last) = job.suspensions.last_mut().filter(|s| s.1 == 0) {
            last.1 = now.wall;
        }
        if self.done_order.len() == HISTORY {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
        let info = self.info(&job);
        self.done.insert(id, info);
        self.done_order.push_back(id);
        self.wake_waiters(id, now);
        // A job over while it waited out of the queue waits no more.
        if job.held || job.throttled {
            self.tell_no_more(now.mono);
        }
        if job.spec.program.is_some() && job.spec.requeue != Some(false) {
            self.keep_finished(*job, now);
        }
    }

    /// Keeps what finished batch job `job` needs to run again, for
    /// [`KEEP_FINISHED_NS`], and lets go of those kept longer, or beyond
    /// [`KEEP_FINISHED_MAX`].
    fn keep_finished(&mut self, job: Job, now: Now) {
        while let Some(&(until, id)) = self.kept_order.front() {
            if until > now.mono && self.kept_order.len() < KEEP_FINISHED_MAX {
                break;
            }
            self.kept_order.pop_front();
            // Kept again since (requeued, and over again): a later turn.
            if self.kept.get(&id).is_some_and(|k| k.until == until) {
                self.kept.remove(&id);
            }
        }
        let until = now.mono.saturating_add(KEEP_FINISHED_NS);
        self.kept_order.push_back((until, job.id));
        self.kept.insert(
            job.id,
            Kept {
                spec: job.spec,
                partition: job.partition,
                submit_mono: job.submit_mono,
                until,
            },
        );
    }

    /// A batch job over goes back to the queue under its id (`scontrol
    /// requeue`), as one requeued while it ran: its restarts counted,
    /// eligible `requeue_delay` later (reason `BeginTime`), or held
    /// (`hold`: `requeuehold`, reason `job requeued in held state`). Its
    /// dependencies were met when it first ran and are not waited for
    /// again. Returns whether it could: it must be over and its spec kept.
    pub(super) fn readmitted(&mut self, id: u64, hold: bool, now: Now) -> bool {
        let (Some(info), Some(kept)) = (self.done.get(&id), self.kept.get(&id)) else {
            return false;
        };
        // Kept past its time only because no job ended since.
        if kept.until <= now.mono {
            return false;
        }
        let (submit_ns, restarts, array) = (info.submit_ns, info.restarts, info.array);
        let (partition, submit_mono) = (kept.partition, kept.submit_mono);
        let Some(kept) = self.kept.remove(&id) else {
            return false;
        };
        self.done.remove(&id);
        self.done_order.retain(|&d| d != id);
        let mut spec = kept.spec;
        spec.after.clear();
        spec.after_ok.clear();
        spec.after_not_ok.clear();
        spec.after_start.clear();
        spec.after_corr.clear();
        spec.singleton = false;
        spec.singleton_jobs.clear();
        spec.any_dep = false;
        spec.think_ns = None;
        spec.hold = hold;
        spec.begin_ns = Some(self.requeued_begin(now));
        // Named nodes gone from the configuration since: any will do.
        let within = self.within_of(&spec, partition).unwrap_or_else(|e| {
            warn!(
                job = id,
                "nodes it names: {e}; it may have any of its partition's"
            );
            None
        });
        let mut job = Job::pending(id, spec, partition, now);
        job.within = within;
        if hold {
            job.hold = Some(HoldKind::Requeued);
        }
        job.submit_ns = submit_ns;
        job.submit_mono = submit_mono;
        job.restarts = restarts + 1;
        job.array = array;
        info!(job = id, "finished job requeued on request");
        self.admitted(job, now);
        true
    }

    /// Job `id` is over (or gone): the jobs held for it are one closer to
    /// their release (those waiting for its start too: it will not start).
    fn wake_waiters(&mut self, id: u64, now: Now) {
        // Gone without a trace (dropped at a restore): not completed.
        let state = self.done.get(&id).map_or(JobState::Cancelled, |i| i.state);
        let waiters = self.waiters.remove(&id).unwrap_or_default();
        let starters = self.start_waiters.remove(&id).unwrap_or_default();
        // Those waiting for its start wait their delay from its end.
        for &waiter in &starters {
            if let Some(w) = self.jobs.get_mut(&waiter) {
                w.delay_from(id, now.wall);
            }
        }
        for waiter in waiters.into_iter().chain(starters) {
            let ok = self.jobs.get_mut(&waiter).is_some_and(|w| {
                let ok = w.spec.satisfied_by(id, Some(state));
                // With `?`, the singleton is one dependency: met by the
                // last of its jobs to be over, not by each.
                if w.spec.any_dep && w.spec.singleton_jobs.contains(&id) {
                    w.singleton_left = w.singleton_left.saturating_sub(1);
                    return ok || w.singleton_left == 0;
                }
                ok
            });
            self.dependency_settled(waiter, ok, now);
        }
    }

    /// Job `id` has started: the jobs held for its start (`after`) are one
    /// closer to their release.
    pub(super) fn wake_start_waiters(&mut self, id: u64, now: Now) {
        for waiter in self.start_waiters.remove(&id).unwrap_or_default() {
            if let Some(w) = self.jobs.get_mut(&waiter) {
                w.delay_from(id, now.wall);
            }
            self.dependency_settled(waiter, true, now);
        }
    }

    /// One of the jobs held job `waiter` waits for did what it waits for
    /// (`ok`) or can no longer do it.
    fn dependency_settled(&mut self, waiter: u64, ok: bool, now: Now) {
        let Some(w) = self.jobs.get_mut(&waiter).filter(|w| w.held) else {
            return;
        };
        let any = w.spec.any_dep;
        // With `?`, met already (or never to be): nothing more to count.
        if any && w.deps_left == 0 {
            return;
        }
        w.deps_left = w.deps_left.saturating_sub(1);
        w.deps_end = w.deps_end.max(now.wall);
        if any && ok {
            w.deps_left = 0;
        } else if !ok && (!any || w.deps_left == 0) {
            w.never = true;
            if w.hold.is_none() {
                w.reason = NEVER.into();
            }
        }
        if w.deps_left == 0 && !w.never && w.hold.is_none() {
            self.deps_over(waiter, now);
        }
    }

    /// A job that cannot be restored (its partition or nodes are gone)
    /// leaves the tables without a trace; what waited for it does not wait
    /// for ever.
    pub(super) fn dropped(&mut self, id: u64, now: Now) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let (p, array, live) = (job.partition, job.array, !job.throttled && !job.held);
        if let Some(at) = job.release_at {
            self.releases.remove(&(at, id));
        }
        self.unqueue(id, p);
        self.jobs.remove(&id);
        if let Some(t) = array.filter(|t| t.limit > 0) {
            self.array_task_over(t, live, now);
        }
        self.wake_waiters(id, now);
        if !live {
            self.tell_no_more(now.mono);
        }
    }

    /// A held job's wait is over. Without a think time or a begin to come it
    /// queues now, as submitted (Slurm's `afterany`); with one, it is
    /// submitted that long after the last of its jobs ended, and not before
    /// its begin: at once if that has passed (a restart), else when a pass
    /// finds it due.
    pub(super) fn deps_over(&mut self, id: u64, now: Now) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.spec.think_ns.is_none()
            && job.spec.begin_ns.is_none_or(|b| b <= now.wall)
            && job.delay_until <= now.wall
        {
            self.released(id, None, now);
            return;
        }
        // Later: a think time after its last job ended, at its begin, or
        // once a dependency's delay is over.
        let at = job.release_wall();
        let mono = now.mono.saturating_add(at.saturating_sub(now.wall));
        self.releases.insert((mono, id));
        if let Some(j) = self.jobs.get_mut(&id) {
            j.release_at = Some(mono);
        }
    }

    /// A held job enters the queue; `at`: submitted at this instant, not
    /// when it was sent.
    pub(super) fn released(&mut self, id: u64, at: Option<Now>, now: Now) {
        let Some(job) = self.jobs.get_mut(&id).filter(|j| j.held) else {
            return;
        };
        job.held = false;
        job.reason.clear();
        job.since_mono = now.mono;
        if let Some(at) = at.filter(|_| job.submitted_at_release()) {
            job.submit_ns = at.wall;
            job.submit_mono = at.mono;
            job.since_mono = at.mono;
        }
        if let Some(job) = self.jobs.remove(&id) {
            self.ready(*job);
        }
    }

    /// A task of an array with a limit is over (or left the queue): the
    /// next task waiting, if any, takes its place.
    fn array_task_over(&mut self, t: ArrayTask, was_live: bool, now: Now) {
        if !was_live {
            return;
        }
        let Some(a) = self.arrays.get_mut(&t.job) else {
            return;
        };
        a.live = a.live.saturating_sub(1);
        loop {
            let Some(a) = self.arrays.get_mut(&t.job) else {
                return;
            };
            let Some(next) = a.waiting.pop_front() else {
                if a.live == 0 {
                    self.arrays.remove(&t.job);
                }
                return;
            };
            // One cancelled while it waited is gone already.
            if !self.jobs.get(&next).is_some_and(|j| j.throttled) {
                continue;
            }
            a.live += 1;
            if let Some(mut job) = self.jobs.remove(&next).map(|j| *j) {
                job.throttled = false;
                job.reason.clear();
                job.since_mono = now.mono;
                self.queued(job);
            }
            return;
        }
    }

    /// A started job goes back to the queue, as if never started. One
    /// requeued on request (`scontrol requeue`) or by preemption waits
    /// first, as on Slurm, whose new launch must come after the old launch
    /// credential's lifetime (120 s) is over: it is eligible
    /// `requeue_delay_s` (121 s) later (reason `BeginTime`), or
    /// held until released (`requeuehold`), or by the hold it had as it ran.
    pub(super) fn requeued(&mut self, id: u64, reason: String, now: Now) {
        self.release(id);
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let asked = job.ending_as == Some(JobState::Pending);
        if asked {
            info!(job = id, "job requeued on request");
        } else {
            warn!(job = id, reason, "job requeued");
        }
        job.restarts += 1;
        let (cores, walltime_ns, runtime_ns) =
            (job.spec.cores, job.spec.walltime_ns, job.spec.runtime_ns);
        job.state = JobState::Pending;
        job.ending_as = None;
        job.start_ns = 0;
        job.nodes.clear();
        job.node_cpus.clear();
        job.agent = None;
        job.host = None;
        job.lost_at = None;
        job.suspended_by = None;
        job.started_mono = None;
        job.since_mono = now.mono;
        job.suspended_since = None;
        job.suspended_total = 0;
        job.suspensions.clear();
        job.devices.clear();
        job.steps.clear();
        job.reason = reason;
        // Held while it ran: it waits held, and is submitted again to an
        // event-driven scheduler when released, as one requeued on
        // request is.
        if let (false, Some(h)) = (asked, job.hold) {
            job.held = true;
            job.reason = h.reason().into();
            self.waits_again(id, JobState::NodeFail, now);
            return;
        }
        // An event-driven scheduler hears of a requeue as an end and a new
        // submission of the same job; one requeued on request is
        // submitted when it enters the queue again (`queued`).
        if !asked {
            let (p, q) = (job.partition, job.as_queued());
            self.enqueue(p, q);
            self.record_event(Happened::Ended {
                job: id,
                at_ns: now.mono,
                state: JobState::NodeFail,
            });
            self.record_event(Happened::Submitted {
                job: id,
                at_ns: now.mono,
                cores,
                walltime_ns,
                runtime_ns,
            });
            return;
        }
        let begin = self.requeued_begin(now);
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.spec.begin_ns = Some(begin);
        job.held = true;
        let hold = job.hold;
        self.waits_again(id, JobState::Cancelled, now);
        if let Some(job) = self.jobs.get_mut(&id) {
            if let Some(h) = hold {
                job.reason = h.reason().into();
            } else {
                job.reason = "BeginTime".into();
                self.deps_over(id, now);
            }
        }
    }

    /// Requeued job `id` waits out of the queue (held, or for its begin):
    /// an event-driven scheduler hears of its run's end as `state`, and it
    /// leaves its array's count, to come back through the array's limit
    /// when it enters the queue again.
    fn waits_again(&mut self, id: u64, state: JobState, now: Now) {
        let task = self
            .jobs
            .get(&id)
            .and_then(|j| j.array)
            .filter(|t| t.limit > 0);
        self.record_event(Happened::Ended {
            job: id,
            at_ns: now.mono,
            state,
        });
        if let Some(t) = task {
            self.array_task_over(t, true, now);
        }
    }

    /// When a job requeued on request at `now` may start again (wall
    /// ns): `requeue_delay` later, as Slurm's launch credential lasts.
    fn requeued_begin(&self, now: Now) -> i64 {
        let delay = self.config.requeue_delay.as_nanos().min(i64::MAX as u128) as i64;
        now.wall.saturating_add(delay)
    }

    /// Nodes failed (with why) or repaired (`None`).
    pub(super) fn set_failed(&mut self, idx: &[usize], why: Option<&str>, at_ns: i64) {
        for &n in idx {
            self.nodes[n].failed = why.map(str::to_string);
            if why.is_some() {
                self.nodes[n].reason_ns = at_ns;
            }
            self.node_changed(n);
        }
        if why.is_none() {
            self.wants_pass = true;
        }
    }

    /// Nodes drained (with why) or undrained (`None`).
    pub(super) fn set_drained(&mut self, idx: &[usize], why: Option<&str>, at_ns: i64) {
        for &n in idx {
            self.nodes[n].drained = why.map(str::to_string);
            if why.is_some() {
                self.nodes[n].reason_ns = at_ns;
            }
            self.node_changed(n);
        }
        if why.is_none() {
            self.wants_pass = true;
        }
    }
}

/// How a job told to end shows to the policies: whether it still holds
/// its cores until its process is gone, or gave them up when a policy
/// suspended it.
pub(super) fn ending_state(job: &Job) -> ActiveState {
    if job.state == JobState::Suspended && job.suspended_by == Some(SuspendedBy::Policy) {
        ActiveState::EndingSuspended
    } else {
        ActiveState::Ending
    }
}
