//! A connection to the cluster: to whichever controller of the list
//! leads, authenticated, for one request or many in a row.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use formats::wire::{self, Conn, Request, Response, Role};
use tokio::net::TcpStream;
use tracing::warn;

/// How long a client looks for a controller that leads before it gives
/// up: a takeover takes seconds (`takeover_timeout_s`, 3 by default, then
/// the agents' votes), and no answer during one is fatal.
const PATIENCE: Duration = Duration::from_secs(60);

/// How long a controller that accepted a connection may take to answer
/// its handshake, or a question a client asks to find the leader.
const HANDSHAKE: Duration = Duration::from_secs(2);

/// An authenticated client connection, for many requests in a row, to
/// whichever controller of a list leads. A backup's answer names its
/// primary, and the session moves there; while none leads (a takeover
/// under way), or after a lost connection, it goes round the list (for up
/// to [`PATIENCE`]) and the request is asked again, which is safe: a
/// submission carries its key ([`formats::wire::submit_key`]). Only the
/// patience running out is fatal, and the error says what each controller
/// answered.
pub struct Session {
    addrs: Vec<String>,
    /// The one connected, in `addrs`.
    at: usize,
    conn: Conn<TcpStream>,
    secret: Vec<u8>,
    /// What each controller last answered while none led.
    heard: std::collections::BTreeMap<String, String>,
}

/// Why a controller could not be reached, and whether nothing listens
/// there at all (no controller process: no election can be under way).
struct Unreached {
    refused: bool,
    error: anyhow::Error,
}

/// How much of the handshake a connection waits for before it is used.
#[derive(Clone, Copy)]
enum Handshake {
    /// All of it: the controller has proved it knows the secret.
    Whole,
    /// Up to the client's proof, sent ([`wire::connect_early`]): the
    /// controller's is read with the first answer.
    Early,
}

async fn open_one(addr: &str, secret: &[u8]) -> Result<Conn<TcpStream>> {
    open_one_why(addr, secret, Handshake::Whole)
        .await
        .map_err(|u| u.error)
}

async fn open_one_why(
    addr: &str,
    secret: &[u8],
    handshake: Handshake,
) -> Result<Conn<TcpStream>, Unreached> {
    let other = |error| Unreached {
        refused: false,
        error,
    };
    // A controller whose host is cut off must not hold the client back
    // from the others.
    let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .map_err(|_| {
            other(anyhow!(
                "cannot reach the controller at {addr}: no answer in 2 s"
            ))
        })?
        .map_err(|e| match e.kind() {
            // The usual case: no controller was started, or it stopped.
            std::io::ErrorKind::ConnectionRefused => Unreached {
                refused: true,
                error: anyhow!(
                    "no controller listens at {addr} (connection refused): start one with \
                     `controller serve --config FILE` (`--detach` to have it in the background)"
                ),
            },
            _ => other(anyhow!("cannot reach the controller at {addr}: {e}")),
        })?;
    stream.set_nodelay(true).map_err(|e| other(e.into()))?;
    let mut conn = Conn::new(stream);
    // The kernel of a host that hangs still accepts the connection;
    // nothing answers the handshake.
    let shake = async {
        match handshake {
            Handshake::Whole => wire::connect(&mut conn, secret, Role::Client).await,
            Handshake::Early => wire::connect_early(&mut conn, secret, Role::Client).await,
        }
    };
    tokio::time::timeout(HANDSHAKE, shake)
        .await
        .map_err(|_| {
            other(anyhow!(
                "controller {addr}: accepted the connection, but no answer in {} s",
                HANDSHAKE.as_secs()
            ))
        })?
        .map_err(|e| other(anyhow!("controller {addr}: {e}")))?;
    Ok(conn)
}

impl Session {
    /// Connects to the first controller of `addrs` (comma-separated) that
    /// answers. With several, and one of them there but not answering (a
    /// host hung or cut off, maybe while another takes over), round the
    /// list for up to [`PATIENCE`]; when nothing listens at any of them,
    /// at once.
    pub async fn open(addrs: &str, secret: &[u8]) -> Result<Session> {
        let addrs: Vec<String> = addrs
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect();
        let deadline = Instant::now() + PATIENCE;
        let mut heard = std::collections::BTreeMap::new();
        loop {
            let mut failed = None;
            let mut all_refused = true;
            for (at, addr) in addrs.iter().enumerate() {
                // The first connection of a session does not wait for the
                // controller's proof: the client builds its first request
                // (an sbatch reads its script) while the controller checks
                // the client's, a round trip sooner. The proof is read
                // with the first answer; one that fails then fails that
                // call (with several controllers, the session goes round
                // the list from there, `move_on`, with whole handshakes).
                match open_one_why(addr, secret, Handshake::Early).await {
                    Ok(conn) => {
                        return Ok(Session {
                            addrs,
                            at,
                            conn,
                            secret: secret.to_vec(),
                            heard: std::collections::BTreeMap::new(),
                        })
                    }
                    Err(u) => {
                        all_refused &= u.refused;
                        heard.insert(addr.clone(), format!("{:#}", u.error));
                        failed = Some(u.error);
                    }
                }
            }
            let Some(failed) = failed else {
                bail!("no controller address given");
            };
            if addrs.len() < 2 || all_refused {
                return Err(failed);
            }
            if Instant::now() >= deadline {
                bail!(no_leader(&addrs, &heard));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The address of the controller this session talks to.
    pub fn addr(&self) -> &str {
        &self.addrs[self.at]
    }

    pub async fn call(&mut self, req: &Request) -> Result<Response> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let answer = if self.addrs.len() > 1 {
                match self.call_watching(req).await {
                    Answer::Here(r) => r,
                    Answer::LeaderElsewhere(hint) => {
                        warn!(
                            "controller {} does not answer and {} leads: asking it",
                            self.addrs[self.at], self.addrs[hint]
                        );
                        self.move_on(Some(hint), deadline).await?;
                        continue;
                    }
                }
            } else {
                self.call_here(req).await
            };
            match answer {
                // A backup acted on nothing: the request goes to the
                // primary it names, or round the list (to this one again,
                // with no other), until one leads.
                Ok(Response::NotPrimary(primary)) => {
                    let here = self.addrs[self.at].clone();
                    self.heard.insert(
                        here,
                        if primary.is_empty() {
                            "does not lead, and follows no primary".into()
                        } else {
                            format!("does not lead; it follows {primary}")
                        },
                    );
                    if Instant::now() >= deadline {
                        bail!(no_leader(&self.addrs, &self.heard));
                    }
                    if !self.addrs.contains(&primary) && !primary.is_empty() {
                        self.addrs.push(primary.clone());
                    }
                    let hint = self.addrs.iter().position(|a| *a == primary);
                    // Not too often round the list while none leads (a
                    // takeover under way), nor to a primary that is not one
                    // yet.
                    let pause = if hint.is_none() { 100 } else { 20 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    let hint = hint.or((self.addrs.len() == 1).then_some(0));
                    self.move_on(hint, deadline).await?;
                }
                Ok(resp) => {
                    self.heard.clear();
                    return Ok(resp);
                }
                Err(e) if self.addrs.len() > 1 => {
                    warn!("{e:#}: looking for the controller that leads");
                    self.heard
                        .insert(self.addrs[self.at].clone(), format!("{e:#}"));
                    self.move_on(None, deadline).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// With several controllers, moves to the one that leads, if the one
    /// answering follows a primary. A backup answers some requests for
    /// itself (its stats, its hosts, stopping only itself): a client with
    /// one address asked that controller, but one with the list asked the
    /// cluster.
    pub async fn to_leader(&mut self) -> Result<()> {
        if self.addrs.len() < 2 {
            return Ok(());
        }
        let s = match tokio::time::timeout(HANDSHAKE, self.call_here(&Request::Stats)).await {
            Ok(Ok(Response::Stats(s))) => s,
            Ok(Ok(_)) => return Ok(()),
            // No answer in time, or none at all: the connection may yet
            // carry that answer, which must not be read as the next one's.
            // A fresh connection (to it again, else round the list).
            _ => return self.move_on(Some(self.at), Instant::now() + PATIENCE).await,
        };
        let r = &s.replication;
        if r.role != "backup" || r.primary.is_empty() || r.primary == r.address {
            return Ok(());
        }
        if !self.addrs.contains(&r.primary) {
            self.addrs.push(r.primary.clone());
        }
        let hint = self.addrs.iter().position(|a| *a == r.primary);
        self.move_on(hint, Instant::now() + PATIENCE).await
    }

    /// Connects to `hint`, else to the next controller of the list that
    /// answers, round the list until `deadline`.
    async fn move_on(&mut self, hint: Option<usize>, deadline: Instant) -> Result<()> {
        let n = self.addrs.len();
        let mut next = hint.unwrap_or((self.at + 1) % n);
        loop {
            for _ in 0..n {
                let addr = &self.addrs[next];
                match open_one(addr, &self.secret).await {
                    Ok(conn) => {
                        self.conn = conn;
                        self.at = next;
                        return Ok(());
                    }
                    Err(e) => {
                        self.heard.insert(addr.clone(), format!("{e:#}"));
                    }
                }
                next = (next + 1) % n;
            }
            if Instant::now() >= deadline {
                bail!(no_leader(&self.addrs, &self.heard));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn call_here(&mut self, req: &Request) -> Result<Response> {
        exchange(&mut self.conn, &self.addrs[self.at], req).await
    }

    /// The call, while looking every [`WATCH`] at the other controllers
    /// of the list: a controller whose host hangs still has the
    /// connection accepted by its kernel, and would hold the answer for
    /// ever. An answer may rightly take long (a submission waiting for
    /// room), so silence alone is no reason to leave: another controller
    /// that leads is.
    async fn call_watching(&mut self, req: &Request) -> Answer {
        let others: Vec<(usize, String)> = self
            .addrs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.at)
            .map(|(i, a)| (i, a.clone()))
            .collect();
        let secret = self.secret.clone();
        let addr = self.addrs[self.at].clone();
        let call = exchange(&mut self.conn, &addr, req);
        tokio::pin!(call);
        let mut watch = tokio::time::interval_at(tokio::time::Instant::now() + WATCH, WATCH);
        loop {
            tokio::select! {
                r = &mut call => return Answer::Here(r),
                _ = watch.tick() => {
                    for (i, other) in &others {
                        if leads(other, &secret).await {
                            return Answer::LeaderElsewhere(*i);
                        }
                    }
                }
            }
        }
    }
}

/// The error of a client that found no controller leading in time: what
/// each answered last.
fn no_leader(addrs: &[String], heard: &std::collections::BTreeMap<String, String>) -> String {
    let said: Vec<String> = addrs
        .iter()
        .map(|a| match heard.get(a) {
            Some(h) if h.starts_with("does not lead") => format!("{a} {h}"),
            Some(h) => h.clone(),
            None => format!("{a} was not asked"),
        })
        .collect();
    format!(
        "no controller led within {} s: {} (a takeover needs a majority of the agent hosts; \
         `controller --addr ADDR stats` shows where each stands)",
        PATIENCE.as_secs(),
        said.join("; ")
    )
}

/// How often a client with several controllers, waiting for an answer,
/// looks at the others.
const WATCH: Duration = Duration::from_secs(1);

enum Answer {
    Here(Result<Response>),
    /// The controller asked has not answered, and this one of the list
    /// leads.
    LeaderElsewhere(usize),
}

async fn exchange(conn: &mut Conn<TcpStream>, addr: &str, req: &Request) -> Result<Response> {
    conn.send(req)
        .await
        .map_err(|e| anyhow!("controller {addr}: {e}"))?;
    conn.recv::<Response>()
        .await
        .map_err(|e| anyhow!("controller {addr}: {e}"))
}

/// Whether the controller at `addr` answers, within a second, that it
/// is the primary.
async fn leads(addr: &str, secret: &[u8]) -> bool {
    let ask = async {
        let mut conn = open_one(addr, secret).await.ok()?;
        match exchange(&mut conn, addr, &Request::Stats).await.ok()? {
            Response::Stats(s) => Some(s.replication.role == "primary"),
            _ => None,
        }
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Some(true))
    )
}

/// Whether a controller at `addr` completes the handshake now: one try,
/// no waiting for it to come (`scontrol ping`).
pub async fn answers(addr: &str, secret: &[u8]) -> bool {
    open_one(addr, secret).await.is_ok()
}

/// One request, one response.
pub async fn request(addr: &str, secret: &[u8], req: &Request) -> Result<Response> {
    Session::open(addr, secret).await?.call(req).await
}
