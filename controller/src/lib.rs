//! controller: the central daemon that owns the cluster's truth.
//!
//! Not built yet. When it is, it holds the nodes, the queue, the partitions
//! and the scheduling policy, journals accepted work, and its subcommands
//! (`serve`, `submit`, `queue`, `nodes`, ...) are the client. See DESIGN.md,
//! "The pieces".
