//! Every front end's side of a clemu cluster: the controller's own client
//! commands, runworkload, and the Slurm commands all reach the cluster
//! through this crate, and only through it.
//!
//! # How it works
//!
//! A front end knows the controllers' addresses (one, or the primary and
//! its backups, comma-separated) and the cluster's shared secret. A
//! [`Session`] connects to the first that answers, authenticates with the
//! secret (the first connection with [`formats::wire::connect_early`]:
//! the controller's proof is read with the first answer, a round trip
//! sooner), and sends [`Request`]s one at a time. A backup acts on
//! nothing: it answers `NotPrimary` with the address of the primary it
//! follows, and the session moves there. While
//! none leads (a takeover under way) the session goes round the list and
//! asks again, for up to a minute; asking again is safe, since a
//! submission carries its key. Only that minute running out is fatal, and
//! the error says what each controller answered.
//!
//! [`tables`] turns the answers into what people read (tables, node lists
//! folded in nodeset notation) and what scripts read (JSON).
//!
//! This crate knows nothing of a cluster's config file: the front end
//! finds the addresses and the secret, and passes them in.

pub mod session;
pub mod tables;

use std::path::Path;

use anyhow::{anyhow, Result};
pub use formats::wire::{Request, Response};
pub use session::{answers, request, Session};

/// The shared secret kept in `path` (hex, one line, readable by its owner
/// only), or why it cannot be used, naming the file.
pub fn read_secret(path: &Path) -> Result<Vec<u8>> {
    formats::wire::read_secret(path).map_err(|e| anyhow!(e))
}
