//! controller: the central daemon that owns the cluster's truth, and the
//! client commands that talk to it.
//!
//! # How it works
//!
//! `controller serve` loads the [`config`], then runs:
//!
//! - the [`server`] task, sole owner of the scheduling [`core`](mod@core)'s
//!   [`Cluster`](core::Cluster) (nodes, jobs, queue, agents). Everything
//!   that changes it arrives as an event on one channel and becomes one of
//!   the core's transitions; the core's scheduler runs a pass when one is
//!   due (at most every `schedule_interval_s`), asking the
//!   [`policy`](mod@policy) (pure code over a snapshot) which jobs to start
//!   where (cores, memory, and the generic resources of [`gres`]). The
//!   virtual-time twin ([`sim`]) drives the same core and scheduler with
//!   an event queue instead of a clock;
//! - the [`listener`], one task per [`connection`]: each authenticates its
//!   peer (HMAC over fresh nonces, [`formats::wire`], every frame after
//!   that sealed with its own tag), then relays an agent's events or a
//!   client's requests to the server, and the server's orders back;
//! - the [`records`] sink, sole writer of the record file, for records
//!   streamed by agents on other hosts;
//! - the [`journal`], written by the server before it answers a client,
//!   from which a restarted controller recovers its jobs (a disk that
//!   keeps failing under it or the record file is logged once a minute,
//!   `complaints`);
//! - with `[controller] hosts`, [`replication`]: the primary streams its
//!   journal to its backups, which keep a copy of its tables and act on
//!   nothing;
//! - with `--metrics-listen`, the [`metrics`] endpoint, which asks the
//!   server for its counters as a client would;
//! - with `[agents] local = true`, the agents themselves, in this process,
//!   connected through in-memory pipes: one command, one process, a whole
//!   cluster.
//!
//! The client subcommands ([`cli`]) go through the `client` crate, as every
//! front end does: one request each, the answer printed as a table or
//! JSON (`client::tables`). `serve --detach` forks before any
//! thread exists and returns once the controller listens ([`detach`]).

pub mod batsim;
pub mod cli;
mod complaints;
pub mod config;
pub mod connection;
pub mod core;
pub mod deploy;
pub mod detach;
pub mod folding;
pub mod gres;
pub mod journal;
pub mod listener;
pub mod metrics;
pub mod policy;
pub mod records;
pub mod replication;
pub mod server;
pub mod sim;

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use agent::uplink::AgentSpec;
use anyhow::{anyhow, bail, Context, Result};
use formats::wire::{self, Conn, Role};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::config::Cluster as Config;
use crate::policy::Policy;

/// Name of the file in the state directory that holds the address the
/// controller listens on (the real one, when the config asks for port 0).
pub const ADDRESS_FILE: &str = "address";
/// Name of the file in the state directory that holds the address of the
/// metrics endpoint, when there is one.
pub const METRICS_ADDRESS_FILE: &str = "metrics_address";

/// Reads the secret, creating it (random, mode 0600) if the file does not
/// exist yet: a fresh cluster needs no setup step.
pub fn ensure_secret(path: &Path) -> Result<Vec<u8>> {
    if !path.exists() {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut bytes = [0u8; 32];
        getrandom_fill(&mut bytes)?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("cannot create secret file {}", path.display()))?;
        writeln!(f, "{hex}").with_context(|| format!("cannot write {}", path.display()))?;
        info!(file = %path.display(), "created a new shared secret");
    }
    client::read_secret(path)
}

fn getrandom_fill(buf: &mut [u8]) -> Result<()> {
    let mut f = std::fs::File::open("/dev/urandom").context("cannot open /dev/urandom")?;
    std::io::Read::read_exact(&mut f, buf).context("cannot read /dev/urandom")
}

/// The policy a config asks for (its name was checked when the config was
/// read; an unknown one falls back to EASY), for the emulation
/// (`realtime`) or the twin.
pub fn policy(config: &Config, realtime: bool) -> Box<dyn Policy> {
    let settings = policy::Settings {
        preemption: config.preemption,
        batsim: config.batsim.clone(),
        realtime,
    };
    match policy::find(&config.policy) {
        Some(p) => (p.make)(&settings),
        None => Box::new(policy::Standard {
            base: policy::Base::Easy,
            preemption: config.preemption,
        }),
    }
}

/// Held by a serving controller in its state directory.
pub const LOCK_FILE: &str = "lock";
/// Held by a serving controller in its record directory. Hidden: readers
/// of the directory take `*.rec` files only.
pub const RECORD_LOCK_FILE: &str = ".lock";

/// Takes `<state_dir>/lock` (an advisory lock the kernel drops when the
/// process ends, however it ends) for as long as the returned file lives.
/// Two controllers on one state directory would append to one journal and
/// overwrite each other's address file.
fn lock_state_dir(dir: &Path) -> Result<std::fs::File> {
    lock_dir(
        &dir.join(LOCK_FILE),
        &std::process::id().to_string(),
        |holder| {
            format!(
                "state directory {} is in use by another controller (pid {holder}): stop it, or \
             give this one its own state_dir",
                dir.display()
            )
        },
    )
}

/// Takes `<record_dir>/.lock` as [`lock_state_dir`] does: two clusters
/// writing one record file would mix their jobs' records (and their job
/// ids, which both number from 1).
fn lock_record_dir(dir: &Path, state_dir: &Path) -> Result<std::fs::File> {
    let me = format!(
        "{} (state directory {})",
        std::process::id(),
        state_dir.display()
    );
    lock_dir(&dir.join(RECORD_LOCK_FILE), &me, |holder| {
        format!(
            "record directory {} is in use by another controller (pid {holder}): two clusters \
             must not share a record file; give this one its own record_dir, or state_dir \
             (records go to <state_dir>/records by default)",
            dir.display()
        )
    })
}

/// Locks `path` for this process, writing `me` into it; when another
/// process holds it, fails with `refusal(what it wrote)`.
fn lock_dir(path: &Path, me: &str, refusal: impl FnOnce(&str) -> String) -> Result<std::fs::File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            bail!(refusal(holder.trim()));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|()| writeln!(file, "{me}"))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(file)
}

/// A pass makes buffers as long as the widest job it starts (megabytes for
/// one of 80,000 nodes), freed when the job ends. glibc serves each such
/// buffer from fresh pages of a mapping of its own and unmaps them when
/// freed, so every wide start paid again for faulting in and zeroing its
/// pages: a third of what a job of 80,000 nodes added to its start
/// (BENCHMARKS.md, "A job's start, by its size"). Kept in the process
/// instead, freed memory serves the next wide job. Set by whatever runs
/// passes: the controller, in its own process or inside another's (an
/// emulated replay), and the twin.
#[doc(hidden)] // public for the benchmarks, which run passes as the controller does
pub fn keep_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: mallopt only sets the allocator's parameters, under its own
    // lock.
    ONCE.call_once(|| unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    });
}

/// Runs the controller until `shutdown` fires or a client asks it to stop.
pub async fn serve(config: Config, shutdown: CancellationToken) -> Result<()> {
    serve_then(config, shutdown, || {}).await
}

/// [`serve`], calling `ready` once the controller listens and its address
/// file is written: from then on a client finds it.
pub async fn serve_then(
    config: Config,
    shutdown: CancellationToken,
    ready: impl FnOnce(),
) -> Result<()> {
    keep_freed_memory();
    let config = Arc::new(config);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&config.state_dir)
        .with_context(|| {
            format!(
                "cannot create state directory {}",
                config.state_dir.display()
            )
        })?;
    let _lock = lock_state_dir(&config.state_dir)?;
    let index = config.controller_index()?;
    let listener = TcpListener::bind(&config.listen).await.with_context(|| {
        format!(
            "cannot listen on {} (listen in [controller] of {}, or serve --listen)",
            config.listen,
            config.source.display()
        )
    })?;
    let secret = ensure_secret(&config.secret_file)?;
    let record_path = records::record_file(&config.record_dir)?;
    let _record_lock = lock_record_dir(&config.record_dir, &config.state_dir)?;
    let addr = listener.local_addr()?;
    std::fs::write(config.state_dir.join(ADDRESS_FILE), addr.to_string())
        .with_context(|| format!("cannot write to {}", config.state_dir.display()))?;
    info!(
        %addr,
        nodes = config.nodes.len(),
        cores = config.total_cores(),
        policy = ?config.policy,
        records = %record_path.display(),
        "controller listening"
    );

    let written = records::written(&record_path)?;
    let (sink, sink_thread) = records::start(&record_path)?;
    let (events_tx, events_rx) = mpsc::channel(4096);
    let done = CancellationToken::new();
    let status = Arc::new(replication::Status::default());
    let shared = Arc::new(connection::Shared {
        secret: secret.clone(),
        events: events_tx,
        records: sink.clone(),
        done: done.clone(),
        status: Arc::clone(&status),
    });
    let (journal, recovered) =
        journal::Journal::open(&config.state_dir, config.journal_compact_bytes)?;
    let clock = core::Clock::start();
    let cluster = core::Cluster::restore(Arc::clone(&config), recovered, clock.now());
    let place = match index {
        None => server::Place::Alone,
        Some(i) => {
            // Every controller of the list starts as a backup: it follows
            // whichever of the others leads, or stands as a candidate
            // (docs/faults.md).
            let others: Vec<String> = config
                .controllers
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, a)| a.clone())
                .collect();
            tokio::spawn(replication::follow(
                others,
                config.listen.clone(),
                secret.clone(),
                shared.events.clone(),
                Arc::clone(&status),
                done.clone(),
            ));
            server::Place::Backup(server::Follower::new(
                String::new(),
                &config.state_dir,
                config.takeover_timeout,
                i == 0,
            ))
        }
    };
    let server = server::Server::new(
        cluster,
        clock,
        journal,
        policy(&config, true),
        events_rx,
        done.clone(),
        sink,
        written,
    )
    .placed(config.listen.clone(), place, record_path.clone(), status);
    let server_task = tokio::spawn(server.run(shutdown.clone()));
    let tasks = TaskTracker::new();
    if let Some(at) = &config.metrics_listen {
        let metrics = TcpListener::bind(at)
            .await
            .with_context(|| format!("cannot listen for metrics on {at}"))?;
        let maddr = metrics.local_addr()?;
        std::fs::write(
            config.state_dir.join(METRICS_ADDRESS_FILE),
            maddr.to_string(),
        )
        .with_context(|| format!("cannot write to {}", config.state_dir.display()))?;
        info!(addr = %maddr, "metrics at http://{maddr}/metrics");
        tasks.spawn(metrics::serve(metrics, shared.events.clone(), done.clone()));
    }
    tasks.spawn(listener::run(
        listener,
        Arc::clone(&shared),
        tasks.clone(),
        done.clone(),
    ));

    ready();
    if config.local_agents {
        for host in &config.hosts {
            let spec = AgentSpec {
                host: host.name.clone(),
                nodes: host
                    .nodes
                    .iter()
                    .map(|&n| config.nodes[n].name.clone())
                    .collect(),
                cpus: host.nodes.first().map_or(0, |&n| config.nodes[n].cpus),
                memory_mb: host.nodes.first().map_or(0, |&n| config.nodes[n].memory_mb),
                sigsleep: config.agent.sigsleep.clone(),
                log: record_path.clone(),
            };
            start_local_agent(spec, &secret, Arc::clone(&shared), &tasks, done.clone());
        }
    }

    let stopped = server_task.await;
    done.cancel();
    tasks.close();
    tasks.wait().await;
    drop(shared);
    // Every Sink is gone now: the thread finishes its queue and ends.
    let _ = tokio::task::spawn_blocking(move || sink_thread.join()).await;
    stopped.map_err(|e| anyhow!("the server task failed: {e}"))?;
    Ok(())
}

/// An agent in this process, talking to the server through an in-memory
/// pipe with the same protocol as a remote one.
fn start_local_agent(
    spec: AgentSpec,
    secret: &[u8],
    shared: Arc<connection::Shared>,
    tasks: &TaskTracker,
    done: CancellationToken,
) {
    let (server_end, agent_end) = tokio::io::duplex(1 << 16);
    let peer = format!("local:{}", spec.host);
    tasks.spawn(connection::serve(server_end, peer, true, shared));
    let secret = secret.to_vec();
    tasks.spawn(async move {
        let host = spec.host.clone();
        let mut conn = Conn::new(agent_end);
        if let Err(e) = wire::connect(&mut conn, &secret, Role::Agent).await {
            warn!(%host, %e, "local agent could not connect");
            return;
        }
        if let Err(e) = agent::uplink::serve(conn, spec, done).await {
            warn!(%host, "local agent stopped: {e:#}");
        }
    });
}
