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

/// Copies what `from` says to `to` on a thread of its own, until either
/// end closes: a relay's way back, from the server to its client.
fn pump(from: &TcpStream, to: &TcpStream) -> std::thread::JoinHandle<()> {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    })
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

#[test]
fn a_recorded_handshake_replayed_is_refused() {
    // A real client talks through a relay that records what it sends;
    // the same bytes sent again on a new connection do not get in: the
    // server's nonce is fresh, so the recorded proof is worthless.
    let c = Cluster::start("vn1", 2, "");
    let server = c.address();
    let relay = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_addr = relay.local_addr().unwrap().to_string();
    let recorder = std::thread::spawn(move || {
        let (mut client, _) = relay.accept().unwrap();
        let mut upstream = TcpStream::connect(&server).unwrap();
        let back = pump(&upstream, &client);
        let mut sent = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = client.read(&mut buf) {
            if n == 0 || upstream.write_all(&buf[..n]).is_err() {
                break;
            }
            sent.extend_from_slice(&buf[..n]);
        }
        let _ = upstream.shutdown(std::net::Shutdown::Both);
        let _ = back.join();
        sent
    });
    let out = c.ctl(&["--addr", &relay_addr, "stats"]);
    assert!(out.status.success(), "{out:?}");
    let recorded = recorder.join().unwrap();
    assert!(recorded.len() > 40, "recorded {} bytes", recorded.len());

    let mut replay = TcpStream::connect(c.address()).unwrap();
    let port = replay.local_addr().unwrap().port();
    let _ = replay.write_all(&recorded);
    let answer = until_closed(&mut replay);
    // All it gets is the server's hello: no stats.
    assert!(
        answer.len() < 100,
        "the replay got {} bytes back",
        answer.len()
    );
    let log = c.log();
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("127.0.0.1:{port}")) && l.contains("refused")),
        "no refusal logged for port {port}:\n{log}"
    );
}

#[test]
fn a_world_readable_secret_stops_the_controller_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, config_text(dir.path(), "vn1", 2, true, "")).unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let secret = dir.path().join("state/secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(binary("controller"))
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("readable by everyone") && err.contains("state/secret"),
        "{err}"
    );
    // A client says the same, not that the controller may be missing
    // (regression: it asked "is the controller running?").
    let queue = || {
        let out = std::process::Command::new(binary("controller"))
            .arg("--config")
            .arg(&config)
            .arg("queue")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = queue();
    assert!(
        err.contains("readable by everyone") && !err.contains("running"),
        "{err}"
    );
    // A missing secret is where that question belongs.
    std::fs::remove_file(&secret).unwrap();
    let err = queue();
    assert!(err.contains("is the controller running?"), "{err}");
}

#[test]
fn a_frame_altered_on_its_way_is_not_acted_on() {
    // A real client's submission passes a relay that changes one bit of
    // it after the handshake: the controller drops the connection, says
    // why with the peer, and queues nothing. The same submission, intact,
    // is then queued.
    let c = Cluster::start("vn1", 2, "");
    let secret = std::fs::read_to_string(c.secret_path()).unwrap();
    let server = c.address();
    let relay = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_addr = relay.local_addr().unwrap().to_string();
    let relayed = std::thread::spawn(move || {
        let (mut client, _) = relay.accept().unwrap();
        let mut upstream = TcpStream::connect(&server).unwrap();
        let port = upstream.local_addr().unwrap().port();
        pump(&upstream, &client);
        // Frame 0 is the client's proof; frame 1, its submission.
        for n in 0..2 {
            let mut len = [0u8; 4];
            client.read_exact(&mut len).unwrap();
            let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
            client.read_exact(&mut frame).unwrap();
            if n == 1 {
                // The message's last byte, not its tag.
                let at = frame.len() - formats::wire::TAG - 1;
                frame[at] ^= 1;
            }
            upstream.write_all(&len).unwrap();
            upstream.write_all(&frame).unwrap();
        }
        until_closed(&mut upstream);
        port
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let submit = |addr: String| {
        let secret = secret.clone();
        rt.block_on(async move {
            use formats::wire::{self, Conn, JobSpec, Request, Response, Role};
            let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let mut conn = Conn::new(stream);
            wire::connect(&mut conn, secret.trim().as_bytes(), Role::Client)
                .await
                .unwrap();
            let spec = JobSpec {
                cores: 1,
                runtime_ns: 100_000_000,
                ..JobSpec::default()
            };
            conn.send(&Request::Submit {
                specs: vec![spec],
                key: 0,
            })
            .await
            .unwrap();
            conn.recv::<Response>().await
        })
    };
    let tampered = submit(relay_addr);
    assert!(tampered.is_err(), "{tampered:?}");
    let port = relayed.join().unwrap();
    // The line is written once the connection is gone.
    c.wait_for(
        &format!("a log line naming port {port} and the tag"),
        || {
            c.log()
                .lines()
                .any(|l| l.contains(&format!("127.0.0.1:{port}")) && l.contains("failed its tag"))
        },
    );
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert_eq!(stats["submitted"], 0);

    let intact = submit(c.address());
    assert!(
        matches!(intact, Ok(formats::wire::Response::Submitted(ref ids)) if ids == &[1]),
        "{intact:?}"
    );
}
