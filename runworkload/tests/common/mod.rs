//! What the replay tests share: the binaries built beside runworkload,
//! the repository, and reading a run's files.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use formats::record::{decode_all, JobRecord};

/// A binary of the workspace, built beside runworkload.
pub fn bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runworkload"))
        .parent()
        .unwrap()
        .join(name)
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A run's records.
pub fn records(run: &Path) -> Vec<JobRecord<'static>> {
    let (recs, _) = decode_all(&std::fs::read(run.join("records/jobs.rec")).unwrap());
    recs.into_iter().map(JobRecord::into_owned).collect()
}

/// One trace second in the demo replays: 20 ms of the run.
pub const SPEEDUP: f64 = 50.0;

/// `runworkload` on the demo cluster (2 cores per processor, at
/// [`SPEEDUP`]), replaying `trace` into `out`.
pub fn run(trace: &Path, out: &Path, extra: &[&str]) -> Output {
    run_at(SPEEDUP, trace, out, extra)
}

/// [`run`] at `speedup`: a test whose slack in trace seconds would be too
/// few milliseconds of a loaded machine at [`SPEEDUP`] replays slower.
pub fn run_at(speedup: f64, trace: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(trace)
        .args(["--cores-per-proc", "2", "-q", "--speedup"])
        .arg(speedup.to_string())
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// [`run`], which must succeed; its results directory.
pub fn replay(trace: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    replay_at(SPEEDUP, trace, out, extra)
}

/// [`run_at`], which must succeed; its results directory.
pub fn replay_at(speedup: f64, trace: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    let o = run_at(speedup, trace, out, extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out.join("shrink-100")
}
