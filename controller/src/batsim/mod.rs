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

use serde::Deserialize;

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

/// `[batsim]`: the external scheduler of `policy = "batsim"`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub endpoint: Option<String>,
    /// "core" (default) or "node": what one Batsim resource is.
    pub unit: Option<String>,
    /// Seconds a reply may take before the scheduler counts as gone.
    pub reply_timeout_s: Option<f64>,
}

impl Settings {
    /// The settings of a config's `[batsim]` section (absent: the
    /// defaults), checked against its nodes (name and cores, in order).
    pub fn from_section(
        b: Option<&Section>,
        nodes: Vec<(String, u32)>,
        kinds: &crate::gres::Kinds,
    ) -> Result<Settings, String> {
        if !kinds.is_empty() {
            return Err(format!(
                "policy = \"batsim\": Batsim's protocol has no generic resources ({}), so its \
                 scheduler could not place them; remove them or use a policy of clemu's",
                kinds.names().join(", ")
            ));
        }
        let unit = match b.and_then(|b| b.unit.as_deref()) {
            None | Some("core") => Unit::Core,
            Some("node") => Unit::Node,
            Some(other) => {
                return Err(format!(
                    "batsim.unit: unknown unit {other:?} (known: core, node)"
                ))
            }
        };
        // A Batsim resource carries no core count: whole nodes as
        // resources need nodes of one size.
        if unit == Unit::Node {
            let (lo, hi) = nodes.iter().fold((u32::MAX, 0), |(lo, hi), &(_, cpus)| {
                (lo.min(cpus), hi.max(cpus))
            });
            if lo != hi && !nodes.is_empty() {
                return Err(format!(
                    "batsim.unit = \"node\" needs nodes of one size (these have {lo} to {hi} \
                     cores): a scheduler cannot tell them apart; use unit = \"core\""
                ));
            }
        }
        let timeout = b.and_then(|b| b.reply_timeout_s).unwrap_or(10.0);
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err("batsim.reply_timeout_s must be a positive number of seconds".into());
        }
        Ok(Settings {
            endpoint: b
                .and_then(|b| b.endpoint.clone())
                .unwrap_or_else(|| DEFAULT_ENDPOINT.into()),
            unit,
            wall_per_second: 1.0,
            reply_timeout: Duration::from_secs_f64(timeout),
            nodes,
        })
    }
}
