//! Reading the tables: what clients, the server and the twin may know of
//! them, as copies in the wire's types.

use std::collections::HashMap;
use std::sync::Arc;

use formats::wire::{
    ClusterStats, HostInfo, JobFilter, JobInfo, JobOutcome, JobState, NodeInfo, NodeState,
};
use formats::wire::{DepKind, ProgramInfo};

use super::tables::{Cluster, Job};
use super::{AgentId, Now};
use crate::config;

impl Cluster {
    pub fn config(&self) -> &Arc<config::Cluster> {
        &self.config
    }

    /// Jobs not yet over.
    pub fn active_jobs(&self) -> usize {
        self.jobs.len()
    }

    /// The ids of the jobs not yet over, in order.
    pub fn unfinished(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.jobs.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Whether any agent is connected.
    pub fn has_agents(&self) -> bool {
        !self.agents.is_empty()
    }

    /// Agents on other hosts (those the server pings, and that forget the
    /// ends they reported once told).
    pub fn remote_agents(&self) -> impl Iterator<Item = AgentId> + '_ {
        self.agents
            .iter()
            .filter(|(_, a)| !a.local)
            .map(|(&id, _)| id)
    }

    /// Whether `agent` runs job `id` now.
    pub fn runs(&self, agent: AgentId, id: u64) -> bool {
        self.jobs.get(&id).is_some_and(|j| j.agent == Some(agent))
    }

    /// Whether a record of job `id` from `node` may be of an execution of
    /// the job, now over: `node` is hosted by `agent` and among the nodes
    /// the job last ran on. An agent keeps an end and its record until
    /// told that the record is on disk, and sends them again when it
    /// registers again: the controller before may have noted the end and
    /// died before the record was written (or while the disk was full).
    /// The record's start is the host's clock, which need not agree with
    /// this one's, so it is not compared; an execution's record is taken
    /// once all the same (by its start).
    pub fn ran_on(&self, agent: AgentId, id: u64, node: &str) -> bool {
        let Some(info) = self.done.get(&id) else {
            return false;
        };
        let hosted = self
            .node_index
            .get(node)
            .is_some_and(|&i| self.nodes[i].agent == Some(agent));
        hosted
            && (info.nodes == node
                || formats::nodeset::parse(&info.nodes)
                    .is_ok_and(|set| set.iter().any(|n| n == node)))
    }

    /// When job `id` (not yet over) last started, wall-clock ns.
    pub fn start_ns(&self, id: u64) -> Option<i64> {
        self.jobs.get(&id).map(|j| j.start_ns)
    }

    /// Policy decisions refused as illegal so far: 0 unless a policy has a
    /// bug.
    pub fn refused(&self) -> u64 {
        self.counters.refused
    }

    /// Scheduling passes run so far.
    pub fn passes(&self) -> u64 {
        self.counters.passes
    }

    /// Agents not heard from within the timeout.
    pub fn silent_agents(&self, now: Now) -> Vec<AgentId> {
        self.agents
            .iter()
            .filter(|(_, a)| {
                now.mono - a.last_seen > self.config.heartbeat_timeout.as_nanos() as i64
            })
            .map(|(&id, _)| id)
            .collect()
    }

    /// A job's devices in the text form of records and sigsleep's
    /// `--devices` (`vn01:gpu=0,1;vn02:gpu=0,1`).
    pub(super) fn devices_text(&self, devices: &[(usize, crate::gres::Masks)]) -> String {
        let mut list = Vec::new();
        for &(n, masks) in devices {
            for (kind, bits) in self.config.kinds.names().iter().zip(masks) {
                if bits != 0 {
                    list.push(formats::record::Devices {
                        node: self.nodes[n].name.as_str().into(),
                        kind: kind.as_str().into(),
                        ids: crate::gres::ids(bits),
                    });
                }
            }
        }
        formats::record::Devices::list_to_string(&list)
    }

    pub(super) fn info(&self, j: &Job) -> JobInfo {
        JobInfo {
            id: j.id,
            name: j.spec.name.clone().unwrap_or_default(),
            state: j.state,
            partition: self.config.partitions[j.partition].name.clone(),
            cores: j.spec.cores,
            nodes: j.nodes.clone(),
            submit_ns: j.submit_ns,
            start_ns: j.start_ns,
            // A job completing shows its end from when it was told to.
            end_ns: if j.end_ns == 0 && j.ending_as.is_some() {
                j.ending_ns
            } else {
                j.end_ns
            },
            runtime_ns: j.spec.runtime_ns,
            walltime_ns: j.spec.walltime_ns,
            reason: self.reason_of(j),
            suspensions: j.suspensions.clone(),
            array: j.array,
            gres: (!j.spec.gres.is_empty()).then(|| {
                Box::new(formats::wire::JobGres {
                    asks: j.spec.gres.clone(),
                    devices: self.devices_text(&j.devices),
                })
            }),
            mem_per_cpu_mb: j.spec.mem_per_cpu_mb,
            exit: j.exit,
            restarts: j.restarts,
            completing: j.ending_as.is_some(),
            program: j
                .spec
                .program
                .as_ref()
                .map(|p| Box::new(self.program_info(j, p))),
        }
    }

    /// What Slurm's commands show of job `j`'s program: its files named
    /// as far as known (the first node once it started).
    /// Why `j` is where it is: its own reason, or, waiting in the queue
    /// for a node it names that is drained or down, Slurm's
    /// `ReqNodeNotAvail` with those nodes.
    fn reason_of(&self, j: &Job) -> String {
        let required = j.within.as_deref().map_or(&[][..], |w| &w.required[..]);
        if j.state != JobState::Pending || !j.reason.is_empty() || required.is_empty() {
            return j.reason.clone();
        }
        let unavailable: Vec<usize> = required
            .iter()
            .copied()
            .filter(|&n| self.nodes.get(n).is_some_and(|node| !node.usable()))
            .collect();
        if unavailable.is_empty() {
            return j.reason.clone();
        }
        format!(
            "ReqNodeNotAvail, UnavailableNodes:{}",
            self.config.fold(&unavailable)
        )
    }

    fn program_info(&self, j: &Job, p: &formats::wire::Program) -> formats::wire::ProgramInfo {
        let first = j
            .alloc
            .first()
            .map(|&(n, _)| self.nodes[n].name.clone())
            .unwrap_or_default();
        let started = self.start_view(j, &first);
        let path = |pattern: &str| {
            let f = super::programs::expand(pattern, p, &started);
            if f.starts_with('/') {
                f
            } else {
                format!("{}/{f}", p.workdir.trim_end_matches('/'))
            }
        };
        let stdout = path(super::programs::stdout_pattern(p, j.array.is_some()));
        ProgramInfo {
            user: p.user.clone(),
            workdir: p.workdir.clone(),
            stderr: if p.stderr.is_empty() {
                stdout.clone()
            } else {
                path(&p.stderr)
            },
            stdout,
            comment: p.comment.clone(),
            ntasks: p.ntasks,
            cpus_per_task: p.cpus_per_task,
            tasks_per_node: p.tasks_per_node,
            requeue: j.spec.requeue != Some(false),
            steps: j.steps.clone(),
            nodes_asked: j.spec.nodes,
            node_cpus: if j.alloc.is_empty() {
                j.node_cpus.clone()
            } else {
                j.alloc.iter().map(|&(_, c)| c).collect()
            },
            dependency: self.dependency_text(j),
            command: p.command.clone(),
            mem_per_node_mb: p.mem_limit_mb,
            partition_limit: p.partition_limit,
            nodelist: p.nodelist.clone(),
            exclude: p.exclude.clone(),
            own_record: j.array.is_some()
                && (j.restarts > 0
                    || j.spec
                        .dep_order
                        .iter()
                        .any(|&(k, _)| k == DepKind::AfterCorr)),
            // An array's tasks have consecutive ids from the array's own.
            only_task: j.array.is_some_and(|a| {
                a.job == j.id && self.array_of(j.id + 1).is_none_or(|b| b.job != a.job)
            }),
            // Once its wait for other jobs (and its begin) is over: when
            // it was. One over before its wait was (cancelled meanwhile)
            // never was.
            eligible_ns: (!j.reason.starts_with("Dependency")
                && !(j.start_ns == 0
                    && j.state.is_final()
                    && (j.deps_left > 0
                        || j.never
                        || j.spec.begin_ns.is_some_and(|b| b > j.end_ns))))
            .then(|| {
                let deps = if j.spec.waits_for().next().is_some() {
                    j.deps_end
                } else {
                    i64::MIN
                };
                j.submit_ns
                    .max(j.spec.begin_ns.unwrap_or(i64::MIN))
                    .max(deps)
            }),
        }
    }

    /// What held job `j` still waits for, as Slurm says it: each kind's
    /// jobs (a whole array as `A_*`, a task as `A_I`) with `(unfulfilled)`
    /// or `(failed)`, those met left out, joined by `,` (or `?` when any
    /// one is enough); empty once it waits for nothing. They come in the
    /// order asked (`JobSpec::dep_order`), else in the kinds' order.
    fn dependency_text(&self, j: &Job) -> String {
        if !j.held || j.spec.waits_for().next().is_none() {
            return String::new();
        }
        let order = &j.spec.dep_order;
        // Where an item naming `members` of `kind` was asked.
        let place = |kind: DepKind, members: &[u64]| {
            order
                .iter()
                .position(|&(k, id)| {
                    k == kind && (kind == DepKind::Singleton || members.contains(&id))
                })
                .unwrap_or(usize::MAX)
        };
        // `aftercorr`, resolved at submission into `afterok` on the task
        // of each array named: shown as asked, `aftercorr:A_*`.
        let corr: Vec<(u64, Vec<u64>)> = order
            .iter()
            .filter(|&&(k, _)| k == DepKind::AfterCorr)
            .map(|&(_, array)| {
                let of_it =
                    |d: &u64| *d == array || self.array_of(*d).is_some_and(|t| t.job == array);
                (
                    array,
                    j.spec.after_ok.iter().copied().filter(of_it).collect(),
                )
            })
            .collect();
        let ok: Vec<u64> = j
            .spec
            .after_ok
            .iter()
            .copied()
            .filter(|d| !corr.iter().any(|(_, ids)| ids.contains(d)))
            .collect();
        let mut groups: Vec<(DepKind, String, Vec<u64>)> = Vec::new();
        for (kind, ids) in [
            (DepKind::After, &j.spec.after_start),
            (DepKind::AfterAny, &j.spec.after),
            (DepKind::AfterOk, &ok),
            (DepKind::AfterNotOk, &j.spec.after_not_ok),
        ] {
            for (name, members) in self.dependency_names(ids) {
                groups.push((kind, name, members));
            }
            if kind == DepKind::AfterOk {
                for (array, ids) in &corr {
                    let name = match self.array_of(*array) {
                        Some(_) => format!("{array}_*"),
                        None => array.to_string(),
                    };
                    groups.push((DepKind::AfterCorr, name, ids.clone()));
                }
            }
        }
        let mut items: Vec<(usize, String)> = Vec::new();
        for (kind, name, members) in groups {
            let word = kind.as_str();
            let delay = members.first().map_or(0, |&d| j.spec.delay(d));
            // `aftercorr` holds as `afterok` does.
            let rule = if kind == DepKind::AfterCorr {
                "afterok"
            } else {
                word
            };
            let status = members.iter().map(|&d| {
                // A delay is waited out while the job is held.
                if kind == DepKind::After && delay > 0 {
                    Some(false)
                } else {
                    self.dependency_status(rule, d)
                }
            });
            let (mut waits, mut failed) = (false, false);
            for s in status {
                waits |= s == Some(false);
                failed |= s.is_none();
            }
            // Slurm shows a delay in whole minutes.
            let plus = match delay / 60_000_000_000 {
                0 => String::new(),
                m => format!("+{m}"),
            };
            let at = place(kind, &members);
            if waits {
                items.push((at, format!("{word}:{name}{plus}(unfulfilled)")));
            } else if failed {
                items.push((at, format!("{word}:{name}{plus}(failed)")));
            }
        }
        // Unfulfilled while one of the jobs it found is not over.
        if j.spec.singleton
            && j.spec
                .singleton_jobs
                .iter()
                .any(|d| self.jobs.contains_key(d))
        {
            items.push((
                place(DepKind::Singleton, &[]),
                "singleton(unfulfilled)".into(),
            ));
        }
        // Stable: items of one place (an array's tasks, say) stay in order.
        items.sort_by_key(|&(at, _)| at);
        let texts: Vec<String> = items.into_iter().map(|(_, t)| t).collect();
        texts.join(if j.spec.any_dep { "?" } else { "," })
    }

    /// The jobs of a dependency list as Slurm names them: a job by its id,
    /// an array whose every task is listed as `A_*`, other tasks as
    /// `A_I`; each with the ids it stands for, in the list's order.
    fn dependency_names(&self, ids: &[u64]) -> Vec<(String, Vec<u64>)> {
        let mut out: Vec<(String, Vec<u64>)> = Vec::new();
        let mut seen_arrays: Vec<u64> = Vec::new();
        for &id in ids {
            let Some(t) = self.array_of(id) else {
                out.push((id.to_string(), vec![id]));
                continue;
            };
            if seen_arrays.contains(&t.job) {
                continue;
            }
            let listed: Vec<u64> = ids
                .iter()
                .copied()
                .filter(|&d| self.array_of(d).is_some_and(|a| a.job == t.job))
                .collect();
            let all = self.tasks_of(t.job).map_or(0, |tasks| tasks.count());
            if listed.len() == all {
                seen_arrays.push(t.job);
                out.push((format!("{}_*", t.job), listed));
            } else {
                out.push((format!("{}_{}", t.job, t.index), vec![id]));
            }
        }
        out
    }

    /// Whether dependency `kind` on job `d` is met (`Some(true)`), not yet
    /// (`Some(false)`), or never can be (`None`).
    fn dependency_status(&self, kind: &str, d: u64) -> Option<bool> {
        if let Some(dep) = self.jobs.get(&d) {
            return Some(kind == "after" && dep.started_mono.is_some());
        }
        let state = self.done.get(&d).map(|i| i.state);
        let completed = state == Some(JobState::Completed);
        match kind {
            "afterok" if !completed => None,
            "afternotok" if completed => None,
            _ => Some(true),
        }
    }

    /// The jobs not yet over that pass `filter`, in id order; with ids
    /// given, an error outcome for each that is no job not yet over.
    pub fn matching(&self, filter: &JobFilter) -> (Vec<u64>, Vec<JobOutcome>) {
        let passes = |j: &Job| {
            (filter.states.is_empty() || filter.states.contains(&j.state))
                && filter
                    .partition
                    .as_ref()
                    .is_none_or(|p| *p == self.config.partitions[j.partition].name)
                && filter
                    .name
                    .as_ref()
                    .is_none_or(|n| j.spec.name.as_ref() == Some(n))
        };
        let mut unknown = Vec::new();
        let mut ids: Vec<u64> = if filter.ids.is_empty() {
            self.jobs
                .values()
                .filter(|j| passes(j))
                .map(|j| j.id)
                .collect()
        } else {
            filter
                .ids
                .iter()
                .copied()
                .filter(|id| match self.jobs.get(id) {
                    Some(j) => passes(j),
                    None => {
                        unknown.push(JobOutcome {
                            id: *id,
                            error: Some(format!("no active job {id}")),
                        });
                        false
                    }
                })
                .collect()
        };
        ids.sort_unstable();
        ids.dedup();
        (ids, unknown)
    }

    /// Active jobs in id order, and with `all` the finished ones kept.
    pub fn queue(&self, all: bool) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self.jobs.values().map(|j| self.info(j)).collect();
        if all {
            v.extend(self.done.values().cloned());
        }
        v.sort_by_key(|j| j.id);
        v
    }

    /// Active jobs, and the finished ones that ended at or after
    /// `since_ns` (wall clock), by id.
    pub fn recent(&self, since_ns: i64) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self.jobs.values().map(|j| self.info(j)).collect();
        v.extend(self.done.values().filter(|j| j.end_ns >= since_ns).cloned());
        v.sort_by_key(|j| j.id);
        v
    }

    /// These jobs, active or finished, in the order asked; ids the
    /// controller does not know (or has forgotten) are left out.
    pub fn jobs_info(&self, ids: &[u64]) -> Vec<JobInfo> {
        ids.iter()
            .filter_map(|id| match self.jobs.get(id) {
                Some(j) => Some(self.info(j)),
                None => self.done.get(id).cloned(),
            })
            .collect()
    }

    /// A node's generic resources: (name, devices, held by jobs).
    fn node_gres(&self, n: usize) -> Vec<(String, u32, u32)> {
        let Some(free) = self.device_free.get(n) else {
            return Vec::new();
        };
        let total = &self.config.nodes[n].devices;
        let free = crate::gres::count(free);
        self.config
            .kinds
            .names()
            .iter()
            .enumerate()
            .filter(|&(k, _)| total[k] > 0)
            .map(|(k, name)| {
                let (t, f) = (u32::from(total[k]), u32::from(free[k]));
                (name.clone(), t, t.saturating_sub(f))
            })
            .collect()
    }

    pub fn node_infos(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeInfo {
                name: n.name.clone(),
                state: self.node_state(i),
                cpus: self.loads[i].cpus,
                alloc_cpus: self.loads[i].alloc_cpus,
                memory_mb: self.loads[i].memory_mb,
                alloc_memory_mb: self.loads[i].alloc_mem_mb,
                host: n
                    .agent
                    .and_then(|a| self.agents.get(&a))
                    .map(|a| a.host.clone())
                    .unwrap_or_default(),
                reason: n
                    .failed
                    .clone()
                    .or_else(|| n.drained.clone())
                    .unwrap_or_default(),
                reason_ns: if n.failed.is_some() || n.drained.is_some() {
                    n.reason_ns
                } else {
                    0
                },
                gres: self.node_gres(i),
            })
            .collect()
    }

    pub fn stats(&self) -> ClusterStats {
        let mut jobs: HashMap<JobState, u64> = HashMap::new();
        for j in self.jobs.values() {
            *jobs.entry(j.state).or_default() += 1;
        }
        for j in self.done.values() {
            *jobs.entry(j.state).or_default() += 1;
        }
        let mut nodes: HashMap<NodeState, u64> = HashMap::new();
        for n in 0..self.nodes.len() {
            *nodes.entry(self.node_state(n)).or_default() += 1;
        }
        ClusterStats {
            jobs: JobState::ALL
                .iter()
                .map(|s| (*s, jobs.get(s).copied().unwrap_or(0)))
                .collect(),
            nodes: NodeState::ALL
                .iter()
                .map(|s| (*s, nodes.get(s).copied().unwrap_or(0)))
                .collect(),
            cores: self.loads.iter().map(|n| u64::from(n.cpus)).sum(),
            alloc_cores: self.loads.iter().map(|n| u64::from(n.alloc_cpus)).sum(),
            agents: self.agents.len() as u64,
            submitted: self.counters.submitted,
            started: self.counters.started,
            ended: self.counters.ended,
            suspensions: self.counters.suspensions,
            schedule_passes: self.counters.passes,
            last_pass_ns: self.counters.last_pass.as_nanos() as u64,
            refused_decisions: self.counters.refused,
            requeued: self.counters.requeued,
            pass_buckets: self
                .counters
                .pass_buckets
                .iter()
                .scan(0, |sum, n| {
                    *sum += n;
                    Some(*sum)
                })
                .collect(),
            pass_ns_total: self.counters.pass_ns_total,
            max_jobs: self.config.max_jobs as u64,
            replication: Default::default(),
            // The server's to fill in: the journal, the waiting
            // submissions and the scheduler are its own.
            journal_unsynced: 0,
            journal_lag_ns: 0,
            journal_error: None,
            records_error: None,
            held_requests: 0,
            held_jobs: 0,
            policy_failure: None,
            policy_report: None,
        }
    }

    /// The connected agents' hosts, by name.
    pub fn hosts(&self, now: Now) -> Vec<HostInfo> {
        let mut v: Vec<HostInfo> = self
            .agents
            .values()
            .map(|a| HostInfo {
                host: a.host.clone(),
                nodes: self.config.fold(&a.nodes),
                local: a.local,
                running: a.running,
                report: a.report.as_ref().map(|(r, _)| r.clone()),
                report_age_ns: a
                    .report
                    .as_ref()
                    .map_or(0, |(_, at)| (now.mono - at).max(0) as u64),
            })
            .collect();
        v.sort_by(|a, b| a.host.cmp(&b.host));
        v
    }
}
