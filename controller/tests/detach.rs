//! `controller serve --detach` returns once the controller listens, so the
//! next command of a script finds it; one that cannot start says why.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::process::Command;

use common::{binary, config_text};

#[test]
fn a_detached_controller_is_up_when_serve_returns() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, config_text(dir.path(), "vn[1-2]", 2, true, "")).unwrap();
    let serve = || {
        Command::new(binary("controller"))
            .args(["serve", "--detach", "--config"])
            .arg(&config)
            .output()
            .unwrap()
    };
    let out = serve();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: i32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // At once: no retry, no sleep.
    let ctl = |args: &[&str]| {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let stats = ctl(&["stats"]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    assert!(dir.path().join("state/controller.log").is_file());

    // A second one on the same state directory: refused, and why.
    let again = serve();
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("did not start") && err.contains("in use by another controller"),
        "{err}"
    );

    assert!(ctl(&["shutdown"]).status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    // Gone, or a zombie waiting for whoever adopted it to reap it.
    while common::proc_state(pid).is_some_and(|s| s != 'Z') {
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
