//! The job record: one frame per finished job, appended by `sigsleep`.
//! This module owns the frame layout, its encoder and its streaming decoder.
//!
//! A frame is a 14-byte little-endian header followed by a bincode payload:
//!
//! | offset | size | field                                      |
//! |-------:|-----:|--------------------------------------------|
//! | 0      | 4    | magic `C L J R` (`43 4C 4A 52`)            |
//! | 4      | 2    | format version, `u16` (1; 2 with devices; 3 for a program's end) |
//! | 6      | 4    | payload length in bytes, `u32`             |
//! | 10     | 4    | CRC-32 (IEEE) of the payload, `u32`        |
//! | 14     | n    | payload: [`JobRecord`] in bincode 1.3.3    |
//!
//! The payload encoding and every field are described byte by byte in
//! `docs/record-format.md`. The decoder ([`RecordReader`]) never trusts the
//! input: a frame whose header is implausible, whose CRC does not match or
//! whose payload does not decode is counted and skipped, and decoding resumes
//! at the next occurrence of the magic after the bad frame's start. A frame
//! cut short by the end of the input is counted as torn.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read};

use bincode::Options;
use serde::{Deserialize, Serialize};

mod devices;
mod shape;

pub use devices::Devices;
use shape::{v1_shape_fits, v2_shape_fits, v3_shape_fits};

/// First four bytes of every frame; also what the decoder searches for when
/// it resynchronises after damage.
pub const MAGIC: [u8; 4] = *b"CLJR";
/// The payload layout of a record without devices: what every record was
/// before generic resources, and what a record without them still is, so
/// that a reader older than them reads it.
pub const VERSION_1: u16 = 1;
/// Version 1's payload followed by the devices the job held.
pub const VERSION: u16 = 2;
/// Version 2's payload (devices, perhaps none) followed by how a program
/// run as the job ended ([`ProgramEnd`]): written only for such jobs, so
/// that a reader older than them reads every record of sigsleeps.
pub const VERSION_3: u16 = 3;
/// Version 3's payload, where the program's end may be that it was never
/// launched ([`ProgramEnd::NOT_LAUNCHED`]): written only for such jobs,
/// so that a reader of version 3 reads every other record, and says of
/// these that their version is unknown to it rather than that they are
/// damaged.
pub const VERSION_4: u16 = 4;
/// Bytes before the payload: magic, version, length, CRC.
pub const HEADER_LEN: usize = 14;
/// Largest payload a frame may declare. A record with a million suspensions
/// still fits; anything larger is treated as a corrupt length field, which
/// also bounds how far the decoder reads ahead to check one frame.
pub const MAX_PAYLOAD: usize = 16 << 20;

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum Status {
    /// Ran for its full requested run time.
    Completed,
    /// Ended early by `SIGTERM`/`SIGINT` (a cancel).
    Cancelled,
    /// Could not run as asked.
    Failed,
    /// Stopped when its wall-time limit was reached.
    Timeout,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Completed,
        Status::Cancelled,
        Status::Failed,
        Status::Timeout,
    ];

    /// The name used in JSON, CSV and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Status> for u8 {
    fn from(s: Status) -> u8 {
        match s {
            Status::Completed => 0,
            Status::Cancelled => 1,
            Status::Failed => 2,
            Status::Timeout => 3,
        }
    }
}

impl TryFrom<u8> for Status {
    type Error = String;
    fn try_from(v: u8) -> Result<Self, String> {
        Status::ALL
            .get(usize::from(v))
            .copied()
            .ok_or_else(|| format!("unknown job status code {v}"))
    }
}

/// Facts about a run that the numbers alone do not tell, as a bit set.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Flags(pub u32);

impl Flags {
    /// A `SIGCONT` arrived without a `SIGTSTP` before it: the job was stopped
    /// by a bare `SIGSTOP` it could not see (or a resume overtook its
    /// suspend). The stop is taken to start as late as possible: no
    /// suspension is recorded unless the job's deadline passed while it was
    /// stopped, and then one from the deadline to the resume. The recorded
    /// suspended time is a lower bound.
    pub const BARE_STOP: Flags = Flags(1 << 0);
    /// No submit instant was given; `submit` equals `start`.
    pub const SUBMIT_UNKNOWN: Flags = Flags(1 << 1);
    /// More signals arrived at once than sigsleep could log; the suspension
    /// list is incomplete (the run time it counted is still right).
    pub const EVENTS_LOST: Flags = Flags(1 << 2);
    /// The job's processes went over its memory limit (sigsleep's
    /// `--mem-limit`) and one of them was killed for it: a program job
    /// that then ends completed or failed is, as Slurm says,
    /// out of memory.
    pub const OUT_OF_MEMORY: Flags = Flags(1 << 3);

    /// Every known flag with its name, in bit order.
    pub const NAMES: [(Flags, &'static str); 4] = [
        (Flags::BARE_STOP, "bare_stop"),
        (Flags::SUBMIT_UNKNOWN, "submit_unknown"),
        (Flags::EVENTS_LOST, "events_lost"),
        (Flags::OUT_OF_MEMORY, "out_of_memory"),
    ];

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }

    /// Names of the bits that are set; unknown bits come out as `bitN`.
    pub fn names(self) -> impl Iterator<Item = Cow<'static, str>> {
        (0..32).filter(move |b| self.0 & (1 << b) != 0).map(|b| {
            Flags::NAMES
                .iter()
                .find(|(f, _)| f.0 == 1 << b)
                .map(|(_, n)| Cow::Borrowed(*n))
                .unwrap_or_else(|| Cow::Owned(format!("bit{b}")))
        })
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// One stretch during which the job was suspended, as CLOCK_REALTIME
/// nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    pub suspend: i64,
    pub resume: i64,
}

impl Suspension {
    pub fn duration_ns(&self) -> i64 {
        self.resume.saturating_sub(self.suspend)
    }
}

/// What a job whose output cannot be opened ends with on Slurm 22.05: its
/// batch step fails to launch, and the job is FAILED with `ExitCode` 0:53
/// (its reason `JobLaunchFailure`).
pub const SLURM_LAUNCH_FAILURE: i32 = 53;

/// How a program run as the job ended (a batch script, any command): what
/// Slurm's accounting calls ExitCode, TotalCPU and MaxRSS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramEnd {
    /// 0: it exited with code `value`; 1: signal `value` ended it; 2: it
    /// could not be started (`value` 126: not executable, 127: not found);
    /// 3: it was never launched, as its output or error file could not be
    /// opened (`value`: the error number of the open).
    pub kind: u8,
    pub value: i32,
    /// User and system CPU time of all its processes.
    pub cpu_ns: u64,
    /// The largest resident set of any one of them, KiB.
    pub max_rss_kib: u64,
}

impl ProgramEnd {
    pub const EXITED: u8 = 0;
    pub const SIGNALED: u8 = 1;
    pub const NOT_STARTED: u8 = 2;
    pub const NOT_LAUNCHED: u8 = 3;

    /// Slurm's `ExitCode` field: `code:signal`. A job never launched is
    /// Slurm's batch step that failed to launch: `0:53`.
    pub fn exit_code(&self) -> String {
        match self.kind {
            Self::SIGNALED => format!("0:{}", self.value),
            Self::NOT_LAUNCHED => format!("0:{SLURM_LAUNCH_FAILURE}"),
            _ => format!("{}:0", self.value),
        }
    }

    /// Whether the program ran at all.
    pub fn started(&self) -> bool {
        matches!(self.kind, Self::EXITED | Self::SIGNALED)
    }
}

/// What one execution of a job leaves behind. Instants are CLOCK_REALTIME
/// nanoseconds since the Unix epoch; durations are nanoseconds.
///
/// The node name borrows from the decoder's buffer when read back, so that
/// reading millions of records does not allocate one string each; use
/// [`JobRecord::into_owned`] to keep a record past the next read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord<'a> {
    /// Job id: the cluster's (a replay's `jobs.csv` maps it to the trace's
    /// job number).
    pub id: u64,
    /// Cores allocated to the job.
    pub cores: u32,
    /// First node the job ran on.
    #[serde(borrow)]
    pub node: Cow<'a, str>,
    /// When the job was submitted.
    pub submit: i64,
    /// When the job's process started.
    pub start: i64,
    /// When the job's process ended.
    pub end: i64,
    /// Requested run time: unsuspended time the job sleeps.
    pub runtime: u64,
    /// Requested wall-time limit, 0 when unknown.
    pub walltime: u64,
    pub status: Status,
    pub flags: Flags,
    /// Suspensions in the order they happened.
    pub suspensions: Vec<Suspension>,
    /// Devices of generic resources the job held, node by node (empty for
    /// a job that asked none: then the frame is version 1). Encoded after
    /// the fields above, outside serde's view of the struct.
    #[serde(skip)]
    pub devices: Vec<Devices<'a>>,
    /// How the program ended, for a job that ran one instead of sleeping
    /// (then the frame is version 3, or 4 for one never launched). Encoded after the devices.
    #[serde(skip)]
    pub program: Option<ProgramEnd>,
}

impl JobRecord<'_> {
    /// A copy that owns its node name.
    pub fn into_owned(self) -> JobRecord<'static> {
        JobRecord {
            node: Cow::Owned(self.node.into_owned()),
            devices: self.devices.into_iter().map(Devices::into_owned).collect(),
            ..self
        }
    }

    /// Total suspended time in nanoseconds.
    pub fn suspended_ns(&self) -> i64 {
        self.suspensions.iter().map(Suspension::duration_ns).sum()
    }
}

/// Why a record could not be encoded.
#[derive(Debug)]
pub enum EncodeError {
    /// The payload would exceed [`MAX_PAYLOAD`] (an absurd suspension count).
    TooLarge(usize),
    Bincode(bincode::Error),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooLarge(n) => write!(
                f,
                "job record payload of {n} bytes exceeds the {MAX_PAYLOAD}-byte frame limit"
            ),
            EncodeError::Bincode(e) => write!(f, "cannot encode job record: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}

fn payload_options() -> impl Options {
    // Fixed-width little-endian integers, u64 length prefixes: the layout of
    // bincode 1.3's `bincode::serialize`, written out in docs/record-format.md.
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
}

/// Appends one complete frame for `rec` to `out`.
pub fn encode(rec: &JobRecord<'_>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let at = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    let mut written = payload_options().serialize_into(&mut *out, rec);
    if written.is_ok() && (!rec.devices.is_empty() || rec.program.is_some()) {
        written = payload_options().serialize_into(&mut *out, &rec.devices);
    }
    if let (true, Some(p)) = (written.is_ok(), &rec.program) {
        written = payload_options().serialize_into(&mut *out, p);
    }
    if let Err(e) = written {
        out.truncate(at);
        return Err(EncodeError::Bincode(e));
    }
    let version = match (rec.program, rec.devices.is_empty()) {
        (Some(p), _) if p.kind == ProgramEnd::NOT_LAUNCHED => VERSION_4,
        (Some(_), _) => VERSION_3,
        (None, true) => VERSION_1,
        (None, false) => VERSION,
    };
    let len = out.len() - at - HEADER_LEN;
    if len > MAX_PAYLOAD {
        out.truncate(at);
        return Err(EncodeError::TooLarge(len));
    }
    let crc = crc32fast::hash(&out[at + HEADER_LEN..]);
    let header = &mut out[at..at + HEADER_LEN];
    header[0..4].copy_from_slice(&MAGIC);
    header[4..6].copy_from_slice(&version.to_le_bytes());
    // `len <= MAX_PAYLOAD` was checked above, so it fits a u32.
    header[6..10].copy_from_slice(&(len as u32).to_le_bytes());
    header[10..14].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// A frame for `rec` on its own, ready for a single `write(2)`.
pub fn encode_to_vec(rec: &JobRecord<'_>) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(HEADER_LEN + 96 + rec.node.len() + 16 * rec.suspensions.len());
    encode(rec, &mut out)?;
    Ok(out)
}

/// What a decoder has seen so far besides good records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Records decoded and returned.
    pub records: u64,
    /// Damaged frames: implausible length, CRC mismatch, a payload that did
    /// not decode, or a run of stray bytes (a frame whose magic was hit).
    pub corrupt: u64,
    /// Frames cut short by the end of the input (a write that never finished).
    pub torn: u64,
    /// Intact frames of a format version this build does not know.
    pub unsupported: u64,
    /// Bytes skipped while looking for the next magic.
    pub skipped_bytes: u64,
    /// Where the first magic (or a torn piece of one) was, counted from
    /// the start of the input; `None` if there was none. A record file
    /// starts with one, however damaged its frames.
    pub first_magic_at: Option<u64>,
}

impl DecodeStats {
    /// Frames lost to damage of any kind (what calcmets reports as corrupt).
    pub fn damaged(&self) -> u64 {
        self.corrupt + self.torn
    }

    pub fn add(&mut self, other: &DecodeStats) {
        self.records += other.records;
        self.corrupt += other.corrupt;
        self.torn += other.torn;
        self.unsupported += other.unsupported;
        self.skipped_bytes += other.skipped_bytes;
        self.first_magic_at = match (self.first_magic_at, other.first_magic_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Streaming decoder over any reader. Memory use is bounded by the largest
/// frame (at most [`HEADER_LEN`] + [`MAX_PAYLOAD`]), not by the input size.
pub struct RecordReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of the bytes not yet consumed.
    pos: usize,
    /// End of the bytes read so far.
    end: usize,
    eof: bool,
    stats: DecodeStats,
    /// Whether the damage at hand has been counted already: stray bytes that
    /// follow a counted bad frame are its remains, not a second loss.
    damage_counted: bool,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// Stream offset up to which a large frame failed its CRC. A large frame
    /// starting before it is given up without a CRC of its own: otherwise
    /// a crafted file of headers that each claim megabytes would cost a
    /// megabyte-long CRC per byte of input.
    shadow: u64,
}

/// Frames longer than this that start inside the extent of a large frame
/// that failed its CRC are not checked (see `RecordReader::shadow`). Real
/// records are about a hundred bytes; 4 KiB is 250 suspensions.
const LARGE: usize = 4096;

/// Where a CRC-checked frame sits in the decoder's buffer.
struct FrameAt {
    start: usize,
    version: u16,
    payload: std::ops::Range<usize>,
}

/// Outcome of looking at the bytes at `pos`, which start with the magic.
enum Frame {
    /// A record's payload occupies `pos + HEADER_LEN .. pos + total`.
    Good { total: usize },
    /// An intact frame of another version: skip it whole.
    Unsupported { total: usize },
    /// Need more bytes to decide; at end of input this is a torn frame.
    Incomplete { want: usize },
    /// Damaged: resume the search one byte further.
    Corrupt,
}

impl<R: Read> RecordReader<R> {
    pub fn new(inner: R) -> Self {
        RecordReader {
            inner,
            buf: vec![0; 64 * 1024],
            pos: 0,
            end: 0,
            eof: false,
            stats: DecodeStats::default(),
            damage_counted: false,
            base: 0,
            shadow: 0,
        }
    }

    pub fn stats(&self) -> DecodeStats {
        self.stats
    }

    /// The next intact record, owned, or `Ok(None)` at the end of the input.
    /// Damage is counted in [`RecordReader::stats`], never returned as an
    /// error; only errors of the underlying reader are.
    pub fn next_record(&mut self) -> io::Result<Option<JobRecord<'static>>> {
        while let Some(frame) = self.next_frame()? {
            match decode_payload(frame.version, &self.buf[frame.payload.clone()]) {
                Some(rec) => {
                    self.stats.records += 1;
                    return Ok(Some(rec.into_owned()));
                }
                None => self.reject(frame.start),
            }
        }
        Ok(None)
    }

    /// Calls `f` on every intact record until the end of the input, without
    /// copying: the record borrows the decoder's buffer. This is the fast
    /// path for reading millions of records. Stops at the first error of the
    /// reader or of `f`.
    pub fn for_each_record<E: From<io::Error>>(
        &mut self,
        mut f: impl FnMut(&JobRecord<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(frame) = self.next_frame()? {
            match decode_payload(frame.version, &self.buf[frame.payload.clone()]) {
                Some(rec) => {
                    self.stats.records += 1;
                    f(&rec)?;
                }
                None => self.reject(frame.start),
            }
        }
        Ok(())
    }

    /// A frame whose CRC matched but whose payload did not decode (a bug or
    /// a forgery, not line noise): count it and resume right after its start.
    fn reject(&mut self, start: usize) {
        self.count_corrupt();
        self.pos = start + 1;
    }

    fn count_corrupt(&mut self) {
        self.stats.corrupt += 1;
        self.damage_counted = true;
    }

    /// Stray bytes between frames. In a file that only sigsleep writes they
    /// are the remains of a frame whose magic was damaged, so a run of them
    /// not already explained by a counted bad frame counts as one.
    fn skip(&mut self, n: usize) {
        if n > 0 {
            self.stats.skipped_bytes += n as u64;
            if !self.damage_counted {
                self.count_corrupt();
            }
            self.pos += n;
        }
    }

    /// The next frame whose header is plausible and whose CRC matches. `pos`
    /// moves past it; its bytes stay in the buffer until the next call.
    fn next_frame(&mut self) -> io::Result<Option<FrameAt>> {
        loop {
            if !self.seek_magic()? {
                return Ok(None);
            }
            match self.inspect() {
                Frame::Good { total } => {
                    let start = self.pos;
                    self.pos += total;
                    self.damage_counted = false;
                    return Ok(Some(FrameAt {
                        start,
                        version: u16::from_le_bytes([self.buf[start + 4], self.buf[start + 5]]),
                        payload: start + HEADER_LEN..start + total,
                    }));
                }
                Frame::Unsupported { total } => {
                    self.stats.unsupported += 1;
                    self.pos += total;
                }
                Frame::Corrupt => {
                    self.count_corrupt();
                    self.pos += 1;
                }
                Frame::Incomplete { want } => {
                    if !self.fill(want)? {
                        // The input ends inside this frame. If its length
                        // field lied, a later frame may still be in reach.
                        self.stats.torn += 1;
                        self.damage_counted = true;
                        self.pos += 1;
                    }
                }
            }
        }
    }

    /// Moves `pos` to the next magic, reading as needed. Returns false at
    /// the end of the input (remaining bytes counted as skipped).
    fn seek_magic(&mut self) -> io::Result<bool> {
        loop {
            let hay = &self.buf[self.pos..self.end];
            if hay.len() >= MAGIC.len() {
                if hay[..4] == MAGIC {
                    self.saw_magic();
                    return Ok(true);
                }
                match find_magic(hay) {
                    Some(i) => {
                        self.skip(i);
                        self.saw_magic();
                        return Ok(true);
                    }
                    // Keep a tail that could be the start of a magic.
                    None => self.skip(hay.len() - (MAGIC.len() - 1)),
                }
            }
            if !self.fill(MAGIC.len())? {
                let left = self.end - self.pos;
                if left > 0 && MAGIC.starts_with(&self.buf[self.pos..self.end]) {
                    // A write that stopped within the magic itself.
                    self.saw_magic();
                    if !self.damage_counted {
                        self.stats.torn += 1;
                    }
                    self.pos = self.end;
                } else {
                    self.skip(left);
                }
                return Ok(false);
            }
        }
    }

    /// Notes the stream offset of the magic at `pos`, if it is the first.
    fn saw_magic(&mut self) {
        if self.stats.first_magic_at.is_none() {
            self.stats.first_magic_at = Some(self.base + self.pos as u64);
        }
    }

    fn inspect(&mut self) -> Frame {
        let avail = &self.buf[self.pos..self.end];
        if avail.len() < HEADER_LEN {
            return Frame::Incomplete { want: HEADER_LEN };
        }
        let version = u16::from_le_bytes([avail[4], avail[5]]);
        let len = u32::from_le_bytes([avail[6], avail[7], avail[8], avail[9]]) as usize;
        let crc = u32::from_le_bytes([avail[10], avail[11], avail[12], avail[13]]);
        if len > MAX_PAYLOAD || version == 0 {
            return Frame::Corrupt;
        }
        let total = HEADER_LEN + len;
        if avail.len() < total {
            return Frame::Incomplete { want: total };
        }
        let payload = &avail[HEADER_LEN..total];
        // Cheap checks first, so that noise which happens to hold the magic
        // rarely costs a CRC.
        let fits = match version {
            VERSION_1 => v1_shape_fits(payload),
            VERSION => v2_shape_fits(payload),
            VERSION_3 | VERSION_4 => v3_shape_fits(payload),
            _ => true,
        };
        if !fits {
            return Frame::Corrupt;
        }
        let at = self.base + self.pos as u64;
        if len > LARGE && at < self.shadow {
            return Frame::Corrupt;
        }
        if crc32fast::hash(payload) != crc {
            if len > LARGE {
                self.shadow = self.shadow.max(at + total as u64);
            }
            return Frame::Corrupt;
        }
        if ![VERSION_1, VERSION, VERSION_3, VERSION_4].contains(&version) {
            return Frame::Unsupported { total };
        }
        Frame::Good { total }
    }

    /// Reads until at least `want` bytes are available from `pos`. Returns
    /// false if the input ended first.
    fn fill(&mut self, want: usize) -> io::Result<bool> {
        while self.end - self.pos < want {
            if self.eof {
                return Ok(false);
            }
            if self.buf.len() - self.pos < want || self.end == self.buf.len() {
                // Move the unconsumed bytes to the front, growing if one
                // frame needs more room than the buffer has.
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.base += self.pos as u64;
                self.pos = 0;
                if self.buf.len() < want {
                    self.buf.resize(want.next_power_of_two(), 0);
                }
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

fn find_magic(hay: &[u8]) -> Option<usize> {
    // The magic's first byte is rare in record payloads, so a byte scan
    // followed by a compare is enough; this only runs after damage.
    let mut from = 0;
    while let Some(i) = hay[from..].iter().position(|&b| b == MAGIC[0]) {
        let at = from + i;
        if hay.len() - at < MAGIC.len() {
            return None;
        }
        if hay[at..at + MAGIC.len()] == MAGIC {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn decode_payload(version: u16, payload: &[u8]) -> Option<JobRecord<'_>> {
    // No byte limit: reading from a slice cannot go past its end, and
    // bincode caps what it preallocates for a claimed length, so a lying
    // length prefix fails at the end of the payload instead of allocating.
    let options = payload_options().reject_trailing_bytes();
    if version == VERSION_1 {
        return options.deserialize(payload).ok();
    }
    let mut de = bincode::Deserializer::from_slice(payload, options);
    let mut rec = JobRecord::deserialize(&mut de).ok()?;
    // The frame's shape was checked against the payload's length: with the
    // devices read, every byte is used.
    rec.devices = Vec::deserialize(&mut de).ok()?;
    if version == VERSION_3 || version == VERSION_4 {
        let end = ProgramEnd::deserialize(&mut de).ok()?;
        // Each kind has one version, as the writer chose it: the CRC does
        // not cover the header, and a version 3 frame whose version byte
        // was hit must not read as a version 4 one.
        let fits = if version == VERSION_3 {
            end.kind <= ProgramEnd::NOT_STARTED
        } else {
            end.kind == ProgramEnd::NOT_LAUNCHED
        };
        if !fits {
            return None;
        }
        rec.program = Some(end);
    }
    Some(rec)
}

/// Length of the longest prefix of `bytes` made of whole frames (headers
/// read, payloads fully present; CRCs are left to the reader) and of stray
/// bytes between them. For tailing a log that writers are still appending
/// to: what lies past the prefix may be a frame not yet fully written.
pub fn complete_prefix(bytes: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        let rest = &bytes[pos..];
        if rest.len() < MAGIC.len() {
            return pos;
        }
        if rest[..4] != MAGIC {
            match find_magic(rest) {
                Some(i) => pos += i,
                // Keep a tail that may be the start of a magic.
                None => return bytes.len() - (MAGIC.len() - 1),
            }
            continue;
        }
        if rest.len() < HEADER_LEN {
            return pos;
        }
        let len = u32::from_le_bytes([rest[6], rest[7], rest[8], rest[9]]) as usize;
        if len > MAX_PAYLOAD {
            // Not a frame: step over its magic.
            pos += 1;
            continue;
        }
        if rest.len() < HEADER_LEN + len {
            return pos;
        }
        pos += HEADER_LEN + len;
    }
}

/// The length, header included, that the frame at the start of `bytes`
/// claims (it may be cut short or damaged): `None` without a magic and
/// a whole header, or with an implausible length.
pub fn frame_len(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < HEADER_LEN || bytes[..4] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    (len <= MAX_PAYLOAD).then_some(HEADER_LEN + len)
}

/// How many bytes (zeros) to append to `bytes`, the end of a file of
/// frames, so that the frame it ends in, if that one was cut short, is
/// as long as its header claims. A writer that starts a frame after a
/// torn one appends these first: else the new frame lies within the
/// torn one's claimed length, where a reader may not look for frames
/// (see `RecordReader`). Frames are walked from the first magic, their
/// CRCs checked; only a frame cut short after the last intact one
/// counts, and a header cut short is first completed with zeros.
pub fn torn_rest(bytes: &[u8]) -> usize {
    let mut pos = 0;
    while let Some(at) = find_magic(&bytes[pos..]).map(|i| pos + i) {
        let rest = &bytes[at..];
        let mut header = [0u8; HEADER_LEN];
        let got = rest.len().min(HEADER_LEN);
        header[..got].copy_from_slice(&rest[..got]);
        let claimed = frame_len(&header).unwrap_or(HEADER_LEN);
        if rest.len() < claimed {
            return claimed - rest.len();
        }
        let crc = u32::from_le_bytes([rest[10], rest[11], rest[12], rest[13]]);
        pos = if crc32fast::hash(&rest[HEADER_LEN..claimed]) == crc {
            at + claimed
        } else {
            at + 1
        };
    }
    0
}

/// Decodes a whole byte slice: every intact record (owned) and the stats.
pub fn decode_all(bytes: &[u8]) -> (Vec<JobRecord<'static>>, DecodeStats) {
    let mut reader = RecordReader::new(bytes);
    let mut out = Vec::new();
    // Reading from a slice cannot fail.
    while let Ok(Some(rec)) = reader.next_record() {
        out.push(rec);
    }
    (out, reader.stats())
}

#[cfg(test)]
mod tests {
    use super::shape::v1_len;
    use super::*;

    pub(crate) fn sample(id: u64) -> JobRecord<'static> {
        JobRecord {
            id,
            cores: 16,
            node: Cow::Owned(format!("vn{id:04}")),
            submit: 1_700_000_000_000_000_000,
            start: 1_700_000_001_000_000_000,
            end: 1_700_000_012_000_000_000,
            runtime: 10_000_000_000,
            walltime: 60_000_000_000,
            status: Status::Completed,
            flags: Flags::default(),
            suspensions: vec![Suspension {
                suspend: 1_700_000_002_000_000_000,
                resume: 1_700_000_003_000_000_000,
            }],
            devices: Vec::new(),
            program: None,
        }
    }

    fn with_devices(id: u64) -> JobRecord<'static> {
        JobRecord {
            devices: vec![
                Devices {
                    node: Cow::Borrowed("vn0001"),
                    kind: Cow::Borrowed("gpu"),
                    ids: vec![0, 3],
                },
                Devices {
                    node: Cow::Borrowed("vn0002"),
                    kind: Cow::Borrowed("fpga"),
                    ids: vec![1],
                },
            ],
            ..sample(id)
        }
    }

    #[test]
    fn devices_make_a_version_2_frame_and_read_back() {
        let v1 = encode_to_vec(&sample(1)).unwrap();
        assert_eq!(&v1[4..6], &[1, 0], "no devices: version 1, as before them");
        let v2 = encode_to_vec(&with_devices(2)).unwrap();
        assert_eq!(&v2[4..6], &[2, 0]);
        // Version 1's payload, then the devices.
        let bare = encode_to_vec(&sample(2)).unwrap();
        assert!(v2[HEADER_LEN..].starts_with(&bare[HEADER_LEN..]));
        let mut tail = Vec::new();
        tail.extend_from_slice(&2u64.to_le_bytes());
        for (node, kind, ids) in [
            ("vn0001", "gpu", &[0u32, 3][..]),
            ("vn0002", "fpga", &[1][..]),
        ] {
            tail.extend_from_slice(&(node.len() as u64).to_le_bytes());
            tail.extend_from_slice(node.as_bytes());
            tail.extend_from_slice(&(kind.len() as u64).to_le_bytes());
            tail.extend_from_slice(kind.as_bytes());
            tail.extend_from_slice(&(ids.len() as u64).to_le_bytes());
            for id in ids {
                tail.extend_from_slice(&id.to_le_bytes());
            }
        }
        assert!(v2.ends_with(&tail), "the devices follow version 1's fields");
        let mut bytes = v1;
        bytes.extend_from_slice(&v2);
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(1), with_devices(2)]);
        assert_eq!(stats.corrupt + stats.unsupported, 0);
    }

    #[test]
    fn a_program_never_launched_is_version_4_and_no_other_kind_is() {
        let end = |kind| ProgramEnd {
            kind,
            value: 2,
            cpu_ns: 0,
            max_rss_kib: 0,
        };
        let never = JobRecord {
            program: Some(end(ProgramEnd::NOT_LAUNCHED)),
            ..sample(1)
        };
        let v4 = encode_to_vec(&never).unwrap();
        assert_eq!(&v4[4..6], &[4, 0]);
        let ran = encode_to_vec(&JobRecord {
            program: Some(end(ProgramEnd::EXITED)),
            ..sample(2)
        })
        .unwrap();
        assert_eq!(&ran[4..6], &[3, 0], "a program that ran stays version 3");
        // The same payload as version 3: a kind version 3 does not have.
        let mut as_v3 = v4.clone();
        as_v3[4..6].copy_from_slice(&VERSION_3.to_le_bytes());
        let mut bytes = v4.clone();
        bytes.extend_from_slice(&as_v3);
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![never]);
        assert_eq!(stats.corrupt, 1);
        // And a version 3 payload under version 4: a kind version 4 does
        // not have (a hit on the version byte, which the CRC leaves out).
        let mut as_v4 = ran.clone();
        as_v4[4..6].copy_from_slice(&VERSION_4.to_le_bytes());
        let (recs, stats) = decode_all(&as_v4);
        assert!(recs.is_empty(), "{recs:?}");
        assert_eq!(stats.corrupt, 1);
        assert_eq!(end(ProgramEnd::NOT_LAUNCHED).exit_code(), "0:53");
        assert!(!end(ProgramEnd::NOT_LAUNCHED).started());
    }

    #[test]
    fn a_torn_last_frame_is_filled_out_to_its_claimed_length() {
        let a = encode_to_vec(&sample(1)).unwrap();
        let b = encode_to_vec(&sample(2)).unwrap();
        let whole = [a.clone(), b.clone()].concat();
        assert_eq!(torn_rest(&whole), 0);
        assert_eq!(torn_rest(&[]), 0);
        // Cut in the payload, in the header, after the magic alone.
        for cut in [b.len() - 1, 20, HEADER_LEN - 1, 4] {
            let file = [&a[..], &b[..cut]].concat();
            let fill = torn_rest(&file);
            let mut filled = file.clone();
            filled.resize(file.len() + fill, 0);
            // What follows the filled-out frame is read.
            filled.extend_from_slice(&b);
            let (recs, _) = decode_all(&filled);
            assert_eq!(
                recs.iter().map(|r| r.id).collect::<Vec<_>>(),
                [1, 2],
                "cut at {cut}"
            );
            if cut >= 10 {
                assert_eq!(file.len() + fill, a.len() + b.len(), "cut at {cut}");
            }
        }
        // A damaged frame before the end is not a torn one.
        let mut damaged = whole.clone();
        damaged[a.len() + HEADER_LEN] ^= 1;
        assert_eq!(torn_rest(&damaged), 0);
        // Nor is the magic inside a payload, found first.
        assert_eq!(torn_rest(&whole[3..]), 0);
    }

    #[test]
    fn a_frame_says_its_length_even_cut_short() {
        let frame = encode_to_vec(&sample(7)).unwrap();
        assert_eq!(frame_len(&frame), Some(frame.len()));
        assert_eq!(frame_len(&frame[..HEADER_LEN]), Some(frame.len()));
        assert_eq!(frame_len(&frame[..HEADER_LEN - 1]), None);
        assert_eq!(frame_len(&frame[1..]), None);
    }

    #[test]
    fn a_version_2_payload_of_the_wrong_shape_is_corrupt() {
        let frame = encode_to_vec(&with_devices(1)).unwrap();
        let payload = &frame[HEADER_LEN..];
        assert!(v2_shape_fits(payload));
        assert!(!v2_shape_fits(&payload[..payload.len() - 1]));
        let mut longer = payload.to_vec();
        longer.push(0);
        assert!(!v2_shape_fits(&longer));
        // A count of entries that lies.
        let at = v1_len(payload).unwrap();
        let mut lying = payload.to_vec();
        lying[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(!v2_shape_fits(&lying));
        // The same, with a CRC that matches: still corrupt, not a record.
        let mut bytes = frame[..HEADER_LEN].to_vec();
        bytes.extend_from_slice(&lying);
        let crc = crc32fast::hash(&lying);
        bytes[10..14].copy_from_slice(&crc.to_le_bytes());
        let (recs, stats) = decode_all(&bytes);
        assert!(recs.is_empty());
        assert_eq!(stats.corrupt, 1);
    }

    #[test]
    fn the_devices_text_form_round_trips() {
        let rec = with_devices(1);
        let text = Devices::list_to_string(&rec.devices);
        assert_eq!(text, "vn0001:gpu=0,3;vn0002:fpga=1");
        assert_eq!(Devices::parse_list(&text).unwrap(), rec.devices);
        assert_eq!(Devices::parse_list("").unwrap(), vec![]);
        for bad in [
            "vn1",
            "vn1:gpu",
            "vn1:gpu=",
            "vn1:gpu=x",
            ":gpu=1",
            "vn1:=1",
        ] {
            assert!(Devices::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_layout_is_as_documented() {
        let frame = encode_to_vec(&sample(7)).unwrap();
        assert_eq!(&frame[0..4], b"CLJR");
        assert_eq!(&frame[4..6], &[1, 0]);
        let len = u32::from_le_bytes(frame[6..10].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - HEADER_LEN);
        let crc = u32::from_le_bytes(frame[10..14].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&frame[HEADER_LEN..]));
        // Payload starts with the job id as a little-endian u64, then cores
        // as u32, then the node name as u64 length + bytes.
        assert_eq!(&frame[14..22], &7u64.to_le_bytes());
        assert_eq!(&frame[22..26], &16u32.to_le_bytes());
        assert_eq!(&frame[26..34], &6u64.to_le_bytes());
        assert_eq!(&frame[34..40], b"vn0007");
    }

    #[test]
    fn payload_bytes_match_the_documented_layout() {
        let rec = sample(1);
        let frame = encode_to_vec(&rec).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&1u64.to_le_bytes());
        want.extend_from_slice(&16u32.to_le_bytes());
        want.extend_from_slice(&6u64.to_le_bytes());
        want.extend_from_slice(b"vn0001");
        for v in [rec.submit, rec.start, rec.end] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&rec.runtime.to_le_bytes());
        want.extend_from_slice(&rec.walltime.to_le_bytes());
        want.push(0); // status completed
        want.extend_from_slice(&0u32.to_le_bytes()); // flags
        want.extend_from_slice(&1u64.to_le_bytes()); // one suspension
        want.extend_from_slice(&rec.suspensions[0].suspend.to_le_bytes());
        want.extend_from_slice(&rec.suspensions[0].resume.to_le_bytes());
        assert_eq!(&frame[HEADER_LEN..], &want[..]);
    }

    #[test]
    fn garbage_between_frames_is_skipped_and_counted() {
        let mut bytes = b"xxjunkC".to_vec();
        encode(&sample(1), &mut bytes).unwrap();
        bytes.extend_from_slice(b"CLJ"); // a torn write of the magic alone
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(1)]);
        assert_eq!(stats.skipped_bytes, 7);
        assert_eq!(stats.corrupt, 1, "stray bytes are damage");
        assert_eq!(stats.torn, 1);
    }

    #[test]
    fn torn_last_frame_is_counted_and_earlier_ones_survive() {
        let mut bytes = Vec::new();
        encode(&sample(1), &mut bytes).unwrap();
        encode(&sample(2), &mut bytes).unwrap();
        bytes.truncate(bytes.len() - 5);
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(1)]);
        assert_eq!(stats.torn, 1);
        assert_eq!(stats.corrupt, 0);
    }

    #[test]
    fn a_torn_frame_followed_by_later_appends_costs_only_itself() {
        let mut bytes = Vec::new();
        encode(&sample(1), &mut bytes).unwrap();
        let good = bytes.len();
        encode(&sample(2), &mut bytes).unwrap();
        bytes.truncate(good + 20); // writer died mid-frame
        encode(&sample(3), &mut bytes).unwrap();
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(1), sample(3)]);
        assert_eq!(stats.corrupt, 1);
    }

    #[test]
    fn crc_mismatch_is_corrupt() {
        let mut bytes = encode_to_vec(&sample(1)).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 0x40;
        encode(&sample(2), &mut bytes).unwrap();
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(2)]);
        assert_eq!(stats.corrupt, 1);
    }

    #[test]
    fn unknown_version_is_skipped_whole() {
        let mut bytes = encode_to_vec(&sample(1)).unwrap();
        bytes[4] = 9;
        encode(&sample(2), &mut bytes).unwrap();
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(2)]);
        assert_eq!(stats.unsupported, 1);
        assert_eq!(stats.corrupt, 0);
    }

    #[test]
    fn huge_length_field_is_corrupt_without_reading_ahead() {
        let mut bytes = encode_to_vec(&sample(1)).unwrap();
        bytes[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        encode(&sample(2), &mut bytes).unwrap();
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![sample(2)]);
        assert_eq!(stats.corrupt, 1);
    }

    #[test]
    fn frames_larger_than_the_initial_buffer_decode() {
        let mut rec = sample(5);
        rec.suspensions = (0..10_000)
            .map(|i| Suspension {
                suspend: i,
                resume: i + 1,
            })
            .collect();
        let bytes = encode_to_vec(&rec).unwrap();
        assert!(bytes.len() > 64 * 1024);
        let (recs, stats) = decode_all(&bytes);
        assert_eq!(recs, vec![rec]);
        assert_eq!(stats.records, 1);
    }

    #[test]
    fn bad_status_code_in_a_valid_frame_is_corrupt() {
        let mut bytes = encode_to_vec(&sample(1)).unwrap();
        let status_at = HEADER_LEN + 8 + 4 + 8 + 6 + 8 * 5;
        bytes[status_at] = 77;
        let crc = crc32fast::hash(&bytes[HEADER_LEN..]);
        bytes[10..14].copy_from_slice(&crc.to_le_bytes());
        let (recs, stats) = decode_all(&bytes);
        assert!(recs.is_empty());
        assert_eq!(stats.corrupt, 1);
    }

    #[test]
    fn headers_that_claim_megabytes_cost_linear_time() {
        // Every 16 bytes a header claiming 8 MiB, over 12 MiB: checking each
        // claim by CRC would hash ~6 TB. Version 1 claims fail the payload
        // and version 2 claims fail the payload shape checks; version 3
        // ones (no shape known) the shadow of the first failed CRC.
        for version in [1u8, 2, 3] {
            let mut bytes = Vec::new();
            while bytes.len() < 12 << 20 {
                bytes.extend_from_slice(&[b'C', b'L', b'J', b'R', version, 0]);
                bytes.extend_from_slice(&(8u32 << 20).to_le_bytes());
                bytes.extend_from_slice(&[0; 6]);
            }
            encode(&sample(1), &mut bytes).unwrap();
            let t = std::time::Instant::now();
            let (recs, _) = decode_all(&bytes);
            assert_eq!(recs, vec![sample(1)], "version {version}");
            assert!(
                t.elapsed().as_secs() < 20,
                "version {version}: took {:?}",
                t.elapsed()
            );
        }
    }

    #[test]
    fn payload_shape_check() {
        let frame = encode_to_vec(&sample(3)).unwrap();
        assert!(v1_shape_fits(&frame[HEADER_LEN..]));
        assert!(!v1_shape_fits(&frame[HEADER_LEN..frame.len() - 1]));
        assert!(!v1_shape_fits(&[]));
        let mut big = frame[HEADER_LEN..].to_vec();
        big[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(!v1_shape_fits(&big));
    }

    #[test]
    fn complete_prefix_stops_before_a_partial_frame() {
        let mut bytes = Vec::new();
        encode(&sample(1), &mut bytes).unwrap();
        let one = bytes.len();
        encode(&sample(2), &mut bytes).unwrap();
        let two = bytes.len();
        assert_eq!(complete_prefix(&bytes), two);
        assert_eq!(complete_prefix(&bytes[..two - 1]), one);
        assert_eq!(complete_prefix(&bytes[..one + 3]), one);
        assert_eq!(complete_prefix(&bytes[..2]), 0);
        assert_eq!(complete_prefix(b"xxxxxxCL"), 5);
    }

    #[test]
    fn flag_names() {
        let mut f = Flags::BARE_STOP;
        f.insert(Flags(1 << 9));
        let names: Vec<_> = f.names().collect();
        assert_eq!(names, vec!["bare_stop", "bit9"]);
    }
}
