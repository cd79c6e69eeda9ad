//! Agents registering, and what they report of their jobs' ends and
//! records.

use formats::record::Status;
use formats::wire::{Exit, ToAgent};

use super::{AgentUp, Place, Server};
use crate::core::{AgentId, Now};
use crate::replication::FromPrimary;

impl Server {
    /// An agent registers (or a candidate's voter, once it won).
    pub(super) fn agent_up(&mut self, up: AgentUp, now: Now) {
        let AgentUp {
            agent,
            host,
            nodes,
            cpus,
            memory_mb,
            local,
            jobs,
            records,
            mark,
            bound: _,
            link,
            reply,
        } = up;
        if self.stopping.is_some() {
            let _ = reply.send(Err(ToAgent::Rejected(
                "the controller is shutting down".into(),
            )));
            return;
        }
        if let Some(why) = self.witnesses.refuses(&host) {
            let _ = reply.send(Err(ToAgent::Rejected(why)));
            return;
        }
        if mark.term > self.term {
            // A controller of a later term led this agent: this one is
            // stale, and must not act any more.
            let why = format!(
                "the agent holds {mark}, later than this controller's term {}",
                self.term
            );
            self.turn_away(&host, &why);
            self.step_down(&format!("agent {host}: {why}"));
            let _ = reply.send(Err(ToAgent::Elsewhere(self.standing(why))));
            return;
        }
        self.turned_away.remove(&host);
        // Linked first: reconciling may already have orders for it.
        self.links.insert(agent, link);
        let ends = match self.cluster.agent_up(
            agent,
            &host,
            &nodes,
            cpus,
            memory_mb,
            local,
            &jobs,
            now,
            &mut self.out,
        ) {
            Ok(ends) => ends,
            Err(e) => {
                self.links.remove(&agent);
                let _ = reply.send(Err(ToAgent::Rejected(e)));
                return;
            }
        };
        self.witnesses.up(agent, host);
        // The records of jobs that ended while it was away, before those
        // ends (a record is kept only for a job still running on this
        // agent).
        self.take_records(agent, &records);
        for (id, exit) in ends {
            self.job_ended(agent, id, exit, now);
        }
        let config = self.cluster.config();
        let fence = config.heartbeat_timeout / 2;
        let mut settings = config.agent.run_settings(!local, fence);
        settings.mark = self.mark;
        if reply.send(Ok(settings)).is_err() {
            // It left while its registration waited (a vote): nothing
            // serves its nodes.
            self.links.remove(&agent);
            self.witnesses.gone(agent);
            self.cluster.agent_down(
                agent,
                "left before its registration was answered",
                false,
                now,
                &mut self.out,
            );
        }
    }

    /// A job's process ended: at the instant its record gives, if it sent
    /// one (sigsleep's own clock, and right even for a job that ended
    /// while this controller was away), else now. A process killed once
    /// its record was written (a node failed as it ended) ended as its
    /// record says.
    pub(super) fn job_ended(&mut self, agent: AgentId, id: u64, exit: Exit, now: Now) {
        let started = self.cluster.start_ns(id).unwrap_or(i64::MAX);
        let (at, exit) = match self.record_ends.remove(&id) {
            // A record of an earlier execution (whose end never came: its
            // agent was lost) ends before this one started; a host clock
            // ahead of this one's is held to now.
            Some((end, status)) if end >= started => {
                let exit = match (exit, status) {
                    (Exit::Signal(_), Status::Completed) => Exit::Code(0),
                    (Exit::Signal(_), Status::Timeout) => Exit::Code(sigsleep::EXIT_TIMEOUT),
                    (Exit::Signal(_), Status::Cancelled) => Exit::Code(128 + libc::SIGTERM),
                    (e, _) => e,
                };
                (
                    Now {
                        wall: end.min(now.wall),
                        ..now
                    },
                    exit,
                )
            }
            _ => (now, exit),
        };
        self.cluster.job_ended(agent, id, exit, at, &mut self.out);
    }

    /// Keeps the intact records an agent sent of jobs it runs, or ran to
    /// their end ([`crate::core::Cluster::ran_on`]), once per execution
    /// (an agent that registers again sends the records of jobs that ended
    /// meanwhile, which may have arrived before), and notes when each
    /// running job ended, for its end (a record whose end never comes is
    /// dropped at the job's next end).
    pub(super) fn take_records(&mut self, agent: AgentId, frames: &[u8]) {
        if frames.is_empty() {
            return;
        }
        let cluster = &self.cluster;
        let recorded = &mut self.recorded;
        let ends = &mut self.record_ends;
        let (kept, dropped) = crate::records::check(frames, |r| {
            let runs = cluster.runs(agent, r.id);
            // Resent records of jobs over are many at a registration:
            // those already taken are not looked at further.
            let ours = runs
                || (!recorded.contains(&(r.id, r.start)) && cluster.ran_on(agent, r.id, &r.node));
            let keep = ours && recorded.insert((r.id, r.start));
            if keep && runs {
                ends.insert(r.id, (r.end, r.status));
            }
            keep
        });
        if dropped > 0 {
            tracing::warn!(
                agent,
                dropped,
                "dropped records of jobs this agent does not run, or had already sent"
            );
        }
        if let Place::Primary(backups) = &self.place {
            if !kept.is_empty() && !backups.is_empty() {
                backups.send(|| FromPrimary::Records(kept.clone()));
            }
        }
        self.records.append(kept);
    }
}
