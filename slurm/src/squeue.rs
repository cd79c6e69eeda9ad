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
        'S' => match (j.start_ns, j.program.as_ref().and_then(|p| p.eligible_ns)) {
            // Pending until a later instant (`--begin`, a requeue's
            // wait): then, as Slurm shows it.
            (0, Some(t)) if t > j.submit_ns => text::date(text::secs(t)),
            (0, _) => na(),
            (s, _) => text::date(text::secs(s)),
        },
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
        '5' => {
            let cfg = &c.cluster.config;
            let mem = match text::mem_asked(j) {
                None if j.nodes.is_empty() => Some(text::nodes_memory(j, cfg)),
                asked => asked,
            };
            text::tres(j, nodes_of(j, cfg), mem, false, text::mem_mb)
        }
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
        _ => String::new(),
    };
    (v, true)
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
    let widest = cfg
        .partitions
        .iter()
        .find(|p| p.name == j.partition)
        .and_then(|p| p.nodes.iter().map(|&n| cfg.nodes[n].cpus).max())
        .unwrap_or(1)
        .max(1);
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
    let args: Args = crate::cluster::parse(&argv)?;
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
    // One id is loaded alone, as Slurm's squeue does: a job the
    // controller no longer holds is an error; more ids filter the rest.
    if let Some(one) = args.jobs.as_ref().filter(|l| !l.contains(',')) {
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
    // Who heads the queue is decided over every job, not only those shown.
    let heads = text::first_in_queue(&jobs);
    let lines = fold_pending_arrays(&shown, args.array, &heads);
    if args.json {
        let ctx = Ctx {
            now,
            me: &me,
            cluster: &cluster,
            noconvert: args.noconvert,
        };
        println!("{}", json(&lines, &ctx));
        return Ok(0);
    }
    let mut unknown_fields = Vec::new();
    let (prefix, fields) = match (&args.long_format, &args.format) {
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
        (None, None) if args.long => format::percent(LONG_FORMAT),
        (None, None) => format::percent(
            &std::env::var("SQUEUE_FORMAT").unwrap_or_else(|_| DEFAULT_FORMAT.to_string()),
        ),
    };
    let ctx = Ctx {
        now,
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

/// `squeue --json`: the jobs with the fields tools read from Slurm's
/// (`job_id`, `name`, `job_state`, ...); a subset of Slurm's document.
fn json(lines: &[Line<'_>], c: &Ctx<'_>) -> serde_json::Value {
    use serde_json::json;
    let jobs: Vec<_> = lines
        .iter()
        .map(|l| {
            let j = l.job;
            json!({
                "job_id": j.id,
                "array_job_id": j.array.map_or(0, |a| a.job),
                "array_task_id": j.array.map(|a| a.index),
                "name": j.name,
                "job_state": text::shown_long(j),
                "state_reason": text::reason(j, l.first_pending),
                "partition": j.partition,
                "user_name": text::owner(j, c.me),
                "nodes": j.nodes,
                "node_count": nodes_of(j, &c.cluster.config),
                "cpus": j.cores,
                "time_limit": (j.walltime_ns > 0).then(|| text::limit_minutes(j.walltime_ns)),
                "submit_time": text::secs(j.submit_ns),
                "start_time": text::secs(j.start_ns),
                "end_time": text::secs(j.end_ns),
                "exit_code": j.exit.0,
                "current_working_directory": j.program.as_ref().map(|p| &p.workdir),
                "standard_output": j.program.as_ref().map(|p| &p.stdout),
                "standard_error": j.program.as_ref().map(|p| &p.stderr),
                "comment": j.program.as_ref().map(|p| &p.comment),
            })
        })
        .collect();
    json!({"meta": {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": text::RELEASE}},
        "errors": [], "jobs": jobs})
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
