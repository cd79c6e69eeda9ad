//! A run's results directory, from the replay's side: taken before the run
//! starts, so that a run's records are only ever its own, and written:
//! the manifest when the run starts and when it ends, `jobs.csv` and
//! `metrics.json` at the end.
//!
//! A replay locks the directory (`.lock`, an advisory lock the kernel
//! drops however the process ends) and writes `manifest.json` with status
//! `running` before its first job; the manifest is written again when the
//! run ends. A directory that holds anything (a finished run, one whose
//! replay was killed, stray records) is refused unless `--force`, which
//! removes the old run whole: records are never appended to another run's.
//! One that another replay has locked is refused even then.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use calcmets::metrics::{Params, Summary};
use formats::results::{self, Manifest, Status};

use tracing::warn;

use crate::backend::{wall_ns, Jobs, Ran};
use crate::events::What;
use crate::schedule::{self, Scale};
use crate::Plan;

/// The lock file in a results directory. Hidden: calcmets reads `*.rec`,
/// `manifest.json` and `jobs.csv` and ignores it.
pub const LOCK_FILE: &str = ".lock";

/// A results directory this process has taken.
pub struct RunDir {
    pub path: PathBuf,
    /// Locked for as long as this lives.
    _lock: File,
}

impl RunDir {
    /// Locks `path` (created if need be) for this process; returns it and
    /// what it holds already. A directory another replay is writing is
    /// refused.
    fn lock(path: &Path) -> Result<(RunDir, Vec<PathBuf>)> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let lock_path = path.join(LOCK_FILE);
        let mut lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let pid = std::fs::read_to_string(&lock_path).unwrap_or_default();
                bail!(
                    "{} is being written by another runworkload (pid {}): wait for it to \
                     end or stop it, or give this replay another --out",
                    path.display(),
                    pid.trim()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()));
            }
        }
        lock.set_len(0)
            .and_then(|()| writeln!(lock, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", lock_path.display()))?;
        let others = entries_besides_lock(path)?;
        Ok((
            RunDir {
                path: path.to_path_buf(),
                _lock: lock,
            },
            others,
        ))
    }
}

impl Drop for RunDir {
    /// The lock file goes with the replay (a killed replay leaves it,
    /// unlocked); a directory no run was written into (the sweep stopped
    /// before it) goes too.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path.join(LOCK_FILE));
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Takes the directories of every run of a sweep before the first starts,
/// so that a refusal comes before anything ran or was removed. Without
/// `force`, a directory holding anything is refused with what it holds
/// and what to do; with it, everything in them is removed.
pub fn claim_all(paths: &[PathBuf], force: bool) -> Result<Vec<RunDir>> {
    let mut taken = Vec::with_capacity(paths.len());
    for p in paths {
        taken.push(RunDir::lock(p)?);
    }
    if !force {
        if let Some((dir, _)) = taken.iter().find(|(_, others)| !others.is_empty()) {
            bail!(
                "{} {}: replace it with --force (the old run is removed whole), or give \
                 another --out",
                dir.path.display(),
                describe(&dir.path)
            );
        }
    }
    let mut out = Vec::with_capacity(taken.len());
    for (dir, others) in taken {
        for p in others {
            let removed = if p.is_dir() && !p.is_symlink() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            removed.with_context(|| format!("cannot remove {}", p.display()))?;
        }
        out.push(dir);
    }
    Ok(out)
}

fn entries_besides_lock(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
        if e.file_name() != LOCK_FILE {
            out.push(e.path());
        }
    }
    Ok(out)
}

/// What a directory that is not empty holds, in a few words: "holds a
/// completed run (…)", "holds an unfinished run (…)", "holds no run but
/// N files".
fn describe(dir: &Path) -> String {
    let records = count_records(&dir.join("records"));
    let Ok(m) = Manifest::read(dir) else {
        return match records {
            0 => "is not empty and holds no run".to_string(),
            n => format!("holds {n} job record(s) but no manifest: a run that did not finish"),
        };
    };
    // A twin's start is virtual (the trace's own epoch): when it was
    // written is what the user knows it by.
    let ago = if m.mode == "simulated" {
        std::fs::metadata(dir.join(results::MANIFEST))
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .map_or(String::new(), |d| {
                format!("written {}, ", ago(d.as_secs_f64()))
            })
    } else {
        m.start
            .map(|s| wall_ns() as f64 / 1e9 - s)
            .filter(|s| *s >= 0.0)
            .map_or(String::new(), |s| format!("started {}, ", ago(s)))
    };
    let jobs = Some(m.slice.replayed)
        .filter(|&n| n > 0)
        .map_or(String::new(), |n| format!(" of its {n} jobs"));
    match m.status {
        Status::Running => {
            let pid = Some(m.pid)
                .filter(|&p| p > 0)
                .map_or(String::new(), |p| format!(" (pid {p})"));
            format!(
                "holds an unfinished run ({ago}its runworkload{pid} stopped before the end; \
                 {records} record(s){jobs})"
            )
        }
        other => format!(
            "already holds a run ({}, {ago}{records} record(s){jobs})",
            other.as_str()
        ),
    }
}

fn ago(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0} s ago"),
        s if s < 2.0 * 3600.0 => format!("{:.0} min ago", s / 60.0),
        s if s < 2.0 * 86400.0 => format!("{:.0} h ago", s / 3600.0),
        s => format!("{:.0} days ago", s / 86400.0),
    }
}

/// Intact records in the `*.rec` files of `dir` (0 if there are none).
fn count_records(dir: &Path) -> u64 {
    let Ok(sources) = calcmets::inputs::expand(&[dir.to_path_buf()]) else {
        return 0;
    };
    let mut n = 0;
    // A file that is no record file counts none.
    for s in sources {
        let _ = calcmets::inputs::for_each_record(std::slice::from_ref(&s), |_| {
            n += 1;
            Ok(())
        });
    }
    n
}

/// τ of the bounded slowdown in this run's time: the trace's τ, shrunk
/// and sped up like every other time, so that bounded slowdowns compare
/// across factors and with the trace.
pub(crate) fn tau_ns(plan: &Plan, factor: f64) -> i64 {
    Scale {
        factor,
        speedup: plan.speedup,
    }
    .apply(plan.tau_ns)
}

/// Nearest-rank percentile of sorted values (0 of none), as calcmets
/// defines percentiles.
fn rank(sorted: &[i64], q: f64) -> i64 {
    calcmets::nearest_rank(sorted, q).unwrap_or(0)
}

/// Completes a run's directory from what its backend tells: `jobs.csv`,
/// the manifest (finished), `metrics.json`; the records are there already.
pub(crate) fn write_results(
    plan: &Plan,
    dir: &Path,
    jobs: &Jobs<'_>,
    ran: &Ran,
) -> Result<Summary> {
    let (label, factor, targets) = (jobs.label, jobs.factor, jobs.targets);
    let Ran {
        ids,
        actual,
        infos,
        started_wall,
        ended_wall,
        interrupted_at,
        cores,
        slurm_ids,
        scheduler,
        failure,
        events,
        ties,
    } = ran;
    let (started_wall, ended_wall, interrupted_at, cores) =
        (*started_wall, *ended_wall, *interrupted_at, *cores);
    let interrupted = interrupted_at.is_some();
    let trace_jobs = &plan.slice.jobs;
    // The events that hit each job (by the cluster's id), numbered from 1.
    let mut hit: HashMap<u64, Vec<usize>> = HashMap::new();
    for (k, a) in events.iter().enumerate() {
        for &id in &a.jobs {
            hit.entry(id).or_default().push(k + 1);
        }
    }
    // A follower (`--feedback`) has no deadline: it is sent with the job
    // it follows, and submitted when that one has ended and its think
    // time passed. Its target is that instant; it is never late.
    let follower = |i: usize| jobs.after[i].is_some();
    // A job is late by the instant the cluster submitted it at (sent
    // ahead, it begins at its deadline; sent after it, when it came)
    // against its deadline.
    let submitted_at = |i: usize| infos.get(&ids[i]).map_or(actual[i], |info| info.submit_ns);
    // A job cancelled while it waited for its instant (the run
    // interrupted) never came: it was not late, nor early.
    let came = |i: usize| {
        infos
            .get(&ids[i])
            .is_none_or(|info| info.start_ns > 0 || info.submit_ns >= started_wall + targets[i])
    };
    let mut late: Vec<i64> = (0..trace_jobs.len())
        .filter(|&i| ids[i] != 0 && !follower(i) && came(i))
        .map(|i| submitted_at(i) - (started_wall + targets[i]))
        .collect();
    late.sort_unstable();
    let mut states: HashMap<&'static str, u64> = HashMap::new();
    let scale = Scale {
        factor,
        speedup: plan.speedup,
    };
    let rows: Vec<results::JobRow> = trace_jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let info = infos.get(&ids[i]);
            let state = match info {
                None => "not_submitted",
                // Cancelled from the interruption on: by it, not the
                // trace (counted apart, so that the trace's cancellations
                // stay what they were).
                Some(info)
                    if info.state == formats::wire::JobState::Cancelled
                        && interrupted_at
                            .is_some_and(|at| info.end_ns == 0 || info.end_ns >= at) =>
                {
                    "interrupted"
                }
                Some(info) => info.state.as_str(),
            };
            *states.entry(state).or_default() += 1;
            let target = match (follower(i), info) {
                (true, Some(info)) => info.submit_ns,
                (true, None) => actual[i],
                (false, _) => started_wall + targets[i],
            };
            results::JobRow {
                trace_id: j.trace_id,
                job_id: ids[i],
                cores: j.cores,
                runtime_trace_s: Some(j.run_ns as f64 / 1e9),
                walltime_trace_s: Some(j.walltime_ns as f64 / 1e9),
                runtime_wall_s: scale.apply_u(j.run_ns) as f64 / 1e9,
                walltime_wall_s: scale.apply_u(j.walltime_ns) as f64 / 1e9,
                target_submit: target as f64 / 1e9,
                actual_submit: actual[i] as f64 / 1e9,
                // The cluster's own submit instant, exactly as the job's
                // records carry it: what tells this run's records from any
                // other's.
                submit_ns: Some(info.map_or(0, |info| info.submit_ns)),
                start_ns: Some(info.map_or(0, |info| info.start_ns)),
                end_ns: Some(info.map_or(0, |info| info.end_ns)),
                lateness_wall_ms: if ids[i] == 0 || follower(i) || !came(i) {
                    0.0
                } else {
                    (submitted_at(i) - target) as f64 / 1e6
                },
                state: state.to_string(),
                cancel_after_trace_s: j
                    .cancel_after_ns
                    .filter(|_| !follower(i))
                    .map(|c| c as f64 / 1e9),
                cancel_after_wall_s: j
                    .cancel_after_ns
                    .filter(|_| !follower(i))
                    .map(|c| scale.apply_u(c) as f64 / 1e9),
                follows: jobs.after[i].map(|p| trace_jobs[p].trace_id),
                events: hit
                    .get(&ids[i])
                    .filter(|_| ids[i] != 0)
                    .map(|ks| {
                        ks.iter()
                            .map(|k| k.to_string())
                            .collect::<Vec<_>>()
                            .join(";")
                    })
                    .unwrap_or_default(),
                slurm_id: slurm_ids.as_ref().map(|s| s[i]),
                nodes: info.map_or(String::new(), |info| info.nodes.clone()),
                gres: controller::gres::request_text(&jobs.specs[i].gres),
            }
        })
        .collect();
    results::write_jobs(dir, &rows)
        .with_context(|| format!("cannot write jobs.csv in {}", dir.display()))?;
    let summary_of_events = write_events(plan, dir, events, hit.len() as u64)?;
    // What the emulation's own costs came to: the twin and Slurm have none
    // to measure (their instants come from the records themselves).
    let latency = (!plan.backend.virtual_time() && plan.backend.name() == "clemu")
        .then(|| latencies(dir, infos, plan.speedup / factor))
        .transpose()?;

    let manifest = write_manifest(
        plan,
        dir,
        &RunState {
            label,
            factor,
            load: jobs.load,
            replica: jobs.replica,
            status: if failure.is_some() {
                Status::Failed
            } else if interrupted {
                Status::Interrupted
            } else {
                Status::Completed
            },
            cores,
            start_ns: started_wall,
            end_ns: Some(ended_wall),
            counts: Some(&states),
            lateness: Some(&late),
            error: failure.as_deref(),
            scheduler: scheduler.as_ref(),
            events: summary_of_events.as_ref(),
            latency: latency.as_ref(),
            ties: ties.as_ref(),
        },
    )?;

    // As `calcmets DIR` reads it: in trace seconds, τ given in them.
    let clock = calcmets::clock::Clock::of_manifest(&manifest)
        .context("the run's manifest has no trace clock")?;
    let params = Params {
        tau_ns: clock.records_duration_ns(plan.tau_ns),
        window: None,
        by_size: false,
    };
    // Only the run's own records count.
    let sources = calcmets::inputs::expand(&[dir.join("records")])?;
    let book = calcmets::results::Book::open(dir)?;
    let mut warnings = Vec::new();
    let summary = calcmets::summarize_records(
        &sources,
        &params,
        cores,
        resources(&plan.config),
        false,
        Some(&book),
        &mut warnings,
    )?
    .in_clock(&clock, plan.tau_ns as f64 / 1e9);
    // As calcmets says it of this run: the host's delays against τ.
    warnings.extend(
        latency
            .as_ref()
            .and_then(|l| calcmets::runs::latency_warning(label, l, plan.tau_ns as f64 / 1e9)),
    );
    for w in warnings {
        warn!("{w}");
    }
    let mut f =
        std::fs::File::create(dir.join("metrics.json")).context("cannot write metrics.json")?;
    writeln!(f, "{}", serde_json::to_string_pretty(&summary)?)?;
    Ok(summary)
}

/// How long the emulation took to act on the controller's orders, job by
/// job, from the run's records (sigsleep's own instants) and what the
/// controller knows of each job (its decisions' instants): a start from
/// its pass to the record's start, a suspension or resumption from the
/// decision to the process noting it, an end from the record's (a
/// sleep's deadline) to the controller knowing it, an arrival from its
/// submission to the pass that first looked at it ([`arrivals`]).
/// `trace_per_wall`: trace seconds per wall second. Only a job's last
/// execution counts (one requeued ran before; its earlier record is of
/// another start). Every delay goes to `latency.csv` besides.
fn latencies(
    dir: &Path,
    infos: &HashMap<u64, formats::wire::JobInfo>,
    trace_per_wall: f64,
) -> Result<results::Latencies> {
    let (mut start, mut suspend, mut resume, mut end) = (vec![], vec![], vec![], vec![]);
    let sources = calcmets::inputs::expand(&[dir.join("records")])?;
    calcmets::inputs::for_each_record(&sources, |r| {
        let Some(info) = infos.get(&r.id) else {
            return Ok(());
        };
        // Not this record's execution (a later one started since).
        if info.start_ns == 0 || r.start < info.start_ns - calcmets::results::CLOCK_SLACK_NS {
            return Ok(());
        }
        start.push(r.start - info.start_ns);
        if info.end_ns > 0 {
            end.push(info.end_ns - r.end);
        }
        if r.suspensions.len() == info.suspensions.len() {
            for (got, decided) in r.suspensions.iter().zip(&info.suspensions) {
                suspend.push(got.suspend - decided.0);
                if decided.1 > 0 {
                    resume.push(got.resume - decided.1);
                }
            }
        }
        Ok(())
    })?;
    let arrive = arrivals(infos.values());
    // Every delay, for a twin's replicas to draw from (`--latencies`).
    let path = dir.join(results::LATENCY);
    let mut text = String::from("kind,ns\n");
    for (kind, v) in [
        ("start", &start),
        ("suspend", &suspend),
        ("resume", &resume),
        ("end", &end),
        ("arrive", &arrive),
    ] {
        for ns in v {
            text.push_str(&format!("{kind},{ns}\n"));
        }
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    let delay = |mut v: Vec<i64>| -> Option<results::Delay> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let ms = |ns: i64| ns as f64 / 1e6;
        let (p50, p99, max) = (rank(&v, 0.50), rank(&v, 0.99), v[v.len() - 1]);
        Some(results::Delay {
            samples: v.len() as u64,
            p50_ms: ms(p50),
            p99_ms: ms(p99),
            max_ms: ms(max),
            p50_s: ms(p50) / 1e3 * trace_per_wall,
            p99_s: ms(p99) / 1e3 * trace_per_wall,
            max_s: ms(max) / 1e3 * trace_per_wall,
        })
    };
    Ok(results::Latencies {
        start: delay(start),
        suspend: delay(suspend),
        resume: delay(resume),
        end: delay(end),
        arrive: delay(arrive),
    })
}

/// How long after its submission the controller's pass looked at a job
/// (its timer's wake-up and the loop's turn), over the jobs that pass
/// started. The controller does not say which pass that was; a job
/// started with no other job submitted, no end known and no job
/// suspended or resumed in between (its start's instant included: a
/// time-slicing turn suspends and resumes at the instant it starts jobs)
/// can only have been started by the pass its own arrival called. A job
/// that waited on another has that one's end in between.
fn arrivals<'a>(infos: impl Iterator<Item = &'a formats::wire::JobInfo> + Clone) -> Vec<i64> {
    let mut submits: Vec<i64> = infos.clone().map(|j| j.submit_ns).collect();
    // Ends, suspensions and resumptions: instants of passes that other
    // causes called.
    let mut others: Vec<i64> = infos
        .clone()
        .flat_map(|j| {
            let turns = j.suspensions.iter().flat_map(|&(s, r)| [s, r]);
            std::iter::once(j.end_ns).chain(turns)
        })
        .filter(|&e| e > 0)
        .collect();
    submits.sort_unstable();
    others.sort_unstable();
    // Whether `sorted` has an instant after `from` and before `to`
    // (`to` itself counting when `inclusive`).
    let between = |sorted: &[i64], from: i64, to: i64, inclusive: bool| {
        let i = sorted.partition_point(|&t| t <= from);
        sorted
            .get(i)
            .is_some_and(|&t| if inclusive { t <= to } else { t < to })
    };
    infos
        .filter_map(|j| {
            let (submit, start) = (j.submit_ns, j.start_ns);
            (start > 0
                && start >= submit
                && !between(&submits, submit, start, false)
                && !between(&others, submit, start, true))
            .then_some(start - submit)
        })
        .collect()
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
    // A run that wrote its results (a failed scheduler's) already says
    // when it ended, on its own clock (the twin's is virtual).
    m.end = m.end.or(Some(wall_ns() as f64 / 1e9));
    let _ = m.write(dir);
}

/// What a run's manifest says besides the plan: written with status
/// `running` when the run starts and again, complete, when it ends.
pub(crate) struct RunState<'a> {
    pub label: &'a str,
    pub factor: f64,
    pub load: f64,
    pub replica: Option<u32>,
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
    pub error: Option<&'a str>,
    pub scheduler: Option<&'a formats::scheduler::SchedulerReport>,
    pub events: Option<&'a results::Events>,
    pub latency: Option<&'a results::Latencies>,
    pub ties: Option<&'a results::Ties>,
}

/// Writes the run's events, when it has any: `events.csv` (each, and
/// what it did) and `events.txt` (the plain form, to give `--events`
/// again); returns their summary for the manifest.
fn write_events(
    plan: &Plan,
    dir: &Path,
    applied: &[crate::backend::Applied],
    jobs_hit: u64,
) -> Result<Option<results::Events>> {
    if plan.events.is_empty() && plan.events_file.is_none() && plan.failures.is_none() {
        return Ok(None);
    }
    let rows: Vec<results::EventRow> = plan
        .events
        .iter()
        .zip(applied)
        .enumerate()
        .map(|(k, (e, a))| {
            let (target, reason) = match &e.what {
                What::Down { nodes, reason } | What::Drain { nodes, reason } => {
                    (nodes.clone(), reason.clone())
                }
                What::Up { nodes } | What::Undrain { nodes } => (nodes.clone(), String::new()),
                What::Cancel(i) => (plan.slice.jobs[*i].trace_id.to_string(), String::new()),
            };
            results::EventRow {
                number: k as u64 + 1,
                trace_s: e.at_ns as f64 / 1e9,
                at: (a.at != 0).then(|| a.at as f64 / 1e9),
                kind: e.what.kind().to_string(),
                target,
                reason,
                jobs: a
                    .jobs
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(";"),
                error: a.error.clone().unwrap_or_default(),
                source: e.source.clone(),
            }
        })
        .collect();
    results::write_events(dir, &rows)
        .with_context(|| format!("cannot write events.csv in {}", dir.display()))?;
    let plain: String = plan
        .events
        .iter()
        .map(|e| e.plain(&plan.slice) + "\n")
        .collect();
    let path = dir.join(results::EVENTS_PLAIN);
    std::fs::write(&path, plain).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Some(results::Events {
        file: plan.events_file.as_ref().map(|p| p.display().to_string()),
        failures: plan.failures.clone(),
        planned: plan.events.len() as u64,
        applied: applied.iter().filter(|a| a.at != 0).count() as u64,
        refused: applied.iter().filter(|a| a.error.is_some()).count() as u64,
        jobs_hit,
    }))
}

/// Writes `dir/manifest.json`: the plan, and where the run stands.
/// Returns what it wrote.
pub(crate) fn write_manifest(plan: &Plan, dir: &Path, m: &RunState<'_>) -> Result<Manifest> {
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
        clock: "wall".into(),
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
    // As the cluster ran them: scaled, or the remote cluster's own.
    let ran = if plan.backend.runs_scaled_config() {
        schedule::Scale {
            factor: m.factor,
            speedup: plan.speedup,
        }
        .cluster(&plan.config)
    } else {
        plan.config.clone()
    };
    let manifest = results::Manifest {
        label: m.label.to_string(),
        status: m.status,
        error: m.error.map(str::to_string),
        clemu_version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        config: plan.config_path.display().to_string(),
        config_sha256: Some(plan.config.source_sha256.clone()),
        mode: plan.backend.mode().into(),
        backend: plan.backend.name().into(),
        controller: plan.backend.controller(),
        policy: plan.config.policy.clone(),
        preemption: plan.config.preemption.as_str().into(),
        time_slice_s: plan.config.time_slice.as_secs_f64(),
        time_slice_wall_s: Some(ran.time_slice.as_secs_f64()),
        scheduling: Some(scheduling(plan, &ran, m.factor)),
        gang_partitions: plan
            .config
            .partitions
            .iter()
            .zip(&ran.partitions)
            .filter(|(p, _)| p.oversubscribe > 1)
            .map(|(p, r)| results::GangPartition {
                name: p.name.clone(),
                oversubscribe: p.oversubscribe,
                time_slice_s: p.time_slice.as_secs_f64(),
                time_slice_wall_s: Some(r.time_slice.as_secs_f64()),
            })
            .collect(),
        prestart: (plan.backend.name() == "clemu"
            && !plan.backend.virtual_time()
            && plan.backend.controller() == "embedded")
            .then_some(plan.config.prestart),
        routes: plan.routes.iter().map(|r| r.text.clone()).collect(),
        cores: Some(m.cores),
        resources: resources(&plan.config),
        workload_gres: plan
            .config
            .trace_gres
            .iter()
            .map(|r| r.to_string())
            .collect(),
        nodes: plan.config.nodes.len() as u64,
        layout: layout(&plan.config),
        trace: results::Trace {
            path: plan.workload.display().to_string(),
            format: s.format,
            max_procs: s.max_procs,
            unix_start_time: s.unix_start_time,
        },
        slice: results::Slice {
            skip: plan.skip,
            jobs: plan.take,
            read: s.read,
            replayed: s.jobs.len() as u64,
            skipped_too_large: s.too_large,
            skipped_unknown: s.unknown,
            malformed_lines: s.warnings.len() as u64,
            cancelled: plan.cancelled.as_str().to_string(),
            trace_cancelled: s.trace_cancelled,
            skipped_cancelled: s.skipped_cancelled,
            failed: plan.failed.as_str().to_string(),
            trace_failed: s.trace_failed,
            skipped_failed: s.skipped_failed,
            feedback: plan.feedback,
            followers: plan.links.iter().filter(|l| l.is_some()).count() as u64,
            cores_per_proc: plan.cores_per_proc,
            first_submit: s
                .jobs
                .iter()
                .map(|j| j.submit_ns)
                .min()
                .map(|t| t as f64 / 1e9),
        },
        replica: m.replica.map(|index| results::Replica {
            index,
            of: plan.replicas,
            seed: plan
                .perturb
                .as_ref()
                .filter(|_| plan.backend.virtual_time())
                .map(|(p, _)| p.seed + u64::from(index) - 1),
            latencies_from: plan
                .perturb
                .as_ref()
                .filter(|_| plan.backend.virtual_time())
                .map(|(_, from)| from.clone()),
        }),
        factor: m.factor,
        load: m.load,
        speedup: plan.speedup,
        tau: Some(tau_ns(plan, m.factor) as f64 / 1e9),
        tau_trace: Some(plan.tau_ns as f64 / 1e9),
        schedule,
        start: Some(m.start_ns as f64 / 1e9),
        end: m.end_ns.map(|e| e as f64 / 1e9),
        counts: m
            .counts
            .map(|c| c.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
        lateness,
        latency: m.latency.cloned(),
        ties: m.ties.cloned(),
        scheduler: m.scheduler.cloned(),
        events: m.events.cloned(),
    };
    manifest
        .write(dir)
        .with_context(|| format!("cannot write the manifest in {}", dir.display()))?;
    Ok(manifest)
}

/// When the run's scheduler passed, in both clocks: `ran` is the config
/// as the cluster ran it.
fn scheduling(plan: &Plan, ran: &controller::config::Cluster, factor: f64) -> results::Scheduling {
    let trace_per_wall = plan.speedup / factor;
    let interval_wall_s = ran.schedule_interval.as_secs_f64();
    // As configured, when the cluster ran this run's config (a cluster
    // started elsewhere keeps its own, in wall-clock seconds).
    let interval_s = if plan.backend.runs_scaled_config() {
        plan.config.schedule_interval.as_secs_f64()
    } else {
        interval_wall_s * trace_per_wall
    };
    // The twin has no floor: it passes when the interval says.
    let floor_wall_s = if plan.backend.virtual_time() {
        0.0
    } else {
        ran.pass_floor.as_secs_f64()
    };
    results::Scheduling {
        interval_s,
        interval_wall_s,
        floor_wall_s,
        floor_s: floor_wall_s * trace_per_wall,
    }
}

/// The devices of each generic resource in the cluster.
fn resources(config: &controller::config::Cluster) -> std::collections::BTreeMap<String, u64> {
    config
        .kinds
        .names()
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let n = config.nodes.iter().map(|n| u64::from(n.devices[k])).sum();
            (name.clone(), n)
        })
        .collect()
}

/// The cluster's nodes in order, as runs of one core count, each folded
/// so that it expands back in the same order (a run is cut where folding
/// would reorder it: names out of order).
fn layout(config: &controller::config::Cluster) -> Vec<results::NodeGroup> {
    let mut groups: Vec<(u32, Vec<&str>)> = Vec::new();
    for n in &config.nodes {
        match groups.last_mut() {
            Some((cpus, names))
                if *cpus == n.cpus && names.last().is_some_and(|l| *l < n.name.as_str()) =>
            {
                names.push(&n.name)
            }
            _ => groups.push((n.cpus, vec![&n.name])),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (cpus, names) in groups {
        let folded = formats::nodeset::fold(names.iter().copied());
        let same = formats::nodeset::parse(&folded)
            .map(|set| formats::nodeset::expand(&set))
            .is_ok_and(|back| back.iter().map(String::as_str).eq(names.iter().copied()));
        if same {
            out.push(results::NodeGroup {
                nodes: folded,
                cpus,
            });
        } else {
            out.extend(names.iter().map(|n| results::NodeGroup {
                nodes: (*n).to_string(),
                cpus,
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::record::{encode, Flags, JobRecord, Status};

    #[test]
    fn an_arrival_counts_only_for_a_job_its_own_pass_started() {
        let job = |id, submit, start, end| {
            let mut j = crate::backend::info_of(
                &JobRecord {
                    id,
                    cores: 1,
                    node: "vn001".into(),
                    submit,
                    start,
                    end,
                    runtime: 1,
                    walltime: 1,
                    status: Status::Completed,
                    flags: Flags::default(),
                    suspensions: vec![],
                    devices: Default::default(),
                    program: None,
                },
                String::new(),
            );
            j.start_ns = start;
            j
        };
        let infos = [
            // Started 50 after its submission, nothing in between.
            job(1, 100, 150, 10_000),
            // Another's end (at 300) came before its start: that end's
            // pass started it.
            job(2, 200, 400, 900),
            job(3, 10, 20, 300),
            // Another job was submitted (at 600) before it started.
            job(4, 500, 700, 5_000),
            job(5, 600, 620, 6_000),
            // Never started.
            job(6, 800, 0, 0),
            // Started at a turn: another job was suspended at 1,000.
            job(7, 950, 1_000, 1_100),
            {
                let mut turned = job(8, 0, 5, 20_000);
                turned.suspensions = vec![(1_000, 1_500)];
                turned
            },
        ];
        let mut got = arrivals(infos.iter());
        got.sort_unstable();
        assert_eq!(got, vec![5, 10, 20, 50]);
    }

    #[test]
    fn the_layout_expands_back_to_the_clusters_node_order() {
        let text = r#"
[controller]
listen = "127.0.0.1:0"
[agents]
local = true
[[nodes]]
names = "b[1-2]"
cpus = 4
memory = "1G"
[[nodes]]
names = "a[1-3]"
cpus = 4
memory = "1G"
[[nodes]]
names = "a[4-5]"
cpus = 8
memory = "1G"
"#;
        let c = controller::config::Cluster::from_str(text, Path::new("t.toml")).unwrap();
        let groups: Vec<(String, u32)> =
            layout(&c).into_iter().map(|g| (g.nodes, g.cpus)).collect();
        // "a1" after "b2" would fold to a[1-3],b[1-2]: a group of its own.
        assert_eq!(
            groups,
            [("b[1-2]", 4), ("a[1-3]", 4), ("a[4-5]", 8)].map(|(n, c)| (n.to_string(), c))
        );
    }

    fn record(id: u64) -> JobRecord<'static> {
        JobRecord {
            id,
            cores: 1,
            node: "vn1".into(),
            submit: 0,
            start: 1,
            end: 2,
            runtime: 1,
            walltime: 0,
            status: Status::Completed,
            flags: Flags::default(),
            suspensions: Vec::new(),
            devices: Vec::new(),
            program: None,
        }
    }

    /// A run whose replay died: a manifest still `running`, some records.
    fn killed_run(dir: &Path) {
        std::fs::create_dir_all(dir.join("records")).unwrap();
        let start = wall_ns() as f64 / 1e9 - 90.0;
        std::fs::write(
            dir.join("manifest.json"),
            format!(r#"{{"status": "running", "pid": 4242, "start": {start}, "slice": {{"replayed": 200}}}}"#),
        )
        .unwrap();
        let mut frames = Vec::new();
        for id in 1..=79 {
            encode(&record(id), &mut frames).unwrap();
        }
        std::fs::write(dir.join("records/jobs.rec"), frames).unwrap();
    }

    #[test]
    fn an_unfinished_run_is_refused_then_replaced_whole_with_force() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("shrink-100");
        killed_run(&dir);
        let err = format!(
            "{:#}",
            claim_all(std::slice::from_ref(&dir), false).err().unwrap()
        );
        for needle in [
            "holds an unfinished run",
            "pid 4242",
            "79 record(s) of its 200 jobs",
            "--force",
        ] {
            assert!(err.contains(needle), "{needle:?} in {err}");
        }
        // Refused: nothing was touched.
        assert!(dir.join("records/jobs.rec").is_file());
        let taken = claim_all(std::slice::from_ref(&dir), true).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [LOCK_FILE], "only the lock is left");
        drop(taken);
        assert!(!dir.exists(), "an unused directory goes with the replay");
    }

    #[test]
    fn a_directory_being_written_is_refused_even_with_force() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("shrink-050");
        let _first = claim_all(std::slice::from_ref(&dir), false).unwrap();
        std::fs::write(dir.join("manifest.json"), "{}").unwrap();
        let err = format!(
            "{:#}",
            claim_all(std::slice::from_ref(&dir), true).err().unwrap()
        );
        assert!(
            err.contains("being written by another runworkload"),
            "{err}"
        );
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        assert!(dir.join("manifest.json").is_file(), "nothing removed");
    }

    #[test]
    fn a_sweep_is_refused_before_any_of_its_directories_is_touched() {
        let out = tempfile::tempdir().unwrap();
        let (a, b) = (out.path().join("shrink-100"), out.path().join("shrink-050"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("stray.rec"), b"x").unwrap();
        killed_run(&b);
        let err = format!(
            "{:#}",
            claim_all(&[a.clone(), b.clone()], false).err().unwrap()
        );
        assert!(err.contains("is not empty and holds no run"), "{err}");
        assert!(a.join("stray.rec").is_file() && b.join("manifest.json").is_file());
    }
}
