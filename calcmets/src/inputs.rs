//! Where records come from: the files and directories named on the command
//! line, walked recursively and streamed one file at a time.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use formats::record::{DecodeStats, JobRecord, RecordReader};

/// Extension of record files picked up when a directory is walked. Files
/// named explicitly are read whatever their name.
pub const RECORD_EXT: &str = "rec";

/// A record source: a file, or standard input for `-`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".into(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// Expands the inputs into record sources: files as given, directories
/// walked for `*.rec` files in sorted order (so output is reproducible).
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for input in inputs {
        if input.as_os_str() == "-" {
            out.push(Source::Stdin);
            continue;
        }
        let meta =
            std::fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(input, &mut found)?;
            found.sort();
            out.extend(found.into_iter().map(Source::File));
        } else {
            out.push(Source::File(input.clone()));
        }
    }
    Ok(out)
}

/// The sources of `inputs` that hold records of their own, each read once.
/// A file named twice (itself and within its directory, say) is read once;
/// a file whose bytes are another's (`cp a.rec b.rec`) is a copy, and its
/// records would be counted twice: it is left out. Each case gets a line
/// in `warnings`. Files are compared by content only when their sizes are
/// equal, so that the usual inputs cost nothing more than a stat.
pub fn expand_distinct(inputs: &[PathBuf], warnings: &mut Vec<String>) -> Result<Vec<Source>> {
    let mut named: std::collections::BTreeMap<PathBuf, PathBuf> = Default::default();
    let mut out = Vec::new();
    for src in expand(inputs)? {
        let Source::File(path) = &src else {
            out.push(src);
            continue;
        };
        let real = std::fs::canonicalize(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        match named.get(&real) {
            Some(first) => warnings.push(format!(
                "{}: named more than once (also as {}): read once",
                path.display(),
                first.display()
            )),
            None => {
                named.insert(real, path.clone());
                out.push(src);
            }
        }
    }
    // Ordered (by size, and within a size as given), so that the
    // warnings are the same every time.
    let mut by_size: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, src) in out.iter().enumerate() {
        if let Source::File(p) = src {
            let len = std::fs::metadata(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .len();
            if len > 0 {
                by_size.entry(len).or_default().push(i);
            }
        }
    }
    let mut copies = std::collections::BTreeSet::new();
    for same in by_size.values().filter(|v| v.len() > 1) {
        // A checksum first, so that each file is read once unless two
        // agree; then byte by byte, so that a file is never dropped on a
        // checksum's word alone.
        let mut kept: std::collections::HashMap<u32, Vec<usize>> = Default::default();
        for &i in same {
            let Source::File(p) = &out[i] else { continue };
            let crc = checksum(p)?;
            let mut twin = None;
            for &first in kept.get(&crc).into_iter().flatten() {
                if same_bytes(&out[first], p)? {
                    twin = Some(first);
                    break;
                }
            }
            match twin {
                Some(first) => {
                    warnings.push(format!(
                        "{}: the same bytes as {}, a copy: its records are counted once",
                        out[i].name(),
                        out[first].name()
                    ));
                    copies.insert(i);
                }
                None => kept.entry(crc).or_default().push(i),
            }
        }
    }
    Ok(out
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !copies.contains(i))
        .map(|(_, s)| s)
        .collect())
}

fn checksum(path: &Path) -> Result<u32> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            return Ok(h.finalize());
        }
        h.update(&buf[..n]);
    }
}

fn same_bytes(a: &Source, b: &Path) -> Result<bool> {
    let Source::File(a) = a else { return Ok(false) };
    let open = |p: &Path| {
        File::open(p)
            .map(io::BufReader::new)
            .with_context(|| format!("cannot open {}", p.display()))
    };
    let (mut x, mut y) = (open(a)?, open(b)?);
    let (mut bx, mut by) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = io::Read::read(&mut x, &mut bx)
            .with_context(|| format!("cannot read {}", a.display()))?;
        if n == 0 {
            // Alike only if the other ends here too (it may be growing).
            let more = io::Read::read(&mut y, &mut by[..1])
                .with_context(|| format!("cannot read {}", b.display()))?;
            return Ok(more == 0);
        }
        match y.read_exact(&mut by[..n]) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            r => r.with_context(|| format!("cannot read {}", b.display()))?,
        }
        if bx[..n] != by[..n] {
            return Ok(false);
        }
    }
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        let ty = entry
            .file_type()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if ty.is_dir() {
            walk(&path, found)?;
        } else if path.extension().is_some_and(|e| e == RECORD_EXT) {
            found.push(path);
        }
    }
    Ok(())
}

fn open(src: &Source) -> Result<Box<dyn Read>> {
    // The decoder buffers on its own: a file is read straight into it.
    Ok(match src {
        Source::Stdin => Box::new(io::stdin().lock()),
        Source::File(p) => {
            Box::new(File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
        }
    })
}

/// Streams every intact record of every source through `f`, file by file.
/// Returns the decode statistics of each source, in order, so that damage
/// can be reported against the file that holds it.
/// An error of `f` (say, a closed output) stops the walk and is returned,
/// and so is a source that holds bytes but not one readable record: it is
/// not a record file, and 0 jobs would be a wrong answer.
pub fn for_each_record(
    sources: &[Source],
    mut f: impl FnMut(&JobRecord<'_>) -> io::Result<()>,
) -> Result<Vec<(Source, DecodeStats)>> {
    let mut stats = Vec::with_capacity(sources.len());
    for src in sources {
        let mut reader = RecordReader::new(open(src)?);
        reader
            .for_each_record(&mut f)
            .with_context(|| format!("cannot read {}", src.name()))?;
        let s = reader.stats();
        // Damaged frames in a file that starts with one are a damaged
        // record file (say, its only record torn by a crash), and are
        // reported as such; anything else is not a record file.
        if s.records == 0 && s.damaged() + s.unsupported > 0 && s.first_magic_at != Some(0) {
            bail!(
                "{}: not a record file: no readable record in it ({} corrupt and {} torn \
                 frame(s), {} of an unknown version, {} stray bytes)",
                src.name(),
                s.corrupt,
                s.torn,
                s.unsupported,
                s.skipped_bytes
            );
        }
        stats.push((src.clone(), s));
    }
    Ok(stats)
}

/// Whether the file at `path` begins as a record file does, with a
/// record's magic (or is empty); false for one that cannot be read.
pub fn starts_with_a_record(path: &Path) -> bool {
    let mut head = [0u8; 4];
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    match f.read(&mut head) {
        Ok(0) => true,
        Ok(n) => head[..n] == formats::record::MAGIC[..n],
        Err(_) => false,
    }
}

/// The damage of every source together, by kind.
pub fn damage(stats: &[(Source, DecodeStats)]) -> crate::metrics::Damage {
    let mut d = crate::metrics::Damage::default();
    for (_, s) in stats {
        d.corrupt += s.corrupt;
        d.torn += s.torn;
        d.unsupported += s.unsupported;
    }
    d
}

/// One line per damaged source, for standard error.
pub fn damage_report(stats: &[(Source, DecodeStats)]) -> Vec<String> {
    stats
        .iter()
        .filter(|(_, s)| s.damaged() + s.unsupported > 0)
        .map(|(src, s)| {
            format!(
                "{}: skipped {} corrupt and {} torn frame(s), {} of an unknown version ({} stray bytes)",
                src.name(),
                s.corrupt,
                s.torn,
                s.unsupported,
                s.skipped_bytes
            )
        })
        .collect()
}
