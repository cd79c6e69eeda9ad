//! Regression: a SIGCONT sent right behind a SIGTSTP must never leave the
//! job stopped for good. (A job that stopped itself from its SIGTSTP handler
//! lost such a resume: raising a stop signal discards a pending SIGCONT.)

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

#[test]
fn resume_right_behind_suspend_is_never_lost() {
    const N: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut children = Vec::new();
    for id in 0..N {
        let mut cmd = sigsleep();
        cmd.args(["--runtime", "1", "--id", &id.to_string(), "--log"])
            .arg(&log);
        children.push(launch(cmd));
    }
    sleep_ms(300);
    for (i, c) in children.iter().enumerate() {
        signal(c, libc::SIGTSTP);
        // 0 to ~60 µs between the two: the window in which the suspend is
        // being handled.
        let until = Instant::now() + Duration::from_micros((i % 7) as u64 * 10);
        while Instant::now() < until {}
        signal(c, libc::SIGCONT);
    }
    // Every job must finish on its own: none may be left stopped.
    let deadline = Instant::now() + Duration::from_secs(30);
    for mut c in children {
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert_eq!(status.code(), Some(0));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "job {} still in state {} long after its resume",
                c.id(),
                state(&c)
            );
            sleep_ms(20);
        }
    }
    let (recs, stats) = records(&log);
    assert_eq!(stats.damaged(), 0);
    assert_eq!(recs.len(), N);
}

#[test]
fn in_an_orphaned_process_group_a_suspension_still_counts() {
    // Under setsid the job's process group is orphaned and the kernel
    // ignores SIGTSTP's default action: the job is not stopped, but it is
    // suspended all the same until SIGCONT.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.3", "--log"]).arg(&log);
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    sleep_ms(100);
    let s = now_ns();
    signal(&child, libc::SIGTSTP);
    sleep_ms(600);
    let r = now_ns();
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert_near("interval", rec.suspended_ns(), r - s, INTERVAL);
    assert_near(
        "wall - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        300 * MS,
        ACCOUNTING,
    );
}
