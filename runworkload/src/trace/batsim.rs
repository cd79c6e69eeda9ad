//! Batsim workloads (JSON: `nb_res`, `jobs`, `profiles`) turned into
//! jobs.
//!
//! Mapping: a job gets `cores_per_proc` cores per resource it asks for
//! (`res`). Its run time is its `delay` profile's delay: clemu runs a
//! job as a sleep, so any other profile type is refused, by name. Its
//! wall-time limit is `walltime` as given (none when absent or -1): as in
//! Batsim, a job whose delay exceeds it is stopped at its limit. Jobs are
//! replayed in submission order (`subtime`, then their order in the file),
//! which is also the order `--skip` and `--jobs` count in. A job's trace
//! id is its `id` when every job's is a distinct integer (or a string of
//! one), else its position in `jobs`, from 1, for every job.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::{Format, Slice, SliceSpec, TraceJob};

pub fn read(path: &Path, spec: &SliceSpec) -> Result<Slice> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot open workload {name}"))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("{name}: not a Batsim workload: not JSON: {e}"))?;
    let not = |why: &str| anyhow!("{name}: not a Batsim workload: {why}");
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or_else(|| not("no \"jobs\" list"))?;
    let profiles = doc
        .get("profiles")
        .and_then(Value::as_object)
        .ok_or_else(|| not("no \"profiles\" object"))?;
    let nb_res = match doc.get("nb_res") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|&n| n > 0)
                .ok_or_else(|| not("nb_res must be a positive integer"))?,
        ),
    };

    // Each profile's delay, checked once however many jobs use it.
    let mut delays: HashMap<&str, Result<u64, String>> = HashMap::new();
    for (pname, p) in profiles {
        delays.insert(pname, delay_ns(p));
    }

    let mut all = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        let job = job(j, i, &delays).map_err(|e| anyhow!("{name}: jobs[{i}]{e}"))?;
        all.push(job);
    }
    // Ids that are not all distinct numbers would make trace ids collide.
    let mut seen = std::collections::HashSet::with_capacity(all.len());
    let numeric = all
        .iter()
        .all(|(_, _, id)| id.parse::<i64>().is_ok_and(|n| seen.insert(n)));
    for (j, _, id) in &mut all {
        j.trace_id = if numeric {
            id.parse().expect("checked above")
        } else {
            j.line as i64
        };
    }
    // Submission order; ties keep the file's order (a stable sort).
    all.sort_by_key(|(j, _, _)| j.submit_ns);

    let mut slice = Slice {
        format: Format::Batsim,
        max_procs: nb_res,
        ..Slice::default()
    };
    for (mut job, res, _) in all
        .into_iter()
        .skip(usize::try_from(spec.skip).unwrap_or(usize::MAX))
    {
        if spec.take.is_some_and(|t| slice.read >= t) {
            break;
        }
        slice.read += 1;
        let cores = res.saturating_mul(u64::from(spec.cores_per_proc));
        if cores > spec.max_cores || cores > u64::from(u32::MAX) {
            slice.too_large += 1;
            continue;
        }
        job.cores = cores as u32;
        slice.jobs.push(job);
    }
    if slice.read == 0 {
        bail!(
            "{name}: no job in the slice (skip {}, {} jobs in the workload)",
            spec.skip,
            jobs.len()
        );
    }
    Ok(slice)
}

/// One entry of `jobs`: the job (cores still to set), what it asks for
/// (`res`), and its id as written. Errors start where `jobs[i]` ends.
fn job(
    j: &Value,
    i: usize,
    delays: &HashMap<&str, Result<u64, String>>,
) -> Result<(TraceJob, u64, String), String> {
    let id = match j.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(": no \"id\" (a string)".into()),
    };
    let at = format!(" (id {id:?})");
    let subtime = j
        .get("subtime")
        .and_then(Value::as_f64)
        .filter(|t| (0.0..=MAX_SECONDS).contains(t))
        .ok_or_else(|| {
            format!("{at}: \"subtime\" must be a number of seconds, from 0 to {MAX_SECONDS:e}")
        })?;
    let res = j
        .get("res")
        .and_then(Value::as_u64)
        .filter(|&r| r > 0)
        .ok_or_else(|| format!("{at}: \"res\" must be a positive integer"))?;
    let walltime_ns = match j.get("walltime") {
        None | Some(Value::Null) => 0,
        Some(v) => match v.as_f64() {
            Some(-1.0) => 0,
            Some(w) if w > 0.0 && w <= MAX_SECONDS => seconds_ns(w),
            _ => {
                return Err(format!(
                    "{at}: \"walltime\" must be a positive number of seconds (at most \
                     {MAX_SECONDS:e}), or -1 for none"
                ))
            }
        },
    };
    let profile = j
        .get("profile")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}: no \"profile\" (a string)"))?;
    let run_ns = match delays.get(profile) {
        None => {
            return Err(format!(
                "{at}: its profile {profile:?} is not in \"profiles\""
            ))
        }
        Some(Err(why)) => return Err(format!("{at}: profile {profile:?} {why}")),
        Some(Ok(d)) => *d,
    };
    Ok((
        TraceJob {
            // Set once every id is known.
            trace_id: 0,
            line: i as u64 + 1,
            submit_ns: seconds_ns(subtime) as i64,
            run_ns,
            walltime_ns,
            cores: 0,
            cancel_after_ns: None,
            preceding: None,
            trace_run_ns: run_ns,
            queue: -1,
            partition: -1,
            profile: Some(profile.to_string()),
        },
        res,
        id,
    ))
}

/// A profile's delay, or why clemu cannot run it.
fn delay_ns(p: &Value) -> Result<u64, String> {
    match p.get("type").and_then(Value::as_str) {
        Some("delay") => p
            .get("delay")
            .and_then(Value::as_f64)
            .filter(|d| (0.0..=MAX_SECONDS).contains(d))
            .map(seconds_ns)
            .ok_or_else(|| format!("has no \"delay\" of 0 to {MAX_SECONDS:e} seconds")),
        Some(other) => Err(format!(
            "is of type {other:?}: clemu runs a job as a sleep, so only \"delay\" profiles"
        )),
        None => Err("has no \"type\"".into()),
    }
}

/// Longest time a workload may give (about 31 years): nanoseconds past it
/// would not fit the clock.
const MAX_SECONDS: f64 = 1e9;

fn seconds_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(skip: u64, take: Option<u64>) -> SliceSpec {
        SliceSpec {
            skip,
            take,
            cores_per_proc: 2,
            max_cores: 16,
            cancelled: super::super::Cancelled::Replay,
            failed: super::super::Failed::Run,
        }
    }

    fn read_text(text: &str, spec: &SliceSpec) -> Result<Slice> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.json");
        std::fs::write(&p, text).unwrap();
        read(&p, spec)
    }

    const W: &str = r#"{
        "nb_res": 8,
        "jobs": [
            {"id": "3", "subtime": 20.5, "res": 2, "profile": "short", "walltime": 100},
            {"id": 1, "subtime": 0, "res": 4, "profile": "long"},
            {"id": "big", "subtime": 10, "res": 9, "profile": "short", "walltime": -1},
            {"id": "x", "subtime": 10, "res": 1, "profile": "long", "user": "extra fields are fine"}
        ],
        "profiles": {
            "short": {"type": "delay", "delay": 1.25},
            "long": {"type": "delay", "delay": 300, "ret": 0},
            "unused": {"type": "parallel_homogeneous", "cpu": 1e9, "com": 0}
        }
    }"#;

    #[test]
    fn a_workload_becomes_jobs_in_submission_order() {
        let s = read_text(W, &spec(0, None)).unwrap();
        assert_eq!(s.format, Format::Batsim);
        assert_eq!(s.max_procs, Some(8));
        let ids: Vec<i64> = s.jobs.iter().map(|j| j.trace_id).collect();
        // "big" (9 resources: 18 cores) does not fit; "big" and "x" are
        // not numbers, so every job takes its position.
        assert_eq!(ids, [2, 4, 1]);
        assert_eq!((s.read, s.too_large), (4, 1));
        let j = &s.jobs[2];
        assert_eq!(j.submit_ns, 20_500_000_000);
        assert_eq!(j.run_ns, 1_250_000_000);
        assert_eq!(j.walltime_ns, 100_000_000_000);
        assert_eq!(j.cores, 4);
        assert_eq!(j.line, 1);
        assert_eq!(s.jobs[0].walltime_ns, 0, "no walltime: no limit");
        let s = read_text(W, &spec(1, Some(2))).unwrap();
        assert_eq!(s.jobs.len(), 1, "big and x: big too large");
        assert_eq!(s.jobs[0].trace_id, 4);
        // Distinct numbers: the workload's own ids.
        let numbered = W.replace("\"big\"", "\"7\"").replace("\"x\"", "9");
        let ids: Vec<i64> = read_text(&numbered, &spec(0, None))
            .unwrap()
            .jobs
            .iter()
            .map(|j| j.trace_id)
            .collect();
        assert_eq!(ids, [1, 9, 3]);
        // Times past what the clock holds are refused.
        let far = W.replace("\"subtime\": 20.5", "\"subtime\": 1e12");
        let e = read_text(&far, &spec(0, None)).unwrap_err().to_string();
        assert!(e.contains("jobs[0] (id \"3\"): \"subtime\" must be"), "{e}");
    }

    #[test]
    fn what_clemu_cannot_run_is_refused_by_name() {
        let bad = W.replace(
            r#""long": {"type": "delay", "delay": 300, "ret": 0}"#,
            r#""long": {"type": "parallel_homogeneous", "cpu": 1e9, "com": 0}"#,
        );
        let e = read_text(&bad, &spec(0, None)).unwrap_err().to_string();
        assert!(
            e.contains(
                "w.json: jobs[1] (id \"1\"): profile \"long\" is of type \"parallel_homogeneous\""
            ),
            "{e}"
        );
        let e = read_text(&W.replace("\"res\": 4", "\"res\": 0"), &spec(0, None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("jobs[1] (id \"1\"): \"res\" must be"), "{e}");
        let e = read_text(
            &W.replace("\"profile\": \"long\"}", "\"profile\": \"nope\"}"),
            &spec(0, None),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("its profile \"nope\" is not in"), "{e}");
        let e = read_text("{\"jobs\": [", &spec(0, None))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("w.json: not a Batsim workload: not JSON:") && e.contains("line 1"),
            "{e}"
        );
        let e = read_text("{\"jobs\": []}", &spec(0, None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no \"profiles\" object"), "{e}");
        let e = read_text(W, &spec(9, None)).unwrap_err().to_string();
        assert!(e.contains("no job in the slice"), "{e}");
    }
}
