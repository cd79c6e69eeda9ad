//! The emulated cluster: the config's, started in this process (agents
//! hosted by the controller, records written straight into the run's
//! directory), or a running one reached with `--controller` (its records
//! fetched over the connection at the end).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use client::Session;
use formats::wire::{submit_key, ClusterStats, JobInfo, JobSpec, JobState, Request, Response};
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    due_jobs, due_orders, followers, next_due, trace_jobs, wall_ns, Applied, Backend, Jobs, Order,
    Ran, Timed, LEAD, SEND_AHEAD, SPIN,
};
use crate::events::{Event, What};
use crate::progress::{Counts, Progress};
use crate::Plan;

/// A running cluster to drive instead of an embedded one.
#[derive(Debug, Clone)]
pub struct Remote {
    pub addr: String,
    pub secret: Vec<u8>,
}

/// clemu's emulated cluster.
pub struct Clemu {
    /// `None`: the config's cluster, started here for each run.
    pub remote: Option<Remote>,
}

impl Backend for Clemu {
    fn mode(&self) -> &'static str {
        "emulated"
    }

    fn name(&self) -> &'static str {
        "clemu"
    }

    fn controller(&self) -> String {
        self.remote
            .as_ref()
            .map_or("embedded".to_string(), |r| r.addr.clone())
    }

    fn runs_sigsleep_here(&self) -> bool {
        self.remote.is_none()
    }

    fn runs_scaled_config(&self) -> bool {
        self.remote.is_none()
    }

    fn run<'a>(
        &'a self,
        plan: &'a Plan,
        jobs: &'a Jobs<'a>,
        dir: &'a Path,
        stop: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Ran>> {
        Box::pin(self.replay(plan, jobs, dir, stop))
    }
}

impl Clemu {
    async fn replay(
        &self,
        plan: &Plan,
        jobs: &Jobs<'_>,
        dir: &Path,
        stop: &CancellationToken,
    ) -> Result<Ran> {
        let (label, targets, specs, order) = (jobs.label, jobs.targets, jobs.specs, jobs.order);
        let n = specs.len();
        let cluster = match &self.remote {
            None => embedded(jobs.config, dir).await?,
            Some(r) => Cluster::Remote {
                addr: r.addr.clone(),
                secret: r.secret.clone(),
            },
        };
        let mut session = Session::open(cluster.addr(), cluster.secret()).await?;
        let mut monitor = Session::open(cluster.addr(), cluster.secret()).await?;
        let before = stats(&mut monitor).await?;

        let started_wall = wall_ns() + LEAD.as_nanos() as i64;
        let start = Instant::now() + LEAD;
        info!(run = %label, jobs = n, factor = jobs.factor, "replay starts");
        let mut progress = jobs.progress(plan);
        let mut ids: Vec<u64> = vec![0; n];
        let mut actual: Vec<i64> = vec![0; n];
        let mut submitted = 0usize;
        let mut interrupted = false;
        let mut failure: Option<String> = None;
        let mut next_view = Instant::now();

        // Submit at absolute deadlines; jobs whose deadline has passed go
        // together in one request. Timed orders follow the submissions due
        // with them, and likewise go together.
        let mut done = 0usize;
        let mut applied = vec![Applied::default(); plan.events.len()];
        let follow = followers(jobs.after);
        let mut sent_jobs = 0usize;
        let mut all_over = false;
        // A cluster this run does not own may get other jobs after its
        // last: only the run's own cluster hears that none will come.
        let shared = self.remote.is_some();
        let mut said_no_more = false;
        // Each job is sent a moment ahead of its deadline, to begin then
        // (`JobSpec::begin_ns`): the controller knows it before it comes
        // and has its process ready, and a late message never makes it
        // late (a follower waits for its job instead).
        let ahead = SEND_AHEAD.as_nanos() as i64;
        let sends: Vec<i64> = targets.iter().map(|t| t - ahead).collect();
        while let Some(at) = next_due(jobs, &sends, submitted, done) {
            let due = super::at(start, at);
            // A timed order (a cancellation, an event) is given at its
            // very instant: tokio's timer counts milliseconds, so the last
            // ones are waited out by yielding. A job sent ahead needs no
            // such care.
            let exact = jobs.timed.get(done).is_some_and(|t| t.at == at);
            let spin = if exact { SPIN } else { Duration::ZERO };
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                if now >= next_view {
                    next_view = now + Duration::from_millis(250);
                    let s = stats(&mut monitor).await?;
                    update(&mut progress, &s, &before, sent_jobs);
                    if s.policy_failure.is_some() {
                        failure = s.policy_failure;
                        break;
                    }
                    // Every job sent and over: the events still to come
                    // could touch none of them.
                    if submitted == order.len() && sent_jobs == n && active(&s) == 0 {
                        all_over = true;
                        break;
                    }
                    continue;
                }
                let wake = (due - spin).min(next_view);
                tokio::select! {
                    () = tokio::time::sleep_until(wake), if wake > now => {}
                    () = tokio::task::yield_now(), if wake <= now => {}
                    () = stop.cancelled() => {
                        interrupted = true;
                        break;
                    }
                }
            }
            if interrupted || failure.is_some() || all_over {
                break;
            }
            let now = Instant::now();
            let batch = due_jobs(order, &sends, start, now, &mut submitted);
            let orders = due_orders(jobs.timed, start, now, &mut done);
            if batch.is_empty() {
                carry_out(&mut session, orders, &ids, &plan.events, &mut applied).await?;
                continue;
            }
            // The jobs due, then those that follow them (`--feedback`),
            // each wave once the one before has its ids.
            let mut wave = batch;
            while !wave.is_empty() {
                let sent = wall_ns();
                let req = Request::Submit {
                    specs: wave
                        .iter()
                        .map(|&i| JobSpec {
                            after: jobs.after[i].map(|p| ids[p]).into_iter().collect(),
                            // A follower begins when its job has ended.
                            begin_ns: jobs.after[i].is_none().then(|| started_wall + targets[i]),
                            ..specs[i].clone()
                        })
                        .collect(),
                    key: submit_key(),
                };
                match session.call(&req).await? {
                    Response::Submitted(got) if got.len() == wave.len() => {
                        for (&i, id) in wave.iter().zip(got) {
                            ids[i] = id;
                            actual[i] = sent;
                        }
                        sent_jobs += wave.len();
                    }
                    // The scheduler failed between two looks at the stats.
                    Response::Error(e) if e.starts_with("no scheduler") => {
                        failure = stats(&mut monitor).await?.policy_failure.or(Some(e));
                        break;
                    }
                    Response::Error(e) => bail!(
                        "the cluster refused {}: {e}",
                        trace_jobs(&plan.slice, &wave, &plan.workload)
                    ),
                    other => bail!("unexpected answer to submit: {other:?}"),
                }
                wave = wave
                    .iter()
                    .flat_map(|&i| follow[i].iter().copied())
                    .collect();
            }
            if failure.is_some() {
                break;
            }
            if submitted == order.len() && !shared {
                no_more_jobs(&mut session, &mut said_no_more).await?;
            }
            carry_out(&mut session, orders, &ids, &plan.events, &mut applied).await?;
        }
        if !interrupted && failure.is_none() && submitted == order.len() && !shared {
            no_more_jobs(&mut session, &mut said_no_more).await?;
        }

        // Wait for every job to be over: the whole cluster's when it is ours,
        // this run's own jobs when it is shared. (If the scheduler failed,
        // the controller cancelled what waited: this waits for what runs.)
        let remote = matches!(cluster, Cluster::Remote { .. });
        let ours: Vec<u64> = ids.iter().copied().filter(|&id| id != 0).collect();
        if !interrupted {
            loop {
                let s = stats(&mut monitor).await?;
                update(&mut progress, &s, &before, sent_jobs);
                failure = failure.or(s.policy_failure.clone());
                let left = if remote {
                    job_infos(&mut monitor, &ours)
                        .await?
                        .values()
                        .filter(|j| !j.state.is_final())
                        .count() as u64
                } else {
                    active(&s)
                };
                if left == 0 {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    () = stop.cancelled() => {
                        interrupted = true;
                        break;
                    }
                }
            }
        }
        progress.finish();
        if remote {
            // A cluster started elsewhere is left as the run found it: the
            // nodes the run failed or drained are back.
            let given: Vec<bool> = applied.iter().map(|a| a.at != 0).collect();
            for what in crate::events::left_over(&plan.events, &given) {
                let req = match what {
                    What::Up { nodes } => Request::Repair { nodes },
                    What::Undrain { nodes } => Request::Undrain { nodes },
                    _ => continue,
                };
                if let Response::Error(e) = session.call(&req).await? {
                    warn!("cannot put the cluster's nodes back as they were: {e}");
                }
            }
        }
        let interrupted_at = interrupted.then(wall_ns);
        if interrupted {
            warn!(run = %label, "interrupted: cancelling this run's jobs");
            if let Err(e) = session.call(&Request::Cancel(ours.clone())).await {
                warn!("cannot cancel the jobs: {e:#}");
            }
            // Let the cancels land so that their records are written.
            for _ in 0..100 {
                if active(&stats(&mut monitor).await?) == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let ended_wall = wall_ns();
        let infos = job_infos(&mut session, &ours).await?;
        let last = stats(&mut monitor).await?;
        let scheduler = last.policy_report;
        let failure = failure.or(last.policy_failure);
        let cores = if remote {
            before.cores
        } else {
            plan.config.total_cores()
        };

        let record_file = dir.join("records").join(controller::records::RECORD_FILE);
        match cluster {
            Cluster::Embedded { stop, task, .. } => {
                let _ = session.call(&Request::Shutdown).await;
                drop(session);
                drop(monitor);
                stop.cancel();
                task.await
                    .map_err(|e| anyhow!("the embedded cluster failed: {e}"))?
                    .context("the embedded cluster failed")?;
                // The secret and address of a cluster that is gone.
                let _ = std::fs::remove_dir_all(dir.join("state"));
            }
            Cluster::Remote { .. } => {
                let mut frames = Vec::new();
                for chunk in ours.chunks(CHUNK) {
                    match session.call(&Request::Records(chunk.to_vec())).await? {
                        Response::Records(f) => frames.extend_from_slice(&f),
                        other => bail!("cannot fetch the records from the controller: {other:?}"),
                    }
                }
                std::fs::write(&record_file, frames)
                    .with_context(|| format!("cannot write {}", record_file.display()))?;
            }
        }
        Ok(Ran {
            ids,
            actual,
            infos,
            started_wall,
            ended_wall,
            interrupted_at,
            cores,
            slurm_ids: None,
            scheduler,
            failure,
            events: applied,
            ties: None,
        })
    }
}

/// Tells the cluster, once, that the replay has sent its last job: a
/// Batsim scheduler hears `no_more_static_job_to_submit`.
async fn no_more_jobs(session: &mut Session, said: &mut bool) -> Result<()> {
    if std::mem::replace(said, true) {
        return Ok(());
    }
    match session.call(&Request::NoMoreJobs).await? {
        Response::Noted => Ok(()),
        other => bail!("unexpected answer to no-more-jobs: {other:?}"),
    }
}

/// Gives the cluster the timed orders that came due: the trace's
/// cancellations in one request, then each event, what it did kept in
/// `applied`. A job already over when its cancellation comes is left so:
/// it ended before it would have been cancelled. An event the cluster
/// refuses is kept with why, and the run goes on.
async fn carry_out(
    session: &mut Session,
    orders: &[Timed],
    ids: &[u64],
    events: &[Event],
    applied: &mut [Applied],
) -> Result<()> {
    let cancel: Vec<u64> = orders
        .iter()
        .filter_map(|t| match t.order {
            Order::Cancel(i) => Some(ids[i]),
            Order::Event(_) => None,
        })
        .filter(|&id| id != 0)
        .collect();
    if !cancel.is_empty() {
        match session.call(&Request::Cancel(cancel)).await? {
            Response::Jobs(_) => {}
            Response::Error(e) => {
                bail!("the cluster refused to cancel jobs as the trace did: {e}")
            }
            other => bail!("unexpected answer to cancel: {other:?}"),
        }
    }
    for t in orders {
        let Order::Event(k) = t.order else {
            continue;
        };
        let req = match &events[k].what {
            What::Down { nodes, reason } => Request::Fail {
                nodes: nodes.clone(),
                reason: reason.clone(),
            },
            What::Up { nodes } => Request::Repair {
                nodes: nodes.clone(),
            },
            What::Drain { nodes, reason } => Request::Drain {
                nodes: nodes.clone(),
                reason: reason.clone(),
            },
            What::Undrain { nodes } => Request::Undrain {
                nodes: nodes.clone(),
            },
            What::Cancel(i) => Request::Cancel(vec![ids[*i]]),
        };
        let at = wall_ns();
        let done = &mut applied[k];
        done.at = at;
        match session.call(&req).await? {
            Response::Failed { jobs, .. } => done.jobs = jobs,
            Response::Drained(_) => {}
            Response::Jobs(outcomes) => {
                done.jobs = outcomes
                    .iter()
                    .filter(|o| o.error.is_none())
                    .map(|o| o.id)
                    .collect();
            }
            Response::Error(e) => {
                warn!(event = %events[k].source, "the cluster refused the event: {e}");
                done.error = Some(e);
            }
            other => bail!("unexpected answer to an event: {other:?}"),
        }
    }
    Ok(())
}

/// The cluster a run talks to, and how it ends.
enum Cluster {
    Embedded {
        addr: String,
        secret: Vec<u8>,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<Result<()>>,
    },
    Remote {
        addr: String,
        secret: Vec<u8>,
    },
}

impl Cluster {
    fn addr(&self) -> &str {
        match self {
            Cluster::Embedded { addr, .. } | Cluster::Remote { addr, .. } => addr,
        }
    }

    fn secret(&self) -> &[u8] {
        match self {
            Cluster::Embedded { secret, .. } | Cluster::Remote { secret, .. } => secret,
        }
    }
}

async fn embedded(config: &controller::config::Cluster, dir: &Path) -> Result<Cluster> {
    let mut cfg = config.clone();
    cfg.listen = "127.0.0.1:0".into();
    cfg.state_dir = dir.join("state");
    cfg.secret_file = cfg.state_dir.join("secret");
    cfg.record_dir = dir.join("records");
    // A run starts from an empty cluster: the journal of one that died
    // here would bring its jobs back.
    match std::fs::remove_dir_all(&cfg.state_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot clear {}", cfg.state_dir.display()));
        }
        _ => {}
    }
    cfg.local_agents = true;
    let address_file = cfg.state_dir.join(controller::ADDRESS_FILE);
    let secret_file = cfg.secret_file.clone();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller::serve(cfg, stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if task.is_finished() {
            return match task.await {
                Ok(Err(e)) => Err(e.context("the embedded cluster failed to start")),
                _ => Err(anyhow!("the embedded cluster stopped at start")),
            };
        }
        if let (Ok(addr), Ok(secret)) = (
            std::fs::read_to_string(&address_file),
            formats::wire::read_secret(&secret_file),
        ) {
            let addr = addr.trim().to_string();
            if Session::open(&addr, &secret).await.is_ok() {
                return Ok(Cluster::Embedded {
                    addr,
                    secret,
                    stop,
                    task,
                });
            }
        }
        if Instant::now() > deadline {
            stop.cancel();
            bail!("the embedded cluster did not come up within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn active(s: &ClusterStats) -> u64 {
    s.jobs
        .iter()
        .filter(|(st, _)| !st.is_final())
        .map(|(_, n)| n)
        .sum()
}

fn count(s: &ClusterStats, want: JobState) -> u64 {
    s.jobs
        .iter()
        .find(|(st, _)| *st == want)
        .map_or(0, |(_, n)| *n)
}

async fn stats(session: &mut Session) -> Result<ClusterStats> {
    match session.call(&Request::Stats).await? {
        Response::Stats(s) => Ok(*s),
        other => Err(anyhow!("unexpected answer to stats: {other:?}")),
    }
}

/// Ids per request when asking about many jobs: keeps each answer far
/// below the frame limit.
const CHUNK: usize = 20_000;

/// What the controller knows of these jobs, by id.
async fn job_infos(session: &mut Session, ids: &[u64]) -> Result<HashMap<u64, JobInfo>> {
    let mut out = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        match session.call(&Request::Jobs(chunk.to_vec())).await? {
            Response::Queue(q) => out.extend(q.into_iter().map(|j| (j.id, j))),
            other => bail!("unexpected answer about jobs: {other:?}"),
        }
    }
    Ok(out)
}

/// Jobs in a final state.
fn over(s: &ClusterStats) -> u64 {
    s.jobs
        .iter()
        .filter(|(st, _)| st.is_final())
        .map(|(_, n)| n)
        .sum()
}

fn update(progress: &mut Progress, s: &ClusterStats, before: &ClusterStats, submitted: usize) {
    // (On a cluster others use too, their jobs end as well: no more of
    // ours can be over than were sent.)
    progress.update(&Counts {
        submitted: submitted as u64,
        running: count(s, JobState::Running),
        suspended: count(s, JobState::Suspended),
        pending: count(s, JobState::Pending),
        over: over(s).saturating_sub(over(before)).min(submitted as u64),
    });
}
