//! An external scheduler's figures (`policy = "batsim"`), as the
//! controller reports them in its stats and a run's manifest keeps them.

use serde::{Deserialize, Serialize};

/// An external scheduler's side of a run (`policy = "batsim"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedulerReport {
    /// Where it listened.
    pub endpoint: String,
    /// Requests sent, each answered by one reply.
    pub messages: u64,
    /// From a request sent to its reply read, milliseconds.
    pub reply_ms: Latency,
    /// Why it stopped deciding, if it did.
    pub failure: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}
