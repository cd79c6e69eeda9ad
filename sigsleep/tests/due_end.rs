//! A sleep's record ends it when it was due, not when its process woke: the
//! timer fires a little after the deadline (50 µs of timer slack for a
//! process not scheduled in real time, more on a busy host), and that
//! lateness is the host's, not the job's run.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::Status;

#[test]
fn a_completed_sleep_runs_exactly_its_run_time_suspensions_apart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.3", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(200);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let exited = now_ns();

    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    let run = rec.end - rec.start - rec.suspended_ns();
    // To the nanosecond: every instant of the record is on the start's
    // reading of the wall clock.
    assert_eq!(run, 300 * MS, "{rec:?}");
    assert!(rec.end < exited, "{rec:?} ended after its process");
}

#[test]
fn a_sleep_at_its_limit_ends_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "5", "--walltime", "0.2", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    assert_eq!(child.wait().unwrap().code(), Some(124));

    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Timeout);
    assert_eq!(rec.end - rec.start, 200 * MS, "{rec:?}");
}
