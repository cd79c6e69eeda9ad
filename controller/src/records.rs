//! The record sink: the one writer of the controller's record file. Agents
//! on other hosts send the records of finished jobs here; each batch is
//! checked frame by frame and only intact records are appended.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use formats::record::{encode, RecordReader};
use tokio::sync::mpsc;
use tracing::{error, warn};

/// Name of the record file in the record directory.
pub const RECORD_FILE: &str = "jobs.rec";

/// Where to send a batch of frames, with the peer it came from.
pub type SinkHandle = mpsc::Sender<(String, Vec<u8>)>;

/// The record file of a record directory (created if needed).
pub fn record_file(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create record directory {}", dir.display()))?;
    Ok(dir.join(RECORD_FILE))
}

/// Starts the sink task; it ends when every handle is dropped.
pub fn start(path: &Path) -> Result<(SinkHandle, tokio::task::JoinHandle<()>)> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open record file {}", path.display()))?;
    let (tx, mut rx) = mpsc::channel::<(String, Vec<u8>)>(256);
    let path = path.to_path_buf();
    let task = tokio::spawn(async move {
        let mut file = file;
        while let Some((peer, bytes)) = rx.recv().await {
            if let Err(e) = append(&mut file, &peer, &bytes) {
                error!(file = %path.display(), %e, "cannot write records");
            }
        }
    });
    Ok((tx, task))
}

/// The frames of the records of `ids` in the record file at `path`. Read
/// while the file grows: only whole frames are decoded.
pub fn read_jobs(path: &Path, ids: &[u64]) -> std::io::Result<Vec<u8>> {
    let wanted: std::collections::HashSet<u64> = ids.iter().copied().collect();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut reader = RecordReader::new(std::io::BufReader::new(file));
    let mut out = Vec::new();
    while let Some(rec) = reader.next_record()? {
        if wanted.contains(&rec.id) {
            let _ = encode(&rec, &mut out);
        }
    }
    Ok(out)
}

fn append(file: &mut File, peer: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut reader = RecordReader::new(bytes);
    let mut out = Vec::with_capacity(bytes.len());
    while let Some(rec) = reader.next_record()? {
        // Re-encoding an intact record gives back its frame.
        if encode(&rec, &mut out).is_err() {
            continue;
        }
    }
    let stats = reader.stats();
    if stats.damaged() + stats.unsupported > 0 {
        warn!(peer, ?stats, "dropped damaged records from an agent");
    }
    // One write: other writers (sigsleeps of agents on this host) append
    // to the same file.
    if !out.is_empty() {
        file.write_all(&out)?;
    }
    Ok(())
}
