//! Slurm's commands on a clemu cluster, so that tools written for Slurm
//! (workflow managers, portals, users' scripts) run unmodified.
//!
//! # How it works
//!
//! One program, `clemu-slurm`, is every command: it acts as the one it is
//! called by (`sbatch`, `squeue`, `scancel`, `sacct`, `sinfo`,
//! `scontrol`, `srun`, `sacctmgr`, `sshare`), through links of those names that `clemu-slurm
//! up` puts in the cluster's `bin/` directory. Nothing else takes Slurm's names, so a
//! machine's real Slurm stays first unless the user puts that directory
//! first on `PATH`.
//!
//! Each command reads `CLEMU_CONF` (the cluster's config, as `SLURM_CONF`
//! names Slurm's), asks the controller through the [`client`] crate, and
//! prints what Slurm's command prints, byte for byte where clemu has the
//! same facts: the formats, widths and headers follow Slurm's own code
//! ([`text`] holds the shared rules). A batch script becomes a job that
//! runs it ([`formats::wire::Program`]); the agent runs it with Slurm's
//! variables, and its end is the job's.
//!
//! Accounts are those of a Slurm database just made ([`accounts`]: one
//! account, `root`, for root and the cluster's owner). Where clemu has no
//! equivalent (usage, fair share) the commands print what Slurm prints
//! without it; where
//! an option asks for something clemu cannot do yet, the command says so
//! and fails rather than pretend.

// `squeue --json` writes a job's 110 keys in one `json!`.
#![recursion_limit = "512"]

pub mod accounts;
pub mod argv;
pub mod cluster;
pub mod format;
pub mod sacct;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod sinfo;
pub mod squeue;
pub mod srun;
pub mod text;
pub mod up;
pub mod users;

use std::process::ExitCode;

/// Runs the command `argv[0]` names (a link's name), or `clemu-slurm
/// COMMAND ...`.
pub fn main_of(mut argv: Vec<String>) -> ExitCode {
    let name = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default();
    let name = if name == "clemu-slurm" || name.starts_with("slurm-") {
        if argv.len() < 2 || matches!(argv[1].as_str(), "-h" | "--help") {
            eprintln!(
                "usage: clemu-slurm up [--nodes N --cpus C ...] | down | COMMAND ARGS \
                 (COMMAND: {})",
                up::COMMANDS.join(", ")
            );
            return ExitCode::from(if argv.len() < 2 { 2 } else { 0 });
        }
        argv.remove(0);
        argv[0].clone()
    } else {
        name
    };
    text::set_command(&name);
    // As Slurm's commands: `--version`, `-V` (and `scontrol version`)
    // say the release they answer as, which tools read to know what
    // output to expect.
    let version = match argv.get(1).map(String::as_str) {
        Some("--version" | "-V") => true,
        Some("version") => name == "scontrol",
        _ => false,
    };
    if version && up::COMMANDS.contains(&name.as_str()) {
        println!("slurm {}", text::RELEASE);
        return ExitCode::SUCCESS;
    }
    let sync = |r: anyhow::Result<u8>| match r {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("clemu-slurm {name}: error: {e:#}");
            ExitCode::FAILURE
        }
    };
    match name.as_str() {
        "up" => sync(up::up(&argv)),
        "down" => sync(up::down(&argv)),
        "sbatch" => cluster::run("sbatch", sbatch::main(argv)),
        "squeue" => cluster::run("squeue", squeue::main(argv)),
        "scancel" => cluster::run("scancel", scancel::main(argv)),
        "sacct" => cluster::run("sacct", sacct::main(argv)),
        "sinfo" => cluster::run("sinfo", sinfo::main(argv)),
        "scontrol" => cluster::run("scontrol", scontrol::main(argv)),
        // These three need no runtime: srun asks the controller its own
        // way, and the accounts are the same on every cluster.
        "srun" => local("srun", srun::main(&argv)),
        "sacctmgr" => local("sacctmgr", accounts::sacctmgr(&argv)),
        "sshare" => local("sshare", accounts::sshare(&argv)),
        absent if up::ABSENT.contains(&absent) => {
            eprintln!(
                "{absent}: error: clemu does not provide {absent}; its Slurm commands are {}",
                up::COMMANDS.join(", ")
            );
            ExitCode::FAILURE
        }
        other => {
            eprintln!("clemu-slurm: no command {other:?}");
            ExitCode::from(2)
        }
    }
}

/// A command's end, its error said as Slurm's commands say theirs.
fn local(name: &str, r: anyhow::Result<u8>) -> ExitCode {
    match r {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_command_line_is_well_formed() {
        crate::sbatch::Args::command().debug_assert();
        crate::squeue::Args::command().debug_assert();
        crate::scancel::Args::command().debug_assert();
        crate::sacct::Args::command().debug_assert();
        crate::sinfo::Args::command().debug_assert();
        crate::scontrol::Args::command().debug_assert();
        crate::srun::Args::command().debug_assert();
        crate::accounts::ShareArgs::command().debug_assert();
        crate::up::UpArgs::command().debug_assert();
        crate::up::DownArgs::command().debug_assert();
    }

    #[test]
    fn long_options_may_be_shortened_as_slurms_getopt_allows() {
        use clap::Parser;
        let a = crate::sacct::Args::try_parse_from(["sacct", "--job", "3", "--noheader"]);
        assert!(a.is_ok(), "{a:?}");
    }
}
