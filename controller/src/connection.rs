//! One peer connection: the handshake, then either an agent's stream of
//! events (and records) in both directions, or a client's requests, one at
//! a time. A peer that fails the handshake, sends a malformed or oversized
//! frame or speaks out of turn is logged with its address and dropped;
//! nothing it sent reaches the cluster state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use formats::wire::{self, Conn, FromAgent, Request, Response, Role, ToAgent, WireError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::core::AgentId;
use crate::records::Sink;
use crate::replication::{self, FromBackup, FromPrimary};
use crate::server::{AgentUp, Event};

/// What every connection needs.
pub struct Shared {
    pub secret: Vec<u8>,
    pub events: mpsc::Sender<Event>,
    pub records: Sink,
    /// Fires when the server has stopped.
    pub done: CancellationToken,
    /// What the server says of this controller's place.
    pub status: Arc<replication::Status>,
}

static NEXT_AGENT: AtomicU64 = AtomicU64::new(1);

/// Serves one connection to its end. `local`: an agent hosted in this
/// process, over an in-memory pipe.
pub async fn serve<T: AsyncRead + AsyncWrite + Unpin>(
    io: T,
    peer: String,
    local: bool,
    shared: Arc<Shared>,
) {
    let mut conn = Conn::new(io);
    let role = match wire::accept(&mut conn, &shared.secret).await {
        Ok(r) => r,
        Err(e) => {
            warn!(%peer, %e, "refused a connection");
            return;
        }
    };
    let result = match role {
        Role::Agent => agent(conn, &peer, local, &shared).await,
        Role::Client => client(conn, &shared).await,
        Role::Peer => backup(conn, &peer, &shared).await,
    };
    match result {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e) => warn!(%peer, "dropped the connection: {e}"),
    }
}

async fn agent<T: AsyncRead + AsyncWrite + Unpin>(
    mut conn: Conn<T>,
    peer: &str,
    local: bool,
    shared: &Shared,
) -> Result<(), String> {
    let first = tokio::time::timeout(wire::HANDSHAKE_TIMEOUT, conn.recv::<FromAgent>())
        .await
        .map_err(|_| "no registration".to_string())?
        .map_err(|e| e.to_string())?;
    let FromAgent::Register {
        host,
        nodes,
        cpus,
        memory_mb,
        jobs,
        records,
        mark,
        bound,
    } = first
    else {
        return Err("an agent spoke before registering".into());
    };
    let agent: AgentId = NEXT_AGENT.fetch_add(1, Ordering::Relaxed);
    let (link, mut orders) = mpsc::unbounded_channel();
    let (reply, answer) = oneshot::channel();
    shared
        .events
        .send(Event::AgentUp(Box::new(AgentUp {
            agent,
            host: host.clone(),
            nodes,
            cpus,
            memory_mb,
            local,
            jobs,
            records,
            mark,
            bound,
            link,
            reply,
        })))
        .await
        .map_err(|_| "the controller is stopping".to_string())?;
    // The answer may wait (a vote, while a backup takes over): an agent
    // that leaves meanwhile drops it, and its vote no longer counts.
    let answer = tokio::select! {
        a = answer => a,
        r = conn.recv::<FromAgent>() => return match r {
            Err(WireError::Closed) => Ok(()),
            Err(e) => Err(e.to_string()),
            Ok(_) => Err(format!("agent {host} spoke before it was registered")),
        },
    };
    let settings = match answer {
        Ok(Ok(s)) => s,
        Ok(Err(ToAgent::Elsewhere(primary))) => {
            let _ = conn.send(&ToAgent::Elsewhere(primary.clone())).await;
            debug!(%peer, %host, %primary, "agent sent elsewhere");
            return Ok(());
        }
        Ok(Err(refusal)) => {
            let why = match &refusal {
                ToAgent::Rejected(why) => why.clone(),
                other => format!("{other:?}"),
            };
            let _ = conn.send(&refusal).await;
            return Err(format!("refused agent {host}: {why}"));
        }
        Err(_) => return Err("the controller is stopping".into()),
    };
    if let Err(e) = conn.send(&ToAgent::Registered(settings)).await {
        let why = e.to_string();
        let _ = shared
            .events
            .send(Event::AgentGone {
                agent,
                why: why.clone(),
            })
            .await;
        return Err(format!("agent {host}: {why}"));
    }
    info!(%peer, %host, agent, "agent registered");

    let why = loop {
        tokio::select! {
            msg = conn.recv::<FromAgent>() => match msg {
                Ok(FromAgent::Records(frames)) => {
                    // The server checks that they are records of jobs this
                    // agent ran before they reach the record file.
                    if shared.events.send(Event::Records { agent, frames }).await.is_err() {
                        break "the controller stopped".into();
                    }
                }
                Ok(FromAgent::Register { .. }) => break "registered twice".into(),
                Ok(msg) => {
                    let at = std::time::Instant::now();
                    if shared.events.send(Event::FromAgent { agent, msg, at }).await.is_err() {
                        break "the controller stopped".into();
                    }
                }
                Err(WireError::Closed) => break "disconnected".into(),
                Err(e) => break e.to_string(),
            },
            order = orders.recv() => match order {
                // A pass's orders arrive together: one write for all of
                // them, so the agent acts on the whole turn at once instead
                // of waking once per job.
                Some(msg) => {
                    if let Err(e) = send_batch(&mut conn, msg, &mut orders).await {
                        break e.to_string();
                    }
                }
                // The server dropped the link: it considers the agent gone.
                None => break "dropped by the controller".into(),
            },
            () = shared.done.cancelled() => break "the controller stopped".into(),
        }
    };
    let _ = shared
        .events
        .send(Event::AgentGone {
            agent,
            why: why.clone(),
        })
        .await;
    if why == "disconnected" || why == "the controller stopped" {
        Ok(())
    } else {
        Err(format!("agent {host}: {why}"))
    }
}

async fn client<T: AsyncRead + AsyncWrite + Unpin>(
    mut conn: Conn<T>,
    shared: &Shared,
) -> Result<(), String> {
    loop {
        let req = tokio::select! {
            r = conn.recv::<Request>() => match r {
                Ok(r) => r,
                Err(WireError::Closed) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            },
            () = shared.done.cancelled() => return Ok(()),
        };
        let resp = match req {
            // Read here, not in the server loop, which must not wait on a
            // file; the sink reads after every record the server handed
            // it, so a job the client saw end has its record in the read.
            // A backup's record file may be a copy under way: records come
            // from the controller that leads.
            Request::Records(_) if !shared.status.leads.load(Ordering::Relaxed) => {
                Response::NotPrimary(String::new())
            }
            Request::Records(ids) => match shared.records.read(ids).await {
                Ok(frames) => Response::Records(frames),
                Err(e) => Response::Error(format!("cannot read the record file: {e}")),
            },
            req => {
                let (reply, answer) = oneshot::channel();
                if shared
                    .events
                    .send(Event::Request { req, reply })
                    .await
                    .is_err()
                {
                    Response::Error("the controller is stopping".into())
                } else {
                    // A request may wait long (a submission past
                    // max_jobs). A client that leaves meanwhile drops it:
                    // the answer's receiver goes, and the server sees that
                    // nobody waits for it any more.
                    tokio::select! {
                        a = answer => a.unwrap_or_else(|_| {
                            Response::Error("the controller is stopping".into())
                        }),
                        r = conn.recv::<Request>() => return match r {
                            Err(WireError::Closed) => Ok(()),
                            Err(e) => Err(e.to_string()),
                            Ok(_) => Err("a second request before the answer to the first".into()),
                        },
                    }
                }
            }
        };
        conn.send(&resp).await.map_err(|e| e.to_string())?;
    }
}

/// A backup controller: the state and the journal to it, its
/// confirmations back.
async fn backup<T: AsyncRead + AsyncWrite + Unpin>(
    mut conn: Conn<T>,
    peer: &str,
    shared: &Shared,
) -> Result<(), String> {
    let first = tokio::time::timeout(wire::HANDSHAKE_TIMEOUT, conn.recv::<FromBackup>())
        .await
        .map_err(|_| "no hello from the backup".to_string())?
        .map_err(|e| e.to_string())?;
    let FromBackup::Hello {
        address,
        held,
        cluster,
    } = first
    else {
        return Err("a backup spoke before saying hello".into());
    };
    let id = replication::next_id();
    let (link, mut out) = mpsc::unbounded_channel::<FromPrimary>();
    shared
        .events
        .send(Event::BackupUp {
            id,
            address: address.clone(),
            held,
            cluster,
            link,
        })
        .await
        .map_err(|_| "the controller is stopping".to_string())?;
    debug!(%peer, backup = %address, "a backup connected");
    let why = loop {
        tokio::select! {
            msg = conn.recv::<FromBackup>() => match msg {
                Ok(FromBackup::Ack(seq)) => {
                    if shared.events.send(Event::BackupAck { id, seq }).await.is_err() {
                        break "the controller stopped".to_string();
                    }
                }
                Ok(FromBackup::Hello { .. }) => break "said hello twice".into(),
                Err(WireError::Closed) => break "disconnected".into(),
                Err(e) => break e.to_string(),
            },
            msg = out.recv() => match msg {
                Some(msg) => {
                    if let Err(e) = send_batch(&mut conn, msg, &mut out).await {
                        break e.to_string();
                    }
                }
                None => break "let go by the controller".into(),
            },
            () = shared.done.cancelled() => break "the controller stopped".into(),
        }
    };
    let _ = shared
        .events
        .send(Event::BackupGone {
            id,
            why: why.clone(),
        })
        .await;
    match why.as_str() {
        // Refused (this controller does not lead) or let go (it lagged,
        // which the server said): nothing more to say.
        "let go by the controller" | "disconnected" => Ok(()),
        _ => Err(format!("backup {address}: {why}")),
    }
}

/// Writes `first` and whatever else already waits in `rest`, then flushes
/// once: one write for a batch.
async fn send_batch<T: AsyncRead + AsyncWrite + Unpin, M: serde::Serialize>(
    conn: &mut Conn<T>,
    first: M,
    rest: &mut mpsc::UnboundedReceiver<M>,
) -> Result<(), WireError> {
    conn.feed(&first).await?;
    while let Ok(msg) = rest.try_recv() {
        conn.feed(&msg).await?;
    }
    conn.flush().await
}
