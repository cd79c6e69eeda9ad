//! agent: the per-host daemon that hosts many virtual nodes.
//!
//! # How it works
//!
//! An agent connects to the controller ([`uplink`]), proves it knows the
//! shared secret, registers the virtual nodes it hosts, and receives the
//! controller's settings (suspension mode, grace periods, heartbeat).
//! Each virtual node is one tokio task ([`node`]) that owns the jobs
//! started on it: it launches `sigsleep` through the process-wide
//! [`spawn::Launcher`] (one spawner thread, one reaper thread, and one
//! thread reading the socket on which each sigsleep says its job ended, for
//! any number of jobs), signals the job's process group to suspend or resume it
//! and sigsleep to cancel it, and reports how the job ended. Before a gang turn it may
//! be asked to start a job's process ahead, held (`sigsleep --held`): the
//! turn's start then only lets it go on, and one that no start claims in
//! time is killed without a record. Jobs write their records
//! either straight into the controller's record directory (agents the
//! controller hosts itself) or into a local spool ([`records`]) whose new
//! frames are sent to the controller as jobs end. Every ten heartbeats it
//! reports its host's load and memory and its jobs' memory ([`resources`]).
//!
//! An agent only ever runs the `sigsleep` of its own configuration, with
//! arguments it builds itself from numbers; nothing a peer sends is
//! executed. Jobs ask the kernel to kill them if the agent dies
//! (`sigsleep --die-with-parent`), and an agent that stops ends its jobs.

pub mod node;
pub mod records;
pub mod resources;
pub mod settings;
pub mod spawn;
pub mod uplink;
pub mod witness;

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Result};
use formats::wire::{self, Conn, Role};
use tokio::net::TcpStream;

/// How often an agent that cannot reach its controller says so again.
pub(crate) const UNREACHABLE_REPEAT: Duration = Duration::from_secs(5);

/// How long an agent waits for a controller to accept a connection: one
/// whose host is cut off must not hold the agent back from the others.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an agent waits for a controller that accepted its connection
/// to prove it knows the secret. The kernel of a host that hangs (or of a
/// controller stopped with SIGSTOP) still accepts connections, but nothing
/// answers: without a bound, an agent would wait there until its fence
/// killed its jobs, instead of registering with the backup.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connects to the controller at `addr` and authenticates (one attempt).
pub async fn connect(addr: &str, secret: &[u8]) -> Result<Conn<TcpStream>> {
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(anyhow!("cannot reach the controller at {addr}: {e}")),
        Err(_) => {
            return Err(anyhow!(
                "cannot reach the controller at {addr}: no answer in {} s",
                CONNECT_TIMEOUT.as_secs()
            ))
        }
    };
    stream.set_nodelay(true)?;
    let mut conn = Conn::new(stream);
    match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        wire::connect(&mut conn, secret, Role::Agent),
    )
    .await
    {
        Ok(r) => r.map_err(|e| anyhow!("controller {addr}: {e}"))?,
        Err(_) => {
            return Err(anyhow!(
                "controller {addr}: accepted the connection, but no answer in {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ))
        }
    }
    Ok(conn)
}

/// Reads the shared secret, refusing a world-readable file.
pub fn secret(path: &Path) -> Result<Vec<u8>> {
    wire::read_secret(path).map_err(|e| anyhow!(e))
}
