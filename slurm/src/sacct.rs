//! `sacct`: the accounting of jobs, finished or not, from what the
//! controller remembers of them and, for CPU time and memory, from their
//! records. A batch script's job has its `.batch` step under it, as on
//! Slurm; `-X` shows the allocations alone.

use std::collections::HashMap;

use anyhow::{bail, Result};
use clap::Parser;
use client::{Request, Response};
use formats::record::JobRecord;
use formats::wire::{JobInfo, JobState, StepInfo};

use crate::accounts;
use crate::cluster::Cluster;
use crate::text;

const DEFAULT_FIELDS: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";
const BRIEF_FIELDS: &str = "jobid,state,exitcode";

#[derive(Debug, Parser)]
#[command(name = "sacct", infer_long_args = true, disable_version_flag = true)]
pub struct Args {
    #[arg(short = 'j', long = "jobs")]
    jobs: Option<String>,
    #[arg(short = 'X', long)]
    allocations: bool,
    #[arg(short = 'p', long)]
    parsable: bool,
    #[arg(short = 'P', long)]
    parsable2: bool,
    #[arg(long)]
    delimiter: Option<String>,
    #[arg(short = 'n', long)]
    noheader: bool,
    #[arg(short = 'o', long)]
    format: Option<String>,
    #[arg(short = 'b', long)]
    brief: bool,
    #[arg(short = 'S', long)]
    starttime: Option<String>,
    #[arg(short = 'E', long)]
    endtime: Option<String>,
    #[arg(long)]
    name: Option<String>,
    #[arg(short = 's', long)]
    state: Option<String>,
    #[arg(short = 'u', long)]
    user: Option<String>,
    #[arg(short = 'r', long)]
    partition: Option<String>,
    #[arg(long)]
    units: Option<String>,
    #[arg(long)]
    json: bool,
    /// Accepted: clemu has one cluster and shows every user's jobs.
    #[arg(short = 'a', long)]
    allusers: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    #[arg(long)]
    noconvert: bool,
}

/// A field: its name as printed and its width (negative: left-justified,
/// as JobID).
struct Field {
    name: &'static str,
    width: i32,
}

/// sacct's field table: Slurm 22.05's, in its order (a name matches the
/// first field it begins, as Slurm's does), with its default widths.
/// Fields clemu has nothing for (energy, disk, a node's or task's share
/// of usage) print empty, as Slurm's do where it gathers none.
const FIELDS: &[(&str, i32)] = &[
    ("Account", 10),
    ("AdminComment", 15),
    ("AllocCPUS", 10),
    ("AllocNodes", 10),
    ("AllocTRES", 10),
    ("AssocID", 7),
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 14),
    ("AveDiskWrite", 14),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("BlockID", 16),
    ("Cluster", 10),
    ("Comment", 14),
    ("Constraints", 19),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("Container", 19),
    ("CPUTime", 10),
    ("CPUTimeRAW", 10),
    ("DBIndex", 10),
    ("DerivedExitCode", 15),
    ("Elapsed", 10),
    ("ElapsedRaw", 10),
    ("Eligible", 19),
    ("End", 19),
    ("ExitCode", 8),
    ("Flags", 19),
    ("GID", 6),
    ("Group", 9),
    ("JobID", -12),
    ("JobIDRaw", -12),
    ("JobName", 10),
    ("Layout", 9),
    ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15),
    ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("McsLabel", 12),
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("NCPUS", 10),
    ("NNodes", 8),
    ("NodeList", 15),
    ("NTasks", 8),
    ("Partition", 10),
    ("Priority", 10),
    ("QOS", 10),
    ("QOSRAW", 6),
    ("Reason", 22),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqGov", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUS", 8),
    ("ReqMem", 10),
    ("ReqNodes", 8),
    ("ReqTRES", 10),
    ("Reservation", 20),
    ("ReservationId", 8),
    ("Reserved", 10),
    ("ResvCPU", 10),
    ("ResvCPURAW", 10),
    ("Start", 19),
    ("State", 10),
    ("Submit", 19),
    ("SubmitLine", 20),
    ("Suspended", 10),
    ("SystemComment", 15),
    ("SystemCPU", 10),
    ("Timelimit", 10),
    ("TimelimitRaw", 10),
    ("TotalCPU", 10),
    ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14),
    ("TRESUsageInMaxNode", 18),
    ("TRESUsageInMaxTask", 18),
    ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 18),
    ("TRESUsageInMinTask", 18),
    ("TRESUsageInTot", 14),
    ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15),
    ("TRESUsageOutMaxNode", 19),
    ("TRESUsageOutMaxTask", 19),
    ("TRESUsageOutMin", 15),
    ("TRESUsageOutMinNode", 19),
    ("TRESUsageOutMinTask", 19),
    ("TRESUsageOutTot", 15),
    ("UID", 6),
    ("User", 9),
    ("UserCPU", 10),
    ("WCKey", 10),
    ("WCKeyID", 10),
    ("WorkDir", 20),
];

/// `name[%WIDTH]`, comma-separated.
fn parse_fields(list: &str) -> Result<Vec<Field>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, Some(w.parse::<i32>().unwrap_or(0))),
            None => (item, None),
        };
        // As Slurm: the first field, in the table's order, that the name
        // given begins (`exit` is ExitCode).
        let given = name.to_ascii_lowercase();
        let Some(&(name, default)) = FIELDS
            .iter()
            .find(|(n, _)| !given.is_empty() && n.to_ascii_lowercase().starts_with(&given))
        else {
            bail!("Invalid field requested: \"{name}\"");
        };
        out.push(Field {
            name,
            width: width.unwrap_or(default),
        });
    }
    Ok(out)
}

/// One line: the job's allocation, its batch step (`step` "batch"), or
/// one of its srun steps (`step` its number, `srun` what it did).
struct Row<'a> {
    job: &'a JobInfo,
    step: Option<String>,
    srun: Option<&'a StepInfo>,
    record: Option<&'a JobRecord<'static>>,
    /// The tasks of a pending array this row stands for, folded (`1-3`):
    /// Slurm keeps one record for them until they start.
    tasks: Option<String>,
}

struct Ctx<'a> {
    me: &'a str,
    now: i64,
    /// `--units`, as [`text::convert_num_unit`] takes it.
    units: Option<usize>,
    noconvert: bool,
    config: &'a controller::config::Cluster,
}

/// A job Slurm has not made eligible: pending, held or waiting for other
/// jobs or for its begin; or over (cancelled) before it ever was.
fn not_yet_eligible(j: &JobInfo) -> bool {
    // A job cancelled while it waited keeps the reason it waited for.
    let waits = text::held(j)
        || j.reason.starts_with("Dependency")
        || j.reason == "BeginTime"
        || j.program.as_ref().is_some_and(|p| p.eligible_ns.is_none());
    match j.state {
        JobState::Pending => waits,
        s => s.is_final() && j.start_ns == 0 && waits,
    }
}

/// Step `s`'s nodes, how many, and its cores on them: as srun laid it
/// out, or, for a step that says none (srun found no node in its job's
/// environment), the job's first node and its cores there.
fn step_nodes(s: &StepInfo, j: &JobInfo) -> (String, usize, u32) {
    match formats::nodeset::parse(&s.nodes) {
        Ok(set) if !s.nodes.is_empty() && s.cpus > 0 => {
            (s.nodes.clone(), formats::nodeset::count(&set), s.cpus)
        }
        _ => (text::first_node(&j.nodes), 1, first_node_cpus(j)),
    }
}

/// The cores job `j` holds on its batch host (where its batch step
/// runs): all of them there, as a Slurm step gets.
fn first_node_cpus(j: &JobInfo) -> u32 {
    j.program
        .as_ref()
        .and_then(|p| p.node_cpus.first().copied())
        .unwrap_or(j.cores)
}

/// A state as sacct writes it: `CANCELLED by UID` for a cancelled job.
fn state(j: &JobInfo, step: bool, me: &str) -> String {
    match j.state {
        // A job told to end: its batch step ends as its script did, as
        // Slurm says it: cancelled by the signal, or, a script that
        // caught it and exited, failed or completed by its status.
        JobState::Cancelled | JobState::Timeout | JobState::Preempted if step => match j.exit {
            (_, signal) if signal != 0 => "CANCELLED".into(),
            (0, _) => "COMPLETED".into(),
            _ => "FAILED".into(),
        },
        // A script killed by a signal: its job failed, its step was
        // cancelled.
        JobState::Failed if step && j.exit.1 != 0 => "CANCELLED".into(),
        JobState::Cancelled if !step => {
            format!(
                "CANCELLED by {}",
                text::uid_of(&text::owner(j, me)).unwrap_or(0)
            )
        }
        s => text::state_long(s).into(),
    }
}

/// Seconds job `j` spent suspended by `now` (Unix seconds).
/// Whether Slurm's database has no limit of the job's own yet, and sacct
/// says `Partition_Limit`: it asked none and has not started, or (a
/// requeued job) it has none at all.
fn partition_limit(j: &JobInfo, started: bool) -> bool {
    !started && (j.walltime_ns == 0 || j.program.as_ref().is_some_and(|p| p.partition_limit))
}

fn suspended(j: &JobInfo, now: i64) -> i64 {
    j.suspensions
        .iter()
        .map(|&(s, e)| {
            let e = if e > 0 { text::secs(e) } else { now };
            (e - text::secs(s)).max(0)
        })
        .sum()
}

/// Seconds a job ran, its suspensions left out.
fn elapsed(j: &JobInfo, now: i64) -> i64 {
    text::time_used(j, now)
}

/// sacct's `_elapsed_time`: `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS.mmm` under
/// an hour when there are milliseconds, `00:MM:SS` when there are none.
fn cpu_time(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let ms = (ns / 1_000_000) % 1000;
    let (d, h, m, sec) = (s / 86400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{sec:02}")
    } else if ms > 0 {
        format!("{m:02}:{sec:02}.{ms:03}")
    } else {
        format!("00:{m:02}:{sec:02}")
    }
}

fn value(name: &str, r: &Row<'_>, c: &Ctx<'_>) -> String {
    let j = r.job;
    let mem = |mb: u64| text::convert_num_unit(mb as f64, text::MEGA, c.units, c.noconvert);
    let started = j.start_ns > 0;
    // The batch step runs on the job's first node.
    let nodes = if j.nodes.is_empty() || r.step.is_some() {
        1
    } else {
        text::node_count(j)
    };
    let date = |ns: i64| {
        if ns > 0 {
            text::date_wide(text::secs(ns))
        } else {
            "Unknown".into()
        }
    };
    let prog = r.record.and_then(|r| r.program);
    if let Some(v) = r.srun.and_then(|s| srun_value(name, s, j, c)) {
        return v;
    }
    match name {
        "JobID" | "JobIDRaw" => {
            let base = if name == "JobID" {
                text::job_id(j)
            } else {
                j.id.to_string()
            };
            match (&r.step, &r.tasks, j.array) {
                (Some(s), _, _) => format!("{base}.{s}"),
                (None, Some(t), Some(a)) if name == "JobID" => format!("{}_[{t}]", a.job),
                _ => base,
            }
        }
        "JobName" => r.step.clone().unwrap_or_else(|| j.name.clone()),
        "Partition" => {
            if r.step.is_some() {
                String::new()
            } else {
                j.partition.clone()
            }
        }
        "Account" => accounts::account_of(&text::owner(j, c.me))
            .unwrap_or_default()
            .to_string(),
        "QOS" => accounts::account_of(&text::owner(j, c.me))
            .map_or("", |_| accounts::QOS)
            .to_string(),
        "Cluster" => "clemu".into(),
        // Fields of the job's line alone, valued as Slurm's database
        // values them for such a job.
        "DerivedExitCode" | "Reason" | "Priority" | "GID" | "QOSRAW" | "TimelimitRaw"
        | "Reserved" | "ResvCPU" | "ResvCPURAW" | "WCKeyID"
            if r.step.is_some() =>
        {
            String::new()
        }
        // The highest of its srun steps' ends, as wait statuses compare
        // (code, then signal): 0:0 for a job that ran none, whatever its
        // script did, as on Slurm.
        "DerivedExitCode" => {
            let (code, signal) = j
                .program
                .iter()
                .flat_map(|p| &p.steps)
                .map(|s| s.exit)
                .max()
                .unwrap_or((0, 0));
            format!("{code}:{signal}")
        }
        "Reason" if j.state == JobState::Pending => j.reason.clone(),
        "Reason" => "None".into(),
        "Priority" => crate::squeue::priority(j).to_string(),
        "GID" => text::gid_of(&text::owner(j, c.me)).map_or(String::new(), |g| g.to_string()),
        "QOSRAW" => accounts::account_of(&text::owner(j, c.me))
            .map_or("", |_| "1")
            .to_string(),
        "TimelimitRaw" if partition_limit(j, started) => "Partition_Limit".into(),
        "TimelimitRaw" => match j.walltime_ns {
            0 => "UNLIMITED".into(),
            ns => ns.div_ceil(60_000_000_000).to_string(),
        },
        "Reserved" | "ResvCPU" => "00:00:00".into(),
        "ResvCPURAW" | "WCKeyID" => "0".into(),
        // What a step has, and the job's line has not.
        "ReqCPUFreq" | "ReqCPUFreqGov" | "ReqCPUFreqMax" | "ReqCPUFreqMin" if r.step.is_none() => {
            "Unknown".into()
        }
        "ReqCPUFreq" | "ReqCPUFreqGov" | "ReqCPUFreqMax" | "ReqCPUFreqMin" | "AveCPUFreq"
        | "ConsumedEnergy" | "ConsumedEnergyRaw"
            if r.step.is_some() =>
        {
            "0".into()
        }
        "Layout" if r.step.is_some() => "Unknown".into(),
        "AllocCPUS" | "NCPUS" | "ReqCPUS" if r.step.is_some() => first_node_cpus(j).to_string(),
        "AllocCPUS" | "NCPUS" | "ReqCPUS" => j.cores.to_string(),
        "AllocNodes" | "NNodes" => {
            if started || name == "NNodes" {
                nodes.to_string()
            } else {
                "0".into()
            }
        }
        "ReqNodes" => nodes.to_string(),
        "NTasks" => match r.step {
            Some(_) => "1".into(),
            None => String::new(),
        },
        // A step's own: its cores on its one node, as an srun step's
        // (no `mem=`, as there).
        "AllocTRES" if started && r.step.is_some() => {
            format!("cpu={},node=1", first_node_cpus(j))
        }
        "AllocTRES" if started => text::tres(j, nodes, text::mem_asked(j), true, mem),
        "AllocTRES" => String::new(),
        // Asked: the job's alone, its nodes the least it can run on, and
        // without memory asked its nodes' (as ReqMem).
        "ReqTRES" if r.step.is_none() => text::tres(
            j,
            crate::squeue::nodes_of(j, c.config),
            Some(text::mem_asked(j).unwrap_or_else(|| text::nodes_memory(j, c.config))),
            true,
            mem,
        ),
        "ReqTRES" => String::new(),
        "State" => state(j, r.step.is_some(), c.me),
        "ExitCode" => match (&r.step, prog) {
            // The batch step's return code is Slurm's SIG_OOM too.
            (Some(_), Some(_)) if j.state == JobState::OutOfMemory => "0:125".into(),
            (Some(_), Some(p)) => p.exit_code(),
            // Slurm's database has the end of a job told to end before
            // its script's: the job says 0:0, its batch step the signal
            // (scontrol shows the step's).
            (None, _)
                if matches!(
                    j.state,
                    JobState::Cancelled | JobState::Preempted | JobState::Timeout
                ) =>
            {
                "0:0".into()
            }
            _ => format!("{}:{}", j.exit.0, j.exit.1),
        },
        "Elapsed" => text::long_duration(elapsed(j, c.now)),
        "ElapsedRaw" => elapsed(j, c.now).to_string(),
        "CPUTime" => text::long_duration(elapsed(j, c.now) * i64::from(j.cores)),
        "CPUTimeRAW" => (elapsed(j, c.now) * i64::from(j.cores)).to_string(),
        "Suspended" => text::long_duration(suspended(j, c.now)),
        // Over without a start: none, as Slurm's database says it.
        // Over before it started (cancelled while it waited): its end,
        // as Slurm's database has it.
        "Start" if j.start_ns == 0 && j.state.is_final() => date(j.end_ns),
        "Start" => date(j.start_ns),
        "End" => date(j.end_ns),
        "Submit" => date(j.submit_ns),
        // Held, or waiting for other jobs: not eligible yet.
        "Eligible" => match j.program.as_ref().map(|p| p.eligible_ns) {
            // Held, or cancelled while held.
            _ if j.reason.starts_with("JobHeld")
                && (j.state == JobState::Pending || j.start_ns == 0 && j.state.is_final()) =>
            {
                "Unknown".into()
            }
            Some(None) => "Unknown".into(),
            Some(Some(t)) => date(t),
            None => date(j.submit_ns),
        },
        "NodeList" => {
            if j.nodes.is_empty() {
                "None assigned".into()
            } else if r.step.is_some() {
                text::first_node(&j.nodes)
            } else {
                j.nodes.clone()
            }
        }
        "TotalCPU" => cpu_time(prog.map_or(0, |p| p.cpu_ns)),
        "MaxRSS" => match (&r.step, prog) {
            (Some(_), Some(p)) => {
                text::convert_num_unit(p.max_rss_kib as f64, text::KILO, c.units, c.noconvert)
            }
            _ => String::new(),
        },
        "ReqMem" if r.step.is_some() => String::new(),
        "ReqMem" => mem(text::mem_asked(j).unwrap_or_else(|| text::nodes_memory(j, c.config))),
        // The job's line alone: Slurm's database keeps the comment with
        // the job, and its steps print none.
        "Comment" if r.step.is_some() => String::new(),
        "Comment" => j
            .program
            .as_ref()
            .map(|p| p.comment.clone())
            .unwrap_or_default(),
        "Timelimit" => {
            if r.step.is_some() {
                String::new()
            } else if partition_limit(j, started) {
                "Partition_Limit".into()
            } else {
                text::long_limit(j.walltime_ns)
            }
        }
        "User" => {
            if r.step.is_some() {
                String::new()
            } else {
                text::owner(j, c.me)
            }
        }
        "UID" => text::uid_of(&text::owner(j, c.me)).map_or(String::new(), |u| u.to_string()),
        "Group" if r.step.is_none() => text::group_of(&text::owner(j, c.me)),
        "Group" => String::new(),
        "WorkDir" => j
            .program
            .as_ref()
            .map(|p| p.workdir.clone())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// What an srun step's line shows where it differs from its job's
/// batch step: its own name, times, tasks, end and usage.
fn srun_value(name: &str, s: &StepInfo, j: &JobInfo, c: &Ctx<'_>) -> Option<String> {
    let secs = |ns: i64| text::secs(ns);
    // A step its job's end cut short ended with the job.
    let end_ns = if s.end_ns > 0 { s.end_ns } else { j.end_ns };
    let elapsed = if end_ns > 0 {
        (secs(end_ns) - secs(s.start_ns)).max(0)
    } else {
        (c.now - secs(s.start_ns)).max(0)
    };
    let (nodes, count, cpus) = step_nodes(s, j);
    Some(match name {
        "JobName" => s.name.clone(),
        "State" => match (s.end_ns, s.exit) {
            // By whom Slurm's database says: here, the job's owner.
            (_, _) if s.cancelled && s.end_ns > 0 => format!(
                "CANCELLED by {}",
                text::uid_of(&text::owner(j, c.me)).unwrap_or(0)
            ),
            (0, _) if j.end_ns == 0 => "RUNNING".into(),
            (0, _) => "CANCELLED".into(),
            (_, (0, 0)) => "COMPLETED".into(),
            (_, (0, _)) => "CANCELLED".into(),
            _ => "FAILED".into(),
        },
        "ExitCode" => format!("{}:{}", s.exit.0, s.exit.1),
        "Start" | "Submit" | "Eligible" => text::date_wide(secs(s.start_ns)),
        "End" => {
            if end_ns > 0 {
                text::date_wide(secs(end_ns))
            } else {
                "Unknown".into()
            }
        }
        "Elapsed" => text::long_duration(elapsed),
        "ElapsedRaw" => elapsed.to_string(),
        "CPUTime" => text::long_duration(elapsed * i64::from(cpus)),
        "CPUTimeRAW" => (elapsed * i64::from(cpus)).to_string(),
        "NTasks" => s.ntasks.to_string(),
        "AllocCPUS" | "NCPUS" | "ReqCPUS" => cpus.to_string(),
        "AllocNodes" | "NNodes" | "ReqNodes" => count.to_string(),
        "NodeList" => nodes,
        "AllocTRES" => format!("cpu={cpus},node={count}"),
        "TotalCPU" => cpu_time(s.cpu_ns),
        "MaxRSS" => text::convert_num_unit(s.max_rss_kib as f64, text::KILO, c.units, c.noconvert),
        _ => return None,
    })
}

/// How print_fields fits a value longer than its width.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// Text: cut, its last character a `+`.
    Plus,
    /// Headers, dates and durations: cut.
    Plain,
    /// Numbers: printed whole.
    Never,
}

/// Which [`Cut`] field `name`'s values get.
/// The fields that are dates, which Slurm writes into a buffer of their
/// width.
fn is_date(name: &str) -> bool {
    matches!(name, "Start" | "End" | "Submit" | "Eligible")
}

fn cut_of(name: &str) -> Cut {
    match name {
        "AllocCPUS" | "NCPUS" | "NNodes" | "ElapsedRaw" | "CPUTimeRAW" | "ReqCPUS" | "NTasks"
        | "UID" => Cut::Never,
        d if is_date(d) => Cut::Plain,
        "Elapsed" | "CPUTime" | "Suspended" => Cut::Plain,
        _ => Cut::Plus,
    }
}

/// print_fields' rule: right-justified to the width (left for a negative
/// one), then a space; cut as `cut` says where longer.
fn fixed(v: &str, width: i32, cut: Cut) -> String {
    let w = width.unsigned_abs() as usize;
    let long = w > 0 && v.chars().count() > w;
    let shown = match cut {
        Cut::Plus if long => {
            let mut s: String = v.chars().take(w - 1).collect();
            s.push('+');
            s
        }
        Cut::Plain if long => v.chars().take(w).collect(),
        _ => v.to_string(),
    };
    let mut cell = crate::text::padded(&shown, w, width >= 0);
    cell.push(' ');
    cell
}

/// The jobs of a `-j` list (`12,13.batch,14_2.0`), steps set aside.
fn job_parts(list: &str) -> String {
    list.split(',')
        .map(|id| id.split('.').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `-j` list `list` asks for the line of job `j`'s `step` (`None`:
/// the job's own line): a job named alone brings every line of it; a
/// step named (`12.batch`), that step's, or with `-X` (`allocations`) the
/// job's.
fn step_named(list: &str, j: &JobInfo, step: Option<&str>, allocations: bool) -> bool {
    list.split(',').any(|id| {
        let (job, asked) = match id.split_once('.') {
            Some((job, s)) => (job, Some(s)),
            None => (id, None),
        };
        crate::squeue::named_by(job, j)
            && match (asked, step) {
                (None, _) => true,
                (Some(_), None) => allocations,
                (Some(a), Some(s)) => a == s,
            }
    })
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::argv::parse_plain(&argv)?;
    // Refused as Slurm's sacct refuses them (its `fatal`, exit 1).
    if let Some(u) = &args.units {
        if u.chars().next().and_then(text::unit_of).is_none() {
            eprintln!("sacct: error: Invalid unit type '{u}'. Possible options are 'KMGTP'");
            eprintln!("sacct: fatal: Invalid unit type");
            return Ok(1);
        }
    }
    for id in args.jobs.iter().flat_map(|l| l.split(',')) {
        let job = id.split(['_', '.']).next().unwrap_or("");
        if job.parse::<u64>().is_err() {
            eprintln!("sacct: fatal: Bad job/step specified: {id}");
            return Ok(1);
        }
        // A step is a number (read as far as its digits go), or one of
        // the named ones.
        if let Some((before, step)) = id.split_once('.') {
            let named = ["batch", "extern", "interactive"].contains(&step);
            if !named && !step.starts_with(|c: char| c.is_ascii_digit()) {
                eprintln!("sacct: fatal: Bad step specified: {before}");
                return Ok(1);
            }
        }
    }
    // A user the system does not know: said, and nothing listed, as
    // Slurm's sacct does.
    // (The caller's own name is known whatever the password file holds:
    // a network directory's user is not in it, docs/slurm.md.)
    let me_name = text::user_name();
    for u in args.user.iter().flat_map(|u| u.split(',')) {
        if !u.is_empty() && u != me_name && u.parse::<u32>().is_err() && text::uid_of(u).is_none() {
            eprintln!("sacct: error: Invalid user id: {u}");
            return Ok(1);
        }
    }
    // The user's default (SACCT_FORMAT) yields to -o and to -b, as on
    // Slurm.
    let env_format = std::env::var("SACCT_FORMAT").ok();
    let fields = parse_fields(match (&args.format, args.brief, &env_format) {
        (Some(f), _, _) => f,
        (None, true, _) => BRIEF_FIELDS,
        (None, false, Some(f)) => f,
        (None, false, None) => DEFAULT_FIELDS,
    })?;
    let states = match &args.state {
        Some(s) => text::parse_states(s).map_err(anyhow::Error::msg)?,
        None => None,
    };
    // Slurm's defaults (slurmdb_job_cond_def_start_end): with states and
    // no jobs named, the jobs in those states now; with neither, today's,
    // from midnight; with jobs named, all of theirs. With states, the
    // window ends where it starts unless told.
    // A time Slurm's parse_time refuses: its message alone, and exit 1.
    // One that says nothing (0) is as if not given, as in Slurm's.
    let when = |given: &Option<String>| match given.as_deref().map(text::parse_date) {
        None | Some(Ok(0)) => Ok(None),
        Some(Ok(t)) => Ok(Some(t)),
        Some(Err(e)) => Err(e),
    };
    let (start, end) = match (when(&args.starttime), when(&args.endtime)) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let window_start = match start {
        Some(t) => Some(t),
        None if args.jobs.is_some() => None,
        None if states.is_some() => Some(text::now_s()),
        None => text::parse_date("00:00").ok(),
    };
    let window_end = match end {
        Some(t) => Some(t),
        None if states.is_some() => window_start,
        None => None,
    };
    let mut c = Cluster::open().await?;
    let me = text::user_name();
    // A job over before the window is never shown: the controller
    // leaves it out.
    let jobs: Vec<JobInfo> = c
        .recent(window_start.unwrap_or(i64::MIN))
        .await?
        .into_iter()
        // The database's jobs of the clusters `-M` names: none of
        // another's, as Slurm's sacct (which says nothing of a name it
        // does not know).
        .filter(|_| {
            args.clusters
                .as_deref()
                .is_none_or(crate::cluster::names_this)
        })
        .filter(|j| {
            args.jobs
                .as_ref()
                .is_none_or(|l| crate::squeue::named_by(&job_parts(l), j))
        })
        .filter(|j| states.as_ref().is_none_or(|s| s.contains(&j.state)))
        .filter(|j| {
            args.name
                .as_ref()
                .is_none_or(|n| n.split(',').any(|n| n == j.name))
        })
        .filter(|j| args.user.as_ref().is_none_or(|u| text::owned_by(u, j, &me)))
        .filter(|j| {
            args.partition
                .as_ref()
                .is_none_or(|p| p.split(',').any(|p| p == j.partition))
        })
        // In the window: not over before it starts, submitted before it
        // ends.
        .filter(|j| window_start.is_none_or(|s| j.end_ns == 0 || text::secs(j.end_ns) >= s))
        .filter(|j| window_end.is_none_or(|e| text::secs(j.submit_ns) <= e))
        // Not yet eligible (held, waiting for other jobs or for its
        // begin): Slurm's database has no eligible time for it, and
        // sacct lists it only when asked by id.
        .filter(|j| args.jobs.is_some() || !not_yet_eligible(j))
        .collect();
    let wants_record = args.json
        || fields
            .iter()
            .any(|f| matches!(f.name, "TotalCPU" | "MaxRSS" | "ExitCode"));
    let records = if wants_record {
        records(&mut c, &jobs).await?
    } else {
        HashMap::new()
    };
    let mut rows = Vec::new();
    let mut i = 0;
    while i < jobs.len() {
        let j = &jobs[i];
        i += 1;
        let record = records.get(&j.id);
        // The array's tasks not started yet, one record for them all.
        let mut tasks = None;
        if let (Some(a), true) = (j.array, j.state == JobState::Pending && j.restarts == 0) {
            let mut idx = vec![a.index];
            while let Some(t) = jobs.get(i).filter(|t| {
                t.state == JobState::Pending
                    && t.restarts == 0
                    && t.array.is_some_and(|b| b.job == a.job)
            }) {
                idx.extend(t.array.map(|b| b.index));
                i += 1;
            }
            if idx.len() > 1 {
                tasks = Some(formats::intervals::format(&idx).replace(' ', ","));
            }
        }
        // `-j 12.batch` asks for that step alone (the job's line only
        // with -X, which shows no step).
        let wants = |step: Option<&str>| {
            args.jobs
                .as_deref()
                .is_none_or(|l| step_named(l, j, step, args.allocations))
        };
        if wants(None) {
            rows.push(Row {
                job: j,
                step: None,
                srun: None,
                record,
                tasks,
            });
        }
        if !args.allocations && j.program.is_some() && j.start_ns > 0 {
            if wants(Some("batch")) {
                rows.push(Row {
                    job: j,
                    step: Some("batch".into()),
                    srun: None,
                    record,
                    tasks: None,
                });
            }
            for s in j.program.iter().flat_map(|p| &p.steps) {
                if wants(Some(&s.id.to_string())) {
                    rows.push(Row {
                        job: j,
                        step: Some(s.id.to_string()),
                        srun: Some(s),
                        // The job's, for its line when only steps are
                        // asked for (`-j 12.0 --json`).
                        record,
                        tasks: None,
                    });
                }
            }
        }
    }
    let ctx = Ctx {
        me: &me,
        now: text::now_s(),
        units: args
            .units
            .as_ref()
            .and_then(|u| u.chars().next())
            .and_then(text::unit_of),
        noconvert: args.noconvert,
        config: &c.config,
    };
    if args.json {
        json(&rows, &ctx)?;
        return Ok(0);
    }
    let parsable = args.parsable || args.parsable2;
    let delim = args.delimiter.clone().unwrap_or_else(|| "|".into());
    let mut out = String::new();
    let line = |vals: Vec<String>, header: bool, out: &mut String| {
        if parsable {
            // A date is written into a buffer of its field's width,
            // which cuts it even here (SLURM_TIME_FORMAT's long forms).
            let vals: Vec<String> = vals
                .into_iter()
                .zip(&fields)
                .map(|(v, f)| match f.name {
                    name if is_date(name) && !header => {
                        v.chars().take(f.width.unsigned_abs() as usize).collect()
                    }
                    _ => v,
                })
                .collect();
            out.push_str(&vals.join(&delim));
            if args.parsable {
                out.push_str(&delim);
            }
        } else {
            for (v, f) in vals.iter().zip(&fields) {
                let cut = if header { Cut::Plain } else { cut_of(f.name) };
                out.push_str(&fixed(v, f.width, cut));
            }
        }
        out.push('\n');
    };
    if !args.noheader {
        line(
            fields.iter().map(|f| f.name.to_string()).collect(),
            true,
            &mut out,
        );
        if !parsable {
            for f in &fields {
                out.push_str(&"-".repeat((f.width.unsigned_abs() as usize).min(text::MAX_WIDTH)));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in &rows {
        line(
            fields.iter().map(|f| value(f.name, r, &ctx)).collect(),
            false,
            &mut out,
        );
    }
    print!("{out}");
    Ok(0)
}

/// The records of the jobs that ended having run a program.
async fn records(c: &mut Cluster, jobs: &[JobInfo]) -> Result<HashMap<u64, JobRecord<'static>>> {
    let ids: Vec<u64> = jobs
        .iter()
        .filter(|j| j.state.is_final() && j.start_ns > 0 && j.program.is_some())
        .map(|j| j.id)
        .collect();
    let mut out = HashMap::new();
    for chunk in ids.chunks(10_000) {
        if let Response::Records(frames) = c.call(&Request::Records(chunk.to_vec())).await? {
            let (recs, _) = formats::record::decode_all(&frames);
            out.extend(recs.into_iter().map(|r| (r.id, r)));
        }
    }
    Ok(out)
}

/// `sacct --json`: each job, with its steps, as Slurm 22.05's
/// `openapi/dbv0.0.38` plugin writes it, every key in its order. Its
/// exit codes are as that plugin writes them: a signal by its number and
/// name, but any exit status as `SUCCESS` with return code 0 (the
/// plugin's own reading of the status). What clemu does not keep
/// (energy, frequencies, reservations) is as Slurm writes it without.
fn json(rows: &[Row<'_>], c: &Ctx<'_>) -> std::io::Result<()> {
    // A job and the steps of it that are asked for, whether or not its
    // own row is (`-j 12.batch`): Slurm's document holds whole jobs.
    let mut rows = rows.iter().peekable();
    let jobs = std::iter::from_fn(move || {
        let first = rows.next()?;
        let as_job = Row {
            job: first.job,
            step: None,
            srun: None,
            record: first.record,
            tasks: if first.step.is_none() {
                first.tasks.clone()
            } else {
                None
            },
        };
        let mut job = job_json(&as_job, c);
        let mut steps = Vec::new();
        if first.step.is_some() {
            steps.push(step_json(first, c));
        }
        while let Some(r) = rows.next_if(|r| r.job.id == first.job.id && r.step.is_some()) {
            steps.push(step_json(r, c));
        }
        job["steps"] = serde_json::Value::Array(steps);
        Some(job)
    });
    text::write_document("openapi/dbv0.0.38", "jobs", jobs)
}

/// An exit code as Slurm 22.05's plugin writes it, from sacct's own
/// `code:signal`.
fn exit_json(code: &str) -> serde_json::Value {
    let signal = code
        .split_once(':')
        .and_then(|(_, s)| s.parse::<u32>().ok())
        .unwrap_or(0);
    if signal > 0 {
        serde_json::json!({"status": "SIGNALED", "return_code": null,
            "signal": {"signal_id": signal, "name": crate::srun::signal_name(signal as i32)}})
    } else {
        serde_json::json!({"status": "SUCCESS", "return_code": 0})
    }
}

fn cpu_json(ns: u64) -> serde_json::Value {
    serde_json::json!({"seconds": ns / 1_000_000_000, "microseconds": (ns / 1000) % 1_000_000})
}

fn tres_json(kind: &str, id: u32, count: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"type": kind, "name": null, "id": id, "count": count})
}

/// Step `r` (its batch step, or one srun) of its job.
fn step_json(r: &Row<'_>, c: &Ctx<'_>) -> serde_json::Value {
    use serde_json::json;
    let j = r.job;
    // The batch step runs on the job's first node; an srun step where
    // srun laid it out.
    let (nodes, count, cpus) = match r.srun {
        Some(st) => step_nodes(st, j),
        None => (text::first_node(&j.nodes), 1, first_node_cpus(j)),
    };
    let (id, name, cpu_ns, srun) = match r.srun {
        Some(st) => (json!(st.id), st.name.clone(), st.cpu_ns, true),
        None => {
            let end = r.record.and_then(|rec| rec.program);
            (
                json!("batch"),
                "batch".to_string(),
                end.map_or(0, |e| e.cpu_ns),
                false,
            )
        }
    };
    let tasks = r.srun.map_or(1, |st| st.ntasks);
    let end = match r.srun {
        Some(st) if st.end_ns > 0 => text::secs(st.end_ns),
        _ => text::secs(j.end_ns),
    };
    let list: Vec<String> = formats::nodeset::parse(&nodes)
        .map(|set| formats::nodeset::expand(&set))
        .unwrap_or_else(|_| vec![nodes.clone()]);
    json!({
        "nodes": {"list": list, "count": count, "range": nodes},
        "tres": {"requested": {"max": [], "min": [], "average": [], "total": []},
            "consumed": {"max": [], "min": [], "average": [], "total": []},
            "allocated": [tres_json("cpu", 1, json!(cpus)), tres_json("mem", 2, json!(0)),
                tres_json("node", 4, json!(count))]},
        "time": {"elapsed": value("ElapsedRaw", r, c).parse::<i64>().unwrap_or(0), "end": end,
            "start": match r.srun { Some(st) => text::secs(st.start_ns), None => text::secs(j.start_ns) },
            "suspended": 0, "system": cpu_json(0), "total": cpu_json(cpu_ns), "user": cpu_json(cpu_ns)},
        "exit_code": exit_json(&value("ExitCode", r, c)),
        "tasks": {"count": tasks},
        "pid": null,
        "CPU": if srun {
            json!({"requested_frequency": {"min": null, "max": null},
                "governor": ["Conservative", "Performance", "PowerSave", "OnDemand", "UserSpace"]})
        } else {
            json!({"requested_frequency": {"min": 0, "max": 0}, "governor": []})
        },
        "kill_request_user": null,
        "state": value("State", r, c),
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"job_id": j.id, "het": {"component": null}, "id": id, "name": name},
        // srun lays several tasks out in blocks, one alone cyclic.
        "task": {"distribution": match (srun, tasks) {
            (false, _) => "Unknown",
            (true, 1) => "Cyclic",
            (true, _) => "Block",
        }},
    })
}

/// Job `r` as Slurm's record of it, its steps not yet in.
fn job_json(r: &Row<'_>, c: &Ctx<'_>) -> serde_json::Value {
    use serde_json::{json, Value};
    let j = r.job;
    let p = j.program.as_deref();
    let started = j.start_ns > 0;
    let user = text::owner(j, c.me);
    let account = crate::accounts::account_of(&user);
    let nodes = if started { text::node_count(j) } else { 0 };
    let asked_nodes = crate::squeue::nodes_of(j, c.config);
    let mem_asked = text::mem_asked(j);
    let mut allocated = vec![tres_json("cpu", 1, json!(j.cores))];
    if let Some(mb) = mem_asked {
        allocated.push(tres_json("mem", 2, json!(mb)));
    }
    allocated.extend([
        tres_json("energy", 3, Value::Null),
        tres_json("node", 4, json!(nodes)),
        tres_json("billing", 5, json!(j.cores)),
    ]);
    let requested = vec![
        tres_json("cpu", 1, json!(j.cores)),
        tres_json(
            "mem",
            2,
            json!(mem_asked.unwrap_or_else(|| text::nodes_memory(j, c.config))),
        ),
        tres_json("node", 4, json!(asked_nodes)),
        tres_json("billing", 5, json!(j.cores)),
    ];
    let total_cpu = r.record.and_then(|rec| rec.program).map_or(0, |e| e.cpu_ns);
    let eligible = match p.map(|p| p.eligible_ns) {
        _ if j.state == JobState::Pending && j.reason.starts_with("JobHeld") => 0,
        Some(None) => 0,
        Some(Some(t)) => text::secs(t),
        None => text::secs(j.submit_ns),
    };
    json!({
        "account": account.unwrap_or(""),
        "comment": {"administrator": null,
            "job": p.map(|p| p.comment.as_str()).filter(|c| !c.is_empty()),
            "system": null},
        "allocation_nodes": nodes,
        "array": {"job_id": j.array.map_or(0, |a| a.job),
            "limits": {"max": {"running": {"tasks": j.array.map_or(0, |a| a.limit)}}},
            "task": r.tasks,
            "task_id": if r.tasks.is_some() { None } else { j.array.map(|a| a.index) }},
        "association": {"account": account, "cluster": crate::cluster::NAME,
            "partition": null, "user": user},
        "cluster": crate::cluster::NAME,
        "constraints": "",
        "container": null,
        "derived_exit_code": exit_json(&value("DerivedExitCode", r, c)),
        "time": {"elapsed": elapsed(j, c.now), "eligible": eligible,
            "end": text::secs(j.end_ns), "start": text::secs(j.start_ns),
            "submission": text::secs(j.submit_ns), "suspended": suspended(j, c.now),
            "system": cpu_json(0),
            "limit": (j.walltime_ns > 0 && !p.is_some_and(|p| p.partition_limit))
                .then(|| text::limit_minutes(j.walltime_ns)),
            "total": cpu_json(total_cpu), "user": cpu_json(total_cpu)},
        "exit_code": exit_json(&value("ExitCode", r, c)),
        "flags": if started { json!(["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"]) } else { json!([]) },
        "group": text::group_of(&user),
        "het": {"job_id": 0, "job_offset": null},
        "job_id": j.id,
        "name": j.name,
        "mcs": {"label": ""},
        "nodes": value("NodeList", r, c),
        "partition": j.partition,
        "priority": crate::squeue::priority(j),
        "qos": account.map_or("", |_| crate::accounts::QOS),
        "required": {"CPUs": j.cores, "memory": p.map_or(0, |p| p.mem_per_node_mb)},
        "kill_request_user": (j.state == JobState::Cancelled).then_some(&user),
        "reservation": {"id": 0, "name": 0},
        // What a job over waited for is no longer said.
        "state": {"current": text::state_long(j.state),
            "reason": if j.state.is_final() { "None".into() } else { text::reason(j, false) }},
        "steps": [],
        "tres": {"allocated": if started { allocated } else { Vec::new() }, "requested": requested},
        "user": user,
        "wckey": {"wckey": "", "flags": []},
        "working_directory": p.map_or("", |p| p.workdir.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_take_their_width_from_the_table_or_the_user() {
        let f = parse_fields("jobid,State%20,exitcode").unwrap();
        assert_eq!(
            f.iter().map(|f| (f.name, f.width)).collect::<Vec<_>>(),
            [("JobID", -12), ("State", 20), ("ExitCode", 8)]
        );
        assert!(parse_fields("bogus").is_err());
        assert_eq!(parse_fields("exit").unwrap()[0].name, "ExitCode");
        assert_eq!(parse_fields("jobid").unwrap()[0].name, "JobID");
    }

    #[test]
    fn long_values_are_cut_with_a_plus() {
        assert_eq!(fixed("CANCELLED by 0", 10, Cut::Plus), "CANCELLED+ ");
        assert_eq!(fixed("12", -12, Cut::Plus), "12           ");
        assert_eq!(fixed("0:0", 8, Cut::Plus), "     0:0 ");
        assert_eq!(fixed("JobName", 4, Cut::Plain), "JobN ");
        assert_eq!(fixed("123456", 4, Cut::Never), "123456 ");
    }

    #[test]
    fn cpu_time_is_minutes_seconds_and_milliseconds_under_an_hour() {
        assert_eq!(cpu_time(1_234_000_000), "00:01.234");
        assert_eq!(cpu_time(3_700_000_000_000), "01:01:40");
        assert_eq!(cpu_time(5_000_000_000), "00:00:05");
        assert_eq!(cpu_time(0), "00:00:00");
    }
}
