//! agent: the per-host daemon that hosts many virtual nodes.
//!
//! Not built yet. When it is, one agent process registers with the
//! controller, runs one lightweight task per virtual node, launches
//! `sigsleep` for each job in its own process group, forwards suspend,
//! resume and cancel as real signals, reaps its children and heartbeats.
//! See DESIGN.md, "The pieces".
