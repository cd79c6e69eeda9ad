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
    let config = std::sync::Arc::new(jobs.config.clone());
    let run = controller::sim::simulate_until(
        config.clone(),
        &sim_jobs,
        &events,
        epoch,
        perturb.as_ref(),
        &|| stop.is_cancelled(),
    );
    // How far this schedule hangs on ties: the same twin again, every
    // delay 1 ns. Not for a perturbed twin (it has delays), an external
    // scheduler (it would be asked again) or a run cut short.
    let ties = (perturb.is_none() && run.policy.is_none() && run.interrupted_at.is_none())
        .then(|| {
            let nudged = controller::sim::simulate_until(
                config,
                &sim_jobs,
                &events,
                epoch,
                Some(&nudge(NUDGE_NS)),
                &|| stop.is_cancelled(),
            );
            (nudged.interrupted_at.is_none()).then(|| {
                ties(
                    &run.records,
                    &nudged.records,
                    crate::rundir::tau_ns(plan, jobs.factor),
                )
            })
        })
        .flatten();
    if let Some(t) = ties.as_ref().filter(|t| t.notable()) {
        warn!(
            "{label}: this twin's schedule hangs on the order of events at one instant: with \
             every start, end and arrival {NUDGE_NS} ns later, its figures move ({}). An \
             emulated run, or any real system, cannot keep that order: compare replica sets \
             instead (runworkload --replicas N, and the twin's with --latencies EMULATED_DIR)",
            t.moved()
        );
    }
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
        ties,
    })
}

/// The delay a twin's ties are tested with: the smallest there is, so
/// that only the order of events at one instant changes.
const NUDGE_NS: i64 = 1;

/// Every kind of delay `ns`.
fn nudge(ns: i64) -> controller::sim::Perturb {
    controller::sim::Perturb {
        seed: 1,
        start: vec![ns],
        suspend: vec![ns],
        resume: vec![ns],
        end: vec![ns],
        arrive: vec![ns],
    }
}

/// The nudged twin's mean wait and mean bounded slowdown (τ `tau_ns`, in
/// the records' clock) relative to the twin's own, over every record of
/// each.
fn ties(
    own: &[formats::record::JobRecord<'_>],
    nudged: &[formats::record::JobRecord<'_>],
    tau_ns: i64,
) -> formats::results::Ties {
    let means = |records: &[formats::record::JobRecord<'_>]| {
        let n = records.len() as f64;
        let (mut wait, mut bsld) = (0.0, 0.0);
        for r in records {
            let run = (r.end - r.start - r.suspended_ns()).max(0);
            wait += (r.start - r.submit) as f64;
            bsld += ((r.end - r.submit) as f64 / run.max(tau_ns).max(1) as f64).max(1.0);
        }
        (wait / n, bsld / n)
    };
    let rel = |a: f64, b: f64| (b != 0.0 && a.is_finite() && b.is_finite()).then(|| (a - b) / b);
    let (w0, b0) = means(own);
    let (w1, b1) = means(nudged);
    formats::results::Ties {
        nudge_ns: NUDGE_NS as u64,
        wait_mean: rel(w1, w0),
        bounded_slowdown_mean: rel(b1, b0),
    }
}
