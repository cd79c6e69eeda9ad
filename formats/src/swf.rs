//! Workload traces in the Standard Workload Format (SWF 2.2) of the Parallel
//! Workloads Archive: the header, the 18 fields of each job line, and a
//! streaming reader for plain or gzip-compressed files.
//!
//! What the archive's files really contain (see the traces' READMEs): `-1`
//! for "unknown" in any field, times that may be fractional, header lines
//! that may be missing, repeated (`Note`, `Queue`) or continued on a `;` line
//! without a key, and `MaxJobs`/`MaxRecords` that describe the original log
//! rather than the cleaned file. A malformed line is a [`LineError`] naming
//! its line, never a panic and never the end of the file.
//!
//! Two ways in: [`SwfReader`], line by line, and [`Chunks`] with
//! [`parse_chunk`], for readers that parse on several threads. The chunk
//! parser reads plain lines (18 integers) from bit masks made with the
//! widest vector instructions the processor has (`scan`) and hands any
//! other line to the same general parser as the line reader, so both read
//! every file alike (a property test, a fuzz target and a test over the
//! shared traces check it).

use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;

mod scan;
mod text;
pub use scan::Fields;
use text::open_text;
pub use text::Chunks;

/// Field numbers (1-based, as the SWF definition counts them).
pub mod field {
    pub const JOB: usize = 1;
    pub const SUBMIT: usize = 2;
    pub const WAIT: usize = 3;
    pub const RUN: usize = 4;
    pub const ALLOC_PROCS: usize = 5;
    pub const AVG_CPU: usize = 6;
    pub const USED_MEM: usize = 7;
    pub const REQ_PROCS: usize = 8;
    pub const REQ_TIME: usize = 9;
    pub const REQ_MEM: usize = 10;
    pub const STATUS: usize = 11;
    pub const USER: usize = 12;
    pub const GROUP: usize = 13;
    pub const EXECUTABLE: usize = 14;
    pub const QUEUE: usize = 15;
    pub const PARTITION: usize = 16;
    pub const PRECEDING: usize = 17;
    pub const THINK: usize = 18;
}

/// Number of fields on a job line.
pub const FIELDS: usize = 18;

/// The largest time a field may hold, in seconds (95 years). Past it a
/// line is malformed: a time, a wait and a run time of this size still
/// add up to less than `i64::MAX` nanoseconds, so readers can sum them
/// without overflow; and no log spans a century.
pub const MAX_SECONDS: f64 = 3e9;

/// The time fields, with their names for messages.
const TIME_FIELDS: [(usize, &str); 5] = [
    (field::SUBMIT, "submit time"),
    (field::WAIT, "wait time"),
    (field::RUN, "run time"),
    (field::REQ_TIME, "requested time"),
    (field::THINK, "think time"),
];

/// [`TIME_FIELDS`] as a bit mask (bit `n - 1` for field `n`), for the fast
/// path.
const TIME_BITS: u32 = {
    let mut bits = 0;
    let mut i = 0;
    while i < TIME_FIELDS.len() {
        bits |= 1 << (TIME_FIELDS[i].0 - 1);
        i += 1;
    }
    bits
};

/// Job status values (field 11).
pub mod status {
    pub const FAILED: i64 = 0;
    pub const COMPLETED: i64 = 1;
    /// Partial execution, to be continued (checkpointed or swapped out).
    pub const PARTIAL: i64 = 2;
    /// Last partial execution; the job completed.
    pub const PARTIAL_LAST_COMPLETED: i64 = 3;
    /// Last partial execution; the job failed.
    pub const PARTIAL_LAST_FAILED: i64 = 4;
    pub const CANCELLED: i64 = 5;
    pub const UNKNOWN: i64 = -1;
}

/// Fewest malformed job lines that, outnumbering the good ones, make a
/// file "not a trace"; a damaged trace has a few bad lines among many
/// good ones.
pub const NOT_A_TRACE_MIN_BAD: u64 = 20;

/// Whether a file is not an SWF trace, judged in file order: at some line,
/// `bad` malformed job lines so far outnumber the `good` ones, and are at
/// least [`NOT_A_TRACE_MIN_BAD`]. Every reader of traces (calcmets,
/// runworkload) applies this same rule to the same lines, so that a file
/// one refuses the other does not take.
pub fn not_a_trace(good: u64, bad: u64) -> bool {
    bad > good && bad >= NOT_A_TRACE_MIN_BAD
}

/// One job line: the 18 fields as numbers, `-1` meaning unknown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwfJob {
    /// Line number in the file (1-based), for messages.
    pub line: u64,
    pub fields: [f64; FIELDS],
}

impl SwfJob {
    /// Field `n` (1-based).
    pub fn get(&self, n: usize) -> f64 {
        self.fields[n - 1]
    }

    fn known(&self, n: usize) -> Option<f64> {
        let v = self.get(n);
        (v >= 0.0).then_some(v)
    }

    fn known_ns(&self, n: usize) -> Option<i64> {
        self.known(n).map(secs_to_ns)
    }

    pub fn id(&self) -> i64 {
        self.get(field::JOB) as i64
    }

    /// Submit time, seconds from the trace's start, as nanoseconds.
    pub fn submit_ns(&self) -> i64 {
        secs_to_ns(self.get(field::SUBMIT))
    }

    /// Wait time in nanoseconds; `None` when unknown.
    pub fn wait_ns(&self) -> Option<i64> {
        self.known_ns(field::WAIT)
    }

    /// Run time in nanoseconds; `None` when unknown.
    pub fn run_ns(&self) -> Option<i64> {
        self.known_ns(field::RUN)
    }

    /// Requested wall time in nanoseconds; `None` when unknown.
    pub fn req_time_ns(&self) -> Option<i64> {
        self.known_ns(field::REQ_TIME)
    }

    pub fn alloc_procs(&self) -> Option<u64> {
        self.known(field::ALLOC_PROCS).map(|v| round(v) as u64)
    }

    pub fn req_procs(&self) -> Option<u64> {
        self.known(field::REQ_PROCS).map(|v| round(v) as u64)
    }

    /// Processors the job used: allocated, or requested when the allocation
    /// is unknown (docs/design.md's SWF rule).
    pub fn procs(&self) -> Option<u64> {
        if self.get(field::ALLOC_PROCS) < 0.0 {
            self.req_procs()
        } else {
            self.alloc_procs()
        }
    }

    /// The job (its number) this one followed: submitted only after it
    /// ended, a think time later (field 17); `None` when unknown.
    pub fn preceding(&self) -> Option<i64> {
        self.known(field::PRECEDING)
            .map(|v| v as i64)
            .filter(|&j| j > 0)
    }

    /// Think time from the preceding job's end, ns (field 18); `None`
    /// when unknown.
    pub fn think_ns(&self) -> Option<i64> {
        self.known_ns(field::THINK)
    }

    pub fn status(&self) -> i64 {
        self.get(field::STATUS) as i64
    }

    /// Whether this line is one part of a checkpointed or swapped job; the
    /// job's summary line carries its totals.
    pub fn is_partial(&self) -> bool {
        matches!(
            self.status(),
            status::PARTIAL | status::PARTIAL_LAST_COMPLETED | status::PARTIAL_LAST_FAILED
        )
    }
}

fn secs_to_ns(s: f64) -> i64 {
    round(s * 1e9)
}

/// Rounds half away from zero, as `f64::round` does, without a call into
/// libm: this runs for several fields of every line of a trace. The
/// difference from the truncated value is exact, so is the result.
fn round(x: f64) -> i64 {
    let t = x as i64;
    let d = x - t as f64;
    if d >= 0.5 {
        t.saturating_add(1)
    } else if d <= -0.5 {
        t.saturating_sub(1)
    } else {
        t
    }
}

/// The `; Key: value` lines of a trace, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    pub entries: Vec<(String, String)>,
}

impl Header {
    /// The first value given for `key` (case-insensitive).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// The leading integer of `key`'s value, if positive.
    pub fn positive(&self, key: &str) -> Option<u64> {
        let v = self.get(key)?.split_whitespace().next()?;
        v.parse::<u64>().ok().filter(|&n| n > 0)
    }

    pub fn max_procs(&self) -> Option<u64> {
        self.positive("MaxProcs")
    }

    pub fn max_nodes(&self) -> Option<u64> {
        self.positive("MaxNodes")
    }

    /// `UnixStartTime`: the epoch second that submit time 0 stands for.
    pub fn unix_start_time(&self) -> Option<i64> {
        self.get("UnixStartTime")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Total cores for utilization: `MaxProcs`, else `MaxNodes`.
    pub fn cores(&self) -> Option<u64> {
        self.max_procs().or_else(|| self.max_nodes())
    }

    /// Appends the entries of a header read after this one (the next chunk
    /// of the same file).
    pub fn extend(&mut self, later: Header) {
        self.entries.extend(later.entries);
    }

    fn take(&mut self, comment: &str) {
        // "; Key: value". A continuation line is indented further (";
        // <many spaces> text", where the text may well hold a colon, as in a
        // URL) and a bare ";" is a separator: SWF gives neither a key.
        let indent = comment.len() - comment.trim_start().len();
        let Some((key, value)) = comment.split_once(':') else {
            return;
        };
        let key = key.trim();
        if indent > 2 || key.is_empty() || key.contains(char::is_whitespace) {
            return;
        }
        self.entries
            .push((key.to_string(), value.trim().to_string()));
    }
}

/// A job line that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line: u64,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Streams the job lines of a trace, collecting the header as it goes.
pub struct SwfReader<R> {
    inner: R,
    line: u64,
    buf: Vec<u8>,
    header: Header,
    /// The job last read, lent out by [`SwfReader::next_job`] rather than
    /// moved: a trace has hundreds of thousands of them.
    job: SwfJob,
}

/// Opens a trace, plain or gzip-compressed (recognised by its first bytes,
/// whatever the file is called). A compressed trace is inflated on a thread
/// of its own, so that parsing overlaps inflation.
pub fn open(path: &Path) -> io::Result<SwfReader<Box<dyn BufRead + Send>>> {
    Ok(SwfReader::new(open_text(path)?))
}

/// Reads a whole trace from memory (tests, small inputs).
pub fn from_bytes(bytes: &[u8]) -> SwfReader<&[u8]> {
    SwfReader::new(bytes)
}

impl<R: BufRead> SwfReader<R> {
    pub fn new(inner: R) -> Self {
        SwfReader {
            inner,
            line: 0,
            buf: Vec::with_capacity(256),
            header: Header::default(),
            job: SwfJob {
                line: 0,
                fields: [0.0; FIELDS],
            },
        }
    }

    /// The header lines seen so far. Traces put them first, so after the
    /// first job this is normally complete.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next job line, a [`LineError`] for a malformed one, or `None` at
    /// the end. Only errors of the underlying reader are `Err`.
    pub fn next_job(&mut self) -> io::Result<Option<Result<&SwfJob, LineError>>> {
        loop {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                return Ok(None);
            }
            // Lines are parsed where they lie in the reader's buffer; only
            // one that straddles the end of the buffer is copied out.
            let outcome = match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    self.line += 1;
                    let raw = &avail[..i];
                    let o = take_line(
                        &mut self.header,
                        raw,
                        self.line,
                        false,
                        &mut self.job,
                        Fields::ALL,
                    );
                    self.inner.consume(i + 1);
                    o
                }
                None => {
                    self.buf.clear();
                    self.inner.read_until(b'\n', &mut self.buf)?;
                    self.line += 1;
                    let torn = !self.buf.ends_with(b"\n");
                    take_line(
                        &mut self.header,
                        &self.buf,
                        self.line,
                        torn,
                        &mut self.job,
                        Fields::ALL,
                    )
                }
            };
            if let Some(result) = outcome {
                return Ok(Some(result.map(|()| &self.job)));
            }
        }
    }
}

/// Parses a run of whole lines, as a reader cut at newlines hands them out,
/// for readers that split a trace across threads. Header lines go into
/// `header`; each job line, or the error of a malformed one, goes to `f`,
/// with line numbers counted from `first_line`. Only the `wanted` fields
/// of a job are read as numbers (the others are NaN), though every field
/// is checked to be one. `last` says the chunk ends the file, so a final
/// line without a newline is a truncated one. Returns the number of lines
/// in the chunk.
pub fn parse_chunk(
    chunk: &[u8],
    first_line: u64,
    last: bool,
    header: &mut Header,
    wanted: Fields,
    mut f: impl FnMut(Result<&SwfJob, LineError>),
) -> u64 {
    let mut job = SwfJob {
        line: 0,
        fields: [f64::NAN; FIELDS],
    };
    let mut line = first_line;
    scan::lines(chunk, wanted, &mut job, |kind, job| {
        match kind {
            // The fast path takes only lines whose wanted times are in
            // range, and leaves the others to the general parser.
            scan::Line::Job => {
                job.line = line;
                // The fast path reads plain integers only: of the rules
                // below, a negative submit time is the one it can break.
                if job.fields[field::SUBMIT - 1] < 0.0 {
                    f(Err(negative_submit(job)));
                } else {
                    f(Ok(job));
                }
            }
            scan::Line::Blank => {}
            scan::Line::Other { raw, ended } => {
                if let Some(r) = take_line(header, raw, line, last && !ended, job, wanted) {
                    // The general parser fills every field it gets to, a
                    // malformed line's leading ones included; the fast path
                    // writes only the wanted ones, so the others are reset
                    // here or the next fast line would carry them.
                    for (n, v) in job.fields.iter_mut().enumerate() {
                        if !wanted.has(n + 1) {
                            *v = f64::NAN;
                        }
                    }
                    f(r.map(|()| &*job));
                }
            }
        }
        line += 1;
    });
    line - first_line
}

/// What one raw line is: a job (parsed into `job`), a malformed job, or
/// (`None`) a header or blank line, which goes into `header` or nowhere.
fn take_line(
    header: &mut Header,
    raw: &[u8],
    line: u64,
    torn: bool,
    job: &mut SwfJob,
    wanted: Fields,
) -> Option<Result<(), LineError>> {
    let text = trim(raw);
    if text.is_empty() {
        return None;
    }
    if text[0] == b';' {
        if let Ok(s) = std::str::from_utf8(&text[1..]) {
            header.take(s);
        }
        return None;
    }
    let parsed = parse_fields_into(text, line, job).and_then(|()| times_in_range(job, wanted));
    Some(parsed.map_err(|mut e| {
        if torn {
            e.message.push_str(" (the file ends mid-line: truncated?)");
        }
        e
    }))
}

/// Field separators: SWF uses spaces and tabs; any control byte counts.
fn is_space(b: u8) -> bool {
    b <= b' '
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| !is_space(c)).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|&c| !is_space(c))
        .map_or(start, |e| e + 1);
    &b[start..end]
}

/// Parses the 18 whitespace-separated numbers of a job line.
///
/// One pass over the bytes: almost every SWF field is a small integer, read
/// digit by digit as the token is scanned; anything else (a fraction, an
/// exponent, garbage) falls back to the float parser for that token alone.
pub fn parse_line(text: &[u8], line: u64) -> Result<SwfJob, LineError> {
    let mut job = SwfJob {
        line,
        fields: [0.0; FIELDS],
    };
    parse_line_into(text, line, &mut job)?;
    Ok(job)
}

/// [`parse_line`] into an existing job (all fields overwritten on success).
pub fn parse_line_into(text: &[u8], line: u64, job: &mut SwfJob) -> Result<(), LineError> {
    parse_fields_into(text, line, job)?;
    times_in_range(job, Fields::ALL)
}

/// The 18 numbers of a job line into `job`, whatever their range.
fn parse_fields_into(text: &[u8], line: u64, job: &mut SwfJob) -> Result<(), LineError> {
    job.line = line;
    let fields = &mut job.fields;
    let mut n = 0;
    let mut i = 0;
    let len = text.len();
    loop {
        while i < len && is_space(text[i]) {
            i += 1;
        }
        if i == len {
            break;
        }
        if n == FIELDS {
            let extra = n + text[i..]
                .split(|&c| is_space(c))
                .filter(|t| !t.is_empty())
                .count();
            return Err(LineError {
                line,
                message: format!("expected {FIELDS} fields, found {extra}"),
            });
        }
        let start = i;
        let neg = text[i] == b'-';
        if neg {
            i += 1;
        }
        let digits = i;
        let mut v: i64 = 0;
        while i < len && text[i].is_ascii_digit() && i - digits < 15 {
            v = v * 10 + i64::from(text[i] - b'0');
            i += 1;
        }
        let ends_here = i == len || is_space(text[i]);
        fields[n] = if i > digits && ends_here {
            if neg {
                -v as f64
            } else {
                v as f64
            }
        } else {
            while i < len && !is_space(text[i]) {
                i += 1;
            }
            number(&text[start..i]).ok_or_else(|| LineError {
                line,
                message: format!(
                    "field {} is not a number: {:?}",
                    n + 1,
                    String::from_utf8_lossy(&text[start..i])
                ),
            })?
        };
        n += 1;
    }
    if n != FIELDS {
        return Err(LineError {
            line,
            message: format!("expected {FIELDS} fields, found {n}"),
        });
    }
    Ok(())
}

/// Checks the job's `wanted` fields: times within [`MAX_SECONDS`], a
/// submit time not before the log's start (SWF counts from 0; −1, unknown,
/// cannot be replayed either), processor counts whole. The fields a reader
/// uses, whichever path read the line, so that a line is a job or an error
/// alike on both.
#[inline]
fn times_in_range(job: &SwfJob, wanted: Fields) -> Result<(), LineError> {
    // Every line is checked: comparisons that do not wait on each other,
    // and one branch.
    let out = TIME_FIELDS.iter().fold(false, |out, &(n, _)| {
        out | (wanted.has(n) & (job.get(n).abs() > MAX_SECONDS))
    });
    if out {
        return out_of_range(job, wanted);
    }
    if wanted.has(field::SUBMIT) && job.get(field::SUBMIT) < 0.0 {
        return Err(negative_submit(job));
    }
    for (n, name) in [
        (field::ALLOC_PROCS, "allocated processors"),
        (field::REQ_PROCS, "requested processors"),
    ] {
        let v = job.get(n);
        if wanted.has(n) && v.fract() != 0.0 {
            return Err(LineError {
                line: job.line,
                message: format!("field {n} ({name}) is not a whole number: {v}"),
            });
        }
    }
    Ok(())
}

/// The error for a line whose submit time is before the log's start.
#[cold]
fn negative_submit(job: &SwfJob) -> LineError {
    LineError {
        line: job.line,
        message: format!(
            "field {} (submit time) is negative: {} s (SWF counts from the log's start, 0)",
            field::SUBMIT,
            job.get(field::SUBMIT)
        ),
    }
}

/// The error for a line [`times_in_range`] refuses.
#[cold]
fn out_of_range(job: &SwfJob, wanted: Fields) -> Result<(), LineError> {
    for (n, name) in TIME_FIELDS {
        let v = job.get(n);
        if wanted.has(n) && v.abs() > MAX_SECONDS {
            return Err(LineError {
                line: job.line,
                message: format!(
                    "field {n} ({name}) is out of range: {v} s (more than {MAX_SECONDS} s, 95 years)"
                ),
            });
        }
    }
    Ok(())
}

/// A number token that is not a plain integer: a float, or garbage.
fn number(tok: &[u8]) -> Option<f64> {
    let v: f64 = std::str::from_utf8(tok).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
; Version: 2.2
; Computer: Test
; MaxNodes: 64
; MaxProcs: 128
; Note: first
;       continued without a key
;              http://example.org/not-a-key
; Note: second
;
    1   0  10  100  4 -1 -1  4  200 -1  1 1 1 -1 1 -1 -1 -1
    2  5.5 -1  0.25 -1 -1 -1  8  -1 -1 -1 1 1 -1 1 -1 -1 -1
    3  7  1  2  3
    4  8  x  2  3 -1 -1 3 -1 -1 1 1 1 -1 1 -1 -1 -1
";

    #[test]
    fn header_and_jobs() {
        let mut r = from_bytes(TRACE.as_bytes());
        let j1 = *r.next_job().unwrap().unwrap().unwrap();
        assert_eq!(r.header().max_procs(), Some(128));
        assert_eq!(r.header().max_nodes(), Some(64));
        assert_eq!(r.header().cores(), Some(128));
        assert_eq!(r.header().get("note"), Some("first"));
        assert_eq!(r.header().entries.len(), 6);
        assert_eq!(j1.id(), 1);
        assert_eq!(j1.line, 10);
        assert_eq!(j1.wait_ns(), Some(10_000_000_000));
        assert_eq!(j1.procs(), Some(4));
        assert_eq!(j1.req_time_ns(), Some(200_000_000_000));

        let j2 = *r.next_job().unwrap().unwrap().unwrap();
        assert_eq!(j2.submit_ns(), 5_500_000_000);
        assert_eq!(j2.wait_ns(), None);
        assert_eq!(j2.run_ns(), Some(250_000_000));
        assert_eq!(j2.procs(), Some(8), "requested when allocated is unknown");
        assert_eq!(j2.status(), status::UNKNOWN);

        let e3 = r.next_job().unwrap().unwrap().unwrap_err();
        assert_eq!(e3.line, 12);
        assert!(e3.message.contains("found 5"), "{e3}");
        let e4 = r.next_job().unwrap().unwrap().unwrap_err();
        assert!(e4.to_string().starts_with("line 13: field 3"), "{e4}");
        assert!(r.next_job().unwrap().is_none());
    }

    #[test]
    fn chunks_read_as_the_whole() {
        let whole = TRACE.as_bytes();
        let cut = TRACE.find("    2 ").unwrap();
        let mut jobs = Vec::new();
        let mut errors = Vec::new();
        let mut header = Header::default();
        let n1 = parse_chunk(
            &whole[..cut],
            1,
            false,
            &mut header,
            Fields::ALL,
            |r| match r {
                Ok(j) => jobs.push(*j),
                Err(e) => errors.push(e),
            },
        );
        let mut later = Header::default();
        let n2 = parse_chunk(
            &whole[cut..],
            1 + n1,
            true,
            &mut later,
            Fields::ALL,
            |r| match r {
                Ok(j) => jobs.push(*j),
                Err(e) => errors.push(e),
            },
        );
        header.extend(later);
        assert_eq!(n1 + n2, TRACE.lines().count() as u64);
        let mut r = from_bytes(whole);
        let mut seq_jobs = Vec::new();
        let mut seq_errors = Vec::new();
        while let Some(x) = r.next_job().unwrap() {
            match x {
                Ok(j) => seq_jobs.push(*j),
                Err(e) => seq_errors.push(e),
            }
        }
        assert_eq!(jobs, seq_jobs);
        assert_eq!(errors, seq_errors);
        assert_eq!(&header, r.header());
    }

    #[test]
    fn truncated_last_line_is_an_error_that_says_so() {
        let mut r = from_bytes(b"1 0 0 5 1 -1 -1 1 -1 -1 1 1");
        let e = r.next_job().unwrap().unwrap().unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
    }

    #[test]
    fn numbers() {
        assert_eq!(number(b"-1"), Some(-1.0));
        assert_eq!(number(b"36660"), Some(36660.0));
        assert_eq!(number(b"12.75"), Some(12.75));
        assert_eq!(number(b"1e3"), Some(1000.0));
        assert_eq!(number(b"-"), None);
        // As numbers, whatever their range (which `parse_line` then checks).
        let mut j = SwfJob {
            line: 0,
            fields: [f64::NAN; FIELDS],
        };
        parse_fields_into(
            b"1 -2 3.5 1e2 -0.5 -1 -1 8 -1 -1 1 1 1 -1 1 -1 -1 -1",
            1,
            &mut j,
        )
        .unwrap();
        assert_eq!(&j.fields[..5], &[1.0, -2.0, 3.5, 100.0, -0.5]);
        assert!(
            parse_line(b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", 1)
                .unwrap_err()
                .message
                .contains("found 20")
        );
        assert!(parse_line(b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1-8", 1).is_err());
        assert_eq!(number(b"inf"), None);
        assert_eq!(number(b"3x"), None);
    }

    #[test]
    fn a_negative_submit_or_a_fraction_of_a_processor_is_malformed_on_both_paths() {
        let cases = [
            (
                "1 -5 0 10 4 -1 -1 4 20 -1 1 1 1 -1 1 -1 -1 -1",
                "field 2 (submit time) is negative",
            ),
            (
                "1 -1 0 10 4 -1 -1 4 20 -1 1 1 1 -1 1 -1 -1 -1",
                "field 2 (submit time) is negative",
            ),
            (
                "1 5 0 10 4.5 -1 -1 4 20 -1 1 1 1 -1 1 -1 -1 -1",
                "field 5 (allocated processors) is not a whole number: 4.5",
            ),
            (
                "1 5 0 10 -1 -1 -1 2.5 20 -1 1 1 1 -1 1 -1 -1 -1",
                "field 8 (requested processors) is not a whole number: 2.5",
            ),
        ];
        for (text, want) in cases {
            let e = parse_line(text.as_bytes(), 3).unwrap_err();
            assert_eq!(e.line, 3);
            assert!(e.message.contains(want), "{text}: {e}");
            // The fast path (a plain integer line) and the general one.
            let lines = chunk_lines(format!("{text}\n").as_bytes(), Fields::ALL);
            let e = lines[0].as_ref().unwrap_err();
            assert!(e.message.contains(want), "chunk {text}: {e}");
        }
        // Whole numbers written as decimals are whole.
        let j = parse_line(b"1 0 0 10 4.0 -1 -1 4 20 -1 1 1 1 -1 1 -1 -1 -1", 1).unwrap();
        assert_eq!(j.procs(), Some(4));
    }

    #[test]
    fn rounding_is_f64_round() {
        for x in [
            0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4503599627370495.5,
            1e18,
            -1e18,
            9.3e18,
            -9.3e18,
            f64::NAN,
            12.75e9,
            1234.4999,
        ] {
            assert_eq!(round(x), x.round() as i64, "{x}");
        }
    }

    /// Every job or error of a chunk, as `parse_chunk` hands them out.
    fn chunk_lines(text: &[u8], wanted: Fields) -> Vec<Result<SwfJob, LineError>> {
        let mut out = Vec::new();
        parse_chunk(text, 1, true, &mut Header::default(), wanted, |r| {
            out.push(r.copied().map_err(|e| e.clone()))
        });
        out
    }

    #[test]
    fn times_past_a_century_are_malformed_on_both_paths() {
        let huge = b"2 999999999999999 5 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1";
        let e = parse_line(huge, 7).unwrap_err();
        assert_eq!(e.line, 7);
        assert!(
            e.message.contains("field 2 (submit time) is out of range"),
            "{e}"
        );
        let mut text = huge.to_vec();
        text.push(b'\n');
        let lines = chunk_lines(&text, Fields::of(&[field::SUBMIT, field::RUN]));
        let e = lines[0].as_ref().unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        // A negative one too, and the limit itself is still a time.
        assert!(parse_line(b"1 -3000000001 0 1 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1", 1).is_err());
        assert!(parse_line(b"1 3000000000 0 1 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1", 1).is_ok());
        // A time the reader does not read is not checked, on the fast path
        // (plain integers) and on the general one (a fraction) alike.
        let text = b"1 0 5 10 4 -1 -1 4 999999999999999 -1 1 1 1 -1 1 -1 -1 -1\n\
                     2 0 5.5 10 4 -1 -1 4 999999999999999 -1 1 1 1 -1 1 -1 -1 -1\n";
        for line in chunk_lines(text, Fields::of(&[field::SUBMIT, field::RUN])) {
            assert!(line.is_ok(), "{line:?}");
        }
        for line in chunk_lines(text, Fields::ALL) {
            assert!(line.unwrap_err().message.contains("field 9"));
        }
    }

    #[test]
    fn a_malformed_line_leaves_nothing_in_the_next_jobs_unread_fields() {
        let text = b"7 8 x 10 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n\
                     1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n";
        let lines = chunk_lines(text, Fields::of(&[3, 4]));
        assert!(lines[0].is_err());
        let job = lines[1].as_ref().unwrap();
        assert_eq!((job.get(3), job.get(4)), (10.0, 100.0));
        assert!(job.get(1).is_nan() && job.get(2).is_nan(), "{job:?}");
    }

    #[test]
    fn partial_lines() {
        let mut j = parse_line(b"1 0 0 5 1 -1 -1 1 -1 -1 2 1 1 -1 1 -1 -1 -1", 1).unwrap();
        assert!(j.is_partial());
        j.fields[field::STATUS - 1] = 5.0;
        assert!(!j.is_partial());
    }
}
