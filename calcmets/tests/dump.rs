//! `calcmets dump --format jsonl`: one JSON object per record with exactly
//! the fields of docs/design.md; damaged input is reported against its file.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Stdio};

use formats::record::{encode, Flags, JobRecord, Status, Suspension};

fn calcmets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_calcmets"))
}

fn rec(id: u64) -> JobRecord<'static> {
    JobRecord {
        id,
        cores: 8,
        node: Cow::Owned(format!("vn{id:03}")),
        submit: 1_700_000_000_000_000_000,
        start: 1_700_000_010_500_000_000,
        end: 1_700_000_030_500_000_000,
        runtime: 15_000_000_000,
        walltime: 0,
        status: Status::Completed,
        flags: Flags::BARE_STOP,
        suspensions: vec![Suspension {
            suspend: 1_700_000_012_000_000_000,
            resume: 1_700_000_017_000_000_000,
        }],
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

#[test]
fn fields_and_values_are_as_designed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    write(&file, &[rec(1), rec(2)]);
    let out = calcmets()
        .args(["dump", "--format", "jsonl"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let obj = lines[0].as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cores",
            "end",
            "flags",
            "id",
            "node",
            "runtime",
            "start",
            "status",
            "submit",
            "suspensions",
            "walltime"
        ]
    );
    let v = &lines[0];
    assert_eq!(v["id"], 1);
    assert_eq!(v["cores"], 8);
    assert_eq!(v["node"], "vn001");
    assert_eq!(v["submit"], 1_700_000_000.0);
    assert_eq!(v["start"], 1_700_000_010.5);
    assert_eq!(v["end"], 1_700_000_030.5);
    assert_eq!(v["runtime"], 15.0);
    assert_eq!(v["walltime"], 0.0);
    assert_eq!(v["status"], "completed");
    assert_eq!(
        v["suspensions"],
        serde_json::json!([[1_700_000_012.0, 1_700_000_017.0]])
    );
    assert_eq!(v["flags"], serde_json::json!(["bare_stop"]));
}

#[test]
fn directories_are_walked_for_record_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("b/deeper")).unwrap();
    write(&dir.path().join("b/deeper/z.rec"), &[rec(3)]);
    write(&dir.path().join("a.rec"), &[rec(1), rec(2)]);
    std::fs::write(dir.path().join("manifest.json"), "{}").unwrap();
    let out = calcmets().arg("dump").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let ids: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [1, 2, 3]);
}

#[test]
fn damage_is_reported_per_file_and_strict_makes_it_fail() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("torn.rec");
    let mut bytes = Vec::new();
    encode(&rec(1), &mut bytes).unwrap();
    encode(&rec(2), &mut bytes).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&file, &bytes).unwrap();

    let out = calcmets().arg("dump").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("torn.rec") && err.contains("1 torn"), "{err}");

    let out = calcmets()
        .args(["dump", "--strict"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn standard_input_and_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.rec");
    write(&file, &(0..20_000).map(rec).collect::<Vec<_>>());
    let mut child = calcmets()
        .args(["dump", "-"])
        .stdin(std::fs::File::open(&file).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line and hang up, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn missing_input_is_a_one_line_error_with_exit_2() {
    let out = calcmets()
        .args(["dump", "/nonexistent/x.rec"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/x.rec"), "{err}");
}

#[test]
fn a_program_job_shows_how_its_program_ended() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.rec");
    let mut r = rec(3);
    r.status = Status::Failed;
    // A program asks no run time; out of memory, it is flagged.
    r.runtime = u64::MAX;
    r.flags = Flags::OUT_OF_MEMORY;
    r.program = Some(formats::record::ProgramEnd {
        kind: formats::record::ProgramEnd::SIGNALED,
        value: 9,
        cpu_ns: 1_500_000_000,
        max_rss_kib: 2048,
    });
    write(&file, &[r, rec(4)]);
    let out = calcmets().arg("dump").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0]["program"],
        serde_json::json!({"exit_code": "0:9", "started": true, "cpu": 1.5, "max_rss_kib": 2048})
    );
    assert_eq!(lines[0]["status"], "failed");
    assert_eq!(lines[0]["runtime"], serde_json::Value::Null);
    assert_eq!(lines[0]["flags"], serde_json::json!(["out_of_memory"]));
    assert!(lines[1].get("program").is_none(), "a sleep has none");
    assert_eq!(lines[1]["runtime"], 15.0);
}
