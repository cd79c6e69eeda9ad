//! SIGTERM and SIGINT end a job early with status cancelled and a record;
//! the wall-time limit ends it with status timeout.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::Status;

fn cancel_with(sig: libc::c_int) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "30", "--id", "3", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    sleep_ms(200);
    let sent = now_ns();
    signal(&child, sig);
    assert_eq!(child.wait().unwrap().code(), Some(128 + sig));
    let rec = only_record(&log);
    assert_eq!(rec.id, 3);
    assert_eq!(rec.status, Status::Cancelled);
    assert_near("end", rec.end, sent, DELIVERY);
}

#[test]
fn sigterm_cancels() {
    cancel_with(libc::SIGTERM);
}

#[test]
fn sigint_cancels() {
    cancel_with(libc::SIGINT);
}

#[test]
fn sigterm_while_suspended_cancels_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "30", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    signal(&child, libc::SIGTERM);
    sleep_ms(200);
    // Still stopped: a handled signal does not wake a stopped process.
    assert_eq!(state(&child), 'T');
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Cancelled);
    assert_eq!(rec.suspensions.len(), 1);
    assert!(rec.suspended_ns() >= 150 * MS, "{rec:?}");
}

#[test]
fn walltime_limit_ends_in_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "30", "--walltime", "1.5", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    // Suspended time does not count against the limit, as in Slurm.
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(500);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(124));
    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Timeout);
    assert_eq!(rec.walltime, 1_500 * MS as u64);
    assert_eq!(rec.suspensions.len(), 1);
    assert_near(
        "wall - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        1_500 * MS,
        ACCOUNTING,
    );
}
