//! Feeds arbitrary bytes to the SWF reader as a trace: header comments and
//! job lines, malformed ones included. It must never panic; every line is
//! a job or a warning naming its line, and line numbers only grow. The
//! chunk parser (whose fast path reads plain lines from bit masks) must
//! see exactly what the line-by-line reader sees.
#![no_main]

use formats::swf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut reader = swf::from_bytes(data);
    let mut last_line = 0;
    let mut seen = Vec::new();
    while let Ok(Some(next)) = reader.next_job() {
        seen.push(next.clone().map(|j| (j.line, j.fields.map(f64::to_bits))));
        match next {
            Ok(job) => {
                let _ = (job.id(), job.submit_ns(), job.run_ns(), job.procs(), job.wait_ns());
                let _ = (job.req_time_ns(), job.status(), job.is_partial());
            }
            Err(e) => {
                assert!(e.line > last_line || last_line == 0, "line numbers went back");
                last_line = e.line;
                let _ = e.to_string();
            }
        }
    }
    let mut chunked = Vec::new();
    let mut header = swf::Header::default();
    swf::parse_chunk(data, 1, true, &mut header, swf::Fields::ALL, |r| {
        chunked.push(r.map(|j| (j.line, j.fields.map(f64::to_bits))))
    });
    assert_eq!(chunked, seen, "the chunk parser and the reader disagree");
    assert_eq!(&header, reader.header());
    let h = reader.header();
    let _ = (h.max_procs(), h.max_nodes(), h.unix_start_time(), h.cores());
    for line in data.split(|&b| b == b'\n') {
        let _ = swf::parse_line(line, 1);
    }
});
