//! What the journal keeps of the tables, and rebuilding them from it.
//!
//! A restart loads the snapshot, then replays each journal entry written
//! after it, both through the functions of `changes.rs`
//! that made the changes in the first place: a job of the snapshot is put
//! back by the changes that would bring a new job to the same state
//! (admitted, started on its cores, suspended and resumed as its history
//! says), so no second copy of any change exists.

use std::collections::HashMap;

use formats::wire::{JobInfo, JobState};
use tracing::warn;

use super::tables::{Cluster, Job, SuspendedBy};
use super::{Effects, Now};
use crate::journal::{Entry, Head, JobImage, Journal, NodeRun, Recovered};
use crate::policy::ActiveState;

impl Cluster {
    /// A job as the journal keeps it.
    pub(super) fn image(&self, j: &Job, now: Now) -> JobImage {
        let wall = |mono: i64| now.wall - (now.mono - mono);
        JobImage {
            id: j.id,
            spec: j.spec.clone(),
            partition: self.config.partitions[j.partition].name.clone(),
            state: j.state,
            submit_ns: j.submit_ns,
            start_ns: j.start_ns,
            alloc: self.runs_of(&j.alloc),
            nodes: j.nodes.clone(),
            host: j.host.clone(),
            ending_as: j.ending_as,
            ending_ns: j.ending_ns,
            suspended_by_policy: j.suspended_by.map(|b| b == SuspendedBy::Policy),
            suspensions: j.suspensions.clone(),
            since_ns: wall(j.since_mono),
            reason: j.reason.clone(),
            held: j.held,
            hold: j.hold,
            restarts: j.restarts,
            limit_changed: j.limit_changed,
            array: j.array,
            queued_ns: wall(j.submit_mono),
            devices: self.devices_text(&j.devices),
        }
    }

    /// Folds the journal into a snapshot of the tables, written job by job.
    pub fn write_snapshot(&self, journal: &mut Journal, now: Now) -> anyhow::Result<()> {
        journal.compact_from(&self.snapshot_head(), self.images(now))
    }

    /// What a snapshot holds besides the jobs: the next job id, the
    /// finished jobs kept, the drained nodes (folded) with why, and the
    /// recent submission keys.
    pub fn snapshot_head(&self) -> Head {
        let mut drained: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(why) = &n.drained {
                drained.entry(why).or_default().push(i);
            }
        }
        let drained: Vec<(String, String)> = drained
            .into_iter()
            .map(|(why, idx)| (self.config.fold(&idx), why.to_string()))
            .collect();
        let mut failed: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(why) = &n.failed {
                failed.entry(why).or_default().push(i);
            }
        }
        let failed: Vec<(String, String)> = failed
            .into_iter()
            .map(|(why, idx)| (self.config.fold(&idx), why.to_string()))
            .collect();
        let history: Vec<JobInfo> = self
            .done_order
            .iter()
            .filter_map(|id| self.done.get(id).cloned())
            .collect();
        Head {
            next_id: self.next_id,
            history,
            drained,
            keys: self.keys.all(),
            failed,
        }
    }

    /// Every job not over, as the journal keeps it.
    pub fn images(&self, now: Now) -> impl ExactSizeIterator<Item = JobImage> + '_ {
        self.jobs.values().map(move |j| self.image(j, now))
    }

    /// Restored jobs that had started and whose record is in the record
    /// file: they ended while the controller was down (a job has a record
    /// only from an execution that ended; a lost one leaves none). A
    /// record that ended before the job's start is an earlier execution's
    /// (it was requeued since); a job that was ending to be requeued is
    /// requeued, whatever its record says, and one cancelled to be
    /// preempted ends preempted (its record says cancelled).
    pub fn settle<F: Effects>(
        &mut self,
        last: &HashMap<u64, (JobState, i64)>,
        now: Now,
        fx: &mut F,
    ) {
        let ended: Vec<(u64, JobState, i64, bool)> = self
            .jobs
            .values()
            .filter(|j| j.lost_at.is_some())
            .filter_map(|j| {
                let &(state, end) = last.get(&j.id).filter(|(_, end)| *end >= j.start_ns)?;
                let state = match (state, j.ending_as) {
                    (JobState::Cancelled, Some(JobState::Preempted)) => JobState::Preempted,
                    _ => state,
                };
                Some((j.id, state, end, j.ending_as == Some(JobState::Pending)))
            })
            .collect();
        self.unqueue_batched(|c| {
            for (id, state, end, requeue) in ended {
                let at = Now { wall: end, ..now };
                if requeue {
                    if F::JOURNALS {
                        fx.journal(Entry::Requeued {
                            id,
                            reason: String::new(),
                            at_ns: end,
                        });
                    }
                    c.requeued(id, String::new(), at);
                    c.counters.requeued += 1;
                    continue;
                }
                c.end(
                    id,
                    state,
                    "ended while the controller was down".into(),
                    at,
                    fx,
                );
            }
        });
    }

    /// The tables as the journal left them. Jobs that had started wait for
    /// their agents to report them (until the heartbeat timeout from now);
    /// a job whose partition or nodes are no longer in the configuration
    /// cannot be restored and is dropped, with a warning.
    pub fn restore(
        config: std::sync::Arc<crate::config::Cluster>,
        rec: Recovered,
        now: Now,
    ) -> Cluster {
        let mut c = Cluster::copy(config, rec, now);
        c.await_agents(now);
        c
    }

    /// The tables as the journal left them, as a backup keeps them: the
    /// same as [`Cluster::restore`], but nothing waits for agents yet.
    pub fn copy(
        config: std::sync::Arc<crate::config::Cluster>,
        rec: Recovered,
        now: Now,
    ) -> Cluster {
        let mut c = Cluster::new(config);
        let snap = rec.snapshot;
        c.next_id = snap.next_id.max(1);
        let at = wall_to(now);
        for (nodes, why) in &snap.drained {
            match c.resolve(nodes) {
                Ok(idx) => c.set_drained(&idx, (!why.is_empty()).then_some(why.as_str()), 0),
                Err(e) => warn!(nodes, "drained nodes not restored: {e}"),
            }
        }
        for (nodes, why) in &snap.failed {
            match c.resolve(nodes) {
                Ok(idx) => c.set_failed(&idx, Some(why.as_str()), 0),
                Err(e) => warn!(nodes, "failed nodes not restored: {e}"),
            }
        }
        for info in snap.history {
            c.done_order.push_back(info.id);
            c.done.insert(info.id, info);
        }
        for (key, first, count) in snap.keys {
            c.keyed(key, first, count);
        }
        for (_, image) in snap.jobs {
            c.load(image, &at, now);
        }
        c.replay_entries(rec.entries, now);
        c.partition_limits_now();
        c
    }

    /// Waiting batch jobs that asked no limit take their partition's as
    /// it is now: a restart under another `max_time_s` neither lets one
    /// run past its partition's limit nor holds it to the old one, as
    /// Slurm, which gives such a job its partition's limit as it starts.
    fn partition_limits_now(&mut self) {
        let stale: Vec<(u64, u64)> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .filter(|j| j.spec.program.as_ref().is_some_and(|p| p.partition_limit))
            .filter_map(|j| {
                let now = self.config.partitions[j.partition].max_time_ns;
                (now != j.spec.walltime_ns).then_some((j.id, now))
            })
            .collect();
        for (id, walltime_ns) in stale {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.spec.walltime_ns = walltime_ns;
                self.requeue_view(id);
            }
        }
    }

    /// Journal entries a primary wrote, made again on its backup's copy.
    pub fn replay_entries(&mut self, entries: Vec<Entry>, now: Now) {
        let at = wall_to(now);
        self.unqueue_batched(|c| {
            for entry in entries {
                c.replay(entry, &at, now);
            }
        });
    }

    /// Jobs that had started wait for their agents to report them, until
    /// the heartbeat timeout from now: after a restart, or when a backup
    /// takes over.
    pub fn await_agents(&mut self, now: Now) {
        let lost_at = now.mono + self.config.heartbeat_timeout.as_nanos() as i64;
        let started: Vec<(u64, i64)> = self
            .jobs
            .values()
            .filter(|j| j.started_mono.is_some())
            .map(|j| (j.id, j.since_mono))
            .collect();
        for (id, since) in started {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.lost_at = Some(lost_at);
            }
            self.set_active(id, ActiveState::Unreachable, since, 0);
        }
        self.wants_pass = true;
    }

    /// One journal entry, made again.
    fn replay(&mut self, entry: Entry, at: &impl Fn(i64) -> Now, now: Now) {
        match entry {
            Entry::Submitted(image) => self.load(*image, at, now),
            Entry::Started {
                id,
                alloc,
                host,
                at_ns,
                devices,
                ..
            } => match (self.alloc_of(id, &alloc), self.devices_of(id, &devices)) {
                (Some(alloc), Some(devices)) => {
                    self.charge(id, &alloc);
                    self.started(id, alloc, Some(host), Some(devices), at(at_ns))
                }
                _ => self.dropped(id, now),
            },
            Entry::Suspended {
                id,
                by_policy,
                at_ns,
            } => self.suspended(id, suspended_by(by_policy), at(at_ns)),
            Entry::Resumed { id, at_ns } => self.resumed(id, at(at_ns)),
            Entry::Ending { id, state, at_ns } => {
                self.ending(id, state, at(at_ns));
                if state == JobState::NodeFail {
                    let why = self.lost_to_failure(id);
                    if let Some(j) = self.jobs.get_mut(&id) {
                        j.reason = why;
                    }
                }
            }
            Entry::Ended(info) => {
                let id = info.id;
                if self.jobs.contains_key(&id) {
                    self.finished(id, info.state, info.reason.clone(), at(info.end_ns));
                    // What the job's end told (its exit code, steps) is the
                    // journal's, not the rebuilt job's.
                    if let Some(kept) = self.done.get_mut(&id) {
                        *kept = *info;
                    }
                }
            }
            Entry::Requeued { id, reason, at_ns } => self.requeued(id, reason, at(at_ns)),
            Entry::Readmitted(image) => {
                let id = image.id;
                self.kept.remove(&id);
                if self.done.remove(&id).is_some() {
                    self.done_order.retain(|&d| d != id);
                }
                if !self.jobs.contains_key(&id) {
                    self.load(*image, at, now);
                }
            }
            Entry::Limit { id, walltime_ns } => {
                let _ = self.set_limit(id, walltime_ns);
            }
            Entry::Held { id, hold, at_ns } => {
                let _ = self.set_hold(id, hold, at(at_ns));
            }
            Entry::Released { id, at_ns } => {
                if let Some(at) = self.jobs.get(&id).and_then(|j| j.release_at) {
                    self.releases.remove(&(at, id));
                }
                self.released(id, Some(at(at_ns)), at(at_ns));
            }
            Entry::Drained {
                nodes,
                reason,
                at_ns,
            } => match self.resolve(&nodes) {
                Ok(idx) => self.set_drained(&idx, Some(&reason), at_ns),
                Err(e) => warn!(nodes, "drained nodes not restored: {e}"),
            },
            Entry::Keyed { key, first, count } => self.keyed(key, first, count),
            Entry::Undrained { nodes } => match self.resolve(&nodes) {
                Ok(idx) => self.set_drained(&idx, None, 0),
                Err(e) => warn!(nodes, "undrained nodes not restored: {e}"),
            },
            Entry::Failed {
                nodes,
                reason,
                at_ns,
            } => match self.resolve(&nodes) {
                Ok(idx) => self.set_failed(&idx, Some(&reason), at_ns),
                Err(e) => warn!(nodes, "failed nodes not restored: {e}"),
            },
            Entry::Repaired { nodes } => match self.resolve(&nodes) {
                Ok(idx) => self.set_failed(&idx, None, 0),
                Err(e) => warn!(nodes, "repaired nodes not restored: {e}"),
            },
        }
    }

    /// Puts a job of the journal back: admitted as when it was submitted,
    /// then, if it had started, through the same changes again.
    fn load(&mut self, im: JobImage, at: &impl Fn(i64) -> Now, now: Now) {
        let id = im.id;
        let Some(p) = self
            .config
            .partitions
            .iter()
            .position(|p| p.name == im.partition)
        else {
            warn!(job = id, partition = %im.partition, "job not restored: its partition is gone");
            return;
        };
        let started = im.state != JobState::Pending;
        let alloc = if started {
            match (
                self.alloc_of(id, &im.alloc),
                self.devices_of(id, &im.devices),
            ) {
                (Some(a), Some(d)) => Some((a, d)),
                _ => return,
            }
        } else {
            None
        };
        let submitted = at(im.submit_ns);
        // Named nodes gone from the configuration since: any will do.
        let within = self.within_of(&im.spec, p).unwrap_or_else(|e| {
            warn!(
                job = id,
                "nodes it names: {e}; it may have any of its partition's"
            );
            None
        });
        let mut job = Job::pending(id, im.spec, p, submitted);
        job.within = within;
        job.submit_ns = im.submit_ns;
        job.reason = im.reason;
        job.since_mono = at(im.since_ns).mono;
        job.held = im.held;
        job.hold = im.hold;
        job.restarts = im.restarts;
        job.limit_changed = im.limit_changed;
        job.array = im.array;
        job.submit_mono = at(im.queued_ns).mono;
        self.admitted(job, now);
        let Some((alloc, devices)) = alloc else {
            return;
        };
        self.charge(id, &alloc);
        self.started(id, alloc, im.host, Some(devices), at(im.start_ns));
        let n = im.suspensions.len();
        for (k, &(suspend, resume)) in im.suspensions.iter().enumerate() {
            let open = k + 1 == n && resume == 0;
            let by = if open {
                suspended_by(im.suspended_by_policy.unwrap_or(false))
            } else {
                SuspendedBy::Admin
            };
            self.suspended(id, by, at(suspend));
            if !open {
                self.resumed(id, at(resume));
            }
        }
        if let Some(state) = im.ending_as {
            self.ending(id, state, at(im.ending_ns));
        }
    }

    /// The devices of a journaled start, by node index; `None`, with a
    /// warning, if one of its nodes or kinds is no longer in the
    /// configuration, a node has fewer devices now than the job held, or
    /// another restored job holds one of them: a device is never invented
    /// or given twice.
    fn devices_of(&self, id: u64, text: &str) -> Option<Vec<(usize, crate::gres::Masks)>> {
        let list = match formats::record::Devices::parse_list(text) {
            Ok(l) => l,
            Err(e) => {
                warn!(job = id, "job not restored: its devices: {e}");
                return None;
            }
        };
        let mut out: Vec<(usize, crate::gres::Masks)> = Vec::new();
        for d in list {
            let (Some(&n), Some(k)) = (
                self.node_index.get(&*d.node),
                self.config.kinds.index(&d.kind),
            ) else {
                warn!(job = id, node = %d.node, kind = %d.kind, "job not restored: its devices are gone");
                return None;
            };
            let has = u32::from(self.config.nodes[n].devices[k]);
            if d.ids.iter().any(|&i| i >= has) {
                warn!(job = id, node = %d.node, kind = %d.kind, has, "job not restored: its node now has fewer devices than it held");
                return None;
            }
            match out.iter_mut().find(|(m, _)| *m == n) {
                Some((_, masks)) => masks[k] |= crate::gres::mask_of(&d.ids),
                None => {
                    let mut masks = crate::gres::Masks::default();
                    masks[k] = crate::gres::mask_of(&d.ids);
                    out.push((n, masks));
                }
            }
        }
        let taken = out.iter().any(|(n, held)| {
            self.device_free
                .get(*n)
                .is_none_or(|free| !crate::gres::all_in(free, held))
        });
        if taken {
            warn!(
                job = id,
                "job not restored: another restored job holds its devices"
            );
            return None;
        }
        Some(out)
    }

    /// An allocation as the journal keeps it: runs of consecutive nodes
    /// with the same cores.
    pub(super) fn runs_of(&self, alloc: &[(usize, u32)]) -> Vec<NodeRun> {
        let mut runs = Vec::new();
        for &(n, c) in alloc {
            add_to_runs(&mut runs, n, c);
        }
        self.named_runs(runs)
    }

    /// Runs (first node, last node, cores on each) as the journal names
    /// them.
    pub(super) fn named_runs(&self, runs: Vec<(usize, usize, u32)>) -> Vec<NodeRun> {
        runs.into_iter()
            .map(|(first, last, cores)| NodeRun {
                first: self.nodes[first].name.clone(),
                last: self.nodes[last].name.clone(),
                nodes: (last - first + 1) as u32,
                cores,
            })
            .collect()
    }

    /// Node indices of a journaled allocation; `None`, with a warning, if
    /// one of its nodes is no longer in the configuration, or its runs are
    /// not the configuration's order any more.
    pub(super) fn alloc_of(&self, id: u64, alloc: &[NodeRun]) -> Option<Vec<(usize, u32)>> {
        let mut out = Vec::new();
        for r in alloc {
            let (first, last) = match (self.node_index.get(&r.first), self.node_index.get(&r.last))
            {
                (Some(&f), Some(&l)) if l >= f && l - f + 1 == r.nodes as usize => (f, l),
                _ => {
                    warn!(
                        job = id,
                        "job not restored: its nodes {}..{} are gone from the configuration, \
                         or in another order",
                        r.first,
                        r.last
                    );
                    return None;
                }
            };
            out.extend((first..=last).map(|n| (n, r.cores)));
        }
        Some(out)
    }
}

/// Instants of a journal (wall clock) on this process's clocks.
fn wall_to(now: Now) -> impl Fn(i64) -> Now {
    move |wall: i64| Now {
        wall,
        mono: now.mono - (now.wall - wall),
    }
}

fn suspended_by(policy: bool) -> SuspendedBy {
    if policy {
        SuspendedBy::Policy
    } else {
        SuspendedBy::Admin
    }
}

/// Node `n` with `c` cores added to runs of consecutive nodes with the same
/// cores on each: (first node, last node, cores on each).
pub(super) fn add_to_runs(runs: &mut Vec<(usize, usize, u32)>, n: usize, c: u32) {
    match runs.last_mut() {
        Some((_, last, cores)) if *last + 1 == n && *cores == c => *last = n,
        _ => runs.push((n, n, c)),
    }
}
