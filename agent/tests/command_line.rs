//! The agent binary's edges: bad flags, an unsafe secret file, a
//! controller that is not there. Each is a one-line error and exit 2.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent"))
}

fn secret(dir: &std::path::Path, mode: u32) -> std::path::PathBuf {
    let p = dir.join(format!("secret-{mode:o}"));
    std::fs::write(&p, "s3cret\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// A loopback address nobody listens on (a port bound, then released).
fn unused_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = agent().args(["--nodes", "vn1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--controller") && err.contains("--cpus"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let s = secret(dir.path(), 0o600);
    let out = agent()
        .args([
            "--controller",
            "127.0.0.1:1",
            "--nodes",
            "vn[1-",
            "--cpus",
            "4",
        ])
        .arg("--secret-file")
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--nodes"));
}

#[test]
fn a_world_readable_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = secret(dir.path(), 0o644);
    let out = agent()
        .args([
            "--controller",
            "127.0.0.1:1",
            "--nodes",
            "vn1",
            "--cpus",
            "4",
        ])
        .arg("--secret-file")
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("readable by everyone") && err.contains("secret-644"),
        "{err}"
    );
}

#[test]
fn an_absent_controller_is_reported_with_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let s = secret(dir.path(), 0o600);
    let addr = unused_addr();
    let out = agent()
        .args([
            "--controller",
            &addr,
            "--nodes",
            "vn1",
            "--cpus",
            "4",
            "--connect-timeout",
            "1",
        ])
        .arg("--secret-file")
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // What it tried and why it failed, when it first failed; then the
    // error it gave up on.
    let err = String::from_utf8_lossy(&out.stderr);
    // (Not what it says of its sigsleep: a musl build of other code in
    // the workspace is said too.)
    let lines: Vec<&str> = err
        .trim()
        .lines()
        .filter(|l| !l.contains("agent::settings"))
        .collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains("cannot reach the controller")
            && lines[0].contains(&addr)
            && lines[0].contains("Connection refused")
            && lines[0].contains("retrying"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("agent: ") && lines[1].contains(&addr),
        "{err}"
    );
}

/// Regression: an agent that could not reach its controller said nothing
/// for its whole connect timeout (30 s by default).
#[test]
fn an_unreachable_controller_is_reported_at_once_while_retrying() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let s = secret(dir.path(), 0o600);
    let addr = unused_addr();
    let mut child = agent()
        .args(["--controller", &addr, "--nodes", "vn1", "--cpus", "4"])
        .arg("--secret-file")
        .arg(&s)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // The first line of what it says of the controller (not of its
        // sigsleep).
        let mut line = String::new();
        let mut read = std::io::BufReader::new(stderr);
        while read.read_line(&mut line).is_ok_and(|n| n > 0) && line.contains("agent::settings") {
            line.clear();
        }
        let _ = tx.send(line);
    });
    // Generous: the agent says it within milliseconds, not 30 s.
    let line = rx.recv_timeout(std::time::Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("nothing said within 10 s");
    assert!(
        line.contains(&addr) && line.contains("retrying for 30 s"),
        "{line}"
    );
}
