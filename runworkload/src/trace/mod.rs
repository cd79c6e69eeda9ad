//! The slice of a workload that a replay submits: an SWF trace
//! ([`swf`]) or a Batsim workload ([`batsim`]), read into jobs with
//! cores, run time and wall-time limit, what cannot be replayed counted.

mod batsim;
mod swf;

use std::path::Path;

use anyhow::Result;
pub use formats::results::WorkloadFormat as Format;

/// A job to replay, times as in the trace (before shrinking).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceJob {
    /// The trace's job number.
    pub trace_id: i64,
    /// Where it is in the workload: its line in an SWF trace, its
    /// position (from 1) in a Batsim workload's `jobs`.
    pub line: u64,
    /// Submit time in the trace, nanoseconds.
    pub submit_ns: i64,
    pub run_ns: u64,
    /// Wall-time limit, 0 when the trace has none.
    pub walltime_ns: u64,
    pub cores: u32,
    /// A job the trace marks cancelled, replayed so (`--cancelled
    /// replay`): how long after its submission it is cancelled, trace ns.
    pub cancel_after_ns: Option<u64>,
    /// The job it followed (SWF field 17, its trace id) and the think
    /// time after that job's end (field 18, ns; unknown counts 0): what
    /// `--feedback` replays.
    pub preceding: Option<(i64, u64)>,
    /// The run time the trace gives, whatever `run_ns` became.
    pub trace_run_ns: u64,
    /// Its queue and partition numbers (SWF fields 15 and 16; -1 unknown)
    /// and its profile (a Batsim job's): what `[[workload.gres]]` rules
    /// match to give it generic resources.
    pub queue: i64,
    pub partition: i64,
    pub profile: Option<String>,
}

impl TraceJob {
    /// What it asks of each node's generic resources, by the config's
    /// `[[workload.gres]]` rules.
    pub fn gres(&self, config: &controller::config::Cluster) -> Vec<(String, u32)> {
        let key = controller::gres::TraceJobKey {
            id: self.trace_id,
            queue: self.queue,
            partition: self.partition,
            profile: self.profile.as_deref(),
        };
        controller::gres::for_trace_job(&config.trace_gres, &key)
    }
}

/// What a replay does with the jobs a trace marks cancelled (SWF status
/// 5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Cancelled {
    /// Cancel each at the delay after its submission at which the trace's
    /// user cancelled it (wait plus run time), started or not. Until then
    /// it runs as it would have had no one cancelled it: up to its
    /// wall-time limit.
    #[default]
    Replay,
    /// Leave them out.
    Skip,
    /// Run them as if they completed, for the run time the trace gives.
    Run,
}

impl Cancelled {
    pub fn as_str(self) -> &'static str {
        match self {
            Cancelled::Replay => "replay",
            Cancelled::Skip => "skip",
            Cancelled::Run => "run",
        }
    }
}

/// What a replay does with the jobs a trace saw fail (SWF status 0): they
/// held their cores for their run time as the others did, but their
/// users did not get what they asked, so the trace's own metrics leave
/// them out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Failed {
    /// Run them for the run time the trace gives, as if they completed:
    /// the load stays the trace's.
    #[default]
    Run,
    /// Leave them out.
    Skip,
}

impl Failed {
    pub fn as_str(self) -> &'static str {
        match self {
            Failed::Run => "run",
            Failed::Skip => "skip",
        }
    }
}

#[derive(Debug, Default)]
pub struct Slice {
    pub jobs: Vec<TraceJob>,
    /// Job lines in the slice (after `skip`, at most `take`).
    pub read: u64,
    /// Needed more cores than the cluster has.
    pub too_large: u64,
    /// Unknown run time or processor count.
    pub unknown: u64,
    /// Jobs the trace marks cancelled (whatever was done with them).
    pub trace_cancelled: u64,
    /// Of those, left out (`--cancelled skip`).
    pub skipped_cancelled: u64,
    /// Jobs the trace saw fail (whatever was done with them).
    pub trace_failed: u64,
    /// Of those, left out (`--failed skip`).
    pub skipped_failed: u64,
    /// The processors the trace was made on (SWF's `MaxProcs`, Batsim's
    /// `nb_res`).
    pub max_procs: Option<u64>,
    /// The epoch second that submit time 0 stands for, if the trace says.
    pub unix_start_time: Option<i64>,
    pub format: Format,
    /// One per malformed line, naming file and line.
    pub warnings: Vec<String>,
    /// Job lines of the slice submitted before a line above them.
    pub out_of_order: Option<OutOfOrder>,
}

/// The first job line that breaks a trace's submit order, and how many do.
#[derive(Debug, Clone, Copy)]
pub struct OutOfOrder {
    pub line: u64,
    pub submit_ns: i64,
    /// The line above it submitted latest, and when.
    pub after_line: u64,
    pub after_ns: i64,
    pub lines: u64,
}

pub struct SliceSpec {
    pub skip: u64,
    pub take: Option<u64>,
    pub cores_per_proc: u32,
    /// Largest job the cluster can run.
    pub max_cores: u64,
    pub cancelled: Cancelled,
    pub failed: Failed,
}

/// A job's place in the workload, for messages.
pub fn place(format: Format, job: &TraceJob) -> String {
    match format {
        Format::Swf => format!("line {}", job.line),
        Format::Batsim => format!("jobs[{}]", job.line - 1),
    }
}

/// For `--feedback`: the job of the slice each job follows (the index of
/// its preceding job, SWF field 17), if that job is in the slice too. A
/// job that follows itself, or a chain of them that comes back to where it
/// started, would never be submitted: refused, naming the line.
pub fn feedback_links(slice: &Slice, workload: &Path) -> Result<Vec<Option<usize>>> {
    let mut index = std::collections::HashMap::new();
    for (i, j) in slice.jobs.iter().enumerate() {
        index.entry(j.trace_id).or_insert(i);
    }
    let links: Vec<Option<usize>> = slice
        .jobs
        .iter()
        .map(|j| j.preceding.and_then(|(p, _)| index.get(&p).copied()))
        .collect();
    // Walk each chain back once; `state`: 0 unseen, 1 on the walk, 2 known
    // to end at a job that follows none.
    let mut state = vec![0u8; links.len()];
    for start in 0..links.len() {
        let mut walk = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at {
            match state[i] {
                2 => break,
                1 => {
                    let j = &slice.jobs[i];
                    anyhow::bail!(
                        "{}:{}: job {} follows a chain of preceding jobs (field 17) that comes \
                         back to it: with --feedback it could never be submitted",
                        workload.display(),
                        j.line,
                        j.trace_id
                    );
                }
                _ => {
                    state[i] = 1;
                    walk.push(i);
                    at = links[i];
                }
            }
        }
        for i in walk {
            state[i] = 2;
        }
    }
    Ok(links)
}

/// Reads the slice of a workload: a Batsim workload if the file is JSON
/// (`.json`), an SWF trace otherwise.
pub fn read(path: &Path, spec: &SliceSpec) -> Result<Slice> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        batsim::read(path, spec)
    } else {
        swf::read(path, spec)
    }
}
