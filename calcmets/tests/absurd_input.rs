//! Input that is well-formed but absurd, or that would be read as nothing:
//! calcmets says so and goes on, and never panics on it.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;
use std::process::{Command, Output};

use formats::record::{encode, Flags, JobRecord, Status};
use serde_json::Value;

const S: i64 = 1_000_000_000;

fn calcmets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calcmets"))
        .args(args)
        .output()
        .unwrap()
}

/// A job of `cores` on vn1, submitted and started at those instants (ns),
/// that completed after `run_s` seconds.
fn completed(id: u64, cores: u32, submit: i64, start: i64, run_s: i64) -> JobRecord<'static> {
    JobRecord {
        id,
        cores,
        node: Cow::Borrowed("vn1"),
        submit,
        start,
        end: start + run_s * S,
        runtime: (run_s * S) as u64,
        walltime: 0,
        status: Status::Completed,
        flags: Flags::default(),
        suspensions: Vec::new(),
        devices: Vec::new(),
        program: None,
    }
}

#[test]
fn a_trace_time_past_a_century_is_a_malformed_line_not_an_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("huge.swf");
    std::fs::write(
        &trace,
        "; MaxProcs: 8\n\
         1 0 0 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 999999999999999 999999999999999 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n\
         3 10 0 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = calcmets(&["--swf", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"], 2);
    assert_eq!(v["response"]["max"], 10.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("huge.swf:3:") && err.contains("out of range"),
        "{err}"
    );
    let strict = calcmets(&["--swf", trace.to_str().unwrap(), "--strict"]);
    assert_eq!(strict.status.code(), Some(1));
}

#[test]
fn negative_waits_past_the_exact_limit_have_negative_percentiles() {
    // A submit stamped one second after the start (a skewed clock), for
    // more jobs than percentiles are kept exactly for.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skewed.rec");
    let mut bytes = Vec::new();
    for id in 0..70_000u64 {
        let start = 1_800_000_000 * S + id as i64 * S;
        let rec = completed(id, 1, start + S, start, 5);
        encode(&rec, &mut bytes).unwrap();
    }
    std::fs::write(&file, bytes).unwrap();
    let out = calcmets(&["--cores", "8", "--format", "json", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for q in ["mean", "p50", "p99", "max"] {
        assert_eq!(v["wait"][q], -1.0, "{q}");
    }
}

#[test]
fn inputs_that_hold_no_records_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    // Alone, it has nothing to count: an error, not a table of dashes.
    let out = calcmets(&["--cores", "8", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no record files") && err.contains("nothing to count"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // Beside a record file, it is warned about.
    let file = dir.path().join("one.rec");
    std::fs::write(&file, b"").unwrap();
    let args = [
        "--cores",
        "8",
        empty.to_str().unwrap(),
        file.to_str().unwrap(),
    ];
    let out = calcmets(&args);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no record files"), "{err}");
    let strict = calcmets(&[&["--strict"][..], &args].concat());
    assert_eq!(strict.status.code(), Some(1));

    // A record file beside results directories is not one of their runs.
    let results = dir.path().join("results");
    let run = results.join("shrink-100");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("manifest.json"), r#"{"cores": 8}"#).unwrap();
    std::fs::write(results.join("stray.rec"), b"").unwrap();
    let out = calcmets(&[results.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 record file(s) outside"), "{err}");
}

/// Regression: a file of random bytes gave "0 jobs" and exit 0; an
/// executable read as a trace gave 3,678 warnings and exit 0.
#[test]
fn garbage_is_a_one_line_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // Bytes from a fixed-seed generator: the same garbage every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let random = dir.path().join("random.bin");
    std::fs::write(&random, &noise).unwrap();
    for args in [
        vec!["--cores", "8", random.to_str().unwrap()],
        vec!["dump", random.to_str().unwrap()],
    ] {
        let out = calcmets(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("random.bin: not a record file"),
            "{args:?}: {err}"
        );
    }
    // A record file whose only record a crash tore is a damaged record
    // file, not garbage: a warning, and 0 jobs.
    let torn = dir.path().join("torn.rec");
    let frame = formats::record::encode_to_vec(&JobRecord {
        id: 1,
        cores: 1,
        node: Cow::Borrowed("vn1"),
        submit: 0,
        start: S,
        end: 2 * S,
        runtime: S as u64,
        walltime: 0,
        status: Status::Completed,
        flags: Flags::default(),
        suspensions: Vec::new(),
        devices: Vec::new(),
        program: None,
    })
    .unwrap();
    std::fs::write(&torn, &frame[..frame.len() - 3]).unwrap();
    let out = calcmets(&["--cores", "8", torn.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 torn"));
    // An executable is not a trace: said once, after a clear majority of
    // bad lines, with the first of them.
    let exe = env!("CARGO_BIN_EXE_calcmets");
    let out = calcmets(&["--swf", exe]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("not an SWF trace") && err.contains(":1: "),
        "{err}"
    );
    // A trace with a few bad lines among good ones is still a trace.
    let trace = dir.path().join("few.swf");
    let mut text = String::from("; MaxProcs: 8\n");
    for i in 1..=30 {
        text.push_str(&format!(
            "{i} {i} 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
        ));
    }
    text.push_str("garbage\nmore garbage\n");
    std::fs::write(&trace, text).unwrap();
    let out = calcmets(&["--swf", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"], 30);
}

#[test]
fn a_utilization_above_what_the_cores_hold_is_warned_about() {
    // Four jobs of 8 cores at once, said to have run on 8 cores.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("full.rec");
    let mut bytes = Vec::new();
    for id in 1..=4u64 {
        let start = 1_800_000_000 * S;
        let rec = completed(id, 8, start, start, 10);
        encode(&rec, &mut bytes).unwrap();
    }
    std::fs::write(&file, bytes).unwrap();
    let out = calcmets(&["--cores", "8", "--format", "json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["utilization"], 4.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("utilization 400.00 % is above 100 %") && err.contains("--cores"),
        "{err}"
    );
    // On enough cores, nothing to say.
    let out = calcmets(&["--cores", "32", file.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("above 100"));
}

#[test]
fn a_window_that_holds_no_job_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.swf");
    std::fs::write(
        &trace,
        "; MaxProcs: 8\n1 0 0 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = calcmets(&[
        "--swf",
        trace.to_str().unwrap(),
        "--window",
        "1700000000:1700000100",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no job counts in the window 1700000000:1700000100, in trace seconds"),
        "{err}"
    );
    let out = calcmets(&["--swf", trace.to_str().unwrap(), "--window", "0:100"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no job counts"));
}

#[test]
fn loose_records_named_twice_or_copied_are_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let write = |name: &str, ids: std::ops::Range<u64>| {
        let mut bytes = Vec::new();
        for id in ids {
            let t = 1_800_000_000 * S + id as i64 * S;
            encode(&completed(id, 1, t, t + 2 * S, 5), &mut bytes).unwrap();
        }
        std::fs::write(logs.join(name), bytes).unwrap();
    };
    write("a.rec", 0..3);
    write("b.rec", 3..6);
    // Same size as a.rec, other records: not a copy.
    write("c.rec", 6..9);
    std::fs::copy(logs.join("a.rec"), dir.path().join("a-copy.rec")).unwrap();
    let jobs = |args: &[&str]| {
        let out = calcmets(&[&["--cores", "8", "--format", "json"][..], args].concat());
        assert_eq!(out.status.code(), Some(0));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["jobs"].as_u64().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (alone, err) = jobs(&[logs.to_str().unwrap()]);
    assert_eq!(alone, 9, "{err}");
    assert!(err.is_empty(), "{err}");

    let a = logs.join("a.rec");
    let (n, err) = jobs(&[logs.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(n, 9);
    assert!(err.contains("a.rec: named more than once"), "{err}");

    let copy = dir.path().join("a-copy.rec");
    let (n, err) = jobs(&[logs.to_str().unwrap(), copy.to_str().unwrap()]);
    assert_eq!(n, 9);
    assert!(
        err.contains("a-copy.rec: the same bytes as") && err.contains("a.rec, a copy"),
        "{err}"
    );
    // Either is a warning: --strict says the input had a problem.
    let strict = calcmets(&[
        "--strict",
        "--cores",
        "8",
        logs.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]);
    assert_eq!(strict.status.code(), Some(1));
}
