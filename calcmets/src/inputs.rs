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
