//! `sinfo`: partitions and nodes. As Slurm's, it groups nodes into lines
//! by what the format shows (partition, state, CPUs, memory, GRES), one
//! line per node with `-N`, and folds each line's nodes.

use anyhow::Result;
use clap::Parser;
use controller::config::PartitionDef;
use formats::wire::{NodeInfo, NodeState};

use crate::cluster::Cluster;
use crate::format::{self, Field};
use crate::text::{self, field};

#[derive(Debug, Parser)]
#[command(
    name = "sinfo",
    infer_long_args = true,
    disable_version_flag = true,
    disable_help_flag = true
)]
pub struct Args {
    /// `-h` is --noheader, as in Slurm.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    #[arg(short = 'h', long)]
    noheader: bool,
    #[arg(short = 'o', long)]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    long_format: Option<String>,
    #[arg(short = 'N', long = "Node")]
    node: bool,
    /// More of each partition, under the date, as Slurm's `-l`.
    #[arg(short = 'l', long)]
    long: bool,
    #[arg(short = 'a', long)]
    all: bool,
    #[arg(short = 'p', long)]
    partition: Option<String>,
    #[arg(short = 'n', long)]
    nodes: Option<String>,
    #[arg(short = 's', long)]
    summarize: bool,
    /// Only nodes in these states (`idle,drain`).
    #[arg(short = 't', long)]
    states: Option<String>,
    /// Why nodes are down or drained, as Slurm's `-R`.
    #[arg(short = 'R', long = "list-reasons")]
    list_reasons: bool,
    #[arg(long)]
    json: bool,
    #[arg(long)]
    noconvert: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
}

/// The code `-O gresused` stands for: Slurm's `-o` has no letter for it
/// (`%u` is who gave a node's reason).
const GRES_USED: char = '\u{e000}';
/// The code `-O allocmem` stands for: a node's memory its jobs hold.
const ALLOC_MEM: char = '\u{e001}';
/// What `-o %all` stands for in Slurm 22.05's sinfo: every field.
const ALL: &str = "%a|%b|%c|%d|%e|%f|%g|%h|%l|%m|%n|%o|%p|%r|%s|%t|%u|%v|%w|%z|%A |%B |%C |%D \
    |%E |%F |%G |%H |%I |%L |%M |%N |%O |%P |%R |%S |%T |%U |%V |%X |%Y |%Z ";

/// The `-o` code a `-O` name stands for.
fn long_code(name: &str) -> Option<char> {
    Some(match name {
        "partition" => 'P',
        "partitionname" => 'R',
        "available" => 'a',
        "time" => 'l',
        "nodes" => 'D',
        "statecompact" => 't',
        "statelong" => 'T',
        "nodelist" => 'N',
        "nodehost" => 'n',
        "cpus" => 'c',
        "cpusstate" => 'C',
        "nodeaiot" => 'F',
        "memory" => 'm',
        "gres" => 'G',
        "gresused" => GRES_USED,
        "user" => 'u',
        "timestamp" => 'H',
        "socketcorethread" => 'z',
        "disk" => 'd',
        "weight" => 'w',
        "features" => 'f',
        "prioritytier" => 'p',
        "reason" => 'E',
        "oversubscribe" => 'h',
        "freemem" => 'e',
        "size" => 's',
        "root" => 'r',
        "groups" => 'g',
        "allocmem" => ALLOC_MEM,
        "cpusload" => 'O',
        "nodeaddr" => 'o',
        "features_act" => 'b',
        "version" => 'v',
        "nodeai" => 'A',
        "maxcpuspernode" => 'B',
        "priorityjobfactor" => 'I',
        "defaulttime" => 'L',
        "preemptmode" => 'M',
        "allocnodes" => 'S',
        "cluster" => 'V',
        "sockets" => 'X',
        "cores" => 'Y',
        "threads" => 'Z',
        _ => return None,
    })
}

/// A `-O` list of node fields.
fn long_fields(fmt: &str) -> Result<Vec<Field>> {
    let (fields, unknown) = format::named(fmt, long_code);
    for e in unknown {
        eprintln!("sinfo: error: {e}");
    }
    Ok(fields)
}

fn header(code: char) -> &'static str {
    match code {
        'P' | 'R' => "PARTITION",
        'a' => "AVAIL",
        'l' => "TIMELIMIT",
        'D' => "NODES",
        't' | 'T' => "STATE",
        'N' => "NODELIST",
        'n' => "HOSTNAMES",
        'c' => "CPUS",
        'C' => "CPUS(A/I/O/T)",
        'F' => "NODES(A/I/O/T)",
        'm' => "MEMORY",
        'G' => "GRES",
        GRES_USED => "GRES_USED",
        'u' => "USER",
        'H' => "TIMESTAMP",
        'z' => "S:C:T",
        'd' => "TMP_DISK",
        'w' => "WEIGHT",
        'f' => "AVAIL_FEATURES",
        'p' => "PRIO_TIER",
        'E' => "REASON",
        'h' => "OVERSUBSCRIBE",
        'e' => "FREE_MEM",
        's' => "JOB_SIZE",
        'r' => "ROOT",
        'g' => "GROUPS",
        'O' => "CPU_LOAD",
        'o' => "NODE_ADDR",
        'b' => "ACTIVE_FEATURES",
        'v' => "VERSION",
        'A' => "NODES(A/I)",
        'B' => "MAX_CPUS_PER_NODE",
        'I' => "PRIO_JOB_FACTOR",
        'L' => "DEFAULTTIME",
        'M' => "PREEMPT_MODE",
        'S' => "ALLOCNODES",
        'U' => "USER",
        'V' => "CLUSTER",
        'X' => "SOCKETS",
        'Y' => "CORES",
        'Z' => "THREADS",
        ALLOC_MEM => "ALLOCMEM",
        _ => "",
    }
}

/// A node state as sinfo writes it, compact or long.
fn node_state(n: &NodeInfo, long: bool) -> &'static str {
    match (n.state, long) {
        (NodeState::Idle, _) => "idle",
        (NodeState::Mixed, false) => "mix",
        (NodeState::Mixed, true) => "mixed",
        (NodeState::Allocated, false) => "alloc",
        (NodeState::Allocated, true) => "allocated",
        (NodeState::Drained, false) if n.alloc_cpus > 0 => "drng",
        (NodeState::Drained, true) if n.alloc_cpus > 0 => "draining",
        (NodeState::Drained, false) => "drain",
        (NodeState::Drained, true) => "drained",
        (NodeState::Down, _) => "down",
    }
}

/// `sinfo --json`: each node as Slurm 22.05's `openapi/v0.0.38` plugin
/// writes it, every key in its order. A virtual node is Slurm's
/// `CPUs=N` (N sockets of one core) on this host: the host's boot time
/// and system are its own; it has no load, and its free memory is what
/// no job holds.
fn json(nodes: &[NodeInfo], cfg: &controller::config::Cluster) -> std::io::Result<()> {
    use serde_json::json;
    let now = crate::text::now_s();
    let boot = host_boot_time().unwrap_or(now);
    let system = nix::sys::utsname::uname().map_or_else(
        |_| String::new(),
        |u| {
            format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.version().to_string_lossy()
            )
        },
    );
    // Each node's partitions, found once rather than node by node.
    let mut partitions: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    for p in &cfg.partitions {
        for &i in &p.nodes {
            let of = partitions.entry(cfg.nodes[i].name.as_str()).or_default();
            // A node the partition's list names twice is in it once.
            if of.last() != Some(&p.name.as_str()) {
                of.push(&p.name);
            }
        }
    }
    let list = nodes
        .iter()
        .map(|n| {
            // The base state, and what is added to it, as Slurm splits them.
            let (state, flags): (&str, &[&str]) = match n.state {
                NodeState::Idle => ("idle", &[]),
                NodeState::Mixed => ("mixed", &[]),
                NodeState::Allocated => ("allocated", &[]),
                NodeState::Drained if n.alloc_cpus > 0 => ("mixed", &["DRAIN"]),
                NodeState::Drained => ("idle", &["DRAIN"]),
                NodeState::Down => ("down", &[]),
            };
            let or_empty = |s: String| if s == "(null)" { String::new() } else { s };
            let mut used = vec![format!("cpu={}", n.alloc_cpus)];
            if n.alloc_memory_mb > 0 {
                used.push(format!("mem={}", crate::text::mem_mb(n.alloc_memory_mb)));
            }
            json!({
                "architecture": "x86_64",
                "burstbuffer_network_address": "",
                "boards": 1,
                "boot_time": boot,
                "comment": "",
                "cores": 1,
                "cpu_binding": 0,
                "cpu_load": 0,
                "extra": "",
                "free_memory": n.memory_mb.saturating_sub(n.alloc_memory_mb),
                "cpus": n.cpus,
                "last_busy": now,
                "features": "",
                "active_features": "",
                "gres": or_empty(gres(n, false)),
                "gres_drained": "N/A",
                "gres_used": or_empty(gres(n, true)),
                "mcs_label": "",
                "name": n.name,
                "next_state_after_reboot": "invalid",
                "address": n.name,
                "hostname": if n.host.is_empty() { &n.name } else { &n.host },
                "state": state,
                "state_flags": flags,
                "next_state_after_reboot_flags": [],
                "operating_system": system,
                "owner": null,
                "partitions": partitions.get(n.name.as_str()).cloned().unwrap_or_default(),
                // Slurm's default SlurmdPort: a virtual node listens on none.
                "port": 6818,
                "real_memory": n.memory_mb,
                "reason": n.reason,
                "reason_changed_at": if n.reason.is_empty() { 0 } else { n.reason_ns.div_euclid(1_000_000_000) },
                "reason_set_by_user": (!n.reason.is_empty()).then(crate::cluster::owner),
                "slurmd_start_time": boot,
                "sockets": n.cpus,
                "threads": 1,
                "temporary_disk": 0,
                "weight": 1,
                "tres": format!("cpu={},mem={},billing={}", n.cpus, crate::text::mem_mb(n.memory_mb), n.cpus),
                "slurmd_version": crate::text::RELEASE,
                "alloc_memory": n.alloc_memory_mb,
                "alloc_cpus": n.alloc_cpus,
                "idle_cpus": n.cpus.saturating_sub(n.alloc_cpus),
                "tres_used": (n.alloc_cpus > 0).then(|| used.join(",")),
                "tres_weighted": f64::from(n.alloc_cpus),
            })
        });
    crate::text::write_document("openapi/v0.0.38", "nodes", list)
}

/// When this host booted (Unix seconds), from `/proc/stat`'s `btime`.
fn host_boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// The states `-t` names, each checked against Slurm's list.
fn wanted_states(list: &str) -> Result<Vec<String>> {
    const VALID: &[&str] = &[
        "unknown",
        "down",
        "idle",
        "allocated",
        "alloc",
        "mixed",
        "mix",
        "future",
        "drain",
        "drained",
        "draining",
        "no_respond",
        "reserved",
        "resv",
        "perfctrs",
        "cloud",
        "completing",
        "comp",
        "powering_down",
        "powered_down",
        "power_down",
        "powering_up",
        "fail",
        "failing",
        "maint",
        "reboot",
        "reboot^",
        "unk",
        "npc",
        "planned",
    ];
    list.split(',')
        .map(|s| {
            let s = s.to_ascii_lowercase();
            if VALID.contains(&s.as_str()) {
                Ok(s)
            } else {
                Err(anyhow::anyhow!(
                    "Bad state string: \"{s}\"\nsinfo: error: valid states: unknown,down,idle,\
                     allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,\
                     perfctrs,cloud,completing,powering_down,powered_down,power_down,\
                     powering_up,fail,maint,reboot,reboot^,unknown"
                ))
            }
        })
        .collect()
}

/// Whether node `n` is in state `s`, as `-t` reads it: a drained node is
/// also in the state of its cores (idle, mixed or allocated), as on Slurm.
fn in_state(n: &NodeInfo, s: &str) -> bool {
    let number = state_number(n);
    let (base, drained) = (number & 0xff, number & DRAIN != 0);
    match s {
        "down" => base == 1,
        "idle" => base == 2,
        "alloc" | "allocated" => base == 3,
        "mix" | "mixed" => base == 5,
        "drain" => drained,
        "drained" => drained && base == 2,
        "draining" => drained && base != 2,
        _ => false,
    }
}

/// Slurm's drain flag on a node's state number.
const DRAIN: u32 = 0x200;

/// A node's state as Slurm numbers it, which its default sort orders by:
/// the base state (down 1, idle 2, allocated 3, mixed 5) with the drain
/// flag (0x200) on a drained node.
fn state_number(n: &NodeInfo) -> u32 {
    let base = match n.state {
        NodeState::Down => return 1,
        _ if n.alloc_cpus == 0 => 2,
        _ if n.alloc_cpus >= n.cpus => 3,
        _ => 5,
    };
    if n.state == NodeState::Drained {
        base | DRAIN
    } else {
        base
    }
}

/// One output line: a partition (if the format shows one) and its nodes
/// alike in what the format shows.
struct Group<'a> {
    partition: Option<&'a PartitionDef>,
    nodes: Vec<&'a NodeInfo>,
}

/// What every line's values read besides its nodes.
struct Ctx<'a> {
    /// The default partition, marked `*`.
    default: &'a str,
    /// Who gives a node its reason: the cluster's owner.
    owner: &'a str,
    /// Slurm's PreemptMode for the cluster's preemption.
    preempt_mode: &'static str,
}

fn value(code: char, g: &Group<'_>, c: &Ctx<'_>, part_width: usize) -> String {
    let (default, owner) = (c.default, c.owner);
    let first = g.nodes[0];
    let sum = |f: &dyn Fn(&NodeInfo) -> u64| g.nodes.iter().map(|n| f(n)).sum::<u64>();
    match code {
        'P' => match g.partition {
            Some(p) if p.name == default => {
                if part_width == 0 || p.name.len() < part_width {
                    format!("{}*", p.name)
                } else {
                    let mut s: String = p.name.chars().take(part_width - 1).collect();
                    s.push('*');
                    s
                }
            }
            Some(p) => p.name.clone(),
            None => "n/a".into(),
        },
        'R' => g.partition.map_or("n/a".into(), |p| p.name.clone()),
        'a' => "up".into(),
        'l' => match g.partition.map_or(0, |p| p.max_time_ns) {
            0 => "infinite".into(),
            ns => text::short_duration(text::limit_minutes(ns) * 60),
        },
        'D' => g.nodes.len().to_string(),
        't' => node_state(first, false).into(),
        'T' => node_state(first, true).into(),
        'N' | 'n' => fold(&g.nodes),
        'c' => range(g.nodes.iter().map(|n| u64::from(n.cpus))),
        'm' => range(g.nodes.iter().map(|n| n.memory_mb)),
        'C' => {
            let alloc = sum(&|n| u64::from(n.alloc_cpus));
            let total = sum(&|n| u64::from(n.cpus));
            let other = sum(&|n| {
                if matches!(n.state, NodeState::Down | NodeState::Drained) {
                    u64::from(n.cpus - n.alloc_cpus.min(n.cpus))
                } else {
                    0
                }
            });
            format!("{alloc}/{}/{other}/{total}", total - alloc - other)
        }
        'F' => {
            let (alloc, idle) = busy_idle(&g.nodes);
            let total = g.nodes.len();
            format!("{alloc}/{idle}/{}/{total}", total - alloc - idle)
        }
        'G' => gres(first, false),
        GRES_USED => gres(first, true),
        // Who gave the reason: clemu keeps no user per request; the
        // cluster's owner, who runs its controller.
        'u' | 'U' if first.reason.is_empty() => "Unknown".into(),
        'u' => owner.into(),
        'U' => format!(
            "{owner}({})",
            text::uid_of(owner).map_or("?".into(), |u| u.to_string())
        ),
        'H' if first.reason.is_empty() || first.reason_ns == 0 => "Unknown".into(),
        'H' => text::date(first.reason_ns.div_euclid(1_000_000_000)),
        'p' => g.partition.map_or(1, |p| p.priority.max(1)).to_string(),
        'E' => {
            if first.reason.is_empty() {
                "none".into()
            } else {
                first.reason.clone()
            }
        }
        'h' => match g.partition.map_or(1, |p| p.oversubscribe) {
            0 | 1 => "NO".into(),
            n => format!("FORCE:{n}"),
        },
        // A virtual node has no load of its own, and its free memory is
        // what no job holds.
        'O' => "0.00".into(),
        'e' => first
            .memory_mb
            .saturating_sub(first.alloc_memory_mb)
            .to_string(),
        ALLOC_MEM => first.alloc_memory_mb.to_string(),
        // Its address is its name (clemu's NodeAddr).
        'o' => fold(&g.nodes),
        'b' => "(null)".into(),
        'v' => text::RELEASE.into(),
        'A' => {
            let (alloc, idle) = busy_idle(&g.nodes);
            format!("{alloc}/{idle}")
        }
        'B' => "UNLIMITED".into(),
        'I' => "1".into(),
        'L' => "n/a".into(),
        'M' => c.preempt_mode.into(),
        'S' => "all".into(),
        // The cluster, once -M names it (Slurm's N/A without).
        'V' => "N/A".into(),
        'X' => first.cpus.to_string(),
        'Y' | 'Z' => "1".into(),
        // Partitions without node limits, roots or groups, as Slurm's
        // defaults show them.
        's' => "1-infinite".into(),
        // A virtual node is as Slurm shows a node configured with CPUs
        // alone: a socket per CPU, each of one single-threaded core, with
        // no scratch disk, weight or features.
        'z' => format!("{}:1:1", first.cpus),
        'd' => "0".into(),
        'w' => "1".into(),
        'f' => "(null)".into(),
        'r' => "no".into(),
        'g' => "all".into(),
        _ => String::new(),
    }
}

/// How many of `nodes` run jobs (allocated or mixed), and how many are
/// idle: Slurm's A and I.
fn busy_idle(nodes: &[&NodeInfo]) -> (usize, usize) {
    let busy = nodes
        .iter()
        .filter(|n| matches!(n.state, NodeState::Allocated | NodeState::Mixed))
        .count();
    let idle = nodes.iter().filter(|n| n.state == NodeState::Idle).count();
    (busy, idle)
}

/// `gpu:4`, Slurm's `(null)` for none; with `used`, the devices held.
fn gres(n: &NodeInfo, used: bool) -> String {
    if n.gres.is_empty() {
        return "(null)".into();
    }
    n.gres
        .iter()
        .map(|(k, total, held)| format!("{k}:{}", if used { *held } else { *total }))
        .collect::<Vec<_>>()
        .join(",")
}

fn range(values: impl Iterator<Item = u64>) -> String {
    let v: Vec<u64> = values.collect();
    let (lo, hi) = (
        v.iter().copied().min().unwrap_or(0),
        v.iter().copied().max().unwrap_or(0),
    );
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}+")
    }
}

fn fold(nodes: &[&NodeInfo]) -> String {
    formats::nodeset::fold(nodes.iter().map(|n| n.name.as_str()))
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::argv::parse_plain(&argv)?;
    let named = match crate::cluster::reach("sinfo", args.clusters.as_deref()) {
        Ok(named) => named && !args.noheader,
        Err(code) => return Ok(code),
    };
    let mut c = Cluster::open().await?;
    let nodes = c.nodes().await?;
    let cfg = &c.config;
    let default = c.default_partition().to_string();
    let wanted_nodes: Option<Vec<String>> = match &args.nodes {
        Some(n) => Some(
            formats::nodeset::parse(n)
                .map(|s| formats::nodeset::expand(&s))
                .map_err(|e| anyhow::anyhow!("Invalid node name specified: {e}"))?,
        ),
        None => None,
    };
    let states = args.states.as_deref().map(wanted_states).transpose()?;
    let by_name: std::collections::HashMap<&str, &NodeInfo> =
        nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut prefix = String::new();
    // The user's default (SINFO_FORMAT) stands for -o unless -O, -N, -s
    // or -R asks otherwise; with -l it is still used, under the date, as
    // on Slurm.
    let mut format = args.format.clone();
    if format.is_none()
        && args.long_format.is_none()
        && !(args.node || args.summarize || args.list_reasons)
    {
        format = std::env::var("SINFO_FORMAT").ok();
    }
    let (fields, part_sized, node_sized) = match (&args.long_format, &format) {
        (Some(f), _) => (long_fields(f)?, false, false),
        (None, Some(f)) => {
            let f = if f == "%all" { ALL } else { f.as_str() };
            let (p, parsed) = format::percent(f);
            prefix = p;
            // A code sinfo does not know is said, and printed as written,
            // as Slurm's sinfo does.
            let mut fields: Vec<Field> = Vec::new();
            for field in parsed {
                if !header(field.code).is_empty() {
                    fields.push(field);
                    continue;
                }
                eprintln!("Invalid node format specification: {}", field.code);
                let text = format!("%{}{}", field.code, field.suffix);
                match fields.last_mut() {
                    Some(last) => last.suffix.push_str(&text),
                    None => prefix.push_str(&text),
                }
            }
            (fields, false, false)
        }
        // Slurm's summary: a line per partition, its nodes counted by
        // state (allocated/idle/other/total).
        // Only the nodes with a reason, a line per reason.
        (None, None) if args.list_reasons => (
            long_fields("reason:20 ,user:9 ,timestamp:19 ,nodelist:0")?,
            false,
            false,
        ),
        (None, None) if args.summarize => (
            long_fields("partition:9 ,available:.5 ,time:.10 ,nodeaiot:.16 ,nodelist:0")?,
            true,
            false,
        ),
        (None, None) if args.node && args.long => (
            long_fields(
                "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 \
                 ,socketcorethread:.8 ,memory:.6 ,disk:.8 ,weight:.6 ,features:.8 ,reason:20",
            )?,
            true,
            true,
        ),
        (None, None) if args.long => (
            long_fields(
                "partition:9 ,available:.5 ,time:.10 ,size:.10 ,root:.4 ,oversubscribe:.8 \
                 ,groups:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0",
            )?,
            true,
            false,
        ),
        (None, None) if args.node => (
            long_fields("nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6")?,
            true,
            true,
        ),
        (None, None) => (
            long_fields(
                "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0",
            )?,
            true,
            false,
        ),
    };
    let shows = |codes: &str| fields.iter().any(|f| codes.contains(f.code));
    let split_partitions = shows("PRalph") || args.partition.is_some();
    // Lines: nodes grouped by partition, then by what the format shows.
    let mut groups: Vec<Group<'_>> = Vec::new();
    let partitions: Vec<Option<&PartitionDef>> = if split_partitions {
        cfg.partitions
            .iter()
            .filter(|p| {
                args.partition
                    .as_ref()
                    .is_none_or(|want| want.split(',').any(|w| w == p.name))
            })
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    for part in partitions {
        let members: Vec<&NodeInfo> = match part {
            Some(p) => p
                .nodes
                .iter()
                .filter_map(|&i| by_name.get(cfg.nodes[i].name.as_str()).copied())
                .collect(),
            None => nodes.iter().collect(),
        };
        let start = groups.len();
        for n in members {
            if wanted_nodes.as_ref().is_some_and(|w| !w.contains(&n.name))
                || states
                    .as_ref()
                    .is_some_and(|s| !s.iter().any(|s| in_state(n, s)))
                || args.list_reasons && n.reason.is_empty()
            {
                continue;
            }
            let key = |m: &NodeInfo| {
                (
                    if shows("tT") { node_state(m, true) } else { "" },
                    if shows("c") { m.cpus } else { 0 },
                    if shows("m") { m.memory_mb } else { 0 },
                    if shows("G\u{e000}") {
                        gres(m, shows("\u{e000}"))
                    } else {
                        String::new()
                    },
                    if shows("EHu") {
                        m.reason.clone()
                    } else {
                        String::new()
                    },
                    if shows("H") { m.reason_ns } else { 0 },
                    if shows("e\u{e001}") {
                        (m.memory_mb, m.alloc_memory_mb)
                    } else {
                        (0, 0)
                    },
                )
            };
            let k = key(n);
            let found = if args.node {
                None
            } else {
                groups[start..].iter_mut().find(|g| key(g.nodes[0]) == k)
            };
            match found {
                Some(g) => g.nodes.push(n),
                None => groups.push(Group {
                    partition: part,
                    nodes: vec![n],
                }),
            }
        }
        // Slurm lists a partition's states from the highest state number
        // down (its default sort, `-t`).
        if !args.node {
            groups[start..].sort_by_key(|g| std::cmp::Reverse(state_number(g.nodes[0])));
        }
    }
    if args.json {
        json(&nodes, cfg)?;
        return Ok(0);
    }
    let part_width = cfg
        .partitions
        .iter()
        .map(|p| p.name.len() + usize::from(p.name == default))
        .max()
        .unwrap_or(0)
        .max(9);
    let node_width = groups
        .iter()
        .map(|g| fold(&g.nodes).len())
        .max()
        .unwrap_or(0)
        .max(9);
    let width = |f: &Field| match f.code {
        'P' if part_sized => part_width,
        'N' if node_sized => node_width,
        _ => f.width,
    };
    let owner = crate::cluster::owner();
    let ctx = Ctx {
        default: &default,
        owner: &owner,
        preempt_mode: crate::scontrol::preempt_mode(cfg.preemption)
            .split(',')
            .next()
            .unwrap_or("OFF"),
    };
    let mut out = String::new();
    if args.long && !args.noheader {
        out.push_str(&crate::text::ctime(crate::text::now_s()));
        out.push('\n');
    }
    if named {
        out.push_str(&format!("CLUSTER: {}\n", crate::cluster::NAME));
    }
    if !args.noheader {
        out.push_str(&prefix);
        for f in &fields {
            // Headers are cut to their width, but for the node lists'.
            let cut = !matches!(f.code, 'N' | 'n');
            out.push_str(&field(header(f.code), width(f), f.right, cut));
            out.push_str(&f.suffix);
        }
        out.push('\n');
    }
    for g in &groups {
        out.push_str(&prefix);
        for f in &fields {
            let v = value(f.code, g, &ctx, width(f));
            out.push_str(&field(&v, width(f), f.right, true));
            out.push_str(&f.suffix);
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: NodeState, alloc_cpus: u32) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            state,
            cpus: 4,
            alloc_cpus,
            memory_mb: 1000,
            alloc_memory_mb: 0,
            host: String::new(),
            reason: String::new(),
            reason_ns: 0,
            gres: Vec::new(),
        }
    }

    #[test]
    fn states_sort_and_filter_as_slurms_numbers_say() {
        // As Slurm 22.05 listed five such nodes: drain, mix, alloc, idle,
        // down.
        let mut nodes = [
            node("node1", NodeState::Allocated, 4),
            node("node2", NodeState::Mixed, 1),
            node("node3", NodeState::Idle, 0),
            node("node4", NodeState::Drained, 0),
            node("node5", NodeState::Down, 0),
        ];
        nodes.sort_by_key(|n| std::cmp::Reverse(state_number(n)));
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["node4", "node2", "node1", "node3", "node5"]);
        let draining = node("node6", NodeState::Drained, 2);
        let pick = |s: &str| -> Vec<String> {
            nodes
                .iter()
                .chain([&draining])
                .filter(|n| in_state(n, s))
                .map(|n| n.name.clone())
                .collect()
        };
        assert_eq!(pick("idle"), ["node4", "node3"]);
        assert_eq!(pick("drain"), ["node4", "node6"]);
        assert_eq!(pick("drained"), ["node4"]);
        assert_eq!(pick("draining"), ["node6"]);
        assert_eq!(pick("mix"), ["node2", "node6"]);
        assert_eq!(pick("alloc"), ["node1"]);
        assert_eq!(pick("down"), ["node5"]);
        assert!(wanted_states("idle,DRAIN").is_ok());
        assert!(wanted_states("bogus").is_err());
    }
}
