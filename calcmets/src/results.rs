//! A results directory as runworkload leaves it: whether the run finished,
//! how many jobs it was to run, and which records are its own. Metrics of
//! a run count only its own records, and say so when others are there or
//! when the run did not finish.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Result;
use formats::record::JobRecord;
use formats::results::{self, JobRow, Status};

use crate::runs::read_manifest;

/// The jobs `dir`'s `jobs.csv` lists, by the cluster's job id (jobs never
/// submitted, id 0, left out); empty when it has none yet.
/// Why `dir` is not a run's results directory, for an error: with the
/// runs inside it when it holds some (`runworkload --out` makes one
/// directory of runs, `shrink-100` and the like).
pub fn not_a_run(dir: &Path) -> String {
    let mut runs: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(results::MANIFEST).is_file())
        .map(|p| p.display().to_string())
        .collect();
    runs.sort();
    match runs.as_slice() {
        [] => format!(
            "{}: not a results directory (no {})",
            dir.display(),
            results::MANIFEST
        ),
        some => format!(
            "{}: not a results directory but a directory of runs: give one of them ({})",
            dir.display(),
            some.join(", ")
        ),
    }
}

pub fn jobs_by_id(dir: &Path) -> Result<HashMap<u64, JobRow>> {
    Ok(results::read_jobs(dir)?
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.job_id != 0)
        .map(|r| (r.job_id, r))
        .collect())
}

/// How far before its run's start a record may say its job started and
/// still be the run's own: room for the clocks of the hosts involved
/// (controller, agents, the replay's) to disagree a little.
pub const CLOCK_SLACK_NS: i64 = 1_000_000_000;

/// One results directory's account of itself.
#[derive(Debug, Clone)]
pub struct Book {
    pub dir: PathBuf,
    /// `running` while the replay writes the directory (and after it
    /// died), then `completed`, `interrupted` or `failed`.
    pub status: Status,
    /// Jobs the run was to replay (`slice.replayed`).
    pub expected: Option<u64>,
    /// The run's jobs by the cluster's id, with the submit instant their
    /// records carry when `jobs.csv` says (it is written when the run
    /// ends; `None` before).
    jobs: Option<HashMap<u64, Option<i64>>>,
    /// When the run began (`start`), CLOCK_REALTIME ns.
    start_ns: Option<i64>,
    /// Jobs `jobs.csv` says were cancelled before they started.
    cancelled_before_start: Vec<u64>,
    /// Jobs an event of the replay hit (`jobs.csv`'s `events`).
    hit: HashSet<u64>,
    /// Jobs replayed with no run time (the trace gives 0 s): a process
    /// takes a moment all the same, which is not a run time to measure a
    /// slowdown against, and the twin's and the trace's have none.
    no_run_time: HashSet<u64>,
    /// Only the jobs hit (`Some(true)`), or only the others.
    part: Option<bool>,
}

impl Book {
    pub fn open(dir: &Path) -> Result<Book> {
        let m = read_manifest(dir)?;
        let rows = results::read_jobs(dir)?;
        // Never placed: no nodes (a start instant of 0 is a real one in a
        // twin's run that starts at the epoch).
        let cancelled_before_start = rows
            .iter()
            .flatten()
            .filter(|r| {
                matches!(r.state.as_str(), "cancelled" | "interrupted")
                    && r.job_id != 0
                    && r.nodes.is_empty()
            })
            .map(|r| r.job_id)
            .collect();
        let hit = rows
            .iter()
            .flatten()
            .filter(|r| r.job_id != 0 && !r.events.is_empty())
            .map(|r| r.job_id)
            .collect();
        let no_run_time = rows
            .iter()
            .flatten()
            .filter(|r| r.job_id != 0 && r.runtime_trace_s.unwrap_or(r.runtime_wall_s) <= 0.0)
            .map(|r| r.job_id)
            .collect();
        let jobs = rows.map(|rows| {
            rows.into_iter()
                .filter(|r| r.job_id != 0)
                .map(|r| (r.job_id, r.submit_ns))
                .collect()
        });
        Ok(Book {
            dir: dir.to_path_buf(),
            status: m.status,
            // A manifest too old to say is of a run that replayed them all.
            expected: Some(m.slice.replayed).filter(|&n| n > 0),
            jobs,
            start_ns: m.start.map(|s| (s * 1e9).round() as i64),
            cancelled_before_start,
            hit,
            no_run_time,
            part: None,
        })
    }

    /// Keeps only the jobs an event hit (`true`), or only the others.
    pub fn select(&mut self, hit: bool) {
        self.part = Some(hit);
    }

    /// Whether job `id` is of the part kept ([`Book::select`]).
    pub fn selected(&self, id: u64) -> bool {
        self.part.is_none_or(|hit| self.hit.contains(&id) == hit)
    }

    /// Whether job `id` was replayed with no run time.
    pub fn has_no_run_time(&self, id: u64) -> bool {
        self.no_run_time.contains(&id)
    }

    /// Jobs of the run (of the part kept) cancelled before they started
    /// (they have no record).
    pub fn cancelled_before_start(&self) -> u64 {
        self.cancelled_before_start
            .iter()
            .filter(|&&id| self.selected(id))
            .count() as u64
    }

    /// Whether `rec` is a record of one of this run's jobs: one
    /// `jobs.csv` lists, with the very submit instant it lists (the
    /// cluster's, to the nanosecond). Without those (a run still running,
    /// or written before `jobs.csv` had them), a record that started once
    /// the run had begun. Records appended from another run (the same job
    /// ids, other instants) are not.
    pub fn owns(&self, rec: &JobRecord<'_>) -> bool {
        let started_in_run = || {
            self.start_ns
                .is_none_or(|s| rec.start >= s.saturating_sub(CLOCK_SLACK_NS))
        };
        match &self.jobs {
            None => started_in_run(),
            Some(jobs) => match jobs.get(&rec.id) {
                None => false,
                Some(Some(submit)) => rec.submit == *submit,
                Some(None) => started_in_run(),
            },
        }
    }

    pub fn finished(&self) -> bool {
        self.status == Status::Completed
    }

    /// A line for standard error when the run did not finish: what it is
    /// and how many of its jobs the metrics lack. `counted`: jobs that
    /// completed, the ones metrics include.
    pub fn unfinished_warning(&self, name: &str, counted: u64) -> Option<String> {
        if self.finished() {
            return None;
        }
        let why = match self.status {
            Status::Running => {
                "is unfinished (its runworkload stopped before the end, or still runs)".to_string()
            }
            Status::Interrupted => {
                "was interrupted (by a signal): its unfinished jobs were cancelled".to_string()
            }
            other => format!("did not finish (status {})", other.as_str()),
        };
        let lacks = match self.expected {
            Some(n) => format!(
                "{counted} of its {n} jobs completed, {} did not",
                n.saturating_sub(counted)
            ),
            None => format!("only the {counted} jobs that completed count"),
        };
        Some(format!(
            "{name} ({}) {why}: {lacks}; rerun it with runworkload --force",
            self.dir.display()
        ))
    }
}
