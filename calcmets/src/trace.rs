//! Metrics of an SWF trace, read on every core: the trace's text is cut
//! into chunks at line ends, worker threads parse chunks and accumulate
//! their jobs, and the partial results are merged (the metrics do not
//! depend on the order in which jobs are added).

use std::io::BufRead;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use formats::swf::{self, Header, LineError, SwfJob};

use crate::metrics::{Accum, JobView, Params};

/// Bytes per chunk: large enough that handing one over costs nothing next
/// to parsing it, small enough that both workers get work early.
const CHUNK: usize = 1 << 20;

/// What a worker learned from one chunk besides its jobs.
struct ChunkReport {
    index: usize,
    lines: u64,
    header: Header,
    /// Line numbers counted from the chunk's start (1-based).
    errors: Vec<LineError>,
}

/// A trace's accumulated jobs, the header's total cores, and one warning
/// per malformed line.
pub struct TraceRead {
    pub accum: Accum,
    pub header: Header,
    pub warnings: Vec<String>,
}

pub fn read(path: &Path, params: &Params, all_statuses: bool) -> Result<TraceRead> {
    let name = path.display().to_string();
    let mut text = swf::open_text(path).with_context(|| format!("cannot open {name}"))?;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Chunks in flight are bounded, so memory is too, however large the
    // trace.
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<(usize, Vec<u8>, bool)>(2 * workers);
    let chunk_rx = Arc::new(Mutex::new(chunk_rx));
    let (report_tx, report_rx) = mpsc::channel::<ChunkReport>();

    let accum = std::thread::scope(|scope| -> Result<Accum> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = Arc::clone(&chunk_rx);
                let tx = report_tx.clone();
                scope.spawn(move || work(&rx, &tx, params, all_statuses))
            })
            .collect();
        drop(report_tx);
        let fed = feed(&mut text, &chunk_tx);
        // Closing the channel tells the workers to finish.
        drop(chunk_tx);
        let mut accum = Accum::new();
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow!("a thread reading {name} panicked"))?;
            accum.merge(part);
        }
        fed.with_context(|| format!("cannot read {name}"))?;
        Ok(accum)
    })?;
    // Chunk reports in file order: line numbers become absolute, header
    // lines keep their order.
    let mut chunks: Vec<ChunkReport> = report_rx.into_iter().collect();
    chunks.sort_by_key(|c| c.index);
    let mut header = Header::default();
    let mut warnings = Vec::new();
    let mut before = 0;
    for c in chunks {
        header.extend(c.header);
        for e in c.errors {
            warnings.push(format!("{name}:{}: {}", before + e.line, e.message));
        }
        before += c.lines;
    }
    Ok(TraceRead {
        accum,
        header,
        warnings,
    })
}

/// Cuts the text into chunks that end at a line end and hands them out.
fn feed(
    text: &mut impl BufRead,
    tx: &mpsc::SyncSender<(usize, Vec<u8>, bool)>,
) -> std::io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut index = 0;
    loop {
        let mut chunk = std::mem::take(&mut carry);
        chunk.reserve(CHUNK + 4096);
        let start = chunk.len();
        chunk.resize(start + CHUNK, 0);
        let mut filled = start;
        let mut eof = false;
        while filled < chunk.len() {
            match text.read(&mut chunk[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        chunk.truncate(filled);
        if !eof {
            // Keep the partial last line for the next chunk.
            if let Some(nl) = memchr::memrchr(b'\n', &chunk) {
                carry = chunk.split_off(nl + 1);
            }
        }
        if chunk.is_empty() && eof {
            return Ok(());
        }
        if tx.send((index, chunk, eof)).is_err() {
            // Every worker is gone (one panicked): nothing left to feed.
            return Ok(());
        }
        index += 1;
        if eof {
            return Ok(());
        }
    }
}

fn work(
    rx: &Mutex<mpsc::Receiver<(usize, Vec<u8>, bool)>>,
    tx: &mpsc::Sender<ChunkReport>,
    params: &Params,
    all_statuses: bool,
) -> Accum {
    let mut accum = Accum::new();
    loop {
        // The lock is held only to take the next chunk.
        let next = match rx.lock() {
            Ok(guard) => guard.recv(),
            Err(_) => return accum,
        };
        let Ok((index, chunk, last)) = next else {
            return accum;
        };
        let mut header = Header::default();
        let mut errors = Vec::new();
        let lines = swf::parse_chunk(&chunk, 1, last, &mut header, |line| match line {
            Ok(job) => add_job(&mut accum, params, job, all_statuses),
            Err(e) => errors.push(e),
        });
        let _ = tx.send(ChunkReport {
            index,
            lines,
            header,
            errors,
        });
    }
}

/// One trace line as a job, by DESIGN.md's SWF rules: s = submit, w = wait
/// (unknown counts as 0), e = s + w + r, no suspension, cores = allocated
/// processors or else requested; partial-execution lines are skipped (the
/// job's summary line carries its totals).
pub fn add_job(accum: &mut Accum, params: &Params, job: &SwfJob, all_statuses: bool) {
    if job.is_partial() {
        return;
    }
    let status = job.status();
    let submit = job.submit_ns();
    let start = submit + job.wait_ns().unwrap_or(0);
    accum.add(
        params,
        &JobView {
            cores: job.procs().unwrap_or(0),
            submit,
            start,
            end: start + job.run_ns().unwrap_or(0),
            suspensions: &[],
            status_ok: all_statuses
                || status == swf::status::COMPLETED
                || status == swf::status::UNKNOWN,
        },
    );
}
