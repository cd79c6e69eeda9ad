//! Buffers the size of the cluster, kept from one pass to the next.
//!
//! Every pass builds a view of every node and the policy copies it to
//! place jobs ([`super::Free`]): on a cluster of 158,976 nodes that is
//! megabytes a pass. Freed, such a buffer goes back to the system, and
//! the next pass pays for fresh pages again (page faults and zeroing, most
//! of a pass that starts one job there). Kept here instead, per thread
//! (the pass runs on one at a time), a few of each kind; what the
//! partitions' layout implies (which nodes each holds) is kept as long as
//! the configuration stays the same.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

use super::{NodeView, PartitionView};

/// The membership last computed, with the partitions and the number of
/// nodes it was computed for.
type Computed = (Arc<Vec<PartitionView>>, usize, Arc<Membership>);

/// At most this many spare buffers of a kind: a pass holds two views'
/// worth (the view and the policy's copy) and a few bit sets.
const KEEP: usize = 4;

thread_local! {
    static NODES: RefCell<Vec<Vec<NodeView>>> = const { RefCell::new(Vec::new()) };
    static WORDS: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
    static MEMBERSHIP: RefCell<Option<Computed>> = const { RefCell::new(None) };
}

/// An empty list of node views with room for `len`.
pub(crate) fn node_views(len: usize) -> Vec<NodeView> {
    let mut v = reuse(&NODES);
    v.clear();
    v.reserve(len);
    v
}

/// A list of node views no longer needed.
pub(crate) fn give_node_views(v: Vec<NodeView>) {
    keep(&NODES, v);
}

/// `len` words, all zero.
pub(crate) fn zeros(len: usize) -> Vec<u64> {
    let mut v = reuse(&WORDS);
    v.clear();
    v.resize(len, 0);
    v
}

/// Words no longer needed.
pub(crate) fn give_words(v: Vec<u64>) {
    keep(&WORDS, v);
}

type Spares<T> = LocalKey<RefCell<Vec<Vec<T>>>>;

/// A spare buffer of this kind, or a new one.
fn reuse<T>(spares: &'static Spares<T>) -> Vec<T> {
    spares
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `v` among the spares of its kind, unless there are enough (or
/// the thread is ending: a `Free` may be dropped then).
fn keep<T>(spares: &'static Spares<T>, v: Vec<T>) {
    if v.capacity() > 0 {
        let _ = spares.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < KEEP {
                s.push(v);
            }
        });
    }
}

/// Which partitions each node is in, and each partition's nodes: as bit
/// sets, for placement.
#[derive(Debug)]
pub(crate) struct Membership {
    /// The partitions of each node, as a bit set (at most 64 partitions).
    pub node_partitions: Vec<u64>,
    /// Each partition's nodes, as a bit set over node indices.
    pub members: Vec<Vec<u64>>,
}

/// The membership of `partitions` over `nodes` nodes: the one computed last
/// if these are the same partitions (shared, not equal: a configuration
/// keeps its partitions' `Arc` for as long as it lasts).
pub(crate) fn membership(partitions: &Arc<Vec<PartitionView>>, nodes: usize) -> Arc<Membership> {
    MEMBERSHIP.with(|l| {
        let mut l = l.borrow_mut();
        if let Some((p, n, membership)) = l.as_ref() {
            if Arc::ptr_eq(p, partitions) && *n == nodes {
                return Arc::clone(membership);
            }
        }
        let words = nodes.div_ceil(64);
        let mut node_partitions = vec![0u64; nodes];
        let mut members = Vec::with_capacity(partitions.len());
        for (p, part) in partitions.iter().enumerate() {
            let mut set = vec![0u64; words];
            for &n in &part.nodes {
                if let Some(bits) = node_partitions.get_mut(n) {
                    *bits |= 1 << (p % 64);
                    set[n / 64] |= 1 << (n % 64);
                }
            }
            members.push(set);
        }
        let membership = Arc::new(Membership {
            node_partitions,
            members,
        });
        // Holding the partitions keeps their address from being reused by
        // other partitions while it is the key.
        *l = Some((Arc::clone(partitions), nodes, Arc::clone(&membership)));
        membership
    })
}

/// Bit `n` of a bit set over node indices (false past its end).
pub(crate) fn bit(set: &[u64], n: usize) -> bool {
    set.get(n / 64).is_some_and(|w| w >> (n % 64) & 1 == 1)
}

/// Sets bit `n` of a bit set over node indices to `on`.
pub(crate) fn set_bit(set: &mut [u64], n: usize, on: bool) {
    if on {
        set[n / 64] |= 1 << (n % 64);
    } else {
        set[n / 64] &= !(1 << (n % 64));
    }
}
