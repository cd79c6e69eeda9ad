//! A client session with a list of controllers, against a controller
//! played by the test over real TCP: an answer that comes too late is
//! never read as the answer to the next request.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::time::Duration;

use formats::wire::{self, Conn, Request, Response};
use tokio::net::TcpListener;

/// A controller that answers each request with its name, the first one
/// of the first connection 3 s late (a stalled event loop).
async fn slow_at_first(l: TcpListener, secret: Vec<u8>) {
    let mut first = true;
    loop {
        let (sock, _) = l.accept().await.unwrap();
        let secret = secret.clone();
        let late = std::mem::replace(&mut first, false);
        tokio::spawn(async move {
            let mut c = Conn::new(sock);
            wire::accept(&mut c, &secret).await.unwrap();
            let mut late = late;
            while let Ok(r) = c.recv::<Request>().await {
                if std::mem::replace(&mut late, false) {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                let name = format!("{r:?}");
                let name = name
                    .split(|ch: char| !ch.is_alphanumeric())
                    .next()
                    .unwrap_or("");
                if c.send(&Response::Error(format!("answer to {name}")))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
    }
}

#[tokio::test]
async fn a_late_answer_to_the_leader_question_is_not_taken_for_the_next() {
    let secret = b"0123456789abcdef0123456789abcdef".to_vec();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(slow_at_first(l, secret.clone()));
    // A list of two, the second down: the session asks the first which
    // controller leads (stats), gets no answer in time, and goes on.
    let list = format!("{addr},127.0.0.1:1");
    let mut s = client::Session::open(&list, &secret).await.unwrap();
    s.to_leader().await.unwrap();
    match s.call(&Request::Hosts).await.unwrap() {
        Response::Error(e) => assert_eq!(e, "answer to Hosts"),
        other => panic!("{other:?}"),
    }
}

/// A controller that says its Hello and then nothing (its event loop
/// stalled mid-handshake): the session's first call fails, naming the
/// address and what went wrong, rather than waiting for ever. (One that
/// says nothing at all fails the open itself, the same way.)
#[tokio::test]
async fn a_controller_silent_after_accepting_fails_the_first_call_with_why() {
    let secret = b"0123456789abcdef0123456789abcdef".to_vec();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (sock, _) = l.accept().await.unwrap();
            let mut c = Conn::new(sock);
            let hello = wire::Hello {
                protocol: wire::PROTOCOL,
                nonce: [7; 32],
            };
            c.send(&hello).await.unwrap();
            held.push(c);
        }
    });
    let started = std::time::Instant::now();
    let mut s = client::Session::open(&addr, &secret).await.unwrap();
    let e = s.call(&Request::Hosts).await.unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains(&addr), "{e}");
    assert!(e.contains("accepted the connection, but no"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60), "{e}");
}
