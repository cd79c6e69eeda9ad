//! The client side: connect to a running controller, authenticate, send
//! one request, return its answer.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use formats::wire::{self, Conn, Request, Response, Role};
use tokio::net::TcpStream;

use crate::config::Cluster;

/// Where a client finds the controller: `--addr`, else the address the
/// controller wrote into its state directory, else the config's `listen`.
pub fn address(config: &Cluster, flag: Option<&str>) -> String {
    if let Some(a) = flag {
        return a.to_string();
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

/// An authenticated client connection, for many requests in a row.
pub struct Session {
    addr: String,
    conn: Conn<TcpStream>,
}

impl Session {
    pub async fn open(addr: &str, secret: &[u8]) -> Result<Session> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot reach the controller at {addr}"))?;
        stream.set_nodelay(true)?;
        let mut conn = Conn::new(stream);
        wire::connect(&mut conn, secret, Role::Client)
            .await
            .map_err(|e| anyhow!("controller {addr}: {e}"))?;
        Ok(Session {
            addr: addr.to_string(),
            conn,
        })
    }

    pub async fn call(&mut self, req: &Request) -> Result<Response> {
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
