//! The journal: what the controller must not forget if it is killed.
//!
//! Every accepted submission and every change of a job's state is an
//! [`Entry`], appended to `<state_dir>/journal` before the client that
//! caused it gets its answer (the server syncs the file, in batches, before
//! answering). When the journal grows past a limit it is folded into
//! `<state_dir>/snapshot` (every job's [`JobImage`], the finished ones kept
//! for `queue --all`, drained nodes) and started afresh.
//!
//! On start the snapshot is read with the journal's entries after it, and
//! a torn last entry (the controller died mid-write) is cut off. What
//! comes out, [`Recovered`], is handed to the scheduling core, which loads
//! the snapshot and replays the entries through its own transitions
//! (`core::restore`): this file knows the format, not what an entry does.
//!
//! Files: a 6-byte header (magic, u16 version) then, in the journal, frames
//! of `u32 length ‖ u32 CRC-32 of the payload ‖ payload`, the payload being
//! bincode of `(sequence number, Entry)`; the snapshot is the header, a
//! CRC-32 and the bincode of a [`Snapshot`]. Entries carry increasing
//! sequence numbers and the snapshot the last one it includes, so entries
//! a crash left in an old journal beside a newer snapshot are skipped.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::wire::{JobInfo, JobSpec, JobState};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

const JOURNAL_MAGIC: &[u8; 4] = b"CLJN";
const SNAPSHOT_MAGIC: &[u8; 4] = b"CLSN";
/// 2: jobs have names (`JobSpec::name`, `JobInfo::name`). 3: submission
/// keys ([`Entry::Keyed`], [`Snapshot::keys`]). 6: allocations as runs of
/// nodes ([`NodeRun`]), so that a job's start costs the same to journal
/// whatever its nodes. 7: a job may run a program (`JobSpec::program`). 8: a finished job keeps its
/// exit code, and what it ran (`JobInfo::exit`, `JobInfo::program`). 9:
/// dependencies on how jobs end, singletons, holds (`JobSpec::after_ok`,
/// a hold, [`Entry::Held`]), a pending job's new limit
/// ([`Entry::Limit`]). 10: jobs count their restarts
/// (`JobImage::restarts`, `JobInfo::restarts`), and one may be ending to
/// be requeued (`ending_as: Pending`); a script's arguments
/// (`Program::args`) and steps (`ProgramInfo::steps`). 11: a job's node
/// count (`JobSpec::nodes`), and whether its limit changed once it ran
/// (`JobImage::limit_changed`). 12: a job may end preempted
/// (`JobState::Preempted`), and a program's history keeps the cores it
/// held on each node (`ProgramInfo::node_cpus`). 13: jobs wait for others'
/// starts, or for any one of their dependencies (`JobSpec::after_start`,
/// `JobSpec::any_dep`). 14: a finished batch job may be requeued
/// ([`Entry::Readmitted`]), and a program keeps its script's path
/// (`Program::command`). 15: a dependency may wait a delay past its
/// job's start (`JobSpec::delays`); a node's drain or failure, and a
/// job's being told to end, say when (`Entry::Drained`, `Entry::Failed`,
/// `Entry::Ending`). 16: a job's dependencies keep the order they were
/// asked in (`JobSpec::dep_order`). 17: a batch script may ask its tasks
/// per node (`Program::tasks_per_node`). 18: a finished job's view of its
/// program says them, and whether it was an array task of a record of its
/// own or its array's only task (`ProgramInfo::tasks_per_node`,
/// `own_record`, `only_task`). 19: a hold says whose it is, and a running
/// job may be held (`JobImage::hold`, [`Entry::Held`]). 20: a batch
/// job's limit may be its partition's (`Program::partition_limit`,
/// `ProgramInfo::partition_limit`). 21: a batch job may ask whole nodes
/// (`Program::exclusive`), and output files added to
/// (`Program::open_append`). 22: a batch job may name nodes it must
/// have, or must not (`Program::nodelist`, `Program::exclude`). 23: a
/// program's steps say their nodes and cores, and whether they were
/// cancelled (`StepInfo::nodes`, `cpus`, `cancelled`).
const VERSION: u16 = 23;
const HEADER: usize = 6;
/// Largest entry: a submission of one job is well under 1 KiB.
const MAX_ENTRY: usize = 1 << 20;

/// Consecutive nodes of the configuration (in its order) that a job holds
/// the same cores of: an allocation is a few runs, however many nodes it
/// holds. The last node's name is kept to check, at a restart, that the
/// configuration still has these nodes in this order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRun {
    pub first: String,
    pub last: String,
    pub nodes: u32,
    pub cores: u32,
}

/// A job as the journal keeps it: enough to rebuild the controller's own
/// record of it. Times are wall-clock (CLOCK_REALTIME) nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobImage {
    pub id: u64,
    pub spec: JobSpec,
    /// Partition name (names survive a configuration edit, indices not).
    pub partition: String,
    pub state: JobState,
    pub submit_ns: i64,
    pub start_ns: i64,
    /// Its nodes and cores, while it holds them.
    pub alloc: Vec<NodeRun>,
    /// The nodes it was given, folded.
    pub nodes: String,
    /// Host of the agent that runs it.
    pub host: Option<String>,
    pub ending_as: Option<JobState>,
    /// When (wall ns) it was told to end, with `ending_as`.
    pub ending_ns: i64,
    /// Suspended by the policy (true) or an administrator (false).
    pub suspended_by_policy: Option<bool>,
    /// (suspended, resumed) instants; resumed is 0 while suspended.
    pub suspensions: Vec<(i64, i64)>,
    /// Last start, suspension or resumption.
    pub since_ns: i64,
    pub reason: String,
    /// Waits for other jobs (`spec.after`) before it enters the queue.
    pub held: bool,
    /// Held until released, and by whom.
    pub hold: Option<formats::wire::HoldKind>,
    pub restarts: u32,
    /// Its limit changed after it started: sent again to its agent when
    /// that agent comes back.
    pub limit_changed: bool,
    /// Its place in a job array.
    pub array: Option<formats::wire::ArrayTask>,
    /// When it entered the queue (or will, once released): its place
    /// there, which a submit instant given by the client does not say.
    pub queued_ns: i64,
    /// The devices it holds ([`formats::record::Devices`]' text form;
    /// empty: none).
    pub devices: String,
}

/// One change to remember.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {
    Submitted(Box<JobImage>),
    Started {
        id: u64,
        alloc: Vec<NodeRun>,
        nodes: String,
        host: String,
        at_ns: i64,
        /// The devices it was given ([`formats::record::Devices`]' text
        /// form; empty: none).
        devices: String,
    },
    Suspended {
        id: u64,
        by_policy: bool,
        at_ns: i64,
    },
    Resumed {
        id: u64,
        at_ns: i64,
    },
    /// A cancel was sent, when (wall ns); it will end in this state.
    Ending {
        id: u64,
        state: JobState,
        at_ns: i64,
    },
    Ended(Box<JobInfo>),
    /// A pending job's wall-time limit changed.
    Limit {
        id: u64,
        walltime_ns: u64,
    },
    /// A job held (`hold`, by whom), or released (`None`).
    Held {
        id: u64,
        hold: Option<formats::wire::HoldKind>,
        at_ns: i64,
    },
    /// A held job's think time is over: it is submitted at `at_ns`.
    Released {
        id: u64,
        at_ns: i64,
    },
    /// Back to the queue: its node was lost.
    Requeued {
        id: u64,
        reason: String,
        at_ns: i64,
    },
    /// Nodes drained, why, and when (wall ns).
    Drained {
        nodes: String,
        reason: String,
        at_ns: i64,
    },
    Undrained {
        nodes: String,
    },
    /// Nodes failed (down until repaired), why, and when (wall ns).
    Failed {
        nodes: String,
        reason: String,
        at_ns: i64,
    },
    /// Failed nodes are up again.
    Repaired {
        nodes: String,
    },
    /// A finished batch job back in the queue (`scontrol requeue`), as it
    /// is now: out of the history.
    Readmitted(Box<JobImage>),
    /// A submission under a client's key made jobs `first..first+count`:
    /// the same key asked again gets the same jobs.
    Keyed {
        key: u64,
        first: u64,
        count: u32,
    },
}

/// Everything the journal knows, folded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Sequence number of the last entry folded in.
    pub seq: u64,
    pub next_id: u64,
    /// Jobs not over, by id.
    pub jobs: BTreeMap<u64, JobImage>,
    /// Finished jobs, oldest first (at most the controller's history).
    pub history: Vec<JobInfo>,
    /// Drained node sets (folded) and why.
    pub drained: Vec<(String, String)>,
    /// Recent submission keys: (key, first job, jobs), oldest first.
    pub keys: Vec<(u64, u64, u32)>,
    /// Failed node sets (folded) and why.
    pub failed: Vec<(String, String)>,
}

/// A snapshot's fields besides its sequence number and its jobs (which
/// are written one at a time, as they come).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub next_id: u64,
    pub history: Vec<JobInfo>,
    pub drained: Vec<(String, String)>,
    pub keys: Vec<(u64, u64, u32)>,
    pub failed: Vec<(String, String)>,
}

impl Snapshot {
    /// Puts a snapshot together from its parts.
    pub fn of(seq: u64, head: Head, jobs: impl IntoIterator<Item = JobImage>) -> Snapshot {
        Snapshot {
            seq,
            next_id: head.next_id,
            jobs: jobs.into_iter().map(|j| (j.id, j)).collect(),
            history: head.history,
            drained: head.drained,
            keys: head.keys,
            failed: head.failed,
        }
    }
}

/// What a restart starts from: the last snapshot, and the entries
/// written after it, in order, for the core to replay.
#[derive(Debug, Default)]
pub struct Recovered {
    pub snapshot: Snapshot,
    pub entries: Vec<Entry>,
}

/// What a sync made elsewhere covers: the entries up to `seq`, as the
/// file stood after its `writes`th write.
#[derive(Debug, Clone, Copy)]
pub struct SyncCover {
    pub seq: u64,
    writes: u64,
    /// When the sync began: entries it does not cover came after.
    began: std::time::Instant,
}

/// The open journal.
pub struct Journal {
    dir: PathBuf,
    file: File,
    /// Encoded entries not yet written.
    buf: Vec<u8>,
    /// Sequence number of the last entry appended.
    seq: u64,
    /// Sequence number of the last entry written to the file: `seq`, but
    /// while a write fails (a full disk).
    written: u64,
    /// Bytes in the journal file.
    size: u64,
    /// Written since the last sync.
    unsynced: bool,
    /// A write failed part-way and the file could not be cut back to
    /// `size` then: it must be, before anything more is written.
    torn: bool,
    /// Counts writes and changes of file: a sync made elsewhere covers
    /// everything only if neither happened since it began.
    writes: u64,
    /// The directory's sync after a fold's new journal replaced the old
    /// one failed: until it is done, a crash of the machine may bring the
    /// old journal back, and nothing synced since counts as durable.
    dir_unsynced: bool,
    /// Entries appended since the last sync, and when the first of them
    /// was.
    pending: u64,
    pending_since: Option<std::time::Instant>,
    /// Fold into a snapshot past this many bytes...
    compact_at: u64,
    /// ...or past the size of the last snapshot, whichever is more: with a
    /// long queue the snapshot is large, and rewriting it no more often
    /// than the journal grows by as much keeps the cost per entry constant.
    snapshot_size: u64,
    /// Whether backups copy this journal: written frames are kept in
    /// `outgoing` for them.
    shipping: bool,
    outgoing: Vec<u8>,
}

fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal")
}

fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("snapshot")
}

fn header(magic: &[u8; 4]) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(magic);
    h[4..].copy_from_slice(&VERSION.to_le_bytes());
    h
}

fn check_header(bytes: &[u8], magic: &[u8; 4], path: &Path) -> Result<()> {
    if bytes.len() < HEADER || &bytes[..4] != magic {
        bail!("{} is not a clemu state file", path.display());
    }
    let v = u16::from_le_bytes([bytes[4], bytes[5]]);
    if v != VERSION {
        bail!(
            "{}: written by another version of clemu (state format {v}; this controller reads \
             {VERSION}): finish that cluster's jobs with the clemu that wrote it, or move its \
             state directory {} away to start afresh",
            path.display(),
            path.parent()
                .map_or(String::new(), |d| d.display().to_string())
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: a temporary file, synced and
/// renamed over it. Returns the new file, open to append; the caller
/// syncs the directory (once it holds the file: the rename is done).
fn replace(path: &Path, bytes: &[u8]) -> Result<File> {
    let tmp = path.with_extension("tmp");
    // Appending, as the journal is written; a leftover of a fold that
    // stopped part-way goes first.
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .append(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(f)
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// Appends the bincode of `v`.
fn put<T: Serialize + ?Sized>(out: &mut impl Write, v: &T) -> std::io::Result<()> {
    bincode::serialize_into(out, v).map_err(|e| std::io::Error::other(e.to_string()))
}

fn read_snapshot(path: &Path) -> Result<Option<Snapshot>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    check_header(&bytes, SNAPSHOT_MAGIC, path)?;
    let body = &bytes[HEADER..];
    if body.len() < 4 {
        bail!("{} is truncated", path.display());
    }
    let crc = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
    if crc32fast::hash(&body[4..]) != crc {
        bail!(
            "{} is damaged (checksum mismatch); move it away to start without the jobs it holds",
            path.display()
        );
    }
    let snap = bincode::deserialize(&body[4..])
        .map_err(|e| anyhow!("{}: cannot decode: {e}", path.display()))?;
    Ok(Some(snap))
}

/// The whole entries of journal frames from `at` on, and where the intact
/// prefix ends (a torn or damaged tail is where it ends).
fn read_entries(bytes: &[u8], mut at: usize) -> (Vec<(u64, Entry)>, usize) {
    let mut out = Vec::new();
    while bytes.len() - at >= 8 {
        let len =
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        let crc = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        if len > MAX_ENTRY || bytes.len() - at - 8 < len {
            break;
        }
        let payload = &bytes[at + 8..at + 8 + len];
        if crc32fast::hash(payload) != crc {
            break;
        }
        match bincode::deserialize::<(u64, Entry)>(payload) {
            Ok(e) => out.push(e),
            Err(_) => break,
        }
        at += 8 + len;
    }
    (out, at)
}

impl Journal {
    /// Opens the journal of `dir` (creating it) and recovers what it
    /// holds; past `compact_at` bytes the journal is folded into the
    /// snapshot.
    pub fn open(dir: &Path, compact_at: u64) -> Result<(Journal, Recovered)> {
        let snapshot = read_snapshot(&snapshot_path(dir))?.unwrap_or_default();
        // What a fold stopped half-way left (never read: the snapshot is
        // the renamed file), which could keep a full disk full.
        let _ = std::fs::remove_file(snapshot_path(dir).with_extension("tmp"));
        let path = journal_path(dir);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if bytes.is_empty() {
            file.write_all(&header(JOURNAL_MAGIC))
                .and_then(|()| file.sync_all())
                .with_context(|| format!("cannot write {}", path.display()))?;
            bytes = header(JOURNAL_MAGIC).to_vec();
        }
        check_header(&bytes, JOURNAL_MAGIC, &path)?;
        let (entries, intact) = read_entries(&bytes, HEADER);
        if intact < bytes.len() {
            warn!(
                file = %path.display(),
                offset = intact,
                dropped = bytes.len() - intact,
                "the journal ends in a torn or damaged entry (the controller stopped mid-write): cutting it off"
            );
            file.set_len(intact as u64)
                .and_then(|()| file.sync_all())
                .with_context(|| format!("cannot truncate {}", path.display()))?;
        }
        let after: Vec<(u64, Entry)> = entries
            .into_iter()
            .filter(|(seq, _)| *seq > snapshot.seq)
            .collect();
        let seq = after.last().map_or(snapshot.seq, |(seq, _)| *seq);
        if !after.is_empty() || !snapshot.jobs.is_empty() {
            info!(
                jobs = snapshot.jobs.len(),
                finished = snapshot.history.len(),
                entries = after.len(),
                "recovered from the journal"
            );
        }
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                file,
                buf: Vec::new(),
                seq,
                written: seq,
                size: intact as u64,
                unsynced: false,
                torn: false,
                writes: 0,
                dir_unsynced: false,
                pending: 0,
                pending_since: None,
                compact_at,
                snapshot_size: std::fs::metadata(snapshot_path(dir)).map_or(0, |m| m.len()),
                shipping: false,
                outgoing: Vec::new(),
            },
            Recovered {
                snapshot,
                entries: after.into_iter().map(|(_, e)| e).collect(),
            },
        ))
    }

    /// Queues entries; they reach the file with [`Journal::write`].
    pub fn append(&mut self, entries: impl IntoIterator<Item = Entry>) {
        for entry in entries {
            self.seq += 1;
            self.pending += 1;
            self.pending_since
                .get_or_insert_with(std::time::Instant::now);
            let start = self.buf.len();
            self.buf.extend_from_slice(&[0; 8]);
            // An entry is plain data: encoding cannot fail.
            if bincode::serialize_into(&mut self.buf, &(self.seq, &entry)).is_err() {
                self.buf.truncate(start);
                continue;
            }
            let len = (self.buf.len() - start - 8) as u32;
            let crc = crc32fast::hash(&self.buf[start + 8..]);
            self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
            self.buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// Writes queued entries to the file (safe from a crash of the
    /// controller, not yet from one of the machine).
    pub fn write(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.torn {
            // Whatever follows would come after half a frame, which
            // recovery stops at.
            self.file.set_len(self.size).with_context(|| {
                format!(
                    "cannot cut {} back to its last whole entry",
                    journal_path(&self.dir).display()
                )
            })?;
            self.torn = false;
        }
        if let Err(e) = self.file.write_all(&self.buf) {
            // A write that fails part-way (a full disk) leaves part of a
            // frame. The frames are kept to be written again, so the file
            // goes back to its last whole frame: were the torn bytes left,
            // recovery would stop at them and lose every frame after.
            let path = journal_path(&self.dir);
            let cut = self.file.set_len(self.size);
            self.torn = cut.is_err();
            return Err(match cut {
                Ok(()) => anyhow!("cannot write {}: {e}", path.display()),
                Err(c) => anyhow!(
                    "cannot write {} ({e}), nor cut it back to its last whole entry at \
                     byte {} ({c}): nothing more is written until it is",
                    path.display(),
                    self.size
                ),
            });
        }
        self.size += self.buf.len() as u64;
        if self.shipping {
            self.outgoing.extend_from_slice(&self.buf);
        }
        self.buf.clear();
        self.written = self.seq;
        self.unsynced = true;
        self.writes += 1;
        Ok(())
    }

    /// Sequence number of the last entry appended.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Sequence number of the last entry written to the file.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Keeps written frames for backups (from now on), or stops keeping
    /// them.
    pub fn ship(&mut self, on: bool) {
        self.shipping = on;
        if !on {
            self.outgoing = Vec::new();
        }
    }

    /// The frames written since the last call, as they are in the file,
    /// for backups.
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.outgoing)
    }

    /// A backup's journal takes its primary's state at `seq`: the snapshot
    /// replaces this journal's (as a compaction would), and the entries
    /// that follow will carry the primary's numbers.
    pub fn install(
        &mut self,
        seq: u64,
        head: &Head,
        jobs: impl ExactSizeIterator<Item = JobImage>,
    ) -> Result<()> {
        self.buf.clear();
        self.seq = seq;
        self.written = seq;
        self.compact_from(head, jobs)
    }

    /// A backup's journal appends frames its primary wrote, which must
    /// follow this journal's last entry; returns their entries.
    pub fn append_frames(&mut self, frames: &[u8]) -> Result<Vec<Entry>> {
        let (entries, intact) = read_entries(frames, 0);
        if intact != frames.len() {
            bail!(
                "damaged journal frames at byte {intact} of {}",
                frames.len()
            );
        }
        let mut next = self.seq + 1;
        for (seq, _) in &entries {
            if *seq != next {
                bail!("journal entry {seq} where {next} was due");
            }
            next += 1;
        }
        self.seq = next - 1;
        self.pending += entries.len() as u64;
        if !entries.is_empty() {
            self.pending_since
                .get_or_insert_with(std::time::Instant::now);
        }
        self.buf.extend_from_slice(frames);
        Ok(entries.into_iter().map(|(_, e)| e).collect())
    }

    /// Writes and syncs: what is appended is now durable.
    pub fn sync(&mut self) -> Result<()> {
        self.write()?;
        self.sync_written()
    }

    /// Syncs what is written, here and now; what a failed write left to
    /// write again stays pending.
    pub fn sync_written(&mut self) -> Result<()> {
        self.sync_dir_if_needed()?;
        if self.unsynced {
            self.file
                .sync_data()
                .with_context(|| format!("cannot sync {}", journal_path(&self.dir).display()))?;
            self.unsynced = false;
        }
        if self.buf.is_empty() {
            self.pending = 0;
            self.pending_since = None;
        } else {
            self.pending = self.seq - self.written;
        }
        Ok(())
    }

    /// Hands out the file to be synced on another thread, with what that
    /// sync will cover: what is written, up to [`Journal::written`] (a
    /// write that failed leaves the rest to a later one). The server's
    /// loop never waits for the disk; [`Journal::synced`] says when it is
    /// done.
    pub fn sync_written_elsewhere(&mut self) -> Result<(File, SyncCover)> {
        self.sync_dir_if_needed()?;
        let file = self
            .file
            .try_clone()
            .with_context(|| format!("cannot sync {}", journal_path(&self.dir).display()))?;
        Ok((
            file,
            SyncCover {
                seq: self.written,
                writes: self.writes,
                began: std::time::Instant::now(),
            },
        ))
    }

    /// Syncs the directory, if the last fold could not: the name of the
    /// new journal must be durable before anything in it can be.
    fn sync_dir_if_needed(&mut self) -> Result<()> {
        if self.dir_unsynced {
            sync_dir(&self.dir)?;
            self.dir_unsynced = false;
        }
        Ok(())
    }

    /// A sync handed out by [`Journal::sync_written_elsewhere`] is over: what it
    /// covers is durable. The journal is clean only if nothing was
    /// written, and the file not replaced (a fold, a backup's new state),
    /// since that sync began.
    pub fn synced(&mut self, cover: SyncCover) {
        let SyncCover { seq, writes, began } = cover;
        if writes == self.writes && self.buf.is_empty() {
            self.unsynced = false;
            self.pending = 0;
            self.pending_since = None;
        } else {
            // Entries came after the sync began: they wait for the next.
            // When the first of them came is not kept; the lag counts
            // from the sync's beginning, at most that sync's length too
            // much (the server begins a sync once the lag passes its
            // interval, so an older instant would have it sync without
            // pause).
            self.pending = self.seq.saturating_sub(seq);
            self.pending_since = Some(began);
        }
    }

    /// Entries appended since the last sync: what a crash of the machine
    /// would lose now.
    pub fn unsynced_entries(&self) -> u64 {
        self.pending
    }

    /// How long the oldest entry not yet synced has waited (zero when
    /// everything is synced): the journal's lag.
    pub fn lag(&self) -> std::time::Duration {
        self.pending_since
            .map_or(std::time::Duration::ZERO, |t| t.elapsed())
    }

    /// Whether entries wait to be written or synced.
    pub fn dirty(&self) -> bool {
        self.unsynced || !self.buf.is_empty()
    }

    pub fn wants_compaction(&self) -> bool {
        self.size > self.compact_at.max(self.snapshot_size)
    }

    /// Folds everything into a snapshot (which must include every entry
    /// appended so far) and starts an empty journal. The snapshot comes as
    /// its parts, the jobs produced one at a time and written as they come:
    /// a million queued jobs are never all in memory twice. The bytes are those of the [`Snapshot`]
    /// (bincode writes a struct as its fields in order, a map as its length
    /// then its pairs).
    pub fn compact_from(
        &mut self,
        head: &Head,
        jobs: impl ExactSizeIterator<Item = JobImage>,
    ) -> Result<()> {
        self.sync()?;
        let path = snapshot_path(&self.dir);
        let tmp = path.with_extension("tmp");
        let count = jobs.len();
        let written = (|| -> std::io::Result<u64> {
            let mut file = File::create(&tmp)?;
            file.write_all(&header(SNAPSHOT_MAGIC))?;
            file.write_all(&[0; 4])?;
            let mut out = Crc32Writer {
                inner: std::io::BufWriter::with_capacity(1 << 20, &mut file),
                crc: crc32fast::Hasher::new(),
                len: 0,
            };
            put(&mut out, &self.seq)?;
            put(&mut out, &head.next_id)?;
            put(&mut out, &(count as u64))?;
            let mut seen = 0;
            for job in jobs {
                put(&mut out, &(job.id, job))?;
                seen += 1;
            }
            if seen != count {
                return Err(std::io::Error::other("the job count changed while writing"));
            }
            put(&mut out, &head.history)?;
            put(&mut out, &head.drained)?;
            put(&mut out, &head.keys)?;
            put(&mut out, &head.failed)?;
            let crc = out.crc.clone().finalize();
            let len = out.len;
            out.inner.flush()?;
            drop(out);
            file.seek(std::io::SeekFrom::Start(HEADER as u64))?;
            file.write_all(&crc.to_le_bytes())?;
            file.sync_all()?;
            Ok((HEADER + 4) as u64 + len)
        })()
        .inspect_err(|_| {
            // Half a snapshot on a full disk would keep it full: the
            // fold is tried again, whole, once there is room.
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot replace {}", path.display()))?;
        sync_dir(&self.dir)?;
        // The new journal is opened before it replaces the old one, and
        // taken before anything else can fail: otherwise the entries that
        // follow would go to the old file, unlinked, and be lost.
        self.file = replace(&journal_path(&self.dir), &header(JOURNAL_MAGIC))?;
        self.size = HEADER as u64;
        self.torn = false;
        self.snapshot_size = written;
        self.writes += 1;
        self.dir_unsynced = true;
        self.sync_dir_if_needed()?;
        info!(
            jobs = count,
            seq = self.seq,
            bytes = written,
            "journal folded into a snapshot"
        );
        Ok(())
    }
}

/// Passes bytes through, keeping their CRC-32 and count.
struct Crc32Writer<W> {
    inner: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for Crc32Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Journal {
        /// Writes, then hands out a sync of everything.
        fn sync_elsewhere(&mut self) -> Result<(File, SyncCover)> {
            self.write()?;
            self.sync_written_elsewhere()
        }

        fn compact(&mut self, state: Snapshot) -> Result<()> {
            let (head, jobs) = parts(state);
            self.compact_from(&head, jobs.into_values())
        }
    }

    /// A snapshot as the parts a fold or an install takes.
    fn parts(state: Snapshot) -> (Head, BTreeMap<u64, JobImage>) {
        let head = Head {
            next_id: state.next_id,
            history: state.history,
            drained: state.drained,
            keys: state.keys,
            failed: state.failed,
        };
        (head, state.jobs)
    }

    fn image(id: u64) -> JobImage {
        JobImage {
            id,
            spec: JobSpec {
                cores: 2,
                runtime_ns: 10,
                walltime_ns: 0,
                ..Default::default()
            },
            partition: "batch".into(),
            state: JobState::Pending,
            submit_ns: 5,
            start_ns: 0,
            alloc: vec![],
            nodes: String::new(),
            host: None,
            ending_as: None,
            ending_ns: 0,
            suspended_by_policy: None,
            suspensions: vec![],
            since_ns: 5,
            reason: String::new(),
            held: false,
            array: None,
            queued_ns: 5,
            devices: String::new(),
            hold: None,
            restarts: 0,
            limit_changed: false,
        }
    }

    fn started(id: u64) -> Entry {
        Entry::Started {
            id,
            alloc: vec![NodeRun {
                first: "vn1".into(),
                last: "vn1".into(),
                nodes: 1,
                cores: 2,
            }],
            nodes: "vn1".into(),
            host: "h".into(),
            at_ns: 7,
            devices: String::new(),
        }
    }

    /// A snapshot holding jobs `ids`, pending, as of entry `seq`.
    fn snapshot(seq: u64, ids: impl IntoIterator<Item = u64>) -> Snapshot {
        let jobs: BTreeMap<u64, JobImage> = ids.into_iter().map(|id| (id, image(id))).collect();
        Snapshot {
            seq,
            next_id: jobs.keys().max().map_or(1, |m| m + 1),
            jobs,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_sync_made_elsewhere_cleans_only_what_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), 1 << 20).unwrap();
        j.append([Entry::Submitted(Box::new(image(1)))]);
        let (file, cover) = j.sync_elsewhere().unwrap();
        // An entry written while that sync runs is not covered by it.
        j.append([started(1)]);
        j.write().unwrap();
        file.sync_data().unwrap();
        j.synced(cover);
        assert!(j.dirty());
        assert_eq!(j.unsynced_entries(), 1);
        let (file, cover) = j.sync_elsewhere().unwrap();
        // A fold replaces the file: a sync of the old one covers nothing.
        j.compact(snapshot(2, [1])).unwrap();
        j.append([Entry::Submitted(Box::new(image(2)))]);
        j.write().unwrap();
        file.sync_data().unwrap();
        j.synced(cover);
        assert!(j.dirty());
        let (file, cover) = j.sync_elsewhere().unwrap();
        file.sync_data().unwrap();
        j.synced(cover);
        assert!(!j.dirty());
        assert_eq!(j.unsynced_entries(), 0);
        // Everything written is there after a reopen.
        drop(j);
        let (mut j, r) = Journal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(r.snapshot.jobs.len(), 1);
        assert_eq!(r.entries.len(), 1);
        // A backup takes its primary's state at an earlier entry, then
        // entries up to the very number the sync covered: they are not
        // the ones it covered.
        let (file, cover) = j.sync_elsewhere().unwrap();
        assert_eq!(cover.seq, 3);
        let (head, jobs) = parts(snapshot(1, [1]));
        j.install(1, &head, jobs.into_values()).unwrap();
        j.append([started(1), Entry::Submitted(Box::new(image(2)))]);
        j.write().unwrap();
        assert_eq!(j.seq(), 3);
        file.sync_data().unwrap();
        j.synced(cover);
        assert!(j.dirty());
    }

    #[test]
    fn entries_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, r) = Journal::open(dir.path(), 1 << 20).unwrap();
        assert!(r.entries.is_empty() && r.snapshot.jobs.is_empty());
        let written = [
            Entry::Submitted(Box::new(image(1))),
            Entry::Submitted(Box::new(image(2))),
            started(1),
        ];
        j.append(written[..2].to_vec());
        j.append([written[2].clone()]);
        j.sync().unwrap();
        drop(j);
        // A crash mid-write leaves half an entry behind.
        let path = dir.path().join("journal");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[40, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        let (mut j, r) = Journal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(r.entries, written);
        assert_eq!(j.seq, 3);
        // Appending goes on after the cut.
        j.append([Entry::Resumed { id: 1, at_ns: 9 }]);
        j.sync().unwrap();
        drop(j);
        let (j, r) = Journal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(j.seq, 4);
        assert_eq!(r.entries.len(), 4);
    }

    #[test]
    fn compaction_keeps_the_state_and_skips_entries_it_already_holds() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), 0).unwrap();
        let entries = vec![
            Entry::Submitted(Box::new(image(1))),
            started(1),
            Entry::Submitted(Box::new(image(2))),
        ];
        j.append(entries.clone());
        assert!(j.wants_compaction() || j.write().is_ok());
        // What the core would fold them into (here by hand).
        let state = snapshot(3, [1, 2]);
        j.compact(state.clone()).unwrap();
        // A crash right after the snapshot, before the journal was
        // emptied, would leave the old entries: put them back.
        let path = dir.path().join("journal");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        let mut again = Journal {
            dir: dir.path().to_path_buf(),
            file: f.try_clone().unwrap(),
            buf: Vec::new(),
            seq: 0,
            written: 0,
            size: 0,
            unsynced: false,
            torn: false,
            writes: 0,
            dir_unsynced: false,
            pending: 0,
            pending_since: None,
            compact_at: 0,
            snapshot_size: 0,
            shipping: false,
            outgoing: Vec::new(),
        };
        again.append(entries);
        f.write_all(&again.buf).unwrap();
        drop(f);
        let (j, r) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(r.snapshot, state);
        assert!(r.entries.is_empty(), "{:?}", r.entries);
        assert_eq!(j.seq, 3);
    }

    #[test]
    fn a_damaged_snapshot_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), 0).unwrap();
        j.compact(Snapshot::default()).unwrap();
        let path = dir.path().join("snapshot");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let err = Journal::open(dir.path(), 0).err().unwrap().to_string();
        assert!(err.contains("snapshot is damaged"), "{err}");
    }

    #[test]
    fn a_streamed_snapshot_is_the_bincode_of_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), 0).unwrap();
        let mut s = snapshot(0, 2..=4);
        s.next_id = 5;
        s.jobs.insert(2, {
            let mut im = image(2);
            im.state = JobState::Running;
            im.alloc = vec![NodeRun {
                first: "vn1".into(),
                last: "vn1".into(),
                nodes: 1,
                cores: 2,
            }];
            im
        });
        s.history.push(JobInfo {
            id: 1,
            name: String::new(),
            state: JobState::Completed,
            partition: "batch".into(),
            cores: 2,
            nodes: "vn1".into(),
            submit_ns: 5,
            start_ns: 6,
            end_ns: 9,
            runtime_ns: 10,
            walltime_ns: 0,
            reason: String::new(),
            suspensions: vec![(7, 8)],
            array: None,
            gres: None,
            mem_per_cpu_mb: 0,
            exit: (3, 0),
            program: None,
            restarts: 0,
            completing: false,
        });
        s.drained.push(("vn[1-2]".into(), "disk".into()));
        j.append((0..6).map(|_| Entry::Undrained { nodes: "x".into() }));
        j.compact(s.clone()).unwrap();
        s.seq = 6;
        let bytes = std::fs::read(dir.path().join("snapshot")).unwrap();
        let body = bincode::serialize(&s).unwrap();
        assert_eq!(&bytes[HEADER + 4..], &body[..]);
        assert_eq!(
            &bytes[HEADER..HEADER + 4],
            &crc32fast::hash(&body).to_le_bytes()
        );
        let (_, r) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(r.snapshot, s);
    }

    #[test]
    fn a_large_snapshot_is_not_rewritten_before_the_journal_outgrows_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), 0).unwrap();
        j.compact(snapshot(0, 1..=100)).unwrap();
        let snapshot = std::fs::metadata(dir.path().join("snapshot"))
            .unwrap()
            .len();
        let mut id = 100;
        while j.size <= snapshot {
            assert!(!j.wants_compaction(), "at {} of {snapshot} bytes", j.size);
            id += 1;
            j.append([Entry::Submitted(Box::new(image(id)))]);
            j.write().unwrap();
        }
        assert!(j.wants_compaction());
    }

    #[test]
    fn a_half_written_snapshot_left_by_a_fold_is_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = snapshot_path(dir.path()).with_extension("tmp");
        std::fs::write(&tmp, vec![0u8; 4096]).unwrap();
        let _ = Journal::open(dir.path(), 1 << 20).unwrap();
        assert!(!tmp.exists());
    }

    /// A write the disk cuts short (here the file size limit, which lets
    /// the first `write` through part-way and fails the next) loses no
    /// entry: the part written is cut off, and the entries go in whole
    /// once there is room. Runs in a child process, as the limit is the
    /// whole process's.
    #[test]
    fn a_write_cut_short_by_a_full_disk_loses_no_entry() {
        const CHILD: &str = "CLEMU_TEST_JOURNAL_FULL";
        if let Some(dir) = std::env::var_os(CHILD) {
            use nix::sys::resource::{getrlimit, setrlimit, Resource};
            use nix::sys::signal::{signal, SigHandler, Signal};
            let dir = Path::new(&dir);
            let (mut j, _) = Journal::open(dir, 1 << 20).unwrap();
            j.append([Entry::Submitted(Box::new(image(1)))]);
            j.sync().unwrap();
            // SAFETY: only ignores a signal, in a process of one test.
            unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) }.unwrap();
            let (_, hard) = getrlimit(Resource::RLIMIT_FSIZE).unwrap();
            setrlimit(Resource::RLIMIT_FSIZE, j.size + 20, hard).unwrap();
            j.append((2..=4).map(|id| Entry::Submitted(Box::new(image(id)))));
            assert!(j.write().is_err(), "the limit did not stop the write");
            // A sync meanwhile covers what was written, not what waits.
            assert_eq!((j.seq(), j.written()), (4, 1));
            let (_, cover) = j.sync_written_elsewhere().unwrap();
            assert_eq!(cover.seq, 1);
            j.sync_written().unwrap();
            assert_eq!(j.unsynced_entries(), 3, "what waits is still pending");
            setrlimit(Resource::RLIMIT_FSIZE, hard, hard).unwrap();
            j.append([started(1)]);
            j.sync().unwrap();
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "journal::tests::a_write_cut_short_by_a_full_disk_loses_no_entry",
                "--test-threads=1",
            ])
            .env(CHILD, dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let (j, r) = Journal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(j.seq, 5, "entries recovered: {:?}", r.entries);
        let mut want: Vec<Entry> = (1..=4)
            .map(|id| Entry::Submitted(Box::new(image(id))))
            .collect();
        want.push(started(1));
        assert_eq!(r.entries, want);
    }
}
