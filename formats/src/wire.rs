//! The wire protocol between the controller, its agents and its clients:
//! message types, framing, and the authenticated handshake.
//!
//! Every connection is TCP (or, for agents hosted inside the controller, an
//! in-memory pipe) carrying length-delimited frames (a 4-byte big-endian
//! length, then that many bytes, at most [`MAX_FRAME`]) of bincode
//! messages. It opens with a handshake:
//!
//! 1. server → [`Hello`]: protocol version and a fresh random nonce;
//! 2. client → [`Auth`]: its version, its role (agent or client), its own
//!    nonce, and HMAC-SHA256(secret, "clemu client" ‖ role ‖ server nonce ‖
//!    client nonce);
//! 3. server → [`Welcome`] with HMAC-SHA256(secret, "clemu server" ‖
//!    client nonce ‖ server nonce), so the client knows the server too.
//!
//! A wrong version, a wrong proof or a message out of turn ends the
//! connection before anything it sent is acted on. Nonces are fresh on both
//! sides, so a recorded handshake cannot be replayed.
//!
//! A client may send its `Auth` and go on without waiting for the
//! `Welcome`, which it checks before it reads the first answer
//! ([`connect_early`]): its first request follows a round trip sooner,
//! and the server checks the proof while the client builds that request.
//! The server acts on nothing before the `Auth` is checked either way.
//! The price: a request may reach a server that has not proved itself. A
//! process squatting a controller's address learns what the client asks
//! (never the secret), and its answer is never believed.
//!
//! Every frame after the handshake is sealed: it ends with a 16-byte tag,
//! HMAC-SHA256 (truncated) over the frame's number on its way and its
//! bytes, under a key of that way and that connection (derived from the
//! secret and both nonces). A frame altered, repeated, moved from another
//! connection or sent back to its sender fails its tag, as does the one
//! after a frame dropped, and the connection ends before its message is
//! read. (A connection cut after frames dropped looks like any close: the
//! end of a TCP stream carries no tag.)
//!
//! After the handshake an agent speaks [`FromAgent`] and hears
//! [`ToAgent`]; a client sends one [`Request`] at a time and gets one
//! [`Response`]; a backup controller speaks the controller's own
//! replication messages.

use std::fmt;
use std::io;
use std::time::Duration;

use bincode::Options;
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, Framed, LengthDelimitedCodec};

/// Version of this protocol; both ends must speak the same. 7: a backup
/// controller connects as a [`Role::Peer`], stats say which controller is
/// primary, and a backup answers requests with [`Response::NotPrimary`].
/// 9: jobs ask generic resources, and a start names the devices they get.
/// 10: a client says it has submitted its last job ([`Request::NoMoreJobs`]).
/// 11: a job's process may be started ahead of its start, held
/// ([`ToAgent::Prepare`]). 12: jobs may wait under real-time scheduling
/// ([`RunSettings::realtime`]). 13: marks name their cluster, a
/// controller that turns an agent away says where it stands
/// ([`Standing`]). 14: a job may run a program ([`Program`],
/// [`Exit::Ran`]). 15: the queue view says how a job ended
/// (`JobInfo::exit`) and what it runs (`JobInfo::program`); a program
/// carries Slurm's `--comment`. 16: jobs may wait for others to complete
/// or fail (`JobSpec::after_ok`, `after_not_ok`), as singletons, or held
/// ([`Request::Hold`], [`Request::Release`]); a pending job's limit may
/// change ([`Request::SetLimit`]). 17: a client may ask for the jobs not
/// over and those recently ended only ([`Request::Recent`]); started jobs
/// may be requeued ([`Request::Requeue`]), and say how often they were
/// (`JobInfo::restarts`); a signal may be sent to part of a job
/// ([`Request::Signal`], [`ToAgent::Signal`]); an agent reports a batch
/// script's steps ([`FromAgent::Steps`], `ProgramInfo::steps`); a
/// script takes arguments (`Program::args`). 18: a job may ask how many
/// nodes it spans (`JobSpec::nodes`); a running job's limit may change
/// ([`ToAgent::Limit`]). 19: a job may end preempted
/// ([`JobState::Preempted`]); a program's view has the cores it holds on
/// each node (`ProgramInfo::node_cpus`). 20: jobs may wait for others to
/// start (`JobSpec::after_start`), for the tasks of an array of the same
/// index (`JobSpec::after_corr`), or for any one of their dependencies
/// (`JobSpec::any_dep`); the controller tells an agent why it ends a job
/// ([`ToAgent::End`]). 21: a dependency may wait a delay past its job's
/// start (`JobSpec::delays`); a node's reason says when it was given
/// (`NodeInfo::reason_ns`). 22: a job's dependencies keep the order they
/// were asked in (`JobSpec::dep_order`). 23: a batch script may ask its
/// tasks per node (`Program::tasks_per_node`). 24: a program's view says
/// them (`ProgramInfo::tasks_per_node`). 25: and whether an array task is
/// a record of its own, or its array's only task (`ProgramInfo::own_record`,
/// `only_task`). 26: a hold says whose it is, and may hold a running job
/// ([`Request::Hold`]); a release says who asks ([`Request::Release`]).
/// 27: a start says when the controller started the job
/// (`StartJob::start_ns`), and an agent may count a job's run from its
/// process's launch instead (`RunSettings::run_from_launch`).
/// 28: every frame after the handshake is sealed with a tag ([`TAG`]);
/// stats say why the journal cannot be written
/// (`ClusterStats::journal_error`).
/// 29: stats say why records of ended jobs wait to be written
/// (`ClusterStats::records_error`).
/// 30: a batch job's limit may be its partition's, given at submission
/// (`Program::partition_limit`, `ProgramInfo::partition_limit`).
/// 31: a batch job may ask whole nodes (`Program::exclusive`), and
/// output files added to (`Program::open_append`).
/// 32: a batch job may name nodes it must have, or must not
/// (`Program::nodelist`, `Program::exclude`, and their `ProgramInfo`);
/// pending jobs' expected starts may be asked (`Request::Starts`).
/// 33: a job step says its nodes and cores, and whether it was
/// cancelled (`StepInfo::nodes`, `cpus`, `cancelled`); a signal may reach
/// one step (`Reach::Step`).
pub const PROTOCOL: u32 = 33;
/// Bytes of the tag that ends every frame after the handshake: a
/// truncated HMAC-SHA256, as RFC 4868 truncates it for IPsec.
pub const TAG: usize = 16;
/// Largest frame a server accepts from an authenticated peer (a batch of
/// records can be large).
pub const MAX_FRAME: usize = 16 << 20;
/// Largest frame before the handshake: a hello or an auth is tiny, and an
/// unauthenticated peer gets no room to make the server buffer megabytes.
pub const HANDSHAKE_FRAME: usize = 4 << 10;
/// Largest frame a client accepts from the server it authenticated (a
/// queue of hundreds of thousands of jobs).
pub const MAX_REPLY_FRAME: usize = 1 << 30;
/// Largest frame either end sends (a queue of a million jobs is about
/// 100 MiB); what the other end accepts is its own limit.
const MAX_SENT_FRAME: usize = MAX_REPLY_FRAME;
/// How long a peer has to complete the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default listen and connect address of the controller.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7817";

type Nonce = [u8; 32];
type Proof = [u8; 32];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A per-host daemon hosting virtual nodes.
    Agent,
    /// A command line client (submit, queue, ...) or a replay driver.
    Client,
    /// A backup controller, copying the primary's journal.
    Peer,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub nonce: Nonce,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Auth {
    pub protocol: u32,
    pub role: Role,
    pub nonce: Nonce,
    pub proof: Proof,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Welcome {
    pub proof: Proof,
}

mod messages;
pub use messages::*;

/// Why a connection ended or a message was refused.
#[derive(Debug)]
pub enum WireError {
    Io(io::Error),
    /// The peer hung up.
    Closed,
    /// A frame longer than this end accepts (the limit, in bytes).
    TooLarge(usize),
    /// A frame that is not a message of the expected kind.
    Malformed(String),
    /// The handshake failed: wrong secret, version or order.
    Refused(String),
    /// A frame after the handshake whose tag is wrong: altered, dropped,
    /// repeated or not from this connection's peer.
    Forged,
    /// The peer did not take part in the handshake within
    /// [`HANDSHAKE_TIMEOUT`] (a hung host, or not a clemu peer). `accepted`
    /// says which end this is: the one that accepted the connection (the
    /// peer connected and said nothing) or the one that connected (the
    /// peer accepted and did not answer).
    Timeout {
        accepted: bool,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Closed => write!(f, "connection closed"),
            WireError::TooLarge(limit) => write!(f, "frame larger than {limit} bytes"),
            WireError::Malformed(e) => write!(f, "malformed message: {e}"),
            WireError::Refused(e) => write!(f, "handshake refused: {e}"),
            WireError::Forged => write!(
                f,
                "a frame failed its tag: altered, dropped, repeated or not from this peer"
            ),
            WireError::Timeout { accepted: false } => write!(
                f,
                "accepted the connection, but no handshake answer in {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ),
            WireError::Timeout { accepted: true } => write!(
                f,
                "connected, but sent no handshake in {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ),
        }
    }
}

impl std::error::Error for WireError {}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        WireError::Io(e)
    }
}

/// Whether the codec refused a frame for its length (it says so as
/// `InvalidData`).
fn is_frame_size(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidData && e.to_string().contains("frame size")
}

/// Length-delimited frames with a limit each way: what this end accepts
/// (tiny until the peer is authenticated) and what it sends (a reply to
/// a client may be much larger than anything the server accepts).
struct Frames {
    inbound: LengthDelimitedCodec,
    outbound: LengthDelimitedCodec,
}

impl Decoder for Frames {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        self.inbound.decode(src)
    }
}

impl Encoder<Bytes> for Frames {
    type Error = io::Error;

    fn encode(&mut self, frame: Bytes, dst: &mut BytesMut) -> io::Result<()> {
        self.outbound.encode(frame, dst)
    }
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
}

/// A message from one frame's bytes: exactly one message, nothing after it.
/// A message cannot be longer than its frame: the limit stops a forged
/// length inside it from allocating more than the frame holds.
pub fn decode<M: DeserializeOwned>(frame: &[u8]) -> Result<M, WireError> {
    options()
        .with_limit(frame.len() as u64)
        .reject_trailing_bytes()
        .deserialize(frame)
        .map_err(|e| WireError::Malformed(e.to_string()))
}

/// A message's frame payload, as [`Conn::send`] writes it.
pub fn encode<M: Serialize>(msg: &M) -> Result<Vec<u8>, WireError> {
    encode_within(msg, MAX_SENT_FRAME)
}

/// [`encode`], refusing a message longer than `limit` bytes.
fn encode_within<M: Serialize>(msg: &M, limit: usize) -> Result<Vec<u8>, WireError> {
    options()
        .with_limit(limit as u64)
        .serialize(msg)
        .map_err(|e| match *e {
            bincode::ErrorKind::SizeLimit => WireError::TooLarge(limit),
            _ => WireError::Malformed(e.to_string()),
        })
}

/// A framed, message-typed connection over any byte stream.
pub struct Conn<T> {
    framed: Framed<T, Frames>,
    /// The keys and frame counts of each way, once the handshake set them.
    seal: Option<Seal>,
    /// Whether the server's `Welcome` is still to be read and checked
    /// ([`connect_early`]) before anything else is.
    welcome: Welcomed,
}

/// Where a client stands with the server's proof of the secret.
#[derive(Debug, Clone, Copy)]
enum Welcomed {
    /// Checked, or never owed (a server's end; [`connect`]).
    Yes,
    /// Still to be read; it must carry this proof.
    Owed(Proof),
    /// It did not come, or did not hold: nothing more is read or sent.
    Refused,
}

/// What seals the frames of one connection: a keyed HMAC for each way,
/// and how many frames went each way. The count is in every tag, never
/// on the wire, so a frame is good only at its own place in the stream.
struct Seal {
    out: Hmac<Sha256>,
    sent: u64,
    into: Hmac<Sha256>,
    received: u64,
}

impl Seal {
    /// The keys for `to_server` and `to_client` frames of the connection
    /// whose handshake used these nonces; `server`: this end's side.
    fn new(secret: &[u8], client_nonce: &Nonce, server_nonce: &Nonce, server: bool) -> Seal {
        let key = |way: &[u8]| {
            let k = mac(secret, &[way, client_nonce, server_nonce]);
            <Hmac<Sha256> as Mac>::new_from_slice(&k).expect("HMAC takes a key of any length")
        };
        let (to_server, to_client) = (
            key(b"clemu frames to server"),
            key(b"clemu frames to client"),
        );
        let (out, into) = if server {
            (to_client, to_server)
        } else {
            (to_server, to_client)
        };
        Seal {
            out,
            sent: 0,
            into,
            received: 0,
        }
    }

    fn tag(key: &Hmac<Sha256>, count: u64, body: &[u8]) -> Hmac<Sha256> {
        let mut m = key.clone();
        m.update(&count.to_be_bytes());
        m.update(body);
        m
    }

    /// `body` with its tag after it.
    fn close(&mut self, mut body: Vec<u8>) -> Vec<u8> {
        let tag = Seal::tag(&self.out, self.sent, &body)
            .finalize()
            .into_bytes();
        self.sent += 1;
        body.extend_from_slice(&tag[..TAG]);
        body
    }

    /// The body of a sealed frame, if its tag is this frame's.
    fn open<'a>(&mut self, frame: &'a [u8]) -> Result<&'a [u8], WireError> {
        let Some(cut) = frame.len().checked_sub(TAG) else {
            return Err(WireError::Forged);
        };
        let (body, tag) = frame.split_at(cut);
        Seal::tag(&self.into, self.received, body)
            .verify_truncated_left(tag)
            .map_err(|_| WireError::Forged)?;
        self.received += 1;
        Ok(body)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Conn<T> {
    /// A connection that accepts handshake-sized frames until
    /// [`accept`] or [`connect`] raise the limit, or the `Welcome` that
    /// [`connect_early`] owes is checked.
    pub fn new(io: T) -> Self {
        let codec = |max| {
            LengthDelimitedCodec::builder()
                .max_frame_length(max)
                .new_codec()
        };
        let frames = Frames {
            inbound: codec(HANDSHAKE_FRAME),
            outbound: codec(MAX_SENT_FRAME),
        };
        Conn {
            framed: Framed::new(io, frames),
            seal: None,
            welcome: Welcomed::Yes,
        }
    }

    /// A message's frame as this connection sends it: sealed once the
    /// handshake is done. A message the codec would refuse, with its tag,
    /// is refused here, before it counts as sent.
    fn frame<M: Serialize>(&mut self, msg: &M) -> Result<Bytes, WireError> {
        Ok(Bytes::from(match &mut self.seal {
            Some(seal) => seal.close(encode_within(msg, MAX_SENT_FRAME - TAG)?),
            None => encode(msg)?,
        }))
    }

    /// Largest frame accepted from now on.
    pub fn set_max_frame(&mut self, len: usize) {
        self.framed.codec_mut().inbound.set_max_frame_length(len);
    }

    /// Sends a message. Not to be cancelled: the frame counts as sent
    /// once sealed, so a send dropped half-way leaves every later frame
    /// out of its place; a connection whose send was cancelled or failed
    /// is closed, not used again.
    pub async fn send<M: Serialize>(&mut self, msg: &M) -> Result<(), WireError> {
        if let Welcomed::Refused = self.welcome {
            return Err(not_proven());
        }
        let frame = self.frame(msg)?;
        let sent = self.framed.send(frame).await.map_err(WireError::Io);
        match (sent, self.welcome) {
            // A server that refused the Auth hung up: say so, not "broken
            // pipe".
            (Err(e), Welcomed::Owed(_)) => Err(refused_by_closing(e)),
            (sent, _) => sent,
        }
    }

    /// Queues a message without writing it: what is fed goes out with the
    /// next [`Conn::flush`] (or once the buffer is large), so that a burst
    /// of messages costs one write and wakes the peer once. Not to be
    /// cancelled, as [`Conn::send`].
    pub async fn feed<M: Serialize>(&mut self, msg: &M) -> Result<(), WireError> {
        let frame = self.frame(msg)?;
        self.framed.feed(frame).await.map_err(WireError::Io)
    }

    /// Writes whatever was fed.
    pub async fn flush(&mut self) -> Result<(), WireError> {
        SinkExt::<Bytes>::flush(&mut self.framed)
            .await
            .map_err(WireError::Io)
    }

    /// The next message; `Err(Closed)` when the peer hung up cleanly.
    pub async fn recv<M: DeserializeOwned>(&mut self) -> Result<M, WireError> {
        self.welcomed().await?;
        self.next_frame(true).await
    }

    /// After [`connect_early`], reads and checks the server's `Welcome`
    /// (once; [`Conn::recv`] does it first). Nothing to do otherwise.
    pub async fn welcomed(&mut self) -> Result<(), WireError> {
        let want = match self.welcome {
            Welcomed::Yes => return Ok(()),
            Welcomed::Refused => return Err(not_proven()),
            Welcomed::Owed(want) => want,
        };
        // The proof comes unsealed. Nothing of the connection's state
        // changes before the frame is read, so a wait given up half-way
        // leaves it as it was.
        let checked = match timed(false, self.next_frame::<Welcome>(false)).await {
            Ok(w) if same(&want, &w.proof) => Ok(()),
            Ok(_) => Err(WireError::Refused(
                "the server does not know the secret".into(),
            )),
            Err(e) => Err(refused_by_closing(e)),
        };
        match checked {
            Ok(()) => {
                self.welcome = Welcomed::Yes;
                self.set_max_frame(MAX_REPLY_FRAME);
                Ok(())
            }
            Err(e) => {
                self.welcome = Welcomed::Refused;
                Err(e)
            }
        }
    }

    /// The next frame's message: opened with the connection's seal, if it
    /// has one and `sealed`.
    async fn next_frame<M: DeserializeOwned>(&mut self, sealed: bool) -> Result<M, WireError> {
        match self.framed.next().await {
            None => Err(WireError::Closed),
            Some(Err(e)) if is_frame_size(&e) => Err(WireError::TooLarge(
                self.framed.codec().inbound.max_frame_length(),
            )),
            Some(Err(e)) => Err(WireError::Io(e)),
            Some(Ok(frame)) => match self.seal.as_mut().filter(|_| sealed) {
                Some(seal) => decode(seal.open(&frame)?),
                None => decode(&frame),
            },
        }
    }

    pub fn into_inner(self) -> T {
        self.framed.into_inner()
    }
}

fn nonce() -> Result<Nonce, WireError> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| WireError::Io(io::Error::other(e.to_string())))?;
    Ok(n)
}

fn mac(secret: &[u8], parts: &[&[u8]]) -> Proof {
    let mut m =
        <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes a key of any length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn role_byte(r: Role) -> u8 {
    match r {
        Role::Agent => 1,
        Role::Client => 2,
        Role::Peer => 3,
    }
}

/// Constant-time comparison, so that timing does not leak the proof.
fn same(a: &Proof, b: &Proof) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `f` within [`HANDSHAKE_TIMEOUT`]; `accepted` says which end waits.
async fn timed<F: std::future::Future<Output = Result<R, WireError>>, R>(
    accepted: bool,
    f: F,
) -> Result<R, WireError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, f)
        .await
        .map_err(|_| WireError::Timeout { accepted })?
}

/// The server's side of the handshake. Returns the peer's role.
pub async fn accept<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<T>,
    secret: &[u8],
) -> Result<Role, WireError> {
    timed(true, async {
        let server_nonce = nonce()?;
        conn.send(&Hello {
            protocol: PROTOCOL,
            nonce: server_nonce,
        })
        .await?;
        let auth: Auth = conn.recv().await?;
        if auth.protocol != PROTOCOL {
            return Err(WireError::Refused(format!(
                "protocol {} (this side speaks {PROTOCOL})",
                auth.protocol
            )));
        }
        let want = mac(
            secret,
            &[
                b"clemu client",
                &[role_byte(auth.role)],
                &server_nonce,
                &auth.nonce,
            ],
        );
        if !same(&want, &auth.proof) {
            return Err(WireError::Refused("wrong secret".into()));
        }
        let proof = mac(secret, &[b"clemu server", &auth.nonce, &server_nonce]);
        conn.send(&Welcome { proof }).await?;
        conn.seal = Some(Seal::new(secret, &auth.nonce, &server_nonce, true));
        conn.set_max_frame(MAX_FRAME);
        Ok(auth.role)
    })
    .await
}

/// The client's side of the handshake.
pub async fn connect<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<T>,
    secret: &[u8],
    role: Role,
) -> Result<(), WireError> {
    timed(false, async {
        connect_early(conn, secret, role).await?;
        conn.welcomed().await
    })
    .await
}

/// The client's side of the handshake without waiting for the server's
/// proof: returns once its `Auth` is sent. The `Welcome` is read and
/// checked before the first message received (or by [`Conn::welcomed`]);
/// until then a wrong secret shows as a refusal of the first send or
/// receive, not here.
pub async fn connect_early<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<T>,
    secret: &[u8],
    role: Role,
) -> Result<(), WireError> {
    timed(false, async {
        let hello: Hello = conn.recv().await?;
        if hello.protocol != PROTOCOL {
            return Err(WireError::Refused(format!(
                "the server speaks protocol {} (this side speaks {PROTOCOL})",
                hello.protocol
            )));
        }
        let client_nonce = nonce()?;
        let proof = mac(
            secret,
            &[
                b"clemu client",
                &[role_byte(role)],
                &hello.nonce,
                &client_nonce,
            ],
        );
        conn.send(&Auth {
            protocol: PROTOCOL,
            role,
            nonce: client_nonce,
            proof,
        })
        .await?;
        conn.welcome = Welcomed::Owed(mac(secret, &[b"clemu server", &client_nonce, &hello.nonce]));
        conn.seal = Some(Seal::new(secret, &client_nonce, &hello.nonce, false));
        Ok(())
    })
    .await
}

/// The error of a connection whose server did not prove itself.
fn not_proven() -> WireError {
    WireError::Refused("the server did not prove it knows the secret".into())
}

/// What a client makes of a server that hung up instead of welcoming it:
/// a server that refuses the proof just hangs up.
fn refused_by_closing(e: WireError) -> WireError {
    match e {
        WireError::Closed | WireError::Io(_) => {
            WireError::Refused("the server closed the connection (wrong secret?)".into())
        }
        e => e,
    }
}

/// Reads a shared secret from a file. Refuses a file that others can read
/// (the secret is all that stands between the network and the cluster) and
/// an empty one. Trailing newlines are not part of the secret.
pub fn read_secret(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?;
    let mode = meta.permissions().mode();
    if mode & 0o004 != 0 {
        return Err(format!(
            "secret file {} is readable by everyone (mode {:o}); chmod 600 it",
            path.display(),
            mode & 0o777
        ));
    }
    let mut bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?;
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(format!("secret file {} is empty", path.display()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair(
        server_secret: &'static [u8],
        client_secret: &'static [u8],
    ) -> (Result<Role, WireError>, Result<(), WireError>) {
        let (a, b) = tokio::io::duplex(4096);
        let server = tokio::spawn(async move {
            let mut c = Conn::new(a);
            accept(&mut c, server_secret).await
        });
        let mut c = Conn::new(b);
        let client = connect(&mut c, client_secret, Role::Agent).await;
        drop(c);
        (server.await.unwrap(), client)
    }

    #[tokio::test]
    async fn handshake_with_the_same_secret() {
        let (s, c) = pair(b"k", b"k").await;
        assert_eq!(s.unwrap(), Role::Agent);
        c.unwrap();
    }

    #[tokio::test]
    async fn handshake_with_another_secret_is_refused_on_both_sides() {
        let (s, c) = pair(b"k", b"not k").await;
        assert!(matches!(s, Err(WireError::Refused(_))), "{s:?}");
        assert!(matches!(c, Err(WireError::Refused(_))), "{c:?}");
    }

    /// A real loopback connection: (server end, client end).
    async fn tcp_pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(l.local_addr().unwrap());
        let (client, server) = tokio::join!(client, l.accept());
        (server.unwrap().0, client.unwrap())
    }

    /// A frame as the wire carries it: its length, then its bytes.
    fn framed(msg: &impl Serialize) -> Vec<u8> {
        let body = encode(msg).unwrap();
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&body);
        f
    }

    /// The next frame the raw stream `s` carries, without its length.
    async fn raw_frame(s: &mut tokio::net::TcpStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut len = [0u8; 4];
        s.read_exact(&mut len).await.unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).await.unwrap();
        body
    }

    /// A raw server end that has sent its `Hello` to an early client's
    /// `Conn`, and read its `Auth`.
    async fn early_pair() -> (
        tokio::net::TcpStream,
        Conn<tokio::net::TcpStream>,
        Hello,
        Auth,
    ) {
        use tokio::io::AsyncWriteExt;
        let (mut server, client) = tcp_pair().await;
        let hello = Hello {
            protocol: PROTOCOL,
            nonce: [3; 32],
        };
        server.write_all(&framed(&hello)).await.unwrap();
        let mut c = Conn::new(client);
        connect_early(&mut c, b"k", Role::Client).await.unwrap();
        let auth: Auth = decode(&raw_frame(&mut server).await).unwrap();
        (server, c, hello, auth)
    }

    #[tokio::test]
    async fn an_early_client_sends_its_request_before_the_server_proved_itself() {
        let (mut server, mut c, hello, auth) = early_pair().await;
        assert_eq!(auth.role, Role::Client);
        // No Welcome was sent, and the request comes, sealed.
        c.send(&Request::Stats).await.unwrap();
        let frame = raw_frame(&mut server).await;
        let mut seal = Seal::new(b"k", &auth.nonce, &hello.nonce, true);
        let req: Request = decode(seal.open(&frame).unwrap()).unwrap();
        assert!(matches!(req, Request::Stats), "{req:?}");
    }

    #[tokio::test]
    async fn a_wait_for_the_welcome_given_up_leaves_the_connection_sealed() {
        use tokio::io::AsyncWriteExt;
        let (mut server, mut c, hello, auth) = early_pair().await;
        c.send(&Request::Stats).await.unwrap();
        // The client gives up waiting before the server has proved itself.
        let early = tokio::time::timeout(Duration::from_millis(50), c.recv::<Response>()).await;
        assert!(early.is_err(), "{early:?}");
        // Then the Welcome comes, and an answer that is not sealed: it is
        // refused, as it would have been without the wait given up.
        let proof = mac(b"k", &[b"clemu server", &auth.nonce, &hello.nonce]);
        server.write_all(&framed(&Welcome { proof })).await.unwrap();
        server
            .write_all(&framed(&Response::ShuttingDown))
            .await
            .unwrap();
        let r = c.recv::<Response>().await;
        assert!(matches!(r, Err(WireError::Forged)), "{r:?}");
    }

    #[tokio::test]
    async fn an_early_client_and_a_server_talk_over_tcp() {
        let (server, client) = tcp_pair().await;
        let server = tokio::spawn(async move {
            let mut c = Conn::new(server);
            accept(&mut c, b"k").await.unwrap();
            let req: Request = c.recv().await.unwrap();
            assert!(matches!(req, Request::Stats), "{req:?}");
            c.send(&Response::ShuttingDown).await.unwrap();
            // A second request on the same connection, sealed in turn.
            let _: Request = c.recv().await.unwrap();
            c.send(&Response::ShuttingDown).await.unwrap();
        });
        let mut c = Conn::new(client);
        connect_early(&mut c, b"k", Role::Client).await.unwrap();
        for _ in 0..2 {
            c.send(&Request::Stats).await.unwrap();
            assert!(matches!(
                c.recv::<Response>().await.unwrap(),
                Response::ShuttingDown
            ));
        }
        server.await.unwrap();
    }

    #[tokio::test]
    async fn an_early_client_with_another_secret_is_refused() {
        let (server, client) = tcp_pair().await;
        let server = tokio::spawn(async move {
            let mut c = Conn::new(server);
            accept(&mut c, b"k").await
        });
        let mut c = Conn::new(client);
        connect_early(&mut c, b"not k", Role::Client).await.unwrap();
        assert!(matches!(server.await.unwrap(), Err(WireError::Refused(_))));
        // Whether the request's write or the wait for the answer meets the
        // server's hang-up first, the client hears why.
        let r = match c.send(&Request::Stats).await {
            Ok(()) => c.recv::<Response>().await.map(|_| ()),
            Err(e) => Err(e),
        };
        match r {
            Err(WireError::Refused(why)) => assert!(why.contains("wrong secret"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_early_client_believes_no_answer_from_a_server_without_the_secret() {
        use tokio::io::AsyncWriteExt;
        let (mut server, mut c, _, _) = early_pair().await;
        c.send(&Request::Stats).await.unwrap();
        // An impostor: a Welcome it cannot prove, then an answer.
        server
            .write_all(&framed(&Welcome { proof: [9; 32] }))
            .await
            .unwrap();
        server
            .write_all(&framed(&Response::ShuttingDown))
            .await
            .unwrap();
        match c.recv::<Response>().await {
            Err(WireError::Refused(why)) => {
                assert_eq!(why, "the server does not know the secret")
            }
            other => panic!("{other:?}"),
        }
        // The connection is done with: nothing more is read or sent.
        assert!(matches!(c.welcomed().await, Err(WireError::Refused(_))));
        assert!(matches!(
            c.recv::<Response>().await,
            Err(WireError::Refused(_))
        ));
        assert!(matches!(
            c.send(&Request::Stats).await,
            Err(WireError::Refused(_))
        ));
    }

    #[tokio::test]
    async fn a_replayed_auth_fails() {
        // Record an honest client's Auth, then send it on a new connection.
        let (a, b) = tokio::io::duplex(4096);
        let server = tokio::spawn(async move { accept(&mut Conn::new(a), b"k").await });
        let mut c = Conn::new(b);
        let hello: Hello = c.recv().await.unwrap();
        let n = [7u8; 32];
        let auth = Auth {
            protocol: PROTOCOL,
            role: Role::Client,
            nonce: n,
            proof: mac(b"k", &[b"clemu client", &[2], &hello.nonce, &n]),
        };
        c.send(&auth).await.unwrap();
        assert!(server.await.unwrap().is_ok());

        let (a, b) = tokio::io::duplex(4096);
        let server = tokio::spawn(async move { accept(&mut Conn::new(a), b"k").await });
        let mut c = Conn::new(b);
        let _: Hello = c.recv().await.unwrap();
        c.send(&auth).await.unwrap();
        assert!(matches!(server.await.unwrap(), Err(WireError::Refused(_))));
    }

    #[tokio::test]
    async fn garbage_and_oversized_frames_are_errors_not_panics() {
        use tokio::io::AsyncWriteExt;
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move { accept(&mut Conn::new(a), b"k").await });
        // A frame header claiming 1 GiB.
        b.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        let r = server.await.unwrap();
        assert!(
            matches!(r, Err(WireError::TooLarge(HANDSHAKE_FRAME))),
            "{r:?}"
        );
        assert_eq!(
            r.unwrap_err().to_string(),
            format!("frame larger than {HANDSHAKE_FRAME} bytes")
        );

        let (a, mut b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move { accept(&mut Conn::new(a), b"k").await });
        b.write_all(&5u32.to_be_bytes()).await.unwrap();
        b.write_all(b"hello").await.unwrap();
        let r = server.await.unwrap();
        assert!(matches!(r, Err(WireError::Malformed(_))), "{r:?}");
    }

    #[tokio::test]
    async fn a_reply_may_be_larger_than_what_the_server_accepts() {
        // A queue of hundreds of thousands of jobs: more than MAX_FRAME.
        let (a, b) = tokio::io::duplex(1 << 16);
        let big = vec![7u8; MAX_FRAME + 1];
        let sent = big.clone();
        let server = tokio::spawn(async move {
            let mut c = Conn::new(a);
            accept(&mut c, b"k").await.unwrap();
            c.send(&Response::Records(sent)).await
        });
        let mut c = Conn::new(b);
        connect(&mut c, b"k", Role::Client).await.unwrap();
        match c.recv::<Response>().await.unwrap() {
            Response::Records(got) => assert!(got == big),
            other => panic!("{other:?}"),
        }
        server.await.unwrap().unwrap();

        // The other way, the server's own limit holds.
        let (a, b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move {
            let mut c = Conn::new(a);
            accept(&mut c, b"k").await.unwrap();
            c.recv::<Request>().await
        });
        let mut c = Conn::new(b);
        connect(&mut c, b"k", Role::Client).await.unwrap();
        let _ = c.send(&Request::Records(vec![1; MAX_FRAME / 8 + 1])).await;
        let r = server.await.unwrap();
        assert!(matches!(r, Err(WireError::TooLarge(MAX_FRAME))), "{r:?}");
    }

    /// A server and a client that shake hands through a relay: each frame
    /// the client sends after its handshake goes through `forward`, which
    /// says what the server gets instead (none, it, it twice, another).
    /// Returns the client and what the server read, message by message,
    /// until its first error.
    async fn through<F>(mut forward: F) -> (Conn<tokio::io::DuplexStream>, ServerSaw)
    where
        F: FnMut(usize, Vec<u8>) -> Vec<Vec<u8>> + Send + 'static,
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (server_end, relay_server) = tokio::io::duplex(1 << 16);
        let (client_end, relay_client) = tokio::io::duplex(1 << 16);
        let (mut from_client, mut to_client) = tokio::io::split(relay_client);
        let (mut from_server, mut up) = tokio::io::split(relay_server);
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        });
        tokio::spawn(async move {
            // Frame 0 is the client's Auth; what follows is sealed.
            // The client gone, the server hears its end.
            let mut n = 0;
            loop {
                let mut len = [0u8; 4];
                if from_client.read_exact(&mut len).await.is_err() {
                    let _ = up.shutdown().await;
                    return;
                }
                let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                if from_client.read_exact(&mut frame).await.is_err() {
                    let _ = up.shutdown().await;
                    return;
                }
                let out = if n == 0 {
                    vec![frame]
                } else {
                    forward(n, frame)
                };
                n += 1;
                for f in out {
                    let mut bytes = (f.len() as u32).to_be_bytes().to_vec();
                    bytes.extend(f);
                    if up.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            }
        });
        let server = tokio::spawn(async move {
            let mut c = Conn::new(server_end);
            accept(&mut c, b"k").await.unwrap();
            let mut saw = Vec::new();
            loop {
                match c.recv::<Request>().await {
                    Ok(r) => saw.push(format!("{r:?}")),
                    Err(e) => return (saw, e),
                }
            }
        });
        let mut c = Conn::new(client_end);
        connect(&mut c, b"k", Role::Client).await.unwrap();
        (c, ServerSaw(server))
    }

    struct ServerSaw(tokio::task::JoinHandle<(Vec<String>, WireError)>);

    impl ServerSaw {
        async fn after(self, client: Conn<tokio::io::DuplexStream>) -> (Vec<String>, WireError) {
            // The server stops at its first error, which these tests make
            // come; one that accepted everything fails the test after 10 s.
            let r = tokio::time::timeout(Duration::from_secs(10), self.0).await;
            drop(client);
            r.expect("the server should stop").unwrap()
        }
    }

    #[tokio::test]
    async fn sealed_frames_pass_as_sent() {
        let (mut c, saw) = through(|_, f| vec![f]).await;
        c.send(&Request::Stats).await.unwrap();
        c.send(&Request::Nodes).await.unwrap();
        c.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(c);
        let r = tokio::time::timeout(Duration::from_secs(10), saw.0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.0, ["Stats", "Nodes"]);
        assert!(matches!(r.1, WireError::Closed), "{:?}", r.1);
    }

    /// A `Stats` request sent through [`through`] with `forward`: the
    /// server reads nothing and finds a frame forged.
    async fn refused_unread<F>(forward: F)
    where
        F: FnMut(usize, Vec<u8>) -> Vec<Vec<u8>> + Send + 'static,
    {
        let (mut c, saw) = through(forward).await;
        c.send(&Request::Stats).await.unwrap();
        let (read, e) = saw.after(c).await;
        assert!(read.is_empty(), "{read:?}");
        assert!(matches!(e, WireError::Forged), "{e:?}");
    }

    #[tokio::test]
    async fn a_frame_altered_dropped_or_repeated_ends_the_connection_unread() {
        // One bit of the message changed: its tag no longer matches.
        refused_unread(|_, mut f| {
            f[0] ^= 1;
            vec![f]
        })
        .await;
        // The same with the tag: the message is intact and still refused.
        refused_unread(|_, mut f| {
            *f.last_mut().unwrap() ^= 0x80;
            vec![f]
        })
        .await;
        // A frame too short to hold a tag.
        refused_unread(|_, _| vec![vec![1, 2, 3]]).await;

        // The first request dropped: the second is out of its place.
        let (mut c, saw) = through(|n, f| if n == 1 { vec![] } else { vec![f] }).await;
        c.send(&Request::Stats).await.unwrap();
        c.send(&Request::Nodes).await.unwrap();
        let (read, e) = saw.after(c).await;
        assert!(read.is_empty(), "{read:?}");
        assert!(matches!(e, WireError::Forged), "{e:?}");

        // A request said twice: the first is read, its copy is not.
        let (mut c, saw) = through(|_, f| vec![f.clone(), f]).await;
        c.send(&Request::Stats).await.unwrap();
        let (read, e) = saw.after(c).await;
        assert_eq!(read, ["Stats"]);
        assert!(matches!(e, WireError::Forged), "{e:?}");
    }

    #[test]
    fn a_frame_is_good_only_on_its_way_of_its_own_connection() {
        let (cn, sn) = ([1u8; 32], [2u8; 32]);
        let mut client = Seal::new(b"k", &cn, &sn, false);
        let mut server = Seal::new(b"k", &cn, &sn, true);
        let body = b"a message".to_vec();
        let frame = client.close(body.clone());
        assert_eq!(frame.len(), body.len() + TAG);
        // Sent back to its sender, it fails: each way has its own key.
        assert!(client.open(&frame).is_err());
        // On another connection (other nonces, the same secret), too.
        let mut other = Seal::new(b"k", &cn, &[3u8; 32], true);
        assert!(other.open(&frame).is_err());
        // Under another secret, too.
        let mut stranger = Seal::new(b"not k", &cn, &sn, true);
        assert!(stranger.open(&frame).is_err());
        // Its own peer reads it.
        assert_eq!(server.open(&frame).unwrap(), body);
    }

    // Waits the real five seconds: tokio's paused clock would need its
    // test-util feature, which would make every `cargo build -p ...` after
    // `cargo test` rebuild tokio and all that depends on it.
    #[tokio::test]
    async fn a_silent_peer_times_out() {
        let (a, _b) = tokio::io::duplex(4096);
        let r = accept(&mut Conn::new(a), b"k").await;
        // The end that accepted says the peer was silent, not itself.
        assert_eq!(
            r.err().map(|e| e.to_string()).as_deref(),
            Some("connected, but sent no handshake in 5 s")
        );
    }
}
