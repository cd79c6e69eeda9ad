//! `policy = "batsim"`: every decision comes from an external scheduler
//! that speaks Batsim's protocol ([`crate::batsim`]).

use super::Entry;
use crate::batsim::{Bridge, Settings};

pub const ENTRY: Entry = Entry {
    name: "batsim",
    about: "an external scheduler, over Batsim's protocol ([batsim] endpoint)",
    suspends: false,
    make: |c| {
        let settings = c.batsim.clone().unwrap_or_else(|| Settings {
            endpoint: crate::batsim::DEFAULT_ENDPOINT.into(),
            unit: Default::default(),
            wall_per_second: 1.0,
            reply_timeout: std::time::Duration::from_secs(10),
            nodes: Vec::new(),
        });
        Box::new(Bridge::new(settings, c.realtime))
    },
};
