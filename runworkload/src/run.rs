//! One replay at one shrinking factor: bring up (or reach) the cluster,
//! submit every job at its absolute deadline, watch until all are over,
//! and leave a results directory (records, `jobs.csv`, `manifest.json`,
//! `metrics.json`).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use calcmets::metrics::{Params, Summary};
use controller::client::Session;
use formats::wire::{ClusterStats, JobInfo, JobSpec, JobState, Request, Response};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use formats::results::{self, Status};

use crate::rundir::RunDir;
use crate::schedule::{self, Scale};
use crate::Plan;

/// What one run left behind.
pub struct RunResult {
    pub label: String,
    pub dir: PathBuf,
    pub summary: Summary,
    pub interrupted: bool,
}

/// Time between taking the start instant and the first deadline, so that
/// the first jobs are not late by the set-up of the loop itself.
pub(crate) const LEAD: Duration = Duration::from_millis(200);
/// The submitter sleeps to this much before a deadline, then yields until
/// it: tokio's timer has millisecond granularity.
pub(crate) const SPIN: Duration = Duration::from_millis(2);

/// `shrink-050` for 50 %; a fraction of a percent is kept
/// (`shrink-099.5`), so that no two factors of a sweep share a directory.
pub fn label(factor: f64) -> String {
    // To a thousandth of a percent (finer factors are refused when the
    // sweep is read), whole percents padded to three digits.
    let text = format!("{:07.3}", factor * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text.split_once('.') {
        None => format!("shrink-{:03}", text.parse::<u64>().unwrap_or(0)),
        Some(_) => format!("shrink-{text}"),
    }
}

/// The jobs (indices into the slice), in submission order from `*next`
/// on, whose deadline has come by `now`; `*next` moves past them.
pub(crate) fn due_jobs(
    order: &[usize],
    targets: &[i64],
    start: Instant,
    now: Instant,
    next: &mut usize,
) -> Vec<usize> {
    let mut batch = Vec::new();
    while *next < order.len()
        && start + Duration::from_nanos(targets[order[*next]].max(0) as u64) <= now
    {
        batch.push(order[*next]);
        *next += 1;
    }
    batch
}

pub(crate) fn wall_ns() -> i64 {
    controller::state::wall_ns()
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

async fn embedded(plan: &Plan, dir: &Path) -> Result<Cluster> {
    let mut cfg = plan.config.clone();
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
        Response::Stats(s) => Ok(s),
        other => Err(anyhow!("unexpected answer to stats: {other:?}")),
    }
}

fn bar(plan: &Plan, label: &str, jobs: u64) -> ProgressBar {
    if !plan.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(jobs);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>11} [{elapsed_precise}] {bar:30} {pos}/{len} over  {msg}  ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(label.to_string());
    bar
}

pub async fn run_factor(
    plan: &Plan,
    factor: f64,
    run_dir: &RunDir,
    stop: &CancellationToken,
) -> Result<RunResult> {
    let label = label(factor);
    let dir = run_dir.path.clone();
    std::fs::create_dir_all(dir.join("records"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    // Before the first job: a run whose replay dies is then known as
    // unfinished, never taken for a finished one.
    write_manifest(
        plan,
        &dir,
        &RunState {
            label: &label,
            factor,
            status: Status::Running,
            cores: plan.config.total_cores(),
            start_ns: wall_ns(),
            end_ns: None,
            counts: None,
            lateness: None,
        },
    )?;

    let scale = Scale {
        factor,
        speedup: plan.speedup,
    };
    let jobs = &plan.slice.jobs;
    let targets = schedule::targets(jobs, &plan.schedule, scale);
    let specs: Vec<JobSpec> = jobs
        .iter()
        .map(|j| JobSpec {
            cores: j.cores,
            mem_per_cpu_mb: 0,
            runtime_ns: scale.apply_u(j.run_ns),
            walltime_ns: scale.apply_u(j.walltime_ns),
            partition: None,
            submit_ns: None,
            // On a cluster others use too, `controller cancel --name
            // shrink-050` finds this run's jobs.
            name: Some(label.clone()),
        })
        .collect();
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (targets[i], i));
    if plan.simulate {
        return simulate(plan, factor, label, dir, &targets, &specs, &order);
    }
    if plan.slurm {
        return crate::slurm::run_factor(plan, factor, label, dir, &targets, &specs, &order, stop)
            .await;
    }

    let cluster = match &plan.remote {
        None => embedded(plan, &dir).await?,
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
    info!(run = %label, jobs = jobs.len(), factor, "replay starts");
    let progress = bar(plan, &label, jobs.len() as u64);
    let mut ids: Vec<u64> = vec![0; jobs.len()];
    let mut actual: Vec<i64> = vec![0; jobs.len()];
    let mut submitted = 0usize;
    let mut interrupted = false;
    let mut next_view = Instant::now();

    // Submit at absolute deadlines; jobs whose deadline has passed go
    // together in one request.
    while submitted < order.len() {
        let due = start + Duration::from_nanos(targets[order[submitted]].max(0) as u64);
        loop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            if now >= next_view {
                next_view = now + Duration::from_millis(250);
                update(&progress, &stats(&mut monitor).await?, &before, submitted);
                continue;
            }
            let wake = (due - SPIN).min(next_view);
            tokio::select! {
                () = tokio::time::sleep_until(wake), if wake > now => {}
                () = tokio::task::yield_now(), if wake <= now => {}
                () = stop.cancelled() => {
                    interrupted = true;
                    break;
                }
            }
        }
        if interrupted {
            break;
        }
        let now = Instant::now();
        let batch = due_jobs(&order, &targets, start, now, &mut submitted);
        let sent = wall_ns();
        let req = Request::Submit(batch.iter().map(|&i| specs[i].clone()).collect());
        match session.call(&req).await? {
            Response::Submitted(got) if got.len() == batch.len() => {
                for (&i, id) in batch.iter().zip(got) {
                    ids[i] = id;
                    actual[i] = sent;
                }
            }
            Response::Error(e) => bail!(
                "the cluster refused {}: {e}",
                trace_jobs(&plan.slice.jobs, &batch, &plan.workload)
            ),
            other => bail!("unexpected answer to submit: {other:?}"),
        }
    }

    // Wait for every job to be over: the whole cluster's when it is ours,
    // this run's own jobs when it is shared.
    let remote = matches!(cluster, Cluster::Remote { .. });
    let ours: Vec<u64> = ids.iter().copied().filter(|&id| id != 0).collect();
    if !interrupted {
        loop {
            let s = stats(&mut monitor).await?;
            update(&progress, &s, &before, submitted);
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
    progress.finish_and_clear();
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

    let summary = write_results(
        plan,
        &dir,
        &label,
        factor,
        &targets,
        &actual,
        &ids,
        &infos,
        started_wall,
        ended_wall,
        interrupted,
        cores,
        None,
    )?;
    Ok(RunResult {
        label,
        dir,
        summary,
        interrupted,
    })
}

/// The trace jobs `batch` (indices into the slice) replay, for messages:
/// "trace job 4515 (line 20) of T", or the first few of several.
pub(crate) fn trace_jobs(jobs: &[crate::trace::TraceJob], batch: &[usize], trace: &Path) -> String {
    let named: Vec<String> = batch
        .iter()
        .take(3)
        .map(|&i| format!("{} (line {})", jobs[i].trace_id, jobs[i].line))
        .collect();
    let more = match batch.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    let noun = if batch.len() == 1 { "job" } else { "jobs" };
    format!(
        "trace {noun} {}{more} of {}",
        named.join(", "),
        trace.display()
    )
}

/// A finished job as its record tells it (the twin and Slurm have no
/// controller to ask).
pub(crate) fn info_of(r: &formats::record::JobRecord<'_>, nodes: String) -> JobInfo {
    let state = match r.status {
        formats::record::Status::Completed => JobState::Completed,
        formats::record::Status::Cancelled => JobState::Cancelled,
        formats::record::Status::Failed => JobState::Failed,
        formats::record::Status::Timeout => JobState::Timeout,
    };
    JobInfo {
        id: r.id,
        name: String::new(),
        state,
        partition: String::new(),
        cores: r.cores,
        nodes,
        submit_ns: r.submit,
        start_ns: r.start,
        end_ns: r.end,
        runtime_ns: r.runtime,
        walltime_ns: r.walltime,
        reason: String::new(),
        suspensions: r
            .suspensions
            .iter()
            .map(|s| (s.suspend, s.resume))
            .collect(),
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

/// The twin: the same jobs at their exact deadlines, in virtual time.
fn simulate(
    plan: &Plan,
    factor: f64,
    label: String,
    dir: PathBuf,
    targets: &[i64],
    specs: &[JobSpec],
    order: &[usize],
) -> Result<RunResult> {
    // A fixed epoch keeps runs reproducible: the trace's own start when
    // it says, else the Unix epoch.
    let epoch = plan.slice.header.unix_start_time().unwrap_or(0) * 1_000_000_000;
    let jobs: Vec<controller::sim::SimJob> = order
        .iter()
        .map(|&i| controller::sim::SimJob {
            spec: specs[i].clone(),
            submit_ns: targets[i],
        })
        .collect();
    let run = controller::sim::simulate(std::sync::Arc::new(plan.config.clone()), &jobs, epoch);
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
    for (k, &i) in order.iter().enumerate() {
        ids[i] = run.ids[k];
        actual[i] = epoch + targets[i];
    }
    let states: HashMap<u64, JobInfo> = run
        .records
        .iter()
        .map(|r| {
            let nodes = run.nodes.get(&r.id).cloned().unwrap_or_default();
            (r.id, info_of(r, nodes))
        })
        .collect();
    info!(run = %label, passes = run.passes, "simulated");
    if run.refused > 0 {
        warn!(run = %label, refused = run.refused, "the policy made decisions the cluster refused");
    }
    let summary = write_results(
        plan,
        &dir,
        &label,
        factor,
        targets,
        &actual,
        &ids,
        &states,
        epoch,
        epoch + run.end_ns,
        false,
        plan.config.total_cores(),
        None,
    )?;
    Ok(RunResult {
        label,
        dir,
        summary,
        interrupted: false,
    })
}

/// Jobs in a final state.
fn over(s: &ClusterStats) -> u64 {
    s.jobs
        .iter()
        .filter(|(st, _)| st.is_final())
        .map(|(_, n)| n)
        .sum()
}

fn update(bar: &ProgressBar, s: &ClusterStats, before: &ClusterStats, submitted: usize) {
    // (On a cluster others use too, their jobs end as well: no more of
    // ours can be over than were sent.)
    let over = over(s).saturating_sub(over(before)).min(submitted as u64);
    bar.set_position(over);
    bar.set_message(format!(
        "submitted {submitted}, running {}, suspended {}, pending {}",
        count(s, JobState::Running),
        count(s, JobState::Suspended),
        count(s, JobState::Pending)
    ));
}

/// τ of the bounded slowdown in this run's time: the trace's τ, shrunk
/// and sped up like every other time, so that bounded slowdowns compare
/// across factors and with the trace.
fn tau_ns(plan: &Plan, factor: f64) -> i64 {
    Scale {
        factor,
        speedup: plan.speedup,
    }
    .apply(plan.tau_ns)
}

/// Nearest-rank percentile of sorted values.
fn rank(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[calcmets::dist::rank(q, sorted.len()) - 1]
}

#[allow(clippy::too_many_arguments)] // one run's bookkeeping, written once
pub(crate) fn write_results(
    plan: &Plan,
    dir: &Path,
    label: &str,
    factor: f64,
    targets: &[i64],
    actual: &[i64],
    ids: &[u64],
    infos: &HashMap<u64, JobInfo>,
    started_wall: i64,
    ended_wall: i64,
    interrupted: bool,
    cores: u64,
    slurm_ids: Option<&[u64]>,
) -> Result<Summary> {
    let jobs = &plan.slice.jobs;
    let mut late: Vec<i64> = (0..jobs.len())
        .filter(|&i| ids[i] != 0)
        .map(|i| actual[i] - (started_wall + targets[i]))
        .collect();
    late.sort_unstable();
    let mut states: HashMap<&'static str, u64> = HashMap::new();
    let scale = Scale {
        factor,
        speedup: plan.speedup,
    };
    let rows: Vec<results::JobRow> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let info = infos.get(&ids[i]);
            let state = info.map_or("not_submitted", |info| info.state.as_str());
            *states.entry(state).or_default() += 1;
            let target = started_wall + targets[i];
            results::JobRow {
                trace_id: j.trace_id,
                job_id: ids[i],
                cores: j.cores,
                runtime_s: scale.apply_u(j.run_ns) as f64 / 1e9,
                walltime_s: scale.apply_u(j.walltime_ns) as f64 / 1e9,
                target_submit: target as f64 / 1e9,
                actual_submit: actual[i] as f64 / 1e9,
                // The cluster's own submit instant, exactly as the job's
                // records carry it: what tells this run's records from any
                // other's.
                submit_ns: Some(info.map_or(0, |info| info.submit_ns)),
                lateness_ms: if ids[i] == 0 {
                    0.0
                } else {
                    (actual[i] - target) as f64 / 1e6
                },
                state: state.to_string(),
                slurm_id: slurm_ids.map(|s| s[i]),
                nodes: info.map_or(String::new(), |info| info.nodes.clone()),
            }
        })
        .collect();
    results::write_jobs(dir, &rows)
        .with_context(|| format!("cannot write jobs.csv in {}", dir.display()))?;

    write_manifest(
        plan,
        dir,
        &RunState {
            label,
            factor,
            status: if interrupted {
                Status::Interrupted
            } else {
                Status::Completed
            },
            cores,
            start_ns: started_wall,
            end_ns: Some(ended_wall),
            counts: Some(&states),
            lateness: Some(&late),
        },
    )?;

    let params = Params {
        tau_ns: tau_ns(plan, factor),
        window: None,
        by_size: false,
    };
    // As `calcmets DIR` reads it: only the run's own records count.
    let sources = calcmets::inputs::expand(&[dir.join("records")])?;
    let book = calcmets::results::Book::open(dir)?;
    let mut warnings = Vec::new();
    let summary =
        calcmets::summarize_records(&sources, &params, cores, false, Some(&book), &mut warnings)?;
    for w in warnings {
        warn!("{w}");
    }
    let mut f =
        std::fs::File::create(dir.join("metrics.json")).context("cannot write metrics.json")?;
    writeln!(f, "{}", serde_json::to_string_pretty(&summary)?)?;
    Ok(summary)
}

/// Marks a run that stopped on an error: its manifest says `failed` and
/// why, so that neither a rerun nor calcmets takes it for a finished one.
/// (Best effort: the error at hand is what the user hears of.)
pub(crate) fn mark_failed(dir: &Path, err: &anyhow::Error) {
    let Ok(mut m) = results::Manifest::read(dir) else {
        return;
    };
    m.status = Status::Failed;
    m.error = Some(format!("{err:#}"));
    m.end = Some(wall_ns() as f64 / 1e9);
    let _ = m.write(dir);
}

/// What a run's manifest says besides the plan: written with status
/// `running` when the run starts and again, complete, when it ends.
pub(crate) struct RunState<'a> {
    pub label: &'a str,
    pub factor: f64,
    pub status: Status,
    pub cores: u64,
    /// Unix ns: the first deadline (when the run started, for a run still
    /// running).
    pub start_ns: i64,
    pub end_ns: Option<i64>,
    /// Jobs by final state.
    pub counts: Option<&'a HashMap<&'static str, u64>>,
    /// Sorted lateness of the submitted jobs, ns.
    pub lateness: Option<&'a [i64]>,
}

/// Writes `dir/manifest.json`: the plan, and where the run stands.
pub(crate) fn write_manifest(plan: &Plan, dir: &Path, m: &RunState<'_>) -> Result<()> {
    let schedule = match &plan.schedule {
        schedule::Schedule::Trace => results::Schedule::Trace,
        schedule::Schedule::Groups {
            warmup_jobs,
            warmup_ns,
            group,
            period_ns,
            drift_ns,
        } => results::Schedule::Groups {
            warmup_jobs: *warmup_jobs,
            warmup: *warmup_ns as f64 / 1e9,
            group: *group,
            period: *period_ns as f64 / 1e9,
            drift: *drift_ns as f64 / 1e9,
        },
    };
    let s = &plan.slice;
    let lateness = m.lateness.map(|late| results::Lateness {
        submitted: late.len() as u64,
        p50: rank(late, 0.50) as f64 / 1e9,
        p99: rank(late, 0.99) as f64 / 1e9,
        max: late.last().copied().unwrap_or(0) as f64 / 1e9,
        mean: if late.is_empty() {
            0.0
        } else {
            late.iter().sum::<i64>() as f64 / late.len() as f64 / 1e9
        },
    });
    let manifest = results::Manifest {
        label: m.label.to_string(),
        status: m.status,
        error: None,
        clemu_version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        config: plan.config_path.display().to_string(),
        mode: if plan.simulate {
            "simulated"
        } else {
            "emulated"
        }
        .into(),
        backend: if plan.slurm { "slurm" } else { "clemu" }.into(),
        controller: if plan.slurm {
            "slurm".to_string()
        } else {
            plan.remote
                .as_ref()
                .map_or("embedded".to_string(), |r| r.addr.clone())
        },
        policy: plan.config.policy.clone(),
        preemption: if plan.config.preemption {
            "suspend"
        } else {
            "off"
        }
        .into(),
        time_slice_s: plan.config.time_slice.as_secs_f64(),
        gang_partitions: plan
            .config
            .partitions
            .iter()
            .filter(|p| p.oversubscribe > 1)
            .map(|p| results::GangPartition {
                name: p.name.clone(),
                oversubscribe: p.oversubscribe,
                time_slice_s: p.time_slice.as_secs_f64(),
            })
            .collect(),
        cores: Some(m.cores),
        nodes: plan.config.nodes.len() as u64,
        trace: results::Trace {
            path: plan.workload.display().to_string(),
            max_procs: s.header.max_procs(),
            unix_start_time: s.header.unix_start_time(),
        },
        slice: results::Slice {
            skip: plan.skip,
            jobs: plan.take,
            read: s.read,
            replayed: s.jobs.len() as u64,
            skipped_too_large: s.too_large,
            skipped_unknown: s.unknown,
            malformed_lines: s.warnings.len() as u64,
            cores_per_proc: plan.cores_per_proc,
        },
        factor: m.factor,
        speedup: plan.speedup,
        tau: Some(tau_ns(plan, m.factor) as f64 / 1e9),
        schedule,
        start: Some(m.start_ns as f64 / 1e9),
        end: m.end_ns.map(|e| e as f64 / 1e9),
        counts: m
            .counts
            .map(|c| c.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
        lateness,
    };
    manifest
        .write(dir)
        .with_context(|| format!("cannot write the manifest in {}", dir.display()))
}
