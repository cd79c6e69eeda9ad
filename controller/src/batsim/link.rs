//! The socket to the scheduler: a ZeroMQ REQ socket that connects to the
//! scheduler's REP socket, one request and one reply at a time. It lives
//! on a thread of its own with its own runtime, so the core can ask from
//! synchronous code, in the twin and in the server alike, and give up
//! after a timeout whatever the socket is doing.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

pub struct Link {
    endpoint: String,
    requests: mpsc::Sender<String>,
    replies: mpsc::Receiver<Result<String, String>>,
}

impl Link {
    /// Connects to the scheduler at `endpoint`, waiting up to `patience`
    /// for it to be there.
    pub fn connect(endpoint: &str, patience: Duration) -> Result<Link, String> {
        let (req_tx, req_rx) = mpsc::channel::<String>();
        let (rep_tx, rep_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let ep = endpoint.to_string();
        std::thread::Builder::new()
            .name("batsim-link".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot start a runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    let mut socket = match connect(&ep, patience).await {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    // Blocking on the std channel is fine: this runtime
                    // has nothing else to do between requests.
                    while let Ok(req) = req_rx.recv() {
                        let reply = async {
                            socket
                                .send(ZmqMessage::from(req))
                                .await
                                .map_err(|e| format!("cannot send: {e}"))?;
                            let m = socket.recv().await.map_err(|e| format!("no reply: {e}"))?;
                            String::try_from(m).map_err(|e| format!("reply is not text: {e}"))
                        }
                        .await;
                        let failed = reply.is_err();
                        if rep_tx.send(reply).is_err() || failed {
                            return;
                        }
                    }
                    let _ = socket.close().await;
                });
            })
            .map_err(|e| format!("cannot start the link thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Link {
                endpoint: endpoint.to_string(),
                requests: req_tx,
                replies: rep_rx,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("{endpoint}: the link thread died")),
        }
    }

    /// Sends a request and waits up to `timeout` for its reply.
    pub fn round_trip(&self, request: String, timeout: Duration) -> Result<String, String> {
        let ep = &self.endpoint;
        self.requests
            .send(request)
            .map_err(|_| format!("scheduler at {ep}: the connection is closed"))?;
        match self.replies.recv_timeout(timeout) {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(format!("scheduler at {ep}: {e}")),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "scheduler at {ep} did not answer within {:.1} s",
                timeout.as_secs_f64()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(format!("scheduler at {ep}: the connection is closed"))
            }
        }
    }
}

/// Connects, trying again until `patience` runs out: the scheduler may be
/// started after clemu.
async fn connect(endpoint: &str, patience: Duration) -> Result<zeromq::ReqSocket, String> {
    let deadline = Instant::now() + patience;
    loop {
        let mut socket = zeromq::ReqSocket::new();
        let tried = tokio::time::timeout(Duration::from_secs(2), socket.connect(endpoint)).await;
        match tried {
            Ok(Ok(())) => return Ok(socket),
            Ok(Err(e)) if Instant::now() >= deadline => {
                return Err(format!(
                    "cannot connect to the scheduler at {endpoint}: {e}"
                ))
            }
            Err(_) if Instant::now() >= deadline => {
                return Err(format!(
                    "cannot connect to the scheduler at {endpoint}: no answer within {:.0} s",
                    patience.as_secs_f64()
                ))
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
