//! `calcmets dump`: records as JSON lines, one object per record, with the
//! fields of docs/design.md ("calcmets dump --format jsonl").

use std::io::Write;

use formats::record::{Devices, JobRecord};
use serde::Serialize;

/// One record as docs/design.md spells it: instants in seconds since the Unix
/// epoch, durations in seconds.
#[derive(Serialize)]
struct Line<'a> {
    id: u64,
    cores: u32,
    node: &'a str,
    submit: f64,
    start: f64,
    end: f64,
    /// The run time asked; `None` (null) for a program, which asks none.
    runtime: Option<f64>,
    walltime: f64,
    status: &'static str,
    suspensions: Vec<[f64; 2]>,
    flags: Vec<std::borrow::Cow<'static, str>>,
    /// Devices of generic resources it held: `{node, kind, ids}` each
    /// (left out for a record without: version 1).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    devices: &'a [Devices<'a>],
    /// How the program it ran ended (left out for a sigsleep: versions 1
    /// and 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    program: Option<Program>,
}

/// A program's end as Slurm's accounting names it.
#[derive(Serialize)]
struct Program {
    /// `code:signal`.
    exit_code: String,
    /// Whether it could be started at all.
    started: bool,
    /// User and system CPU seconds of all its processes.
    cpu: f64,
    /// The largest resident set of one of them, KiB.
    max_rss_kib: u64,
}

pub fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// Writes `rec` as one JSON line.
pub fn write_jsonl(out: &mut impl Write, rec: &JobRecord<'_>) -> std::io::Result<()> {
    let line = Line {
        id: rec.id,
        cores: rec.cores,
        node: &rec.node,
        submit: secs(rec.submit),
        start: secs(rec.start),
        end: secs(rec.end),
        runtime: (rec.runtime != u64::MAX).then(|| rec.runtime as f64 / 1e9),
        walltime: rec.walltime as f64 / 1e9,
        status: rec.status.as_str(),
        suspensions: rec
            .suspensions
            .iter()
            .map(|s| [secs(s.suspend), secs(s.resume)])
            .collect(),
        flags: rec.flags.names().collect(),
        devices: &rec.devices,
        program: rec.program.map(|p| Program {
            exit_code: p.exit_code(),
            started: p.started(),
            cpu: p.cpu_ns as f64 / 1e9,
            max_rss_kib: p.max_rss_kib,
        }),
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}
