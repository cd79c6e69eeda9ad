//! A launcher that cannot block the job signals (a shell) waits for
//! `--ready-file` and then signals when it likes: the suspension is
//! accounted from the first instant. The file is gone when the job ends.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::os::unix::process::CommandExt;
use std::process::Stdio;

use common::*;

#[test]
fn a_suspension_sent_as_soon_as_the_ready_file_appears_is_accounted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let ready = dir.path().join("job.ready");
    let launched = now_ns();
    // Spawned as a shell with job control does: the job signals not
    // blocked, a process group of its own (in the test's group, which may
    // be orphaned when the tests run detached, the kernel would discard
    // the stop).
    let mut child = sigsleep()
        .process_group(0)
        .args(["--runtime", "1", "--id", "1", "--log"])
        .arg(&log)
        .arg("--ready-file")
        .arg(&ready)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ready.exists() {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let pid: u32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, child.id(), "the ready file holds the job's pid");
    let suspended = now_ns();
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(1000);
    let resumed = now_ns();
    signal(&child, libc::SIGCONT);
    assert!(child.wait().unwrap().success());

    let r = only_record(&log);
    assert!(
        r.start >= launched && r.start <= suspended,
        "started before it was ready"
    );
    assert_eq!(r.suspensions.len(), 1, "{r:?}");
    let s = r.suspensions[0];
    assert_near("suspend", s.suspend, suspended, DELIVERY);
    assert_near(
        "suspended for",
        s.resume - s.suspend,
        resumed - suspended,
        INTERVAL,
    );
    assert_near(
        "run time",
        r.end - r.start - r.suspended_ns(),
        1_000_000_000,
        ACCOUNTING,
    );
    assert!(!ready.exists(), "the ready file outlived the job");
}

#[test]
fn a_ready_file_that_cannot_be_written_stops_the_job_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = sigsleep()
        .args(["--runtime", "60", "--log"])
        .arg(dir.path().join("jobs.rec"))
        .arg("--ready-file")
        .arg(dir.path().join("no/such/dir/job.ready"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ready-file") && err.contains("no/such/dir"),
        "{err}"
    );
}
