//! `--held`: a process started ahead of its job counts nothing until the
//! SIGCONT that starts it, and leaves no record if it ends before that.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::Status;

/// The process's name, as `ps` shows it.
fn comm(child: &std::process::Child) -> String {
    let name = std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap();
    name.trim_end().to_string()
}

#[test]
fn a_held_job_starts_at_its_first_sigcont_and_counts_its_run_time_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.5", "--id", "7", "--held", "--log"])
        .arg(&log);
    let spawned = now_ns();
    let mut child = launch(cmd);
    // Held far longer than its run time: none of it may count.
    sleep_ms(1_200);
    assert_eq!(comm(&child), "sigsleep-held");
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "a held job ended by itself"
    );
    assert!(
        std::fs::metadata(&log).unwrap().len() == 0,
        "record before the start"
    );
    let sent = now_ns();
    signal(&child, libc::SIGCONT);
    sleep_ms(100);
    assert_eq!(comm(&child), "sigsleep", "still named as held once started");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_eq!((rec.id, rec.status), (7, Status::Completed));
    assert!(
        rec.start > spawned + 1_000 * MS,
        "started at its spawn: {rec:?}"
    );
    assert_near("start", rec.start, sent, DELIVERY);
    assert_near("end - start", rec.end - rec.start, 500 * MS, ACCOUNTING);
    assert!(rec.suspensions.is_empty(), "{rec:?}");
}

#[test]
fn a_held_job_is_suspended_and_resumed_as_any_once_started() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.6", "--held", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(200);
    signal(&child, libc::SIGCONT);
    sleep_ms(200);
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(400);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert_near(
        "end - start - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        600 * MS,
        ACCOUNTING,
    );
}

#[test]
fn a_held_job_ended_before_its_start_leaves_no_record() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("jobs.rec");
        let mut cmd = sigsleep();
        cmd.args(["--runtime", "30", "--held", "--log"]).arg(&log);
        let mut child = launch(cmd);
        sleep_ms(200);
        signal(&child, sig);
        assert_eq!(child.wait().unwrap().code(), Some(128 + sig));
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0, "signal {sig}");
    }
}

/// Signals pending together are let in lowest number first, SIGTERM before
/// SIGCONT: a cancel right behind the start still finds a started job, and
/// the record says it was cancelled.
#[test]
fn a_cancel_right_behind_the_start_is_a_cancelled_job_with_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "30", "--id", "4", "--held", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    sleep_ms(200);
    // Stopped, it lets no handler run: both signals wait, then come in
    // together when it continues.
    signal(&child, libc::SIGSTOP);
    wait_state(&child, 'T');
    signal(&child, libc::SIGTERM);
    let sent = now_ns();
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    let rec = only_record(&log);
    assert_eq!((rec.id, rec.status), (4, Status::Cancelled));
    assert_near("start", rec.start, sent, DELIVERY);
    assert!(rec.end - rec.start < DELIVERY, "{rec:?}");
}

/// A SIGTSTP before any SIGCONT (the kernel discards a pending SIGCONT
/// when a stop signal is sent: a start, then a suspension, before the
/// process ran) starts the job suspended.
#[test]
fn a_suspension_before_the_start_starts_the_job_suspended() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.4", "--held", "--log"]).arg(&log);
    let mut child = launch(cmd);
    sleep_ms(300);
    let stopped = now_ns();
    signal(&child, libc::SIGTSTP);
    wait_state(&child, 'T');
    sleep_ms(500);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let rec = only_record(&log);
    assert_near("start", rec.start, stopped, DELIVERY);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert!(rec.suspended_ns() >= 450 * MS, "{rec:?}");
    assert_near(
        "end - start - suspended",
        rec.end - rec.start - rec.suspended_ns(),
        400 * MS,
        ACCOUNTING,
    );
}

/// A controller's start reaches a held process on its `SIGCONT`: the job
/// started then, and its run counts from then, not from the signal.
#[test]
fn a_start_carried_by_the_sigcont_is_the_jobs_start_and_its_run_counts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "1.0", "--id", "8", "--held", "--log"])
        .arg(&log);
    let mut child = launch(cmd);
    sleep_ms(300);
    // Started 0.6 s before the signal reaches it.
    let started = now_ns() - 600 * MS;
    sigsleep::signals::send_start(child.id() as i32, started).unwrap();
    let sent = now_ns();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let ended = now_ns();
    let rec = only_record(&log);
    assert_eq!(rec.start, started, "{rec:?}");
    assert_near("end - start", rec.end - rec.start, 1_000 * MS, ACCOUNTING);
    assert_near(
        "its life after the signal",
        ended - sent,
        400 * MS,
        ACCOUNTING,
    );
}

/// A sleep of `runtime` (`--runtime` text) launched with `--started
/// started`, run to its end: its record, and the instants just before its
/// launch and just after its exit.
fn run_started(runtime: &str, started: i64) -> (formats::record::JobRecord<'static>, i64, i64) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let at = format!("{}.{:09}", started / 1_000_000_000, started % 1_000_000_000);
    let mut cmd = sigsleep();
    cmd.args(["--runtime", runtime, "--started", &at, "--log"])
        .arg(&log);
    let launched = now_ns();
    let mut child = launch(cmd);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let ended = now_ns();
    (only_record(&log), launched, ended)
}

/// `--started`: a process launched after its job's start counts its run
/// from that start; one given a start after its own first instant (a
/// launcher's clock ahead) starts at its first instant.
#[test]
fn started_moves_a_launched_jobs_start_back_never_forward() {
    let started = now_ns() - 700 * MS;
    let (rec, launched, ended) = run_started("1.0", started);
    assert_eq!(rec.start, started, "{rec:?}");
    assert_near("end - start", rec.end - rec.start, 1_000 * MS, ACCOUNTING);
    assert_near("its life", ended - launched, 300 * MS, ACCOUNTING);

    let ahead = now_ns() + 60_000 * MS;
    let (rec, launched, _) = run_started("0.2", ahead);
    assert!(rec.start >= launched && rec.start < ahead, "{rec:?}");
    assert_near("end - start", rec.end - rec.start, 200 * MS, ACCOUNTING);
}

/// A sleep launched after its whole run time was done has run that long
/// by its first instant: it starts then, the rest of its launch counting
/// as waiting, and its run is its run time, not its launch.
#[test]
fn a_start_goes_back_no_further_than_the_run_time() {
    let (rec, launched, ended) = run_started("0.2", now_ns() - 900 * MS);
    assert_near("start", rec.start, launched - 200 * MS, ACCOUNTING);
    assert_near("end - start", rec.end - rec.start, 200 * MS, ACCOUNTING);
    assert!(ended - launched < 200 * MS, "it slept: {rec:?}");
}
