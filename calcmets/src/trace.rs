//! Metrics of an SWF trace, read on every core: this thread reads (or
//! inflates) the text straight into chunks that end at line ends and
//! queues them; a worker per other core parses chunks and accumulates
//! their jobs, and this thread parses too while the queue is full. The
//! partial results are merged (the metrics do not depend on the order in
//! which jobs are added). Only the fields the metrics use are converted to
//! numbers; see `formats::swf` for the parser's fast path.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use formats::swf::{self, field, Chunks, Fields, Header, LineError, SwfJob};

use crate::alike::{self, Shape};
use crate::dist::EXACT_LIMIT;
use crate::metrics::{Accum, Exclusion, JobView, Params};

/// Bytes of trace text per job line at most, to tell from a trace's
/// length that it holds more jobs than percentiles are kept exact for:
/// SWF job lines are 60 to 130 bytes long.
const BYTES_PER_JOB: u64 = 160;

/// The fields [`add_job`] reads; the parser only checks the others.
const NEEDED_LIST: [usize; 6] = [
    field::SUBMIT,
    field::WAIT,
    field::RUN,
    field::ALLOC_PROCS,
    field::REQ_PROCS,
    field::STATUS,
];
const NEEDED: Fields = Fields::of(&NEEDED_LIST);
/// The same, the job's number and its limit, to keep the jobs a replay
/// ran and tell whether they are the jobs it ran.
const NEEDED_WITH_ID_LIST: [usize; 8] = [
    field::JOB,
    field::SUBMIT,
    field::WAIT,
    field::RUN,
    field::ALLOC_PROCS,
    field::REQ_PROCS,
    field::REQ_TIME,
    field::STATUS,
];
const NEEDED_WITH_ID: Fields = Fields::of(&NEEDED_WITH_ID_LIST);

/// The jobs of a trace that a replay ran, to be counted the way the replay
/// counts its own (`calcmets --swf TRACE RUN`): only those, with the
/// replay's cores per trace processor, and the statuses it ran as if they
/// completed counted as completed.
#[derive(Debug, Default)]
pub struct AsReplayed {
    /// The trace jobs the run's `jobs.csv` lists, by trace id, as the run
    /// replayed them (in trace seconds): each line of the trace is checked
    /// against its job, so that a trace edited under the same ids is not
    /// taken for the one the run replayed.
    pub jobs: HashMap<i64, Shape>,
    pub cores_per_proc: u64,
    /// The run ran the jobs the trace saw fail (status 0), as if they
    /// completed.
    pub failed_ran: bool,
    /// The run ran the jobs the trace cancelled (status 5), as if they
    /// completed.
    pub cancelled_ran: bool,
    /// The run replayed the jobs the trace cancelled as cancelled: each
    /// ran up to its limit and was cancelled its trace wait and run time
    /// after its submission (`--cancelled replay`).
    pub cancelled_replayed: bool,
    /// Trace seconds per second of the run's clock: how near the run's
    /// instants keep to the trace's.
    pub scale: f64,
    /// Whether the slice holds jobs the trace saw fail, and jobs it
    /// cancelled (as the run's manifest counts them; yes when it does not
    /// say): what the note on how they count is about.
    pub slice_has: (bool, bool),
    /// Lines of those jobs found, by every thread.
    pub found: AtomicU64,
    /// Lines of those jobs that are other jobs than the run's: how many,
    /// and the one of the least id with both shapes (the trace's first).
    unlike: AtomicU64,
    first_unlike: Mutex<Option<(i64, Shape, Shape)>>,
    /// Each line's submission less the run's (its offset from the run's
    /// first), in nanoseconds, least and most: the same jobs arrive
    /// spaced alike, so the two are one offset (the slice's start).
    offset_least: AtomicI64,
    offset_most: AtomicI64,
}

/// Job lines held back before they are added (see [`Parser::add_held`]).
const HELD: usize = 256;

/// Job lines read well and malformed ones, by every thread so far: once a
/// file is plainly not a trace, reading stops. (Whether it is one is
/// judged in file order at the end, by [`swf::not_a_trace`].)
#[derive(Default)]
struct Tally {
    good: AtomicU64,
    bad: AtomicU64,
}

impl Tally {
    fn not_a_trace(&self) -> bool {
        swf::not_a_trace(
            self.good.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
        )
    }
}

/// One chunk of whole lines on its way to a worker.
struct Chunk {
    index: usize,
    text: Vec<u8>,
    last: bool,
}

/// What a worker learned from one chunk besides its jobs.
struct ChunkReport {
    index: usize,
    lines: u64,
    /// Job lines read well.
    good: u64,
    header: Header,
    /// Line numbers counted from the chunk's start (1-based), each with
    /// the job lines of the chunk read well before it.
    errors: Vec<(LineError, u64)>,
}

/// A trace's accumulated jobs, the header's total cores, and one warning
/// per malformed line.
pub struct TraceRead {
    pub accum: Accum,
    pub header: Header,
    pub warnings: Vec<String>,
}

impl AsReplayed {
    /// How the replays in `dirs` (results directories) ran the trace at
    /// `trace`, and on how many cores; `None` for no replay. Replays of
    /// different slices, or that changed the trace's arrivals (`--load`,
    /// `--schedule groups`), cannot be set beside it: refused, saying so.
    pub fn of_runs(trace: &Path, dirs: &[&Path]) -> Result<Option<(AsReplayed, u64)>> {
        let mut out: Option<(AsReplayed, u64, &Path)> = None;
        for &dir in dirs {
            let m = formats::results::Manifest::read(dir)?;
            let jobs: HashMap<i64, Shape> = alike::Side::read(dir)?
                .jobs
                .unwrap_or_default()
                .into_iter()
                .collect();
            if jobs.is_empty() {
                bail!(
                    "{}: no jobs.csv to tell which jobs of {} it replayed (it did not finish?)",
                    dir.display(),
                    trace.display()
                );
            }
            if (m.load - 1.0).abs() > 1e-9 {
                bail!(
                    "{}: its arrivals were scaled (load {} %), so its waits are not the trace's \
                     to compare with {}; read them apart",
                    dir.display(),
                    m.load * 100.0,
                    trace.display()
                );
            }
            if !matches!(m.schedule, formats::results::Schedule::Trace) {
                bail!(
                    "{}: its jobs were submitted by a schedule of groups, not at the trace's \
                     instants, so its waits are not the trace's to compare with {}; read them \
                     apart",
                    dir.display(),
                    trace.display()
                );
            }
            let this = AsReplayed {
                jobs,
                cores_per_proc: u64::from(m.slice.cores_per_proc.max(1)),
                // Runs written before the choice ran them.
                failed_ran: m.slice.failed != "skip",
                cancelled_ran: m.slice.cancelled == "run",
                cancelled_replayed: m.slice.cancelled == "replay",
                scale: m.trace_per_wall().unwrap_or(1.0),
                slice_has: (
                    m.slice.trace_failed > 0 || m.slice.read == 0,
                    m.slice.trace_cancelled > 0 || m.slice.read == 0,
                ),
                offset_least: AtomicI64::new(i64::MAX),
                offset_most: AtomicI64::new(i64::MIN),
                ..AsReplayed::default()
            };
            let cores = m.cores.unwrap_or(0);
            match &out {
                None => out = Some((this, cores, dir)),
                Some((first, first_cores, first_dir)) => {
                    let same = first.jobs.len() == this.jobs.len()
                        && first.jobs.iter().all(|(id, a)| {
                            this.jobs
                                .get(id)
                                .is_some_and(|b| a.alike(b, first.scale.max(this.scale)))
                        })
                        && first.cores_per_proc == this.cores_per_proc
                        && first.failed_ran == this.failed_ran
                        && first.cancelled_ran == this.cancelled_ran
                        && *first_cores == cores;
                    if !same {
                        bail!(
                            "{} and {} replayed {} differently (other jobs, cores, or what \
                             became of its failed and cancelled jobs): set the trace beside \
                             one of them at a time",
                            first_dir.display(),
                            dir.display(),
                            trace.display()
                        );
                    }
                }
            }
        }
        Ok(out.map(|(r, cores, _)| (r, cores)))
    }

    /// What the trace's column is, for standard error.
    pub fn describe(&self, cores: u64) -> String {
        let mut ran = Vec::new();
        if self.failed_ran && self.slice_has.0 {
            ran.push("failed (status 0)");
        }
        if self.cancelled_ran && self.slice_has.1 {
            ran.push("cancelled (status 5)");
        }
        let ran = match ran.as_slice() {
            [] => String::new(),
            r => format!(
                "; its {} jobs count as completed, as the run ran them",
                r.join(" and ")
            ),
        };
        format!(
            "counted as the run replayed it: its {} jobs of the slice, {} cores per processor \
             on the run's {cores} cores{ran}",
            self.jobs.len(),
            self.cores_per_proc
        )
    }

    /// Notes one line of a job the run replayed: whether it is that job.
    fn check(&self, job: &SwfJob, status: i64) {
        let Some(ran) = self.jobs.get(&job.id()) else {
            return;
        };
        self.found.fetch_add(1, Ordering::Relaxed);
        // The job as runworkload makes it of this line (`trace::swf`).
        let run = job.run_ns().unwrap_or(0).max(0);
        let limit = job.req_time_ns().map_or(0, |r| r.max(run));
        let run = if status == swf::status::CANCELLED && self.cancelled_replayed {
            match limit {
                0 => job.wait_ns().unwrap_or(0).max(0) + run,
                l => l,
            }
        } else {
            run
        };
        let line = Shape {
            cores: job
                .procs()
                .unwrap_or(0)
                .saturating_mul(self.cores_per_proc)
                .min(u64::from(u32::MAX)) as u32,
            run_s: run as f64 / 1e9,
            limit_s: limit as f64 / 1e9,
            submit_s: None,
        };
        if !line.alike(ran, self.scale) {
            self.unlike.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_unlike.lock().unwrap_or_else(|e| e.into_inner());
            if first.as_ref().is_none_or(|(id, ..)| job.id() < *id) {
                *first = Some((job.id(), line, *ran));
            }
        }
        if let Some(at) = ran.submit_s {
            let offset = job.submit_ns() - (at * 1e9).round() as i64;
            self.offset_least.fetch_min(offset, Ordering::Relaxed);
            self.offset_most.fetch_max(offset, Ordering::Relaxed);
        }
    }

    /// Whether the trace at `path`, now read, held every job the run
    /// replayed, each as the run replayed it: else why it is not the
    /// trace the run replayed.
    pub fn confirm(&self, path: &Path) -> Result<()> {
        let name = path.display();
        let found = self.found.load(Ordering::Relaxed);
        let want = self.jobs.len() as u64;
        if found < want {
            bail!(
                "{name}: {} of the {want} jobs the run replayed are not in it: it is not the \
                 trace the run replayed",
                want - found,
            );
        }
        let unlike = self.unlike.load(Ordering::Relaxed);
        let first = self.first_unlike.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((id, line, ran)) = first.as_ref() {
            bail!(
                "{name}: {unlike} of the {want} jobs the run replayed are other jobs in it \
                 ({} in the trace, {} in the run): it is not the trace the run replayed",
                alike::shape_text(*id, line),
                alike::shape_text(*id, ran).trim_start_matches("trace job "),
            );
        }
        let (least, most) = (
            self.offset_least.load(Ordering::Relaxed),
            self.offset_most.load(Ordering::Relaxed),
        );
        let spread = most.saturating_sub(least) as f64 / 1e9;
        if least <= most && spread > alike::slack(spread, self.scale) {
            bail!(
                "{name}: its jobs arrive {spread:.1} s further apart or closer together than \
                 the run replayed them: it is not the trace the run replayed"
            );
        }
        Ok(())
    }
}

/// Reads the trace at `path`: every job, or with `replayed` only those a
/// replay ran, counted as it counts them.
pub fn read(
    path: &Path,
    params: &Params,
    all_statuses: bool,
    replayed: Option<&AsReplayed>,
) -> Result<TraceRead> {
    let name = path.display().to_string();
    let mut chunks = Chunks::open(path).with_context(|| format!("cannot open {name}"))?;
    // One worker per core besides this thread, which reads (or inflates)
    // and parses too whenever the workers have enough queued: every core
    // stays busy and none is shared by two threads.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) - 1;
    // Chunks in flight are bounded, so memory is too, however large the
    // trace; parsed chunks come back to be filled again, which spares a
    // fresh buffer of page faults for each.
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Chunk>(2);
    let queue = Mutex::new(chunk_rx);
    let (spare_tx, spare_rx) = mpsc::channel::<Vec<u8>>();
    let included = AtomicU64::new(0);
    let tally = Tally::default();
    // A trace this long holds more jobs than percentiles are kept exact
    // for (job lines are about 100 bytes): straight to the histograms,
    // rather than filling exact buffers that would be spilled into them
    // (docs/design.md allows percentiles from a histogram at any size).
    let long = chunks.text_len_at_least() > EXACT_LIMIT as u64 * BYTES_PER_JOB;
    let mut parser = Parser::new(
        params,
        all_statuses,
        replayed,
        long,
        &included,
        &tally,
        spare_tx,
    );

    let mut unknown_waits = 0;
    let (accum, reports) = std::thread::scope(|scope| -> Result<(Accum, Vec<ChunkReport>)> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let mut p = parser.another();
                let queue = &queue;
                scope.spawn(move || {
                    while let Some(chunk) = next(queue, true) {
                        p.parse(chunk);
                    }
                    p
                })
            })
            .collect();
        let fed = feed(&mut chunks, &chunk_tx, &spare_rx, &queue, &mut parser);
        // Closing the channel tells the workers to finish.
        drop(chunk_tx);
        while let Some(chunk) = next(&queue, true) {
            parser.parse(chunk);
        }
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow!("a thread reading {name} panicked"))?;
            parser.merge(part);
        }
        fed.with_context(|| format!("cannot read {name}"))?;
        parser.add_held();
        unknown_waits = parser.unknown_waits;
        Ok((parser.accum, parser.reports))
    })?;
    // Chunk reports in file order: line numbers become absolute, header
    // lines keep their order.
    let mut reports = reports;
    reports.sort_by_key(|c| c.index);
    // Judged in file order, as runworkload judges the lines it reads.
    let (mut good, mut bad) = (0u64, 0u64);
    let mut refused = tally.not_a_trace();
    for c in &reports {
        for (_, good_before) in &c.errors {
            bad += 1;
            refused |= swf::not_a_trace(good + good_before, bad);
        }
        good += c.good;
    }
    let mut header = Header::default();
    let mut warnings = Vec::new();
    let mut before = 0;
    for c in reports {
        header.extend(c.header);
        for (e, _) in c.errors {
            warnings.push(format!("{name}:{}: {}", before + e.line, e.message));
        }
        before += c.lines;
    }
    if refused || (good == 0 && bad > 0) {
        bail!(
            "{name}: not an SWF trace: {bad} of the {} job lines read are malformed (first: {})",
            good + bad,
            warnings.first().map_or("", String::as_str)
        );
    }
    // A trace that does not know its jobs' waits (NASA's, all −1) gives
    // waits of 0 and slowdowns of 1: what it knows, not what was.
    if unknown_waits > 0 {
        warnings.push(format!(
            "{name}: {unknown_waits} of its jobs have no wait time (−1 in the trace): each \
             counts as 0, as if it started at once, and so do their slowdowns"
        ));
    }
    Ok(TraceRead {
        accum,
        header,
        warnings,
    })
}

/// The next queued chunk: waiting for one, or only if one is there and no
/// other thread is waiting for it (a waiting worker holds the lock).
fn next(queue: &Mutex<mpsc::Receiver<Chunk>>, wait: bool) -> Option<Chunk> {
    if wait {
        queue.lock().ok()?.recv().ok()
    } else {
        queue.try_lock().ok()?.try_recv().ok()
    }
}

/// Reads chunks and queues them; while the queue is full, parses one from
/// it rather than wait.
fn feed(
    chunks: &mut Chunks,
    tx: &mpsc::SyncSender<Chunk>,
    spare: &mpsc::Receiver<Vec<u8>>,
    queue: &Mutex<mpsc::Receiver<Chunk>>,
    parser: &mut Parser<'_>,
) -> std::io::Result<()> {
    for index in 0.. {
        let mut text = spare.try_recv().unwrap_or_default();
        // Reading on would only list more lines of a file that is not a
        // trace.
        if parser.tally.not_a_trace() {
            return Ok(());
        }
        let Some(last) = chunks.next_into(&mut text)? else {
            return Ok(());
        };
        let mut chunk = Chunk { index, text, last };
        loop {
            match tx.try_send(chunk) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(back)) => {
                    chunk = back;
                    match next(queue, false) {
                        Some(queued) => parser.parse(queued),
                        None => std::thread::yield_now(),
                    }
                }
                // No receiver: cannot happen while `queue` lives here.
                Err(mpsc::TrySendError::Disconnected(_)) => return Ok(()),
            }
        }
    }
    Ok(())
}

/// One thread's share: the jobs of the chunks it parsed, and what else
/// each chunk held.
struct Parser<'a> {
    params: &'a Params,
    all_statuses: bool,
    /// Only the jobs a replay ran, counted as it counts them.
    replayed: Option<&'a AsReplayed>,
    /// Jobs included by every thread so far.
    included: &'a AtomicU64,
    tally: &'a Tally,
    /// Whether the trace is long enough for histograms from the first job.
    long: bool,
    accum: Accum,
    /// Jobs added whose wait the trace does not know (−1): counted as 0.
    unknown_waits: u64,
    /// Jobs parsed but not added yet, the first `held` of them.
    jobs: Box<[SwfJob; HELD]>,
    held: usize,
    reports: Vec<ChunkReport>,
    spare: mpsc::Sender<Vec<u8>>,
}

impl<'a> Parser<'a> {
    fn new(
        params: &'a Params,
        all_statuses: bool,
        replayed: Option<&'a AsReplayed>,
        long: bool,
        included: &'a AtomicU64,
        tally: &'a Tally,
        spare: mpsc::Sender<Vec<u8>>,
    ) -> Self {
        Parser {
            params,
            all_statuses,
            replayed,
            included,
            tally,
            long,
            accum: Accum::new(),
            unknown_waits: 0,
            jobs: Box::new(
                [SwfJob {
                    line: 0,
                    fields: [0.0; swf::FIELDS],
                }; HELD],
            ),
            held: 0,
            reports: Vec::new(),
            spare,
        }
    }

    /// An empty parser for another thread.
    fn another(&self) -> Self {
        Parser::new(
            self.params,
            self.all_statuses,
            self.replayed,
            self.long,
            self.included,
            self.tally,
            self.spare.clone(),
        )
    }

    fn parse(&mut self, chunk: Chunk) {
        // Histograms are made by the thread that fills them, when it first
        // parses: not before the reading thread starts reading.
        if self.long {
            self.accum.to_histograms();
        }
        let mut header = Header::default();
        let mut errors = Vec::new();
        let mut good = 0u64;
        let before = self.accum.jobs();
        let needed = match self.replayed {
            Some(_) => NEEDED_WITH_ID,
            None => NEEDED,
        };
        let lines =
            swf::parse_chunk(
                &chunk.text,
                1,
                chunk.last,
                &mut header,
                needed,
                |line| match line {
                    Ok(job) => {
                        good += 1;
                        self.hold(job)
                    }
                    Err(e) => errors.push((e, good)),
                },
            );
        // Counted per chunk, not per line: the line loop is the hot path.
        let bad = errors.len() as u64;
        self.tally.good.fetch_add(good, Ordering::Relaxed);
        self.tally.bad.fetch_add(bad, Ordering::Relaxed);
        // Once the threads together are past the exact limit, the merged
        // percentiles come from histograms anyway: stop keeping exact
        // values (half the memory and page faults of each thread's).
        let added = self.accum.jobs() - before;
        if self.included.fetch_add(added, Ordering::Relaxed) + added > EXACT_LIMIT as u64 {
            self.accum.to_histograms();
        }
        // The reader may be done already; then the buffer is just freed.
        let _ = self.spare.send(chunk.text);
        self.reports.push(ChunkReport {
            index: chunk.index,
            lines,
            good,
            header,
            errors,
        });
    }

    /// Holds a job to be added with the next batch.
    fn hold(&mut self, job: &SwfJob) {
        // The fields one at a time: a copy of the whole job would read
        // them back wider than the parser stored them, and wait for the
        // stores to land.
        let slot = &mut self.jobs[self.held];
        let needed: &[usize] = match self.replayed {
            Some(_) => &NEEDED_WITH_ID_LIST,
            None => &NEEDED_LIST,
        };
        for &n in needed {
            slot.fields[n - 1] = job.fields[n - 1];
        }
        self.held += 1;
        if self.held == HELD {
            self.add_held();
        }
    }

    /// Adds the held jobs. A batch at a time, the conversions of one job's
    /// fields overlap with the next job's, instead of each waiting for the
    /// parser to have just stored them.
    fn add_held(&mut self) {
        for job in &self.jobs[..self.held] {
            let unknown_wait = add_job(
                &mut self.accum,
                self.params,
                job,
                self.all_statuses,
                self.replayed,
            );
            self.unknown_waits += u64::from(unknown_wait);
        }
        self.held = 0;
    }

    fn merge(&mut self, mut other: Parser<'_>) {
        self.add_held();
        other.add_held();
        self.accum.merge(other.accum);
        self.unknown_waits += other.unknown_waits;
        self.reports.extend(other.reports);
    }
}

/// One trace line as a job, by docs/design.md's SWF rules: s = submit, w = wait
/// (unknown counts as 0), e = s + w + r, no suspension, cores = allocated
/// processors or else requested; partial-execution lines are skipped (the
/// job's summary line carries its totals). With `replayed`, only the jobs
/// a replay ran, counted as it counts them. Returns whether it added a
/// job whose wait the trace does not know.
#[inline]
pub fn add_job(
    accum: &mut Accum,
    params: &Params,
    job: &SwfJob,
    all_statuses: bool,
    replayed: Option<&AsReplayed>,
) -> bool {
    if job.is_partial() {
        return false;
    }
    let status = job.status();
    let mut cores_per_proc = 1;
    let mut counts_as_completed = false;
    if let Some(r) = replayed {
        if !r.jobs.contains_key(&job.id()) {
            return false;
        }
        r.check(job, status);
        cores_per_proc = r.cores_per_proc;
        counts_as_completed = (status == swf::status::FAILED && r.failed_ran)
            || (status == swf::status::CANCELLED && r.cancelled_ran);
    }
    let submit = job.submit_ns();
    // No overflow: the parser refuses times past `swf::MAX_SECONDS`, and
    // three of them add up to less than `i64::MAX` nanoseconds.
    let start = submit + job.wait_ns().unwrap_or(0);
    accum.add(
        params,
        &JobView {
            cores: job.procs().unwrap_or(0).saturating_mul(cores_per_proc),
            submit,
            start,
            end: start + job.run_ns().unwrap_or(0),
            suspensions: &[],
            excluded_status: match status {
                _ if all_statuses || counts_as_completed => None,
                swf::status::COMPLETED | swf::status::UNKNOWN => None,
                swf::status::FAILED => Some(Exclusion::Failed),
                swf::status::CANCELLED => Some(Exclusion::Cancelled),
                _ => Some(Exclusion::OtherStatus),
            },
            // Run as completed (`--cancelled run`), it is counted so, and
            // not among the cancelled either.
            cancelled: status == swf::status::CANCELLED && !counts_as_completed,
            devices: &[],
        },
    );
    job.wait_ns().is_none()
}
