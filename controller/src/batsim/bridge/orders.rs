//! The scheduler's orders carried out: each checked against what the
//! bridge knows of jobs and resources, then handed to the core as
//! decisions (which the core checks again against the cluster).

use std::collections::HashSet;

use serde_json::json;
use tracing::warn;

use super::super::protocol::{Event, Order};
use super::super::Unit;
use super::{job_id, parse_id, Bridge, Kill, State};
use crate::policy::Decision;

impl Bridge {
    /// An order, checked against what the scheduler may know, as the
    /// core's decisions.
    pub(super) fn carry_out(
        &self,
        st: &mut State,
        now_s: f64,
        order: Order,
        out: &mut Vec<Decision>,
    ) -> Result<(), String> {
        let named = match &order {
            Order::Execute { job, .. }
            | Order::Reject(job)
            | Order::Suspend(job)
            | Order::Resume(job) => Some(job),
            _ => None,
        };
        if let Some(job) = named {
            if st.ended.contains(&parse_id(job)?) {
                // Stamped for later, and the job ended meanwhile.
                warn!(job = %job, "batsim: an order for a job already over is dropped");
                return Ok(());
            }
        }
        match order {
            Order::Execute { job, alloc } => {
                let id = parse_id(&job)?;
                let j = st
                    .jobs
                    .get(&id)
                    .ok_or_else(|| format!("EXECUTE_JOB {job}: no such job waits"))?;
                if j.started || j.rejected {
                    return Err(format!(
                        "EXECUTE_JOB {job}: the job was already started or rejected"
                    ));
                }
                if alloc.len() != j.res as usize {
                    return Err(format!(
                        "EXECUTE_JOB {job}: {} resources for a job of {}",
                        alloc.len(),
                        j.res
                    ));
                }
                for &r in &alloc {
                    match st.holder.get(r as usize) {
                        None => return Err(format!("EXECUTE_JOB {job}: there is no resource {r}")),
                        Some(Some(other)) => {
                            return Err(format!(
                                "EXECUTE_JOB {job}: resource {r} is held by {}",
                                job_id(*other)
                            ))
                        }
                        Some(None) => {}
                    }
                }
                let mut per_node: Vec<(usize, u32)> = Vec::new();
                let mut left = j.cores;
                for &r in &alloc {
                    let n = st.res_node[r as usize];
                    let take = match self.settings.unit {
                        Unit::Core => 1,
                        Unit::Node => left.min(self.settings.nodes[n].1),
                    };
                    left -= take;
                    match per_node.last_mut() {
                        Some((m, c)) if *m == n => *c += take,
                        _ => per_node.push((n, take)),
                    }
                }
                per_node.retain(|(_, c)| *c > 0);
                if left > 0 {
                    return Err(format!(
                        "EXECUTE_JOB {job}: the nodes have too few cores for its {} cores",
                        j.cores
                    ));
                }
                for &r in &alloc {
                    st.holder[r as usize] = Some(id);
                }
                let j = st.jobs.get_mut(&id).expect("checked");
                j.started = true;
                j.running_since = Some(now_s);
                j.alloc = alloc;
                out.push(Decision::Start {
                    job: id,
                    alloc: per_node,
                });
            }
            Order::Reject(job) => {
                let id = parse_id(&job)?;
                let j = st
                    .jobs
                    .get_mut(&id)
                    .ok_or_else(|| format!("REJECT_JOB {job}: no such job waits"))?;
                if j.started {
                    return Err(format!("REJECT_JOB {job}: the job has started"));
                }
                j.rejected = true;
                out.push(Decision::Cancel(id));
            }
            Order::Kill(ids) => {
                let mut kill = Kill {
                    ids: ids.clone(),
                    waiting: HashSet::new(),
                    progress: Default::default(),
                };
                for job in &ids {
                    let id = parse_id(job)?;
                    if let Some(j) = st.jobs.get_mut(&id) {
                        if !j.killed {
                            j.killed = true;
                            out.push(Decision::Cancel(id));
                        }
                        kill.waiting.insert(id);
                    }
                }
                if kill.waiting.is_empty() {
                    st.outbox.push(Event::new(
                        now_s,
                        "JOB_KILLED",
                        json!({"job_ids": ids, "job_progress": {}}),
                    ));
                } else {
                    st.kills.push(kill);
                }
            }
            Order::CallMeLater(t) => st.calls.push(t),
            Order::Notified => {}
            Order::Suspend(job) => {
                let id = parse_id(&job)?;
                let j = st
                    .jobs
                    .get_mut(&id)
                    .ok_or_else(|| format!("SUSPEND_JOB {job}: no such job runs"))?;
                if !j.started || j.suspended || j.killed {
                    return Err(format!("SUSPEND_JOB {job}: the job is not running"));
                }
                j.suspended = true;
                j.confirm = true;
                for &r in &j.alloc {
                    st.holder[r as usize] = None;
                }
                out.push(Decision::Suspend(id));
            }
            Order::Resume(job) => {
                let id = parse_id(&job)?;
                let j = st
                    .jobs
                    .get(&id)
                    .ok_or_else(|| format!("RESUME_JOB {job}: no such job"))?;
                if !j.suspended {
                    return Err(format!("RESUME_JOB {job}: the job is not suspended"));
                }
                if let Some((r, other)) = j
                    .alloc
                    .iter()
                    .find_map(|&r| st.holder[r as usize].map(|o| (r, o)))
                {
                    return Err(format!(
                        "RESUME_JOB {job}: its resource {r} is held by {}",
                        job_id(other)
                    ));
                }
                let alloc = j.alloc.clone();
                for r in alloc {
                    st.holder[r as usize] = Some(id);
                }
                let j = st.jobs.get_mut(&id).expect("checked");
                j.suspended = false;
                j.confirm = true;
                out.push(Decision::Resume(id));
            }
        }
        Ok(())
    }
}
