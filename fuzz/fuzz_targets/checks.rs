//! What each fuzz target checks of one input: no panic, and the
//! properties below. Shared with `formats/tests/fuzz_regressions.rs`, which
//! feeds every input of `fuzz/regressions/<target>/` through the same
//! function, so that a bug fixed stays fixed under the same checks.

use std::collections::BTreeSet;

use formats::nodeset::{self, Groups};
use formats::record::{encode_to_vec, RecordReader};
use formats::swf;
use formats::wire::{self, Auth, FromAgent, Hello, Request, Response, ToAgent, Welcome};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

/// The job-record decoder never panics, and every record it yields is a
/// whole frame of the input (its canonical re-encoding occurs in the
/// input, CRC included).
pub fn record_decoder(data: &[u8]) {
    // A tiny read size exercises the refill and resynchronisation paths.
    let mut reader = RecordReader::new(Trickle { data, at: 0 });
    while let Ok(Some(rec)) = reader.next_record() {
        let frame = encode_to_vec(&rec).expect("a decoded record re-encodes");
        assert!(
            data.windows(frame.len()).any(|w| w == frame.as_slice()),
            "decoder yielded a record that is not a frame of the input"
        );
    }
    let stats = reader.stats();
    assert!(stats.skipped_bytes as usize <= data.len());
}

/// A reader that hands out at most 7 bytes per call.
struct Trickle<'a> {
    data: &'a [u8],
    at: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(7).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn roundtrip<M: DeserializeOwned + Serialize>(frame: &[u8]) {
    if let Ok(msg) = wire::decode::<M>(frame) {
        let again = wire::encode(&msg).expect("a decoded message encodes");
        assert_eq!(again, frame, "decode then encode changed the bytes");
    }
}

/// Bytes as a peer would send them: length-delimited frames (with the
/// server's size limit), each decoded as every message type a controller,
/// an agent or a client receives. (After the handshake each frame also
/// ends with its tag, checked before the message is decoded: what the
/// decoder meets is what a peer with the secret sent.) Never a panic nor an allocation past the
/// frame, and whatever decodes encodes back to the same bytes.
pub fn wire_decoder(data: &[u8]) {
    let mut codec = LengthDelimitedCodec::builder()
        .max_frame_length(wire::MAX_FRAME)
        .new_codec();
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = codec.decode(&mut buf) {
        roundtrip::<Hello>(&frame);
        roundtrip::<Auth>(&frame);
        roundtrip::<Welcome>(&frame);
        roundtrip::<FromAgent>(&frame);
        roundtrip::<ToAgent>(&frame);
        roundtrip::<Request>(&frame);
        roundtrip::<Response>(&frame);
    }
}

/// Bytes as a trace: header comments and job lines, malformed ones
/// included. Never a panic; every line is a job or a warning naming its
/// line, and line numbers only grow. The chunk parser (whose fast path
/// reads plain lines from bit masks) sees exactly what the line-by-line
/// reader sees, and, asked for only some fields (chosen by the input's
/// first bytes), reads those alike and leaves the others NaN.
pub fn swf_parser(data: &[u8]) {
    let mut reader = swf::from_bytes(data);
    let mut last_line = 0;
    let mut seen = Vec::new();
    while let Ok(Some(next)) = reader.next_job() {
        seen.push(next.clone().map(|j| (j.line, j.fields.map(f64::to_bits))));
        match next {
            Ok(job) => {
                let _ = (
                    job.id(),
                    job.submit_ns(),
                    job.run_ns(),
                    job.procs(),
                    job.wait_ns(),
                );
                let _ = (job.req_time_ns(), job.status(), job.is_partial());
            }
            Err(e) => {
                assert!(
                    e.line > last_line || last_line == 0,
                    "line numbers went back"
                );
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

    let bits = data
        .iter()
        .take(3)
        .fold(0u32, |b, &x| b << 8 | u32::from(x));
    let wanted: Vec<usize> = (1..=swf::FIELDS)
        .filter(|n| bits >> (n - 1) & 1 == 1)
        .collect();
    let wanted = swf::Fields::of(&wanted);
    let mut some = Vec::new();
    swf::parse_chunk(data, 1, true, &mut swf::Header::default(), wanted, |r| {
        some.push(r.copied().map_err(|e| e.clone()))
    });
    assert_eq!(
        some.len(),
        seen.len(),
        "a subset of fields changed the lines"
    );
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
            // Only the fields read are checked (a time's limit, a submit
            // time's sign, a processor count's fraction), on either path.
            (Ok(p), Err(e)) => {
                assert!(
                    e.line == p.line
                        && ["out of range", "is negative", "not a whole number"]
                            .iter()
                            .any(|m| e.message.contains(m)),
                    "{e}"
                );
                let field: usize = e.message["field ".len()..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("the message names the field");
                assert!(
                    !wanted.has(field),
                    "field {field} was read but not checked: {e}"
                );
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
}

/// Text as a nodeset, with a few @groups defined. Never a panic; a set it
/// accepts folds to a form that parses back to the same set.
pub fn nodeset_parser(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut groups = Groups::new();
    groups.define("rack1", "vn[00-09]");
    groups.define("all", "@rack1,vn[10-19]");
    groups.define("self", "@self,x");
    let Ok(set) = groups.parse(text) else {
        return;
    };
    // Folding a large set is fine; listing it is not. A folded form longer
    // than an expression may be (scattered names fold to long lists) is
    // not parsed back.
    let folded = nodeset::folded(&set);
    if folded.len() > 1 << 20 {
        return;
    }
    let again = nodeset::parse(&folded).expect("a folded set parses");
    if set.len() <= 10_000 {
        // The same names, listed.
        let a: BTreeSet<String> = set.iter().collect();
        let b: BTreeSet<String> = again.iter().collect();
        assert_eq!(a, b, "{text:?} folded to {folded:?}");
        let names = nodeset::expand(&set);
        let refolded = nodeset::parse(&nodeset::fold(names.iter().map(String::as_str))).unwrap();
        assert_eq!(refolded.iter().collect::<BTreeSet<_>>(), a);
    }
}
