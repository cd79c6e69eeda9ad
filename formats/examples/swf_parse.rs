//! Times the SWF chunk parser alone, on one thread, over a trace already in
//! memory: `cargo run --release -p formats --features swf --example swf_parse -- TRACE`.
//! Prints nanoseconds per line with every field read and with six.

use std::time::Instant;

use formats::swf::{self, field, Chunks, Fields, Header};

fn main() -> std::io::Result<()> {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: swf_parse TRACE");
        std::process::exit(2);
    };
    let mut chunks = Chunks::open(path.as_ref())?;
    let mut all = Vec::new();
    loop {
        let mut buf = Vec::new();
        match chunks.next_into(&mut buf)? {
            Some(last) => all.push((buf, last)),
            None => break,
        }
    }
    let six = Fields::of(&[
        field::SUBMIT,
        field::WAIT,
        field::RUN,
        field::ALLOC_PROCS,
        field::REQ_PROCS,
        field::STATUS,
    ]);
    for (label, wanted) in [
        ("all fields", Fields::ALL),
        ("six fields", six),
        ("no field", Fields::of(&[])),
        ("first six", Fields::of(&[1, 2, 3, 4, 5, 6])),
        ("one field", Fields::of(&[4])),
    ] {
        let mut best = f64::MAX;
        let mut lines = 0;
        let mut sum = 0.0;
        for _ in 0..5 {
            let t = Instant::now();
            lines = 0;
            for (text, last) in &all {
                let mut header = Header::default();
                lines += swf::parse_chunk(text, 1, *last, &mut header, wanted, |j| {
                    if let Ok(j) = j {
                        sum += j.fields[field::RUN - 1];
                    }
                });
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{label}: {lines} lines, {:.1} ms, {:.1} ns/line (checksum {sum})",
            best * 1e3,
            best * 1e9 / lines as f64
        );
    }
    Ok(())
}
