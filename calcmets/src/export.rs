//! `calcmets export --format batsim`: a results directory as Batsim writes
//! its own results, so that tools made for Batsim (evalys's Gantt charts
//! and metrics) read a clemu run.
//!
//! - `jobs.csv`: Batsim's columns in Batsim's order, one line per job of
//!   the run that was submitted, then clemu's own columns, which evalys
//!   ignores: the cluster's job id, its nodes, its suspensions and the time
//!   it spent suspended.
//! - `schedule.json`: Batsim's summary of the whole run, with Batsim's
//!   own definitions (its slowdown is not bounded, and its means divide by
//!   every job, rejected ones included).
//!
//! Times are seconds since the run's first submission: the trace's (× speedup
//! ÷ factor), in which a Batsim scheduler's `now` ran and in which calcmets
//! gives every figure, or with `--clock wall` the run's own. Resources are cores,
//! numbered node by node in the cluster's order (the manifest's
//! `layout`), as `[batsim] unit = "core"` numbers them. clemu knows the
//! nodes of a job and how many cores, not which cores: a job's cores are
//! the lowest ones free on its nodes at its start, taken node by node,
//! which is the placement itself under first fit. A job that finds too
//! few free (gang time-slicing and suspension let jobs share cores over
//! time) keeps the cores it shares, and the export says how many did: in
//! Batsim's single allocation per job, they overlap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::record::Status;

use crate::clock::ClockKind;
use formats::results::{self, Manifest};
use serde::Serialize;

use crate::inputs;
use crate::results::Book;

/// What `export` wrote, for the user.
#[derive(Debug)]
pub struct Exported {
    pub files: Vec<PathBuf>,
    pub jobs: usize,
    /// Jobs that completed (`COMPLETED_SUCCESSFULLY`).
    pub completed: u64,
    /// Jobs whose cores overlap another's while both ran.
    pub overlapping: usize,
}

/// The workload name of every job, as clemu's Batsim bridge names it.
const WORKLOAD: &str = "w0";

/// A job as exported; times in ns since the run's first submission.
#[derive(Debug, Clone)]
struct Job {
    trace_id: i64,
    clemu_id: u64,
    cores: u32,
    runtime_ns: i64,
    walltime_ns: i64,
    submit: i64,
    /// Start and end, if it ran (it has a record).
    ran: Option<(i64, i64)>,
    /// When the cluster started it and when it knew it over, if jobs.csv
    /// says: what its cores were held between, in the cluster's eyes. Jobs
    /// started by one pass have one start, and took their cores in the
    /// pass's order, which is queue order for the built-in policies (the
    /// export takes id order for it).
    held: Option<(i64, i64)>,
    status: Option<Status>,
    /// Its final state from jobs.csv, for jobs without a record.
    state: String,
    nodes: String,
    suspensions: Vec<(i64, i64)>,
    alloc: Vec<u32>,
}

/// One line of Batsim's `jobs.csv`, in its order; then clemu's columns.
#[derive(Serialize)]
struct Row<'a> {
    job_id: String,
    workload_name: &'a str,
    profile: String,
    submission_time: String,
    requested_number_of_resources: u32,
    requested_time: String,
    success: u8,
    final_state: &'a str,
    starting_time: String,
    execution_time: String,
    finish_time: String,
    waiting_time: String,
    turnaround_time: String,
    stretch: String,
    allocated_resources: String,
    consumed_energy: f64,
    metadata: &'a str,
    clemu_job_id: u64,
    nodes: &'a str,
    suspensions: usize,
    suspended_time: String,
}

/// Writes `out/jobs.csv` and `out/schedule.json` for the run in `dir`.
pub fn batsim(dir: &Path, out: &Path, clock: ClockKind) -> Result<Exported> {
    let name = dir.display().to_string();
    if !dir.join(results::MANIFEST).is_file() {
        bail!("{}", crate::results::not_a_run(dir));
    }
    let manifest = Manifest::read(dir)?;
    let (res_of, nb_res) = numbering(&manifest, &name)?;
    let scale = match clock {
        ClockKind::Trace => manifest.trace_per_wall().ok_or_else(|| {
            anyhow!("{name}: its manifest has no factor and speedup to undo (--clock wall)")
        })?,
        ClockKind::Wall => 1.0,
    };
    let mut jobs = load(dir, &name)?;
    if jobs.is_empty() {
        bail!("{name}: no job of the run was submitted");
    }
    let overlapping = allocate(&mut jobs, &res_of, &name)?;

    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let jobs_path = out.join("jobs.csv");
    let mut w = csv::Writer::from_path(&jobs_path)
        .with_context(|| format!("cannot write {}", jobs_path.display()))?;
    let secs = |ns: i64| format!("{:.6}", ns as f64 * scale / 1e9);
    let mut sum = Sums::default();
    for j in &jobs {
        let (final_state, success) = final_state(j);
        let ran = j.ran.map(|(s, e)| (s, e, e - s));
        let opt =
            |f: &dyn Fn(i64, i64, i64) -> String| ran.map_or(String::new(), |(s, e, x)| f(s, e, x));
        w.serialize(Row {
            job_id: j.trace_id.to_string(),
            workload_name: WORKLOAD,
            profile: format!("delay_{}", j.runtime_ns as f64 * scale / 1e9),
            submission_time: secs(j.submit),
            requested_number_of_resources: j.cores,
            requested_time: if j.walltime_ns > 0 {
                secs(j.walltime_ns)
            } else {
                "-1.000000".into()
            },
            success: u8::from(success),
            final_state,
            starting_time: opt(&|s, _, _| secs(s)),
            execution_time: opt(&|_, _, x| secs(x)),
            finish_time: opt(&|_, e, _| secs(e)),
            waiting_time: opt(&|s, _, _| secs(s - j.submit)),
            turnaround_time: opt(&|_, e, _| secs(e - j.submit)),
            stretch: opt(&|_, e, x| format!("{:.6}", stretch(e - j.submit, x))),
            allocated_resources: formats::intervals::format(&j.alloc),
            consumed_energy: -1.0,
            metadata: "",
            clemu_job_id: j.clemu_id,
            nodes: &j.nodes,
            suspensions: j.suspensions.len(),
            suspended_time: secs(j.suspensions.iter().map(|(a, b)| b - a).sum()),
        })
        .with_context(|| format!("cannot write {}", jobs_path.display()))?;
        sum.add(j, success);
    }
    w.flush()
        .with_context(|| format!("cannot write {}", jobs_path.display()))?;

    let schedule_path = out.join("schedule.json");
    let schedule = sum.schedule(nb_res, scale);
    std::fs::write(
        &schedule_path,
        serde_json::to_string_pretty(&schedule)? + "\n",
    )
    .with_context(|| format!("cannot write {}", schedule_path.display()))?;
    Ok(Exported {
        files: vec![jobs_path, schedule_path],
        jobs: jobs.len(),
        completed: sum.success,
        overlapping,
    })
}

/// Node name → (its first resource, its cores).
type Numbering = HashMap<String, (u32, u32)>;

/// How the cluster's cores are numbered; and the resources in all.
fn numbering(m: &Manifest, name: &str) -> Result<(Numbering, u64)> {
    if m.layout.is_empty() {
        bail!(
            "{name}: its manifest has no node layout (the run was made by an older \
             runworkload): replay it again to export it"
        );
    }
    let mut out = HashMap::new();
    let mut next = 0u64;
    for g in &m.layout {
        let set = formats::nodeset::parse(&g.nodes)
            .map_err(|e| anyhow!("{name}: manifest layout {:?}: {e}", g.nodes))?;
        for node in formats::nodeset::expand(&set) {
            let first = u32::try_from(next)
                .map_err(|_| anyhow!("{name}: more cores than Batsim ids can number"))?;
            out.insert(node, (first, g.cpus));
            next += u64::from(g.cpus);
        }
    }
    Ok((out, next))
}

/// The run's submitted jobs in jobs.csv's order, with their records.
fn load(dir: &Path, name: &str) -> Result<Vec<Job>> {
    let rows = results::read_jobs(dir)?.ok_or_else(|| {
        anyhow!("{name}: no jobs.csv yet (the run is unfinished): nothing to export")
    })?;
    let book = Book::open(dir)?;
    let mut recs: HashMap<u64, formats::record::JobRecord<'static>> = HashMap::new();
    let sources = inputs::expand(&[dir.to_path_buf()])?;
    inputs::for_each_record(&sources, |r| {
        if book.owns(r) {
            recs.insert(r.id, r.clone().into_owned());
        }
        Ok(())
    })?;
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows.iter().filter(|r| r.job_id != 0) {
        let rec = recs.remove(&row.job_id);
        let submit = row
            .submit_ns
            .filter(|&s| s != 0)
            .or(rec.as_ref().map(|r| r.submit))
            .unwrap_or((row.actual_submit * 1e9).round() as i64);
        jobs.push(Job {
            trace_id: row.trace_id,
            clemu_id: row.job_id,
            cores: row.cores,
            runtime_ns: (row.runtime_wall_s * 1e9).round() as i64,
            walltime_ns: (row.walltime_wall_s * 1e9).round() as i64,
            submit,
            ran: rec.as_ref().map(|r| (r.start, r.end)),
            held: row
                .start_ns
                .zip(row.end_ns)
                .filter(|&(s, e)| s != 0 && e != 0),
            status: rec.as_ref().map(|r| r.status),
            state: row.state.clone(),
            // (A jobs.csv without nodes: the record's, its first.)
            nodes: match (&rec, row.nodes.is_empty()) {
                (Some(r), true) => r.node.to_string(),
                _ => row.nodes.clone(),
            },
            suspensions: rec.map_or_else(Vec::new, |r| {
                r.suspensions
                    .iter()
                    .map(|s| (s.suspend, s.resume))
                    .collect()
            }),
            alloc: Vec::new(),
        });
    }
    let t0 = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    for j in &mut jobs {
        j.submit -= t0;
        j.ran = j.ran.map(|(s, e)| (s - t0, e - t0));
        j.held = j.held.map(|(s, e)| (s - t0, e - t0));
        for s in &mut j.suspensions {
            *s = (s.0 - t0, s.1 - t0);
        }
    }
    Ok(jobs)
}

/// Gives every job that ran its cores (see the module's overview);
/// returns how many had to share some.
fn allocate(jobs: &mut [Job], res_of: &Numbering, name: &str) -> Result<usize> {
    let total: u32 = res_of.values().map(|&(_, c)| c).sum();
    // Jobs holding each resource now.
    let mut holders = vec![0u16; total as usize];
    let mut order: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].ran.is_some()).collect();
    // In the cluster's own time: a process starts a moment after the
    // cluster placed it (and jobs of one pass not in their order), and
    // ends a moment before the cluster frees its cores; in between,
    // another job may have been placed as if it still held them.
    let span = |j: &Job| j.held.or(j.ran).expect("filtered");
    order.sort_by_key(|&i| (span(&jobs[i]).0, jobs[i].clemu_id));
    let mut ends: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut overlapping = 0;
    for i in order {
        let (start, end) = span(&jobs[i]);
        // Jobs that ended by now give their cores back first.
        while let Some(&Reverse((e, k))) = ends.peek() {
            if e > start {
                break;
            }
            ends.pop();
            for &r in &jobs[k].alloc {
                holders[r as usize] -= 1;
            }
        }
        let id = jobs[i].clemu_id;
        let set = formats::nodeset::parse(&jobs[i].nodes)
            .map_err(|e| anyhow!("{name}: job {id}: its nodes {:?}: {e}", jobs[i].nodes))?;
        let nodes: Vec<(u32, u32)> = formats::nodeset::expand(&set)
            .iter()
            .map(|n| {
                res_of
                    .get(n)
                    .copied()
                    .ok_or_else(|| anyhow!("{name}: job {id} ran on {n}, which the layout lacks"))
            })
            .collect::<Result<_>>()?;
        if nodes.is_empty() {
            bail!("{name}: job {id} ran, and neither jobs.csv nor its record says where");
        }
        let want = jobs[i].cores as usize;
        let mut alloc: Vec<u32> = Vec::with_capacity(want);
        let free_on = |held: &[u16], (first, cpus): (u32, u32)| {
            (first..first + cpus)
                .filter(|&r| held[r as usize] == 0)
                .collect::<Vec<_>>()
        };
        for &n in &nodes {
            let free = free_on(&holders, n);
            alloc.extend(free.into_iter().take(want - alloc.len()));
            if alloc.len() == want {
                break;
            }
        }
        if alloc.len() < want {
            // Shared cores: the lowest of its nodes' it does not hold yet.
            overlapping += 1;
            for &(first, cpus) in &nodes {
                for r in first..first + cpus {
                    if alloc.len() < want && !alloc.contains(&r) {
                        alloc.push(r);
                    }
                }
            }
        }
        alloc.sort_unstable();
        for &r in &alloc {
            holders[r as usize] += 1;
        }
        jobs[i].alloc = alloc;
        ends.push(Reverse((end, i)));
    }
    Ok(overlapping)
}

/// Batsim's final state of a job, and whether it succeeded.
fn final_state(j: &Job) -> (&'static str, bool) {
    match j.status {
        Some(Status::Completed) => ("COMPLETED_SUCCESSFULLY", true),
        Some(Status::Timeout) => ("COMPLETED_WALLTIME_REACHED", false),
        Some(Status::Cancelled) => ("COMPLETED_KILLED", false),
        Some(Status::Failed) => ("COMPLETED_FAILED", false),
        // No record: it never ran (cancelled, rejected by the scheduler,
        // or never started).
        None if never_ran(j) => ("REJECTED", false),
        // Ran, but its record was lost with its host.
        None => ("COMPLETED_FAILED", false),
    }
}

fn never_ran(j: &Job) -> bool {
    j.ran.is_none() && matches!(j.state.as_str(), "cancelled" | "interrupted" | "pending")
}

fn stretch(turnaround: i64, execution: i64) -> f64 {
    if execution > 0 {
        turnaround as f64 / execution as f64
    } else {
        1.0
    }
}

/// What `schedule.json` adds up, in ns.
#[derive(Default)]
struct Sums {
    jobs: u64,
    finished: u64,
    success: u64,
    rejected: u64,
    wait: i128,
    turnaround: i128,
    slowdown: f64,
    max_wait: i64,
    max_turnaround: i64,
    max_slowdown: f64,
    first_submit: Option<i64>,
    last_finish: i64,
    /// Core-ns of execution, suspensions left out.
    computing: i128,
}

impl Sums {
    fn add(&mut self, j: &Job, success: bool) {
        self.jobs += 1;
        self.first_submit = Some(self.first_submit.map_or(j.submit, |f| f.min(j.submit)));
        if never_ran(j) {
            self.rejected += 1;
            return;
        }
        self.finished += 1;
        self.success += u64::from(success);
        // (A job that ran without a record has no times to count.)
        let Some((start, end)) = j.ran else {
            return;
        };
        let wait = start - j.submit;
        let turnaround = end - j.submit;
        let sd = stretch(turnaround, end - start);
        self.wait += i128::from(wait);
        self.turnaround += i128::from(turnaround);
        self.slowdown += sd;
        self.max_wait = self.max_wait.max(wait);
        self.max_turnaround = self.max_turnaround.max(turnaround);
        self.max_slowdown = self.max_slowdown.max(sd);
        self.last_finish = self.last_finish.max(end);
        let suspended: i64 = j.suspensions.iter().map(|(a, b)| b - a).sum();
        self.computing += i128::from(j.cores) * i128::from(end - start - suspended);
    }

    fn schedule(&self, nb_res: u64, scale: f64) -> serde_json::Value {
        let s = |ns: f64| ns * scale / 1e9;
        let n = self.jobs.max(1) as f64;
        let makespan = (self.last_finish - self.first_submit.unwrap_or(0)) as f64;
        let computing = self.computing as f64;
        let idle = (nb_res as f64 * makespan - computing).max(0.0);
        serde_json::json!({
            "batsim_version": format!("clemu {}", env!("CARGO_PKG_VERSION")),
            "consumed_joules": 0.0,
            "makespan": s(makespan),
            "max_slowdown": self.max_slowdown,
            "max_turnaround_time": s(self.max_turnaround as f64),
            "max_waiting_time": s(self.max_wait as f64),
            "mean_slowdown": self.slowdown / n,
            "mean_turnaround_time": s(self.turnaround as f64) / n,
            "mean_waiting_time": s(self.wait as f64) / n,
            "nb_computing_machines": nb_res,
            "nb_grouped_switches": 0,
            "nb_jobs": self.jobs,
            "nb_jobs_finished": self.finished,
            "nb_jobs_killed": self.finished - self.success,
            "nb_jobs_rejected": self.rejected,
            "nb_jobs_success": self.success,
            "nb_machine_switches": 0,
            "success_rate": self.success as f64 / n,
            "time_computing": s(computing),
            "time_idle": s(idle),
            "time_sleeping": 0.0,
            "time_switching_off": 0.0,
            "time_switching_on": 0.0,
            "time_unavailable": 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, cores: u32, nodes: &str, start: i64, end: i64) -> Job {
        Job {
            trace_id: id as i64,
            clemu_id: id,
            cores,
            runtime_ns: end - start,
            walltime_ns: 0,
            submit: 0,
            ran: Some((start, end)),
            held: None,
            status: Some(Status::Completed),
            state: "completed".into(),
            nodes: nodes.into(),
            suspensions: Vec::new(),
            alloc: Vec::new(),
        }
    }

    fn layout() -> Numbering {
        // n1 and n2 of 4 cores: resources 0-3 and 4-7.
        [("n1".to_string(), (0, 4)), ("n2".to_string(), (4, 4))]
            .into_iter()
            .collect()
    }

    #[test]
    fn cores_are_the_lowest_free_on_the_jobs_nodes_at_its_start() {
        let mut jobs = vec![
            job(1, 3, "n1", 0, 10),
            // Starts as 1 ends: gets 1's cores back.
            job(2, 2, "n1", 10, 20),
            // n1's last free core, then n2's.
            job(3, 4, "n[1-2]", 5, 30),
        ];
        assert_eq!(allocate(&mut jobs, &layout(), "t").unwrap(), 0);
        let sets: Vec<String> = jobs
            .iter()
            .map(|j| formats::intervals::format(&j.alloc))
            .collect();
        assert_eq!(sets, ["0-2", "0-1", "3-6"]);
        // A job that finds one free core of the two it holds (a time-sliced
        // one, say) shares the lowest other, and is counted.
        jobs.push(job(4, 2, "n2", 6, 12));
        assert_eq!(allocate(&mut jobs, &layout(), "t").unwrap(), 1);
        assert_eq!(formats::intervals::format(&jobs[3].alloc), "4 7");
    }

    #[test]
    fn a_job_on_an_unknown_node_is_an_error_naming_it() {
        let mut jobs = vec![job(1, 1, "x9", 0, 1)];
        let e = allocate(&mut jobs, &layout(), "run")
            .unwrap_err()
            .to_string();
        assert!(e.contains("job 1 ran on x9"), "{e}");
    }
}
