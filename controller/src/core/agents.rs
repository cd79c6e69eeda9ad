//! Agents and nodes, as transitions: agents registering (and reporting
//! the jobs they hold), beating, going silent or away, and what that does
//! to their jobs; drains; wall-time enforcement; shutdown.

use std::collections::HashSet;

use formats::wire::{Exit, Held, HostReport, JobState, ToAgent};
use tracing::{info, warn};

use super::tables::{Agent, Cluster, SuspendedBy};
use super::{AgentId, Effects, Now};
use crate::journal::Entry;
use crate::policy::ActiveState;

impl Cluster {
    /// Node indices of a nodeset expression (groups resolved).
    pub fn resolve(&self, expr: &str) -> Result<Vec<usize>, String> {
        let set = self.config.groups.parse(expr).map_err(|e| e.to_string())?;
        if set.len() > self.nodes.len() {
            return Err(format!(
                "{expr}: {} names, more than the {} nodes of the cluster",
                set.len(),
                self.nodes.len()
            ));
        }
        set.iter()
            .map(|n| {
                self.node_index
                    .get(&n)
                    .copied()
                    .ok_or_else(|| format!("no node {n}"))
            })
            .collect()
    }

    pub fn drain<F: Effects>(
        &mut self,
        expr: &str,
        reason: &str,
        now: Now,
        fx: &mut F,
    ) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        let why = if reason.is_empty() { "drained" } else { reason };
        self.set_drained(&idx, Some(why), now.wall);
        let nodes = self.config.fold(&idx);
        if F::JOURNALS {
            fx.journal(Entry::Drained {
                nodes: nodes.clone(),
                reason: why.to_string(),
                at_ns: now.wall,
            });
        }
        Ok(nodes)
    }

    pub fn undrain<F: Effects>(&mut self, expr: &str, fx: &mut F) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        self.set_drained(&idx, None, 0);
        let nodes = self.config.fold(&idx);
        if F::JOURNALS {
            fx.journal(Entry::Undrained {
                nodes: nodes.clone(),
            });
        }
        Ok(nodes)
    }

    /// Nodes fail: down until repaired, whether their agent is there or
    /// not. Each job holding one of them is killed (`SIGKILL`: a failed
    /// node leaves no record) and, once its process is gone, requeued or
    /// over as `node_fail`, as its partition says, as when an agent is
    /// lost. Returns the nodes (folded) and the jobs hit.
    pub fn fail_nodes<F: Effects>(
        &mut self,
        expr: &str,
        reason: &str,
        now: Now,
        fx: &mut F,
    ) -> Result<(String, Vec<u64>), String> {
        let idx = self.resolve(expr)?;
        let nodes = self.config.fold(&idx);
        let why = if reason.is_empty() { "failed" } else { reason };
        self.set_failed(&idx, Some(why), now.wall);
        if F::JOURNALS {
            fx.journal(Entry::Failed {
                nodes: nodes.clone(),
                reason: why.to_string(),
                at_ns: now.wall,
            });
        }
        let hit_nodes: HashSet<usize> = idx.into_iter().collect();
        let mut hit: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.alloc.iter().any(|(n, _)| hit_nodes.contains(n)))
            .map(|j| j.id)
            .collect();
        hit.sort_unstable();
        for &id in &hit {
            let lost = self.lost_to_failure(id);
            self.kill_for_lost_node(id, lost, now, fx);
        }
        Ok((nodes, hit))
    }

    /// A job that lost a node of its: its process, where its agent is
    /// there, is killed, and the job follows when that end is reported
    /// (`job_ended`: run again, or over as its partition says, unless it
    /// ended on its own first); until then its cores stay taken, so it
    /// never starts again while that process lives. With its agent away,
    /// the execution is lost now.
    fn kill_for_lost_node<F: Effects>(&mut self, id: u64, why: String, now: Now, fx: &mut F) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        match (job.agent, job.ending_as) {
            (Some(a), None) => {
                self.ending(id, JobState::NodeFail, now);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.reason = why;
                }
                if F::JOURNALS {
                    fx.journal(Entry::Ending {
                        id,
                        state: JobState::NodeFail,
                        at_ns: now.wall,
                    });
                }
                fx.to_agent(a, ToAgent::Kill(id));
            }
            // Already told to end: killed now.
            (Some(a), Some(_)) => fx.to_agent(a, ToAgent::Kill(id)),
            (None, _) => self.execution_lost(id, &why, now, fx),
        }
    }

    /// Why a job holding failed nodes is lost: `vn[1-2] failed (power)`.
    pub(super) fn lost_to_failure(&self, id: u64) -> String {
        let Some(job) = self.jobs.get(&id) else {
            return String::new();
        };
        let failed: Vec<usize> = job
            .alloc
            .iter()
            .map(|&(n, _)| n)
            .filter(|&n| self.nodes[n].failed.is_some())
            .collect();
        let why = failed
            .first()
            .and_then(|&n| self.nodes[n].failed.as_deref())
            .unwrap_or("failed");
        format!("{} failed ({why})", self.config.fold(&failed))
    }

    /// Failed nodes are up again (their agent serving them).
    pub fn repair_nodes<F: Effects>(&mut self, expr: &str, fx: &mut F) -> Result<String, String> {
        let idx = self.resolve(expr)?;
        self.set_failed(&idx, None, 0);
        let nodes = self.config.fold(&idx);
        if F::JOURNALS {
            fx.journal(Entry::Repaired {
                nodes: nodes.clone(),
            });
        }
        Ok(nodes)
    }

    /// An agent registered: it serves these nodes from now on. `held`: the
    /// jobs it reports (an agent registering again after losing the
    /// controller, or after the controller restarted). Jobs of its host
    /// that the controller had lost track of are claimed back; jobs it
    /// runs that the controller does not know are killed; jobs of its host
    /// it does not report are gone. Returns the reported ends to apply
    /// once the records that came with them are in.
    #[allow(clippy::too_many_arguments)]
    pub fn agent_up<F: Effects>(
        &mut self,
        agent: AgentId,
        host: &str,
        expr: &str,
        cpus: u32,
        memory_mb: u64,
        local: bool,
        held: &[(u64, Held)],
        now: Now,
        fx: &mut F,
    ) -> Result<Vec<(u64, Exit)>, String> {
        let idx = self.resolve(expr)?;
        // The same host registering again before its old connection was
        // seen to fail: that registration is over.
        let stale: HashSet<AgentId> = idx
            .iter()
            .filter_map(|&n| self.nodes[n].agent)
            .filter(|a| self.agents.get(a).is_some_and(|x| x.host == host))
            .collect();
        for old in stale {
            self.agent_down(old, "registered again", false, now, fx);
        }
        if let Some(&n) = idx.iter().find(|&&n| self.nodes[n].agent.is_some()) {
            return Err(format!(
                "node {} is already served by another agent",
                self.nodes[n].name
            ));
        }
        for &n in &idx {
            let load = &self.loads[n];
            if load.cpus != cpus || (memory_mb > 0 && load.memory_mb != memory_mb) {
                warn!(
                    node = %self.nodes[n].name,
                    host,
                    "agent declares {cpus} cpus / {memory_mb} MiB, the config {} / {}: the config wins",
                    load.cpus,
                    load.memory_mb
                );
            }
            self.nodes[n].agent = Some(agent);
            self.node_changed(n);
        }
        info!(agent, host, nodes = %self.config.fold(&idx), "agent up");
        self.agents.insert(
            agent,
            Agent {
                host: host.to_string(),
                nodes: idx,
                last_seen: now.mono,
                running: 0,
                local,
                report: None,
            },
        );
        self.wants_pass = true;

        let mut ends = Vec::new();
        for &(id, h) in held {
            let ours = self.jobs.get(&id).is_some_and(|j| {
                j.agent.is_none() && j.lost_at.is_some() && j.host.as_deref() == Some(host)
            });
            match h {
                Held::Running | Held::Suspended if ours => {
                    self.claim(id, agent, h == Held::Suspended, now, fx);
                }
                Held::Running | Held::Suspended => {
                    warn!(
                        job = id,
                        host, "the agent runs a job this controller does not give it: killing it"
                    );
                    fx.to_agent(agent, ToAgent::Kill(id));
                }
                Held::Ended(exit) if ours => {
                    self.claim(id, agent, false, now, fx);
                    ends.push((id, exit));
                }
                Held::Ended(_) => fx.end_taken(agent, id),
            }
        }
        let gone: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.agent.is_none() && j.lost_at.is_some() && j.host.as_deref() == Some(host))
            .map(|j| j.id)
            .collect();
        for id in gone {
            self.lose(id, &format!("{host} no longer has it"), now, fx);
        }
        Ok(ends)
    }

    /// A job its agent reported again: it runs there, as before.
    fn claim<F: Effects>(
        &mut self,
        id: u64,
        agent: AgentId,
        suspended_there: bool,
        now: Now,
        fx: &mut F,
    ) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.agent = Some(agent);
        job.lost_at = None;
        // What was decided while the agent was away is sent again.
        if job.ending_as == Some(JobState::NodeFail) {
            fx.to_agent(agent, ToAgent::Kill(id));
        } else if let Some(state) = job.ending_as {
            fx.to_agent(agent, super::jobs::end_order(id, state));
        } else if job.state == JobState::Suspended && !suspended_there {
            fx.to_agent(agent, ToAgent::Suspend(id));
        } else if job.state == JobState::Running && suspended_there {
            fx.to_agent(agent, ToAgent::Resume(id));
        }
        // A limit changed while the agent was away (or the controller
        // stopped before it was sent).
        if job.ending_as.is_none() && job.limit_changed {
            fx.to_agent(
                agent,
                ToAgent::Limit {
                    job: id,
                    walltime_ns: job.spec.walltime_ns,
                },
            );
        }
        let remaining =
            (job.estimate_ns().min(i64::MAX as u64) as i64 - job.run_time(now.mono)).max(0);
        let state = if job.ending_as.is_some() {
            super::changes::ending_state(job)
        } else {
            match (job.state, job.suspended_by) {
                (JobState::Suspended, Some(SuspendedBy::Policy)) => ActiveState::Suspended,
                (JobState::Suspended, _) => ActiveState::Held,
                _ => ActiveState::Running,
            }
        };
        let since = job.since_mono;
        self.set_active(id, state, since, remaining);
        info!(job = id, agent, "job reported again by its agent");
    }

    /// A started job whose node was lost: back to the queue, or over as
    /// `node_fail`, as its partition says. Its process, if any is left, is
    /// not this controller's any more.
    fn lose<F: Effects>(&mut self, id: u64, why: &str, now: Now, fx: &mut F) {
        if let Some(a) = self.jobs.get(&id).and_then(|j| j.agent) {
            fx.to_agent(a, ToAgent::Kill(id));
        }
        self.execution_lost(id, why, now, fx);
    }

    /// A started job's execution is gone without an end of its own: back
    /// to the queue, or over as `node_fail`, as its partition says.
    pub(super) fn execution_lost<F: Effects>(&mut self, id: u64, why: &str, now: Now, fx: &mut F) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        // A job told to end stays ended; one killed for a failed node is
        // lost like any other.
        let asked = job
            .ending_as
            .filter(|s| !matches!(s, JobState::NodeFail | JobState::Pending));
        let may = job
            .spec
            .requeue
            .unwrap_or(self.config.partitions[job.partition].requeue);
        let requeue = job.ending_as == Some(JobState::Pending) || (may && asked.is_none());
        if !requeue {
            let state = asked.unwrap_or(JobState::NodeFail);
            self.end(id, state, format!("node lost: {why}"), now, fx);
            return;
        }
        let reason = format!("requeued: node lost: {why}");
        if F::JOURNALS {
            fx.journal(Entry::Requeued {
                id,
                reason: reason.clone(),
                at_ns: now.wall,
            });
        }
        self.requeued(id, reason, now);
        self.counters.requeued += 1;
    }

    /// An agent is gone: its nodes are down. Jobs that ran on it wait for
    /// it to come back (until the heartbeat timeout after it was last
    /// heard of) unless it was hosted here, in which case they died with
    /// it; jobs that only held some of its nodes are killed where their
    /// process runs, and follow its end.
    /// `expected`: the cluster is shutting down.
    /// Forgets every agent, with no effect on the jobs: a primary that
    /// steps down stops acting at once, and whichever controller leads
    /// next hears again from the agents what they run.
    pub fn release_agents(&mut self) {
        self.agents.clear();
        for n in 0..self.nodes.len() {
            self.nodes[n].agent = None;
            self.node_changed(n);
        }
        for j in self.jobs.values_mut() {
            j.agent = None;
        }
    }

    pub fn agent_down<F: Effects>(
        &mut self,
        agent: AgentId,
        why: &str,
        expected: bool,
        now: Now,
        fx: &mut F,
    ) {
        let Some(a) = self.agents.remove(&agent) else {
            return;
        };
        if expected {
            info!(agent, host = %a.host, why, "agent left");
        } else {
            warn!(agent, host = %a.host, why, "agent down");
        }
        let lost: HashSet<usize> = a.nodes.iter().copied().collect();
        for &n in &a.nodes {
            self.nodes[n].agent = None;
            self.node_changed(n);
        }
        let hit: Vec<(u64, Option<AgentId>)> = self
            .jobs
            .values()
            .filter(|j| j.agent == Some(agent) || j.alloc.iter().any(|(n, _)| lost.contains(n)))
            .map(|j| (j.id, j.agent))
            .collect();
        let timeout = self.config.heartbeat_timeout.as_nanos() as i64;
        for (id, runner) in hit {
            let reason = format!("agent on {} lost: {why}", a.host);
            if runner == Some(agent) && !a.local && !expected {
                let Some(job) = self.jobs.get_mut(&id) else {
                    continue;
                };
                job.agent = None;
                job.lost_at = Some(now.mono.max(a.last_seen.saturating_add(timeout)));
                let since = job.since_mono;
                self.set_active(id, ActiveState::Unreachable, since, 0);
            } else if expected {
                self.end(id, JobState::NodeFail, reason, now, fx);
            } else if runner.is_some_and(|r| r != agent) {
                // Its process runs on another agent, still there: as for a
                // failed node, it is killed there first. Run again at once,
                // it could start beside that process, and take its end
                // and record for its own.
                self.kill_for_lost_node(id, reason, now, fx);
            } else {
                self.lose(id, &reason, now, fx);
            }
        }
    }

    /// Jobs whose agent stayed away past the deadline are lost.
    pub fn lose_overdue<F: Effects>(&mut self, now: Now, fx: &mut F) {
        let overdue: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.lost_at.is_some_and(|t| t <= now.mono))
            .map(|j| j.id)
            .collect();
        for id in overdue {
            self.lose(id, "its agent did not come back in time", now, fx);
        }
    }

    pub fn heartbeat(&mut self, agent: AgentId, running: u32, now: Now) {
        if let Some(a) = self.agents.get_mut(&agent) {
            a.last_seen = now.mono;
            a.running = running;
        }
    }

    /// An agent's report of its host.
    pub fn host_report(&mut self, agent: AgentId, report: HostReport, now: Now) {
        if let Some(a) = self.agents.get_mut(&agent) {
            a.report = Some((report, now.mono));
        }
    }

    /// Cancels running jobs past their wall-time limit by more than the
    /// grace (sigsleep stops itself at the limit; this is the safety net).
    pub fn enforce_walltime<F: Effects>(&mut self, now: Now, fx: &mut F) {
        let grace = self.config.timeout_grace.as_nanos() as i64;
        let over: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running
                    && j.ending_as.is_none()
                    && j.spec.walltime_ns > 0
                    && j.run_time(now.mono) > j.spec.walltime_ns.min(i64::MAX as u64) as i64 + grace
            })
            .map(|j| j.id)
            .collect();
        for id in over {
            let _ = self.cancel_at(id, JobState::Timeout, now, fx);
        }
    }

    /// Cancels every job and tells every agent to stop.
    pub fn shutdown<F: Effects>(&mut self, now: Now, fx: &mut F) {
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        self.unqueue_batched(|c| {
            for id in ids {
                let _ = c.cancel_at(id, JobState::Cancelled, now, fx);
            }
        });
        for &a in self.agents.keys() {
            fx.to_agent(a, ToAgent::Shutdown);
        }
    }
}
