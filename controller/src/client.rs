//! The client side: connect to a running controller, authenticate, send
//! one request, return its answer.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use formats::wire::{self, Conn, Request, Response, Role};
use tokio::net::TcpStream;

use crate::config::Cluster;

/// Where a client finds the controller: `--addr` (one address, or a
/// comma-separated list), else the config's `[controller] hosts`, else the
/// address the controller wrote into its state directory, else the
/// config's `listen`.
pub fn address(config: &Cluster, flag: Option<&str>) -> String {
    if let Some(a) = flag {
        return a.to_string();
    }
    if !config.controllers.is_empty() {
        return config.controllers.join(",");
    }
    std::fs::read_to_string(config.state_dir.join(crate::ADDRESS_FILE))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| config.listen.clone())
}

pub fn secret(config: &Cluster, flag: Option<&Path>) -> Result<Vec<u8>> {
    let path = flag.unwrap_or(&config.secret_file);
    // A missing file most likely means no controller has started with
    // this config yet (it creates the secret); any other problem with the
    // file (readable by everyone, empty) is said as it is.
    if !path.exists() {
        anyhow::bail!(
            "no secret file {} for {}: is the controller running? (it creates the secret on \
             first start; or give --secret-file)",
            path.display(),
            config.source.display()
        );
    }
    agent::secret(path)
}

/// An authenticated client connection, for many requests in a row, to
/// whichever controller of a list acts: a backup's answer names its
/// primary, and the session moves there.
pub struct Session {
    addr: String,
    conn: Conn<TcpStream>,
    secret: Vec<u8>,
}

async fn open_one(addr: &str, secret: &[u8]) -> Result<Conn<TcpStream>> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot reach the controller at {addr}"))?;
    stream.set_nodelay(true)?;
    let mut conn = Conn::new(stream);
    wire::connect(&mut conn, secret, Role::Client)
        .await
        .map_err(|e| anyhow!("controller {addr}: {e}"))?;
    Ok(conn)
}

impl Session {
    /// Connects to the first controller of `addrs` (comma-separated) that
    /// answers.
    pub async fn open(addrs: &str, secret: &[u8]) -> Result<Session> {
        let mut failed = None;
        for addr in addrs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match open_one(addr, secret).await {
                Ok(conn) => {
                    return Ok(Session {
                        addr: addr.to_string(),
                        conn,
                        secret: secret.to_vec(),
                    })
                }
                Err(e) => failed = Some(e),
            }
        }
        Err(failed.unwrap_or_else(|| anyhow!("no controller address given")))
    }

    /// The address of the controller this session talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub async fn call(&mut self, req: &Request) -> Result<Response> {
        let resp = self.call_here(req).await?;
        match resp {
            // A backup acted on nothing: the request goes to its primary.
            Response::NotPrimary(primary) if !primary.is_empty() && primary != self.addr => {
                self.conn = open_one(&primary, &self.secret).await?;
                self.addr = primary;
                self.call_here(req).await
            }
            resp => Ok(resp),
        }
    }

    async fn call_here(&mut self, req: &Request) -> Result<Response> {
        let addr = &self.addr;
        self.conn
            .send(req)
            .await
            .map_err(|e| anyhow!("controller {addr}: {e}"))?;
        self.conn
            .recv::<Response>()
            .await
            .map_err(|e| anyhow!("controller {addr}: {e}"))
    }
}

/// One request, one response.
pub async fn request(addr: &str, secret: &[u8], req: &Request) -> Result<Response> {
    Session::open(addr, secret).await?.call(req).await
}
