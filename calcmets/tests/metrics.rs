//! calcmets's metrics through the real binary: hand-computed values on
//! small fixtures, docs/design.md's JSON keys, side-by-side runs, bad input.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Output};

use formats::record::{encode, Flags, JobRecord, Status, Suspension};
use serde_json::Value;

const S: i64 = 1_000_000_000;
const T0: i64 = 1_800_000_000 * S;

fn calcmets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calcmets"))
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A record: cores, submit, start, end in seconds after T0, suspensions.
fn rec(id: u64, cores: u32, s: i64, b: i64, e: i64, susp: &[(i64, i64)]) -> JobRecord<'static> {
    JobRecord {
        id,
        cores,
        node: Cow::Borrowed("vn0001"),
        submit: T0 + s * S,
        start: T0 + b * S,
        end: T0 + e * S,
        runtime: 0,
        walltime: 0,
        status: Status::Completed,
        flags: Flags::default(),
        suspensions: susp
            .iter()
            .map(|&(a, z)| Suspension {
                suspend: T0 + a * S,
                resume: T0 + z * S,
            })
            .collect(),
        devices: Vec::new(),
        program: None,
    }
}

fn write(path: &Path, recs: &[JobRecord<'_>]) {
    let mut bytes = Vec::new();
    for r in recs {
        encode(r, &mut bytes).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

fn fixture() -> Vec<JobRecord<'static>> {
    let mut cancelled = rec(5, 8, 0, 1, 50, &[]);
    cancelled.status = Status::Cancelled;
    vec![
        // 4 cores, w 10, r 100, R 110: sld 1.1, bsld 1.1
        rec(1, 4, 0, 10, 110, &[]),
        // 2 cores, suspended twice for 10 + 5 s: z 15, r 40, w 0, R 55,
        // sld 1.375, bsld 1.375
        rec(2, 2, 20, 20, 75, &[(30, 40), (50, 55)]),
        // 1 core, w 10, r 5, R 15: sld 3, bsld max(1, 15/10) = 1.5
        rec(3, 1, 50, 60, 65, &[]),
        // r = 0: excluded
        rec(4, 1, 60, 70, 70, &[]),
        // cancelled: excluded unless --status all
        cancelled,
    ]
}

#[test]
fn hand_computed_metrics_of_records() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &fixture());
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    assert_eq!(v["jobs"], 3);
    assert_eq!(v["cores"], 8);
    assert_eq!(v["tau"], 10.0);
    assert_eq!(
        v["window"],
        serde_json::json!([1_800_000_000.0, 1_800_000_110.0])
    );
    assert_eq!(v["makespan"], 110.0);
    let close = |got: &Value, want: f64| {
        let g = got.as_f64().unwrap();
        assert!((g - want).abs() < 1e-9, "{g} vs {want}");
    };
    close(&v["wait"]["mean"], 20.0 / 3.0);
    assert_eq!(v["wait"]["p50"], 10.0);
    assert_eq!(v["wait"]["max"], 10.0);
    close(&v["response"]["mean"], 180.0 / 3.0);
    assert_eq!(v["response"]["p50"], 55.0);
    assert_eq!(v["response"]["p95"], 110.0);
    close(&v["slowdown"]["mean"], (1.1 + 1.375 + 3.0) / 3.0);
    assert_eq!(v["slowdown"]["p50"], 1.375);
    assert_eq!(v["slowdown"]["max"], 3.0);
    close(&v["bounded_slowdown"]["mean"], (1.1 + 1.375 + 1.5) / 3.0);
    assert_eq!(v["bounded_slowdown"]["max"], 1.5);
    // Σ c·R / Σ c·r = (440 + 110 + 15) / (400 + 80 + 5)
    close(&v["weighted_slowdown"], 565.0 / 485.0);
    // Σ c·r / (C·(t1 − t0)) = 485 / (8 · 110)
    close(&v["utilization"], 485.0 / 880.0);
    assert_eq!(v["suspended_jobs"], 1);
    assert_eq!(v["suspensions"], 2);
    assert_eq!(v["suspended_time"], 15.0);
    assert_eq!(
        v["skipped"],
        serde_json::json!({
            "corrupt": 0, "torn": 0, "unsupported": 0, "excluded": 2,
            "excluded_by": {
                "cancelled": 1, "failed": 0, "timeout": 0, "other_status": 0,
                "no_run_time": 1, "no_cores": 0, "not_in_run": 0,
            },
        })
    );

    // A larger τ bounds more: job 1 (r 100) gives 110 / max(100, 200) → 1.
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--tau",
        "200",
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    assert_eq!(v["tau"], 200.0);
    assert_eq!(v["bounded_slowdown"]["max"], 1.0);

    // --status all counts the cancelled job too (r 49, w 1, R 50).
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--status",
        "all",
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    assert_eq!(v["jobs"], 4);
    assert_eq!(v["skipped"]["excluded"], 1);
}

#[test]
fn json_keys_are_exactly_those_of_the_design() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &fixture());
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "clock",
            "jobs",
            "cores",
            "tau",
            "window",
            "makespan",
            "wait",
            "response",
            "slowdown",
            "bounded_slowdown",
            "weighted_slowdown",
            "utilization",
            "suspended_jobs",
            "suspensions",
            "suspended_time",
            "cancelled",
            "skipped"
        ]
    );
    // The fixture's cancelled job, reported apart from the metrics.
    assert_eq!(
        v["cancelled"],
        serde_json::json!({"jobs": 1, "before_start": 0, "while_running": 1})
    );
    for k in ["wait", "response", "slowdown", "bounded_slowdown"] {
        let sub: Vec<&str> = v[k]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(sub, ["mean", "p50", "p95", "p99", "max"], "{k}");
    }
    let skipped: Vec<&str> = v["skipped"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        skipped,
        ["corrupt", "torn", "unsupported", "excluded", "excluded_by"]
    );
}

#[test]
fn window_clips_utilization_to_executed_core_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &fixture());
    // [20, 70): jobs 2 (submitted 20) and 3 (50) are inside, job 1 is not.
    // Job 2 runs 20..75 minus 30..40 and 50..55: inside the window that is
    // 20..30, 40..50, 55..70 = 35 s on 2 cores; job 3 runs 60..65 = 5 s on
    // 1 core. Utilization = 75 / (8 · 50).
    let w = format!("{}:{}", 1_800_000_020, 1_800_000_070);
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--window",
        &w,
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    assert_eq!(v["jobs"], 2);
    assert!((v["utilization"].as_f64().unwrap() - 75.0 / 400.0).abs() < 1e-12);
    assert_eq!(
        v["window"],
        serde_json::json!([1_800_000_020.0, 1_800_000_070.0])
    );
}

const SWF: &str = "\
; Version: 2.2
; MaxNodes: 4
; MaxProcs: 16
;
    1    0   10  100  4 -1 -1  4 200 -1  1 1 1 -1 1 -1 -1 -1
    2   20   -1   40 -1 -1 -1  2  60 -1 -1 1 1 -1 1 -1 -1 -1
    3   30    5   30  2 -1 -1  2  60 -1  2 1 1 -1 1 -1 -1 -1
    3   30    5   40  2 -1 -1  2  60 -1  1 1 1 -1 1 -1 -1 -1
    4   40    0    0  1 -1 -1  1  60 -1  1 1 1 -1 1 -1 -1 -1
    5   50    0   10  1 -1 -1  1  60 -1  0 1 1 -1 1 -1 -1 -1
    6   60    0   10  1 -1 -1
";

#[test]
fn hand_computed_metrics_of_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.swf");
    std::fs::write(&file, SWF).unwrap();
    let out = calcmets(&["--swf", file.to_str().unwrap(), "--format", "json"]);
    let v = json(&out);
    // Job 1: w 10, r 100, 4 procs. Job 2: wait unknown (0), r 40, procs
    // from the request (2), status unknown (included). Job 3's first line
    // is a partial execution (skipped); its summary line: w 5, r 40.
    // Job 4: r 0, excluded. Job 5: failed, excluded. Job 6: malformed.
    assert_eq!(v["jobs"], 3);
    assert_eq!(v["cores"], 16, "MaxProcs");
    assert_eq!(v["skipped"]["excluded"], 2);
    assert_eq!(v["wait"]["max"], 10.0);
    assert!((v["wait"]["mean"].as_f64().unwrap() - 5.0).abs() < 1e-12);
    // window [0, max(110, 60, 75)] = [0, 110]; Σ c·r = 400 + 80 + 80.
    assert_eq!(v["window"], serde_json::json!([0.0, 110.0]));
    assert!((v["utilization"].as_f64().unwrap() - 560.0 / (16.0 * 110.0)).abs() < 1e-12);
    // One note for what was not counted and how to count it, one
    // warning for the malformed line, one for job 2's unknown wait.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(
        err.contains("t.swf: 1 of its jobs have no wait time (−1 in the trace)"),
        "{err}"
    );
    assert!(
        err.contains("t.swf:11:") && err.contains("expected 18 fields, found 7"),
        "{err}"
    );
    assert!(
        err.contains("2 job(s) not counted: 1 failed, 1 no_run_time")
            && err.contains("--status all"),
        "{err}"
    );

    let strict = calcmets(&[
        "--swf",
        file.to_str().unwrap(),
        "--strict",
        "--format",
        "json",
    ]);
    assert_eq!(strict.status.code(), Some(1));

    let all = json(&calcmets(&[
        "--swf",
        file.to_str().unwrap(),
        "--status",
        "all",
        "--format",
        "json",
    ]));
    assert_eq!(
        all["jobs"], 4,
        "the failed job 5 (r 10) counts with --status all"
    );
}

#[test]
fn missing_core_count_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &fixture());
    let out = calcmets(&[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--cores"), "{err}");

    let trace = dir.path().join("noheader.swf");
    std::fs::write(&trace, "1 0 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1\n").unwrap();
    let out = calcmets(&["--swf", trace.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MaxProcs"));
}

/// A results directory as runworkload leaves it.
fn results_dir(root: &Path, name: &str, cores: u64, recs: &[JobRecord<'_>]) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("records")).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        format!("{{\"label\": \"{name}\", \"cores\": {cores}}}"),
    )
    .unwrap();
    write(&dir.join("records").join("jobs.rec"), recs);
}

#[test]
fn results_directories_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let recs = fixture();
    results_dir(dir.path(), "shrink-100", 8, &recs);
    results_dir(dir.path(), "shrink-50", 16, &recs[..2]);
    // The parent directory expands to its runs, in name order.
    let v = json(&calcmets(&[
        "--format",
        "json",
        dir.path().to_str().unwrap(),
    ]));
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["run"], "shrink-100");
    assert_eq!(runs[0]["jobs"], 3);
    assert_eq!(runs[0]["cores"], 8, "from the manifest");
    assert_eq!(runs[1]["run"], "shrink-50");
    assert_eq!(runs[1]["jobs"], 2);
    assert_eq!(runs[1]["cores"], 16);

    // The table has one column per run.
    let out = calcmets(&[dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("shrink-100") && header.contains("shrink-50"),
        "{text}"
    );
    let jobs = text.lines().find(|l| l.starts_with("jobs")).unwrap();
    assert_eq!(
        jobs.split_whitespace().collect::<Vec<_>>(),
        ["jobs", "3", "2"]
    );

    // CSV: a header and one row per run.
    let out = calcmets(&["--format", "csv", dir.path().to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("run,clock,jobs,cores,tau,window_start,window_end,makespan,wait_mean")
    );
    // Manifests without a factor and speed-up: the records' own clock.
    assert!(lines[1].starts_with("shrink-100,wall,3,8,"));

    // --merge reads them as one run (cores must then be given).
    let v = json(&calcmets(&[
        "--merge",
        "--cores",
        "8",
        "--format",
        "json",
        dir.path().to_str().unwrap(),
    ]));
    assert_eq!(v["jobs"], 5);
}

#[test]
fn by_size_breaks_down_by_powers_of_two() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &fixture());
    let v = json(&calcmets(&[
        "--cores",
        "8",
        "--by",
        "size",
        "--format",
        "json",
        file.to_str().unwrap(),
    ]));
    let classes = v["by_size"].as_array().unwrap();
    let names: Vec<&str> = classes
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["1", "2", "3-4", "5-8"]);
    let jobs: Vec<u64> = classes
        .iter()
        .map(|c| c["jobs"].as_u64().unwrap())
        .collect();
    assert_eq!(jobs, [1, 1, 1, 0]);
    assert_eq!(
        classes[3]["skipped"]["excluded"], 1,
        "the cancelled 8-core job"
    );
    let util: f64 = classes
        .iter()
        .filter_map(|c| c["utilization"].as_f64())
        .sum();
    assert!((util - v["utilization"].as_f64().unwrap()).abs() < 1e-12);

    let out = calcmets(&[
        "--cores",
        "8",
        "--by",
        "size",
        "--format",
        "csv",
        file.to_str().unwrap(),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1 + 1 + 4, "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("records,all,,,"));
}

#[test]
fn corrupt_frames_are_counted_in_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    let mut bytes = Vec::new();
    for r in fixture() {
        encode(&r, &mut bytes).unwrap();
    }
    bytes[20] ^= 0xff; // inside the first frame's payload
    bytes.extend_from_slice(b"CLJR\x01\x00"); // a torn write at the end
    std::fs::write(&file, &bytes).unwrap();
    let out = calcmets(&["--cores", "8", "--format", "json", file.to_str().unwrap()]);
    let v = json(&out);
    assert_eq!(v["jobs"], 2);
    assert_eq!(v["skipped"]["corrupt"], 1);
    assert_eq!(v["skipped"]["torn"], 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("jobs.rec") && err.contains("1 corrupt and 1 torn"),
        "{err}"
    );
    // `calcmets dump` counts the same damage the same way.
    let dump = calcmets(&["dump", file.to_str().unwrap()]);
    let dump_err = String::from_utf8_lossy(&dump.stderr);
    let line = |e: &str| {
        e.lines()
            .find(|l| l.contains("corrupt and"))
            .map(str::to_string)
    };
    assert_eq!(line(&dump_err), line(&err), "{dump_err}");
    let table =
        String::from_utf8(calcmets(&["--cores", "8", file.to_str().unwrap()]).stdout).unwrap();
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .map(str::to_string)
    };
    assert_eq!(row("corrupt frames").as_deref(), Some("1"), "{table}");
    assert_eq!(row("torn frames").as_deref(), Some("1"), "{table}");
    let out = calcmets(&["--cores", "8", "--strict", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["--window", "5:1", "x"][..],
        &["--tau", "-3", "x"],
        &["--cores", "0", "x"],
        &["--format", "xml", "x"],
        &[],
    ] {
        let out = calcmets(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("calcmets: "), "{err}");
    }
}
