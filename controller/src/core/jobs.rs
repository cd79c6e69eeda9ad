//! A job's life, as transitions: each checks that it is legal, makes the
//! change (`changes.rs`), and says what must follow through
//! [`Effects`]: the order for the job's agent, the journal entry.

use formats::wire::{
    ArraySpec, ArrayTask, EndWhy, Exit, HoldKind, JobOutcome, JobSpec, JobState, RanState, Reach,
    StartJob, StepInfo, ToAgent,
};
use tracing::{debug, warn};

use super::tables::{Cluster, Job, Node, SuspendedBy};
use super::{AgentId, Effects, Now};
use crate::journal::Entry;
use crate::policy::{spare, ActiveState, Decision, Within};
use std::collections::HashMap;
use std::sync::Arc;

impl Cluster {
    /// The jobs a submission with `key` made, if one did (0: none).
    pub fn submitted_with(&self, key: u64) -> Option<Vec<u64>> {
        (key != 0).then(|| self.keys.get(key)).flatten()
    }

    /// The nodes a batch job names (Slurm's `-w` and `-x`) in partition
    /// `p`, checked as Slurm checks them, in Slurm's words: each must be a
    /// node of the cluster and none both needed and not wanted; those
    /// needed must be in its partition, and the nodes it may have must
    /// have room for it. `None`: it names none.
    pub(super) fn within_of(
        &self,
        spec: &JobSpec,
        p: usize,
    ) -> Result<Option<Arc<Within>>, String> {
        let Some(program) = spec
            .program
            .as_deref()
            .filter(|g| !g.nodelist.is_empty() || !g.exclude.is_empty())
        else {
            return Ok(None);
        };
        const INVALID: &str = "Invalid node name specified";
        const UNAVAILABLE: &str = "Requested node configuration is not available";
        let named = |expr: &str| -> Result<Vec<usize>, String> {
            if expr.is_empty() {
                return Ok(Vec::new());
            }
            let mut idx = self.resolve(expr).map_err(|_| INVALID.to_string())?;
            idx.sort_unstable();
            idx.dedup();
            Ok(idx)
        };
        let required = named(&program.nodelist)?;
        let excluded_idx = named(&program.exclude)?;
        if required
            .iter()
            .any(|n| excluded_idx.binary_search(n).is_ok())
        {
            return Err(INVALID.into());
        }
        // More nodes named than it may have, or than its tasks (the
        // client keeps the first so many, as Slurm's sbatch does).
        let most = spec.nodes.map_or(0, |(_, most)| most);
        let tasks = spec.cores / program.cpus_per_task.max(1);
        if (most > 0 && required.len() as u64 > u64::from(most))
            || required.len() as u64 > u64::from(tasks.max(1))
        {
            return Err(format!(
                "invalid number of nodes (-N {}-{most})",
                required.len()
            ));
        }
        let members = &self.config.partitions[p].nodes;
        if required.iter().any(|n| !members.contains(n)) {
            return Err(UNAVAILABLE.into());
        }
        let mut excluded = Vec::new();
        if !excluded_idx.is_empty() {
            excluded = vec![0u64; self.nodes.len().div_ceil(64)];
            for &n in &excluded_idx {
                excluded[n / 64] |= 1 << (n % 64);
            }
        }
        let within = Within { required, excluded };
        let gres = self.config.kinds.request(&spec.gres).unwrap_or_default();
        // Each node it names holds one of its tasks at least (with the
        // memory and devices it asks), and those it may have hold it all.
        let mut able: Vec<(usize, u64)> = self
            .node_capacities(p, spec.mem_per_cpu_mb, gres)
            .filter(|&(n, _)| !within.excludes(n))
            .collect();
        able.sort_unstable();
        let task = u64::from(program.cpus_per_task.max(1));
        let holds_a_task = |n: &usize| {
            able.binary_search_by_key(n, |&(m, _)| m)
                .is_ok_and(|i| able[i].1 >= task)
        };
        if !within.required.iter().all(holds_a_task)
            || able.iter().map(|&(_, c)| c).sum::<u64>() < u64::from(spec.cores)
        {
            return Err(UNAVAILABLE.into());
        }
        Ok(Some(Arc::new(within)))
    }

    /// Accepts jobs; all or none: a job that can never run is refused with
    /// the reason, and so are the others of the same request.
    pub fn submit<F: Effects>(
        &mut self,
        specs: Vec<JobSpec>,
        key: u64,
        now: Now,
        fx: &mut F,
    ) -> Result<Vec<u64>, String> {
        // Asked again (the client lost the answer): the same jobs.
        if key != 0 {
            if let Some(ids) = self.keys.get(key) {
                return Ok(ids);
            }
        }
        let n = specs.len();
        let mut checked = Vec::with_capacity(n);
        // Named as people count: "job 3 of 4" of the request.
        let which = |i: usize| {
            if n == 1 {
                "job".to_string()
            } else {
                format!("job {} of {n}", i + 1)
            }
        };
        for (i, mut spec) in specs.into_iter().enumerate() {
            // Found here, below, whatever the client sent.
            spec.singleton_jobs.clear();
            let p = self.partition_of(spec.partition.as_deref())?;
            let gres = self
                .config
                .kinds
                .request(&spec.gres)
                .map_err(|e| format!("{} {e}", which(i)))?;
            // The nodes it names, if any: the checks below count only
            // those it may have.
            let within = self.within_of(&spec, p)?;
            let may = |n: usize| within.as_deref().is_none_or(|w| !w.excludes(n));
            let capacity = self.capacity(p, spec.mem_per_cpu_mb, gres);
            let part = &self.config.partitions[p];
            if spec.cores == 0 {
                return Err(format!("{}: cores must be at least 1", which(i)));
            }
            if crate::gres::any(&gres) && u64::from(spec.cores) > capacity {
                let asks = crate::gres::request_text(&spec.gres);
                return Err(if capacity == 0 {
                    format!(
                        "{}: asks {asks} of each node, but no node of partition {} has that",
                        which(i),
                        part.name
                    )
                } else {
                    format!(
                        "{}: {} cores with {asks} on each node, but the nodes of partition {} \
                         that have it have {capacity}",
                        which(i),
                        spec.cores,
                        part.name
                    )
                });
            }
            if u64::from(spec.cores) > capacity {
                return Err(if spec.mem_per_cpu_mb > 0 {
                    format!(
                        "{}: {} cores with {} MiB each, but partition {} has memory for {capacity}",
                        which(i),
                        spec.cores,
                        spec.mem_per_cpu_mb,
                        part.name
                    )
                } else {
                    format!(
                        "{}: {} cores, but partition {} has {capacity}",
                        which(i),
                        spec.cores,
                        part.name
                    )
                });
            }
            // A task's cores go whole on one node: the partition's nodes
            // must hold all its tasks so.
            let task_cores = spec.program.as_ref().map_or(1, |p| p.cpus_per_task.max(1));
            let whole_nodes = spec.program.as_ref().is_some_and(|p| p.exclusive);
            if task_cores > 1 && !whole_nodes && spec.cores.is_multiple_of(task_cores) {
                let holds: u64 = self
                    .node_capacities(p, spec.mem_per_cpu_mb, gres)
                    .filter(|&(n, _)| may(n))
                    .map(|(_, c)| c / u64::from(task_cores))
                    .sum();
                let tasks = spec.cores / task_cores;
                if holds < u64::from(tasks) {
                    return Err(format!(
                        "{}: {tasks} tasks of {task_cores} cores, but the nodes of partition {} \
                         hold {holds} such tasks",
                        which(i),
                        part.name
                    ));
                }
            }
            // --ntasks-per-node: that many tasks on one node.
            let per_node = spec.program.as_ref().map_or(0, |p| p.tasks_per_node);
            if per_node > 0 {
                let wants = u64::from(per_node) * u64::from(task_cores);
                let roomiest = self
                    .node_capacities(p, spec.mem_per_cpu_mb, gres)
                    .filter(|&(n, _)| may(n))
                    .map(|(_, c)| c)
                    .max()
                    .unwrap_or(0);
                if roomiest < wants {
                    return Err(format!(
                        "{}: {per_node} tasks of {task_cores} cores on each node, but the \
                         nodes of partition {} have at most {roomiest} cores",
                        which(i),
                        part.name
                    ));
                }
            }
            if let Some((least, most)) = spec.nodes {
                if least == 0 || (most > 0 && most < least) || least > spec.cores {
                    return Err(format!(
                        "{}: cannot span {least}{} nodes with {} cores",
                        which(i),
                        if most == least || most == 0 {
                            String::new()
                        } else {
                            format!("-{most}")
                        },
                        spec.cores
                    ));
                }
                let mut able: Vec<(usize, u64)> = self
                    .node_capacities(p, spec.mem_per_cpu_mb, gres)
                    .filter(|&(n, _)| may(n))
                    .filter(|&(_, c)| c > 0)
                    .collect();
                able.sort_unstable();
                // In a contiguous partition, its nodes must be consecutive.
                if part.contiguous {
                    let (mut run, mut longest, mut last) = (0usize, 0usize, None);
                    for &(n, _) in &able {
                        run = if last.is_some_and(|l: usize| l + 1 == n) {
                            run + 1
                        } else {
                            1
                        };
                        longest = longest.max(run);
                        last = Some(n);
                    }
                    if least as usize > longest {
                        return Err(format!(
                            "{}: asks {least} consecutive nodes, but partition {} has at most \
                             {longest} in a row that could hold it",
                            which(i),
                            part.name
                        ));
                    }
                }
                let mut caps: Vec<u64> = able.iter().map(|&(_, c)| c).collect();
                let fits = if most == 0 {
                    caps.len()
                } else {
                    // On its most nodes, the roomiest ones.
                    caps.sort_unstable_by(|a, b| b.cmp(a));
                    caps.truncate(most as usize);
                    if caps.iter().sum::<u64>() < u64::from(spec.cores) {
                        return Err(format!(
                            "{}: {} cores on at most {most} nodes, but no {most} nodes of \
                             partition {} have that many",
                            which(i),
                            spec.cores,
                            part.name
                        ));
                    }
                    caps.len()
                };
                if least as usize > fits {
                    return Err(format!(
                        "{}: asks {least} nodes, but partition {} has {fits} that could hold it",
                        which(i),
                        part.name
                    ));
                }
            }
            if part.max_time_ns > 0 && spec.walltime_ns > part.max_time_ns {
                return Err(format!(
                    "{}: wall time over partition {}'s limit",
                    which(i),
                    part.name
                ));
            }
            // A batch job without a limit of its own gets its partition's,
            // as Slurm's does (squeue and scontrol show it while it waits);
            // a sleep keeps its trace's run time. Marked as the partition's
            // until it starts: a restart meanwhile gives it the
            // partition's as it is then (`partition_limits_now`).
            if let Some(program) = spec.program.as_mut() {
                program.partition_limit = spec.walltime_ns == 0;
                if program.partition_limit {
                    spec.walltime_ns = part.max_time_ns;
                }
            }
            // Only jobs that exist can be waited for, so waits never form
            // a cycle: a job can wait only for jobs older than itself.
            if let Some(dep) = spec
                .waits_for()
                .chain(spec.after_corr.iter().copied())
                .find(|d| !self.jobs.contains_key(d) && !self.done.contains_key(d))
            {
                return Err(if dep >= self.next_id {
                    format!(
                        "{}: cannot wait for job {dep}: there is no such job yet",
                        which(i)
                    )
                } else {
                    format!(
                        "{}: cannot wait for job {dep}: no such job (or it ended too long ago to \
                         be remembered)",
                        which(i)
                    )
                });
            }
            if spec
                .array
                .as_ref()
                .is_some_and(|a| a.indices.is_empty() || a.indices.len() > ArraySpec::MAX_TASKS)
            {
                return Err(format!(
                    "{}: an array has 1 to {} tasks",
                    which(i),
                    ArraySpec::MAX_TASKS
                ));
            }
            if spec.think_ns.is_some() && spec.waits_for().next().is_none() {
                return Err(format!("{}: a think time needs jobs to wait for", which(i)));
            }
            checked.push((p, spec, within));
        }
        let mut ids = Vec::with_capacity(checked.len());
        for (p, mut spec, within) in checked {
            // Waiting for an array (its id) is waiting for all its tasks,
            // as Slurm's dependencies do.
            if !spec.exact_deps {
                spec.after = self.with_tasks(&spec.after);
                spec.after_ok = self.with_tasks(&spec.after_ok);
                spec.after_not_ok = self.with_tasks(&spec.after_not_ok);
                spec.after_start = self.with_tasks(&spec.after_start);
            }
            // Not an array: `aftercorr` waits for every task, as `afterok`.
            if spec.array.is_none() {
                let every = self.with_tasks(&std::mem::take(&mut spec.after_corr));
                spec.after_ok.extend(every);
            }
            // A singleton waits for the jobs not yet over of its name and
            // user, as they are now; the journal keeps what it found.
            if spec.singleton {
                let user = spec.program.as_ref().map(|p| p.user.as_str());
                let mut same: Vec<u64> = self
                    .jobs
                    .values()
                    .filter(|j| {
                        j.spec.name == spec.name
                            && j.spec.program.as_ref().map(|p| p.user.as_str()) == user
                    })
                    .map(|j| j.id)
                    .collect();
                same.sort_unstable();
                spec.singleton_jobs = same;
            }
            // An array is a job per task, the first task's id its own.
            let tasks: Vec<Option<ArrayTask>> = match spec.array.take() {
                None => vec![None],
                Some(a) => a
                    .indices
                    .iter()
                    .map(|&index| {
                        Some(ArrayTask {
                            job: self.next_id,
                            index,
                            limit: a.limit,
                        })
                    })
                    .collect(),
            };
            // The tasks of each array named by `aftercorr`, by index, found
            // once for all the tasks of this one.
            let corr: Vec<(u64, Option<HashMap<u32, u64>>)> = spec
                .after_corr
                .iter()
                .map(|&a| (a, self.tasks_by_index(a)))
                .collect();
            let count = tasks.len();
            for (n, task) in tasks.into_iter().enumerate() {
                let id = self.next_id;
                debug!(job = id, cores = spec.cores, "job submitted");
                // The last task (a job's only one) takes the spec itself:
                // a batch job's environment and script are not copied.
                let mut spec = if n + 1 == count {
                    std::mem::take(&mut spec)
                } else {
                    spec.clone()
                };
                // Each task waits for the task of its index of each array
                // named (`aftercorr`; a job that is no array is its own
                // only task). One whose index an array lacks waits for
                // every task of it to complete, as Slurm 22.05's does.
                if let Some(t) = task {
                    spec.after_corr.clear();
                    for (a, tasks) in &corr {
                        match tasks {
                            Some(tasks) => match tasks.get(&t.index) {
                                Some(&partner) => spec.after_ok.push(partner),
                                None => {
                                    let mut every: Vec<u64> = tasks.values().copied().collect();
                                    every.sort_unstable();
                                    spec.after_ok.extend(every);
                                }
                            },
                            None => spec.after_ok.push(*a),
                        }
                    }
                }
                let mut job = Job::pending(id, spec, p, now);
                job.array = task;
                job.within = within.clone();
                self.admitted(job, now);
                if F::JOURNALS {
                    let image = self.image(&self.jobs[&id], now);
                    fx.journal(Entry::Submitted(Box::new(image)));
                }
                ids.push(id);
            }
        }
        if let (true, Some(&first)) = (key != 0, ids.first()) {
            let count = ids.len() as u32;
            self.keyed(key, first, count);
            if F::JOURNALS {
                fx.journal(Entry::Keyed { key, first, count });
            }
        }
        self.counters.submitted += ids.len() as u64;
        Ok(ids)
    }

    /// Carries out a policy's decisions, checking each: one that would
    /// overbook a node or act on a job in the wrong state is refused,
    /// logged, and returned with why.
    pub fn apply<F: Effects>(
        &mut self,
        decisions: Vec<Decision>,
        now: Now,
        fx: &mut F,
    ) -> Vec<String> {
        let mut refused = Vec::new();
        self.unqueue_batched(|c| {
            for d in decisions {
                let result = match d {
                    Decision::Start { job, alloc } => c.start(job, alloc, now, fx),
                    Decision::Suspend(job) => c.suspend_job(job, SuspendedBy::Policy, now, fx),
                    Decision::Resume(job) => c.resume_job(job, SuspendedBy::Policy, now, fx),
                    Decision::Cancel(job) => c.cancel_at(job, JobState::Cancelled, now, fx),
                    Decision::Preempt { job, requeue } => c.preempt(job, requeue, now, fx),
                };
                if let Err(e) = result {
                    warn!("policy decision refused: {e}");
                    c.counters.refused += 1;
                    refused.push(e);
                }
            }
        });
        refused
    }

    fn start<F: Effects>(
        &mut self,
        id: u64,
        alloc: Vec<(usize, u32)>,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("start of unknown job {id}"))?;
        if job.state != JobState::Pending {
            return Err(format!(
                "start of job {id}, which is {}",
                job.state.as_str()
            ));
        }
        let total: u32 = alloc.iter().map(|(_, c)| c).sum();
        if total != job.spec.cores {
            return Err(format!(
                "start of job {id} on {total} cores, not {}",
                job.spec.cores
            ));
        }
        // In a partition that time-slices, at most K jobs per core, running
        // or suspended. (A job suspended by preemption elsewhere does not
        // count: its cores are free for the job that preempted it.)
        let partition = &self.config.partitions[job.partition];
        let gang = partition.oversubscribe > 1;
        // Its process goes to the agent of its first node.
        let first = alloc.first().map_or(usize::MAX, |&(n, _)| n);
        let agent = self
            .nodes
            .get(first)
            .and_then(|n| n.agent)
            .ok_or_else(|| format!("node of job {id} is down"))?;
        // The partition's nodes as a bit set (made once per configuration
        // on each thread that starts jobs): one bit per node to read, not
        // its index.
        let membership = spare::membership(&self.partition_views, self.nodes.len());
        let members = &membership.members[job.partition];
        let wants_devices = crate::gres::any(&job.gres);
        let mem_per_cpu = job.spec.mem_per_cpu_mb;
        // Each node is checked and charged in one go (the widest jobs'
        // nodes are walked once, reading only their loads and a bit of the
        // usable set); a refusal gives back what was charged, and only
        // then is the node itself read, to say why.
        let mut charged = 0;
        let mut refused = None;
        // Its nodes as runs, for the journal: found in the same walk.
        let mut runs = Vec::new();
        for &(n, c) in &alloc {
            let Some(load) = self.loads.get_mut(n) else {
                refused = Some(format!("start of job {id} on node {n}"));
                break;
            };
            let member = spare::bit(members, n);
            let mem = u64::from(c) * mem_per_cpu;
            let usable = spare::bit(&self.usable, n);
            debug_assert_eq!(usable, self.nodes.get(n).is_some_and(Node::usable));
            let devices_short = wants_devices
                && self.device_free.get(n).is_some_and(|free| {
                    crate::gres::count(free)
                        .iter()
                        .zip(&job.gres)
                        .any(|(f, g)| f < g)
                });
            if !member
                || !usable
                || load.alloc_cpus + c > load.cpus
                || (gang && load.slot_cpus + c > load.slots)
                || load.alloc_mem_mb + mem > load.memory_mb
                || devices_short
            {
                let node = &self.nodes[n];
                refused = Some(if !member {
                    format!(
                        "start of job {id} on node {}, which is not in its partition {}",
                        node.name, partition.name
                    )
                } else if let Some(why) = &node.drained {
                    format!(
                        "start of job {id} on node {}, which is drained ({why})",
                        node.name
                    )
                } else if let Some(why) = &node.failed {
                    format!(
                        "start of job {id} on node {}, which failed ({why})",
                        node.name
                    )
                } else if node.agent.is_none() {
                    format!("start of job {id} on node {}, which is down", node.name)
                } else {
                    format!("start of job {id} would overbook node {}", node.name)
                });
                break;
            }
            load.charge(c, mem);
            charged += 1;
            if F::JOURNALS {
                super::restore::add_to_runs(&mut runs, n, c);
            }
        }
        // The nodes it names (a Batsim scheduler is not told them).
        if let (None, Some(w)) = (&refused, job.within.as_deref()) {
            if let Some(&(n, _)) = alloc.iter().find(|&&(n, _)| w.excludes(n)) {
                refused = Some(format!(
                    "start of job {id} on node {}, which it excludes",
                    self.nodes[n].name
                ));
            } else if let Some(&n) = w
                .required
                .iter()
                .find(|n| !alloc.iter().any(|(m, _)| m == *n))
            {
                refused = Some(format!(
                    "start of job {id} without node {}, which it names",
                    self.nodes[n].name
                ));
            }
        }
        if let Some(why) = refused {
            for &(n, c) in &alloc[..charged] {
                self.loads[n].uncharge(c, u64::from(c) * mem_per_cpu);
            }
            return Err(why);
        }
        let host = self.agents.get(&agent).map(|a| a.host.clone());
        self.started(id, alloc, host, None, now);
        let job = &self.jobs[&id];
        debug!(job = id, nodes = %job.nodes, "job started");
        if F::JOURNALS {
            // After the allocation is set: a restart gives the job back
            // exactly these cores.
            fx.journal(Entry::Started {
                id,
                alloc: self.named_runs(runs),
                nodes: job.nodes.clone(),
                host: job.host.clone().unwrap_or_default(),
                at_ns: now.wall,
                devices: self.devices_text(&job.devices),
            });
        }
        let devices = self.devices_text(&job.devices);
        fx.to_agent(
            agent,
            ToAgent::Start(self.start_order(id, first, devices, now.wall)),
        );
        self.counters.started += 1;
        Ok(())
    }

    /// The tasks of array `array` as (id, index): its own id first, then
    /// the ids after it (one forgotten, out of the history, or dropped
    /// leaves a gap, not an end); `None` for a job that is no array (or a
    /// task of another).
    pub(super) fn tasks_of(&self, array: u64) -> Option<impl Iterator<Item = (u64, u32)> + '_> {
        self.array_of(array).filter(|first| first.job == array)?;
        let last = (array + ArraySpec::MAX_TASKS as u64).min(self.next_id);
        Some((array..last).filter_map(move |t| {
            self.array_of(t)
                .filter(|a| a.job == array)
                .map(|a| (t, a.index))
        }))
    }

    /// The tasks of array `array` by index ([`Cluster::tasks_of`]).
    fn tasks_by_index(&self, array: u64) -> Option<HashMap<u32, u64>> {
        Some(self.tasks_of(array)?.map(|(t, index)| (index, t)).collect())
    }

    /// `deps`, each array's id followed by every task of it.
    fn with_tasks(&self, deps: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(deps.len());
        for &dep in deps {
            match self.tasks_of(dep) {
                Some(tasks) => out.extend(tasks.map(|(t, _)| t)),
                None => out.push(dep),
            }
        }
        out
    }

    /// What job `job`'s script may be told of its start on `first`.
    pub(super) fn start_view<'a>(
        &'a self,
        job: &'a Job,
        first: &'a str,
    ) -> super::programs::Started<'a> {
        super::programs::Started {
            id: job.id,
            name: job.spec.name.as_deref().unwrap_or(""),
            array: job.array,
            partition: &self.config.partitions[job.partition].name,
            nodes: &job.nodes,
            alloc: &job.alloc,
            first,
            mem_per_cpu_mb: job.spec.mem_per_cpu_mb,
            restarts: job.restarts,
        }
    }

    /// The order that starts job `id`, whose first node is `first`, at
    /// wall-clock `start_ns` (0: an order ahead of its start).
    fn start_order(&self, id: u64, first: usize, devices: String, start_ns: i64) -> StartJob {
        let job = &self.jobs[&id];
        let program = job.spec.program.as_ref().map(|p| {
            Box::new(super::programs::start(
                p,
                &self.start_view(job, &self.nodes[first].name),
            ))
        });
        StartJob {
            job: id,
            node: self.nodes[first].name.clone(),
            cores: job.spec.cores,
            runtime_ns: job.spec.runtime_ns,
            walltime_ns: job.spec.walltime_ns,
            submit_ns: job.submit_ns,
            start_ns,
            devices,
            program,
        }
    }

    /// The order that would start pending job `id` on `alloc`, and the
    /// agent it would go to, so that its process can be started ahead
    /// ([`ToAgent::Prepare`]). `None` for a job that asks for devices
    /// (which ones it gets is settled only at its start) or runs a
    /// program (whose environment names its nodes).
    pub(super) fn start_order_ahead(
        &self,
        id: u64,
        alloc: &[(usize, u32)],
    ) -> Option<(AgentId, StartJob)> {
        let job = self.jobs.get(&id)?;
        let &(first, _) = alloc.first()?;
        // Devices are settled only at the start; a script's environment
        // names its nodes.
        if job.state != JobState::Pending || !job.spec.gres.is_empty() || job.spec.program.is_some()
        {
            return None;
        }
        let agent = self.nodes.get(first)?.agent?;
        let mut order = self.start_order(id, first, String::new(), 0);
        // One still held is submitted when it is released: so its record
        // will say.
        if job.held {
            order.submit_ns = job.release_wall();
        }
        Some((agent, order))
    }

    fn suspend_job<F: Effects>(
        &mut self,
        id: u64,
        by: SuspendedBy,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        if job.state != JobState::Running || job.ending_as.is_some() {
            return Err(format!("job {id} is {}, not running", job.state.as_str()));
        }
        let agent = job.agent;
        self.suspended(id, by, now);
        debug!(job = id, by = ?by, "job suspended");
        if F::JOURNALS {
            fx.journal(Entry::Suspended {
                id,
                by_policy: by == SuspendedBy::Policy,
                at_ns: now.wall,
            });
        }
        if let Some(a) = agent {
            fx.to_agent(a, ToAgent::Suspend(id));
        }
        self.counters.suspensions += 1;
        Ok(())
    }

    fn resume_job<F: Effects>(
        &mut self,
        id: u64,
        by: SuspendedBy,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        if job.state != JobState::Suspended {
            return Err(format!("job {id} is {}, not suspended", job.state.as_str()));
        }
        if job.suspended_by != Some(by) {
            return Err(match by {
                SuspendedBy::Admin => format!(
                    "job {id} was suspended by the scheduler; it resumes when its cores are free"
                ),
                SuspendedBy::Policy => format!("job {id} is held by an administrator"),
            });
        }
        if by == SuspendedBy::Policy {
            if let Some(&(n, _)) = job
                .alloc
                .iter()
                .find(|&&(n, c)| self.loads[n].alloc_cpus + c > self.loads[n].cpus)
            {
                return Err(format!(
                    "resume of job {id} would overbook node {}",
                    self.nodes[n].name
                ));
            }
        }
        let agent = job.agent;
        self.resumed(id, now);
        debug!(job = id, "job resumed");
        if F::JOURNALS {
            fx.journal(Entry::Resumed {
                id,
                at_ns: now.wall,
            });
        }
        if let Some(a) = agent {
            fx.to_agent(a, ToAgent::Resume(id));
        }
        Ok(())
    }

    /// A job is over, for good.
    pub(super) fn end<F: Effects>(
        &mut self,
        id: u64,
        state: JobState,
        reason: String,
        now: Now,
        fx: &mut F,
    ) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.started_mono.is_some() {
            self.counters.ended += 1;
        }
        debug!(job = id, state = state.as_str(), "job ended");
        self.finished(id, state, reason, now);
        if F::JOURNALS {
            if let Some(info) = self.done.get(&id) {
                fx.journal(Entry::Ended(Box::new(info.clone())));
            }
        }
    }

    /// An agent reported a batch script's steps, ahead of its end. Not
    /// journaled: they are kept with the job once it is over (its
    /// `Ended` entry), and a restart in between forgets them.
    pub fn job_steps(&mut self, agent: AgentId, id: u64, steps: Vec<StepInfo>) {
        if let Some(j) = self.jobs.get_mut(&id).filter(|j| j.agent == Some(agent)) {
            j.steps = steps;
        }
    }

    /// An agent reported that a job's process ended.
    pub fn job_ended<F: Effects>(
        &mut self,
        agent: AgentId,
        id: u64,
        exit: Exit,
        now: Now,
        fx: &mut F,
    ) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.agent != Some(agent) {
            warn!(
                job = id,
                agent, "end reported by an agent that does not run the job"
            );
            return;
        }
        fx.end_taken(agent, id);
        let cancelled = job.ending_as;
        // Ended to run again (`scontrol requeue`): however it ended.
        if cancelled == Some(JobState::Pending) {
            if F::JOURNALS {
                fx.journal(Entry::Requeued {
                    id,
                    reason: String::new(),
                    at_ns: now.wall,
                });
            }
            self.requeued(id, String::new(), now);
            self.counters.requeued += 1;
            return;
        }
        // Killed because a node of its failed: requeued or over, as its
        // partition says; unless it ended on its own first (its record is
        // written: it counts as it ended).
        let on_its_own = match exit {
            Exit::Code(c) => c == 0 || c == 124,
            Exit::Ran(r) => r.state != RanState::Cancelled,
            _ => false,
        };
        if cancelled == Some(JobState::NodeFail) && !on_its_own {
            let why = match job.reason.as_str() {
                "" => "a node of it failed".to_string(),
                r => r.to_string(),
            };
            self.execution_lost(id, &why, now, fx);
            return;
        }
        let asked = |default: JobState| match cancelled {
            Some(JobState::Timeout) => (JobState::Timeout, "wall-time limit".to_string()),
            Some(s) => (s, "cancelled".to_string()),
            None => (default, String::new()),
        };
        let (state, reason) = match exit {
            Exit::Code(0) => (JobState::Completed, String::new()),
            Exit::Code(124) => (JobState::Timeout, "wall-time limit".into()),
            Exit::Code(c) if c > 128 => {
                let (s, r) = asked(JobState::Cancelled);
                (
                    s,
                    if r.is_empty() {
                        format!("signal {}", c - 128)
                    } else {
                        r
                    },
                )
            }
            Exit::Signal(sig) => {
                let (s, r) = asked(JobState::Failed);
                (
                    s,
                    if r.is_empty() {
                        format!("killed by signal {sig}")
                    } else {
                        r
                    },
                )
            }
            Exit::Code(c) => (JobState::Failed, format!("sigsleep exited {c}")),
            Exit::Ran(r) => match r.state {
                RanState::Completed => (JobState::Completed, String::new()),
                RanState::Timeout => (JobState::Timeout, "wall-time limit".into()),
                RanState::OutOfMemory => (JobState::OutOfMemory, "out of memory".into()),
                RanState::Cancelled => asked(JobState::Cancelled),
                RanState::Failed if r.signal > 0 => {
                    (JobState::Failed, format!("killed by signal {}", r.signal))
                }
                RanState::Failed => (JobState::Failed, format!("exit code {}", r.code)),
            },
            Exit::SpawnFailed => (JobState::Failed, "could not start sigsleep".into()),
            Exit::Fenced => {
                // Not an end of the job: its agent killed it because it
                // could not reach this controller, which may have run it
                // elsewhere.
                self.execution_lost(id, "its agent lost the controller and killed it", now, fx);
                return;
            }
        };
        if let Some(job) = self.jobs.get_mut(&id) {
            job.exit = exit_code(&exit, state);
        }
        self.end(id, state, reason, now, fx);
    }

    pub fn cancel<F: Effects>(&mut self, ids: &[u64], now: Now, fx: &mut F) -> Vec<JobOutcome> {
        self.unqueue_batched(|c| {
            ids.iter()
                .map(|&id| JobOutcome {
                    id,
                    error: c.cancel_unless_due(id, now, fx).err(),
                })
                .collect()
        })
    }

    /// Cancels job `id`, unless it is a sleep running and due to end by
    /// `now` (its run time counted, its end not yet reported): then it is
    /// over, as a new limit finds it in sigsleep. Its process ends it as
    /// completed, whichever of the two reaches it first, and the twin, in
    /// which a cancel and that end come at one instant (a trace's job
    /// cancelled at its run time), agrees.
    fn cancel_unless_due<F: Effects>(
        &mut self,
        id: u64,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let sleep = self.jobs.get(&id).is_some_and(|j| j.spec.program.is_none());
        if sleep && self.end_of.get(&id).is_some_and(|&at| at <= now.mono) {
            return Err(format!("job {id} is already over: its run time is up"));
        }
        self.cancel_at(id, JobState::Cancelled, now, fx)
    }

    /// Ends a pending job at once; tells a started one's agent to end it,
    /// which it will `as_state`.
    pub(super) fn cancel_at<F: Effects>(
        &mut self,
        id: u64,
        as_state: JobState,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| format!("no active job {id}"))?;
        match job.state {
            JobState::Pending => {
                self.end(
                    id,
                    JobState::Cancelled,
                    "cancelled while pending".into(),
                    now,
                    fx,
                );
            }
            JobState::Running | JobState::Suspended => {
                // Being killed for a failed node: it was to be run again;
                // now it ends as asked (its kill is on its way).
                if matches!(job.ending_as, Some(JobState::NodeFail | JobState::Pending)) {
                    self.ending(id, as_state, now);
                    if F::JOURNALS {
                        fx.journal(Entry::Ending {
                            id,
                            state: as_state,
                            at_ns: now.wall,
                        });
                    }
                } else if job.ending_as.is_none() {
                    let agent = job.agent;
                    self.ending(id, as_state, now);
                    if F::JOURNALS {
                        fx.journal(Entry::Ending {
                            id,
                            state: as_state,
                            at_ns: now.wall,
                        });
                    }
                    if let Some(a) = agent {
                        fx.to_agent(a, end_order(id, as_state));
                    }
                }
            }
            _ => return Err(format!("job {id} is already over")),
        }
        Ok(())
    }

    /// Ends a running job for a higher-priority one: requeued when asked
    /// and the job allows it, else (as Slurm falls back) cancelled, to end
    /// preempted.
    fn preempt<F: Effects>(
        &mut self,
        id: u64,
        requeue: bool,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        if requeue && self.requeue_one(id, false, now, fx).is_ok() {
            return Ok(());
        }
        self.cancel_at(id, JobState::Preempted, now, fx)
    }

    /// The array a job (not over, or remembered) is a task of.
    pub(super) fn array_of(&self, id: u64) -> Option<ArrayTask> {
        match self.jobs.get(&id) {
            Some(j) => j.array,
            None => self.done.get(&id).and_then(|i| i.array),
        }
    }

    /// When (monotonic ns) the next held job is to be released.
    pub fn next_release(&self) -> Option<i64> {
        self.releases.first().map(|&(at, _)| at)
    }

    /// Releases the held jobs whose think time is over, or whose begin has
    /// come, by `now`: each is submitted at its instant.
    pub fn release_due<F: Effects>(&mut self, now: Now, fx: &mut F) {
        while let Some(&(at, id)) = self.releases.first().filter(|(at, _)| *at <= now.mono) {
            self.releases.pop_first();
            let Some(job) = self
                .jobs
                .get(&id)
                .filter(|j| j.held && j.deps_left == 0 && j.hold.is_none())
            else {
                continue;
            };
            let at = Now {
                mono: at,
                wall: job.release_wall(),
            };
            debug!(job = id, "released after its think time, or at its begin");
            self.released(id, Some(at), at);
            if F::JOURNALS {
                fx.journal(Entry::Released { id, at_ns: at.wall });
            }
        }
    }

    /// `scontrol hold` and `uhold` (`Some` kind) or `release` (`None`),
    /// each by Slurm's operator or not (`privileged`); see
    /// [`Cluster::set_hold`] for what each does.
    pub fn hold<F: Effects>(
        &mut self,
        ids: &[u64],
        kind: Option<HoldKind>,
        privileged: bool,
        now: Now,
        fx: &mut F,
    ) -> Vec<JobOutcome> {
        self.unqueue_batched(|c| {
            ids.iter()
                .map(|&id| {
                    let r = c.hold_as(id, kind, privileged).and_then(|hold| match hold {
                        Some(hold) => c.held(id, hold, now, fx),
                        None => Ok(()),
                    });
                    JobOutcome { id, error: r.err() }
                })
                .collect()
        })
    }

    /// `scancel --signal`: `signal` to the processes of running batch
    /// scripts' jobs that `reach` names, their state unchanged; Slurm's
    /// errors for a job that is not running, or runs no script.
    pub fn signal<F: Effects>(
        &self,
        ids: &[u64],
        signal: i32,
        reach: Reach,
        fx: &mut F,
    ) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| {
                let error = match self.jobs.get(&id) {
                    None => Some("Job/step already completing or completed".to_string()),
                    Some(j) if j.spec.program.is_none() => Some("Job script not specified".into()),
                    Some(j) => match (j.state, j.ending_as, j.agent) {
                        (JobState::Running, None, Some(a)) => {
                            fx.to_agent(
                                a,
                                ToAgent::Signal {
                                    job: id,
                                    signal,
                                    reach,
                                },
                            );
                            None
                        }
                        _ => Some("Job can not be altered now, try again later".into()),
                    },
                };
                JobOutcome { id, error }
            })
            .collect()
    }

    /// `scontrol requeue` (with `hold`: `requeuehold`): started jobs end
    /// (their process is cancelled: `SIGTERM`, then `SIGKILL` after the
    /// grace) and wait again, under the same id, as on Slurm; see
    /// [`Cluster::requeued`].
    pub fn requeue<F: Effects>(
        &mut self,
        ids: &[u64],
        hold: bool,
        now: Now,
        fx: &mut F,
    ) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| {
                let r = self.requeue_one(id, hold, now, fx);
                JobOutcome { id, error: r.err() }
            })
            .collect()
    }

    fn requeue_one<F: Effects>(
        &mut self,
        id: u64,
        hold: bool,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let Some(job) = self.jobs.get(&id) else {
            return self.requeue_over(id, hold, now, fx);
        };
        // Slurm's words for a job submitted with --no-requeue, checked
        // first as Slurm checks it.
        if job.spec.requeue == Some(false) {
            return Err("Requested operation is presently disabled".into());
        }
        match (job.state, job.ending_as) {
            (JobState::Pending, _) => return Err("Job is pending execution".into()),
            (_, Some(JobState::Pending)) => {}
            (_, Some(_)) => return Err(format!("job {id} is already ending")),
            (_, None) => {
                let agent = job.agent;
                self.ending(id, JobState::Pending, now);
                if F::JOURNALS {
                    fx.journal(Entry::Ending {
                        id,
                        state: JobState::Pending,
                        at_ns: now.wall,
                    });
                }
                // An agent away is told when it comes back (`claim`).
                if let Some(a) = agent {
                    fx.to_agent(a, end_order(id, JobState::Pending));
                }
            }
        }
        if hold {
            self.held(id, Some(HoldKind::Requeued), now, fx)?;
        }
        Ok(())
    }

    /// `scontrol requeue` of a job over: a batch job goes back to the
    /// queue, as Slurm requeues finished batch jobs, while its spec is
    /// kept ([`Cluster::readmitted`]). The errors are Slurm's, but for a
    /// job whose spec is no longer kept.
    fn requeue_over<F: Effects>(
        &mut self,
        id: u64,
        hold: bool,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        let Some(info) = self.done.get(&id) else {
            return Err("Invalid job id specified".into());
        };
        let Some(program) = &info.program else {
            return Err("Only batch jobs are accepted or processed".into());
        };
        if !program.requeue {
            return Err("Requested operation is presently disabled".into());
        }
        if !self.readmitted(id, hold, now) {
            return Err(format!(
                "job {id} is over and no longer kept to run again (clemu keeps a finished \
                 job's script for {} s, and for the last {} jobs, across no restart of the \
                 controller)",
                super::tables::KEEP_FINISHED_NS / 1_000_000_000,
                super::tables::KEEP_FINISHED_MAX
            ));
        }
        if F::JOURNALS {
            let image = self.image(&self.jobs[&id], now);
            fx.journal(Entry::Readmitted(Box::new(image)));
        }
        Ok(())
    }

    /// `scontrol update TimeLimit`: a job's wall-time limit (nanoseconds,
    /// 0 for none), within its partition's. A running or suspended job's
    /// process is told (its end moves, counted from its start; a limit
    /// below what it ran ends it at once, timed out), as Slurm does.
    pub fn limit<F: Effects>(&mut self, id: u64, walltime_ns: u64, fx: &mut F) -> JobOutcome {
        let r = self.set_limit(id, walltime_ns);
        if r.is_ok() {
            if F::JOURNALS {
                fx.journal(Entry::Limit { id, walltime_ns });
            }
            let job = &self.jobs[&id];
            let agent = job.alloc.first().and_then(|&(n, _)| self.nodes[n].agent);
            if let (true, Some(agent)) = (job.state != JobState::Pending, agent) {
                fx.to_agent(
                    agent,
                    ToAgent::Limit {
                        job: id,
                        walltime_ns,
                    },
                );
            }
        }
        JobOutcome { id, error: r.err() }
    }

    /// Sets job `id`'s limit (see [`Cluster::limit`]); a queued job keeps
    /// its place, a running one's expected end moves. The errors are
    /// Slurm's.
    pub(super) fn set_limit(&mut self, id: u64, walltime_ns: u64) -> Result<(), String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| "Invalid job id specified".to_string())?;
        if job.ending_as.is_some() {
            return Err("Job/step already completing or completed".into());
        }
        let part = &self.config.partitions[job.partition];
        if part.max_time_ns > 0 && (walltime_ns == 0 || walltime_ns > part.max_time_ns) {
            return Err(format!(
                "Requested time limit is invalid (missing or exceeds some limit): over \
                 partition {}'s",
                part.name
            ));
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return Ok(());
        };
        j.spec.walltime_ns = walltime_ns;
        // A limit of its own from now on.
        if let Some(p) = j.spec.program.as_mut() {
            p.partition_limit = false;
        }
        if j.state != JobState::Pending {
            j.limit_changed = true;
            // What policies expect of it: its time still to go, from
            // when it last started, resumed or was suspended.
            let estimate = j.estimate_ns().min(i64::MAX as u64) as i64;
            let list = Arc::make_mut(&mut self.active);
            if let Ok(at) = list.binary_search_by_key(&id, |a| a.job) {
                let a = &mut list[at];
                let ran = j.run_time(a.since_ns);
                a.remaining_ns = (estimate - ran).max(0);
                if a.state == ActiveState::Running {
                    a.expected_end_ns = a.since_ns.saturating_add(a.remaining_ns);
                }
            }
            self.wants_pass = true;
            return Ok(());
        }
        self.requeue_view(id);
        self.wants_pass = true;
        Ok(())
    }

    /// Job `id` held so (`None`: released), and journaled.
    fn held<F: Effects>(
        &mut self,
        id: u64,
        hold: Option<HoldKind>,
        now: Now,
        fx: &mut F,
    ) -> Result<(), String> {
        self.set_hold(id, hold, now)?;
        if F::JOURNALS {
            fx.journal(Entry::Held {
                id,
                hold,
                at_ns: now.wall,
            });
        }
        Ok(())
    }

    /// What a hold (`Some` kind) or release (`None`) asked by Slurm's
    /// operator or not (`privileged`) makes of job `id`'s hold, as
    /// Slurm's controller decides: `Ok(None)` to leave it as it is,
    /// `Ok(Some(hold))` to make it `hold`. A plain user's hold is the
    /// user's; it does not undo the operator's, nor may that user release
    /// it. A job requeued held stays so until released. Releasing a job
    /// not held does nothing, and is no error.
    fn hold_as(
        &self,
        id: u64,
        kind: Option<HoldKind>,
        privileged: bool,
    ) -> Result<Option<Option<HoldKind>>, String> {
        let job = self
            .jobs
            .get(&id)
            .ok_or_else(|| "Invalid job id specified".to_string())?;
        if job.ending_as.is_some_and(|s| s != JobState::Pending) {
            return Err("Job/step already completing or completed".into());
        }
        let now = job.hold;
        Ok(match kind {
            None if now == Some(HoldKind::Admin) && !privileged => {
                return Err("Access/permission denied".into())
            }
            None => now.map(|_| None),
            Some(_) if now == Some(HoldKind::Requeued) => None,
            Some(HoldKind::User) if now == Some(HoldKind::Admin) && !privileged => None,
            Some(k) => (now != Some(k)).then_some(Some(k)),
        })
    }

    /// Makes job `id` held by `hold`'s holder, or releases it (`None`).
    /// A pending job held waits out of the queue, its reason the hold's;
    /// a running one runs on, shows the hold's reason, and is held when it
    /// is requeued ([`Cluster::requeued`]).
    pub(super) fn set_hold(
        &mut self,
        id: u64,
        hold: Option<HoldKind>,
        now: Now,
    ) -> Result<(), String> {
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| format!("job {id} is not known"))?;
        if job.state != JobState::Pending {
            // Running, or ending to be requeued: it waits so once pending.
            job.hold = hold;
            if job.ending_as.is_none() {
                job.reason = hold.map_or_else(String::new, |h| h.reason().into());
            }
            return Ok(());
        }
        if let Some(kind) = hold {
            if let Some(was) = job.hold {
                // Held already: only whose hold it is changes.
                if was != kind {
                    job.hold = Some(kind);
                    job.reason = kind.reason().into();
                }
                return Ok(());
            }
            if job.array.is_some_and(|t| t.limit > 0) && !job.held && !job.throttled {
                return Err(format!(
                    "job {id} is a task of an array with a limit: clemu cannot hold it yet"
                ));
            }
            job.hold = Some(kind);
            job.reason = kind.reason().into();
            // Out of the queue, or of its array's line: released, it
            // comes back through the array's limit (the line skips tasks
            // no longer throttled).
            let queued = !job.held && !job.throttled;
            job.throttled = false;
            job.held = true;
            // A release on its way waits for the holder's.
            let timer = job.release_at.take();
            let p = job.partition;
            if let Some(at) = timer {
                self.releases.remove(&(at, id));
            }
            if queued {
                self.unqueue(id, p);
            }
            return Ok(());
        }
        if job.hold.is_none() {
            return Ok(());
        }
        job.hold = None;
        // Released, it queues behind the jobs already waiting, as Slurm
        // gives a released job a new, lowest priority (held, it is in no
        // queue whose order this could upset).
        job.submit_mono = now.mono;
        if job.never || job.deps_left > 0 {
            job.reason = if job.never {
                "DependencyNeverSatisfied".into()
            } else {
                "Dependency".into()
            };
            return Ok(());
        }
        // Nothing else to wait for but its begin or think time, if any.
        if let Some(at) = job.release_at.take() {
            self.releases.remove(&(at, id));
        }
        job.reason = if job.spec.begin_ns.is_some_and(|b| b > now.wall) {
            "BeginTime".into()
        } else {
            String::new()
        };
        // A think time that ended while it was held: submitted now, behind
        // the jobs already waiting, not at that past instant.
        if job.spec.think_ns.is_some() && job.release_wall() <= now.wall {
            self.released(id, Some(now), now);
        } else {
            self.deps_over(id, now);
        }
        Ok(())
    }

    /// `controller suspend`: the jobs keep their cores until resumed.
    pub fn suspend<F: Effects>(&mut self, ids: &[u64], now: Now, fx: &mut F) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| JobOutcome {
                id,
                error: self.suspend_job(id, SuspendedBy::Admin, now, fx).err(),
            })
            .collect()
    }

    pub fn resume<F: Effects>(&mut self, ids: &[u64], now: Now, fx: &mut F) -> Vec<JobOutcome> {
        ids.iter()
            .map(|&id| JobOutcome {
                id,
                error: self.resume_job(id, SuspendedBy::Admin, now, fx).err(),
            })
            .collect()
    }
}

/// Slurm's `ExitCode` (code, signal) of a job whose process ended so, in
/// `state`: the script's own code or the signal that killed it, and
/// SIGTERM for a job cancelled while it ran, as Slurm's `scancel` leaves
/// it, and for one ended at its limit: what its batch step says (sacct's
/// line for the job itself says 0:0).
fn exit_code(exit: &Exit, state: JobState) -> (u32, u32) {
    const SIGTERM: u32 = 15;
    match (exit, state) {
        (_, JobState::Completed) => (0, 0),
        // A program told to end ended as it did: by the SIGTERM, by the
        // SIGKILL that followed, or exiting on its own, as its batch step
        // did (Slurm's job takes its batch step's).
        (Exit::Ran(r), JobState::Timeout | JobState::Cancelled | JobState::Preempted) => {
            (r.code.max(0) as u32, r.signal.max(0) as u32)
        }
        // Its end not known to the letter (the supervisor itself was
        // killed, or a sleep ended at its limit): the signal that ended
        // it, else the limit's SIGTERM, as Slurm's batch step says.
        (Exit::Signal(s), JobState::Timeout) => (0, (*s).max(0) as u32),
        (_, JobState::Timeout | JobState::Cancelled | JobState::Preempted) => (0, SIGTERM),
        // Slurm's SIG_OOM (253) read as a wait status: signal 125.
        (_, JobState::OutOfMemory) => (0, 125),
        (Exit::Ran(r), _) => (r.code.max(0) as u32, r.signal.max(0) as u32),
        (Exit::Signal(s), _) => (0, (*s).max(0) as u32),
        (Exit::Code(c), _) if *c > 128 => (0, (*c - 128) as u32),
        (Exit::Code(c), _) => ((*c).max(0) as u32, 0),
        _ => (0, 0),
    }
}

impl Job {
    /// When (wall-clock ns) a held job enters the queue once its wait for
    /// other jobs is over: its think time after the last of them ended,
    /// and not before its begin instant.
    pub(super) fn release_wall(&self) -> i64 {
        let after_deps = match (self.spec.waits_for().next().is_none(), self.spec.think_ns) {
            (true, _) => i64::MIN,
            (false, think) => self
                .deps_end
                .saturating_add(think.unwrap_or(0).min(i64::MAX as u64) as i64),
        };
        after_deps
            .max(self.spec.begin_ns.unwrap_or(i64::MIN))
            .max(self.delay_until)
    }

    /// Whether its release counts as its submission: a replay's think
    /// time and `--begin` submit it then; a dependency's delay does not.
    pub(super) fn submitted_at_release(&self) -> bool {
        self.spec.think_ns.is_some() || self.spec.begin_ns.is_some()
    }

    /// Its `after` dependency on a job that started (or ended unstarted)
    /// at `at` (wall ns) waits out its delay from then.
    pub(super) fn delay_from(&mut self, dep: u64, at: i64) {
        let delay = self.spec.start_delay(dep).min(i64::MAX as u64) as i64;
        if delay > 0 {
            self.delay_until = self.delay_until.max(at.saturating_add(delay));
        }
    }

    /// A job just submitted, waiting in the queue.
    pub(super) fn pending(id: u64, spec: JobSpec, partition: usize, now: Now) -> Job {
        // Held for other jobs, or until its begin instant.
        let held = spec.hold
            || spec.waits_for().next().is_some()
            || spec.begin_ns.is_some_and(|b| b > now.wall);
        Job {
            id,
            submit_ns: spec.submit_ns.unwrap_or(now.wall),
            hold: spec.hold.then_some(HoldKind::User),
            restarts: 0,
            steps: Vec::new(),
            limit_changed: false,
            spec,
            partition,
            state: JobState::Pending,
            start_ns: 0,
            end_ns: 0,
            alloc: crate::policy::no_alloc(),
            nodes: String::new(),
            agent: None,
            reason: String::new(),
            ending_as: None,
            ending_ns: 0,
            suspended_by: None,
            started_mono: None,
            since_mono: now.mono,
            suspended_since: None,
            suspended_total: 0,
            host: None,
            lost_at: None,
            suspensions: Vec::new(),
            submit_mono: now.mono,
            held,
            deps_left: 0,
            singleton_left: 0,
            deps_end: i64::MIN,
            delay_until: i64::MIN,
            release_at: None,
            array: None,
            throttled: false,
            gres: crate::gres::Counts::default(),
            devices: Vec::new(),
            exit: (0, 0),
            node_cpus: Vec::new(),
            never: false,
            within: None,
        }
    }
}

/// The order that ends running job `id` to become `as_state`: a cancel,
/// or an end whose reason its program is told (a preemption, a requeue:
/// `Pending`).
pub(super) fn end_order(id: u64, as_state: JobState) -> ToAgent {
    let why = match as_state {
        JobState::Preempted => EndWhy::Preempted,
        JobState::Pending => EndWhy::Requeued,
        _ => return ToAgent::Cancel(id),
    };
    ToAgent::End { job: id, why }
}

#[cfg(test)]
mod tests {
    use formats::wire::{Ran, RanState};

    use super::*;

    /// A job told to end says what ended its batch step: the program's
    /// own end when known, else the signal that killed its supervisor,
    /// else the SIGTERM it was sent.
    #[test]
    fn a_job_told_to_end_says_what_ended_it() {
        let ran = |code, signal| {
            Exit::Ran(Ran {
                state: RanState::Timeout,
                code,
                signal,
            })
        };
        for (exit, state, want) in [
            (ran(0, 15), JobState::Timeout, (0, 15)),
            (ran(7, 0), JobState::Timeout, (7, 0)),
            (Exit::Signal(9), JobState::Timeout, (0, 9)),
            (Exit::Code(124), JobState::Timeout, (0, 15)),
            (Exit::Code(143), JobState::Cancelled, (0, 15)),
            (Exit::Code(0), JobState::Completed, (0, 0)),
        ] {
            assert_eq!(exit_code(&exit, state), want, "{exit:?} {state:?}");
        }
    }
}
