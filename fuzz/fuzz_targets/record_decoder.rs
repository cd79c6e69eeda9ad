//! Feeds arbitrary bytes to the job-record decoder. It must never panic,
//! and every record it yields must be a whole frame of the input (its
//! canonical re-encoding occurs in the input, CRC included).
#![no_main]

use formats::record::{encode_to_vec, RecordReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
});

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
