//! What the replay tests share: the binaries built beside runworkload,
//! the repository, and reading a run's files.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use std::path::{Path, PathBuf};

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
