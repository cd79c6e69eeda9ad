//! Writes N synthetic job records to a file, for benchmarks:
//!
//!   cargo run --release -p calcmets --example gen_records -- N OUT.rec
//!
//! Jobs of 1 to 64 cores with varied waits and run times, one in ten
//! suspended once, node names like those of a 3,600-node cluster; a
//! deterministic generator, so every run writes the same file.

use std::borrow::Cow;
use std::io::{BufWriter, Write};

use formats::record::{encode, Flags, JobRecord, Status, Suspension};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: gen_records N OUT.rec";
    let n: u64 = args.next().ok_or(usage)?.parse()?;
    let out = args.next().ok_or(usage)?;
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*: fast, deterministic, good enough for spreading values.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let base: i64 = 1_800_000_000_000_000_000;
    let mut buf = Vec::with_capacity(1 << 16);
    for id in 0..n {
        let submit = base + id as i64 * 1_000_000_000;
        let wait = (next() % 3_600_000) as i64 * 1_000_000;
        let run = (next() % 7_200_000 + 1) as i64 * 1_000_000;
        let start = submit + wait;
        let suspended = id % 10 == 0;
        let pause = if suspended { 5_000_000_000 } else { 0 };
        let rec = JobRecord {
            id,
            cores: 1 << (next() % 7),
            node: Cow::Owned(format!("vn{:04}", id % 3600)),
            submit,
            start,
            end: start + run + pause,
            runtime: run as u64,
            walltime: 2 * run as u64,
            status: if id % 50 == 0 {
                Status::Cancelled
            } else {
                Status::Completed
            },
            flags: Flags::default(),
            suspensions: if suspended {
                vec![Suspension {
                    suspend: start + run / 2,
                    resume: start + run / 2 + pause,
                }]
            } else {
                Vec::new()
            },
            devices: Vec::new(),
            program: None,
        };
        encode(&rec, &mut buf)?;
        if buf.len() > 60_000 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    w.flush()?;
    Ok(())
}
