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
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&addr), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
