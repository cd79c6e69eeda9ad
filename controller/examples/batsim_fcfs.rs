//! The smallest useful Batsim scheduler: first come, first served on the
//! lowest free resources, over Batsim's protocol (a ZeroMQ REP socket,
//! JSON messages). scripts/bench-batsim.sh uses it to measure what the
//! protocol itself costs, since it decides in next to no time.
//!
//!     cargo run --release -p controller --example batsim_fcfs -- tcp://127.0.0.1:28000
//!
//! It exits when clemu says SIMULATION_ENDS, printing what it exchanged.

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::{json, Value};
use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

#[derive(Default)]
struct Fcfs {
    free: BTreeSet<u32>,
    queue: VecDeque<(String, usize)>,
    held: HashMap<String, Vec<u32>>,
}

impl Fcfs {
    fn hear(&mut self, e: &Value) -> Result<bool, String> {
        let data = &e["data"];
        match e["type"].as_str().unwrap_or_default() {
            "SIMULATION_BEGINS" => {
                let n = data["nb_resources"].as_u64().ok_or("no nb_resources")?;
                self.free = (0..n as u32).collect();
            }
            "JOB_SUBMITTED" => {
                let id = data["job_id"].as_str().ok_or("no job_id")?;
                let res = data["job"]["res"].as_u64().ok_or("no res")?;
                self.queue.push_back((id.to_string(), res as usize));
            }
            "JOB_COMPLETED" => {
                let id = data["job_id"].as_str().ok_or("no job_id")?;
                self.free.extend(self.held.remove(id).unwrap_or_default());
            }
            "SIMULATION_ENDS" => return Ok(true),
            _ => {}
        }
        Ok(false)
    }

    fn decide(&mut self, now: f64, out: &mut Vec<Value>) {
        while let Some((_, res)) = self.queue.front() {
            if *res > self.free.len() {
                break;
            }
            let (id, res) = self.queue.pop_front().expect("looked at");
            let alloc: Vec<u32> = self.free.iter().copied().take(res).collect();
            for r in &alloc {
                self.free.remove(r);
            }
            out.push(json!({"timestamp": now, "type": "EXECUTE_JOB",
                            "data": {"job_id": id, "alloc": formats::intervals::format(&alloc)}}));
            self.held.insert(id, alloc);
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let endpoint = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tcp://127.0.0.1:28000".into());
    let mut socket = zeromq::RepSocket::new();
    socket
        .bind(&endpoint)
        .await
        .map_err(|e| format!("cannot bind {endpoint}: {e}"))?;
    let mut fcfs = Fcfs::default();
    let (mut messages, mut heard, mut said) = (0u64, 0u64, 0u64);
    loop {
        let msg = socket.recv().await.map_err(|e| e.to_string())?;
        let text = String::try_from(msg).map_err(|e| e.to_string())?;
        let req: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let now = req["now"].as_f64().ok_or("no now")?;
        let mut ends = false;
        for e in req["events"].as_array().ok_or("no events")? {
            heard += 1;
            ends |= fcfs.hear(e)?;
        }
        let mut out = Vec::new();
        if !ends {
            fcfs.decide(now, &mut out);
        }
        said += out.len() as u64;
        messages += 1;
        let reply = json!({"now": now, "events": out}).to_string();
        socket
            .send(ZmqMessage::from(reply))
            .await
            .map_err(|e| e.to_string())?;
        if ends {
            eprintln!("batsim_fcfs: {messages} messages, {heard} events heard, {said} decisions");
            return Ok(());
        }
    }
}
