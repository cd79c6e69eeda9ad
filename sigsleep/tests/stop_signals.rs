//! Stops sigsleep could not see coming: a bare SIGSTOP is flagged, and the
//! Slurm sequence (SIGTSTP, SIGSTOP later, SIGCONT) is one suspension.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::{Flags, Status};

#[test]
fn bare_sigstop_is_detected_on_sigcont_and_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "1", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(200);
    signal(&child, libc::SIGSTOP);
    wait_state(&child, 'T');
    sleep_ms(300);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let rec = only_record(&log);
    assert_eq!(rec.status, Status::Completed);
    assert!(rec.flags.contains(Flags::BARE_STOP), "{rec:?}");
    // The stop began unseen, before the deadline: sigsleep claims no
    // suspended time for it, so the job counted the stop as run time.
    assert_eq!(rec.suspensions, vec![], "{rec:?}");
    assert_near("wall", rec.end - rec.start, 1_000 * MS, ACCOUNTING);
}

#[test]
fn bare_sigstop_across_the_deadline_counts_the_time_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.3", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    signal(&child, libc::SIGSTOP);
    wait_state(&child, 'T');
    sleep_ms(700);
    let resumed = now_ns();
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let rec = only_record(&log);
    assert!(rec.flags.contains(Flags::BARE_STOP), "{rec:?}");
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    let s = rec.suspensions[0];
    // From the deadline (start + 0.3 s) to the resume.
    assert_near("suspend", s.suspend, rec.start + 300 * MS, ACCOUNTING);
    assert_near("resume", s.resume, resumed, DELIVERY);
    assert_near(
        "wall - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        300 * MS,
        ACCOUNTING,
    );
}

#[test]
fn slurm_sequence_is_one_suspension() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.5", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(100);
    // slurmstepd: SIGTSTP, a grace period (2 s there), then SIGSTOP.
    let suspended = now_ns();
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(500);
    signal(&child, libc::SIGSTOP);
    sleep_ms(300);
    let resumed = now_ns();
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let rec = only_record(&log);
    assert!(!rec.flags.contains(Flags::BARE_STOP), "{rec:?}");
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert_near("suspend", rec.suspensions[0].suspend, suspended, DELIVERY);
    assert_near("resume", rec.suspensions[0].resume, resumed, DELIVERY);
    assert_near(
        "wall - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        500 * MS,
        ACCOUNTING,
    );
}
