//! Generic resources: GPUs and other countable devices of a node, besides
//! its cores and memory (Slurm's GRES).
//!
//! A config gives node groups `gpus = N` or `resources = { name = N }`.
//! The cluster's kinds are named once ([`Kinds`]), and everything past the
//! config counts them in fixed arrays indexed by kind ([`Counts`], and
//! [`Masks`] for which devices), so that the policies' views and the
//! queue stay free of allocations. A job asks a number of each kind on
//! every node it gets, as Slurm's `--gres` does; a node goes to it only if
//! it has them all free. Devices are numbered from 0 on each node and
//! given lowest free first; a job keeps them while suspended, as it keeps
//! its memory.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Kinds of generic resources a cluster may have.
pub const MAX_KINDS: usize = 4;
/// Devices of one kind a node may have (each is a bit of a [`Masks`]).
pub const MAX_PER_NODE: u32 = 64;

/// A count of each kind, in the order of [`Kinds`].
pub type Counts = [u8; MAX_KINDS];
/// Which devices of each kind, as bit sets: bit i is device i.
pub type Masks = [u64; MAX_KINDS];

/// The kind `gpus = N` declares.
pub const GPU: &str = "gpu";

/// The cluster's kinds, in order: `gpu` first when some node has GPUs,
/// then the others by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kinds(Vec<String>);

impl Kinds {
    /// The kinds of the node groups' resources (`gpus` counted as `gpu`),
    /// checked: names a job can ask by, at most [`MAX_KINDS`], at most
    /// [`MAX_PER_NODE`] devices each.
    pub fn of(groups: &[BTreeMap<String, u32>]) -> Result<Kinds, String> {
        let mut names: Vec<String> = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            for (name, &n) in g {
                if !valid_name(name) {
                    return Err(format!(
                        "nodes[{i}].resources: {name:?} is not a resource name (a lower-case \
                         letter, then letters, digits or _)"
                    ));
                }
                if n > MAX_PER_NODE {
                    return Err(format!(
                        "nodes[{i}]: {n} {name} per node, more than the {MAX_PER_NODE} supported"
                    ));
                }
                if n > 0 && !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names.sort_by(|a, b| (a != GPU, a).cmp(&(b != GPU, b)));
        if names.len() > MAX_KINDS {
            return Err(format!(
                "{} kinds of resources ({}), more than the {MAX_KINDS} supported",
                names.len(),
                names.join(", ")
            ));
        }
        Ok(Kinds(names))
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|k| k == name)
    }

    /// A node group's resources as counts.
    pub fn counts_of(&self, group: &BTreeMap<String, u32>) -> Counts {
        let mut c = Counts::default();
        for (name, &n) in group {
            if let Some(k) = self.index(name) {
                // At most MAX_PER_NODE, checked by `of`.
                c[k] = n as u8;
            }
        }
        c
    }

    /// A job's request (name, count per node) as counts; a kind no node
    /// has, or more of one than a node can have, is refused by name.
    pub fn request(&self, asked: &[(String, u32)]) -> Result<Counts, String> {
        let mut c = Counts::default();
        for (name, n) in asked {
            let Some(k) = self.index(name) else {
                return Err(if self.0.is_empty() {
                    format!("asks for {name}, but no node of this cluster has any")
                } else {
                    format!(
                        "asks for {name}, but no node of this cluster has any (it has {})",
                        self.0.join(", ")
                    )
                });
            };
            if *n > MAX_PER_NODE {
                return Err(format!(
                    "asks for {n} {name} per node, more than a node can have ({MAX_PER_NODE})"
                ));
            }
            c[k] = c[k].saturating_add(*n as u8);
        }
        Ok(c)
    }
}

/// `[[workload.gres]]` as the config writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRuleSection {
    /// SWF field 15.
    pub queue: Option<i64>,
    /// SWF field 16.
    pub partition: Option<i64>,
    /// A Batsim job's profile.
    pub profile: Option<String>,
    /// A share of the jobs, in (0, 1], chosen by their trace job number.
    pub fraction: Option<f64>,
    #[serde(default)]
    pub gpus: u32,
    #[serde(default)]
    pub resources: BTreeMap<String, u32>,
}

/// The cluster's kinds, and each node group's resources by name, from the
/// groups' `gpus` and `resources`.
pub fn node_kinds<'a>(
    groups: impl Iterator<Item = (u32, &'a BTreeMap<String, u32>)>,
) -> Result<(Kinds, Vec<BTreeMap<String, u32>>), String> {
    let mut all = Vec::new();
    for (i, (gpus, resources)) in groups.enumerate() {
        if gpus > 0 && resources.contains_key(GPU) {
            return Err(format!(
                "nodes[{i}]: gpus and resources.gpu both given: give one"
            ));
        }
        let mut r = resources.clone();
        if gpus > 0 {
            r.insert(GPU.into(), gpus);
        }
        all.push(r);
    }
    Ok((Kinds::of(&all)?, all))
}

/// The config's `[[workload.gres]]` rules, checked against its kinds and
/// its node groups' resources (`groups`, as [`node_kinds`] gives them): a
/// rule asking more of a kind than any node has would leave every job it
/// matches unable to run.
pub fn trace_rules(
    sections: &[TraceRuleSection],
    kinds: &Kinds,
    groups: &[BTreeMap<String, u32>],
) -> Result<Vec<TraceRule>, String> {
    sections
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut asks: Vec<(String, u32)> = r.resources.clone().into_iter().collect();
            if r.gpus > 0 {
                asks.insert(0, (GPU.into(), r.gpus));
            }
            kinds
                .request(&asks)
                .map_err(|e| format!("workload.gres[{i}] {e}"))?;
            // A kind asked twice (`gpus` and `resources.gpu`) adds up, as
            // the request does.
            let mut per_kind: BTreeMap<&str, u32> = BTreeMap::new();
            for (name, n) in &asks {
                *per_kind.entry(name).or_default() += n;
            }
            for (name, n) in per_kind {
                let most = groups.iter().filter_map(|g| g.get(name)).max();
                if let Some(most) = most.filter(|&&m| n > m) {
                    return Err(format!(
                        "workload.gres[{i}] asks for {n} {name} per node, but no node has more \
                         than {most}"
                    ));
                }
            }
            if r.fraction.is_some_and(|f| !(f > 0.0 && f <= 1.0)) {
                return Err(format!("workload.gres[{i}].fraction must be in (0, 1]"));
            }
            Ok(TraceRule {
                queue: r.queue,
                partition: r.partition,
                profile: r.profile.clone(),
                fraction: r.fraction,
                asks,
            })
        })
        .collect()
}

/// `[[workload.gres]]`: what the trace jobs a rule matches ask of each
/// node they get. A rule without a condition matches every job.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRule {
    /// SWF field 15, the job's queue number.
    pub queue: Option<i64>,
    /// SWF field 16, the job's partition number.
    pub partition: Option<i64>,
    /// A Batsim job's profile name.
    pub profile: Option<String>,
    /// The share of the jobs it takes, chosen by their trace job number
    /// (the same jobs in every replay, emulated or in the twin): for
    /// traces that carry no hint of which jobs used devices.
    pub fraction: Option<f64>,
    pub asks: Vec<(String, u32)>,
}

/// A trace job, as the rules look at it.
#[derive(Debug, Clone, Copy)]
pub struct TraceJobKey<'a> {
    /// Its job number in the trace.
    pub id: i64,
    /// SWF fields 15 and 16 (-1: unknown).
    pub queue: i64,
    pub partition: i64,
    /// A Batsim job's profile.
    pub profile: Option<&'a str>,
}

impl std::fmt::Display for TraceRule {
    /// `queue=2 -> gpu:1`, as a run's manifest records it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut when = Vec::new();
        if let Some(q) = self.queue {
            when.push(format!("queue={q}"));
        }
        if let Some(p) = self.partition {
            when.push(format!("partition={p}"));
        }
        if let Some(p) = &self.profile {
            when.push(format!("profile={p}"));
        }
        if let Some(x) = self.fraction {
            when.push(format!("fraction={x}"));
        }
        let when = if when.is_empty() {
            "every job".to_string()
        } else {
            when.join(",")
        };
        write!(f, "{when} -> {}", request_text(&self.asks))
    }
}

impl TraceRule {
    pub fn matches(&self, job: &TraceJobKey<'_>) -> bool {
        self.queue.is_none_or(|q| q == job.queue)
            && self.partition.is_none_or(|p| p == job.partition)
            && self
                .profile
                .as_deref()
                .is_none_or(|p| Some(p) == job.profile)
            && self.fraction.is_none_or(|f| share_of(job.id) < f)
    }
}

/// Where a job number falls in [0, 1): its SplitMix64 hash, so that a
/// fraction of the jobs is spread over the whole trace rather than its
/// first jobs, and is the same on every machine.
fn share_of(id: i64) -> f64 {
    let mut z = (id as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// What a trace job asks: that of the first rule it matches, else nothing.
pub fn for_trace_job(rules: &[TraceRule], job: &TraceJobKey<'_>) -> Vec<(String, u32)> {
    rules
        .iter()
        .find(|r| r.matches(job))
        .map(|r| r.asks.clone())
        .unwrap_or_default()
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether a job asks any generic resource.
pub fn any(c: &Counts) -> bool {
    c.iter().any(|&n| n > 0)
}

/// The devices of a node with `total` of each kind, all free.
pub fn all_free(total: &Counts) -> Masks {
    let mut m = Masks::default();
    for (k, &n) in total.iter().enumerate() {
        m[k] = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    }
    m
}

/// How many devices of each kind `m` holds.
pub fn count(m: &Masks) -> Counts {
    let mut c = Counts::default();
    for (k, bits) in m.iter().enumerate() {
        c[k] = bits.count_ones() as u8;
    }
    c
}

/// Takes `want` of each kind from `free`, lowest numbers first, and
/// returns them; `None` (and `free` untouched) if some kind is short.
pub fn take(free: &mut Masks, want: &Counts) -> Option<Masks> {
    if free
        .iter()
        .zip(want)
        .any(|(bits, &n)| bits.count_ones() < u32::from(n))
    {
        return None;
    }
    let mut taken = Masks::default();
    for k in 0..MAX_KINDS {
        for _ in 0..want[k] {
            let low = free[k] & free[k].wrapping_neg();
            taken[k] |= low;
            free[k] &= !low;
        }
    }
    Some(taken)
}

/// Gives `held` back to `free`.
pub fn give(free: &mut Masks, held: &Masks) {
    for k in 0..MAX_KINDS {
        free[k] |= held[k];
    }
}

/// Whether every device of `held` is free in `free`.
pub fn all_in(free: &Masks, held: &Masks) -> bool {
    free.iter().zip(held).all(|(f, h)| f & h == *h)
}

/// The device numbers of a bit set, ascending.
pub fn ids(bits: u64) -> Vec<u32> {
    (0..64).filter(|i| bits & (1 << i) != 0).collect()
}

/// A bit set of device numbers (each under 64).
pub fn mask_of(ids: &[u32]) -> u64 {
    ids.iter().filter(|&&i| i < 64).fold(0, |m, &i| m | 1 << i)
}

/// A request as `--gres` writes it: `gpu:2,fpga:1`.
pub fn request_text(asks: &[(String, u32)]) -> String {
    asks.iter()
        .map(|(name, n)| format!("{name}:{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `--gres` (`gpu:2`, or `gpu:2,fpga:1`: Slurm's form; a bare name
/// asks one).
pub fn parse_request(text: &str) -> Result<Vec<(String, u32)>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, n) = match item.split_once(':') {
            Some((name, n)) => (
                name,
                n.parse::<u32>()
                    .map_err(|_| format!("{item:?}: expected NAME:COUNT"))?,
            ),
            None => (item, 1),
        };
        if !valid_name(name) {
            return Err(format!("{item:?}: {name:?} is not a resource name"));
        }
        out.push((name.to_string(), n));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn kinds_put_gpus_first_and_the_rest_by_name() {
        let k = Kinds::of(&[
            group(&[("fpga", 2)]),
            group(&[("gpu", 4), ("nvme", 1)]),
            group(&[]),
        ])
        .unwrap();
        assert_eq!(k.names(), ["gpu", "fpga", "nvme"]);
        assert_eq!(
            k.counts_of(&group(&[("gpu", 4), ("nvme", 1)])),
            [4, 0, 1, 0]
        );
        assert_eq!(
            k.request(&[("nvme".into(), 1), ("gpu".into(), 2)]),
            Ok([2, 0, 1, 0])
        );
    }

    #[test]
    fn bad_kinds_and_requests_are_refused_by_name() {
        let five: Vec<_> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| group(&[(n, 1)]))
            .collect();
        assert!(Kinds::of(&five).unwrap_err().contains("more than the 4"));
        assert!(Kinds::of(&[group(&[("GPU", 1)])])
            .unwrap_err()
            .contains("\"GPU\""));
        assert!(Kinds::of(&[group(&[("gpu", 65)])])
            .unwrap_err()
            .contains("65 gpu"));
        let k = Kinds::of(&[group(&[("gpu", 4)])]).unwrap();
        let e = k.request(&[("fpga".into(), 1)]).unwrap_err();
        assert!(e.contains("fpga") && e.contains("it has gpu"), "{e}");
        let none = Kinds::default();
        assert!(none
            .request(&[("gpu".into(), 1)])
            .unwrap_err()
            .contains("no node"));
    }

    #[test]
    fn devices_are_taken_lowest_first_and_given_back() {
        let mut free = all_free(&[4, 1, 0, 0]);
        assert_eq!(free, [0b1111, 0b1, 0, 0]);
        let a = take(&mut free, &[2, 0, 0, 0]).unwrap();
        assert_eq!(ids(a[0]), vec![0, 1]);
        let b = take(&mut free, &[1, 1, 0, 0]).unwrap();
        assert_eq!((ids(b[0]), ids(b[1])), (vec![2], vec![0]));
        assert_eq!(take(&mut free, &[2, 0, 0, 0]), None, "one GPU left");
        assert_eq!(count(&free), [1, 0, 0, 0]);
        give(&mut free, &a);
        assert!(all_in(&free, &a));
        assert_eq!(
            ids(take(&mut free, &[3, 0, 0, 0]).unwrap()[0]),
            vec![0, 1, 3]
        );
        assert_eq!(all_free(&[64, 0, 0, 0])[0], u64::MAX);
        assert_eq!(mask_of(&[0, 3]), 0b1001);
    }

    #[test]
    fn a_fraction_of_the_jobs_is_spread_over_the_trace_and_fixed() {
        let rule = TraceRule {
            queue: None,
            partition: None,
            profile: None,
            fraction: Some(0.25),
            asks: vec![(GPU.into(), 1)],
        };
        let taken = |ids: std::ops::Range<i64>| {
            ids.filter(|&id| {
                rule.matches(&TraceJobKey {
                    id,
                    queue: -1,
                    partition: -1,
                    profile: None,
                })
            })
            .count()
        };
        // A quarter of every stretch of jobs, give or take.
        for start in [1, 5_000, 100_000] {
            let n = taken(start..start + 2_000);
            assert!((430..=570).contains(&n), "{n} of 2,000 from job {start}");
        }
        assert_eq!(taken(1..2_001), taken(1..2_001));
        assert_eq!(rule.to_string(), "fraction=0.25 -> gpu:1");
    }

    #[test]
    fn gres_flags_as_slurm_writes_them() {
        assert_eq!(parse_request("gpu:2"), Ok(vec![("gpu".into(), 2)]));
        assert_eq!(
            parse_request("gpu:2,fpga"),
            Ok(vec![("gpu".into(), 2), ("fpga".into(), 1)])
        );
        assert!(parse_request("gpu:x").is_err());
        assert!(parse_request("GPU:1").is_err());
    }
}
