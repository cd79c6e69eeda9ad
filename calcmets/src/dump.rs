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
    runtime: f64,
    walltime: f64,
    status: &'static str,
    suspensions: Vec<[f64; 2]>,
    flags: Vec<std::borrow::Cow<'static, str>>,
    /// Devices of generic resources it held: `{node, kind, ids}` each
    /// (left out for a record without: version 1).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    devices: &'a [Devices<'a>],
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
        runtime: rec.runtime as f64 / 1e9,
        walltime: rec.walltime as f64 / 1e9,
        status: rec.status.as_str(),
        suspensions: rec
            .suspensions
            .iter()
            .map(|s| [secs(s.suspend), secs(s.resume)])
            .collect(),
        flags: rec.flags.names().collect(),
        devices: &rec.devices,
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}
