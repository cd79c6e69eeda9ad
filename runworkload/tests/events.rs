//! Events during a replay (`--events`, `--failures`): nodes that fail and
//! come back, cancellations, on real processes and in the twin alike; what
//! they did is in the run directory, and calcmets breaks the metrics down
//! by the jobs they hit.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use formats::record::{JobRecord, Status};
use formats::results::JobRow;
use serde_json::Value;

use common::{bin, json, records};

/// On the demo cluster (16 nodes, 256 cores) at 2 cores per processor:
/// job 1 takes every core from 0 for 40 s; job 3 arrives at 25 and waits
/// for it; job 4 comes at 100, when all is quiet.
const TRACE: &str = "\
; MaxProcs: 128
    1   0   0   40  128 -1 -1  128 100 -1  1 1 1 -1 1 -1 -1 -1
    3  25   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1 -1 -1
    4 100   0   10    1 -1 -1    1  20 -1  1 1 1 -1 1 -1 -1 -1
";

/// vn001 fails at 10, which kills job 1 (it cannot run again on 240
/// cores); back at 20, job 1 runs again, 20-60; job 3 is cancelled at
/// 30, still waiting.
const EVENTS: &str = "\
# trace seconds, what, nodes or job
10 down vn001 power supply
20 up vn001
30 cancel 3
";

/// The same failure in Batsim's form (vn001 is node 0).
const BATSIM_EVENTS: &str = r#"{"timestamp": 10, "type": "machine_unavailable", "resources": "0"}
{"type": "generic", "timestamp": 20, "data": "{\"type\": \"machine_available\", \"resources\": \"0\"}"}
"#;

/// 1 trace second is 40 ms of the run: a loaded CI machine once started
/// job 1 again 135 ms after its node came back.
const SPEEDUP: f64 = 25.0;

fn run(dir: &Path, out: &str, extra: &[&str]) -> Output {
    common::run_at(SPEEDUP, &dir.join("t.swf"), &dir.join(out), extra)
}

fn replay(dir: &Path, out: &str, extra: &[&str]) -> PathBuf {
    common::replay_at(SPEEDUP, &dir.join("t.swf"), &dir.join(out), extra)
}

fn rows(run: &Path) -> HashMap<i64, JobRow> {
    formats::results::read_jobs(run)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|r| (r.trace_id, r))
        .collect()
}

#[test]
fn a_node_failure_kills_its_job_which_runs_again_once_the_node_is_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("t.swf"), TRACE).unwrap();
    std::fs::write(dir.join("events"), EVENTS).unwrap();
    let events = dir.join("events").display().to_string();
    let emulated = replay(dir, "emu", &["--events", &events]);
    let twin = replay(dir, "twin", &["--events", &events, "--simulate"]);
    // Trace seconds of slack: none in the twin. 6 (240 ms of the run)
    // still tells a start at 20 from one at the failure (10) or at 30.
    for (run, slack) in [(&emulated, 6.0), (&twin, 1e-6)] {
        let near = |got: f64, want: f64, what: &str| {
            assert!(
                (got - want).abs() <= slack,
                "{}: {what}: {got} trace s, not {want}",
                run.display()
            );
        };
        let rows = rows(run);
        let (one, three, four) = (&rows[&1], &rows[&3], &rows[&4]);
        assert_eq!(one.state, "completed");
        assert_eq!(three.state, "cancelled");
        assert_eq!(four.state, "completed");
        // Marked by the events that hit them (numbers of events.csv).
        assert_eq!(
            (
                one.events.as_str(),
                three.events.as_str(),
                four.events.as_str()
            ),
            ("1", "3", "")
        );
        // Job 1's killed execution left no record: one record, of the run
        // after the node came back.
        let recs = records(run);
        let ones: Vec<&JobRecord> = recs.iter().filter(|r| r.id == one.job_id).collect();
        assert_eq!(ones.len(), 1, "{}: {ones:?}", run.display());
        let t = |ns: i64| (ns - ones[0].submit) as f64 / 1e9 * SPEEDUP;
        near(t(ones[0].start), 20.0, "job 1 starts again");
        near(t(ones[0].end), 60.0, "job 1 ends");
        assert_eq!(ones[0].status, Status::Completed);
        assert!(!recs.iter().any(|r| r.id == three.job_id));

        let m = json(&run.join("manifest.json"));
        assert_eq!(m["events"]["planned"], 3, "{}", m["events"]);
        assert_eq!(m["events"]["applied"], 3);
        assert_eq!(m["events"]["jobs_hit"], 2);
        let ev = std::fs::read_to_string(run.join("events.csv")).unwrap();
        let lines: Vec<&str> = ev.lines().collect();
        assert_eq!(lines.len(), 4, "{ev}");
        assert!(
            lines[1].contains(",down,vn001,power supply,")
                && lines[1].contains(&format!(",{},", one.job_id))
                && lines[1].ends_with(":2"),
            "{ev}"
        );

        // calcmets: the jobs hit apart from the others.
        let o = Command::new(bin("calcmets"))
            .args(["--by", "events", "--format", "json"])
            .arg(run)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let parts: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(parts[0]["run"], "shrink-100 (hit by events)");
        assert_eq!(parts[0]["jobs"], 1);
        assert_eq!(parts[0]["cancelled"]["before_start"], 1);
        assert_eq!(parts[1]["run"], "shrink-100 (untouched)");
        assert_eq!(parts[1]["jobs"], 1);
    }

    // Batsim's form of the same failure does the same in the twin.
    std::fs::write(dir.join("batsim.json"), BATSIM_EVENTS).unwrap();
    let batsim = replay(
        dir,
        "batsim",
        &[
            "--events",
            &dir.join("batsim.json").display().to_string(),
            "--simulate",
        ],
    );
    let starts = |run: &Path| -> Vec<(u64, i64, i64)> {
        let mut v: Vec<_> = records(run)
            .iter()
            .filter(|r| r.id == 1)
            .map(|r| (r.id, r.start - r.submit, r.end - r.submit))
            .collect();
        v.sort();
        v
    };
    assert_eq!(starts(&batsim), starts(&twin));
}

#[test]
fn a_heavier_load_brings_arrivals_closer_not_the_machines_events() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("t.swf"), TRACE).unwrap();
    std::fs::write(dir.join("ev.txt"), "10 down vn002 fan\n30 up vn002\n").unwrap();
    let ev = dir.join("ev.txt").display().to_string();
    // Each event's instant after the run's start, in trace seconds (the
    // twin's clock is the trace's here: no factor, and its speed-up).
    let applied = |run: &Path| -> Vec<f64> {
        let start = json(&run.join("manifest.json"))["start"].as_f64().unwrap();
        let text = std::fs::read_to_string(run.join("events.csv")).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let at = header.iter().position(|h| *h == "at").unwrap();
        lines
            .map(|l| l.split(',').nth(at).unwrap().parse::<f64>().unwrap())
            .map(|t| ((t - start) * SPEEDUP * 1000.0).round() / 1000.0)
            .collect()
    };
    let base = replay(dir, "base", &["--events", &ev, "--simulate"]);
    let o = run(
        dir,
        "loaded",
        &["--events", &ev, "--simulate", "--load", "200"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let loaded = dir.join("loaded/load-200");
    // The arrivals come twice as close together; the node is down from
    // 10 to 30 all the same: the machine's clock is the run's.
    assert_eq!(applied(&base), [10.0, 30.0]);
    assert_eq!(applied(&loaded), [10.0, 30.0]);
    let (b, l) = (rows(&base), rows(&loaded));
    let offset = |r: &HashMap<i64, JobRow>| r[&4].target_submit - r[&1].target_submit;
    assert!(
        (offset(&b) / 2.0 - offset(&l)).abs() < 1e-6,
        "{} {}",
        offset(&b),
        offset(&l)
    );
}

#[test]
fn generated_failures_are_kept_in_the_run_and_replay_the_same_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 100 jobs of 4 nodes each over 50 trace seconds: the cluster is
    // busy, and failures hit jobs.
    let mut trace = String::from("; MaxProcs: 128\n");
    for i in 0..100 {
        trace += &format!(
            "{} {} 0 {} 32 -1 -1 32 20 -1 1 1 1 -1 1 -1 -1 -1\n",
            i + 1,
            i / 2,
            6 + i % 3
        );
    }
    std::fs::write(dir.join("t.swf"), trace).unwrap();
    let failures = ["--failures", "mtbf=50,mttr=5,seed=11", "--simulate"];
    let a = replay(dir, "a", &failures);
    let b = replay(dir, "b", &failures);
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(a.join("events.csv")), read(b.join("events.csv")));
    let m = json(&a.join("manifest.json"));
    assert_eq!(m["events"]["failures"], "mtbf=50,mttr=5,seed=11");
    assert!(
        m["events"]["jobs_hit"].as_u64().unwrap() > 0,
        "{}",
        m["events"]
    );
    // Every job completes, once requeued (the default), with one record.
    assert_eq!(m["counts"]["completed"], 100, "{}", m["counts"]);
    assert_eq!(records(&a).len(), 100);
    // The events written out replay to the very same run.
    let again = replay(
        dir,
        "again",
        &[
            "--events",
            &a.join("events.txt").display().to_string(),
            "--simulate",
        ],
    );
    assert_eq!(records(&again), records(&a));
    // On real processes too, every job completes once.
    let emulated = replay(dir, "emu", &["--failures", "mtbf=50,mttr=5,seed=11"]);
    let m = json(&emulated.join("manifest.json"));
    assert_eq!(m["counts"]["completed"], 100, "{}", m["counts"]);
    let recs = records(&emulated);
    let mut ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((ids.len(), recs.len()), (100, 100));
}

#[test]
fn bad_events_are_refused_naming_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("t.swf"), TRACE).unwrap();
    for (text, needle) in [
        ("10 down vn001\n20 down vn999\n", "events:2: no node vn999"),
        (
            "10 down vn001\n5 up vn001\n",
            "events:2: time 5 s is before",
        ),
    ] {
        std::fs::write(dir.join("events"), text).unwrap();
        let o = run(
            dir,
            "bad",
            &["--events", &dir.join("events").display().to_string()],
        );
        assert_eq!(o.status.code(), Some(2), "{text:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{text:?}: {err}");
        assert!(!dir.join("bad").exists(), "refused before anything ran");
    }
    let o = run(dir, "bad", &["--failures", "mtbf=10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("mttr"));
}
