//! A command line cut where Slurm's own parsing (getopt, stopping at the
//! first word that is not an option) cuts it: options first, then the
//! script or command and its arguments, which are never read as options.
//!
//! clap could find that word itself only by taking any word it does not
//! know as the start of the command: then `-n2` (a value joined to its
//! short option) and a mistyped option became the command. Here the
//! options' own declarations say which take a value, so `-n2`, `-n 2`,
//! `--ntasks=2` and `--ntasks 2` all read as Slurm reads them, and an
//! option clemu does not know is clap's error, not a command.
//!
//! Every command's line, cut so or not, is parsed here
//! ([`parse_plain`]), so that each refusal is worded as Slurm's commands
//! word it.

use anyhow::Result;
use clap::{Arg, CommandFactory, Parser};

/// Parses `argv` (its first word the program's name) as `A`, whose
/// positional argument, last, takes the words from the first one that is
/// neither an option nor an option's value on.
pub fn parse<A: Parser + CommandFactory>(argv: &[String]) -> Result<A> {
    let mut cmd = A::command();
    // Built, its arguments know how many values each takes.
    cmd.build();
    let (options, rest) = split(&cmd, argv);
    let mut all = options;
    if !rest.is_empty() {
        all.push("--".into());
        all.extend(rest);
    }
    // The command built above parses too: making it is most of what a
    // parse costs, and sbatch parses once per job.
    parse_with::<A>(cmd, &all).map_err(|e| match slurms_own(&e.to_string()) {
        Some(option) => {
            anyhow::anyhow!("{option} is an option of Slurm's that clemu does not take yet")
        }
        None => e,
    })
}

/// A command's arguments, parsed; help is printed and exits 0, and an
/// error is said in one line (clap's first), as Slurm's commands do.
pub fn parse_plain<A: clap::Parser>(argv: &[String]) -> Result<A> {
    parse_with::<A>(A::command(), argv)
}

/// [`parse_plain`] with `A`'s command already made.
fn parse_with<A: clap::Parser>(mut cmd: clap::Command, argv: &[String]) -> Result<A> {
    use clap::error::ErrorKind;
    cmd.try_get_matches_from_mut(argv)
        .and_then(|mut m| A::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut cmd)))
        .map_err(|e| {
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                std::process::exit(0);
            }
            let text = e.render().to_string();
            let line = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            let program = argv
                .first()
                .and_then(|p| p.rsplit('/').next())
                .unwrap_or_default();
            if let Some(said) = not_a_number(line) {
                return anyhow::anyhow!("{said}");
            }
            match slurms_own_of(program, line) {
                Some(option) => {
                    anyhow::anyhow!("{option} is an option of Slurm's that clemu does not take yet")
                }
                None => anyhow::anyhow!("{line}"),
            }
        })
}

/// clap's refusal of a number (`invalid value '-3' for '--ntasks
/// <NTASKS>': -3 is not in 0..=4294967295`) as Slurm's commands word it:
/// `Invalid numeric value "-3" for --ntasks.`
fn not_a_number(line: &str) -> Option<String> {
    let rest = line.strip_prefix("invalid value '")?;
    let (value, rest) = rest.split_once("' for '")?;
    let (option, why) = rest.split_once("': ")?;
    let option = option.split([' ', '<']).next()?;
    let numeric = [
        "invalid digit",
        "is not in",
        "number too large",
        "number too small",
    ]
    .iter()
    .any(|w| why.contains(w));
    numeric.then(|| format!("Invalid numeric value \"{value}\" for {option}."))
}

/// Options of Slurm's sbatch and srun that clemu does not take: named as
/// such, not as unknown (which they are not).
const SLURMS_OWN: &[&str] = &[
    "-B",
    "-i",
    "-k",
    "-K",
    "-L",
    "-m",
    "-O",
    "-Q",
    "-r",
    "-s",
    "-S",
    "-v",
    "-w",
    "-W",
    "-x",
    "--acctg-freq",
    "--core-spec",
    "--cpu-bind",
    "--cpu_bind",
    "--cores-per-socket",
    "--cpus-per-gpu",
    "--deadline",
    "--distribution",
    "--exact",
    "--exclude",
    "--exclusive",
    "--export-file",
    "--get-user-env",
    "--gid",
    "--gpus-per-task",
    "--hint",
    "--input",
    "--kill-on-bad-exit",
    "--kill-on-invalid-dep",
    "--licenses",
    "--mem-per-gpu",
    "--mincpus",
    "--multi-prog",
    "--nice",
    "--no-kill",
    "--nodelist",
    "--ntasks-per-core",
    "--ntasks-per-socket",
    "--open-mode",
    "--overcommit",
    "--overlap",
    "--oversubscribe",
    "--priority",
    "--profile",
    "--propagate",
    "--quiet",
    "--reboot",
    "--relative",
    "--reservation",
    "--sockets-per-node",
    "--spread-job",
    "--switches",
    "--test-only",
    "--threads-per-core",
    "--time-min",
    "--tmp",
    "--uid",
    "--usage",
    "--use-min-nodes",
    "--verbose",
    "--wait",
    "--wait-all-nodes",
    "--wckey",
];

/// Options of Slurm's squeue, sacct and sinfo that clemu does not take
/// (one it takes never reaches the lookup).
const QUERIES_OWN: &[(&str, &[&str])] = &[
    (
        "squeue",
        &[
            "-A",
            "-i",
            "-L",
            "-q",
            "-s",
            "-S",
            "-v",
            "--account",
            "--federation",
            "--iterate",
            "--licenses",
            "--local",
            "--qos",
            "--sibling",
            "--sort",
            "--steps",
            "--verbose",
        ],
    ),
    (
        "sacct",
        &[
            "-A",
            "-c",
            "-D",
            "-e",
            "-l",
            "-L",
            "-N",
            "-q",
            "-T",
            "-W",
            "-x",
            "--accounts",
            "--allclusters",
            "--associations",
            "--duplicates",
            "--helpformat",
            "--long",
            "--nodelist",
            "--qos",
            "--truncate",
            "--wckeys",
        ],
    ),
    (
        "sinfo",
        &[
            "-d",
            "-e",
            "-i",
            "-r",
            "-S",
            "-T",
            "-v",
            "--dead",
            "--exact",
            "--iterate",
            "--reservation",
            "--responding",
            "--sort",
            "--verbose",
        ],
    ),
    (
        "scancel",
        &[
            "-A",
            "-i",
            "-q",
            "-w",
            "--account",
            "--ctld",
            "--hurry",
            "--interactive",
            "--nodelist",
            "--qos",
            "--reservation",
            "--sibling",
            "--wckey",
        ],
    ),
];

/// The option clap's error calls unexpected, if it is one of Slurm's
/// `program`'s (`sbatch` and `srun` share theirs).
pub fn slurms_own_of(program: &str, error: &str) -> Option<&'static str> {
    let word = error
        .strip_prefix("unexpected argument '")?
        .split('\'')
        .next()?;
    let name = word.split('=').next()?;
    let short = name.len() > 2 && !name.starts_with("--");
    let name = if short { &name[..2] } else { name };
    let list = QUERIES_OWN
        .iter()
        .find(|(p, _)| *p == program)
        .map_or(SLURMS_OWN, |(_, l)| l);
    list.iter().copied().find(|o| *o == name)
}

fn slurms_own(error: &str) -> Option<&'static str> {
    slurms_own_of("sbatch", error)
}

/// `argv` as (its name and options, the words after them).
fn split(cmd: &clap::Command, argv: &[String]) -> (Vec<String>, Vec<String>) {
    let mut options: Vec<String> = argv.iter().take(1).cloned().collect();
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        if w == "--" {
            return (options, words.cloned().collect());
        }
        let takes_next = if let Some(long) = w.strip_prefix("--") {
            !long.contains('=') && long_arg(cmd, long).is_some_and(needs_value)
        } else if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            short_takes_next(cmd, shorts)
        } else {
            // The script or command: it and all after it are its.
            let mut rest = vec![w.clone()];
            rest.extend(words.cloned());
            return (options, rest);
        };
        let value = if takes_next { words.next() } else { None };
        match value {
            // A value that looks like an option is the option's all the
            // same, as getopt takes it (`-J -x`): joined, so clap does too.
            Some(v) if v.starts_with('-') && w.starts_with("--") => {
                options.push(format!("{w}={v}"));
            }
            Some(v) if v.starts_with('-') => options.push(format!("{w}{v}")),
            Some(v) => {
                options.push(w.clone());
                options.push(v.clone());
            }
            None => options.push(w.clone()),
        }
    }
    (options, Vec::new())
}

/// Whether the cluster of short options `shorts` (`lH`, `n2`, `n`) ends
/// with one that takes its value from the next word: a short option
/// taking a value takes the rest of its word if any is left.
fn short_takes_next(cmd: &clap::Command, shorts: &str) -> bool {
    let mut chars = shorts.chars();
    while let Some(c) = chars.next() {
        let Some(arg) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) else {
            // Unknown: clap says so.
            return false;
        };
        if takes_value(arg) {
            return chars.as_str().is_empty() && needs_value(arg);
        }
    }
    false
}

/// The option `--name` names: exactly, or as the start of one long name
/// alone (as the commands, all `infer_long_args`, take them; clap refuses
/// it otherwise).
fn long_arg<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a Arg> {
    let longs = |a: &'a Arg| {
        a.get_long()
            .into_iter()
            .chain(a.get_all_aliases().into_iter().flatten())
    };
    if let Some(a) = cmd.get_arguments().find(|a| longs(a).any(|l| l == name)) {
        return Some(a);
    }
    let mut starting = cmd
        .get_arguments()
        .filter(|a| longs(a).any(|l| l.starts_with(name)));
    match (starting.next(), starting.next()) {
        (Some(a), None) => Some(a),
        _ => None,
    }
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

/// Takes a value that may be the next word (not one that is optional).
fn needs_value(arg: &Arg) -> bool {
    takes_value(arg) && arg.get_num_args().is_some_and(|n| n.min_values() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Parser)]
    #[command(name = "t", infer_long_args = true)]
    struct T {
        #[arg(short = 'n', long)]
        ntasks: Option<u32>,
        #[arg(short = 'l', long)]
        label: bool,
        #[arg(short = 'J', long = "job-name")]
        job_name: Option<String>,
        #[arg(trailing_var_arg = true)]
        command: Vec<String>,
    }

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options_stop_at_the_first_word_that_is_not_one() {
        for line in [
            "t -n2 -l echo -n 3",
            "t -n 2 -l echo -n 3",
            "t -ln2 echo -n 3",
            "t --ntasks=2 --label echo -n 3",
            "t --ntasks 2 --lab echo -n 3",
            "t -n 2 -l -- echo -n 3",
        ] {
            let t: T = parse(&words(line)).unwrap();
            assert_eq!(t.ntasks, Some(2), "{line}");
            assert!(t.label, "{line}");
            assert_eq!(t.command, words("echo -n 3"), "{line}");
        }
        let t: T = parse(&words("t -Jname -n 1 x")).unwrap();
        assert_eq!(t.job_name.as_deref(), Some("name"));
        let t: T = parse(&words("t -n 1")).unwrap();
        assert!(t.command.is_empty());
        // A value that looks like an option is the option's, as getopt
        // takes it.
        for line in [
            "t -J -dash -n 1 x",
            "t --job-name -dash -n 1 x",
            "t -l -J -dash x",
        ] {
            let t: T = parse(&words(line)).unwrap();
            assert_eq!(t.job_name.as_deref(), Some("-dash"), "{line}");
            assert_eq!(t.command, ["x"], "{line}");
        }
    }

    #[test]
    fn an_unknown_option_is_an_error_not_the_command() {
        for line in ["t --frobnicate echo", "t -y echo"] {
            let e = parse::<T>(&words(line)).unwrap_err().to_string();
            assert!(e.contains("unexpected argument"), "{line}: {e}");
        }
        // One of Slurm's is named as such.
        for (line, option) in [
            ("t -n 2 --exclude=n1 echo", "--exclude"),
            ("t -wnode1 echo", "-w"),
        ] {
            let e = parse::<T>(&words(line)).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("{option} is an option of Slurm's that clemu does not take yet"),
                "{line}"
            );
        }
    }
}
