//! The record sink: one thread, the only writer of the controller's record
//! file (besides the sigsleeps of agents hosted in this process, which
//! append their own frames to it). Agents on other hosts send the records
//! of finished jobs; the server checks them and hands them here. Reads for
//! clients go through the same queue, so a read sees every record handed
//! over before it. The server's journal is synced here too
//! ([`Sink::sync_with`]), so that its loop never waits for the disk.
//!
//! A record that cannot be written (a full disk) is kept here and written
//! before anything that comes after it, and no sync says the records are
//! durable while one waits: the server lets an agent forget a job's end
//! only once its record is on disk, so a controller that dies meanwhile
//! gets it again from the agent.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

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
    /// A copy of the frames that wait to be written.
    Unwritten(oneshot::Sender<Vec<u8>>),
}

/// How a sync went, for the journal and for the record file apart: the
/// answers to clients wait for the one, the agents' ends for the other.
#[derive(Debug)]
pub struct Synced {
    pub journal: std::io::Result<()>,
    /// `None` when the records were not asked for.
    pub records: Option<std::io::Result<()>>,
}

/// Whom to tell how a sync went. Told exactly once: if the sink drops it
/// untold (its thread gone), it tells of that, so that nothing waits for
/// the sync forever.
struct Done(Option<Box<dyn FnOnce(Synced) + Send>>);

impl Done {
    fn tell(mut self, r: Synced) {
        if let Some(f) = self.0.take() {
            f(r);
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            let gone = || Err(std::io::Error::other("the record sink stopped"));
            f(Synced {
                journal: gone(),
                records: Some(gone()),
            });
        }
    }
}

/// How often records that could not be written are tried again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What fills the rest of a torn frame, a part at a time.
static ZEROS: [u8; 4096] = [0; 4096];

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

    /// Asks the sink's thread, after everything handed over before, and
    /// waits for its answer.
    async fn ask<T>(&self, work: impl FnOnce(oneshot::Sender<T>) -> Work) -> std::io::Result<T> {
        let gone = |_| std::io::Error::other("the record sink is gone");
        let (reply, answer) = oneshot::channel();
        self.tx.send(work(reply)).map_err(|_| gone(()))?;
        answer.await.map_err(|_| gone(()))
    }

    /// Makes every record appended so far durable.
    pub async fn flush(&self) -> std::io::Result<()> {
        self.ask(Work::Flush).await?
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

    /// Runs `f` once every record appended before is written (later, if
    /// some wait for room on the disk): a backup confirms entries only
    /// once it holds the records sent before them.
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
        done: impl FnOnce(Synced) + Send + 'static,
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

    /// The frames handed over that are not yet written (a full disk):
    /// records the file does not hold yet, but will.
    pub async fn unwritten(&self) -> std::io::Result<Vec<u8>> {
        self.ask(Work::Unwritten).await
    }

    /// The records of `ids`, read after everything appended before.
    pub async fn read(&self, ids: Vec<u64>) -> std::io::Result<Vec<u8>> {
        self.ask(|reply| Work::Read(ids, reply)).await?
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
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open record file {}", path.display()))?;
    let (tx, rx) = mpsc::channel::<Work>();
    // A frame cut short when this file was last written (a full disk, a
    // crash): the rest of it is filled before anything else is written.
    let torn_rest = torn_tail(path).unwrap_or(0);
    let mut out = Out {
        file,
        path: path.to_path_buf(),
        unwritten: Vec::new(),
        torn_rest,
        after: Vec::new(),
        complaint: crate::complaints::Complaint::new("writing the record file"),
    };
    // At once: the sigsleeps of local agents are about to append theirs.
    let _ = out.write();
    let thread = std::thread::Builder::new()
        .name("clemu-records".into())
        .spawn(move || {
            // Records that wait for room are tried again each second,
            // whatever else comes or does not (a backup's confirmation may
            // wait for them).
            let mut retry_at = out.waits().then(|| Instant::now() + RETRY);
            loop {
                let work = match retry_at {
                    None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                    Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                };
                match work {
                    Ok(work) => out.take(work),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                if retry_at.is_some_and(|at| at <= Instant::now()) {
                    let _ = out.write();
                    retry_at = None;
                }
                if !out.waits() {
                    retry_at = None;
                } else if retry_at.is_none() {
                    retry_at = Some(Instant::now() + RETRY);
                }
            }
        })
        .context("cannot start the record sink")?;
    Ok((Sink { tx }, thread))
}

/// The record file, as the sink's thread holds it.
struct Out {
    file: File,
    path: PathBuf,
    /// Whole frames not yet written, in order: the disk was full.
    unwritten: Vec<u8>,
    /// Bytes of a frame cut short by a full disk still to fill (with
    /// zeros) before it is written again.
    torn_rest: usize,
    /// What waits for `unwritten` to be written ([`Sink::then`],
    /// [`Sink::then_remove`]), in order.
    after: Vec<Work>,
    /// A full disk fails every append: said once a minute.
    complaint: crate::complaints::Complaint,
}

impl Out {
    fn take(&mut self, work: Work) {
        match work {
            Work::Append(frames) => {
                self.unwritten.extend_from_slice(&frames);
                let _ = self.write();
            }
            Work::Read(ids, reply) => {
                let mut got = read_jobs(&self.path, &ids);
                if let Ok(got) = &mut got {
                    got.extend(frames_of(&self.unwritten, &ids));
                }
                let _ = reply.send(got);
            }
            Work::Flush(reply) => {
                let _ = reply.send(self.write().and_then(|()| self.file.sync_data()));
            }
            Work::Unwritten(reply) => {
                let _ = reply.send(self.unwritten.clone());
            }
            Work::ReadAll(mut part) => match read_all(&self.path, &mut part) {
                // The empty part says the file is all sent.
                Ok(()) => {
                    if !self.unwritten.is_empty() {
                        part(self.unwritten.clone());
                    }
                    part(Vec::new())
                }
                // Never said: the backup stays unfit to take over.
                Err(e) => {
                    error!(file = %self.path.display(), %e, "cannot read records for a backup")
                }
            },
            work @ (Work::ThenRemove(..) | Work::Then(_)) if self.waits() => self.after.push(work),
            Work::ThenRemove(done, contents) => match self.file.sync_data() {
                Ok(()) => {
                    let same = std::fs::read_to_string(&done).is_ok_and(|c| c == contents);
                    if same {
                        if let Err(e) = std::fs::remove_file(&done) {
                            error!(file = %done.display(), %e, "cannot remove");
                        }
                    }
                }
                Err(e) => error!(file = %self.path.display(), %e, "cannot sync records"),
            },
            Work::Then(f) => f(),
            Work::SyncBoth(other, records, done) => {
                let records = records.then(|| self.write().and_then(|()| self.file.sync_data()));
                done.tell(Synced {
                    journal: other.sync_data(),
                    records,
                })
            }
            Work::Truncate => {
                // What waited to be written belonged to what is emptied,
                // and so did what waited for it (a backup's confirmations
                // to the primary it copied before).
                self.unwritten.clear();
                self.torn_rest = 0;
                self.after.clear();
                if let Err(e) = self.file.set_len(0) {
                    error!(file = %self.path.display(), %e, "cannot empty the record file");
                }
            }
        }
    }

    /// Writes what waits, whole frames in order, then what waited for it.
    /// One write in the usual case: the sigsleeps of local agents append
    /// to the same file, and a frame must not be split by theirs. A write
    /// cut short (the disk filled up during it) leaves the frame it cut
    /// torn in the file; zeros fill the rest of the length its header
    /// claims before that frame is written again whole, so that readers,
    /// which skip the torn frame, find the whole one after it. No record
    /// twice, none lost.
    fn write(&mut self) -> std::io::Result<()> {
        let now = Instant::now();
        while self.waits() {
            let (bytes, padding) = if self.torn_rest > 0 {
                (&ZEROS[..self.torn_rest.min(ZEROS.len())], true)
            } else {
                (&self.unwritten[..], false)
            };
            match self.file.write(bytes) {
                Ok(0) => return self.failed(std::io::ErrorKind::WriteZero.into(), now),
                Ok(n) if padding => self.torn_rest -= n,
                Ok(n) if n == self.unwritten.len() => self.unwritten.clear(),
                Ok(n) => {
                    let whole = formats::record::complete_prefix(&self.unwritten[..n]);
                    if whole < n {
                        // `complete_prefix` stops only at a frame (or its
                        // magic) cut short: its header says how long it is.
                        let torn = &self.unwritten[whole..];
                        let claimed = formats::record::frame_len(torn).unwrap_or(n - whole);
                        self.torn_rest = claimed.saturating_sub(n - whole);
                    }
                    self.unwritten.drain(..whole);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.failed(e, now),
            }
        }
        if let Some(line) = self.complaint.worked(now) {
            tracing::info!("{line}");
        }
        for work in std::mem::take(&mut self.after) {
            self.take(work);
        }
        Ok(())
    }

    /// Whether anything waits to be written.
    fn waits(&self) -> bool {
        self.torn_rest > 0 || !self.unwritten.is_empty()
    }

    fn failed(&mut self, e: std::io::Error, now: Instant) -> std::io::Result<()> {
        let line = format!(
            "cannot write records to {}: {e} ({} bytes of records wait in memory, and their \
             agents keep them)",
            self.path.display(),
            self.unwritten.len()
        );
        if let Some(line) = self.complaint.failed(&line, now) {
            error!("{line}");
        }
        Err(e)
    }
}

/// How many bytes the frame the file at `path` ends in lacks, if it was
/// cut short ([`formats::record::torn_rest`]). Frames in it are small: a
/// torn one starts within its last [`TAIL`] bytes, or is not looked for.
fn torn_tail(path: &Path) -> std::io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(TAIL);
    f.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    Ok(formats::record::torn_rest(&tail))
}

/// How far from its end [`torn_tail`] looks for a frame cut short.
const TAIL: u64 = 1 << 20;

/// The frames in `frames` (whole, as the sink holds them) of jobs `ids`.
fn frames_of(frames: &[u8], ids: &[u64]) -> Vec<u8> {
    let wanted: HashSet<u64> = ids.iter().copied().collect();
    let mut out = Vec::new();
    let _ = RecordReader::new(frames).for_each_record(|rec| -> std::io::Result<()> {
        if wanted.contains(&rec.id) {
            let _ = encode(rec, &mut out);
        }
        Ok(())
    });
    out
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

impl Written {
    fn note(&mut self, rec: &JobRecord<'_>) {
        self.executions.insert((rec.id, rec.start));
        self.last.insert(
            rec.id,
            (JobState::of_record(rec.status, rec.flags), rec.end),
        );
    }

    /// Notes the records of `frames` too, as if they came after the file.
    pub fn add(&mut self, frames: &[u8]) {
        let _ = RecordReader::new(frames).for_each_record(|rec| -> std::io::Result<()> {
            self.note(rec);
            Ok(())
        });
    }
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
            w.note(rec);
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
