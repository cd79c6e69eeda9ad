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

/// The orders of a reply with their timestamps, in the reply's order;
/// `resources` is how many there are, which allocations must stay within.
pub fn orders(reply: &Message, resources: u32) -> Result<Vec<(f64, Order)>, String> {
    if !reply.now.is_finite() || reply.now < 0.0 {
        return Err(format!("the reply's now ({}) is not a time", reply.now));
    }
    let mut out = Vec::with_capacity(reply.events.len());
    let mut last = f64::NEG_INFINITY;
    for e in &reply.events {
        // As Batsim requires: in order, and none after the reply's now
        // (the time the scheduler says it finished deciding).
        if !e.timestamp.is_finite() || e.timestamp < last || e.timestamp > reply.now {
            return Err(format!(
                "{} at {}: event timestamps must be in ascending order and not after the \
                 message's now ({})",
                e.kind, e.timestamp, reply.now
            ));
        }
        last = e.timestamp;
        out.push((
            e.timestamp,
            order(e, resources).map_err(|m| format!("{}: {m}", e.kind))?,
        ));
    }
    Ok(out)
}

fn order(e: &Event, resources: u32) -> Result<Order, String> {
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
                alloc: formats::intervals::parse(alloc, resources)?,
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
    fn replies_are_checked_and_name_the_event() {
        let m: Message = serde_json::from_str(
            r#"{"now": 2, "events": [
                {"timestamp": 1, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "0-1"}},
                {"timestamp": 1, "type": "CALL_ME_LATER", "data": {"timestamp": 9.5}},
                {"timestamp": 2, "type": "KILL_JOB", "data": {"job_ids": ["w0!2"]}}]}"#,
        )
        .unwrap();
        let o = orders(&m, 8).unwrap();
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
        assert!(orders(&bad, 8)
            .unwrap_err()
            .starts_with("SET_RESOURCE_STATE: clemu does not"));
        let late: Message = serde_json::from_str(
            r#"{"now": 3, "events": [{"timestamp": 2, "type": "REJECT_JOB", "data": {"job_id": "w0!1"}},
                {"timestamp": 1, "type": "REJECT_JOB", "data": {"job_id": "w0!2"}}]}"#,
        )
        .unwrap();
        assert!(orders(&late, 8).unwrap_err().contains("ascending"));
        let ahead: Message = serde_json::from_str(
            r#"{"now": 3, "events": [{"timestamp": 4, "type": "REJECT_JOB", "data": {"job_id": "w0!1"}}]}"#,
        )
        .unwrap();
        assert!(orders(&ahead, 8)
            .unwrap_err()
            .contains("not after the message's now (3)"));
        let outside: Message = serde_json::from_str(
            r#"{"now": 3, "events": [{"timestamp": 1, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "0-4294967295"}}]}"#,
        )
        .unwrap();
        assert!(orders(&outside, 8).unwrap_err().contains("there are 8"));
    }
}
