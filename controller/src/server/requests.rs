//! Clients' requests: answered from the tables, or carried out through
//! the core's transitions; submissions past `max_jobs` wait their turn.

use formats::wire::{Request, Response};

use super::Server;
use crate::core::Now;

impl Server {
    /// Whether `n` more jobs fit under `max_jobs` behind those waiting.
    pub(super) fn has_room(&self, n: usize) -> bool {
        self.held.is_empty() && self.cluster.active_jobs() + n <= self.cluster.config().max_jobs
    }

    /// Accepts the waiting submissions that now fit, in order; refuses them
    /// all once shutting down.
    pub(super) fn admit_held(&mut self) {
        // A client that gave up (Ctrl-C) closed its end: what it asked for
        // is dropped, never accepted behind its back.
        self.held.retain(|(_, _, reply)| !reply.is_closed());
        while let Some((specs, _, _)) = self.held.front() {
            let fits = self.cluster.active_jobs() + formats::wire::jobs_of(specs)
                <= self.cluster.config().max_jobs;
            if !fits && self.stopping.is_none() {
                return;
            }
            let Some((specs, key, reply)) = self.held.pop_front() else {
                return;
            };
            let resp = self.request(Request::Submit { specs, key }, self.clock.now());
            self.replies.push((reply, resp));
        }
    }

    /// The refusal of a submission while the journal cannot be written:
    /// jobs queued now would be lost by a controller that stops before
    /// its disk has room. The write is tried again first (what was written
    /// is kept, and tried again at every commit, and here). A submission
    /// said again with its key is not refused: it is answered with its
    /// jobs, as ever.
    pub(super) fn unjournaled(&mut self, key: u64) -> Option<Response> {
        if self.write_failures.failing().is_some() {
            self.write_journal();
        }
        let e = self
            .write_failures
            .failing()
            .filter(|_| self.cluster.submitted_with(key).is_none())?;
        Some(Response::Error(format!(
            "no job submitted: the controller cannot write its journal ({e}); it takes \
             submissions again once it can"
        )))
    }

    pub(super) fn stats(&self) -> formats::wire::ClusterStats {
        let mut stats = self.cluster.stats();
        stats.journal_unsynced = self.journal.unsynced_entries();
        stats.journal_lag_ns = self.journal.lag().as_nanos() as u64;
        stats.journal_error = self.write_failures.failing().map(str::to_string);
        stats.records_error.clone_from(&self.records_error);
        stats.held_requests = self.held.len() as u64;
        stats.held_jobs = self
            .held
            .iter()
            .map(|(s, _, _)| formats::wire::jobs_of(s) as u64)
            .sum();
        stats.policy_failure = self.scheduler.failed().map(str::to_string);
        stats.policy_report = self.scheduler.report();
        stats.replication = self.replication();
        stats
    }

    pub(super) fn request(&mut self, req: Request, now: Now) -> Response {
        match req {
            Request::Submit { specs, key } => {
                if self.stopping.is_some() {
                    return Response::Error("the controller is shutting down".into());
                }
                if let Some(why) = self.scheduler.failed() {
                    return Response::Error(format!("no scheduler: {why}"));
                }
                if let Some(refused) = self.unjournaled(key) {
                    return refused;
                }
                match self.cluster.submit(specs, key, now, &mut self.out) {
                    Ok(ids) => Response::Submitted(ids),
                    Err(e) => Response::Error(e),
                }
            }
            Request::Queue { all } => Response::Queue(self.cluster.queue(all)),
            Request::Recent { ended_since_ns } => {
                Response::Queue(self.cluster.recent(ended_since_ns))
            }
            Request::Nodes => Response::Nodes(self.cluster.node_infos()),
            Request::Starts => Response::Starts(self.scheduler.expected_starts(&self.cluster, now)),
            Request::Stats => Response::Stats(Box::new(self.stats())),
            Request::Hosts => Response::Hosts(self.cluster.hosts(now)),
            Request::Cancel(ids) => Response::Jobs(self.cluster.cancel(&ids, now, &mut self.out)),
            Request::CancelMatching(filter) => {
                let (ids, mut outcomes) = self.cluster.matching(&filter);
                outcomes.extend(self.cluster.cancel(&ids, now, &mut self.out));
                Response::Jobs(outcomes)
            }
            Request::Suspend(ids) => Response::Jobs(self.cluster.suspend(&ids, now, &mut self.out)),
            Request::Resume(ids) => Response::Jobs(self.cluster.resume(&ids, now, &mut self.out)),
            Request::Hold {
                ids,
                kind,
                privileged,
            } => {
                Response::Jobs(
                    self.cluster
                        .hold(&ids, Some(kind), privileged, now, &mut self.out),
                )
            }
            Request::Signal { ids, signal, reach } => {
                Response::Jobs(self.cluster.signal(&ids, signal, reach, &mut self.out))
            }
            Request::Requeue { ids, hold } => {
                Response::Jobs(self.cluster.requeue(&ids, hold, now, &mut self.out))
            }
            Request::SetLimit { id, walltime_ns } => {
                Response::Jobs(vec![self.cluster.limit(id, walltime_ns, &mut self.out)])
            }
            Request::Release { ids, privileged } => {
                Response::Jobs(
                    self.cluster
                        .hold(&ids, None, privileged, now, &mut self.out),
                )
            }
            Request::Drain { nodes, reason } => {
                match self.cluster.drain(&nodes, &reason, now, &mut self.out) {
                    Ok(n) => Response::Drained(n),
                    Err(e) => Response::Error(e),
                }
            }
            Request::Undrain { nodes } => match self.cluster.undrain(&nodes, &mut self.out) {
                Ok(n) => Response::Drained(n),
                Err(e) => Response::Error(e),
            },
            Request::Fail { nodes, reason } => {
                match self.cluster.fail_nodes(&nodes, &reason, now, &mut self.out) {
                    Ok((nodes, jobs)) => Response::Failed { nodes, jobs },
                    Err(e) => Response::Error(e),
                }
            }
            Request::Repair { nodes } => match self.cluster.repair_nodes(&nodes, &mut self.out) {
                Ok(n) => Response::Drained(n),
                Err(e) => Response::Error(e),
            },
            // Answered by the connection through the record sink.
            Request::Records(_) => Response::Error("records are read by the connection".into()),
            Request::Jobs(ids) => Response::Queue(self.cluster.jobs_info(&ids)),
            Request::NoMoreJobs => {
                self.cluster.no_more_jobs(now);
                Response::Noted
            }
            Request::Shutdown => {
                if self.stopping.is_none() {
                    self.begin_shutdown();
                }
                Response::ShuttingDown
            }
        }
    }
}
