//! Jobs a trace marks cancelled (SWF status 5), replayed on real
//! processes and in the twin: cancelled at the trace's delay after their
//! submission whether they started or not, skipped, or run as completed;
//! calcmets reports them apart.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use formats::record::{decode_all, Status};

use common::{bin, json, replay, repo, SPEEDUP};

/// On the demo cluster (256 cores, EASY) at 2 cores per processor:
/// - job 1 takes every core at 0; its user cancelled it after 30 s of its
///   200 s request;
/// - job 2 (1 processor, no request) arrives at 5 and waits behind it; its
///   user cancelled it 10 s later, before it started;
/// - job 3 arrives at 10 and completes, started when job 1's cores free.
const TRACE: &str = "\
; MaxProcs: 128
    1   0   0   30  128 -1 -1  128 200 -1  5 1 1 -1 1 -1 -1 -1
    2   5  10    0    1 -1 -1    1  -1 -1  5 1 1 -1 1 -1 -1 -1
    3  10  20    5    1 -1 -1    1  10 -1  1 1 1 -1 1 -1 -1 -1
";

/// Each trace job's row of jobs.csv: (state, cancel_after_wall_s, job
/// id), once its cancel in trace seconds is checked against its wall one.
fn rows(dir: &Path) -> HashMap<i64, (String, Option<f64>, u64)> {
    formats::results::read_jobs(dir)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|r| {
            assert_eq!(
                r.cancel_after_trace_s.map(|t| t / SPEEDUP),
                r.cancel_after_wall_s,
                "trace {}",
                r.trace_id
            );
            (r.trace_id, (r.state, r.cancel_after_wall_s, r.job_id))
        })
        .collect()
}

fn states(dir: &Path) -> Vec<(i64, String)> {
    let mut v: Vec<_> = rows(dir).into_iter().map(|(t, r)| (t, r.0)).collect();
    v.sort();
    v
}

#[test]
fn cancelled_jobs_are_cancelled_at_the_traces_instant_on_real_processes_and_in_the_twin() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.swf");
    std::fs::write(&trace, TRACE).unwrap();
    let emulated = replay(&trace, &tmp.path().join("emu"), &[]);
    let twin = replay(&trace, &tmp.path().join("twin"), &["--simulate"]);

    let want = [
        (1, "cancelled".to_string()),
        (2, "cancelled".to_string()),
        (3, "completed".to_string()),
    ];
    assert_eq!(states(&emulated), want, "emulated");
    assert_eq!(states(&twin), want, "twin");

    for (dir, slack) in [(&emulated, 0.15), (&twin, 1e-9)] {
        let m = json(&dir.join("manifest.json"));
        assert_eq!(m["slice"]["cancelled"], "replay");
        assert_eq!(m["slice"]["trace_cancelled"], 2);
        assert_eq!(m["slice"]["replayed"], 3);
        let rows = rows(dir);
        assert_eq!(rows[&1].1, Some(30.0 / SPEEDUP), "the trace's wait + run");
        assert_eq!(rows[&2].1, Some(10.0 / SPEEDUP));
        assert_eq!(rows[&3].1, None);
        // Job 1's process was stopped by the cancellation, at its instant:
        // its record says cancelled, 30 trace seconds after submission.
        let (recs, _) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
        let by_id: HashMap<u64, _> = recs.iter().map(|r| (r.id, r)).collect();
        let one = by_id[&rows[&1].2];
        assert_eq!(one.status, Status::Cancelled, "{}", dir.display());
        let after = (one.end - one.submit) as f64 / 1e9;
        assert!(
            (after - 30.0 / SPEEDUP).abs() <= slack,
            "{}: cancelled {after} s after submission",
            dir.display()
        );
        // Job 2 never started: no record. Job 3 ran once job 1 was gone.
        assert!(!by_id.contains_key(&rows[&2].2));
        let three = by_id[&rows[&3].2];
        assert_eq!(three.status, Status::Completed);
        assert!(three.start >= one.end);
        // calcmets: the metrics count job 3 alone; the cancelled are apart.
        let metrics = json(&dir.join("metrics.json"));
        assert_eq!(metrics["jobs"], 1);
        assert_eq!(
            metrics["cancelled"],
            serde_json::json!({"jobs": 2, "before_start": 1, "while_running": 1})
        );
    }
}

#[test]
fn cancelled_jobs_can_be_skipped_or_run_as_completed() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.swf");
    std::fs::write(&trace, TRACE).unwrap();

    let skipped = replay(&trace, &tmp.path().join("skip"), &["--cancelled", "skip"]);
    let m = json(&skipped.join("manifest.json"));
    assert_eq!(m["slice"]["cancelled"], "skip");
    assert_eq!(m["slice"]["skipped_cancelled"], 2);
    assert_eq!(states(&skipped), [(3, "completed".to_string())]);

    // Run as if completed: job 1 runs its 30 s and job 2 its 0 s.
    let ran = replay(
        &trace,
        &tmp.path().join("run"),
        &["--cancelled", "run", "--simulate"],
    );
    assert_eq!(
        json(&ran.join("manifest.json"))["slice"]["cancelled"],
        "run"
    );
    let rows = rows(&ran);
    assert!(rows.values().all(|r| r.0 == "completed" && r.1.is_none()));
    let (recs, _) = decode_all(&std::fs::read(ran.join("records/jobs.rec")).unwrap());
    let one = recs.iter().find(|r| r.id == rows[&1].2).unwrap();
    assert_eq!(one.end - one.start, (30.0 / SPEEDUP * 1e9) as i64);
    // Beside its trace, the trace's cancelled jobs count as the run ran
    // them: completed, and none cancelled on either side.
    let o = Command::new(bin("calcmets"))
        .args(["--format", "json", "--swf"])
        .arg(&trace)
        .arg(&ran)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let both: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = both.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["cancelled"]["jobs"], 0, "{r}");
        assert_eq!(r["jobs"], runs[0]["jobs"], "{r}");
    }

    // A bad choice is refused by name.
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(&trace)
        .args(["--cancelled", "sometimes"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--cancelled"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
