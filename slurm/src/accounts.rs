//! `sacctmgr` and `sshare`: the cluster's accounts and their users, as
//! tools look them up (a workflow manager guessing the account to charge,
//! a portal listing a user's accounts and QOS).
//!
//! clemu keeps no accounting database. It answers as a Slurm database
//! does the day it is made: one account, `root` ("default root
//! account"), in the one cluster, `clemu`, with the QOS `normal`; its
//! users are root (an administrator) and the cluster's owner, the user its
//! controller runs as, `root` their default account. Nothing can be
//! added or changed, and no usage is kept, so `sshare` shows shares but
//! no usage or fair-share factor: each such request is refused, never
//! answered with a number clemu does not have.

use anyhow::{anyhow, bail, Result};
use clap::Parser;

use crate::cluster;

/// The one account, and the one cluster (as `scontrol show config`
/// names it).
const ACCOUNT: &str = "root";
const CLUSTER: &str = crate::cluster::NAME;

/// The QOS every association has.
pub const QOS: &str = "normal";

/// The users in the account: root, and the cluster's owner (found once:
/// squeue and sacct ask for every job they show).
fn users() -> &'static [String] {
    static USERS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    USERS.get_or_init(|| {
        let mut users = vec!["root".to_string()];
        let owner = cluster::owner();
        if owner != "root" {
            users.push(owner);
        }
        users
    })
}

/// The account jobs of `user` are charged to: `root` for its users,
/// none for others (as Slurm, without an association).
pub fn account_of(user: &str) -> Option<&'static str> {
    users().iter().any(|u| u == user).then_some(ACCOUNT)
}

/// One column sacctmgr or sshare can print: the names it is asked by
/// (the first its own), its header and default width (negative: left
/// justified).
struct Column {
    names: &'static [&'static str],
    header: &'static str,
    width: i32,
}

const fn col(names: &'static [&'static str], header: &'static str, width: i32) -> Column {
    Column {
        names,
        header,
        width,
    }
}

/// sacctmgr's columns, with Slurm 22.05's headers and widths.
const SACCTMGR: &[Column] = &[
    col(&["user", "name"], "User", 10),
    col(&["defaultaccount", "defacct"], "Def Acct", 10),
    col(&["adminlevel", "admin"], "Admin", 9),
    col(&["cluster"], "Cluster", 10),
    col(&["account", "acct"], "Account", 10),
    col(&["partition"], "Partition", 10),
    col(&["fairshare", "share", "shares"], "Share", 9),
    col(&["priority"], "Priority", 10),
    col(&["maxjobs"], "MaxJobs", 7),
    col(&["maxnodes"], "MaxNodes", 8),
    col(&["maxcpus"], "MaxCPUs", 8),
    col(&["maxsubmitjobs", "maxsubmit"], "MaxSubmit", 9),
    col(&["maxwalldurationperjob", "maxwall"], "MaxWall", 11),
    col(&["maxcpumins"], "MaxCPUMins", 11),
    col(&["qos"], "QOS", 20),
    col(&["defaultqos", "defqos"], "Def QOS", 9),
    col(&["description", "descr"], "Descr", 20),
    col(&["organization", "org"], "Org", 20),
    col(&["grpjobs"], "GrpJobs", 7),
    col(&["grptres"], "GrpTRES", 13),
    col(&["grpsubmitjobs", "grpsubmit"], "GrpSubmit", 9),
    col(&["grpwall"], "GrpWall", 11),
    col(&["grptresmins"], "GrpTRESMins", 13),
    col(&["maxtres"], "MaxTRES", 13),
    col(&["maxtrespernode"], "MaxTRESPerNode", 14),
    col(&["maxtresmins"], "MaxTRESMins", 13),
    col(&["grptresrunmins", "grptresrunmin"], "GrpTRESRunMin", 13),
];

/// What each entity lists by default.
const USER: &[&str] = &["user", "defaultaccount", "adminlevel"];
const USER_ASSOC: &[&str] = &[
    "user",
    "defaultaccount",
    "adminlevel",
    "cluster",
    "account",
    "partition",
    "fairshare",
    "priority",
    "maxjobs",
    "maxnodes",
    "maxcpus",
    "maxsubmitjobs",
    "maxwalldurationperjob",
    "maxcpumins",
    "qos",
    "defaultqos",
];
const ACCOUNTS: &[&str] = &["account", "description", "organization"];
const ASSOC: &[&str] = &[
    "cluster",
    "account",
    "user",
    "partition",
    "fairshare",
    "priority",
    "grpjobs",
    "grptres",
    "grpsubmitjobs",
    "grpwall",
    "grptresmins",
    "maxjobs",
    "maxtres",
    "maxtrespernode",
    "maxsubmitjobs",
    "maxwalldurationperjob",
    "maxtresmins",
    "qos",
    "defaultqos",
    "grptresrunmins",
];

/// A column asked for, with its width (`%N` after its name).
struct Shown<'a> {
    column: &'a Column,
    width: i32,
}

/// `name[%WIDTH]` of `columns`, or Slurm's "Unknown field".
fn shown<'a>(
    columns: &'a [Column],
    word: &str,
    unknown: &dyn Fn(&str) -> String,
) -> Result<Shown<'a>> {
    let (name, width) = match word.split_once('%') {
        Some((n, w)) => (
            n,
            Some(w.parse::<i32>().map_err(|_| anyhow!("{}", unknown(word)))?),
        ),
        None => (word, None),
    };
    let lower = name.to_ascii_lowercase();
    let column = columns
        .iter()
        .find(|c| c.names.contains(&lower.as_str()))
        .ok_or_else(|| anyhow!("{}", unknown(name)))?;
    Ok(Shown {
        column,
        width: width.unwrap_or(column.width),
    })
}

/// How rows are printed: Slurm's `print_fields`.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Columns of their widths, each followed by a space; a value too long
    /// is cut, its last character `+`.
    Table,
    /// `-p`: each value followed by `|`.
    Parsable,
    /// `-P`: values between `|`.
    Parsable2,
}

fn cell(text: &str, width: i32, layout: Layout) -> String {
    if layout != Layout::Table {
        return text.to_string();
    }
    let w = width.unsigned_abs() as usize;
    let chars = text.chars().count();
    let text: String = if chars > w {
        let mut cut: String = text.chars().take(w.saturating_sub(1)).collect();
        cut.push('+');
        cut
    } else {
        text.to_string()
    };
    crate::text::padded(&text, w, width >= 0)
}

/// The rows under `columns`, with a header unless `noheader`.
fn print(columns: &[Shown<'_>], rows: &[Vec<String>], layout: Layout, noheader: bool) {
    let line = |values: &mut dyn Iterator<Item = (String, i32)>| -> String {
        let cells: Vec<String> = values.map(|(v, w)| cell(&v, w, layout)).collect();
        match layout {
            Layout::Table => cells.iter().map(|c| format!("{c} ")).collect(),
            Layout::Parsable => cells.iter().map(|c| format!("{c}|")).collect(),
            Layout::Parsable2 => cells.join("|"),
        }
    };
    let mut out = String::new();
    if !noheader {
        out += &line(
            &mut columns
                .iter()
                .map(|c| (c.column.header.to_string(), c.width)),
        );
        out.push('\n');
        if layout == Layout::Table {
            out += &line(&mut columns.iter().map(|c| {
                let dashes = (c.width.unsigned_abs() as usize).min(crate::text::MAX_WIDTH);
                ("-".repeat(dashes), c.width)
            }));
            out.push('\n');
        }
    }
    for row in rows {
        out += &line(&mut row.iter().cloned().zip(columns.iter().map(|c| c.width)));
        out.push('\n');
    }
    print!("{out}");
}

/// What a row shows in `column`: a user's (`user`), or the account's;
/// an association's (`assoc`: cluster, account, user, the user empty for
/// the account's own) or not.
fn value(column: &Column, user: Option<&str>, assoc: bool) -> String {
    let name = column.names[0];
    let text = match name {
        // The account's own row, listed as an account.
        "account" if user.is_none() => ACCOUNT,
        "user" => user.unwrap_or(""),
        "defaultaccount" => user.map_or("", |_| ACCOUNT),
        "adminlevel" => match user {
            Some("root") => "Administrator",
            Some(_) => "None",
            None => "",
        },
        // Association fields: a user's, listed without its associations,
        // has none to show.
        "cluster" if assoc => CLUSTER,
        "account" if assoc => ACCOUNT,
        "fairshare" if assoc => "1",
        "qos" if assoc => "normal",
        "description" => "default root account",
        "organization" => "root",
        _ => "",
    };
    text.to_string()
}

/// `sacctmgr [-n] [-p|-P] [-s] show|list user|account|association
/// [NAMES] [withassoc] [where KEY=VALUES...] [format=FIELDS]`.
pub fn sacctmgr(argv: &[String]) -> Result<u8> {
    // The cluster's, as every command's: one must be named.
    cluster::conf_path()?;
    let mut layout = Layout::Table;
    let (mut noheader, mut with_assoc) = (false, false);
    let mut words = Vec::new();
    // Short flags may come together (`-nP`), as getopt takes them.
    let flags = argv.iter().skip(1).flat_map(|a| match a.strip_prefix('-') {
        Some(short) if !short.starts_with('-') && short.len() > 1 => {
            short.chars().map(|c| format!("-{c}")).collect()
        }
        _ => vec![a.clone()],
    });
    for a in flags {
        match a.as_str() {
            "-n" | "--noheader" => noheader = true,
            "-p" | "--parsable" => layout = Layout::Parsable,
            "-P" | "--parsable2" => layout = Layout::Parsable2,
            "-s" | "--associations" => with_assoc = true,
            "-i" | "--immediate" | "-Q" | "--quiet" | "-r" | "--readonly" => {}
            "-h" | "--help" => {
                println!(
                    "Usage: sacctmgr [-n] [-p|-P] [-s] show|list user|account|association \
                     [NAMES] [withassoc] [where user=U account=A cluster=C] [format=FIELDS]"
                );
                return Ok(0);
            }
            flag if flag.starts_with('-') => bail!("invalid option -- '{flag}'"),
            word => words.push(word.to_string()),
        }
    }
    let mut words = words.into_iter();
    let verb = words.next().unwrap_or_default().to_ascii_lowercase();
    match verb.as_str() {
        "show" | "list" => {}
        "add" | "create" | "modify" | "update" | "delete" | "remove" | "archive" | "load"
        | "dump" => bail!(
            "{verb}: clemu has one account, root, and its users, and takes no changes to them"
        ),
        "" => bail!("no command given: sacctmgr show user|account|association"),
        other => bail!("Unknown command '{other}': sacctmgr show user|account|association"),
    }
    let entity = words.next().unwrap_or_default().to_ascii_lowercase();
    let entity = match entity.as_str() {
        "user" | "users" => "user",
        "account" | "accounts" => "account",
        "association" | "associations" | "assoc" => "assoc",
        "cluster" | "clusters" | "qos" | "configuration" | "event" | "events" | "federation"
        | "problem" | "resource" | "reservation" | "runawayjobs" | "stats" | "transaction"
        | "transactions" | "tres" | "wckey" | "wckeys" => {
            bail!("show {entity} is not supported by clemu yet: it answers user, account and association")
        }
        _ => {
            println!("No valid entity in list command");
            println!(
                "Input line must include \"Account\", \"Association\", \"Cluster\", \
                 \"Configuration\",\n\"Event\", \"Federation\", \"Problem\", \"QOS\", \
                 \"Resource\", \"Reservation\",\n\"RunAwayJobs\", \"Stats\", \"Transaction\", \
                 \"TRES\", \"User\", or \"WCKey\""
            );
            return Ok(1);
        }
    };
    // Names, `withassoc`, `where`, then KEY=VALUES pairs.
    let (mut names, mut accounts, mut clusters): (Vec<String>, Vec<String>, Vec<String>) =
        Default::default();
    let mut format: Option<String> = None;
    for w in words {
        let lower = w.to_ascii_lowercase();
        if lower == "withassoc" {
            with_assoc = true;
            continue;
        }
        if lower == "where" || lower == "set" {
            continue;
        }
        let Some((key, values)) = w.split_once('=') else {
            names.extend(w.split(',').map(str::to_string));
            continue;
        };
        let list = || values.split(',').map(str::to_string).collect::<Vec<_>>();
        match key.to_ascii_lowercase().as_str() {
            "format" => format = Some(values.to_string()),
            "user" | "users" | "name" | "names" => names.extend(list()),
            "account" | "accounts" | "acct" => accounts.extend(list()),
            "cluster" | "clusters" => clusters.extend(list()),
            other => bail!("Unknown condition: {other}={values}"),
        }
    }
    let unknown = |f: &str| format!("Unknown field '{f}'");
    let defaults: &[&str] = match (entity, with_assoc) {
        ("user", false) => USER,
        ("user", true) => USER_ASSOC,
        ("account", false) => ACCOUNTS,
        ("account", true) => {
            bail!("show account withassoc is not supported by clemu yet")
        }
        _ => ASSOC,
    };
    let asked: Vec<&str> = match &format {
        Some(f) => f.split(',').filter(|w| !w.is_empty()).collect(),
        None => defaults.to_vec(),
    };
    let columns: Vec<Shown<'_>> = match asked
        .iter()
        .map(|w| shown(SACCTMGR, w, &unknown))
        .collect::<Result<_>>()
    {
        Ok(c) => c,
        Err(e) => {
            // Said alone, as Slurm's sacctmgr says it.
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let in_cluster = clusters.is_empty() || clusters.iter().any(|c| c == CLUSTER);
    let in_account = accounts.is_empty() || accounts.iter().any(|a| a == ACCOUNT);
    let users: Vec<String> = users()
        .iter()
        .filter(|u| names.is_empty() || names.contains(u))
        .cloned()
        .collect();
    // Each row: the user it is of (`None`: the account's own), and
    // whether it is an association.
    let rows: Vec<(Option<String>, bool)> = match entity {
        "user" if with_assoc => {
            if in_cluster && in_account {
                users.into_iter().map(|u| (Some(u), true)).collect()
            } else {
                Vec::new()
            }
        }
        "user" => users.into_iter().map(|u| (Some(u), false)).collect(),
        "account" => {
            let named = names.is_empty() || names.iter().any(|n| n == ACCOUNT);
            if named && in_account {
                vec![(None, false)]
            } else {
                Vec::new()
            }
        }
        _ => {
            if !(in_cluster && in_account) {
                Vec::new()
            } else {
                // The account's own association, unless users are named.
                let own = names.is_empty().then_some((None, true));
                own.into_iter()
                    .chain(users.into_iter().map(|u| (Some(u), true)))
                    .collect()
            }
        }
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(user, assoc)| {
            columns
                .iter()
                .map(|c| value(c.column, user.as_deref(), *assoc))
                .collect()
        })
        .collect();
    print(&columns, &rows, layout, noheader);
    Ok(0)
}

/// sshare's columns. Those of usage and fair share are known, to be
/// refused by name.
const SSHARE: &[Column] = &[
    col(&["account"], "Account", -20),
    col(&["user"], "User", 10),
    col(&["rawshares"], "RawShares", 10),
    col(&["normshares"], "NormShares", 11),
    col(&["rawusage"], "RawUsage", 11),
    col(&["normusage"], "NormUsage", 11),
    col(&["effectvusage"], "EffectvUsage", 13),
    col(&["fairshare"], "FairShare", 10),
    col(&["levelfs"], "LevelFS", 10),
    col(&["grptresmins"], "GrpTRESMins", 20),
    col(&["tresrunmins"], "TRESRunMins", 20),
    col(&["cluster"], "Cluster", 10),
    col(&["id"], "ID", 4),
    col(&["partition"], "Partition", 12),
];

#[derive(Debug, Parser)]
#[command(
    name = "sshare",
    infer_long_args = true,
    disable_version_flag = true,
    disable_help_flag = true
)]
pub struct ShareArgs {
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Every user's line, and the account's.
    #[arg(short = 'a', long)]
    all: bool,
    /// The users' lines alone.
    #[arg(short = 'U', long = "Users")]
    users_only: bool,
    #[arg(short = 'u', long)]
    users: Option<String>,
    #[arg(short = 'A', long)]
    accounts: Option<String>,
    #[arg(short = 'o', long)]
    format: Option<String>,
    #[arg(short = 'n', long)]
    noheader: bool,
    #[arg(short = 'p', long)]
    parsable: bool,
    #[arg(short = 'P', long)]
    parsable2: bool,
    #[arg(short = 'l', long)]
    long: bool,
    #[arg(short = 'M', long)]
    clusters: Option<String>,
}

/// `sshare`: the account's shares, and its users'. Only the columns
/// clemu has facts for (Account, User, RawShares, NormShares, Cluster,
/// Partition); usage and fair share it does not keep, and says so.
pub fn sshare(argv: &[String]) -> Result<u8> {
    cluster::conf_path()?;
    let a: ShareArgs = crate::argv::parse_plain(argv)?;
    let unknown = |f: &str| format!("Invalid field requested: \"{f}\"");
    let format = a.format.clone().unwrap_or_else(|| {
        let usage = if a.long {
            "rawusage,normusage,effectvusage,fairshare,levelfs"
        } else {
            "rawusage,effectvusage,fairshare"
        };
        format!("account,user,rawshares,normshares,{usage}")
    });
    let columns: Vec<Shown<'_>> = format
        .split(',')
        .filter(|w| !w.is_empty())
        .map(|w| shown(SSHARE, w, &unknown))
        .collect::<Result<_>>()?;
    if let Some(c) = columns.iter().find(|c| {
        !matches!(
            c.column.names[0],
            "account" | "user" | "rawshares" | "normshares" | "cluster" | "partition"
        )
    }) {
        bail!(
            "{}: clemu keeps no usage or fair share; it shows Account, User, RawShares, \
             NormShares, Cluster and Partition (-o account,user,rawshares)",
            c.column.header
        );
    }
    let me = crate::text::user_name();
    let wanted: Vec<String> = match (&a.users, a.all) {
        (Some(list), _) => list.split(',').map(str::to_string).collect(),
        (None, true) => users().to_vec(),
        (None, false) => vec![me],
    };
    let in_account = a
        .accounts
        .as_deref()
        .is_none_or(|l| l.split(',').any(|x| x == ACCOUNT));
    let mut rows: Vec<Vec<String>> = Vec::new();
    if in_account {
        // The account's own line (under -U, users' lines alone), then
        // each user's, set in by one under it.
        let account_line = !a.users_only;
        let users: Vec<String> = users()
            .iter()
            .filter(|u| wanted.contains(u))
            .cloned()
            .collect();
        let line = |user: Option<&str>| -> Vec<String> {
            columns
                .iter()
                .map(|c| match c.column.names[0] {
                    "account" if user.is_some() && account_line => format!(" {ACCOUNT}"),
                    "account" => ACCOUNT.to_string(),
                    "user" => user.unwrap_or("").to_string(),
                    "rawshares" if user.is_some() => "1".to_string(),
                    "cluster" => CLUSTER.to_string(),
                    _ => String::new(),
                })
                .collect()
        };
        if account_line {
            rows.push(line(None));
        }
        rows.extend(users.iter().map(|u| line(Some(u))));
    }
    let layout = if a.parsable2 {
        Layout::Parsable2
    } else if a.parsable {
        Layout::Parsable
    } else {
        Layout::Table
    };
    print(&columns, &rows, layout, a.noheader);
    Ok(0)
}
