//! The virtual-time twin (`--simulate`): the same jobs at their exact
//! deadlines, run by the controller's own state machine and policy in
//! virtual time (`controller::sim`); its records are written as sigsleep
//! would have.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use formats::wire::JobInfo;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use controller::sim::{SimEvent, SimWhat};

use super::{followers, Applied, Backend, Jobs, Order, Ran};
use crate::events::What;
use crate::Plan;

/// The virtual-time twin.
pub struct Twin;

impl Backend for Twin {
    fn mode(&self) -> &'static str {
        "simulated"
    }

    fn name(&self) -> &'static str {
        "clemu"
    }

    fn controller(&self) -> String {
        "embedded".into()
    }

    fn runs_sigsleep_here(&self) -> bool {
        false
    }

    fn virtual_time(&self) -> bool {
        true
    }

    fn run<'a>(
        &'a self,
        plan: &'a Plan,
        jobs: &'a Jobs<'a>,
        dir: &'a Path,
        stop: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Ran>> {
        Box::pin(async move { simulate(plan, jobs, dir, stop) })
    }
}

/// The twin: the same jobs at their exact deadlines, in virtual time;
/// stopped where it is when `stop` fires (its unfinished jobs cancelled).
fn simulate(plan: &Plan, jobs: &Jobs<'_>, dir: &Path, stop: &CancellationToken) -> Result<Ran> {
    let (label, targets, specs, order) = (jobs.label, jobs.targets, jobs.specs, jobs.order);
    // A fixed epoch keeps runs reproducible: the trace's own start when
    // it says, else the Unix epoch.
    let epoch = plan.slice.unix_start_time.unwrap_or(0) * 1_000_000_000;
    // The twin's input k is job seq[k] of the slice: the jobs due at one
    // instant, then those that follow them (`--feedback`), wave by wave,
    // as the emulation sends them.
    let follow = followers(jobs.after);
    let mut seq: Vec<usize> = Vec::with_capacity(specs.len());
    let mut at = vec![0i64; specs.len()];
    let mut from = 0;
    while from < order.len() {
        let t = targets[order[from]];
        let mut to = from;
        while to < order.len() && targets[order[to]] == t {
            to += 1;
        }
        let mut wave: Vec<usize> = order[from..to].to_vec();
        while !wave.is_empty() {
            for &i in &wave {
                at[i] = t;
            }
            seq.extend_from_slice(&wave);
            wave = wave
                .iter()
                .flat_map(|&i| follow[i].iter().copied())
                .collect();
        }
        from = to;
    }
    let mut input = vec![0; specs.len()];
    for (k, &i) in seq.iter().enumerate() {
        input[i] = k;
    }
    let mut sim_jobs: Vec<controller::sim::SimJob> = seq
        .iter()
        .map(|&i| controller::sim::SimJob {
            spec: specs[i].clone(),
            submit_ns: at[i],
            cancel_ns: None,
            after: jobs.after[i].map(|p| input[p]),
        })
        .collect();
    let mut events = Vec::new();
    // Event number of each of the twin's events.
    let mut numbers = Vec::new();
    for t in jobs.timed {
        match t.order {
            Order::Cancel(i) => sim_jobs[input[i]].cancel_ns = Some(t.at),
            Order::Event(k) => {
                let what = match &plan.events[k].what {
                    What::Down { nodes, reason } => SimWhat::Fail {
                        nodes: nodes.clone(),
                        reason: reason.clone(),
                    },
                    What::Up { nodes } => SimWhat::Repair {
                        nodes: nodes.clone(),
                    },
                    What::Drain { nodes, reason } => SimWhat::Drain {
                        nodes: nodes.clone(),
                        reason: reason.clone(),
                    },
                    What::Undrain { nodes } => SimWhat::Undrain {
                        nodes: nodes.clone(),
                    },
                    What::Cancel(i) => SimWhat::Cancel(input[*i]),
                };
                events.push(SimEvent { at: t.at, what });
                numbers.push(k);
            }
        }
    }
    // A replica of a perturbed twin draws from a seed of its own.
    let perturb = plan
        .perturb
        .as_ref()
        .map(|(p, _)| controller::sim::Perturb {
            seed: p.seed + u64::from(jobs.replica.unwrap_or(1)) - 1,
            ..p.clone()
        });
    let run = controller::sim::simulate_until(
        std::sync::Arc::new(jobs.config.clone()),
        &sim_jobs,
        &events,
        epoch,
        perturb.as_ref(),
        &|| stop.is_cancelled(),
    );
    let mut applied = vec![Applied::default(); plan.events.len()];
    for ((k, outcome), e) in numbers.iter().zip(&run.events).zip(&events) {
        let Some(outcome) = outcome else {
            continue;
        };
        applied[*k] = Applied {
            at: epoch + e.at,
            jobs: outcome.clone().unwrap_or_default(),
            error: outcome.clone().err(),
        };
    }
    let mut frames = Vec::new();
    for r in &run.records {
        formats::record::encode(r, &mut frames)
            .map_err(|e| anyhow!("cannot encode a simulated record: {e}"))?;
    }
    let record_file = dir.join("records").join(controller::records::RECORD_FILE);
    std::fs::write(&record_file, frames)
        .with_context(|| format!("cannot write {}", record_file.display()))?;
    let mut ids = vec![0; specs.len()];
    let mut actual = vec![0; specs.len()];
    for (k, &i) in seq.iter().enumerate() {
        ids[i] = run.ids[k];
        actual[i] = epoch + at[i];
    }
    let infos: HashMap<u64, JobInfo> = run.infos.iter().map(|j| (j.id, j.clone())).collect();
    info!(run = %label, passes = run.passes, "simulated");
    if let Some(report) = &run.policy {
        info!(
            run = %label,
            messages = report.messages,
            reply_p50_ms = report.reply_ms.p50,
            reply_max_ms = report.reply_ms.max,
            "external scheduler"
        );
    }
    if run.refused > 0 {
        warn!(run = %label, refused = run.refused, "the policy made decisions the cluster refused");
    }
    Ok(Ran {
        ids,
        actual,
        infos,
        started_wall: epoch,
        ended_wall: epoch + run.end_ns,
        interrupted_at: run.interrupted_at,
        cores: plan.config.total_cores(),
        slurm_ids: None,
        scheduler: run.policy,
        failure: run.failure,
        events: applied,
    })
}
