//! calcmets's command line (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "calcmets",
    version,
    about = "Scheduling metrics from clemu job records or SWF traces",
    after_help = "Examples:\n  calcmets dump results/shrink-100 | head\n  calcmets dump --format jsonl jobs.rec > jobs.jsonl"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every record as one JSON object per line.
    Dump(DumpArgs),
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = DumpFormat::Jsonl)]
    pub format: DumpFormat,
    /// Exit with status 1 if any input holds damaged frames.
    #[arg(long)]
    pub strict: bool,
    /// Record files, or directories searched recursively for `*.rec`; `-`
    /// reads standard input.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DumpFormat {
    /// One JSON object per line.
    Jsonl,
}
