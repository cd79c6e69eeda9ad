//! `squeue`: the jobs the controller holds, filtered and printed with
//! Slurm's format codes (`-o`) or field names (`-O`), sorted as Slurm
//! sorts them (partition, state name, then age).

use anyhow::Result;
use clap::Parser;
use formats::wire::{JobInfo, JobState};

use crate::accounts;
use crate::cluster::Cluster;
use crate::format;
use crate::text::{self, field};

/// How long a finished job stays in squeue's view (Slurm's `MinJobAge`,
/// which `scontrol show config` reports).
pub const MIN_JOB_AGE_S: i64 = 300;

const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// `-l`'s, with the date above it.
const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// `--start`'s table, as Slurm's squeue defines it.
const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

#[derive(Debug, Parser)]
#[command(
    name = "squeue",
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
    /// More of each job, under the date, as Slurm's `-l`.
    #[arg(short = 'l', long)]
    long: bool,
    #[arg(short = 'o', long)]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    long_format: Option<String>,
    #[arg(short = 't', long)]
    states: Option<String>,
    #[arg(short = 'u', long, overrides_with = "me")]
    user: Option<String>,
    /// The jobs of whoever runs squeue: `-u` themselves; the last of the
    /// two given wins, as on Slurm.
    #[arg(long, overrides_with = "user")]
    me: bool,
    #[arg(short = 'j', long)]
    jobs: Option<String>,
    #[arg(short = 'p', long)]
    partition: Option<String>,
    #[arg(short = 'n', long)]
    name: Option<String>,
    #[arg(long)]
    json: bool,
    /// Accepted; what they change does not exist in clemu.
    #[arg(long)]
    noconvert: bool,
    #[arg(short = 'a', long)]
    all: bool,
    #[arg(short = 'r', long)]
    array: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    /// Jobs on any of these nodes (a node list, `node[1-3]`).
    #[arg(short = 'w', long)]
    nodelist: Option<String>,
    /// Pending jobs with their expected starts and nodes, soonest first.
    #[arg(long)]
    start: bool,
}

/// The `-o` code a `-O` name stands for; the names with no code get
/// private ones (upper-case letters squeue leaves unused here).
fn long_code(name: &str) -> Option<char> {
    Some(match name {
        // The job's own id, a pending array's too (squeue's job_id2).
        "jobid" => 'A',
        "arrayjobid" => 'F',
        "arraytaskid" => 'K',
        // The job's id as `%i` gives it (`12_[2-4]`, `12_3`).
        "jobarrayid" => 'i',
        "tres-alloc" => '5',
        "numtasks" => '6',
        "eligibletime" => '7',
        "name" => 'j',
        "username" => 'u',
        "userid" => 'U',
        "statecompact" => 't',
        "state" => 'T',
        "timeused" => 'M',
        "timelimit" => 'l',
        "timeleft" => 'L',
        "numnodes" => 'D',
        "numcpus" => 'C',
        "partition" => 'P',
        "reasonlist" => 'R',
        "reason" => 'r',
        "nodelist" => 'N',
        "starttime" => 'S',
        "submittime" => 'V',
        "endtime" => 'e',
        "minmemory" => 'm',
        "workdir" => 'Z',
        "comment" => 'k',
        "command" => 'o',
        "priority" => 'p',
        "prioritylong" => 'Q',
        "qos" => 'q',
        "account" => 'a',
        "gres" | "tres-per-node" => 'b',
        "stdout" => '1',
        "stderr" => '2',
        "exit_code" => '3',
        "cpuspertask" | "cpus-per-task" => '4',
        "dependency" => 'E',
        "groupname" => 'g',
        "groupid" => 'G',
        "batchhost" => 'B',
        "mincpus" => 'c',
        "mintmpdisk" => 'd',
        "feature" => 'f',
        "oversubscribe" => 'h',
        "sockets" => 'H',
        "cores" => 'I',
        "threads" => 'J',
        "reqnodes" => 'n',
        "contiguous" => 'O',
        "reservation" => 'v',
        "wckey" => 'w',
        "licenses" => 'W',
        "corespec" => 'X',
        "nice" => 'y',
        "schednodes" => 'Y',
        "sct" => 'z',
        _ => return None,
    })
}

/// A job line's facts beyond the job: who runs the command, whether the
/// job is first of its partition's pending ones, the tasks folded into
/// it (a pending array's), and the cluster's cores per node.
struct Line<'a> {
    job: &'a JobInfo,
    first_pending: bool,
    /// Folded array tasks (`1-3`), for a pending array's line.
    tasks: Option<String>,
}

fn header(code: char) -> &'static str {
    match code {
        'i' | 'A' => "JOBID",
        'F' => "ARRAY_JOB_ID",
        'K' => "ARRAY_TASK_ID",
        'j' => "NAME",
        'u' => "USER",
        'U' => "UID",
        'g' | 'G' => "GROUP",
        'B' => "EXEC_HOST",
        'c' => "MIN_CPUS",
        'd' => "MIN_TMP_DISK",
        'f' => "FEATURES",
        'h' => "OVER_SUBSCRIBE",
        'H' => "SOCKETS_PER_NODE",
        'I' => "CORES_PER_SOCKET",
        'J' => "THREADS_PER_CORE",
        'n' => "REQ_NODES",
        'O' => "CONTIGUOUS",
        'v' => "RESERVATION",
        'w' => "WCKEY",
        'W' => "LICENSES",
        'x' => "EXC_NODES",
        'X' => "CORE_SPEC",
        'y' => "NICE",
        'Y' => "SCHEDNODES",
        'z' => "S:C:T",
        't' => "ST",
        'T' => "STATE",
        'M' => "TIME",
        'l' => "TIME_LIMIT",
        'L' => "TIME_LEFT",
        'D' => "NODES",
        'C' => "CPUS",
        'P' => "PARTITION",
        'R' => "NODELIST(REASON)",
        'r' => "REASON",
        'N' => "NODELIST",
        'S' => "START_TIME",
        'V' => "SUBMIT_TIME",
        'e' => "END_TIME",
        'm' => "MIN_MEMORY",
        'Z' => "WORK_DIR",
        'k' => "COMMENT",
        'o' => "COMMAND",
        'p' | 'Q' => "PRIORITY",
        'q' => "QOS",
        'a' => "ACCOUNT",
        'b' => "TRES_PER_NODE",
        '1' => "STDOUT",
        '2' => "STDERR",
        '3' => "EXIT_CODE",
        '4' => "CPUS_PER_TASK",
        '5' => "TRES_ALLOC",
        '6' => "TASKS",
        '7' => "ELIGIBLE_TIME",
        'E' => "DEPENDENCY",
        _ => "",
    }
}

/// Slurm's priority under its basic plugin: older jobs first.
pub fn priority(j: &JobInfo) -> u64 {
    // A held job's priority is 0: that is how Slurm holds it.
    if text::held(j) {
        return 0;
    }
    4_294_901_760u64.saturating_sub(j.array.map_or(j.id, |a| a.job.min(j.id)))
}

struct Ctx<'a> {
    now: i64,
    /// Pending jobs' expected starts (seconds) and nodes, with `--start`.
    starts: std::collections::HashMap<u64, (i64, String)>,
    me: &'a str,
    cluster: &'a Cluster,
    /// `--noconvert`: memory in megabytes as held (`1024M`, not `1G`).
    noconvert: bool,
}

/// An array's limit of tasks at once as its folded pending tasks show
/// it (`12_[3-6%2]`); nothing without one.
fn throttle(a: formats::wire::ArrayTask) -> String {
    match a.limit {
        0 => String::new(),
        n => format!("%{n}"),
    }
}

/// Field `code`'s text for `l`, and whether a width cuts it.
fn value(code: char, l: &Line<'_>, c: &Ctx<'_>) -> (String, bool) {
    let j = l.job;
    let na = || "N/A".to_string();
    let v = match code {
        'i' => match (&l.tasks, j.array) {
            (Some(t), Some(a)) => format!("{}_[{t}{}]", a.job, throttle(a)),
            _ => text::job_id(j),
        },
        'A' => j.id.to_string(),
        'F' => j.array.map_or(j.id, |a| a.job).to_string(),
        'K' => match (&l.tasks, j.array) {
            (Some(t), Some(a)) => format!("{t}{}", throttle(a)),
            (Some(t), None) => t.clone(),
            (None, Some(a)) => a.index.to_string(),
            (None, None) => na(),
        },
        'j' => j.name.clone(),
        'u' => text::owner(j, c.me),
        'U' => text::uid_of(&text::owner(j, c.me)).map_or(na(), |u| u.to_string()),
        'g' => text::group_of(&text::owner(j, c.me)),
        't' => text::shown_compact(j).into(),
        'T' => text::shown_long(j).into(),
        'M' => return (text::short_duration(text::time_used(j, c.now)), false),
        // A limit's figures are never cut; UNLIMITED is.
        'l' => return (text::squeue_limit(j.walltime_ns), j.walltime_ns == 0),
        'L' => match j.walltime_ns {
            0 => "UNLIMITED".into(),
            w => {
                // The limit as held (to the second when given so).
                let left = text::limit_seconds(w) - text::time_used(j, c.now);
                return (text::short_duration(left.max(0)), false);
            }
        },
        'D' => nodes_of(j, &c.cluster.config).to_string(),
        'C' => j.cores.to_string(),
        'P' => j.partition.clone(),
        'R' => {
            if j.state == JobState::Pending
                || matches!(
                    j.state,
                    JobState::Failed | JobState::Timeout | JobState::OutOfMemory
                )
            {
                format!("({})", text::reason(j, l.first_pending))
            } else {
                return (j.nodes.clone(), false);
            }
        }
        'r' => text::reason(j, l.first_pending),
        'N' => return (j.nodes.clone(), false),
        'Y' if j.start_ns == 0 && c.starts.contains_key(&j.id) => c.starts[&j.id].1.clone(),
        'S' => shown_start(j, &c.starts).map_or_else(na, text::date),
        'V' => text::date(text::secs(j.submit_ns)),
        '6' => j.program.as_ref().map_or(1, |p| p.ntasks).to_string(),
        // Held, or waiting for other jobs: not eligible yet.
        '7' => match j.program.as_ref().map(|p| p.eligible_ns) {
            _ if j.reason.starts_with("JobHeld") => na(),
            Some(None) => na(),
            Some(Some(t)) => text::date(text::secs(t)),
            None => text::date(text::secs(j.submit_ns)),
        },
        'e' => match (j.end_ns, j.start_ns, j.walltime_ns) {
            (e, _, _) if e > 0 => text::date(text::secs(e)),
            (_, 0, _) => na(),
            (_, _, 0) => "NONE".into(),
            (_, s, w) => text::date(text::secs(s) + text::limit_seconds(w)),
        },
        // Per node when asked so (`--mem`), else per core.
        'm' => {
            let mb = match j.program.as_ref().map_or(0, |p| p.mem_per_node_mb) {
                0 => j.mem_per_cpu_mb,
                node => node,
            };
            text::convert_num_unit(mb as f64, text::MEGA, None, c.noconvert)
        }
        'Z' => j.program.as_ref().map_or(na(), |p| p.workdir.clone()),
        'k' => match j.program.as_ref().map(|p| p.comment.as_str()) {
            Some(c) if !c.is_empty() => c.to_string(),
            _ => "(null)".into(),
        },
        'o' => match j.program.as_ref().map(|p| p.command.as_str()) {
            Some(c) if !c.is_empty() => c.to_string(),
            _ => "(null)".into(),
        },
        'E' => match j.program.as_ref().map(|p| p.dependency.as_str()) {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => "(null)".into(),
        },
        'p' => format!("{:.14}", priority(j) as f64 / f64::from(u32::MAX)),
        'Q' => priority(j).to_string(),
        // As Slurm with an association, `(null)` without.
        'a' => accounts::account_of(&text::owner(j, c.me))
            .unwrap_or("(null)")
            .into(),
        'q' => accounts::account_of(&text::owner(j, c.me))
            .map_or("(null)", |_| accounts::QOS)
            .into(),
        'b' => match &j.gres {
            Some(g) if !g.asks.is_empty() => g
                .asks
                .iter()
                .map(|(k, n)| format!("gres:{k}:{n}"))
                .collect::<Vec<_>>()
                .join(","),
            _ => na(),
        },
        '1' => j.program.as_ref().map_or(na(), |p| p.stdout.clone()),
        '2' => j.program.as_ref().map_or(na(), |p| p.stderr.clone()),
        // The raw wait status, as Slurm keeps it.
        '3' => ((j.exit.0 << 8) | j.exit.1).to_string(),
        '4' => j
            .program
            .as_ref()
            .map_or(1, |p| p.cpus_per_task)
            .to_string(),
        // What it holds; while pending, what it asks (with no memory
        // asked, its nodes': sacct's ReqTRES).
        '5' if j.nodes.is_empty() => text::tres_req(j, &c.cluster.config),
        '5' => text::tres(
            j,
            text::node_count(j),
            text::mem_asked(j),
            false,
            text::mem_mb,
        ),
        'G' => text::gid_of(&text::owner(j, c.me)).map_or(na(), |g| g.to_string()),
        // The node its batch script runs on.
        'B' => match j.nodes.as_str() {
            "" => "n/a".into(),
            _ => text::first_node(&j.nodes),
        },
        // The cores it needs on each node: a task's, times the tasks it
        // asked on each.
        'c' => text::min_cpus_node(j).to_string(),
        // What clemu's jobs never ask (no temporary disk, features,
        // contiguous nodes, reservations, keys, licenses, niceness or
        // sockets), shown as Slurm shows a job that does not either;
        // `--exclusive` is taken and not kept, so every job shares.
        'd' | 'O' | 'y' => "0".into(),
        'f' | 'v' | 'w' | 'W' | 'Y' => "(null)".into(),
        'h' => "OK".into(),
        'H' | 'I' | 'J' => "*".into(),
        'X' => na(),
        'z' => "*:*:*".into(),
        'n' => j
            .program
            .as_ref()
            .map_or_else(String::new, |p| p.nodelist.clone()),
        'x' => j
            .program
            .as_ref()
            .map_or_else(String::new, |p| p.exclude.clone()),
        _ => String::new(),
    };
    (v, true)
}

/// A job's `%S` (seconds): its start; pending, its expected start
/// (`--start`), else a later instant it waits for (`--begin`, a
/// requeue's wait), as Slurm shows it; else none.
fn shown_start(j: &JobInfo, starts: &std::collections::HashMap<u64, (i64, String)>) -> Option<i64> {
    if j.start_ns != 0 {
        return Some(text::secs(j.start_ns));
    }
    if let Some(&(at, _)) = starts.get(&j.id) {
        return Some(at);
    }
    j.program
        .as_ref()
        .and_then(|p| p.eligible_ns)
        .filter(|&t| t > j.submit_ns)
        .map(text::secs)
}

/// The nodes a job holds; while pending, the least it can run on: the
/// least it asked (`-N`), or its cores over the largest node of its
/// partition.
pub fn nodes_of(j: &JobInfo, cfg: &controller::config::Cluster) -> usize {
    if !j.nodes.is_empty() {
        return text::node_count(j);
    }
    if let Some((least, _)) = j.program.as_ref().and_then(|p| p.nodes_asked) {
        return least as usize;
    }
    let widest = match text::NodeIndex::of(cfg) {
        Some(ix) => ix.widest(&j.partition).unwrap_or(1),
        None => cfg
            .partitions
            .iter()
            .find(|p| p.name == j.partition)
            .and_then(|p| p.nodes.iter().map(|&n| cfg.nodes[n].cpus).max())
            .unwrap_or(1)
            .max(1),
    };
    j.cores.div_ceil(widest).max(1) as usize
}

/// The jobs a job list names (`12`, `12_3`, comma-separated): the job,
/// every task of an array by its id, or one task.
pub fn named_by(list: &str, j: &JobInfo) -> bool {
    list.split(',')
        .filter(|s| !s.is_empty())
        .any(|want| match want.split_once('_') {
            Some((a, i)) => j
                .array
                .is_some_and(|t| t.job.to_string() == a && t.index.to_string() == i),
            None => j.id.to_string() == want || j.array.is_some_and(|t| t.job.to_string() == want),
        })
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::argv::parse_plain(&argv)?;
    // As Slurm's: said, and the table printed all the same (empty for
    // that user).
    for u in args.user.iter().flat_map(|u| u.split(',')) {
        if u.parse::<u32>().is_err() && text::uid_of(u).is_none() {
            eprintln!("squeue: error: Invalid user: {u}\n");
        }
    }
    let named = match crate::cluster::reach("squeue", args.clusters.as_deref()) {
        Ok(named) => named && !args.noheader,
        Err(code) => return Ok(code),
    };
    let states = match &args.states {
        Some(s) => match text::parse_states(s) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("squeue: error: {e}");
                eprintln!(
                    "squeue: error: Valid job states include: {}\n",
                    text::VALID_STATES
                );
                return Ok(1);
            }
        },
        // `--start` is of pending jobs unless told otherwise.
        None if args.start => Some(vec![JobState::Pending]),
        // Only jobs not over, even among ids given (Slurm's _filter_job).
        None => Some(vec![
            JobState::Pending,
            JobState::Running,
            JobState::Suspended,
        ]),
    };
    let mut cluster = Cluster::open().await?;
    // The nodes -w names, each one of the cluster's, as Slurm's squeue
    // checks them.
    let on_nodes: Option<std::collections::HashSet<String>> = match &args.nodelist {
        Some(list) => {
            let names = formats::nodeset::parse(list)
                .map(|set| formats::nodeset::expand(&set))
                .unwrap_or_else(|_| vec![list.clone()]);
            let known: std::collections::HashSet<&str> = cluster
                .config
                .nodes
                .iter()
                .map(|d| d.name.as_str())
                .collect();
            if let Some(bad) = names.iter().find(|n| !known.contains(n.as_str())) {
                eprintln!("squeue: error: Invalid node name {bad}");
                return Ok(1);
            }
            Some(names.into_iter().collect())
        }
        None => None,
    };
    let now = text::now_s();
    // Finished jobs only when they may be shown, or one -j names must be
    // found: those Slurm still holds, for MinJobAge after their end.
    let finished = args.jobs.is_some()
        || args.json
        || states.as_ref().is_none_or(|s| {
            s.iter().any(|st| {
                !matches!(
                    st,
                    JobState::Pending | JobState::Running | JobState::Suspended
                )
            })
        });
    let jobs: Vec<JobInfo> = if finished {
        cluster.recent(now - MIN_JOB_AGE_S).await?
    } else {
        cluster.jobs(false).await?
    };
    let me = text::user_name();
    let mut shown: Vec<&JobInfo> = jobs
        .iter()
        .filter(|j| {
            // A job being ended shows as COMPLETING, and is one only.
            if j.completing {
                args.states.as_deref().is_none_or(text::names_completing)
            } else {
                states.as_ref().is_none_or(|s| s.contains(&j.state))
            }
        })
        .filter(|j| args.jobs.as_ref().is_none_or(|l| named_by(l, j)))
        .filter(|j| args.user.as_ref().is_none_or(|u| text::owned_by(u, j, &me)))
        .filter(|j| !args.me || text::owned_by(&me, j, &me))
        .filter(|j| {
            args.partition
                .as_ref()
                .is_none_or(|p| p.split(',').any(|p| p == j.partition))
        })
        .filter(|j| {
            args.name
                .as_ref()
                .is_none_or(|n| n.split(',').any(|n| n.eq_ignore_ascii_case(&j.name)))
        })
        .filter(|j| {
            on_nodes.as_ref().is_none_or(|want| {
                formats::nodeset::parse(&j.nodes)
                    .map(|s| formats::nodeset::expand(&s))
                    .unwrap_or_default()
                    .iter()
                    .any(|n| want.contains(n))
            })
        })
        .collect();
    // Slurm 22.05's --json ignores every filter: each job it holds.
    if args.json {
        shown = jobs.iter().collect();
    }
    // One id is loaded alone, as Slurm's squeue does: a job the
    // controller no longer holds is an error; more ids filter the rest.
    if let Some(one) = args
        .jobs
        .as_ref()
        .filter(|l| !l.contains(',') && !args.json)
    {
        if !jobs.iter().any(|j| named_by(one, j)) {
            eprintln!("slurm_load_jobs error: Invalid job id specified");
            if named {
                println!("CLUSTER: {}", crate::cluster::NAME);
            }
            return Ok(1);
        }
    }
    shown.sort_by(|a, b| {
        (
            &a.partition,
            text::state_long(a.state),
            std::cmp::Reverse(priority(a)),
            a.id,
        )
            .cmp(&(
                &b.partition,
                text::state_long(b.state),
                std::cmp::Reverse(priority(b)),
                b.id,
            ))
    });
    // Soonest first, those without a start last, as Slurm's `--sort S`.
    let starts: std::collections::HashMap<u64, (i64, String)> = if args.start {
        cluster
            .starts()
            .await?
            .into_iter()
            .map(|s| (s.id, (text::secs(s.at_ns), s.nodes)))
            .collect()
    } else {
        Default::default()
    };
    if args.start {
        shown.sort_by_key(|j| shown_start(j, &starts).unwrap_or(i64::MAX));
    }
    // Who heads the queue is decided over every job, not only those shown.
    let heads = text::first_in_queue(&jobs);
    let lines = fold_pending_arrays(&shown, args.array, &heads);
    if args.json {
        let ctx = Ctx {
            now,
            starts: Default::default(),
            me: &me,
            cluster: &cluster,
            noconvert: args.noconvert,
        };
        json(&lines, &jobs, &ctx)?;
        return Ok(0);
    }
    let mut unknown_fields = Vec::new();
    // Without -o, -O or -l, the user's default: SQUEUE_FORMAT, else
    // SQUEUE_FORMAT2 (-O's form), as Slurm's squeue reads them.
    let (mut long_format, mut format) = (args.long_format.clone(), args.format.clone());
    if long_format.is_none() && format.is_none() && !args.long {
        format = std::env::var("SQUEUE_FORMAT").ok();
        if format.is_none() {
            long_format = std::env::var("SQUEUE_FORMAT2").ok();
        }
    }
    let (prefix, fields) = match (&long_format, &format) {
        (Some(f), _) => {
            let (fields, unknown) = format::named(f, long_code);
            unknown_fields = unknown;
            (String::new(), fields)
        }
        // Every field, as Slurm's squeue lists them for `%all`.
        (None, Some(f)) if f == "%all" => {
            let all: Vec<String> = ('a'..='z')
                .chain('A'..='Z')
                .map(|c| format!("%{c}"))
                .collect();
            format::percent(&all.join("|"))
        }
        (None, Some(f)) => format::percent(f),
        (None, None) if args.start => format::percent(START_FORMAT),
        (None, None) if args.long => format::percent(LONG_FORMAT),
        (None, None) => format::percent(DEFAULT_FORMAT),
    };
    let ctx = Ctx {
        now,
        starts,
        me: &me,
        cluster: &cluster,
        noconvert: args.noconvert,
    };
    let mut out = String::new();
    if args.long && !args.noheader {
        out.push_str(&text::ctime(now));
        out.push('\n');
    }
    if named {
        out.push_str(&format!("CLUSTER: {}\n", crate::cluster::NAME));
    }
    // Said after the cluster's line, as Slurm's squeue says them.
    if !unknown_fields.is_empty() {
        print!("{out}");
        out.clear();
        for e in &unknown_fields {
            eprintln!("squeue: error: {e}");
        }
    }
    if !args.noheader {
        out.push_str(&prefix);
        for f in &fields {
            // The node lists' headers are not cut (squeue's own rule).
            let cut = !matches!(f.code, 'R' | 'N');
            out.push_str(&field(header(f.code), f.width, f.right, cut));
            out.push_str(&f.suffix);
        }
        out.push('\n');
    }
    for l in &lines {
        out.push_str(&prefix);
        for f in &fields {
            let (v, cut) = value(f.code, l, &ctx);
            out.push_str(&field(&v, f.width, f.right, cut));
            out.push_str(&f.suffix);
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(0)
}

/// The lines to print: a job each, except that the pending tasks of an
/// array that wait for the same reason share one (`12_[1-3]`), as in
/// Slurm, unless `-r` asks for one line per task. The jobs `heads` names
/// head their partition's queue: they wait for resources, the others
/// behind them.
fn fold_pending_arrays<'a>(
    jobs: &[&'a JobInfo],
    one_per_task: bool,
    heads: &[u64],
) -> Vec<Line<'a>> {
    let mut lines: Vec<Line<'a>> = Vec::new();
    let mut i = 0;
    while i < jobs.len() {
        let j = jobs[i];
        let first_pending = heads.contains(&j.id);
        let mut k = i + 1;
        // Slurm's array record of pending tasks: those not made records of
        // their own (requeued, `aftercorr`).
        let in_array_record = |t: &JobInfo| {
            t.state == JobState::Pending && t.program.as_ref().is_none_or(|p| !p.own_record)
        };
        if let (Some(a), true, false) = (j.array, in_array_record(j), one_per_task) {
            while k < jobs.len()
                && in_array_record(jobs[k])
                && jobs[k].array.is_some_and(|b| b.job == a.job)
                && jobs[k].reason == j.reason
            {
                k += 1;
            }
        }
        // That record holding one task is shown so (`12_[5]`) only for an
        // array of one task: Slurm makes the last pending task of a larger
        // one a job of its own (`12_5`).
        let only_task = j.program.as_ref().is_some_and(|p| p.only_task);
        let lone = !one_per_task && j.array.is_some() && in_array_record(j) && only_task;
        let tasks = (k - i > 1 || lone).then(|| {
            let idx: Vec<u32> = jobs[i..k]
                .iter()
                .filter_map(|t| t.array.map(|a| a.index))
                .collect();
            formats::intervals::format(&idx).replace(' ', ",")
        });
        lines.push(Line {
            job: j,
            first_pending,
            tasks,
        });
        i = k;
    }
    lines
}

/// `12_[1-3,5]` as the task list [`named_by`] takes: `12_1,12_2,...`.
pub fn expand_tasks(id: &str) -> String {
    let Some((job, rest)) = id.split_once("_[") else {
        return id.to_string();
    };
    let inner = rest.trim_end_matches(']');
    let mut out = Vec::new();
    for part in inner.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            out.extend((a..=b.min(a.saturating_add(100_000))).map(|i| format!("{job}_{i}")));
        }
    }
    out.join(",")
}

/// `squeue --json`: each job as Slurm 22.05's `openapi/v0.0.38` plugin
/// writes it, every key in its order. What clemu does not have (burst
/// buffers, federation, reservations, ...) is as Slurm writes it when a
/// job has none. `all` are every job, so that the cores of a node are
/// numbered as they were taken.
fn json(lines: &[Line<'_>], all: &[JobInfo], c: &Ctx<'_>) -> std::io::Result<()> {
    use serde_json::json;
    let sockets = Sockets::of(lines, all);
    let cfg = &c.cluster.config;
    let jobs = lines.iter().map(|l| {
            let j = l.job;
            let p = j.program.as_deref();
            let user = text::owner(j, c.me);
            let account = accounts::account_of(&user);
            let started = !j.nodes.is_empty();
            let running = started && j.end_ns == 0;
            let held = j.reason.starts_with("JobHeld");
            let eligible = match p.map(|p| p.eligible_ns) {
                _ if held => 0,
                Some(None) => 0,
                Some(Some(t)) => text::secs(t),
                None => text::secs(j.submit_ns),
            };
            let mut flags = Vec::new();
            if started {
                flags.push("JOB_WAS_RUNNING");
            }
            if p.is_some_and(|p| p.cpus_per_task > 1) {
                flags.push("JOB_CPUS_SET");
            }
            if j.mem_per_cpu_mb > 0 {
                flags.push("JOB_MEM_SET");
            }
            let end = match (j.end_ns, j.start_ns, j.walltime_ns) {
                (e, _, _) if e > 0 => text::secs(e),
                // Running: when its limit ends it, a year on without one,
                // as Slurm says.
                (_, s, w) if s > 0 && w > 0 => text::secs(s) + text::limit_seconds(w),
                (_, s, _) if s > 0 => text::secs(s) + 365 * 86_400,
                _ => 0,
            };
            let (array_task_id, array_task_string) = match (&l.tasks, j.array) {
                (Some(t), Some(_)) => (None, t.clone()),
                (_, a) => (a.map(|a| a.index), String::new()),
            };
            // Slurm's patterns as asked, or nothing for the default.
            let asked_file = |f: Option<&String>| match (f, p) {
                (Some(f), Some(p)) if *f != default_output(j, &p.workdir) => f.clone(),
                _ => String::new(),
            };
            let stdout = asked_file(p.map(|p| &p.stdout));
            let stderr = match p {
                Some(p) if p.stderr == p.stdout => String::new(),
                _ => asked_file(p.map(|p| &p.stderr)),
            };
            let mem_per_node = p.map_or(0, |p| p.mem_per_node_mb);
            let mem_per_cpu = if mem_per_node == 0 {
                j.mem_per_cpu_mb
            } else {
                0
            };
            let tres_per_node = match value('b', l, c).0 {
                v if v == "N/A" => String::new(),
                v => v,
            };
            let mut job = json!({
                "account": account.unwrap_or(""),
                // From when it may start: not while held or waiting, but
                // from its eligible time once requeued held.
                "accrue_time": match eligible {
                    t if j.reason == text::REQUEUED_HELD => t,
                    t if t > c.now => 0,
                    t => t,
                },
                "admin_comment": "",
                "array_job_id": j.array.map_or(0, |a| a.job),
                "array_task_id": array_task_id,
                "array_max_tasks": j.array.map_or(0, |a| a.limit),
                "array_task_string": array_task_string,
                // The user's in a database just made (docs/slurm.md).
                "association_id": account.map_or(0, |_| 2),
                "batch_features": "",
                "batch_flag": p.is_some(),
                "batch_host": if running { text::first_node(&j.nodes) } else { String::new() },
                "flags": flags,
                "burst_buffer": "",
                "burst_buffer_state": "",
                "cluster": crate::cluster::NAME,
                "cluster_features": "",
                "command": p.map_or("", |p| p.command.as_str()),
                "comment": p.map_or("", |p| p.comment.as_str()),
                "container": "",
                "contiguous": false,
                "core_spec": null,
                "thread_spec": null,
                "cores_per_socket": null,
                "billable_tres": running.then_some(f64::from(j.cores)),
                // Slurm 22.05's plugin writes none, `-c` or not.
                "cpus_per_task": null,
                "cpu_frequency_minimum": null,
                "cpu_frequency_maximum": null,
                "cpu_frequency_governor": null,
                "cpus_per_tres": "",
                "deadline": 0,
                "delay_boot": 0,
                "dependency": p.map_or("", |p| p.dependency.as_str()),
                "derived_exit_code": p.and_then(|p| p.steps.iter().map(|s| (s.exit.0 << 8) | s.exit.1).max()).unwrap_or(0),
                "eligible_time": eligible,
                "end_time": end,
                "excluded_nodes": p.map_or("", |p| p.exclude.as_str()),
                // The raw wait status, as Slurm keeps it.
                "exit_code": (j.exit.0 << 8) | j.exit.1,
                "features": "",
                "federation_origin": "",
                "federation_siblings_active": "",
                "federation_siblings_viable": "",
                "gres_detail": [],
                "group_id": text::gid_of(&user).unwrap_or(0),
                "group_name": text::group_of(&user),
                "job_id": j.id,
                "job_state": text::shown_long(j),
                "last_sched_evaluation": text::secs(j.start_ns.max(j.submit_ns)),
                "licenses": "",
                "max_cpus": 0,
                // A range of nodes asked (`-N 2-4`) says its most.
                "max_nodes": p
                    .and_then(|p| p.nodes_asked)
                    .filter(|&(least, most)| most > least)
                    .map_or(0, |(_, most)| most),
                "mcs_label": "",
                "memory_per_tres": "",
                "name": j.name,
                "nodes": j.nodes,
                "nice": null,
                "tasks_per_core": null,
                "tasks_per_node": p.map_or(0, |p| p.tasks_per_node),
                "tasks_per_socket": null,
                "tasks_per_board": 0,
                "cpus": j.cores,
                "node_count": nodes_of(j, cfg),
                "tasks": p.map_or(1, |p| p.ntasks),
                "het_job_id": 0,
                "het_job_id_set": "",
                "het_job_offset": 0,
                "partition": j.partition,
                "prefer": "",
                "memory_per_node": (mem_per_node > 0).then_some(mem_per_node),
                "memory_per_cpu": (mem_per_cpu > 0).then_some(mem_per_cpu),
                "minimum_cpus_per_node": text::min_cpus_node(j),
                "minimum_tmp_disk_per_node": 0,
                "preempt_time": 0,
                "pre_sus_time": 0,
                "priority": priority(j),
                "profile": null,
                "qos": account.map_or("", |_| accounts::QOS),
                "reboot": false,
                "required_nodes": p.map_or("", |p| p.nodelist.as_str()),
                "requeue": p.is_none_or(|p| p.requeue),
                "resize_time": 0,
                "restart_cnt": j.restarts,
                "resv_name": "",
                "shared": null,
                "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"],
                "sockets_per_board": 0,
                "sockets_per_node": null,
                "start_time": text::secs(j.start_ns),
                // A requeue's hold is the user's, described apart.
                "state_description": if j.reason == text::REQUEUED_HELD || j.reason.starts_with("ReqNodeNotAvail,") { j.reason.as_str() } else { "" },
                "state_reason": match text::reason(j, l.first_pending) {
                    r if r == text::REQUEUED_HELD => "JobHeldUser".to_string(),
                    r => r.split(',').next().unwrap_or_default().to_string(),
                },
                "standard_error": stderr,
                "standard_input": "/dev/null",
                "standard_output": stdout,
                "submit_time": text::secs(j.submit_ns),
                "suspend_time": j.suspensions.last().map_or(0, |&(s, _)| text::secs(s)),
                "system_comment": "",
                "time_limit": (j.walltime_ns > 0).then(|| text::limit_minutes(j.walltime_ns)),
                "time_minimum": 0,
                "threads_per_core": null,
                "tres_bind": "",
                "tres_freq": "",
                "tres_per_job": "",
                "tres_per_node": tres_per_node,
                "tres_per_socket": "",
                "tres_per_task": "",
                "tres_req_str": text::tres_req(j, cfg),
                "tres_alloc_str": if started {
                    text::tres(j, text::node_count(j), text::mem_asked(j), false, text::mem_mb)
                } else {
                    String::new()
                },
                "user_id": text::uid_of(&user).unwrap_or(0),
                "user_name": user,
                "wckey": "",
                "current_working_directory": p.map_or("", |p| p.workdir.as_str()),
            });
            // Slurm writes `job_resources` only for a job that holds some,
            // after `job_id`.
            if running {
                if let Some(map) = job.as_object_mut() {
                    let at = map.keys().position(|k| k == "job_id").map_or(map.len(), |i| i + 1);
                    map.shift_insert(at, "job_resources".into(), sockets.resources(j));
                }
            }
            job
    });
    text::write_document("openapi/v0.0.38", "jobs", jobs)
}

/// The names of a node list, in its order.
fn node_names(nodes: &str) -> Vec<String> {
    formats::nodeset::parse(nodes).map_or_else(|_| Vec::new(), |s| formats::nodeset::expand(&s))
}

/// Where sbatch sends a job's output when not told: `slurm-%j.out`, or
/// `slurm-%A_%a.out` for an array task, in its directory.
fn default_output(j: &JobInfo, workdir: &str) -> String {
    match j.array {
        Some(a) => format!("{workdir}/slurm-{}_{}.out", a.job, a.index),
        None => format!("{workdir}/slurm-{}.out", j.id),
    }
}

/// The cores each running job holds on each of its nodes, numbered as
/// Slurm numbers a node's sockets (clemu's nodes are Slurm's
/// `CPUs=N`: N sockets of one core): on each node, the jobs that started
/// first took the first.
struct Sockets {
    /// (job, node) → its first socket there.
    first: std::collections::HashMap<(u64, String), u32>,
}

impl Sockets {
    fn of(lines: &[Line<'_>], all: &[JobInfo]) -> Sockets {
        // Only the nodes of the jobs shown are counted out.
        let wanted: std::collections::HashSet<String> = lines
            .iter()
            .filter(|l| !l.job.nodes.is_empty() && l.job.end_ns == 0)
            .flat_map(|l| node_names(&l.job.nodes))
            .collect();
        let mut running: Vec<&JobInfo> = all
            .iter()
            .filter(|j| !j.nodes.is_empty() && j.end_ns == 0)
            .collect();
        running.sort_by_key(|j| (j.start_ns, j.id));
        let mut taken: std::collections::HashMap<String, u32> = Default::default();
        let mut first = std::collections::HashMap::new();
        for j in running {
            for (node, cores) in Self::held(j) {
                if !wanted.contains(&node) {
                    continue;
                }
                let at = taken.entry(node.clone()).or_insert(0);
                first.insert((j.id, node), *at);
                *at += cores;
            }
        }
        Sockets { first }
    }

    /// Each node of `j` with the cores it holds there.
    fn held(j: &JobInfo) -> Vec<(String, u32)> {
        let nodes = node_names(&j.nodes);
        let cpus = j
            .program
            .as_ref()
            .map(|p| p.node_cpus.as_slice())
            .unwrap_or(&[]);
        let even = j.cores / (nodes.len().max(1) as u32);
        nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, cpus.get(i).copied().unwrap_or(even)))
            .collect()
    }

    /// Slurm's `job_resources` of running job `j`.
    fn resources(&self, j: &JobInfo) -> serde_json::Value {
        use serde_json::json;
        let held = Self::held(j);
        let nodes: Vec<_> = held
            .iter()
            .map(|(node, cores)| {
                let from = self.first.get(&(j.id, node.clone())).copied().unwrap_or(0);
                let sockets: serde_json::Map<String, serde_json::Value> = (from..from + cores)
                    .map(|s| (s.to_string(), json!({"cores": {"0": "allocated"}})))
                    .collect();
                json!({"sockets": sockets, "nodename": node, "cpus_used": 0,
                    "memory_used": 0, "memory_allocated": 0})
            })
            .collect();
        json!({"nodes": j.nodes, "allocated_cores": j.cores, "allocated_hosts": held.len(),
            "allocated_nodes": nodes})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ranges_expand_to_each_task() {
        assert_eq!(expand_tasks("12_[1-3,5]"), "12_1,12_2,12_3,12_5");
        assert_eq!(expand_tasks("12_4"), "12_4");
        assert_eq!(expand_tasks("12"), "12");
    }
}
