//! Where a cluster's records go: with `serve --state-dir DIR`, into
//! `DIR/records` unless the config says otherwise, and never into a record
//! directory another running controller writes.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{binary, free_port};
use formats::record::decode_all;

/// A config with neither state_dir nor record_dir: both come from
/// `serve --state-dir`.
fn config(dir: &Path, record_dir: Option<&Path>) -> std::path::PathBuf {
    let path = dir.join(format!("cluster-{}.toml", free_port()));
    let records = record_dir.map_or(String::new(), |r| {
        format!("record_dir = \"{}\"\n", r.display())
    });
    std::fs::write(
        &path,
        format!(
            "[controller]\nlisten = \"127.0.0.1:0\"\nschedule_interval_s = 0.005\n{records}\n\
             [agents]\nlocal = true\nsigsleep = \"{}\"\n\n\
             [[nodes]]\nnames = \"vn[1-2]\"\ncpus = 2\n",
            binary("sigsleep").display()
        ),
    )
    .unwrap();
    path
}

fn serve(config: &Path, state: &Path) -> Child {
    Command::new(binary("controller"))
        .arg("serve")
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn client(config: &Path, state: &Path, args: &[&str]) -> Output {
    let addr = std::fs::read_to_string(state.join("address")).unwrap_or_default();
    Command::new(binary("controller"))
        .arg("--config")
        .arg(config)
        .args(["--addr", addr.trim()])
        .arg("--secret-file")
        .arg(state.join("secret"))
        .args(args)
        .output()
        .unwrap()
}

fn wait_up(config: &Path, state: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !client(config, state, &["stats"]).status.success() {
        assert!(Instant::now() < deadline, "controller did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(mut c: Child) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    c.wait().unwrap();
}

/// Regression: both clusters wrote the config's default record file.
#[test]
fn each_state_dir_keeps_its_own_records() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), None);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (sa, sb) = (serve(&cfg, &a), serve(&cfg, &b));
    wait_up(&cfg, &a);
    wait_up(&cfg, &b);
    for (state, count) in [(&a, "1"), (&b, "2")] {
        let out = client(&cfg, state, &["submit", "--cores", "1", "--runtime", "0.1"]);
        assert!(out.status.success(), "{out:?}");
        let out = client(
            &cfg,
            state,
            &[
                "submit",
                "--cores",
                "1",
                "--runtime",
                "0.1",
                "--count",
                count,
            ],
        );
        assert!(out.status.success(), "{out:?}");
        let out = client(&cfg, state, &["wait"]);
        assert!(out.status.success(), "{out:?}");
    }
    stop(sa);
    stop(sb);
    let count = |state: &Path| {
        let bytes = std::fs::read(state.join("records/jobs.rec")).unwrap();
        decode_all(&bytes).0.len()
    };
    assert_eq!((count(&a), count(&b)), (2, 3));
}

#[test]
fn a_second_controller_on_a_record_dir_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared-records");
    let cfg = config(dir.path(), Some(&shared));
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let first = serve(&cfg, &a);
    wait_up(&cfg, &a);
    let second = serve(&cfg, &b).wait_with_output().unwrap();
    assert_eq!(second.status.code(), Some(2));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("record directory")
            && err.contains("in use by another controller")
            && err.contains(&first.id().to_string())
            && err.contains("record_dir"),
        "{err}"
    );
    stop(first);
    // Once the first is gone, the directory is free.
    let again = serve(&cfg, &b);
    wait_up(&cfg, &b);
    stop(again);
}
