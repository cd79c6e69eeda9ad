//! Bad flags are a usage error (exit 2); a log that cannot be opened is an
//! error on stderr (exit 1) and nothing is run.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in [
        &["--log", "/tmp/x"][..],
        &["--runtime", "abc", "--log", "/tmp/x"],
        &["--runtime", "1", "--log", "/tmp/x", "--cores", "0"],
        &["--runtime", "1", "--log", "/tmp/x", "--frobnicate"],
    ] {
        let out = sigsleep()
            .args(args)
            .env_remove("SIGSLEEP_LOG")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("sigsleep: "), "{err}");
        assert_eq!(err.lines().count(), 2, "{err}");
    }
}

#[test]
fn unopenable_log_exits_1_at_once() {
    let started = std::time::Instant::now();
    let out = sigsleep()
        .args(["--runtime", "30", "--log", "/nonexistent/dir/jobs.rec"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed().as_secs() < 10, "it slept before failing");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/dir/jobs.rec"), "{err}");
}

#[test]
fn log_path_from_environment() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("env.rec");
    let out = sigsleep()
        .args(["--runtime", "0", "--id", "9"])
        .env("SIGSLEEP_LOG", &log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(only_record(&log).id, 9);
}

#[test]
fn help_documents_signals_and_exit_codes() {
    let out = sigsleep().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "SIGTSTP",
        "SIGCONT",
        "SIGSTOP",
        "SIGTERM",
        "EXIT STATUS",
        "124",
        "143",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}

/// The agent runs a sigsleep of another build only if it says the digest
/// of the code the agent was built with: this build says its own.
#[test]
fn source_id_is_the_one_built_in() {
    let out = sigsleep().arg("--source-id").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8(out.stdout).unwrap();
    assert_eq!(said.trim(), sigsleep::SOURCE_ID);
    assert_eq!(said.trim().len(), 16, "{said:?}");
    // And the binary carries it whole, where the agent reads it.
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_sigsleep")).unwrap();
    let mark = sigsleep::SOURCE_ID_MARK.as_bytes();
    assert!(bytes.windows(mark.len()).any(|w| w == mark));
}
