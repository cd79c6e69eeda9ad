//! The record sink: one thread, the only writer of the controller's record
//! file (besides the sigsleeps of agents hosted in this process, which
//! append their own frames to it). Agents on other hosts send the records
//! of finished jobs; the server checks them and hands them here. Reads for
//! clients go through the same queue, so a read sees every record handed
//! over before it. The server's journal is synced here too
//! ([`Sink::sync_with`]), so that its loop never waits for the disk.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::{Context, Result};
use formats::record::{encode, JobRecord, RecordReader};
use formats::wire::JobState;
use tokio::sync::oneshot;
use tracing::{error, warn};

/// Name of the record file in the record directory.
pub const RECORD_FILE: &str = "jobs.rec";

enum Work {
    /// Frames, already checked, to append.
    Append(Vec<u8>),
    /// The frames of these jobs' records, for a client.
    Read(Vec<u64>, oneshot::Sender<std::io::Result<Vec<u8>>>),
    /// Sync what was appended before.
    Flush(oneshot::Sender<std::io::Result<()>>),
    /// The whole file as it stands, in parts of at most [`PART`] bytes of
    /// whole frames, for a backup; an empty part ends it.
    ReadAll(Box<dyn FnMut(Vec<u8>) + Send>),
    /// Empties the file: a backup takes its primary's.
    Truncate,
    /// Syncs what was appended before, then removes this file if it
    /// still holds these contents.
    ThenRemove(PathBuf, String),
    /// Runs this once what was appended before is written.
    Then(Box<dyn FnOnce() + Send>),
    /// Syncs what was appended before (if asked), then this other file
    /// (the journal), and tells how that went.
    SyncBoth(File, bool, Done),
}

/// Whom to tell how a sync went. Told exactly once: if the sink drops it
/// untold (its thread gone), it tells of that, so that nothing waits for
/// the sync forever.
struct Done(Option<Box<dyn FnOnce(std::io::Result<()>) + Send>>);

impl Done {
    fn tell(mut self, r: std::io::Result<()>) {
        if let Some(f) = self.0.take() {
            f(r);
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(std::io::Error::other("the record sink stopped")));
        }
    }
}

/// Largest part of the record file sent to a backup at once.
const PART: usize = 4 << 20;

/// The sink's queue. Unbounded on purpose: the server loop hands records
/// over without ever waiting; what is queued is at most the records of
/// jobs that ended.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Work>,
}

impl Sink {
    pub fn append(&self, frames: Vec<u8>) {
        if !frames.is_empty() && self.tx.send(Work::Append(frames)).is_err() {
            error!("the record sink is gone; records dropped");
        }
    }

    /// Makes every record appended so far durable.
    pub async fn flush(&self) -> std::io::Result<()> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Work::Flush(reply))
            .map_err(|_| std::io::Error::other("the record sink is gone"))?;
        answer
            .await
            .map_err(|_| std::io::Error::other("the record sink is gone"))?
    }

    /// Hands the whole file, as it stands after everything appended before,
    /// to `part`, in parts, then an empty one.
    pub fn read_all(&self, part: impl FnMut(Vec<u8>) + Send + 'static) {
        if self.tx.send(Work::ReadAll(Box::new(part))).is_err() {
            error!("the record sink is gone; a backup gets no records");
        }
    }

    /// Removes `path` once every record appended before is durable: a
    /// backup's mark that its copy of the record file is under way.
    pub fn then_remove(&self, path: PathBuf, contents: String) {
        let _ = self.tx.send(Work::ThenRemove(path, contents));
    }

    /// Runs `f` once every record appended before is written: a backup
    /// confirms entries only once it holds the records sent before them.
    pub fn then(&self, f: impl FnOnce() + Send + 'static) {
        let _ = self.tx.send(Work::Then(Box::new(f)));
    }

    /// Makes `other` (the journal) durable on this sink's thread, and
    /// with `records`, every record appended so far before it; calls
    /// `done` with the outcome: the server's loop goes on meanwhile.
    pub fn sync_with(
        &self,
        other: File,
        records: bool,
        done: impl FnOnce(std::io::Result<()>) + Send + 'static,
    ) {
        // Not sent, it is dropped here, and tells so.
        let _ = self
            .tx
            .send(Work::SyncBoth(other, records, Done(Some(Box::new(done)))));
    }

    /// Empties the record file (a backup's, before it takes its primary's).
    pub fn truncate(&self) {
        let _ = self.tx.send(Work::Truncate);
    }

    /// The records of `ids`, read after everything appended before.
    pub async fn read(&self, ids: Vec<u64>) -> std::io::Result<Vec<u8>> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Work::Read(ids, reply))
            .map_err(|_| std::io::Error::other("the record sink is gone"))?;
        answer
            .await
            .map_err(|_| std::io::Error::other("the record sink is gone"))?
    }
}

/// The record file of a record directory (created if needed).
pub fn record_file(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create record directory {}", dir.display()))?;
    Ok(dir.join(RECORD_FILE))
}

/// Starts the sink thread; it ends when every [`Sink`] is dropped.
pub fn start(path: &Path) -> Result<(Sink, std::thread::JoinHandle<()>)> {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open record file {}", path.display()))?;
    let (tx, rx) = mpsc::channel::<Work>();
    let path = path.to_path_buf();
    let thread = std::thread::Builder::new()
        .name("clemu-records".into())
        .spawn(move || {
            // A full disk fails every append: said once a minute.
            let mut unwritten = crate::complaints::Complaint::new("writing the record file");
            while let Ok(work) = rx.recv() {
                match work {
                    Work::Append(frames) => {
                        // One write: the sigsleeps of local agents append
                        // to the same file.
                        let now = std::time::Instant::now();
                        match file.write_all(&frames) {
                            Ok(()) => {
                                if let Some(line) = unwritten.worked(now) {
                                    tracing::info!("{line}");
                                }
                            }
                            Err(e) => {
                                let e = format!("cannot write records to {}: {e}", path.display());
                                if let Some(line) = unwritten.failed(&e, now) {
                                    error!("{line}");
                                }
                            }
                        }
                    }
                    Work::Read(ids, reply) => {
                        let _ = reply.send(read_jobs(&path, &ids));
                    }
                    Work::Flush(reply) => {
                        let _ = reply.send(file.sync_data());
                    }
                    Work::ReadAll(mut part) => match read_all(&path, &mut part) {
                        // The empty part says the file is all sent.
                        Ok(()) => part(Vec::new()),
                        // Never said: the backup stays unfit to take over.
                        Err(e) => {
                            error!(file = %path.display(), %e, "cannot read records for a backup")
                        }
                    },
                    Work::ThenRemove(done, contents) => match file.sync_data() {
                        Ok(()) => {
                            let same = std::fs::read_to_string(&done).is_ok_and(|c| c == contents);
                            if same {
                                if let Err(e) = std::fs::remove_file(&done) {
                                    error!(file = %done.display(), %e, "cannot remove");
                                }
                            }
                        }
                        Err(e) => error!(file = %path.display(), %e, "cannot sync records"),
                    },
                    Work::Then(f) => f(),
                    Work::SyncBoth(other, records, done) => {
                        let records = if records { file.sync_data() } else { Ok(()) };
                        done.tell(records.and_then(|()| other.sync_data()))
                    }
                    Work::Truncate => {
                        if let Err(e) = file.set_len(0) {
                            error!(file = %path.display(), %e, "cannot empty the record file");
                        }
                    }
                }
            }
        })
        .context("cannot start the record sink")?;
    Ok((Sink { tx }, thread))
}

/// What the record file already holds, read when the controller starts.
#[derive(Debug, Default)]
pub struct Written {
    /// (job, start) of every intact record: executions an agent must not
    /// have recorded twice.
    pub executions: HashSet<(u64, i64)>,
    /// How and when (CLOCK_REALTIME ns) each job's last record says it
    /// ended.
    pub last: HashMap<u64, (JobState, i64)>,
}

pub fn written(path: &Path) -> Result<Written> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Written::default()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut w = Written::default();
    let mut reader = RecordReader::new(std::io::BufReader::new(file));
    reader
        .for_each_record(|rec| -> std::io::Result<()> {
            w.executions.insert((rec.id, rec.start));
            w.last.insert(
                rec.id,
                (JobState::of_record(rec.status, rec.flags), rec.end),
            );
            Ok(())
        })
        .with_context(|| format!("cannot read {}", path.display()))?;
    let s = reader.stats();
    if s.damaged() > 0 {
        warn!(file = %path.display(), ?s, "damaged frames in the record file");
    }
    Ok(w)
}

/// Checks a batch of frames from an agent: only intact records for which
/// `allowed` says yes are kept (re-encoded, which gives back their
/// frames). Returns the kept frames and how many were dropped.
pub fn check(frames: &[u8], mut allowed: impl FnMut(&JobRecord<'_>) -> bool) -> (Vec<u8>, u64) {
    let mut reader = RecordReader::new(frames);
    let mut out = Vec::with_capacity(frames.len());
    let mut dropped = 0;
    let _ = reader.for_each_record(|rec| -> std::io::Result<()> {
        if allowed(rec) && encode(rec, &mut out).is_ok() {
            return Ok(());
        }
        dropped += 1;
        Ok(())
    });
    let s = reader.stats();
    (out, dropped + s.damaged() + s.unsupported)
}

/// The intact frames of the record file at `path`, in parts.
fn read_all(path: &Path, part: &mut dyn FnMut(Vec<u8>)) -> std::io::Result<()> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut reader = RecordReader::new(std::io::BufReader::new(file));
    let mut out = Vec::new();
    reader.for_each_record(|rec| -> std::io::Result<()> {
        let _ = encode(rec, &mut out);
        if out.len() >= PART {
            part(std::mem::take(&mut out));
        }
        Ok(())
    })?;
    if !out.is_empty() {
        part(out);
    }
    Ok(())
}

/// The frames of the records of `ids` in the record file at `path`, read
/// while the file may grow: only whole frames are decoded.
pub fn read_jobs(path: &Path, ids: &[u64]) -> std::io::Result<Vec<u8>> {
    let wanted: HashSet<u64> = ids.iter().copied().collect();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut reader = RecordReader::new(file);
    let mut out = Vec::new();
    reader.for_each_record(|rec| -> std::io::Result<()> {
        if wanted.contains(&rec.id) {
            let _ = encode(rec, &mut out);
        }
        Ok(())
    })?;
    let s = reader.stats();
    if s.damaged() > 0 {
        warn!(file = %path.display(), ?s, "damaged frames in the record file");
    }
    Ok(out)
}
