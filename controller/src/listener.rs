//! The accept loop: one task per connection, at most [`MAX_CONNECTIONS`]
//! at once (an excess connection is closed at once, and logged), until
//! shutdown.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::connection::{self, Shared};

/// Agents plus clients; well above what one controller serves.
pub const MAX_CONNECTIONS: usize = 4096;

pub async fn run(
    listener: TcpListener,
    shared: Arc<Shared>,
    tasks: TaskTracker,
    stop: CancellationToken,
) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (sock, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: wait, then go on.
                    warn!(%e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => return,
        };
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            warn!(peer = %addr, "too many connections; refused");
            continue;
        };
        let _ = sock.set_nodelay(true);
        debug!(peer = %addr, "connection");
        let shared = Arc::clone(&shared);
        tasks.spawn(async move {
            connection::serve(sock, addr.to_string(), false, shared).await;
            drop(permit);
        });
    }
}
