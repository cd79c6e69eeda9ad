//! `--end-fd`: once its record is written, sigsleep tells its launcher on
//! a descriptor (the agent's socket; a pipe here) that the job ended (pid,
//! exit status, when), before the process is gone; a program it runs never
//! gets that descriptor.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use common::*;
use sigsleep::end::{End, LEN};

/// A pipe: (read end, write end), both close-on-exec.
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors, which nothing else owns.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

/// `cmd` launched with the write end `w` as its descriptor 3; the end
/// message it writes there, once it has exited, and its pid.
fn end_of(mut cmd: std::process::Command, r: OwnedFd, w: OwnedFd) -> (End, u32) {
    let fd = w.as_raw_fd();
    // SAFETY: only dup2, async-signal-safe, between fork and exec; it
    // leaves descriptor 3 inheritable.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = launch(cmd);
    drop(w);
    let pid = child.id();
    let mut b = [0u8; LEN];
    let mut r = std::fs::File::from(r);
    r.read_exact(&mut b).unwrap();
    let status = child.wait().unwrap();
    // One message, and nothing after it.
    assert_eq!(r.read(&mut [0u8; 1]).unwrap(), 0);
    let end = End::decode(&b);
    assert_eq!(Some(end.code), status.code());
    (end, pid)
}

fn mono_ns() -> i64 {
    sigsleep::clock::now().mono
}

#[test]
fn the_end_is_said_once_the_record_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let (r, w) = pipe();
    let before = mono_ns();
    let mut cmd = sigsleep();
    cmd.args(["--runtime", "0.05", "--id", "4", "--end-fd", "3", "--log"])
        .arg(&log);
    let (end, pid) = end_of(cmd, r, w);
    assert_eq!(end.pid, pid as i32);
    assert_eq!(end.code, 0);
    assert!(end.at_ns >= before + 50 * MS && end.at_ns <= mono_ns());
    assert_eq!(only_record(&log).id, 4);
}

#[test]
fn a_program_never_gets_the_descriptor_and_its_status_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let (r, w) = pipe();
    let mut cmd = sigsleep();
    cmd.args(["--id", "5", "--end-fd", "3", "--log"])
        .arg(&log)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "test -e /proc/$$/fd/3 && exit 9; exit 6",
        ]);
    let (end, pid) = end_of(cmd, r, w);
    assert_eq!(end.pid, pid as i32);
    assert_eq!(end.code, 6);
    assert_eq!(only_record(&log).id, 5);
}
