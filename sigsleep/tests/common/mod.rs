//! Helpers shared by sigsleep's integration tests: launch the real binary
//! the way a launcher should, send real signals, read back real records.
#![allow(dead_code)] // each test file uses a different subset
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic the test

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use formats::record::{decode_all, DecodeStats, JobRecord};

pub const MS: i64 = 1_000_000;
pub const S: i64 = 1_000_000_000;

// Tolerances. On an idle machine every figure below is well under 1 ms;
// these are sized for a loaded 2-core CI machine, where a process can wait
// tens of milliseconds to be scheduled, so that the tests never flake. The
// latency itself is measured by the benchmarks, not here.

/// An instant the test took around kill(2) against the instant sigsleep
/// recorded when the signal was delivered.
pub const DELIVERY: i64 = 250 * MS;
/// A suspended interval against the interval between the test's two
/// kill(2) calls: the difference of two delivery lags.
pub const INTERVAL: i64 = 25 * MS;
/// sigsleep's own accounting (wall − suspended against the run time): only
/// the timer's wake-up latency.
pub const ACCOUNTING: i64 = 50 * MS;

pub fn sigsleep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sigsleep"))
}

/// Starts `cmd` in its own process group with the job signals blocked, as
/// the agent does, so that a signal sent at once is not lost.
pub fn launch(cmd: Command) -> Child {
    launch_in_group(cmd, 0)
}

/// As [`launch`], in process group `pgid` (0: a new group of its own).
pub fn launch_in_group(mut cmd: Command, pgid: libc::pid_t) -> Child {
    // As a launcher must: the limit signal's default action ends a process.
    let limit = sigsleep::signals::limit_signal();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [
                libc::SIGTSTP,
                libc::SIGCONT,
                libc::SIGTERM,
                libc::SIGINT,
                limit,
            ] {
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            // A test run a shell started in the background without job
            // control has SIGINT ignored, which sigsleep keeps, as a
            // shell's background job does: not what these tests are of.
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.process_group(pgid).stdin(Stdio::null());
    cmd.spawn().expect("spawn sigsleep")
}

pub fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: plain kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({}, {sig})", child.id());
}

pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// The process state letter from /proc/PID/stat ('S' sleeping, 'T' stopped).
pub fn state(child: &Child) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    // The state follows the parenthesised command name.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Polls until the process is in state `want` (up to 10 s).
pub fn wait_state(child: &Child, want: char) {
    for _ in 0..1000 {
        if state(child) == want {
            return;
        }
        sleep_ms(10);
    }
    panic!("process {} never reached state {want}", child.id());
}

pub fn records(path: &Path) -> (Vec<JobRecord<'static>>, DecodeStats) {
    decode_all(&std::fs::read(path).unwrap())
}

pub fn only_record(path: &Path) -> JobRecord<'static> {
    let (recs, stats) = records(path);
    assert_eq!(stats.damaged(), 0, "{stats:?}");
    assert_eq!(recs.len(), 1, "{recs:?}");
    recs.into_iter().next().unwrap()
}

/// Asserts |a - b| <= tol, in nanoseconds, with a readable message.
#[track_caller]
pub fn assert_near(what: &str, a: i64, b: i64, tol: i64) {
    assert!(
        (a - b).abs() <= tol,
        "{what}: {a} vs {b} differ by {:.3} ms (tolerance {:.3} ms)",
        (a - b) as f64 / 1e6,
        tol as f64 / 1e6
    );
}
