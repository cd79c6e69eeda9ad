//! runworkload: replays a workload trace against an emulated cluster.
//!
//! Not built yet. When it is, it reads SWF traces, shrinks time by a sweep
//! of factors, submits at absolute deadlines and leaves one results
//! directory per factor. See DESIGN.md, "The pieces".
