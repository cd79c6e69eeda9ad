//! Feeds arbitrary bytes to the SWF reader as a trace: header comments and
//! job lines, malformed ones included. It must never panic; every line is
//! a job or a warning naming its line, and line numbers only grow. The
//! chunk parser (whose fast path reads plain lines from bit masks) must
//! see exactly what the line-by-line reader sees, and, asked for only some
//! fields (chosen by the input's first bytes), read those alike and leave
//! the others NaN.
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

    let bits = data.iter().take(3).fold(0u32, |b, &x| b << 8 | u32::from(x));
    let wanted: Vec<usize> = (1..=swf::FIELDS).filter(|n| bits >> (n - 1) & 1 == 1).collect();
    let wanted = swf::Fields::of(&wanted);
    let mut some = Vec::new();
    swf::parse_chunk(data, 1, true, &mut swf::Header::default(), wanted, |r| {
        some.push(r.map(|j| *j).map_err(|e| e.clone()))
    });
    assert_eq!(some.len(), seen.len(), "a subset of fields changed the lines");
    for (part, whole) in some.iter().zip(&seen) {
        match (part, whole) {
            (Ok(p), Ok((line, fields))) => {
                assert_eq!(p.line, *line);
                for n in 1..=swf::FIELDS {
                    let v = p.get(n);
                    if wanted.has(n) {
                        assert_eq!(v.to_bits(), fields[n - 1], "field {n} read differently");
                    } else {
                        assert!(v.is_nan(), "unread field {n} holds {v}");
                    }
                }
            }
            // Only the fields read are checked against the time limit, on
            // either path.
            (Ok(p), Err(e)) => {
                assert!(e.line == p.line && e.message.contains("out of range"), "{e}");
                let field: usize = e.message["field ".len()..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("the message names the field");
                assert!(!wanted.has(field), "field {field} was read but not checked: {e}");
            }
            (Err(p), Err(e)) => assert_eq!(p.line, e.line),
            (Err(p), Ok(_)) => panic!("only the subset failed: {p}"),
        }
    }
    assert_eq!(&header, reader.header());
    let h = reader.header();
    let _ = (h.max_procs(), h.max_nodes(), h.unix_start_time(), h.cores());
    for line in data.split(|&b| b == b'\n') {
        let _ = swf::parse_line(line, 1);
    }
});
