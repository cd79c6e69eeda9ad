//! Bring your own scheduler: clemu plays Batsim's side of Batsim 4's
//! protocol (JSON over ZeroMQ), so a scheduler written for Batsim
//! (pybatsim, batsched) takes every decision of the emulation and of the
//! twin. docs/batsim.md is the user's side.
//!
//! # How it works
//!
//! `policy = "batsim"` makes the [`Bridge`] the cluster's policy. It asks
//! the core for every change ([`crate::policy::Policy::wants_events`]), so
//! each scheduling pass hands it what happened since the last one:
//! submissions, ends, suspensions. The bridge turns them into Batsim
//! events, sends them in one request over its [`link::Link`] and waits for
//! the reply, whose decisions ([`protocol::Order`]) it checks against its
//! own map of which resource each job holds and returns as the pass's
//! decisions. The core carries them out as any policy's. A decision
//! stamped later than the request waits for its time, and `CALL_ME_LATER`
//! becomes the pass's wake-up; both run through the core's one scheduler
//! driver.
//!
//! In the twin the pass, and so virtual time, waits for each reply, as in
//! Batsim. In the emulation the wait is real; the bridge also sends an
//! empty message every second while nothing happens, since pybatsim gives
//! up after two. A scheduler that fails or stops answering ends the
//! policy ([`crate::policy::Policy::failure`]): nothing more starts, and
//! what runs goes on to its end.

mod bridge;
mod link;
pub mod protocol;

pub use bridge::Bridge;

use std::time::Duration;

/// The workload name before the `!` of every job id clemu sends.
pub const WORKLOAD: &str = "w0";

/// What a Batsim resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unit {
    /// One core; resources are numbered node by node.
    #[default]
    Core,
    /// A whole node.
    Node,
}

/// The `[batsim]` section of a config.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The scheduler's REP socket.
    pub endpoint: String,
    pub unit: Unit,
    /// Wall-clock seconds per Batsim second: a replay's time-shrinking
    /// (`runworkload` sets it), 1 otherwise.
    pub wall_per_second: f64,
    /// How long a reply may take before the scheduler counts as gone.
    pub reply_timeout: Duration,
    /// The nodes in order: name and cores.
    pub nodes: Vec<(String, u32)>,
}

pub const DEFAULT_ENDPOINT: &str = "tcp://127.0.0.1:28000";
