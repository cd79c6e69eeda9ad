//! calcmets: how every clemu result is read.
//!
//! # How it works
//!
//! [`inputs`] expands the files and directories on the command line into
//! record sources and streams each through the [`formats::record`] decoder,
//! never holding a whole file in memory; damaged frames are counted per file
//! and reported on standard error. Subcommands consume the stream:
//!
//! - [`dump`] prints each record as one JSON line.
//!
//! The binary is a thin `main.rs`: [`run`] returns an [`Outcome`] and `main`
//! maps it to the exit code (0 ok, 1 ran but found a problem, 2 usage or
//! internal error; a closed pipe counts as success).

pub mod cli;
pub mod dump;
pub mod inputs;

use std::io::{self, BufWriter, Write};

use anyhow::Result;

use crate::cli::{Cli, Command, DumpArgs};

/// How a run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything read was sound.
    Clean,
    /// The run completed but found damage or warnings and `--strict` was given.
    Problems,
}

pub fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Dump(args) => dump_records(&args),
    }
}

fn dump_records(args: &DumpArgs) -> Result<Outcome> {
    let sources = inputs::expand(&args.inputs)?;
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    let stats = inputs::for_each_record(&sources, |rec| dump::write_jsonl(&mut out, rec))?;
    out.flush()?;
    let report = inputs::damage_report(&stats);
    for line in &report {
        eprintln!("calcmets: warning: {line}");
    }
    Ok(if args.strict && !report.is_empty() {
        Outcome::Problems
    } else {
        Outcome::Clean
    })
}

/// Whether `err` is a closed output pipe (`calcmets dump | head`), which
/// ends the program quietly and successfully.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
