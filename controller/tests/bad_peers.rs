//! Peers that fail the handshake, send garbage or oversized frames, or
//! speak out of turn are refused and logged with their address; the
//! cluster carries on and nothing they sent is acted on.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads until the server hangs up (or 10 s pass); returns what it sent.
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn bad_peers_are_refused_and_the_cluster_keeps_working() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let addr = c.address();

    // A client with the wrong secret.
    let wrong = c.dir.path().join("wrong-secret");
    std::fs::write(&wrong, "not the secret\n").unwrap();
    std::fs::set_permissions(&wrong, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = std::process::Command::new(binary("controller"))
        .args(["--config"])
        .arg(&c.config)
        .arg("--secret-file")
        .arg(&wrong)
        .args(["submit", "--cores", "1", "--runtime", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused"),
        "{out:?}"
    );

    // Garbage instead of a handshake.
    let mut g = TcpStream::connect(&addr).unwrap();
    let garbage_port = g.local_addr().unwrap().port();
    let _ = g.write_all(&[0, 0, 0, 12]);
    let _ = g.write_all(b"hello there!");
    until_closed(&mut g);

    // A frame header announcing a gigabyte.
    let mut big = TcpStream::connect(&addr).unwrap();
    let big_port = big.local_addr().unwrap().port();
    let _ = big.write_all(&(1u32 << 30).to_be_bytes());
    until_closed(&mut big);

    // Silence: the handshake times out.
    let mut quiet = TcpStream::connect(&addr).unwrap();
    until_closed(&mut quiet);

    // The cluster still runs jobs, and none was submitted by the bad peers.
    let ids = c.submit(&["--cores", "1", "--runtime", "0.2"]);
    assert_eq!(ids, [1]);
    c.wait_state(1, "completed");
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert_eq!(stats["submitted"], 1);

    let log = c.log();
    for port in [garbage_port, big_port] {
        assert!(
            log.contains(&format!("127.0.0.1:{port}")),
            "no log line names port {port}:\n{log}"
        );
    }
    assert!(log.contains("refused a connection"), "{log}");
    assert!(log.contains("wrong secret"), "{log}");
}

#[test]
fn an_agent_that_speaks_out_of_turn_is_dropped() {
    // A real handshake with the right secret, then an agent message before
    // registering: dropped, nothing registered.
    let c = Cluster::start("vn1", 2, "");
    let secret = std::fs::read_to_string(c.secret_path()).unwrap();
    let addr = c.address();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use formats::wire::{self, Conn, FromAgent, Role};
        let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let mut conn = Conn::new(stream);
        wire::connect(&mut conn, secret.trim().as_bytes(), Role::Agent)
            .await
            .unwrap();
        conn.send(&FromAgent::Heartbeat { running: 5 })
            .await
            .unwrap();
        assert!(
            conn.recv::<wire::ToAgent>().await.is_err(),
            "the connection should be closed"
        );
    });
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert_eq!(stats["agents"], 1, "only the local agent");
    assert!(c.log().contains("spoke before registering"), "{}", c.log());
}
