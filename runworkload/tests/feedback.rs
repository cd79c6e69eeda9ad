//! `--feedback`: a job that followed another in the trace (SWF field 17)
//! is submitted its think time (field 18) after that job ends in this
//! run, on real processes and in the twin alike.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::collections::HashMap;
use std::path::Path;

use formats::record::{decode_all, JobRecord};
use serde_json::Value;

use common::{replay_at, run};

/// On the demo cluster (256 cores, EASY) at 2 cores per processor:
/// - job 1 takes every core from 0 to 20;
/// - job 2 followed it, 5 s of think time after its end: submitted at 25
///   (not at its trace instant, 5), it runs 25-35;
/// - job 3 followed job 2 by 3 s: submitted at 38, it runs 38-48;
/// - job 4 follows nothing: submitted at 10, it waits for job 1's cores.
const TRACE: &str = "\
; MaxProcs: 128
    1   0   0   20  128 -1 -1  128  40 -1  1 1 1 -1 1 -1 -1 -1
    2   5   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1  1  5
    3   6   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1  2  3
    4  10   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1 -1 -1
";

/// Each trace job's record, by trace id.
fn records(dir: &Path) -> HashMap<i64, JobRecord<'static>> {
    let rows = formats::results::read_jobs(dir).unwrap().unwrap();
    let (recs, _) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
    let by_id: HashMap<u64, JobRecord<'static>> =
        recs.into_iter().map(|r| (r.id, r.into_owned())).collect();
    rows.iter()
        .map(|r| (r.trace_id, by_id[&r.job_id].clone()))
        .collect()
}

/// 1 trace second is 40 ms of the run, so that the 4 trace s of slack
/// below are 160 ms of a loaded machine (the events test, at 50×, once saw
/// a start 135 ms late).
const SPEEDUP: f64 = 25.0;

/// Trace seconds from `a` to `b` (ns instants of the run).
fn secs(a: i64, b: i64) -> f64 {
    (b - a) as f64 / 1e9 * SPEEDUP
}

#[test]
fn followers_are_submitted_a_think_time_after_their_job_ends_emulated_and_in_the_twin() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.swf");
    std::fs::write(&trace, TRACE).unwrap();
    let emulated = replay_at(SPEEDUP, &trace, &tmp.path().join("emu"), &["--feedback"]);
    let twin = replay_at(
        SPEEDUP,
        &trace,
        &tmp.path().join("twin"),
        &["--feedback", "--simulate"],
    );
    // Trace seconds of slack: none in the twin; on real processes, the
    // time the controller takes to learn of an end and start a job.
    for (dir, slack) in [(&emulated, 4.0), (&twin, 1e-6)] {
        let r = records(dir);
        let near = |got: f64, want: f64, what: &str| {
            assert!(
                (got - want).abs() <= slack,
                "{}: {what}: {got} trace s, not {want}",
                dir.display()
            );
        };
        near(secs(r[&1].end, r[&2].submit), 5.0, "job 2 after job 1");
        near(secs(r[&2].end, r[&3].submit), 3.0, "job 3 after job 2");
        // Each follower found free cores at once; job 4 waited for job 1.
        near(secs(r[&2].submit, r[&2].start), 0.0, "job 2's wait");
        near(secs(r[&4].submit, r[&4].start), 10.0, "job 4's wait");
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["slice"]["feedback"], true);
        assert_eq!(m["slice"]["followers"], 2);
        let rows = formats::results::read_jobs(dir).unwrap().unwrap();
        let follows: Vec<Option<i64>> = rows.iter().map(|r| r.follows).collect();
        assert_eq!(follows, [None, Some(1), Some(2), None]);
        // A follower's target is its submission in this run: never late.
        assert!(
            rows.iter().all(|r| r.lateness_wall_ms.abs() < 50.0),
            "{rows:?}"
        );
    }

    // Without --feedback, job 2 goes at its trace instant.
    let plain = replay_at(SPEEDUP, &trace, &tmp.path().join("plain"), &["--simulate"]);
    let r = records(&plain);
    assert_eq!(secs(r[&1].submit, r[&2].submit), 5.0);
}

#[test]
fn a_cycle_of_preceding_jobs_is_refused_by_line() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("cycle.swf");
    std::fs::write(
        &trace,
        "\
    1   0   0   20    1 -1 -1    1  40 -1  1 1 1 -1 1 -1 -1 -1
    2   5   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1  3  5
    3   6   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1  2  3
",
    )
    .unwrap();
    let o = run(&trace, &tmp.path().join("out"), &["--feedback"]);
    assert_eq!(o.status.code(), Some(2), "bad input");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cycle.swf:2:") && err.contains("comes back"),
        "{err}"
    );
    // Without --feedback the fields are not followed.
    let o = run(&trace, &tmp.path().join("out2"), &["--simulate"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Slurm cannot be asked for a think time.
    let o = run(
        &trace,
        &tmp.path().join("out3"),
        &["--feedback", "--backend", "slurm"],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--feedback"));
}
