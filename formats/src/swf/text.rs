//! A trace's bytes: plain or gzip-compressed (recognised by the first
//! bytes), as one stream for the line reader or as chunks ending at line
//! ends for the readers that parse on several threads. A compressed trace
//! is inflated on a thread of its own, so that parsing overlaps it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::Path;

/// The text of a trace, inflated on a thread of its own if it is
/// gzip-compressed.
pub(super) fn open_text(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    Ok(match open_source(path)? {
        Source::Plain(file) => Box::new(file),
        Source::Gzip(gz) => Box::new(Inflater::spawn(gz)?),
    })
}

enum Source {
    Plain(BufReader<File>),
    Gzip(Box<flate2::bufread::MultiGzDecoder<BufReader<File>>>),
}

/// The uncompressed size of the last member of a gzip file, from its
/// trailer (ISIZE, the size modulo 2^32).
fn gzip_last_size(path: &Path) -> io::Result<u64> {
    use std::io::SeekFrom;
    let mut f = File::open(path)?;
    f.seek(SeekFrom::End(-4))?;
    let mut isize = [0u8; 4];
    f.read_exact(&mut isize)?;
    Ok(u64::from(u32::from_le_bytes(isize)))
}

fn open_source(path: &Path) -> io::Result<Source> {
    let mut file = BufReader::with_capacity(Chunks::SIZE, File::open(path)?);
    let gz = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Source::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(file)))
    } else {
        Source::Plain(file)
    })
}

/// A trace's text (inflated if it is gzip-compressed) cut into chunks that
/// end at line ends, for readers that parse chunks on several threads (see
/// [`parse_chunk`]). The text is read or inflated straight into the
/// caller's buffers, which can be handed back to be filled again.
pub struct Chunks {
    source: Box<dyn Read + Send>,
    /// The start of a line that the last chunk cut off.
    carry: Vec<u8>,
    done: bool,
    /// See [`Chunks::text_len_at_least`].
    text_len: u64,
}

impl Chunks {
    /// Bytes per chunk: large enough that handing one to a thread costs
    /// nothing next to parsing it, small enough that every thread gets work
    /// early.
    pub const SIZE: usize = 1 << 18;

    pub fn open(path: &Path) -> io::Result<Chunks> {
        let (source, text_len): (Box<dyn Read + Send>, u64) = match open_source(path)? {
            Source::Plain(file) => {
                // Straight from the file into the caller's buffers: through
                // the BufReader, every byte would be copied once more.
                let mut file = file.into_inner();
                file.rewind()?;
                let len = file.metadata()?.len();
                (Box::new(file), len)
            }
            Source::Gzip(gz) => (gz, gzip_last_size(path).unwrap_or(0)),
        };
        Ok(Chunks {
            source,
            carry: Vec::new(),
            done: false,
            text_len,
        })
    }

    /// A lower bound of the text's length, known before reading it: the
    /// file's size, or for gzip the size its last member's trailer gives
    /// (modulo 4 GiB, as gzip keeps it; 0 if unreadable). Readers may size
    /// their work by it.
    pub fn text_len_at_least(&self) -> u64 {
        self.text_len
    }

    /// Fills `buf` (its allocation reused, its contents replaced) with the
    /// next run of whole lines. Returns `None` at the end, else whether
    /// this chunk is the last (its final line may lack a newline).
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<bool>> {
        if self.done {
            return Ok(None);
        }
        // The buffer keeps its old contents, overwritten below: clearing it
        // would mean zeroing the whole buffer again for nothing.
        let mut filled = self.carry.len();
        if buf.len() < filled {
            buf.resize(filled, 0);
        }
        buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        loop {
            if buf.len() < filled + Self::SIZE {
                buf.resize(filled + Self::SIZE, 0);
            }
            let mut eof = false;
            while filled < buf.len() {
                match self.source.read(&mut buf[filled..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                }
            }
            buf.truncate(filled);
            if eof {
                self.done = true;
                return Ok((!buf.is_empty()).then_some(true));
            }
            // A line longer than a chunk makes the chunk grow rather than
            // be split.
            if let Some(nl) = memchr::memrchr(b'\n', buf) {
                self.carry.extend_from_slice(&buf[nl + 1..]);
                buf.truncate(nl + 1);
                break;
            }
        }
        Ok(Some(false))
    }
}

/// A reader fed by a thread that inflates a gzip stream ahead of it, in
/// blocks, through a bounded channel. Dropping the reader ends the thread
/// (its next send fails).
struct Inflater {
    blocks: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    block: Vec<u8>,
    at: usize,
    done: bool,
}

impl Inflater {
    const BLOCK: usize = 1 << 20;

    fn spawn<R: Read + Send + 'static>(mut source: R) -> io::Result<Inflater> {
        // Four blocks in flight: enough to keep both sides busy, little
        // memory.
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        std::thread::Builder::new()
            .name("swf-inflate".into())
            .spawn(move || loop {
                let mut block = vec![0; Self::BLOCK];
                let mut n = 0;
                let step = loop {
                    match source.read(&mut block[n..]) {
                        Ok(0) => break Ok(()),
                        Ok(k) => {
                            n += k;
                            if n == block.len() {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                block.truncate(n);
                let last = n == 0 || step.is_err();
                let msg = step.map(|()| block);
                if tx.send(msg).is_err() || last {
                    return;
                }
            })?;
        Ok(Inflater {
            blocks: rx,
            block: Vec::new(),
            at: 0,
            done: false,
        })
    }
}

impl Read for Inflater {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Inflater {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.block.len() && !self.done {
            match self.blocks.recv() {
                Ok(Ok(b)) if b.is_empty() => self.done = true,
                Ok(Ok(b)) => {
                    self.block = b;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                // The thread ended without a last empty block: it failed to
                // send, which only happens once we are gone. Treat as EOF.
                Err(_) => self.done = true,
            }
        }
        Ok(&self.block[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.block.len());
    }
}
