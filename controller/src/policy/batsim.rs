//! `policy = "batsim"`: every decision comes from an external scheduler
//! that speaks Batsim's protocol ([`crate::batsim`]).

use super::Entry;
use crate::batsim::Bridge;

pub const ENTRY: Entry = Entry {
    name: "batsim",
    about: "an external scheduler, over Batsim's protocol ([batsim] endpoint)",
    suspends: false,
    // A config with this policy always has its [batsim] settings (defaults
    // filled in); settings made by hand without them decide nothing.
    make: |c| match c.batsim.clone() {
        Some(settings) => Box::new(Bridge::new(settings, c.realtime)),
        None => Box::new(Bridge::unusable(
            "policy \"batsim\" was given no [batsim] settings",
        )),
    },
};
