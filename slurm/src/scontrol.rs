//! `scontrol`: `show job|partition|node|config|hostnames`, `suspend`,
//! `resume`, `hold` and `release`, in Slurm's `Key=Value` layout (`-o`:
//! one line each).

use anyhow::{bail, Result};
use clap::Parser;
use client::{Request, Response};
use formats::wire::{ArraySpec, HoldKind, JobInfo, JobState, NodeInfo};

use crate::cluster::Cluster;
use crate::squeue::{nodes_of, priority, MIN_JOB_AGE_S};
use crate::text;
use controller::policy::Preemption;

#[derive(Debug, Parser)]
#[command(name = "scontrol", infer_long_args = true, disable_version_flag = true)]
pub struct Args {
    /// One line per record.
    #[arg(short = 'o', long)]
    oneliner: bool,
    #[arg(short = 'd', long)]
    details: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

/// Records as scontrol prints them: each a list of lines of `Key=Value`
/// words; the first line flush, the others indented by three spaces,
/// a blank line after each (or all on one line with `-o`).
fn print_records(records: &[Vec<String>], oneliner: bool) {
    let mut out = String::new();
    for r in records {
        if oneliner {
            out.push_str(
                r.iter()
                    .filter(|l| !l.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .as_str(),
            );
            out.push('\n');
        } else {
            for (i, line) in r.iter().enumerate() {
                if i > 0 {
                    out.push_str("   ");
                }
                out.push_str(line);
                out.push('\n');
            }
            out.push('\n');
        }
    }
    print!("{out}");
}

pub async fn main(argv: Vec<String>) -> Result<u8> {
    let args: Args = crate::argv::parse_plain(&argv)?;
    if let Err(code) = crate::cluster::reach("scontrol", args.clusters.as_deref()) {
        return Ok(code);
    }
    // Options may follow the words, as Slurm allows.
    let oneliner = args.oneliner || args.words.iter().any(|w| w == "-o" || w == "--oneliner");
    let words: Vec<String> = args
        .words
        .iter()
        .filter(|w| !matches!(w.as_str(), "-o" | "--oneliner" | "-d" | "--details"))
        .cloned()
        .collect();
    let Some(verb) = words.first().map(|w| w.to_ascii_lowercase()) else {
        bail!("no command given (show, suspend, resume, hold, release, requeue, update, ping)");
    };
    match verb.as_str() {
        "ping" => ping().await,
        "show" => {
            let Some(what) = words.get(1).map(|w| w.to_ascii_lowercase()) else {
                bail!("show what? (job, partition, node, config, hostnames)");
            };
            // `show job 12` or `show jobid=12`, as Slurm's scontrol takes
            // both.
            let (what, arg) = match words[1].split_once('=') {
                Some((w, a)) => (w.to_ascii_lowercase(), Some(a)),
                None => (what, words.get(2).map(String::as_str)),
            };
            // Slurm takes any unambiguous prefix; these are the forms
            // tools use.
            match what.as_str() {
                "hostnames" | "hostname" => hostnames(arg),
                "hostlist" | "hostlistsorted" => {
                    let Some(list) = arg else {
                        bail!("invalid encode argument");
                    };
                    let names = expanded(list)?;
                    println!("{}", hostlist(names, what == "hostlistsorted"));
                    Ok(0)
                }
                "job" | "jobs" | "jobid" => show_jobs(arg, oneliner).await,
                "partition" | "partitions" | "part" => show_partitions(arg, oneliner).await,
                "node" | "nodes" => show_nodes(arg, oneliner).await,
                "config" | "conf" => show_config().await,
                // A cluster without reservations, as Slurm's says.
                "reservation" | "reservations" | "reservationname" | "res" => {
                    println!("No reservations in the system");
                    Ok(0)
                }
                other => bail!("invalid entity: {other} for keyword: show"),
            }
        }
        "suspend" | "resume" | "hold" | "uhold" | "release" | "requeue" | "requeuehold" => {
            let mut c = Cluster::open().await?;
            if verb == "requeuehold" && words[1..].iter().any(|w| w.contains('=')) {
                bail!("scontrol requeuehold State=SpecialExit is not supported by clemu yet");
            }
            // A requeue may name a batch job over, as Slurm's takes one
            // it still keeps (`MinJobAge`, 300 s).
            let over_since = verb.starts_with("requeue").then(|| text::now_s() - 300);
            let named = match job_ids(&mut c, &words[1..], over_since).await {
                Ok(named) => named,
                Err(e) => {
                    let Some(UnknownJob(w)) = e.downcast_ref::<UnknownJob>() else {
                        return Err(e);
                    };
                    // As Slurm 22.05's scontrol says each, quirks and all.
                    match verb.as_str() {
                        "suspend" | "resume" => {
                            eprintln!("Unexpected message received for job {w}")
                        }
                        "hold" | "uhold" | "release" => eprintln!(
                            "Invalid job id specified for job {w}\nslurm_suspend error: \
                             Invalid job id specified"
                        ),
                        _ => eprintln!("Invalid job id specified for job {w}"),
                    }
                    return Ok(1);
                }
            };
            let ids: Vec<u64> = named.iter().map(|&(id, _)| id).collect();
            // Errors name a job as Slurm does: `12_3` for an array task.
            let name = |id: u64| {
                named
                    .iter()
                    .find(|&&(i, _)| i == id)
                    .map_or(id.to_string(), |(_, n)| n.clone())
            };
            // Slurm's operator is root here: its cluster's SlurmUser.
            let privileged = nix::unistd::getuid().is_root();
            let req = match verb.as_str() {
                "suspend" => Request::Suspend(ids),
                "resume" => Request::Resume(ids),
                "hold" | "uhold" => Request::Hold {
                    ids,
                    kind: if verb == "hold" && privileged {
                        HoldKind::Admin
                    } else {
                        HoldKind::User
                    },
                    privileged,
                },
                "release" => Request::Release { ids, privileged },
                "requeue" => Request::Requeue { ids, hold: false },
                _ => Request::Requeue { ids, hold: true },
            };
            match c.call(&req).await? {
                Response::Jobs(outcomes) => {
                    let mut failed = false;
                    for o in outcomes {
                        if let Some(e) = o.error {
                            // As Slurm's scontrol says a job's error; a
                            // hold's, as its call's too.
                            let e = slurm_error(&e);
                            eprintln!("{e} for job {}", name(o.id));
                            if matches!(verb.as_str(), "hold" | "uhold" | "release") {
                                eprintln!("slurm_suspend error: {e}");
                            }
                            failed = true;
                        }
                    }
                    Ok(u8::from(failed))
                }
                other => bail!("unexpected answer: {other:?}"),
            }
        }
        "update" => update(&words[1..]).await,
        other => bail!("invalid keyword: {other}"),
    }
}

/// `scontrol update JobId=N TimeLimit=T`: a job's limit (keys in any
/// case; `UNLIMITED` for none; `+T` and `-T` add to and take from the
/// limit it has, as on Slurm). `JobId` may name an array (every task of
/// it) or one task (`12_3`).
async fn update(words: &[String]) -> Result<u8> {
    if words.iter().any(|w| {
        w.split_once('=')
            .is_some_and(|(k, _)| k.eq_ignore_ascii_case("nodename"))
    }) {
        return update_nodes(words).await;
    }
    let (mut named, mut limit) = (None, None);
    let mut words = words.iter();
    while let Some(w) = words.next() {
        // `job 12` and `jobid 12` name the job as `JobId=12` does.
        let joined;
        let w = match words.as_slice().first() {
            Some(id)
                if !w.contains('=')
                    && ["job", "jobid"].contains(&w.to_ascii_lowercase().as_str()) =>
            {
                joined = format!("jobid={id}");
                words.next();
                &joined
            }
            _ => w,
        };
        let Some((k, v)) = w.split_once('=') else {
            bail!("Invalid input: {w}");
        };
        match k.to_ascii_lowercase().as_str() {
            "jobid" => named = Some(v.to_string()),
            "timelimit" => {
                let (sign, t) = match v.strip_prefix('+') {
                    Some(t) => (1, t),
                    None => v.strip_prefix('-').map_or((0, v), |t| (-1, t)),
                };
                let secs = text::parse_time_limit(t)
                    .filter(|&s| sign == 0 || s > 0)
                    .ok_or_else(|| anyhow::anyhow!("Invalid TimeLimit value: {v}"))?;
                limit = Some((sign, secs));
            }
            other => bail!("scontrol update {other}= is not supported by clemu yet (TimeLimit is)"),
        }
    }
    let (Some(named), Some((sign, secs))) = (named, limit) else {
        bail!("scontrol update needs JobId=N and TimeLimit=T");
    };
    let mut c = Cluster::open().await?;
    let Ok(ids) = job_ids(&mut c, std::slice::from_ref(&named), None).await else {
        eprintln!("Invalid job id specified for job {named}");
        return Ok(1);
    };
    let jobs = c.by_ids(ids.iter().map(|&(id, _)| id).collect()).await?;
    let mut failed = false;
    for j in &jobs {
        let now_s = j.walltime_ns / 1_000_000_000;
        let new_s = match (sign, j.walltime_ns) {
            (0, _) => secs,
            // Unlimited stays so, more or less.
            (_, 0) => 0,
            (1, _) => now_s.saturating_add(secs),
            _ if secs >= now_s => {
                eprintln!(
                    "scontrol: error: TimeLimit decrement larger than current time limit ({} > {})",
                    secs.div_ceil(60),
                    now_s.div_ceil(60)
                );
                failed = true;
                continue;
            }
            _ => now_s - secs,
        };
        let walltime_ns = new_s.saturating_mul(1_000_000_000);
        match c
            .call(&Request::SetLimit {
                id: j.id,
                walltime_ns,
            })
            .await?
        {
            Response::Jobs(outcomes) => {
                if let Some(e) = outcomes.into_iter().find_map(|o| o.error) {
                    eprintln!("slurm_update error: {e}");
                    failed = true;
                }
            }
            other => bail!("unexpected answer: {other:?}"),
        }
    }
    Ok(u8::from(failed))
}

/// A node state `scontrol update` takes, as it reads one: at least three
/// letters of it, in any case.
fn state_named(given: &str, state: &str) -> bool {
    given.len() >= 3.min(state.len())
        && given.len() <= state.len()
        && state[..given.len()].eq_ignore_ascii_case(given)
}

/// `scontrol update NodeName=LIST State=DRAIN|UNDRAIN|RESUME|DOWN
/// [Reason=TEXT]`: what an administrator does to nodes, with Slurm's
/// messages for what it refuses. DOWN kills the nodes' jobs (requeued or
/// over `NODE_FAIL`, as their partition says); RESUME undoes DRAIN and
/// DOWN.
async fn update_nodes(words: &[String]) -> Result<u8> {
    let (mut nodes, mut state, mut reason) = (None, None, None);
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            eprintln!("scontrol: error: Invalid input: {w}  Request aborted");
            return Ok(1);
        };
        match k.to_ascii_lowercase().as_str() {
            "nodename" => nodes = Some(v.to_string()),
            "reason" => reason = Some(v.trim_matches('"').to_string()),
            "state" => {
                let Some(s) = ["DRAIN", "UNDRAIN", "RESUME", "DOWN"]
                    .into_iter()
                    .find(|s| state_named(v, s))
                else {
                    let known = [
                        "NoResp", "FAIL", "FUTURE", "POWER_DOWN", "POWER_UP", "IDLE",
                        "CANCEL_REBOOT",
                    ];
                    if known.iter().any(|s| state_named(v, s)) {
                        bail!("scontrol update State={v} is not supported by clemu yet (DRAIN, UNDRAIN, RESUME and DOWN are)");
                    }
                    eprintln!(
                        "Invalid input: {w}\nRequest aborted\nValid states are: NoResp DRAIN FAIL \
                         FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\nNot all states are valid given \
                         a node's prior state"
                    );
                    return Ok(1);
                };
                state = Some(s);
            }
            _ => bail!("scontrol update {k}= of a node is not supported by clemu yet (State and Reason are)"),
        }
    }
    let reason = reason.unwrap_or_default();
    if matches!(state, Some("DRAIN" | "DOWN")) && reason.is_empty() {
        eprintln!("You must specify a reason when DOWNING or DRAINING a node. Request denied");
        return Ok(1);
    }
    let (Some(nodes), Some(state)) = (nodes, state) else {
        if !reason.is_empty() {
            bail!("scontrol update of a node's Reason alone is not supported by clemu yet");
        }
        eprintln!("No changes specified");
        return Ok(1);
    };
    let requests = match state {
        "DRAIN" => vec![Request::Drain { nodes, reason }],
        "DOWN" => vec![Request::Fail { nodes, reason }],
        "UNDRAIN" => vec![Request::Undrain { nodes }],
        _ => vec![
            Request::Undrain {
                nodes: nodes.clone(),
            },
            Request::Repair { nodes },
        ],
    };
    let mut c = Cluster::open().await?;
    for (i, req) in requests.iter().enumerate() {
        match c.ask(req).await? {
            Response::Drained(_) | Response::Failed { .. } => {}
            // The controller changes nothing unless it knows every node
            // named: a first refusal is a name it does not know.
            Response::Error(_) if i == 0 => {
                eprintln!("slurm_update error: Invalid node name specified");
                return Ok(1);
            }
            Response::Error(e) => bail!("{e}"),
            other => bail!("unexpected answer: {other:?}"),
        }
    }
    Ok(0)
}

/// A job id that names no job the command may act on.
#[derive(Debug)]
struct UnknownJob(String);

impl std::fmt::Display for UnknownJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Invalid job id specified: {}", self.0)
    }
}

impl std::error::Error for UnknownJob {}

/// A job's refusal as Slurm words it: the controller's own words for a
/// suspension or a resumption that does not apply (`job 5 is pending, not
/// running`) become Slurm's error string; the rest are Slurm's already.
fn slurm_error(e: &str) -> &str {
    let over = [
        "completed",
        "failed",
        "cancelled",
        "timeout",
        "node_fail",
        "out_of_memory",
    ];
    if e.contains(" is pending, not ") {
        "Job is pending execution"
    } else if e.contains(" is running, not suspended") {
        "Job is not suspended"
    } else if over.iter().any(|s| e.contains(&format!(" is {s}, not "))) {
        "Job/step already completing or completed"
    } else {
        e
    }
}

/// The jobs not yet over that `words` name: jobs, whole arrays (`12`),
/// tasks (`12_3`, `12_[1-3]`), comma-separated; each with the id Slurm
/// shows for it.
async fn job_ids(
    c: &mut Cluster,
    words: &[String],
    over_since: Option<i64>,
) -> Result<Vec<(u64, String)>> {
    let jobs = match over_since {
        Some(s) => c.recent(s).await?,
        None => c.jobs(false).await?,
    };
    let mut ids = Vec::new();
    for w in words.iter().flat_map(|w| w.split(',')) {
        // `JobId=12` and `Job=12`, as Slurm's scontrol takes them.
        let w = match w.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("jobid") || k.eq_ignore_ascii_case("job") => v,
            _ => w,
        };
        let ok = w
            .split(['_', '[', ']', '-'])
            .filter(|p| !p.is_empty())
            .all(|p| p.parse::<u64>().is_ok());
        let named = crate::squeue::expand_tasks(w);
        let found: Vec<(u64, String)> = jobs
            .iter()
            .filter(|j| ok && crate::squeue::named_by(&named, j))
            .map(|j| (j.id, text::job_id(j)))
            .collect();
        if found.is_empty() {
            return Err(UnknownJob(w.to_string()).into());
        }
        ids.extend(found);
    }
    if ids.is_empty() {
        bail!("no job id given");
    }
    Ok(ids)
}

/// `scontrol show hostnames [LIST]`: one name per line, the list given or
/// the job's own (`SLURM_JOB_NODELIST`).
fn hostnames(arg: Option<&str>) -> Result<u8> {
    let list = match arg {
        Some(a) => a.to_string(),
        None => std::env::var("SLURM_JOB_NODELIST")
            .map_err(|_| anyhow::anyhow!("host list is empty"))?,
    };
    let mut out = String::new();
    for n in expanded(&list)? {
        out.push_str(&n);
        out.push('\n');
    }
    print!("{out}");
    Ok(0)
}

/// The names of host list `list`, piece by piece, as Slurm's hostlist
/// keeps them: in the order given, a name given twice twice (a node set
/// would sort and merge).
fn expanded(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for piece in text::top_level_pieces(list) {
        let set = formats::nodeset::parse(piece)
            .map_err(|e| anyhow::anyhow!("Invalid hostlist: {list}: {e}"))?;
        out.extend(formats::nodeset::expand(&set));
    }
    Ok(out)
}

/// `names` folded as Slurm's hostlist folds them (`scontrol show
/// hostlist`): in their order, each run of one prefix in one bracket, a
/// number one past the last (of the same width) extending its range
/// (`node3,node1,node2` is `node[3,1-2]`); `sorted` first sorts them by
/// prefix, width and number (`hostlistsorted`). Names are not merged:
/// one given twice stays twice. A name not ending in digits stands alone.
fn hostlist(mut names: Vec<String>, sorted: bool) -> String {
    // (prefix, digits) of each name: digits empty when it has none.
    let split = |n: &str| {
        let cut = n.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (n[..cut].to_string(), n[cut..].to_string())
    };
    if sorted {
        names.sort_by_key(|n| {
            let (prefix, digits) = split(n);
            (prefix, digits.len(), digits.parse::<u64>().unwrap_or(0))
        });
    }
    // Groups of one prefix: its ranges (first, last, width).
    type Range = (u64, u64, usize);
    let mut groups: Vec<(String, Vec<Range>)> = Vec::new();
    for n in &names {
        let (prefix, digits) = split(n);
        let Ok(number) = digits.parse::<u64>() else {
            groups.push((n.clone(), Vec::new()));
            continue;
        };
        let width = digits.len();
        match groups.last_mut() {
            Some((p, ranges)) if *p == prefix && !ranges.is_empty() => match ranges.last_mut() {
                Some((_, last, w)) if *w == width && number == *last + 1 => *last = number,
                _ => ranges.push((number, number, width)),
            },
            _ => groups.push((prefix, vec![(number, number, width)])),
        }
    }
    let range = |&(a, b, w): &Range| {
        if a == b {
            format!("{a:0w$}")
        } else {
            format!("{a:0w$}-{b:0w$}")
        }
    };
    groups
        .iter()
        .map(|(prefix, ranges)| match ranges.as_slice() {
            [] => prefix.clone(),
            [(a, b, w)] if a == b => format!("{prefix}{a:0w$}"),
            _ => format!(
                "{prefix}[{}]",
                ranges.iter().map(range).collect::<Vec<_>>().join(",")
            ),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Slurm's `SecsPreSuspend`: the seconds job `j` ran before its last
/// suspension (0 if it never was), suspended time left out.
fn secs_pre_suspend(j: &JobInfo) -> i64 {
    let Some(&(last, _)) = j.suspensions.last() else {
        return 0;
    };
    let before: i64 = j.suspensions[..j.suspensions.len() - 1]
        .iter()
        .map(|&(s, r)| r - s)
        .sum();
    ((last - j.start_ns - before) / 1_000_000_000).max(0)
}

async fn show_jobs(arg: Option<&str>, oneliner: bool) -> Result<u8> {
    let mut c = Cluster::open().await?;
    let now = text::now_s();
    // One job, or an array (its tasks have the ids after its own), is
    // asked for by id; a finished one is shown for MinJobAge, as Slurm's.
    let named: Option<u64> = arg.and_then(|a| a.split('_').next()?.parse().ok());
    let jobs = match named {
        Some(id) => {
            let one = c.by_ids(vec![id]).await?;
            if one
                .first()
                .is_some_and(|j| j.array.is_some_and(|t| t.job == id))
            {
                let ids = (id..=id.saturating_add(ArraySpec::MAX_TASKS as u64)).collect();
                c.by_ids(ids).await?
            } else {
                one
            }
        }
        None => c.recent(now - MIN_JOB_AGE_S).await?,
    };
    let jobs: Vec<JobInfo> = jobs
        .into_iter()
        .filter(|j| j.end_ns == 0 || text::secs(j.end_ns) >= now - MIN_JOB_AGE_S)
        .filter(|j| arg.is_none_or(|a| crate::squeue::named_by(a, j)))
        .collect();
    if jobs.is_empty() {
        if arg.is_some() {
            eprintln!("slurm_load_jobs error: Invalid job id specified");
            return Ok(1);
        }
        println!("No jobs in the system");
        return Ok(0);
    }
    let me = text::user_name();
    let heads = text::first_in_queue(&jobs);
    let records: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| job_record(j, &c, &me, now, heads.contains(&j.id)))
        .collect();
    print_records(&records, oneliner);
    Ok(0)
}

fn job_record(j: &JobInfo, c: &Cluster, me: &str, now: i64, first: bool) -> Vec<String> {
    let user = text::owner(j, me);
    let uid = text::uid_of(&user).unwrap_or(0);
    let date = |ns: i64| {
        if ns > 0 {
            text::date(text::secs(ns))
        } else {
            "Unknown".into()
        }
    };
    let end = match (j.end_ns, j.start_ns, j.walltime_ns) {
        (e, _, _) if e > 0 => date(e),
        (_, s, w) if s > 0 && w > 0 => text::date(text::secs(s) + text::limit_seconds(w)),
        _ => "Unknown".into(),
    };
    let nodes = nodes_of(j, &c.config);
    let first_node = text::first_node(&j.nodes);
    let p = j.program.as_deref();
    let array = match j.array {
        Some(a) if a.limit > 0 => format!(
            " ArrayJobId={} ArrayTaskId={} ArrayTaskThrottle={}",
            a.job, a.index, a.limit
        ),
        Some(a) => format!(" ArrayJobId={} ArrayTaskId={}", a.job, a.index),
        None => String::new(),
    };
    let mem = j.mem_per_cpu_mb;
    let mut r = vec![
        format!("JobId={}{array} JobName={}", j.id, j.name),
        format!("UserId={user}({uid}) GroupId={user}({uid}) MCS_label=N/A"),
        {
            let account = crate::accounts::account_of(&user);
            format!(
                "Priority={} Nice=0 Account={} QOS={}",
                priority(j),
                account.unwrap_or("(null)"),
                account.map_or("(null)", |_| crate::accounts::QOS)
            )
        },
        format!(
            "JobState={} Reason={} Dependency={}",
            text::shown_long(j),
            // One word, as Slurm prints it (`job_requeued_in_held_state`).
            text::reason(j, first).replace(' ', "_"),
            match j.program.as_ref().map(|p| p.dependency.as_str()) {
                Some(d) if !d.is_empty() => d,
                _ => "(null)",
            }
        ),
        format!(
            "Requeue={} Restarts={} BatchFlag={} Reboot=0 ExitCode={}:{}",
            u8::from(p.is_none_or(|p| p.requeue)),
            j.restarts,
            u8::from(p.is_some()),
            j.exit.0,
            j.exit.1
        ),
        format!(
            "RunTime={} TimeLimit={} TimeMin=N/A",
            text::long_duration(text::time_used(j, now)),
            text::long_limit(j.walltime_ns)
        ),
        format!(
            "SubmitTime={} EligibleTime={}",
            date(j.submit_ns),
            match p.map(|p| p.eligible_ns) {
                // Held: not eligible, and accruing no age, until released.
                _ if j.reason.starts_with("JobHeld") => "Unknown".into(),
                Some(None) => "Unknown".into(),
                Some(Some(t)) => date(t),
                None => date(j.submit_ns),
            }
        ),
        format!(
            "AccrueTime={}",
            match p.and_then(|p| p.eligible_ns) {
                _ if j.reason == "JobHeldUser" => "Unknown".into(),
                Some(t) if j.reason == text::REQUEUED_HELD => date(t),
                _ => date(j.submit_ns),
            }
        ),
        format!("StartTime={} EndTime={end} Deadline=N/A", date(j.start_ns)),
    ];
    // Slurm's line for a started job where preemption is on: it may be
    // preempted from its start, and was when it ended so.
    if c.config.preemption != Preemption::Off && j.start_ns > 0 {
        r.push(format!(
            "PreemptEligibleTime={} PreemptTime={}",
            date(j.start_ns),
            if j.state == JobState::Preempted {
                date(j.end_ns)
            } else {
                "None".into()
            }
        ));
    }
    r.extend([
        format!(
            "SuspendTime={} SecsPreSuspend={} LastSchedEval={} Scheduler=Main",
            match j.suspensions.last() {
                Some(&(s, 0)) => date(s),
                _ => "None".into(),
            },
            secs_pre_suspend(j),
            date(j.start_ns.max(j.submit_ns))
        ),
        format!("Partition={} AllocNode:Sid=localhost:0", j.partition),
        format!(
            "ReqNodeList={} ExcNodeList={}",
            p.map(|p| p.nodelist.as_str())
                .filter(|l| !l.is_empty())
                .unwrap_or("(null)"),
            p.map(|p| p.exclude.as_str())
                .filter(|l| !l.is_empty())
                .unwrap_or("(null)")
        ),
        format!("NodeList={}", j.nodes),
    ]);
    if !j.nodes.is_empty() {
        r.push(format!("BatchHost={first_node}"));
    }
    // Pending, Slurm shows the range asked ("2-2" for -N 2).
    let num_nodes = match p.and_then(|p| p.nodes_asked) {
        Some((least, most)) if j.nodes.is_empty() && most > 0 => {
            format!("{}-{most}", least.min(most))
        }
        // At least so many, as `-w` asks.
        Some((least, 0)) if j.nodes.is_empty() => least.to_string(),
        _ => nodes.to_string(),
    };
    let tres = text::tres(j, nodes, text::mem_asked(j), false, text::mem_mb);
    r.extend([
        format!(
            "NumNodes={num_nodes} NumCPUs={} NumTasks={} CPUs/Task={} ReqB:S:C:T=0:0:*:*",
            j.cores,
            p.map_or(1, |p| p.ntasks),
            p.map_or(1, |p| p.cpus_per_task)
        ),
        format!("TRES={tres}"),
        format!(
            "Socks/Node=* NtasksPerN:B:S:C={}:0:*:* CoreSpec=*",
            p.map_or(0, |p| p.tasks_per_node)
        ),
        // Asked per node (--mem), it shows per node, as Slurm's does.
        match p.map_or(0, |p| p.mem_per_node_mb) {
            0 => format!(
                "MinCPUsNode={} MinMemory{}={} MinTmpDiskNode=0",
                text::min_cpus_node(j),
                if mem > 0 { "CPU" } else { "Node" },
                text::mem_mb(mem)
            ),
            node => format!(
                "MinCPUsNode={} MinMemoryNode={} MinTmpDiskNode=0",
                text::min_cpus_node(j),
                text::mem_mb(node)
            ),
        },
        "Features=(null) DelayBoot=00:00:00".into(),
        "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)".into(),
        format!(
            "Command={}",
            match p.map(|p| p.command.as_str()) {
                Some(c) if !c.is_empty() => c,
                _ => "(null)",
            }
        ),
        format!("WorkDir={}", p.map_or("/", |p| p.workdir.as_str())),
    ]);
    if let Some(p) = p {
        if !p.comment.is_empty() {
            // With the space after it that Slurm's scontrol writes.
            r.push(format!("Comment={} ", p.comment));
        }
        r.push(format!("StdErr={}", p.stderr));
        r.push("StdIn=/dev/null".into());
        r.push(format!("StdOut={}", p.stdout));
    }
    if let Some(g) = &j.gres {
        let asks: Vec<String> = g
            .asks
            .iter()
            .map(|(k, n)| format!("gres:{k}:{n}"))
            .collect();
        r.push(format!("TresPerNode={}", asks.join(",")));
    }
    r.push("Power=".into());
    // Slurm ends a job's record with an empty indented line.
    r.push(String::new());
    r
}

async fn show_partitions(arg: Option<&str>, oneliner: bool) -> Result<u8> {
    let c = Cluster::open().await?;
    let cfg = &c.config;
    let default = c.default_partition();
    let mut records = Vec::new();
    for p in cfg
        .partitions
        .iter()
        .filter(|p| arg.is_none_or(|a| a == p.name))
    {
        let names = formats::nodeset::fold(p.nodes.iter().map(|&i| cfg.nodes[i].name.as_str()));
        let cpus: u64 = p.nodes.iter().map(|&i| u64::from(cfg.nodes[i].cpus)).sum();
        let mem: u64 = p.nodes.iter().map(|&i| cfg.nodes[i].memory_mb).sum();
        let max_time = match p.max_time_ns {
            0 => "UNLIMITED".into(),
            ns => text::long_limit(ns),
        };
        records.push(vec![
            format!("PartitionName={}", p.name),
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL".into(),
            format!(
                "AllocNodes=ALL Default={} QoS=N/A",
                if p.name == default { "YES" } else { "NO" }
            ),
            "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO".into(),
            format!(
                "MaxNodes=UNLIMITED MaxTime={max_time} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED"
            ),
            format!("Nodes={names}"),
            format!(
                "PriorityJobFactor=1 PriorityTier={} RootOnly=NO ReqResv=NO OverSubscribe={}",
                p.priority.max(1),
                match p.oversubscribe {
                    0 | 1 => "NO".to_string(),
                    n => format!("FORCE:{n}"),
                }
            ),
            format!(
                "OverTimeLimit=NONE PreemptMode={}",
                preempt_mode(cfg.preemption)
                    .split(',')
                    .next()
                    .unwrap_or("OFF")
            ),
            format!(
                "State=UP TotalCPUs={cpus} TotalNodes={} SelectTypeParameters=NONE",
                p.nodes.len()
            ),
            "JobDefaults=(null)".into(),
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED".into(),
            format!(
                "TRES=cpu={cpus},mem={},node={},billing={cpus}",
                text::mem_mb(mem),
                p.nodes.len()
            ),
        ]);
    }
    if records.is_empty() {
        eprintln!("Partition {} not found", arg.unwrap_or(""));
        return Ok(1);
    }
    print_records(&records, oneliner);
    Ok(0)
}

async fn show_nodes(arg: Option<&str>, oneliner: bool) -> Result<u8> {
    let mut c = Cluster::open().await?;
    let wanted: Option<Vec<String>> = match arg {
        Some(a) => Some(
            formats::nodeset::parse(a)
                .map(|s| formats::nodeset::expand(&s))
                .map_err(|e| anyhow::anyhow!("Invalid node name specified: {e}"))?,
        ),
        None => None,
    };
    let nodes: Vec<NodeInfo> = c
        .nodes()
        .await?
        .into_iter()
        .filter(|n| wanted.as_ref().is_none_or(|w| w.contains(&n.name)))
        .collect();
    if nodes.is_empty() {
        eprintln!("Node {} not found", arg.unwrap_or(""));
        return Ok(1);
    }
    let cfg = &c.config;
    let records: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let parts: Vec<&str> = cfg
                .partitions
                .iter()
                .filter(|p| p.nodes.iter().any(|&i| cfg.nodes[i].name == n.name))
                .map(|p| p.name.as_str())
                .collect();
            let gres = if n.gres.is_empty() {
                "(null)".to_string()
            } else {
                n.gres
                    .iter()
                    .map(|(k, t, _)| format!("{k}:{t}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let state = match n.state {
                formats::wire::NodeState::Idle => "IDLE",
                formats::wire::NodeState::Mixed => "MIXED",
                formats::wire::NodeState::Allocated => "ALLOCATED",
                formats::wire::NodeState::Drained if n.alloc_cpus > 0 => "MIXED+DRAIN",
                formats::wire::NodeState::Drained => "IDLE+DRAIN",
                formats::wire::NodeState::Down => "DOWN",
            };
            let mut r = vec![
                format!("NodeName={} Arch=x86_64 CoresPerSocket=1 ", n.name),
                format!(
                    "CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad=0.00",
                    n.alloc_cpus, n.cpus, n.cpus
                ),
                "AvailableFeatures=(null)".into(),
                "ActiveFeatures=(null)".into(),
                format!("Gres={gres}"),
                format!(
                    "NodeAddr={} NodeHostName={} Version=22.05.8",
                    n.name,
                    if n.host.is_empty() { &n.name } else { &n.host }
                ),
                format!(
                    "RealMemory={} AllocMem={} FreeMem={} Sockets={} Boards=1",
                    n.memory_mb,
                    n.alloc_memory_mb,
                    // A virtual node's free memory: what no job holds.
                    n.memory_mb.saturating_sub(n.alloc_memory_mb),
                    n.cpus
                ),
                format!(
                    "State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
                ),
                format!("Partitions={} ", parts.join(",")),
                format!(
                    "CfgTRES=cpu={},mem={},billing={}",
                    n.cpus,
                    text::mem_mb(n.memory_mb),
                    n.cpus
                ),
                format!(
                    "AllocTRES={}",
                    if n.alloc_cpus > 0 {
                        format!("cpu={}", n.alloc_cpus)
                    } else {
                        String::new()
                    }
                ),
            ];
            if !n.reason.is_empty() {
                // Who gave it and when, as Slurm adds them.
                let when = match n.reason_ns {
                    0 => "Unknown".to_string(),
                    ns => text::date(ns.div_euclid(1_000_000_000)),
                };
                r.push(format!(
                    "Reason={} [{}@{when}]",
                    n.reason,
                    crate::cluster::owner()
                ));
            }
            r
        })
        .collect();
    print_records(&records, oneliner);
    Ok(0)
}

/// Slurm's `PreemptMode` for clemu's `preemption`.
pub(crate) fn preempt_mode(p: Preemption) -> &'static str {
    match p {
        Preemption::Off => "OFF",
        Preemption::Suspend => "SUSPEND,GANG",
        Preemption::Cancel => "CANCEL",
        Preemption::Requeue => "REQUEUE",
    }
}

/// What `scontrol show config` prints that tools read: MinJobAge above
/// all (how long squeue still shows a finished job).
/// `scontrol ping`: each controller, primary then backups, up or down as
/// it answers a handshake now; exit status 1 when none does, as Slurm's.
async fn ping() -> Result<u8> {
    let path = crate::cluster::conf_path()?;
    let cfg = controller::config::Cluster::load(&path)?;
    let secret = cfg.client_secret(None)?;
    let mut any = false;
    for (i, addr) in cfg
        .client_address(None)
        .split(',')
        .map(str::trim)
        .enumerate()
    {
        let up = client::answers(addr, &secret).await;
        any |= up;
        let role = if i == 0 { "primary" } else { "backup" };
        let state = if up { "UP" } else { "DOWN" };
        println!("Slurmctld({role}) at {} is {state}", host_name(addr));
    }
    Ok(if any { 0 } else { 1 })
}

/// The host of a controller's address as Slurm names it: this machine's
/// name for a loopback address (Slurm shows `SlurmctldHost`'s name).
fn host_name(addr: &str) -> String {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| host.to_string())
    } else {
        host.to_string()
    }
}

async fn show_config() -> Result<u8> {
    let c = Cluster::open().await?;
    let cfg = &c.config;
    // The keys tools read, valued as clemu is: a database that answers
    // sacct, memory and cores scheduled, usage gathered from /proc, jobs
    // in process groups; in the order Slurm 22.05 prints them.
    let address = cfg.client_address(None);
    let first = address.split(',').next().unwrap_or("").to_string();
    let (ip, port) = first
        .rsplit_once(':')
        .map_or((first.as_str(), ""), |(h, p)| (h, p));
    let host = host_name(&first);
    let gres = match cfg.kinds.names() {
        [] => "(null)".to_string(),
        names => names.join(","),
    };
    let rows = [
        (
            "AccountingStorageType",
            "accounting_storage/slurmdbd".to_string(),
        ),
        ("ClusterName", crate::cluster::NAME.into()),
        ("DefMemPerNode", "UNLIMITED".into()),
        ("FirstJobId", "1".into()),
        ("GresTypes", gres),
        ("JobAcctGatherType", "jobacct_gather/linux".into()),
        // What a job gets between SIGTERM and SIGKILL: half the agents'
        // grace, the other half their own backstop (docs/slurm.md).
        (
            "KillWait",
            format!("{} sec", crate::cluster::kill_wait_s(cfg)),
        ),
        (
            "MaxArraySize",
            formats::wire::ArraySpec::MAX_TASKS.to_string(),
        ),
        ("MaxJobCount", cfg.max_jobs.to_string()),
        ("MaxMemPerNode", "UNLIMITED".into()),
        ("MinJobAge", format!("{MIN_JOB_AGE_S} sec")),
        ("OverTimeLimit", "0 min".into()),
        ("PreemptMode", preempt_mode(cfg.preemption).into()),
        (
            "PreemptType",
            match cfg.preemption {
                controller::policy::Preemption::Off => "preempt/none",
                _ => "preempt/partition_prio",
            }
            .into(),
        ),
        ("PriorityType", "priority/basic".into()),
        ("ProctrackType", "proctrack/pgid".into()),
        (
            "SchedulerType",
            // Slurm's names for the policies it has; clemu's own else.
            match cfg.policy.as_str() {
                "easy" => "sched/backfill".to_string(),
                "fcfs" => "sched/builtin".to_string(),
                other => format!("sched/{other}"),
            },
        ),
        ("SelectType", "select/cons_tres".into()),
        ("SelectTypeParameters", "CR_CORE_MEMORY".into()),
        ("SlurmctldHost[0]", format!("{host}({ip})")),
        ("SlurmctldPort", port.to_string()),
        (
            "SLURM_CONF",
            crate::cluster::conf_path()?.display().to_string(),
        ),
        ("SLURM_VERSION", text::RELEASE.into()),
        ("StateSaveLocation", cfg.state_dir.display().to_string()),
        ("SwitchType", "switch/none".into()),
        ("TaskPlugin", "task/none".into()),
    ];
    let mut out = format!("Configuration data as of {}\n", text::date(text::now_s()));
    for (k, v) in rows {
        out.push_str(&format!("{k:<23} = {v}\n"));
    }
    out.push_str(&format!("\nSlurmctld(primary) at {host} is UP\n"));
    print!("{out}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_fold_as_slurms() {
        let fold = |list: &str, sorted: bool| hostlist(expanded(list).unwrap(), sorted);
        // Each as Slurm 22.05's scontrol show hostlist / hostlistsorted.
        for (list, plain, sorted) in [
            ("node1,node2,node3", "node[1-3]", "node[1-3]"),
            ("node3,node1,node2", "node[3,1-2]", "node[1-3]"),
            ("node1,node1,node2", "node[1,1-2]", "node[1,1-2]"),
            ("a1,b2,a2", "a1,b2,a2", "a[1-2],b2"),
            ("node[1-3],x5", "node[1-3],x5", "node[1-3],x5"),
            ("node01,node2", "node[01,2]", "node[2,01]"),
        ] {
            assert_eq!(fold(list, false), plain, "{list}");
            assert_eq!(fold(list, true), sorted, "{list} sorted");
        }
    }

    #[test]
    fn secs_pre_suspend_counts_the_run_before_the_last_suspension() {
        const S: i64 = 1_000_000_000;
        let mut j = JobInfo {
            id: 1,
            name: String::new(),
            state: JobState::Suspended,
            partition: "batch".into(),
            cores: 1,
            nodes: String::new(),
            submit_ns: 0,
            start_ns: 100 * S,
            end_ns: 0,
            runtime_ns: 0,
            walltime_ns: 0,
            reason: String::new(),
            suspensions: Vec::new(),
            array: None,
            gres: None,
            mem_per_cpu_mb: 0,
            exit: (0, 0),
            program: None,
            restarts: 0,
            completing: false,
        };
        assert_eq!(secs_pre_suspend(&j), 0);
        // Ran 3 s, suspended; then 10 s more (5 s suspended between).
        j.suspensions = vec![(103 * S, 0)];
        assert_eq!(secs_pre_suspend(&j), 3);
        j.suspensions = vec![(103 * S, 108 * S), (118 * S, 0)];
        assert_eq!(secs_pre_suspend(&j), 13);
    }
}
