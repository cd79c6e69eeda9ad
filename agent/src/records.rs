//! The spool: the local file that jobs of a remote agent append their
//! records to, read as it grows so that finished records can be sent to
//! the controller. Owns the read position.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Context, Result};

pub struct Spool {
    file: File,
    /// Bytes read but not yet sent: the start of a frame still being
    /// written.
    pending: Vec<u8>,
}

impl Spool {
    /// Opens (creating) the spool. Records already in it belong to an
    /// earlier run and are not sent again.
    pub fn open(path: &Path) -> Result<Spool> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("cannot open record spool {}", path.display()))?;
        file.seek(SeekFrom::End(0))
            .with_context(|| format!("cannot seek in {}", path.display()))?;
        Ok(Spool {
            file,
            pending: Vec::new(),
        })
    }

    /// The records appended since the last call, by job: (job id, frame).
    /// Damaged frames are skipped (the controller would drop them anyway).
    pub fn read_new_by_job(&mut self) -> Result<Vec<(u64, Vec<u8>)>> {
        let frames = self.read_new()?;
        let mut out = Vec::new();
        let mut reader = formats::record::RecordReader::new(&frames[..]);
        reader
            .for_each_record(|rec| -> std::io::Result<()> {
                let mut frame = Vec::new();
                if formats::record::encode(rec, &mut frame).is_ok() {
                    out.push((rec.id, frame));
                }
                Ok(())
            })
            .context("cannot read the record spool")?;
        Ok(out)
    }

    /// The whole frames appended since the last call.
    pub fn read_new(&mut self) -> Result<Vec<u8>> {
        self.file
            .read_to_end(&mut self.pending)
            .context("cannot read the record spool")?;
        let whole = formats::record::complete_prefix(&self.pending);
        let rest = self.pending.split_off(whole);
        Ok(std::mem::replace(&mut self.pending, rest))
    }
}

/// The frame of a plain completed record of job `id`, for tests.
#[cfg(test)]
pub(crate) fn frame_of_test_record(id: u64) -> Vec<u8> {
    use formats::record::{encode_to_vec, Flags, JobRecord, Status};
    encode_to_vec(&JobRecord {
        id,
        cores: 1,
        node: "n".into(),
        submit: 0,
        start: 0,
        end: 1,
        runtime: 1,
        walltime: 0,
        status: Status::Completed,
        flags: Flags::default(),
        suspensions: vec![],
        devices: Vec::new(),
        program: None,
    })
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_new_whole_frames_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool.rec");
        std::fs::write(&path, frame_of_test_record(0)).unwrap();
        let mut spool = Spool::open(&path).unwrap();
        assert!(spool.read_new().unwrap().is_empty(), "old records stay");
        let one = frame_of_test_record(1);
        let two = frame_of_test_record(2);
        let mut w = OpenOptions::new().append(true).open(&path).unwrap();
        w.write_all(&one).unwrap();
        w.write_all(&two[..5]).unwrap();
        assert_eq!(spool.read_new().unwrap(), one);
        w.write_all(&two[5..]).unwrap();
        assert_eq!(spool.read_new().unwrap(), two);
    }
}
