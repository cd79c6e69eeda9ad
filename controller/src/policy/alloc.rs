//! What is free during one pass, as decisions are made, and first-fit
//! placement: every policy places jobs through [`Free`].

use std::sync::Arc;

use super::spare::{self, set_bit, Membership};
use super::{Active, NodeView, Queued, Span, View};
use crate::gres::Counts;

/// Free resources during one pass, as decisions are made.
#[derive(Debug, Clone)]
pub struct Free {
    nodes: Vec<NodeView>,
    /// Free cores on usable nodes of each partition: lets a job that
    /// cannot fit be turned down without looking at any node.
    partition_free: Vec<u64>,
    /// Which nodes each partition holds, and the partitions of each node:
    /// the same from pass to pass, made once per configuration.
    membership: Arc<Membership>,
    /// Usable nodes with a free core, as a bit set over node indices. On a
    /// busy cluster most nodes are full; first fit walks only these, so
    /// trying a queue of jobs against thousands of nodes stays cheap.
    open: Vec<u64>,
    /// Nodes reserved, for the rest of the pass, for a suspended job that
    /// waits longest for them: nothing else is placed or resumed there.
    blocked: Vec<u64>,
    /// Partitions that time-slice: placement there stays within the slots.
    gang: Vec<bool>,
    /// Partitions whose jobs go on consecutive nodes.
    contiguous: Vec<bool>,
}

impl Drop for Free {
    fn drop(&mut self) {
        spare::give_node_views(std::mem::take(&mut self.nodes));
        spare::give_words(std::mem::take(&mut self.open));
        spare::give_words(std::mem::take(&mut self.blocked));
    }
}

/// Whether `node` has the devices a job asks of each node free.
fn has_gres(node: &NodeView, gres: &crate::gres::Counts) -> bool {
    node.free_gres.iter().zip(gres).all(|(f, g)| f >= g)
}

/// The cores `q` may have on `node` now: its free cores, as far as their
/// memory and its devices allow, and within its slots where the partition
/// time-slices (`slotted`).
#[inline]
fn room(node: &NodeView, q: &Queued, wants_devices: bool, slotted: bool) -> u32 {
    // (No division for a job that asks no memory: this runs for each node
    // of the widest jobs.)
    let by_mem = match q.mem_per_cpu_mb {
        0 => u32::MAX,
        m => (node.free_mem_mb / m).min(u64::from(u32::MAX)) as u32,
    };
    // A node without the devices asked free has no room for the job (and
    // ends a run of consecutive nodes).
    let mut room = if !wants_devices || has_gres(node, &q.gres) {
        node.free_cpus.min(by_mem)
    } else {
        0
    };
    if slotted {
        room = room.min(node.free_slots);
    }
    room
}

impl Free {
    pub fn new(v: &View) -> Free {
        let words = v.nodes.len().div_ceil(64);
        let membership = spare::membership(&v.partitions, v.nodes.len());
        let partition_free = v
            .partitions
            .iter()
            .map(|part| {
                part.nodes
                    .iter()
                    .filter_map(|&n| v.nodes.get(n).filter(|node| node.usable))
                    .map(|node| u64::from(node.free_cpus))
                    .sum()
            })
            .collect();
        let mut open = spare::zeros(words);
        for (n, node) in v.nodes.iter().enumerate() {
            if node.usable && node.free_cpus > 0 {
                open[n / 64] |= 1 << (n % 64);
            }
        }
        let mut nodes = spare::node_views(v.nodes.len());
        nodes.extend_from_slice(&v.nodes);
        Free {
            nodes,
            partition_free,
            membership,
            blocked: spare::zeros(words),
            open,
            gang: (0..v.partitions.len())
                .map(|p| v.time_slicing(p).is_some())
                .collect(),
            contiguous: v.partitions.iter().map(|p| p.contiguous).collect(),
        }
    }

    /// Free cores on the usable nodes of partition `p`.
    pub(super) fn partition_free(&self, p: usize) -> u64 {
        self.partition_free[p]
    }

    pub fn node(&self, n: usize) -> &NodeView {
        &self.nodes[n]
    }

    pub(super) fn might_fit(&self, q: &Queued) -> bool {
        self.partition_free
            .get(q.partition)
            .is_some_and(|&f| f >= u64::from(q.cores))
    }

    /// Where `q` would go now (first fit), without taking anything: on
    /// free cores of its partition's usable nodes that have the generic
    /// resources it asks free, outside reserved nodes, and within the
    /// slots in a partition that time-slices. In a contiguous partition,
    /// on the first run of consecutive nodes that has room: a node with
    /// none, or a gap in the node order, starts the run again.
    ///
    /// A job that asks how many nodes it spans (`Queued::nodes`) goes on
    /// exactly as many as it asks, its tasks laid over them as Slurm 22.05
    /// lays them: one on each, then the first filled first (`-N 2 -n 4`
    /// on empty nodes of 4: three and one; `-N 2 -n 3 -c 2`: four cores
    /// and two), or dealt evenly with `--ntasks-per-node` (`Span::even`).
    /// Given a range, it spans as many as it may and have room, its tasks
    /// dealt over them in turn.
    pub fn try_place(&self, _v: &View, q: &Queued) -> Option<Vec<(usize, u32)>> {
        if q.cores == 0 || !self.might_fit(q) {
            return None;
        }
        if let Some(within) = q.within.as_ref().filter(|w| !w.required.is_empty()) {
            return self.on_required(q, &within.required);
        }
        let Some(span) = q.nodes else {
            return self.pack(q, 1);
        };
        // Whole tasks, unless its cores are not a number of them.
        let unit = if q.cores.is_multiple_of(span.task_cores.max(1)) {
            span.task_cores.max(1)
        } else {
            1
        };
        if span.least == 0 {
            return self.pack(q, unit);
        }
        let tasks = (q.cores / unit).max(1);
        let most = if span.most == 0 { u32::MAX } else { span.most }.clamp(1, tasks);
        let least = span.least.clamp(1, most);
        if least == most {
            // So many tasks on each node at most (`--ntasks-per-node`):
            // dealt in turn, as many on each.
            let lay = if span.even { deal } else { block };
            return self.spread(q, least as usize, unit, lay);
        }
        // A range: as many nodes as it allows and as have room, down to
        // its least, its tasks dealt over them in turn, as Slurm 22.05
        // does (`-N 1-4 -n 6` on empty nodes of 4: 2, 2, 1 and 1).
        let with_room = self.rooms(q).filter(|&(_, r)| r >= unit).count();
        let most = most.min(u32::try_from(with_room).unwrap_or(u32::MAX));
        if most < least {
            return None;
        }
        let contiguous = self.contiguous.get(q.partition).copied().unwrap_or(false);
        if !contiguous {
            // The roomiest `count` nodes hold less the fewer they are:
            // if all those with room do not hold it, no fewer do.
            return self.spread(q, most as usize, unit, deal);
        }
        (least..=most)
            .rev()
            .find_map(|count| self.spread(q, count as usize, unit, deal))
    }

    /// `q` on every node it names as required, each holding one of its
    /// tasks at least, and on more nodes (those with room nearest the
    /// first it names, up from it, then down) when it
    /// asks more (`Span::least`) or its tasks need their room, up to its
    /// most: as Slurm's `-w` takes the nodes named and adds to them. Its
    /// tasks are laid one on each, then the first filled first, or dealt
    /// evenly (`Span::even`). The nodes need not be consecutive, even in a
    /// contiguous partition.
    fn on_required(&self, q: &Queued, required: &[usize]) -> Option<Vec<(usize, u32)>> {
        let span = q.nodes.unwrap_or(Span {
            least: 0,
            most: 0,
            task_cores: 1,
            even: false,
        });
        let unit = if q.cores.is_multiple_of(span.task_cores.max(1)) {
            span.task_cores.max(1)
        } else {
            1
        };
        let tasks = (q.cores / unit).max(1);
        // In node order, as `rooms` gives them.
        let rooms: Vec<(usize, u32)> = self
            .rooms(q)
            .map(|(n, room)| (n, room / unit))
            .filter(|&(_, r)| r > 0)
            .collect();
        let room_of = |n: usize| {
            rooms
                .binary_search_by_key(&n, |&(m, _)| m)
                .ok()
                .map(|i| rooms[i])
        };
        let mut chosen: Vec<(usize, u32)> = required
            .iter()
            .map(|&n| room_of(n))
            .collect::<Option<_>>()?;
        let least = span
            .least
            .max(u32::try_from(required.len()).unwrap_or(u32::MAX));
        // (The controller refuses more nodes named than a job's most.)
        let most = match span.most {
            0 => u32::MAX,
            m => m,
        }
        .min(tasks);
        if required.len() as u64 > u64::from(most) {
            return None;
        }
        // The others from the first node named up, then from it down, as
        // Slurm adds to the nodes named (`-w node4 -N 2` is node[3-4]).
        let from = rooms.partition_point(|&(n, _)| n < required[0]);
        let mut others = rooms[from..]
            .iter()
            .chain(rooms[..from].iter().rev())
            .filter(|&&(n, _)| required.binary_search(&n).is_err());
        let mut held: u64 = chosen.iter().map(|&(_, r)| u64::from(r)).sum();
        while (chosen.len() as u64) < u64::from(least) || held < u64::from(tasks) {
            if chosen.len() as u64 >= u64::from(most) {
                return None;
            }
            let &(n, r) = others.next()?;
            chosen.push((n, r));
            held += u64::from(r);
        }
        if chosen.len() as u64 > u64::from(tasks) {
            return None;
        }
        chosen.sort_unstable();
        let lay = if span.even { deal } else { block };
        Some(
            lay(tasks, &chosen)
                .into_iter()
                .map(|(n, t)| (n, t * unit))
                .collect(),
        )
    }

    /// The nodes `q` may use now, in order, with its room on each: its
    /// partition's, less those it must not have.
    fn rooms<'a>(&'a self, q: &'a Queued) -> impl Iterator<Item = (usize, u32)> + 'a {
        let slotted = self.gang.get(q.partition).copied().unwrap_or(false);
        let wants_devices = crate::gres::any(&q.gres);
        let member = &self.membership.members[q.partition];
        let open = self.open.iter().zip(&self.blocked);
        let within = q.within.as_deref();
        member
            .iter()
            .zip(open)
            .enumerate()
            .flat_map(move |(w, (&m, (&o, &b)))| {
                let excluded = within.map_or(0, |x| x.excluded_word(w));
                let mut bits = m & o & !b & !excluded;
                std::iter::from_fn(move || {
                    (bits != 0).then(|| {
                        let n = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        n
                    })
                })
            })
            .map(move |n| (n, room(&self.nodes[n], q, wants_devices, slotted)))
    }

    /// First fit of `q` on as few nodes as hold it, each filled in turn
    /// with whole tasks of `unit` cores.
    fn pack(&self, q: &Queued, unit: u32) -> Option<Vec<(usize, u32)>> {
        let contiguous = self.contiguous.get(q.partition).copied().unwrap_or(false);
        let mut need = q.cores;
        let mut alloc: Vec<(usize, u32)> = Vec::new();
        for (n, room) in self.rooms(q) {
            if contiguous
                && alloc
                    .last()
                    .is_some_and(|&(last, _)| last + 1 != n || room < unit)
            {
                alloc.clear();
                need = q.cores;
            }
            let take = room.min(need) / unit * unit;
            if take > 0 {
                if alloc.is_empty() {
                    // As many nodes as this one's size would take: the
                    // widest jobs' lists grow once or not at all.
                    let per_node = self.nodes[n].cpus.max(1);
                    alloc.reserve(need.div_ceil(per_node) as usize);
                }
                alloc.push((n, take));
                need -= take;
                if need == 0 {
                    return Some(alloc);
                }
            }
        }
        None
    }

    /// `q` on exactly `count` nodes (at most its tasks of `unit` cores):
    /// the first that together have room for its tasks (in a contiguous
    /// partition, the first run of `count` consecutive ones), its tasks
    /// laid over them ([`block`]).
    fn spread(
        &self,
        q: &Queued,
        count: usize,
        unit: u32,
        lay: Layout,
    ) -> Option<Vec<(usize, u32)>> {
        let contiguous = self.contiguous.get(q.partition).copied().unwrap_or(false);
        let tasks = u64::from(q.cores / unit);
        // Each node's room in whole tasks.
        let rooms = self.rooms(q).map(|(n, room)| (n, room / unit));
        let chosen: Vec<(usize, u32)> = if contiguous {
            let mut run: std::collections::VecDeque<(usize, u32)> = Default::default();
            let mut sum = 0u64;
            let mut found = false;
            for (n, room) in rooms {
                if room == 0 || run.back().is_some_and(|&(last, _)| last + 1 != n) {
                    run.clear();
                    sum = 0;
                }
                if room == 0 {
                    continue;
                }
                run.push_back((n, room));
                sum += u64::from(room);
                if run.len() > count {
                    let (_, r) = run.pop_front().unwrap_or_default();
                    sum -= u64::from(r);
                }
                if run.len() == count && sum >= tasks {
                    found = true;
                    break;
                }
            }
            if !found {
                return None;
            }
            run.into()
        } else {
            // The roomiest `count` of the nodes seen so far, until they
            // hold it.
            use std::cmp::Reverse;
            let mut best = std::collections::BinaryHeap::new();
            let mut sum = 0u64;
            let mut found = false;
            for (n, room) in rooms.filter(|&(_, r)| r > 0) {
                best.push(Reverse((room, n)));
                sum += u64::from(room);
                if best.len() > count {
                    let Reverse((r, _)) = best.pop().unwrap_or(Reverse((0, 0)));
                    sum -= u64::from(r);
                }
                if best.len() == count && sum >= tasks {
                    found = true;
                    break;
                }
            }
            if !found {
                return None;
            }
            let mut chosen: Vec<(usize, u32)> =
                best.into_iter().map(|Reverse((r, n))| (n, r)).collect();
            chosen.sort_unstable();
            chosen
        };
        let dealt = lay(q.cores / unit, &chosen);
        Some(dealt.into_iter().map(|(n, t)| (n, t * unit)).collect())
    }

    /// Takes the cores and memory of `alloc` for `q`.
    pub fn take(&mut self, _v: &View, q: &Queued, alloc: &[(usize, u32)]) {
        let wants_devices = crate::gres::any(&q.gres);
        // The partitions' free cores are counted down once per run of
        // nodes in the same partitions, not once per node.
        let mut run = (0u64, 0u64);
        for &(n, c) in alloc {
            self.take_node(n, c, q, wants_devices, &mut run);
        }
        self.count_down(run);
    }

    /// Takes `c` cores of node `n` for `q`, their memory, and the devices
    /// it asks (`wants_devices`); the cores go into `run`, those taken in a
    /// run of nodes of the same partitions, not yet counted down. The
    /// node's free slots as they were if it had fewer than `c` (a
    /// suspended job holds slots there), which a give-back restores.
    #[inline]
    fn take_node(
        &mut self,
        n: usize,
        c: u32,
        q: &Queued,
        wants_devices: bool,
        run: &mut (u64, u64),
    ) -> Option<u32> {
        let node = &mut self.nodes[n];
        node.free_cpus -= c;
        let full = node.free_cpus == 0;
        node.free_mem_mb -= u64::from(c) * q.mem_per_cpu_mb;
        let clipped = (node.free_slots < c).then_some(node.free_slots);
        node.free_slots = node.free_slots.saturating_sub(c);
        if wants_devices {
            for (f, g) in node.free_gres.iter_mut().zip(&q.gres) {
                *f = f.saturating_sub(*g);
            }
        }
        let usable = node.usable;
        if full {
            set_bit(&mut self.open, n, false);
        }
        if usable {
            let partitions = self.membership.node_partitions[n];
            if partitions != run.0 {
                self.count_down(*run);
                *run = (partitions, 0);
            }
            run.1 += u64::from(c);
        }
        clipped
    }

    /// `cores` fewer free in each of the partitions of the bit set.
    fn count_down(&mut self, (partitions, cores): (u64, u64)) {
        let mut bits = partitions;
        while bits != 0 {
            self.partition_free[bits.trailing_zeros() as usize] -= cores;
            bits &= bits - 1;
        }
    }

    /// First fit, and take it: in one walk of the nodes for a job that
    /// asks no node count outside a contiguous partition (the widest jobs
    /// are such), else found, then taken.
    pub fn place(&mut self, v: &View, q: &Queued) -> Option<Vec<(usize, u32)>> {
        let contiguous = self.contiguous.get(q.partition).copied().unwrap_or(false);
        if q.nodes.is_none()
            && q.within.is_none()
            && !contiguous
            && q.cores > 0
            && self.might_fit(q)
        {
            return self.pack_taking(q);
        }
        let alloc = self.try_place(v, q)?;
        self.take(v, q, &alloc);
        Some(alloc)
    }

    /// [`Free::pack`] and [`Free::take`] in one walk of the nodes: what a
    /// job of 80,000 nodes costs to place is mostly reading its nodes, so
    /// they are read once. Should the job not fit after all (memory,
    /// devices, slots or reserved nodes can leave too little where the
    /// partition's free cores sufficed), what was taken is given back as
    /// it was.
    fn pack_taking(&mut self, q: &Queued) -> Option<Vec<(usize, u32)>> {
        let slotted = self.gang.get(q.partition).copied().unwrap_or(false);
        let wants_devices = crate::gres::any(&q.gres);
        let membership = Arc::clone(&self.membership);
        let member = &membership.members[q.partition];
        let mut need = q.cores;
        let mut alloc: Vec<(usize, u32)> = Vec::new();
        // Nodes whose free slots were fewer than the cores taken (a
        // suspended job holds slots there): their slots as they were.
        let mut slots_before: Vec<(usize, u32)> = Vec::new();
        let mut run = (0u64, 0u64);
        'words: for (w, &m) in member.iter().enumerate() {
            let mut bits = m & self.open[w] & !self.blocked[w];
            while bits != 0 {
                let n = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let node = &self.nodes[n];
                let c = room(node, q, wants_devices, slotted).min(need);
                if c == 0 {
                    continue;
                }
                if alloc.is_empty() {
                    alloc.reserve(need.div_ceil(node.cpus.max(1)) as usize);
                }
                if let Some(slots) = self.take_node(n, c, q, wants_devices, &mut run) {
                    slots_before.push((n, slots));
                }
                alloc.push((n, c));
                need -= c;
                if need == 0 {
                    break 'words;
                }
            }
        }
        self.count_down(run);
        if need == 0 {
            return Some(alloc);
        }
        // Given back, as a job's end gives back (every node taken was
        // usable and had a free core), and its slots.
        self.give_back_cores(&alloc);
        self.give_back_memory(&alloc, q.mem_per_cpu_mb, &q.gres);
        for &(n, c) in &alloc {
            self.nodes[n].free_slots += c;
        }
        for (n, slots) in slots_before {
            self.nodes[n].free_slots = slots;
        }
        None
    }

    /// Reserves these nodes for the rest of the pass.
    pub(super) fn block(&mut self, alloc: &[(usize, u32)]) {
        for &(n, _) in alloc {
            set_bit(&mut self.blocked, n, true);
        }
    }

    fn use_cpus(&mut self, n: usize, c: u32) {
        self.nodes[n].free_cpus -= c;
        if self.nodes[n].free_cpus == 0 {
            set_bit(&mut self.open, n, false);
        }
        if self.nodes[n].usable {
            self.count_down((self.membership.node_partitions[n], u64::from(c)));
        }
    }

    /// A running job's cores become free (it is to be suspended); its
    /// memory stays held.
    pub(super) fn give_back(&mut self, a: &Active) {
        self.give_back_cores(&a.alloc);
    }

    fn give_back_cores(&mut self, alloc: &[(usize, u32)]) {
        for &(n, c) in alloc {
            self.nodes[n].free_cpus += c;
            if self.nodes[n].usable {
                set_bit(&mut self.open, n, self.nodes[n].free_cpus > 0);
                let mut bits = self.membership.node_partitions[n];
                while bits != 0 {
                    self.partition_free[bits.trailing_zeros() as usize] += u64::from(c);
                    bits &= bits - 1;
                }
            }
        }
    }

    /// Gives back what a job that ends holds: its cores, as
    /// [`Free::give_back`], its memory and its devices (a suspended job
    /// keeps those two, as under Slurm).
    pub(super) fn give_back_ended(&mut self, a: &Active) {
        self.give_back(a);
        self.give_back_held(a);
    }

    /// Gives back what a job holds besides its cores: its memory and its
    /// devices (those a suspended job keeps).
    pub(super) fn give_back_held(&mut self, a: &Active) {
        self.give_back_memory(&a.alloc, a.mem_per_cpu_mb, &a.gres);
    }

    fn give_back_memory(&mut self, alloc: &[(usize, u32)], mem_per_cpu_mb: u64, gres: &Counts) {
        let devices = crate::gres::any(gres);
        for &(n, c) in alloc {
            let node = &mut self.nodes[n];
            node.free_mem_mb += u64::from(c) * mem_per_cpu_mb;
            if devices {
                for (f, g) in node.free_gres.iter_mut().zip(gres) {
                    *f = f.saturating_add(*g);
                }
            }
        }
    }

    /// Whether a suspended job's cores are free (reserved nodes excluded).
    /// A drained node still lets its suspended jobs resume.
    pub(super) fn fits_alloc(&self, alloc: &[(usize, u32)]) -> bool {
        alloc.iter().all(|&(n, c)| {
            self.nodes[n].free_cpus >= c && self.blocked[n / 64] & (1 << (n % 64)) == 0
        })
    }

    /// Whether a running job's own cores are still free, reserved or not.
    pub(super) fn still_free(&self, alloc: &[(usize, u32)]) -> bool {
        alloc.iter().all(|&(n, c)| self.nodes[n].free_cpus >= c)
    }

    /// A suspended job's cores are taken again (its memory it never gave).
    pub(super) fn take_alloc(&mut self, alloc: &[(usize, u32)]) {
        for &(n, c) in alloc {
            self.use_cpus(n, c);
        }
    }
}

/// How a job's tasks are laid over the nodes chosen for it: (node, room
/// in tasks) in, (node, tasks) out.
type Layout = fn(u32, &[(usize, u32)]) -> Vec<(usize, u32)>;

/// `tasks` dealt one at a time to each of `nodes` (node, room in tasks)
/// in turn, skipping the full ones, as Slurm lays out a job given a
/// range of node counts: every node gets at least one (there are
/// enough), and none more than its room (there is enough in all).
fn deal(tasks: u32, nodes: &[(usize, u32)]) -> Vec<(usize, u32)> {
    // After `level` whole rounds every node has min(room, level); the
    // last round gives one more to the first nodes with room left.
    let dealt = |level: u32| -> u64 { nodes.iter().map(|&(_, r)| u64::from(r.min(level))).sum() };
    let (mut lo, mut hi) = (0u32, nodes.iter().map(|&(_, r)| r).max().unwrap_or(0));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if dealt(mid) <= u64::from(tasks) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut left = u64::from(tasks).saturating_sub(dealt(lo));
    nodes
        .iter()
        .map(|&(n, r)| {
            let mut c = r.min(lo);
            if left > 0 && r > lo {
                c += 1;
                left -= 1;
            }
            (n, c)
        })
        .collect()
}

/// `tasks` laid over `nodes` (node, room in tasks) as Slurm's default
/// block distribution does: one on each (there are enough), then each
/// node in turn filled as far as its room goes (there is enough in all).
/// `-N 2 -n 4` on two empty nodes of 4 is 3 and 1; on nodes with 2 free
/// each, 2 and 2.
fn block(tasks: u32, nodes: &[(usize, u32)]) -> Vec<(usize, u32)> {
    let mut left = tasks.saturating_sub(nodes.len() as u32);
    nodes
        .iter()
        .map(|&(n, room)| {
            let more = room.saturating_sub(1).min(left);
            left -= more;
            (n, 1 + more)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::policy::PartitionView;

    /// A node as drawn: (cores, free cores, free memory in MiB, free
    /// slots, usable, free devices of two kinds).
    type Drawn = (u32, u32, u64, u32, bool, (u8, u8));

    /// Nodes in three overlapping partitions, the first time-sliced or not.
    fn view(nodes: &[Drawn], gang: bool) -> View {
        let n = nodes.len();
        View {
            nodes: nodes
                .iter()
                .map(|&(cpus, free, mem, slots, usable, (d0, d1))| NodeView {
                    cpus,
                    free_cpus: free.min(cpus),
                    free_mem_mb: mem,
                    free_slots: slots,
                    usable,
                    free_gres: [d0, d1, 0, 0],
                })
                .collect(),
            partitions: Arc::new(vec![
                PartitionView {
                    nodes: (0..n).collect(),
                    gang: gang.then_some(crate::policy::Gang {
                        oversubscribe: 2,
                        slice_ns: 1,
                    }),
                    ..Default::default()
                },
                PartitionView {
                    nodes: (n / 3..n).collect(),
                    ..Default::default()
                },
                PartitionView {
                    nodes: (0..n).filter(|i| i % 3 != 1).collect(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    fn state(f: &Free) -> (Vec<NodeView>, Vec<u64>, Vec<u64>) {
        (f.nodes.clone(), f.partition_free.clone(), f.open.clone())
    }

    proptest! {
        /// Placing in one walk takes the same nodes and leaves the same
        /// free resources as finding the place, then taking it; and a job
        /// that does not fit leaves everything as it was.
        #[test]
        fn one_walk_places_and_takes_as_two(
            nodes in proptest::collection::vec(
                (
                    1u32..=8,
                    0u32..=8,
                    0u64..64,
                    0u32..=16,
                    proptest::bool::weighted(0.9),
                    (0u8..3, 0u8..2),
                ),
                1..150,
            ),
            jobs in proptest::collection::vec(
                (0usize..3, 0u32..400, 0u64..6, (0u8..2, 0u8..2)),
                1..6,
            ),
            blocked in proptest::collection::vec(0usize..150, 0..10),
            gang in any::<bool>(),
        ) {
            let v = view(&nodes, gang);
            let mut one = Free::new(&v);
            for &b in &blocked {
                if b < nodes.len() {
                    one.block(&[(b, 0)]);
                }
            }
            let mut two = one.clone();
            for (k, &(partition, cores, mem, dev)) in jobs.iter().enumerate() {
                let q = Queued {
                    job: k as u64,
                    partition,
                    cores,
                    mem_per_cpu_mb: mem,
                    estimate_ns: 1,
                    submit_ns: 0,
                    gres: [dev.0, dev.1, 0, 0],
                    nodes: None,
                    within: None,
                };
                let before = state(&one);
                let placed = one.place(&v, &q);
                let found = two.try_place(&v, &q);
                if let Some(alloc) = &found {
                    two.take(&v, &q, alloc);
                }
                prop_assert_eq!(&placed, &found);
                prop_assert_eq!(state(&one), state(&two));
                if placed.is_none() {
                    prop_assert_eq!(state(&one), before);
                }
            }
        }
    }
}
