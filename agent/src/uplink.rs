//! The agent's connection to the controller: registration, then commands
//! routed to node tasks and their events (and finished records) sent back,
//! with a heartbeat. Owns the job → node map.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use formats::wire::{Conn, Exit, FromAgent, ToAgent, WireError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::node::{self, NodeCmd, NodeContext, NodeHandle};
use crate::records::Spool;
use crate::spawn::Launcher;

/// What an agent hosts and where its jobs write.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub host: String,
    /// Node names, expanded.
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub memory_mb: u64,
    pub sigsleep: PathBuf,
    /// The record file sigsleep appends to: the controller's own for an
    /// agent it hosts, a local spool file (streamed to the controller)
    /// otherwise.
    pub log: PathBuf,
}

/// Runs an agent over an authenticated connection until the controller
/// tells it to stop, the connection ends, or `shutdown` fires. Every job
/// is ended before this returns.
pub async fn serve<T: AsyncRead + AsyncWrite + Unpin>(
    mut conn: Conn<T>,
    spec: AgentSpec,
    shutdown: CancellationToken,
) -> Result<()> {
    conn.send(&FromAgent::Register {
        host: spec.host.clone(),
        nodes: formats::nodeset::fold(spec.nodes.iter().map(String::as_str)),
        cpus: spec.cpus,
        memory_mb: spec.memory_mb,
    })
    .await
    .context("cannot register")?;
    let settings = match conn
        .recv::<ToAgent>()
        .await
        .context("no answer to registration")?
    {
        ToAgent::Registered(s) => s,
        ToAgent::Rejected(why) => bail!("the controller refused this agent: {why}"),
        other => bail!("the controller answered registration with {other:?}"),
    };
    info!(
        host = %spec.host,
        nodes = spec.nodes.len(),
        mode = ?settings.suspend_mode,
        "registered"
    );
    let mut spool = if settings.stream_records {
        Some(Spool::open(&spec.log)?)
    } else {
        None
    };

    // Node tasks send events here; this task is the only receiver.
    let (events_tx, mut events) = mpsc::channel::<FromAgent>(4096);
    let ctx = Arc::new(NodeContext {
        launcher: Launcher::global().context("cannot start the job launcher")?,
        sigsleep: spec.sigsleep.clone(),
        log: spec.log.clone(),
        settings: settings.clone(),
        events: events_tx,
    });
    let mut nodes: HashMap<String, NodeHandle> = HashMap::with_capacity(spec.nodes.len());
    let mut tasks = Vec::with_capacity(spec.nodes.len());
    for name in &spec.nodes {
        let (handle, task) = node::start(name.clone(), Arc::clone(&ctx));
        nodes.insert(name.clone(), handle);
        tasks.push(task);
    }
    // Only node tasks hold senders now, so `events` ends when they do.
    drop(ctx);
    let mut job_node: HashMap<u64, String> = HashMap::new();
    let mut heartbeat = tokio::time::interval(Duration::from_millis(settings.heartbeat_ms.max(1)));

    let outcome: Result<()> = loop {
        tokio::select! {
            () = shutdown.cancelled() => break Ok(()),
            msg = conn.recv::<ToAgent>() => match msg {
                Ok(ToAgent::Start(s)) => {
                    let Some(handle) = nodes.get(&s.node) else {
                        warn!(job = s.job, node = %s.node, "start on a node this agent does not host");
                        if let Err(e) = conn.send(&FromAgent::Ended { job: s.job, exit: Exit::SpawnFailed }).await {
                            break Err(e.into());
                        }
                        continue;
                    };
                    job_node.insert(s.job, s.node.clone());
                    let _ = handle.send(NodeCmd::Start(s));
                }
                Ok(ToAgent::Suspend(id)) => route(&nodes, &job_node, id, NodeCmd::Suspend(id)),
                Ok(ToAgent::Resume(id)) => route(&nodes, &job_node, id, NodeCmd::Resume(id)),
                Ok(ToAgent::Cancel(id)) => route(&nodes, &job_node, id, NodeCmd::Cancel(id)),
                Ok(ToAgent::Shutdown) => break Ok(()),
                Ok(other) => break Err(anyhow!("the controller sent {other:?} out of turn")),
                Err(WireError::Closed) => break Err(anyhow!("the controller closed the connection")),
                Err(e) => break Err(anyhow!("connection to the controller: {e}")),
            },
            Some(ev) = events.recv() => {
                if let Err(e) = forward(&mut conn, &mut spool, &mut job_node, ev).await {
                    break Err(e);
                }
            }
            _ = heartbeat.tick() => {
                let running = job_node.len() as u32;
                if let Err(e) = conn.send(&FromAgent::Heartbeat { running }).await {
                    break Err(e.into());
                }
            }
        }
    };

    // Dropping the handles asks every node to end its jobs; keep reporting
    // their ends while the connection lasts.
    drop(nodes);
    let mut connected = outcome.is_ok();
    while let Some(ev) = events.recv().await {
        if connected
            && forward(&mut conn, &mut spool, &mut job_node, ev)
                .await
                .is_err()
        {
            connected = false;
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    outcome
}

fn route(
    nodes: &HashMap<String, NodeHandle>,
    job_node: &HashMap<u64, String>,
    job: u64,
    cmd: NodeCmd,
) {
    match job_node.get(&job).and_then(|n| nodes.get(n)) {
        Some(h) => {
            let _ = h.send(cmd);
        }
        // Already ended: the controller learns it from the Ended event.
        None => tracing::debug!(job, ?cmd, "no such job here"),
    }
}

/// Sends a node's event on, with the job's record first when it ended.
async fn forward<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<T>,
    spool: &mut Option<Spool>,
    job_node: &mut HashMap<u64, String>,
    ev: FromAgent,
) -> Result<()> {
    if let FromAgent::Ended { job, .. } = &ev {
        job_node.remove(job);
        if let Some(spool) = spool {
            let frames = spool.read_new()?;
            if !frames.is_empty() {
                conn.send(&FromAgent::Records(frames)).await?;
            }
        }
    }
    conn.send(&ev).await?;
    Ok(())
}
