//! What crosses clemu's process boundaries.
//!
//! # How it works
//!
//! clemu is several programs (sigsleep, agent, controller, runworkload,
//! calcmets) that talk through files and sockets. Everything one of them
//! writes and another reads is defined here, once:
//!
//! - [`record`]: the job record that `sigsleep` appends when a job ends, as
//!   a framed, versioned, CRC-checked binary frame, with an encoder and a
//!   streaming decoder that survives torn and corrupt input. The byte layout
//!   is in `docs/record-format.md`.
//! - [`swf`] (feature `swf`): workload traces in the Standard Workload
//!   Format, plain or gzip-compressed: a line-by-line reader, and a chunk
//!   parser for readers on several threads whose fast path reads plain job
//!   lines with SSE2 (feature `swf-wide`: AVX2 or AVX-512 where the
//!   processor has them, chosen at run time; `CLEMU_SWF_ISA` forces a
//!   narrower one).
//! - [`nodeset`] (feature `nodeset`): ClusterShell's nodeset notation, with
//!   `@group` names from clemu's configuration.
//! - [`wire`] (feature `wire`): the framed, authenticated protocol between
//!   controller, agents and clients, and its messages.
//! - [`results`] (feature `results`): a results directory's files, as
//!   runworkload writes them and calcmets reads them.
//! - [`intervals`]: sets of resource ids as Batsim writes them (`"0-3 8"`).
//! - [`scheduler`]: an external scheduler's figures (reply latency), from
//!   the controller's stats to a run's manifest.
//! - [`seconds`]: decimal seconds from command lines and traces, read exactly
//!   into nanoseconds.
//! - [`usage`] (feature `cli`): the binaries' command-line mistakes, as one
//!   line and exit code 2.
//!
//! The default build is the record format alone, with no async runtime and
//! no I/O beyond `std::io::Read`, so that the lightest binary (`sigsleep`)
//! stays light; each feature adds what its users need. Nothing here holds
//! state between calls, but for the SWF reader's choice of instructions,
//! made once per process.

pub mod intervals;
#[cfg(feature = "nodeset")]
pub mod nodeset;
pub mod record;
#[cfg(feature = "results")]
pub mod results;
pub mod scheduler;
pub mod seconds;
#[cfg(feature = "swf")]
pub mod swf;
#[cfg(feature = "cli")]
pub mod usage;
#[cfg(feature = "wire")]
pub mod wire;
