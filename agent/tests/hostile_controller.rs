//! What a peer that knows the secret can make an agent do: only start its
//! configured sigsleep, on nodes it hosts, with arguments the agent builds
//! from numbers. Here the test is the controller, over real TCP, and sends
//! what a hostile one would.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use formats::wire::{self, Conn, Exit, FromAgent, RunSettings, StartJob, SuspendMode, ToAgent};
use tokio::net::TcpListener;

fn sigsleep() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_agent"))
        .parent()
        .unwrap()
        .join("sigsleep");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo test --workspace`",
        p.display()
    );
    p
}

async fn next_event(conn: &mut Conn<tokio::net::TcpStream>) -> FromAgent {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), conn.recv::<FromAgent>())
            .await
            .expect("the agent went quiet")
            .unwrap();
        if !matches!(
            msg,
            FromAgent::Heartbeat { .. } | FromAgent::Resources(_) | FromAgent::Marked(_)
        ) {
            return msg;
        }
    }
}

#[test]
fn an_agent_runs_only_its_own_sigsleep_whatever_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mut agent = Command::new(env!("CARGO_BIN_EXE_agent"))
            .args(["--controller", &addr, "--nodes", "vn[1-2]", "--cpus", "4"])
            .arg("--secret-file")
            .arg(&secret)
            .arg("--record-dir")
            .arg(dir.path().join("spool"))
            .arg("--sigsleep")
            .arg(sigsleep())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let mut conn = Conn::new(stream);
        wire::accept(&mut conn, b"s3cret").await.unwrap();
        assert!(matches!(
            conn.recv::<FromAgent>().await.unwrap(),
            FromAgent::Register { .. }
        ));
        conn.send(&ToAgent::Registered(RunSettings {
            heartbeat_ms: 200,
            suspend_mode: SuspendMode::Tstp,
            suspend_grace_ms: 1000,
            kill_grace_ms: 1000,
            stream_records: true,
            fence_ms: 0,
            mark: Default::default(),
            realtime: false,
            run_from_launch: false,
        }))
        .await
        .unwrap();

        let start = |job: u64, node: &str| StartJob {
            job,
            node: node.to_string(),
            cores: 1,
            runtime_ns: 30_000_000_000,
            walltime_ns: 0,
            submit_ns: 0,
            start_ns: 0,
            devices: String::new(),
            program: None,
        };
        // A node it does not host, named like a shell command: refused.
        conn.send(&ToAgent::Start(start(1, "vn1; touch /tmp/pwned")))
            .await
            .unwrap();
        match next_event(&mut conn).await {
            FromAgent::Ended { job: 1, exit } => assert_eq!(exit, Exit::SpawnFailed),
            other => panic!("unexpected {other:?}"),
        }
        // Signals for jobs it does not run: nothing happens.
        for msg in [
            ToAgent::Suspend(77),
            ToAgent::Resume(77),
            ToAgent::Cancel(77),
            ToAgent::Kill(77),
        ] {
            conn.send(&msg).await.unwrap();
        }
        // A real start: the process is the configured sigsleep, with the
        // arguments the agent built.
        conn.send(&ToAgent::Start(start(2, "vn2"))).await.unwrap();
        let pid = match next_event(&mut conn).await {
            FromAgent::Started { job: 2, pid } => pid,
            other => panic!("unexpected {other:?}"),
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe, sigsleep().canonicalize().unwrap());
        // The kernel fills the command line in as exec completes: it may be
        // empty for a moment right after the spawn returns.
        let mut args = Vec::new();
        for _ in 0..100 {
            args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
            if !args.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let args: Vec<String> = args
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert!(args.windows(2).any(|w| w == ["--id", "2"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--node", "vn2"]), "{args:?}");
        assert!(!std::path::Path::new("/tmp/pwned").exists());
        // Cancelled, it ends and its record comes back.
        conn.send(&ToAgent::Cancel(2)).await.unwrap();
        let mut got_record = false;
        loop {
            match next_event(&mut conn).await {
                FromAgent::Records(frames) => got_record = !frames.is_empty(),
                FromAgent::Ended { job: 2, .. } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(got_record);
        conn.send(&ToAgent::Shutdown).await.unwrap();
        let status = tokio::task::spawn_blocking(move || agent.wait().unwrap())
            .await
            .unwrap();
        assert!(status.success());
    });
}
