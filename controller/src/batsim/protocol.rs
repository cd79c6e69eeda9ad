//! Batsim 4's messages as they cross the socket: `{"now": t, "events":
//! [...]}` in both directions, and resource interval sets (`"0-3 8"`).
//! Parsing a reply checks what clemu relies on and names the event that
//! breaks it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    pub now: f64,
    #[serde(default)]
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub timestamp: f64,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub data: Value,
}

impl Event {
    pub fn new(timestamp: f64, kind: &str, data: Value) -> Event {
        Event {
            timestamp,
            kind: kind.to_string(),
            data,
        }
    }
}

/// A decision of the scheduler, checked for shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Order {
    Execute {
        job: String,
        alloc: Vec<u32>,
    },
    Reject(String),
    Kill(Vec<String>),
    CallMeLater(f64),
    /// A NOTIFY clemu has nothing to do for (`registration_finished`).
    Notified,
    /// clemu's extension: suspend a running job, resume a suspended one.
    Suspend(String),
    Resume(String),
}

/// The orders of a reply with their timestamps, in the reply's order.
pub fn orders(reply: &Message) -> Result<Vec<(f64, Order)>, String> {
    let mut out = Vec::with_capacity(reply.events.len());
    let mut last = f64::NEG_INFINITY;
    for e in &reply.events {
        if !e.timestamp.is_finite() || e.timestamp < last {
            return Err(format!(
                "{} at {}: event timestamps must be finite and in ascending order",
                e.kind, e.timestamp
            ));
        }
        last = e.timestamp;
        out.push((
            e.timestamp,
            order(e).map_err(|m| format!("{}: {m}", e.kind))?,
        ));
    }
    Ok(out)
}

fn order(e: &Event) -> Result<Order, String> {
    let job_id = || -> Result<String, String> {
        e.data
            .get("job_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "data.job_id (a string) is missing".to_string())
    };
    Ok(match e.kind.as_str() {
        "EXECUTE_JOB" => {
            let alloc = e
                .data
                .get("alloc")
                .and_then(Value::as_str)
                .ok_or("data.alloc (an interval set) is missing")?;
            if e.data.get("additional_io_job").is_some() {
                return Err("additional_io_job is not supported".into());
            }
            Order::Execute {
                job: job_id()?,
                alloc: parse_set(alloc)?,
            }
        }
        "REJECT_JOB" => Order::Reject(job_id()?),
        "KILL_JOB" => {
            let ids = e
                .data
                .get("job_ids")
                .and_then(Value::as_array)
                .ok_or("data.job_ids (a list) is missing")?;
            let ids = ids
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("data.job_ids must hold strings")?;
            Order::Kill(ids)
        }
        "CALL_ME_LATER" => {
            let t = e
                .data
                .get("timestamp")
                .and_then(Value::as_f64)
                .ok_or("data.timestamp (a number) is missing")?;
            Order::CallMeLater(t)
        }
        "NOTIFY" => match e.data.get("type").and_then(Value::as_str) {
            Some("registration_finished" | "continue_registration") => Order::Notified,
            Some(other) => return Err(format!("unknown type {other:?}")),
            None => return Err("data.type is missing".into()),
        },
        "SUSPEND_JOB" => Order::Suspend(job_id()?),
        "RESUME_JOB" => Order::Resume(job_id()?),
        other => {
            return Err(format!(
                "clemu does not carry out {other} (it honours EXECUTE_JOB, REJECT_JOB, \
                 KILL_JOB, CALL_ME_LATER, NOTIFY, SUSPEND_JOB and RESUME_JOB)"
            ))
        }
    })
}

/// `"0-3 8"` → [0, 1, 2, 3, 8], sorted, each once.
pub fn parse_set(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split_whitespace() {
        let bad = || format!("bad interval {part:?} in {s:?}");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if b < a {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    let n = out.len();
    out.dedup();
    if out.len() != n {
        return Err(format!("interval set {s:?} names a resource twice"));
    }
    Ok(out)
}

/// Sorted resource ids → `"0-3 8"`.
pub fn format_set(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        if i == j {
            out.push_str(&ids[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", ids[i], ids[j]));
        }
        i = j + 1;
    }
    out
}

/// `SIMULATION_BEGINS`'s data, with the fields pybatsim reads.
pub fn simulation_begins(resources: &[(String, u32)]) -> Value {
    let compute: Vec<Value> = resources
        .iter()
        .map(|(name, id)| json!({"id": id, "name": name, "state": "idle", "properties": {}, "zone_properties": {}}))
        .collect();
    json!({
        "nb_resources": resources.len(),
        "nb_compute_resources": resources.len(),
        "nb_storage_resources": 0,
        "allow_compute_sharing": false,
        "allow_storage_sharing": false,
        "config": {
            "redis-enabled": false,
            "redis-hostname": "127.0.0.1",
            "redis-port": 6379,
            "redis-prefix": "default",
            "profiles-forwarded-on-submission": true,
            "dynamic-jobs-enabled": false,
            "dynamic-jobs-acknowledged": false,
            "profile-reuse-enabled": false,
            "forward-unknown-events": false,
            "sched-config": ""
        },
        "compute_resources": compute,
        "storage_resources": [],
        "workloads": {super::WORKLOAD: "clemu"},
        "profiles": {super::WORKLOAD: {}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_sets_round_trip() {
        assert_eq!(parse_set("0-3 8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_set(" 5 1-2 ").unwrap(), vec![1, 2, 5]);
        assert_eq!(format_set(&[0, 1, 2, 3, 8, 10, 11]), "0-3 8 10-11");
        assert_eq!(format_set(&[]), "");
        assert!(parse_set("3-1").is_err());
        assert!(parse_set("0-3 2").unwrap_err().contains("twice"));
        assert!(parse_set("a").unwrap_err().contains("\"a\""));
    }

    #[test]
    fn replies_are_checked_and_name_the_event() {
        let m: Message = serde_json::from_str(
            r#"{"now": 2, "events": [
                {"timestamp": 1, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "0-1"}},
                {"timestamp": 1, "type": "CALL_ME_LATER", "data": {"timestamp": 9.5}},
                {"timestamp": 2, "type": "KILL_JOB", "data": {"job_ids": ["w0!2"]}}]}"#,
        )
        .unwrap();
        let o = orders(&m).unwrap();
        assert_eq!(
            o[0].1,
            Order::Execute {
                job: "w0!1".into(),
                alloc: vec![0, 1]
            }
        );
        assert_eq!(o[1].1, Order::CallMeLater(9.5));
        assert_eq!(o[2].1, Order::Kill(vec!["w0!2".into()]));
        let bad: Message = serde_json::from_str(
            r#"{"now": 0, "events": [{"timestamp": 0, "type": "SET_RESOURCE_STATE", "data": {}}]}"#,
        )
        .unwrap();
        assert!(orders(&bad)
            .unwrap_err()
            .starts_with("SET_RESOURCE_STATE: clemu does not"));
        let late: Message = serde_json::from_str(
            r#"{"now": 3, "events": [{"timestamp": 2, "type": "REJECT_JOB", "data": {"job_id": "w0!1"}},
                {"timestamp": 1, "type": "REJECT_JOB", "data": {"job_id": "w0!2"}}]}"#,
        )
        .unwrap();
        assert!(orders(&late).unwrap_err().contains("ascending"));
    }
}
