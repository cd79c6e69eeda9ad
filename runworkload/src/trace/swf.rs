//! SWF job lines turned into jobs with cores, run time and requested
//! time, the rest counted.
//!
//! Mapping: a job gets `cores_per_proc` cores for each processor the trace
//! gave it (allocated processors, else requested ones). Its run time is the
//! trace's run time; its wall-time limit the trace's requested time, raised
//! to the run time when the trace's job ran past its request (so replayed
//! jobs end as the originals did rather than time out). Partial-execution
//! lines (status 2, 3, 4) are not jobs: the job's summary line is.
//!
//! A job the trace saw fail (status 0) runs for its run time as if it
//! had completed (`--failed run`), or is left out (`skip`).
//!
//! A job marked cancelled (status 5) is cancelled after the same delay as
//! in the trace, its wait plus its run time (each unknown one counting
//! 0), under `--cancelled replay`; until then it runs as it would have if
//! no one had cancelled it: for its wall-time limit, or, with none, for
//! that delay. `skip` leaves such jobs out; `run` replays them as if they
//! had completed.

use std::path::Path;

use anyhow::{bail, Context, Result};
use formats::swf;

use super::{Cancelled, Failed, OutOfOrder, Slice, SliceSpec, TraceJob};

/// The error for a file that is not a trace: how many lines were bad, and
/// the first of them (`warnings` name the file and line).
fn not_a_trace(name: &str, warnings: &[String], good: u64) -> String {
    let bad = warnings.len() as u64;
    format!(
        "{name}: not an SWF trace: {bad} of the {} job lines read are malformed (first: {})",
        bad + good,
        warnings.first().map_or("", String::as_str)
    )
}

pub fn read(path: &Path, spec: &SliceSpec) -> Result<Slice> {
    let name = path.display().to_string();
    let mut reader = swf::open(path).with_context(|| format!("cannot open trace {name}"))?;
    let mut slice = Slice::default();
    let mut seen = 0u64;
    // Job lines read well: a file whose lines are mostly malformed is not
    // a trace, and is refused as soon as that is clear.
    let mut good = 0u64;
    // The line of each job number of the slice: a replay's results,
    // `calcmets fidelity` and `--feedback` know its jobs by their numbers,
    // so two jobs of one number would be one job to them.
    let mut lines: std::collections::HashMap<i64, u64> = std::collections::HashMap::new();
    // The latest submission so far, and its line.
    let mut last_submit: Option<(i64, u64)> = None;
    while let Some(line) = reader
        .next_job()
        .with_context(|| format!("cannot read trace {name}"))?
    {
        let job = match line {
            Ok(j) => *j,
            Err(e) => {
                slice
                    .warnings
                    .push(format!("{name}:{}: {}", e.line, e.message));
                let bad = slice.warnings.len() as u64;
                if swf::not_a_trace(good, bad) {
                    bail!(not_a_trace(&name, &slice.warnings, good));
                }
                continue;
            }
        };
        good += 1;
        if job.is_partial() {
            continue;
        }
        seen += 1;
        if seen <= spec.skip {
            continue;
        }
        if spec.take.is_some_and(|t| slice.read >= t) {
            break;
        }
        slice.read += 1;
        // SWF lists jobs by submit time. A line that breaks that order is
        // replayed at its own time all the same (every time is measured
        // from the slice's earliest submission), but is said once.
        let at = job.submit_ns();
        match last_submit {
            Some((t, after_line)) if at < t => {
                let o = slice.out_of_order.get_or_insert(OutOfOrder {
                    line: job.line,
                    submit_ns: at,
                    after_line,
                    after_ns: t,
                    lines: 0,
                });
                o.lines += 1;
            }
            _ => last_submit = Some((at, job.line)),
        }
        // −1 is the format's "unknown": no number to confuse.
        if job.id() >= 0 {
            if let Some(first) = lines.insert(job.id(), job.line) {
                bail!(
                    "{name}:{}: job {} is numbered as the job of line {first}: the jobs of a \
                     trace are numbered apart (partial-execution lines, status 2 to 4, aside)",
                    job.line,
                    job.id()
                );
            }
        }
        if job.status() == swf::status::FAILED {
            slice.trace_failed += 1;
            if spec.failed == Failed::Skip {
                slice.skipped_failed += 1;
                continue;
            }
        }
        let cancelled = job.status() == swf::status::CANCELLED;
        if cancelled {
            slice.trace_cancelled += 1;
            if spec.cancelled == Cancelled::Skip {
                slice.skipped_cancelled += 1;
                continue;
            }
        }
        let (Some(run), Some(procs)) = (job.run_ns(), job.procs()) else {
            slice.unknown += 1;
            continue;
        };
        if procs == 0 {
            slice.unknown += 1;
            continue;
        }
        let cores = procs.saturating_mul(u64::from(spec.cores_per_proc));
        if cores > spec.max_cores || cores > u64::from(u32::MAX) {
            slice.too_large += 1;
            continue;
        }
        let mut run_ns = run.max(0) as u64;
        let trace_run_ns = run_ns;
        let walltime_ns = job
            .req_time_ns()
            .map_or(0, |r| (r.max(0) as u64).max(run_ns));
        let mut cancel_after_ns = None;
        if cancelled && spec.cancelled == Cancelled::Replay {
            let after = job.wait_ns().unwrap_or(0).max(0) as u64 + run_ns;
            cancel_after_ns = Some(after);
            run_ns = if walltime_ns > 0 { walltime_ns } else { after };
        }
        slice.jobs.push(TraceJob {
            trace_id: job.id(),
            line: job.line,
            submit_ns: job.submit_ns(),
            run_ns,
            walltime_ns,
            cores: cores as u32,
            cancel_after_ns,
            preceding: job
                .preceding()
                .map(|p| (p, job.think_ns().unwrap_or(0).max(0) as u64)),
            trace_run_ns,
            queue: job.get(formats::swf::field::QUEUE) as i64,
            partition: job.get(formats::swf::field::PARTITION) as i64,
            profile: None,
        });
    }
    slice.max_procs = reader.header().max_procs();
    slice.unix_start_time = reader.header().unix_start_time();
    if good == 0 && !slice.warnings.is_empty() {
        bail!(not_a_trace(&name, &slice.warnings, good));
    }
    if slice.read == 0 {
        bail!(
            "{name}: no job in the slice (skip {}, {} job lines in the trace)",
            spec.skip,
            seen
        );
    }
    Ok(slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
; MaxProcs: 64
    1   0  10  100  4 -1 -1  4 200 -1  1 1 1 -1 1 -1 -1 -1
    2  10  -1  300 -1 -1 -1  8 200 -1  0 1 1 -1 1 -1 -1 -1
    3  20   0   30  2 -1 -1  2  -1 -1  2 1 1 -1 1 -1 -1 -1
    3  20   0   40  2 -1 -1  2  -1 -1  1 1 1 -1 1 -1 -1 -1
    4  30   0   -1  2 -1 -1  2  -1 -1  1 1 1 -1 1 -1 -1 -1
    5  40   0   10 99 -1 -1 99  -1 -1  1 1 1 -1 1 -1 -1 -1
    6  50   0   10  1 -1 -1
    7  60   0   10  1 -1 -1  1  60 -1  1 1 1 -1 1 -1 -1 -1
";

    fn spec(skip: u64, take: Option<u64>) -> SliceSpec {
        SliceSpec {
            skip,
            take,
            cores_per_proc: 2,
            max_cores: 128,
            cancelled: Cancelled::Replay,
            failed: Failed::Run,
        }
    }

    #[test]
    fn two_jobs_of_one_number_are_refused_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.swf");
        let twice = TRACE.replace("    7  60", "    2  60");
        std::fs::write(&path, twice).unwrap();
        let err = read(&path, &spec(0, None)).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "t.swf:9: job 2 is numbered as the job of line 3: the jobs of a trace \
                 are numbered apart (partial-execution lines, status 2 to 4, aside)"
            ),
            "{err}"
        );
        // Outside the slice, it is not read.
        assert_eq!(read(&path, &spec(0, Some(5))).unwrap().read, 5);
    }

    #[test]
    fn a_trace_becomes_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.swf");
        std::fs::write(&p, TRACE).unwrap();
        let s = read(&p, &spec(0, None)).unwrap();
        let ids: Vec<i64> = s.jobs.iter().map(|j| j.trace_id).collect();
        assert_eq!(ids, [1, 2, 3, 7]);
        assert_eq!(s.jobs[0].cores, 8);
        assert_eq!(
            s.jobs[1].cores, 16,
            "requested processors when allocated is unknown"
        );
        assert_eq!(
            s.jobs[1].walltime_ns, 300_000_000_000,
            "raised to the run time"
        );
        assert_eq!(
            s.jobs[2].run_ns, 40_000_000_000,
            "the summary line, not the partial one"
        );
        assert_eq!(s.jobs[2].walltime_ns, 0);
        assert_eq!((s.read, s.unknown, s.too_large), (6, 1, 1));
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].contains("t.swf:8:"), "{:?}", s.warnings);
        assert_eq!(s.max_procs, Some(64));
    }

    #[test]
    fn cancelled_jobs_are_replayed_skipped_or_run_as_asked() {
        // Job 1 waited 10 s, ran 50 s of a 200 s request, then was
        // cancelled; job 2 was cancelled before it started (run 0) and
        // asked for nothing; job 3 completed.
        let trace = "\
    1   0  10   50  4 -1 -1  4 200 -1  5 1 1 -1 1 -1 -1 -1
    2   5  30    0  2 -1 -1  2  -1 -1  5 1 1 -1 1 -1 -1 -1
    3   9   0   20  2 -1 -1  2  60 -1  1 1 1 -1 1 -1 -1 -1
";
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.swf");
        std::fs::write(&p, trace).unwrap();
        let read_as = |cancelled| {
            read(
                &p,
                &SliceSpec {
                    cancelled,
                    ..spec(0, None)
                },
            )
            .unwrap()
        };
        const S: u64 = 1_000_000_000;
        let s = read_as(Cancelled::Replay);
        let got: Vec<_> = s
            .jobs
            .iter()
            .map(|j| {
                (
                    j.trace_id,
                    j.run_ns / S,
                    j.walltime_ns / S,
                    j.cancel_after_ns.map(|c| c / S),
                )
            })
            .collect();
        // Until cancelled, a job runs up to its limit, or, with none, up to
        // the cancellation.
        assert_eq!(
            got,
            [
                (1, 200, 200, Some(60)),
                (2, 30, 0, Some(30)),
                (3, 20, 60, None)
            ]
        );
        assert_eq!((s.trace_cancelled, s.skipped_cancelled), (2, 0));

        let s = read_as(Cancelled::Skip);
        let ids: Vec<i64> = s.jobs.iter().map(|j| j.trace_id).collect();
        assert_eq!(ids, [3]);
        assert_eq!((s.read, s.trace_cancelled, s.skipped_cancelled), (3, 2, 2));

        let s = read_as(Cancelled::Run);
        let got: Vec<_> = s
            .jobs
            .iter()
            .map(|j| (j.run_ns / S, j.cancel_after_ns))
            .collect();
        assert_eq!(got, [(50, None), (0, None), (20, None)]);
    }

    #[test]
    fn skip_and_take_choose_a_slice() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.swf");
        std::fs::write(&p, TRACE).unwrap();
        let s = read(&p, &spec(1, Some(2))).unwrap();
        let ids: Vec<i64> = s.jobs.iter().map(|j| j.trace_id).collect();
        assert_eq!(ids, [2, 3]);
        assert!(read(&p, &spec(100, None)).is_err());
    }
}
