//! `--realtime`: once set up, the job waits under SCHED_FIFO where the host
//! allows it (root here and in CI), and a job without it waits as any.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

/// The scheduling policy of a process (field 41 of /proc/PID/stat:
/// 0 normal, 1 FIFO).
fn policy(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(41 - 3).unwrap().parse().unwrap()
}

#[test]
fn a_realtime_job_waits_first_in_first_out_and_counts_as_any() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    for realtime in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (log, ready) = (dir.path().join("jobs.rec"), dir.path().join("ready"));
        let mut cmd = sigsleep();
        cmd.args(["--runtime", "0.4", "--log"])
            .arg(&log)
            .arg("--ready-file")
            .arg(&ready);
        if realtime {
            cmd.arg("--realtime");
        }
        let mut child = launch(cmd);
        while !ready.exists() {
            sleep_ms(5);
        }
        let want = u32::from(realtime && root);
        assert_eq!(
            policy(child.id()),
            want,
            "--realtime {realtime}, root {root}"
        );
        assert_eq!(child.wait().unwrap().code(), Some(0));
        let rec = only_record(&log);
        assert_near("end - start", rec.end - rec.start, 400 * MS, ACCOUNTING);
    }
}
