//! A running job's wall-time limit changed (`scontrol update TimeLimit=`):
//! sent as a queued realtime signal, it moves the job's end whether the
//! job sleeps or runs a program, and says how it ends.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::Status;
use sigsleep::signals::send_limit;

const S: u64 = 1_000_000_000;

#[test]
fn a_limit_lifted_lets_a_sleep_complete_and_one_lowered_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "2", "--walltime", "1", "--id", "1", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    send_limit(child.id() as i32, 0).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Completed);
    assert!(rec.end - rec.start >= 2 * S as i64, "{rec:?}");

    let log = dir.path().join("lowered.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "60", "--walltime", "60", "--id", "2", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    let sent = now_ns();
    // Raised first, then lowered: the last one sent is the limit.
    send_limit(child.id() as i32, 120 * S).unwrap();
    send_limit(child.id() as i32, S).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(sigsleep::EXIT_TIMEOUT));
    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Timeout);
    assert_near("end", rec.end, rec.start + S as i64, 500 * MS);
    assert!(rec.end >= sent);
}

#[test]
fn a_limit_lowered_ends_a_program_as_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args([
        "--walltime",
        "600",
        "--kill-wait",
        "1",
        "--id",
        "3",
        "--log",
    ])
    .arg(&log)
    .args(["--", "/bin/sh", "-c", "sleep 300"]);
    let mut child = launch(cmd);
    sleep_ms(200);
    // Already past: due at once.
    send_limit(child.id() as i32, 100 * MS as u64).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(sigsleep::EXIT_TIMEOUT));
    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Timeout);
    assert!(rec.end - rec.start < 5 * S as i64, "{rec:?}");
}
