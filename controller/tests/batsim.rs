//! `policy = "batsim"` against a scheduler on a real ZeroMQ REP socket:
//! what clemu says to it, and what it does with good and bad replies, in
//! the twin and in the emulation (real controller, real sigsleep
//! processes). The scheduler here is a few lines of Rust so that each test
//! can make it misbehave in one precise way; scripts/batsim-check.sh runs
//! pybatsim's own schedulers.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller::sim::{simulate, SimJob};
use formats::wire::JobSpec;
use serde_json::{json, Value};
use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

const S: i64 = 1_000_000_000;

/// What the scheduler does with a request: its reply's events, or `None`
/// to go silent (it keeps the socket open and never answers).
type Brain = Box<dyn FnMut(&Value, &mut Fcfs) -> Option<Vec<Value>> + Send>;

/// A scheduler listening on a free loopback port. Every request it got is
/// kept, in order.
struct Peer {
    endpoint: String,
    heard: Arc<Mutex<Vec<Value>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    fn start(nb_res: usize, mut brain: Brain) -> Peer {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let (ep_tx, ep_rx) = std::sync::mpsc::channel();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let h = Arc::clone(&heard);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut socket = zeromq::RepSocket::new();
                let ep = socket.bind("tcp://127.0.0.1:0").await.unwrap();
                ep_tx.send(ep.to_string()).unwrap();
                let mut fcfs = Fcfs::new(nb_res);
                loop {
                    let msg = tokio::select! {
                        m = socket.recv() => m,
                        _ = &mut stop_rx => return,
                    };
                    let Ok(msg) = msg else { return };
                    let text = String::try_from(msg).unwrap();
                    let req: Value = serde_json::from_str(&text).unwrap();
                    h.lock().unwrap().push(req.clone());
                    match brain(&req, &mut fcfs) {
                        Some(events) => {
                            // A decision stamped later says the scheduler
                            // took that long.
                            let now = events
                                .iter()
                                .filter_map(|e| e["timestamp"].as_f64())
                                .fold(req["now"].as_f64().unwrap(), f64::max);
                            let reply = json!({"now": now, "events": events}).to_string();
                            socket.send(ZmqMessage::from(reply)).await.unwrap();
                        }
                        None => {
                            let _ = stop_rx.await;
                            return;
                        }
                    }
                }
            });
        });
        let endpoint = ep_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Peer {
            endpoint,
            heard,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Every event it heard, flattened, with the request's index.
    fn events(&self) -> Vec<(usize, Value)> {
        self.heard
            .lock()
            .unwrap()
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |e| (i, e.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Closes its socket: a scheduler that died.
    fn kill(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// First come, first served on the lowest free resource ids: the smallest
/// scheduler that decides anything.
struct Fcfs {
    free: Vec<bool>,
    queue: Vec<(String, usize)>,
    held: std::collections::HashMap<String, Vec<usize>>,
}

impl Fcfs {
    fn new(n: usize) -> Fcfs {
        Fcfs {
            free: vec![true; n],
            queue: Vec::new(),
            held: Default::default(),
        }
    }

    fn decide(&mut self, req: &Value) -> Vec<Value> {
        let now = req["now"].as_f64().unwrap();
        for e in req["events"].as_array().unwrap() {
            match e["type"].as_str().unwrap() {
                "JOB_SUBMITTED" => self.queue.push((
                    e["data"]["job_id"].as_str().unwrap().to_string(),
                    e["data"]["job"]["res"].as_u64().unwrap() as usize,
                )),
                "JOB_COMPLETED" => {
                    for r in self
                        .held
                        .remove(e["data"]["job_id"].as_str().unwrap())
                        .unwrap()
                    {
                        self.free[r] = true;
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        while let Some((job, res)) = self.queue.first().cloned() {
            let ids: Vec<usize> = (0..self.free.len())
                .filter(|&r| self.free[r])
                .take(res)
                .collect();
            if ids.len() < res {
                break;
            }
            for &r in &ids {
                self.free[r] = false;
            }
            let alloc = ids
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(" ");
            out.push(json!({"timestamp": now, "type": "EXECUTE_JOB",
                            "data": {"job_id": job, "alloc": alloc}}));
            self.held.insert(job, ids);
            self.queue.remove(0);
        }
        out
    }
}

/// A cluster of `nodes` nodes of 2 cores, whose policy is the scheduler at
/// `endpoint`.
fn config(dir: &std::path::Path, nodes: u32, endpoint: &str, local: bool) -> String {
    config_unit(dir, nodes, endpoint, local, "core")
}

/// [`config`] with a resource being a `unit` ("core" or "node").
fn config_unit(
    dir: &std::path::Path,
    nodes: u32,
    endpoint: &str,
    local: bool,
    unit: &str,
) -> String {
    // A message at every event, as Batsim sends them.
    config_text(
        dir,
        &format!("n[1-{nodes}]"),
        2,
        local,
        &format!(
            "policy = \"batsim\"\n\n\
             [batsim]\nendpoint = \"{endpoint}\"\nreply_timeout_s = 2\nunit = \"{unit}\"\n"
        ),
    )
    .replace("schedule_interval_s = 0.005", "schedule_interval_s = 0")
}

fn twin(nodes: u32, endpoint: &str, jobs: &[(i64, u32, i64)]) -> controller::sim::SimRun {
    twin_unit(nodes, endpoint, "core", jobs)
}

fn twin_unit(
    nodes: u32,
    endpoint: &str,
    unit: &str,
    jobs: &[(i64, u32, i64)],
) -> controller::sim::SimRun {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    let text = config_unit(dir.path(), nodes, endpoint, true, unit);
    let c = controller::config::Cluster::from_str(&text, &path).unwrap();
    let jobs: Vec<SimJob> = jobs
        .iter()
        .map(|&(at, cores, run)| SimJob {
            spec: JobSpec {
                cores,
                runtime_ns: (run * S) as u64,
                walltime_ns: 0,
                ..Default::default()
            },
            submit_ns: at * S,
            cancel_ns: None,
            after: None,
        })
        .collect();
    simulate(Arc::new(c), &jobs, 1_000 * S)
}

/// A scheduler that starts every job as it arrives on the resources
/// `alloc`, whoever holds them.
fn all_on(alloc: &'static str) -> Brain {
    Box::new(move |req, _| {
        let now = req["now"].as_f64().unwrap();
        Some(
            req["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["type"] == "JOB_SUBMITTED")
                .map(|e| {
                    json!({"timestamp": now, "type": "EXECUTE_JOB",
                           "data": {"job_id": e["data"]["job_id"], "alloc": alloc}})
                })
                .collect(),
        )
    })
}

fn kinds(events: &[(usize, Value)]) -> Vec<String> {
    events
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_twin_follows_the_scheduler_and_speaks_batsim() {
    let peer = Peer::start(4, Box::new(|req, f| Some(f.decide(req))));
    // Two nodes of 2 cores: 4 resources. Job 2 (4 cores) waits for job 1.
    let run = twin(2, &peer.endpoint, &[(0, 2, 10), (1, 4, 5), (2, 2, 3)]);
    assert_eq!(run.failure, None);
    assert_eq!(run.records.len(), 3);
    let start = |id: u64| {
        let r = run.records.iter().find(|r| r.id == id).unwrap();
        (r.start - 1_000 * S) as f64 / 1e9
    };
    // FCFS: job 2 starts when job 1 ends at 10, job 3 behind it at 15.
    assert!((start(1) - 0.0).abs() < 1e-3, "{}", start(1));
    assert!((start(2) - 10.0).abs() < 1e-3, "{}", start(2));
    assert!((start(3) - 15.0).abs() < 1e-3, "{}", start(3));
    drop(run);

    let ev = peer.events();
    let heard = peer.heard.lock().unwrap().clone();
    // SIMULATION_BEGINS alone in the first message, with the fields
    // pybatsim reads.
    assert_eq!(heard[0]["events"].as_array().unwrap().len(), 1);
    let begins = &heard[0]["events"][0];
    assert_eq!(begins["type"], "SIMULATION_BEGINS");
    assert_eq!(begins["data"]["nb_resources"], 4);
    assert_eq!(begins["data"]["compute_resources"][3]["name"], "n2/1");
    assert!(begins["data"]["config"]["profiles-forwarded-on-submission"].as_bool() == Some(true));
    // Every job submitted once, completed once, in that order; the
    // simulation ends last.
    let k = kinds(&ev);
    for job in ["w0!1", "w0!2", "w0!3"] {
        let at = |kind: &str| -> Vec<usize> {
            ev.iter()
                .enumerate()
                .filter(|(_, (_, e))| e["type"] == kind && e["data"]["job_id"] == job)
                .map(|(i, _)| i)
                .collect()
        };
        let (sub, done) = (at("JOB_SUBMITTED"), at("JOB_COMPLETED"));
        assert!(
            sub.len() == 1 && done.len() == 1 && sub[0] < done[0],
            "{job}: {k:?}"
        );
    }
    assert_eq!(k.last().unwrap(), "SIMULATION_ENDS");
    let completed: Vec<&Value> = ev
        .iter()
        .map(|(_, e)| e)
        .filter(|e| e["type"] == "JOB_COMPLETED")
        .collect();
    assert_eq!(completed[0]["data"]["job_id"], "w0!1");
    assert_eq!(completed[0]["data"]["job_state"], "COMPLETED_SUCCESSFULLY");
    assert_eq!(completed[0]["data"]["alloc"], "0-1");
    assert_eq!(completed[1]["data"]["alloc"], "0-3");
    // Submissions carry their delay profile; times are the trace's.
    let sub2 = ev
        .iter()
        .map(|(_, e)| e)
        .find(|e| e["type"] == "JOB_SUBMITTED" && e["data"]["job_id"] == "w0!2")
        .unwrap();
    assert_eq!(sub2["data"]["profile"]["delay"], 5.0);
    assert_eq!(sub2["data"]["job"]["res"], 4);
    // No request's now is earlier than the last one's, and no event's
    // timestamp is later than its request's now.
    let mut last = 0.0;
    for m in &heard {
        let now = m["now"].as_f64().unwrap();
        assert!(now >= last, "now went back: {heard:?}");
        last = now;
        for e in m["events"].as_array().unwrap() {
            assert!(e["timestamp"].as_f64().unwrap() <= now + 1e-9, "{m}");
        }
    }
    // And the twin tells the scheduler no more job will come.
    assert!(
        ev.iter()
            .any(|(_, e)| e["type"] == "NOTIFY"
                && e["data"]["type"] == "no_more_static_job_to_submit")
    );
}

#[test]
fn a_decision_that_overbooks_ends_the_run_naming_the_resource() {
    // Every job on resources 0 and 1, whoever holds them.
    let peer = Peer::start(4, all_on("0-1"));
    let run = twin(2, &peer.endpoint, &[(0, 2, 10), (1, 2, 5)]);
    let why = run.failure.unwrap();
    assert!(
        why.contains("EXECUTE_JOB w0!2: resource 0 is held by w0!1"),
        "{why}"
    );
    // The job it started ran to its end and kept its record.
    assert_eq!(run.records.len(), 1);
    assert_eq!(run.records[0].id, 1);
}

#[test]
fn an_unknown_decision_ends_the_run_naming_it() {
    let peer = Peer::start(
        4,
        Box::new(|req, _| {
            let now = req["now"].as_f64().unwrap();
            Some(vec![json!({"timestamp": now, "type": "SET_RESOURCE_STATE",
                             "data": {"resources": "0", "state": "1"}})])
        }),
    );
    let run = twin(2, &peer.endpoint, &[(0, 2, 10)]);
    let why = run.failure.unwrap();
    assert!(
        why.contains("SET_RESOURCE_STATE: clemu does not carry out SET_RESOURCE_STATE"),
        "{why}"
    );
    assert!(why.contains(&peer.endpoint), "{why}");
    assert!(run.records.is_empty());
}

#[test]
fn a_scheduler_that_stops_answering_ends_the_run() {
    // It answers SIMULATION_BEGINS, then never again.
    let mut n = 0;
    let peer = Peer::start(
        4,
        Box::new(move |_, _| {
            n += 1;
            (n == 1).then(Vec::new)
        }),
    );
    let t = std::time::Instant::now();
    let run = twin(2, &peer.endpoint, &[(0, 2, 10)]);
    let why = run.failure.unwrap();
    assert!(why.contains("did not answer within 2.0 s"), "{why}");
    assert!(t.elapsed() < Duration::from_secs(30));
}

#[test]
fn the_emulation_goes_on_when_the_scheduler_dies() {
    let dir = tempfile::tempdir().unwrap();
    // Two nodes of 2 cores; the scheduler starts jobs 1 and 2 (2 cores
    // each, 4 s), and dies before it could start jobs 3 and 4.
    let mut peer = Peer::start(4, Box::new(|req, f| Some(f.decide(req))));
    let text = config(dir.path(), 2, &peer.endpoint, true);
    let c = Cluster::start_text(dir, &text);
    let ids = c.ok(&["submit", "--cores", "2", "--runtime", "4", "--count", "4"]);
    let ids: Vec<&str> = ids.lines().collect();
    c.wait_for("two jobs to run", || {
        c.job(ids[1].parse().unwrap())["state"] == "running"
    });
    // The keepalive: while nothing happens, an empty message every second.
    std::thread::sleep(Duration::from_millis(2500));
    let empties = peer
        .heard
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["events"].as_array().unwrap().is_empty())
        .count();
    assert!(empties >= 1, "no keepalive in 2.5 s");
    peer.kill();
    // The running jobs end normally with their records; the waiting ones
    // are cancelled, and no job is accepted any more.
    // (`wait` says which jobs did not complete, and fails.)
    let waited = c.ctl(&["wait", ids[0], ids[1], ids[2], ids[3]]);
    let waited = String::from_utf8_lossy(&waited.stderr);
    let state = |i: usize| c.job(ids[i].parse().unwrap())["state"].clone();
    assert_eq!(state(0), "completed", "{waited}");
    assert_eq!(state(1), "completed");
    assert_eq!(state(2), "cancelled");
    assert_eq!(state(3), "cancelled");
    let refused = c.ctl(&["submit", "--cores", "1", "--runtime", "1"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no scheduler"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert!(
        stats["scheduler_failure"]
            .as_str()
            .unwrap()
            .contains(&peer.endpoint),
        "{stats}"
    );
    assert!(stats["scheduler"]["messages"].as_u64().unwrap() >= 3);
    let records = c.records();
    assert_eq!(records.len(), 2, "{records:?}");
    for id in &ids {
        assert!(
            c.pids(id.parse().unwrap()).is_empty(),
            "job {id} left a process"
        );
    }
}

#[test]
fn the_emulation_says_no_more_jobs_once_the_held_ones_are_in() {
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(4, Box::new(|req, f| Some(f.decide(req))));
    let text = config(dir.path(), 2, &peer.endpoint, true);
    let c = Cluster::start_text(dir, &text);
    let first = c.ok(&["submit", "--cores", "2", "--runtime", "2"]);
    let first = first.trim();
    let held = c.ok(&["submit", "--cores", "2", "--runtime", "1", "--after", first]);
    let held = held.trim();
    // Said while a job is still held for the first: not passed on yet.
    c.ok(&["no-more-jobs"]);
    std::thread::sleep(Duration::from_millis(500));
    let notices = |ev: &[(usize, Value)]| {
        ev.iter()
            .enumerate()
            .filter(|(_, (_, e))| {
                e["type"] == "NOTIFY" && e["data"]["type"] == "no_more_static_job_to_submit"
            })
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    assert!(notices(&peer.events()).is_empty(), "{:?}", peer.events());
    c.ok(&["wait", first, held]);
    std::thread::sleep(Duration::from_millis(500));
    let ev = peer.events();
    let told = notices(&ev);
    assert_eq!(told.len(), 1, "{ev:?}");
    let submitted = ev
        .iter()
        .position(|(_, e)| {
            e["type"] == "JOB_SUBMITTED"
                && e["data"]["job_id"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("!{held}"))
        })
        .unwrap();
    assert!(submitted < told[0], "{ev:?}");
}

#[test]
fn a_twin_left_with_waiting_jobs_says_so() {
    // A scheduler that answers every message and starts nothing: Batsim
    // would be stuck; the twin ends with the reason.
    let peer = Peer::start(4, Box::new(|_, _| Some(Vec::new())));
    let run = twin(2, &peer.endpoint, &[(0, 2, 10), (5, 1, 1)]);
    let why = run.failure.unwrap();
    assert!(
        why.contains("2 job(s) never ended (the first: job 1)"),
        "{why}"
    );
    assert!(run.records.is_empty());
    let states: Vec<&str> = run.infos.iter().map(|j| j.state.as_str()).collect();
    assert_eq!(states, ["pending", "pending"]);
}

#[test]
fn jobs_a_dead_scheduler_suspended_are_cancelled_with_their_records() {
    // It starts job 1, suspends it for job 2 (the extension), then never
    // answers again.
    let mut n = 0;
    let peer = Peer::start(
        4,
        Box::new(move |req, _| {
            n += 1;
            let now = req["now"].as_f64().unwrap();
            let ev =
                |kind: &str, data: Value| json!({"timestamp": now, "type": kind, "data": data});
            let submitted: Vec<&str> = req["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["type"] == "JOB_SUBMITTED")
                .map(|e| e["data"]["job_id"].as_str().unwrap())
                .collect();
            match submitted.as_slice() {
                ["w0!1"] => Some(vec![ev(
                    "EXECUTE_JOB",
                    json!({"job_id": "w0!1", "alloc": "0-3"}),
                )]),
                ["w0!2"] => Some(vec![
                    ev("SUSPEND_JOB", json!({"job_id": "w0!1"})),
                    ev("EXECUTE_JOB", json!({"job_id": "w0!2", "alloc": "0-3"})),
                ]),
                _ if n <= 3 => Some(Vec::new()),
                _ => None,
            }
        }),
    );
    let run = twin(2, &peer.endpoint, &[(0, 4, 100), (10, 4, 5), (20, 4, 5)]);
    assert!(run.failure.unwrap().contains("did not answer"));
    let rec = |id: u64| run.records.iter().find(|r| r.id == id).unwrap();
    // Job 2 ran to its end; job 1, suspended, and job 3, never started,
    // were cancelled: 1 with its record, its suspension in it.
    assert_eq!(rec(2).status, formats::record::Status::Completed);
    assert_eq!(rec(1).status, formats::record::Status::Cancelled);
    assert_eq!(rec(1).suspensions.len(), 1);
    let states: Vec<&str> = run.infos.iter().map(|j| j.state.as_str()).collect();
    assert_eq!(states, ["cancelled", "completed", "cancelled"]);
    let heard = peer.events();
    assert!(heard
        .iter()
        .any(|(_, e)| e["type"] == "JOB_SUSPENDED" && e["data"]["job_id"] == "w0!1"));
}

#[test]
fn a_kill_is_answered_once_the_job_is_over_with_its_progress() {
    // Job 1 (10 s) starts at 0; when job 2 arrives at 4 s, the scheduler
    // kills job 1 and starts job 2 once JOB_KILLED says it is gone.
    let peer = Peer::start(
        4,
        Box::new(|req, _| {
            let now = req["now"].as_f64().unwrap();
            let ev =
                |kind: &str, data: Value| json!({"timestamp": now, "type": kind, "data": data});
            let mut out = Vec::new();
            for e in req["events"].as_array().unwrap() {
                match (e["type"].as_str().unwrap(), e["data"]["job_id"].as_str()) {
                    ("JOB_SUBMITTED", Some("w0!1")) => {
                        out.push(ev("EXECUTE_JOB", json!({"job_id": "w0!1", "alloc": "0-3"})))
                    }
                    ("JOB_SUBMITTED", Some("w0!2")) => {
                        out.push(ev("KILL_JOB", json!({"job_ids": ["w0!1"]})))
                    }
                    ("JOB_KILLED", _) => {
                        out.push(ev("EXECUTE_JOB", json!({"job_id": "w0!2", "alloc": "0-3"})))
                    }
                    _ => {}
                }
            }
            Some(out)
        }),
    );
    let run = twin(2, &peer.endpoint, &[(0, 4, 10), (4, 4, 1)]);
    assert_eq!(run.failure, None);
    let ev = peer.events();
    let killed = ev
        .iter()
        .map(|(_, e)| e)
        .find(|e| e["type"] == "JOB_KILLED")
        .unwrap();
    assert_eq!(killed["data"]["job_ids"], json!(["w0!1"]));
    let p = killed["data"]["job_progress"]["w0!1"]["progress"]
        .as_f64()
        .unwrap();
    assert!((p - 0.4).abs() < 1e-6, "progress {p}");
    let completed = ev
        .iter()
        .map(|(_, e)| e)
        .find(|e| e["type"] == "JOB_COMPLETED" && e["data"]["job_id"] == "w0!1")
        .unwrap();
    assert_eq!(completed["data"]["job_state"], "COMPLETED_KILLED");
    let rec = |id: u64| run.records.iter().find(|r| r.id == id).unwrap();
    assert_eq!(rec(1).status, formats::record::Status::Cancelled);
    assert_eq!(rec(2).status, formats::record::Status::Completed);
    assert_eq!(rec(2).start, rec(1).end);
}

#[test]
fn with_whole_nodes_as_resources_a_job_asks_for_the_nodes_its_cores_fill() {
    // Three nodes of 2 cores, a resource per node: a 3-core job asks for 2.
    let peer = Peer::start(3, Box::new(|req, f| Some(f.decide(req))));
    let run = twin_unit(3, &peer.endpoint, "node", &[(0, 3, 10), (1, 2, 5)]);
    assert_eq!(run.failure, None);
    let ev = peer.events();
    let begins = &ev[0].1;
    assert_eq!(begins["data"]["nb_resources"], 3);
    assert_eq!(begins["data"]["compute_resources"][2]["name"], "n3");
    let res: Vec<u64> = ev
        .iter()
        .filter(|(_, e)| e["type"] == "JOB_SUBMITTED")
        .map(|(_, e)| e["data"]["job"]["res"].as_u64().unwrap())
        .collect();
    assert_eq!(res, [2, 1]);
    // Job 1 on nodes 1 and 2 (2 cores, then 1), job 2 on node 3 at once.
    let infos: Vec<(&str, i64)> = run
        .infos
        .iter()
        .map(|j| (j.nodes.as_str(), j.start_ns))
        .collect();
    assert_eq!(infos[0].0, "n[1-2]");
    assert_eq!(infos[1].0, "n3");
    assert_eq!(infos[1].1 - infos[0].1, S);
}

#[test]
fn suspension_resumption_rejection_and_calls_in_the_twin() {
    // Job 1 (4 cores, 10 s) starts at 0; job 2 (4 cores, 2 s) arrives at
    // 1, and the scheduler, taking half a second to decide, suspends job 1
    // for it at 1.5; job 3 is rejected; job 1 resumes when 2 is over, and
    // a call asked for 20 s comes then.
    let peer = Peer::start(
        4,
        Box::new(|req, _| {
            let now = req["now"].as_f64().unwrap();
            let ev = |t: f64, kind: &str, data: Value| json!({"timestamp": t, "type": kind, "data": data});
            let mut out = Vec::new();
            for e in req["events"].as_array().unwrap() {
                match (e["type"].as_str().unwrap(), e["data"]["job_id"].as_str()) {
                    ("JOB_SUBMITTED", Some("w0!1")) => {
                        out.push(ev(
                            now,
                            "EXECUTE_JOB",
                            json!({"job_id": "w0!1", "alloc": "0-3"}),
                        ));
                        out.push(ev(now, "CALL_ME_LATER", json!({"timestamp": 20.0})));
                    }
                    ("JOB_SUBMITTED", Some("w0!2")) => {
                        out.push(ev(now + 0.5, "SUSPEND_JOB", json!({"job_id": "w0!1"})));
                        out.push(ev(
                            now + 0.5,
                            "EXECUTE_JOB",
                            json!({"job_id": "w0!2", "alloc": "0-3"}),
                        ));
                    }
                    ("JOB_SUBMITTED", Some("w0!3")) => {
                        out.push(ev(now, "REJECT_JOB", json!({"job_id": "w0!3"})))
                    }
                    ("JOB_COMPLETED", Some("w0!2")) => {
                        out.push(ev(now, "RESUME_JOB", json!({"job_id": "w0!1"})))
                    }
                    _ => {}
                }
            }
            Some(out)
        }),
    );
    let run = twin(2, &peer.endpoint, &[(0, 4, 10), (1, 4, 2), (2, 1, 1)]);
    assert_eq!(run.failure, None);
    let rec = |id: u64| run.records.iter().find(|r| r.id == id).unwrap();
    let at = |ns: i64| (ns - 1_000 * S) as f64 / 1e9;
    assert_eq!(rec(1).suspensions.len(), 1);
    let s = &rec(1).suspensions[0];
    assert!((at(s.suspend) - 1.5).abs() < 1e-3 && (at(s.resume) - 3.5).abs() < 1e-3);
    assert!((at(rec(1).end) - 12.0).abs() < 1e-3, "{}", at(rec(1).end));
    assert!((at(rec(2).start) - 1.5).abs() < 1e-3);
    assert!(run.records.iter().all(|r| r.id != 3), "job 3 never ran");
    assert_eq!(run.infos[2].state.as_str(), "cancelled");
    let ev = peer.events();
    let stamp = |kind: &str| -> Vec<f64> {
        ev.iter()
            .filter(|(_, e)| e["type"] == kind)
            .map(|(_, e)| e["timestamp"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(stamp("JOB_SUSPENDED").len(), 1);
    assert_eq!(stamp("JOB_RESUMED").len(), 1);
    assert_eq!(stamp("REQUESTED_CALL"), [20.0]);
    // A rejected job never completes, for the scheduler.
    assert!(!ev
        .iter()
        .any(|(_, e)| e["type"] == "JOB_COMPLETED" && e["data"]["job_id"] == "w0!3"));
}

#[test]
fn a_decision_the_cluster_refuses_ends_the_scheduler_clearly() {
    // The scheduler puts every job on the last node, which an
    // administrator drained: the cluster refuses the start.
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(4, all_on("2-3"));
    let text = config(dir.path(), 2, &peer.endpoint, true);
    let c = Cluster::start_text(dir, &text);
    c.ok(&["drain", "n2", "--reason", "test"]);
    let id = c.submit(&["--cores", "2", "--runtime", "5"])[0];
    c.wait_state(id, "cancelled");
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    let why = stats["scheduler_failure"].as_str().unwrap();
    assert!(
        why.contains("the cluster refused its decision") && why.contains(&format!("job {id}")),
        "{why}"
    );
}
