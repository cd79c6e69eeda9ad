//! A job suspended twice for known intervals records both intervals, and its
//! wall time is its run time plus its suspended time.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::{Flags, Status};

#[test]
fn two_suspensions_are_recorded_and_excluded_from_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args([
        "--runtime",
        "1.5",
        "--id",
        "7",
        "--cores",
        "4",
        "--node",
        "vn0001",
    ])
    .args(["--submit", "1700000000.25", "--log"])
    .arg(&log);
    let mut child = launch(cmd);

    let mut sent = Vec::new();
    for (run_ms, stop_ms) in [(300, 400), (300, 600)] {
        sleep_ms(run_ms);
        let s = now_ns();
        signal(&child, libc::SIGTSTP);
        wait_state(&child, 'T');
        sleep_ms(stop_ms);
        let r = now_ns();
        signal(&child, libc::SIGCONT);
        sent.push((s, r));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));

    let rec = only_record(&log);
    assert_eq!((rec.id, rec.cores, &*rec.node), (7, 4, "vn0001"));
    assert_eq!(rec.submit, 1_700_000_000_250_000_000);
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.flags, Flags::default());
    assert_eq!(rec.suspensions.len(), 2, "{:?}", rec.suspensions);
    for (got, (s, r)) in rec.suspensions.iter().zip(&sent) {
        assert_near("suspend instant", got.suspend, *s, DELIVERY);
        assert_near("resume instant", got.resume, *r, DELIVERY);
        // Each interval is what the test held the job stopped for, to
        // within the difference of two delivery lags.
        assert_near("interval", got.resume - got.suspend, r - s, INTERVAL);
    }
    // sigsleep's own accounting: wall = run + suspended, to within the
    // timer's wake-up latency, and never short.
    let wall = rec.end - rec.start;
    assert!(
        wall - rec.suspended_ns() >= 1_500 * MS,
        "ended early: {rec:?}"
    );
    assert_near(
        "wall - suspended",
        wall - rec.suspended_ns(),
        1_500 * MS,
        ACCOUNTING,
    );
}

#[test]
fn a_suspension_right_after_launch_is_accounted() {
    // The launcher blocks the job signals, so a SIGTSTP sent before sigsleep
    // has installed its handlers waits for them instead of stopping the
    // process unseen (the failure seen with Slurm).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.3", "--log"]).arg(&log);
    let mut child = launch(cmd);
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(500);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert!(rec.suspended_ns() >= 400 * MS, "{rec:?}");
    assert_near(
        "wall - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        300 * MS,
        ACCOUNTING,
    );
}
