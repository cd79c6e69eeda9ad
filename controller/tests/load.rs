//! A client that floods the controller with submissions meets backpressure:
//! past `max_jobs` its submission waits (over a real socket) until jobs
//! end, while other clients are still answered.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{binary, Cluster};

#[test]
fn a_full_queue_holds_submissions_until_jobs_end() {
    // No agent: nodes are down and every job stays queued.
    let c = Cluster::start_remote_with("vn[1-2]", 4, "max_jobs = 5");
    let first = c.submit(&["--cores", "1", "--runtime", "60", "--count", "5"]);
    assert_eq!(first, [1, 2, 3, 4, 5]);

    let submit = |count: &str| {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&c.config)
            .args([
                "submit",
                "--cores",
                "1",
                "--runtime",
                "60",
                "--count",
                count,
            ])
            .args(["--batch", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut waiting = submit("2");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "a submission past max_jobs was answered at once\n{}",
        c.log()
    );

    // Other clients are served meanwhile; the queue holds max_jobs jobs.
    let queue = common::json_of(&c.ok(&["queue", "--format", "json"]));
    assert_eq!(queue.as_array().unwrap().len(), 5);
    // A request that could never fit is refused at once, not held.
    let too_big = c.ctl(&[
        "submit",
        "--cores",
        "1",
        "--runtime",
        "60",
        "--count",
        "6",
        "--batch",
        "6",
    ]);
    assert!(!too_big.status.success());
    let err = String::from_utf8_lossy(&too_big.stderr);
    assert!(err.contains("max_jobs = 5"), "{err}");

    // Each job that ends lets one waiting job in.
    c.ok(&["cancel", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "both jobs were let in for one end"
    );
    c.ok(&["cancel", "2"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiting.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the held submission never returned\n{}",
            c.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = waiting.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ids, [6, 7]);
    let queued = common::queue_ids(&c.ok(&["queue", "--format", "json"]));
    assert_eq!(queued, [3, 4, 5, 6, 7]);
    assert!(c.log().contains("the queue is full"), "{}", c.log());
}
