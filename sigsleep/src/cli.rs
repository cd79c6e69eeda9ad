//! sigsleep's command line: what the launcher typed, turned into a checked
//! [`Config`]. Hand-rolled over `lexopt` to keep the binary small.

use std::ffi::OsString;
use std::path::PathBuf;

pub const HELP: &str = "\
sigsleep: play one job of an emulated cluster.

Sleeps for the job's run time, counting only time during which it was not
suspended, then appends one job record to the log and exits.

USAGE:
    sigsleep --runtime SECONDS --log PATH [OPTIONS]

OPTIONS:
    --runtime SECONDS     unsuspended time to sleep (decimal seconds, e.g. 12.5)
    --log PATH            file to append the record to (or env SIGSLEEP_LOG)
    --id N                job id written in the record [default: 0]
    --cores N             cores allocated to the job [default: 1]
    --walltime SECONDS    wall-time limit; reaching it ends the job with status
                          timeout [default: 0, no limit]
    --submit UNIX_SECONDS when the job was submitted [default: the start,
                          flagged submit_unknown]
    --node NAME           first node of the job [default: this host's name]
    --devices LIST        devices of generic resources the job holds, written
                          in the record: NODE:KIND=ID[,ID...] entries joined
                          by ';' (vn01:gpu=0,1;vn02:gpu=0,1); given more than
                          once, the lists add up, in order
    --die-with-parent PID end (SIGKILL, no record) when the launcher PID dies;
                          if it is already gone, exit 1 at once
    --ready-file PATH     once every signal counts, write this process's pid
                          to PATH (atomically: it appears whole); removed
                          when the job ends. For launchers that cannot block
                          the job signals, such as a shell (see SIGNALS)
    --held                start held: count nothing until the first SIGCONT,
                          which is the job's start (a SIGTSTP first starts
                          it suspended); SIGTERM or SIGINT before it end the
                          process without a record. Until then the process
                          is named sigsleep-held (ps, /proc). A launcher
                          starts the process ahead of the job's start, so
                          the start is a signal, not a process to spawn
    --realtime            wait under real-time scheduling (SCHED_FIFO, the
                          lowest priority) once set up, where the host allows
                          it (root, or CAP_SYS_NICE; else as any process): the
                          job then wakes at its deadline and at its signals
                          whatever else the host runs, and spends no CPU
                          meanwhile
    -h, --help            print this help
    -V, --version         print the version

SIGNALS:
    SIGTSTP   suspend: the instant is recorded and the signal's default action
              stops the process. Time stopped does not count as run time. (In
              an orphaned process group the kernel ignores that action: the
              job is then suspended without being stopped, until SIGCONT.)
    SIGCONT   resume: the instant is recorded and the remaining sleep is
              recomputed from an absolute deadline. A SIGCONT with no SIGTSTP
              before it means a bare SIGSTOP stopped the job unseen: the
              record is flagged bare_stop and the stop is taken to start as
              late as possible, so no suspended time is claimed unless the
              deadline passed while it was stopped (a lower bound).
    SIGSTOP   after a SIGTSTP (Slurm sends SIGTSTP, then SIGSTOP 2 s later)
              it changes nothing: TSTP, STOP, CONT is one suspension.
    SIGTERM, SIGINT
              end the job now with status cancelled; a suspended job ends
              when it is continued (send SIGCONT after the signal).
    Launchers should start sigsleep with these four signals blocked: it
    installs its handlers first, then lets them in, so a suspension that
    arrives right after launch is still accounted. A shell cannot block
    them: a SIGTSTP it sends before sigsleep has started (in the first
    instants after `sigsleep ... &`) stops the process before sigsleep
    exists to see it, and the job then starts late with no suspension. From
    a shell, wait for --ready-file first:
        sigsleep --runtime 10 --log jobs.rec --ready-file job.ready &
        until [ -e job.ready ]; do sleep 0.01; done
        kill -TSTP $!; sleep 3; kill -CONT $!; wait
    A SIGCONT sent at any time after a SIGTSTP resumes the job, however
    close behind it comes. A SIGINT that the launcher left ignored stays
    ignored.

RECORD:
    One frame (magic, version, length, CRC-32, bincode payload) appended with
    a single write(2) on an O_APPEND file, so any number of jobs can share a
    log. Read it with `calcmets dump`.

EXIT STATUS:
    0     completed: slept the full run time
    1     the log could not be opened or the record not written, the
          --ready-file could not be written, or the launcher of
          --die-with-parent was already gone
    2     usage error (bad or missing flags), or the signal handlers could
          not be installed
    124   timeout: the wall-time limit was reached first
    130   cancelled by SIGINT
    143   cancelled by SIGTERM
";

/// A checked command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub runtime_ns: u64,
    pub walltime_ns: u64,
    pub id: u64,
    pub cores: u32,
    pub submit_ns: Option<i64>,
    pub node: Option<String>,
    /// Devices of generic resources the job holds, for its record.
    pub devices: Vec<formats::record::Devices<'static>>,
    pub log: PathBuf,
    /// The launcher whose death ends this job.
    pub parent: Option<u32>,
    /// Written (this process's pid) once every signal counts; removed at
    /// the end.
    pub ready_file: Option<PathBuf>,
    /// Held until the first SIGCONT, which starts the job.
    pub held: bool,
    /// Waits under SCHED_FIFO, where allowed.
    pub realtime: bool,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Config),
    Help,
    Version,
}

/// Parses `args` (the program name first, as from `std::env::args_os`).
/// `env_log` is `SIGSLEEP_LOG`, used when `--log` is absent.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    env_log: Option<OsString>,
) -> Result<Parsed, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_iter(args);
    let mut runtime = None;
    let mut walltime = 0;
    let mut id = 0;
    let mut cores = 1;
    let mut submit = None;
    let mut node = None;
    let mut devices = Vec::new();
    let mut log = None;
    let mut parent = None;
    let mut ready_file = None;
    let mut held = false;
    let mut realtime = false;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("runtime") => runtime = Some(seconds("--runtime", &text(&mut p)?)?),
            Long("walltime") => walltime = seconds("--walltime", &text(&mut p)?)?,
            Long("id") => id = number("--id", &text(&mut p)?)?,
            Long("cores") => {
                cores = number("--cores", &text(&mut p)?)?;
                if cores == 0 {
                    return Err("--cores must be at least 1".into());
                }
            }
            Long("submit") => submit = Some(instant("--submit", &text(&mut p)?)?),
            Long("node") => node = Some(text(&mut p)?),
            Long("devices") => devices.extend(
                formats::record::Devices::parse_list(&text(&mut p)?)
                    .map_err(|e| format!("--devices: {e}"))?,
            ),
            Long("die-with-parent") => parent = Some(number("--die-with-parent", &text(&mut p)?)?),
            Long("log") => log = Some(PathBuf::from(p.value().map_err(|e| e.to_string())?)),
            Long("ready-file") => {
                ready_file = Some(PathBuf::from(p.value().map_err(|e| e.to_string())?));
            }
            Long("held") => held = true,
            Long("realtime") => realtime = true,
            Short('h') | Long("help") => return Ok(Parsed::Help),
            Short('V') | Long("version") => return Ok(Parsed::Version),
            other => return Err(other.unexpected().to_string()),
        }
    }
    let runtime_ns = runtime.ok_or("--runtime SECONDS is required")?;
    let log = log
        .or_else(|| env_log.filter(|v| !v.is_empty()).map(PathBuf::from))
        .ok_or("--log PATH (or SIGSLEEP_LOG) is required")?;
    Ok(Parsed::Run(Config {
        runtime_ns,
        walltime_ns: walltime,
        id,
        cores,
        submit_ns: submit,
        node,
        devices,
        log,
        parent,
        ready_file,
        held,
        realtime,
    }))
}

fn text(p: &mut lexopt::Parser) -> Result<String, String> {
    p.value()
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|v| format!("not valid UTF-8: {v:?}"))
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: expected a non-negative integer, got {v:?}"))
}

/// Decimal seconds (non-negative) as nanoseconds.
fn seconds(flag: &str, v: &str) -> Result<u64, String> {
    formats::seconds::duration_ns(v).map_err(|e| format!("{flag}: {e}"))
}

/// Decimal seconds since the Unix epoch as nanoseconds.
fn instant(flag: &str, v: &str) -> Result<i64, String> {
    formats::seconds::parse_ns(v)
        .ok_or_else(|| format!("{flag}: expected Unix time in seconds, got {v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Parsed, String> {
        parse(
            std::iter::once("sigsleep")
                .chain(args.iter().copied())
                .map(OsString::from),
            None,
        )
    }

    #[test]
    fn full_command_line() {
        let p = run(&[
            "--runtime",
            "1.5",
            "--id",
            "42",
            "--cores",
            "16",
            "--walltime",
            "60",
            "--submit",
            "1700000000.25",
            "--node",
            "vn0001",
            "--devices",
            "vn0001:gpu=0,1",
            "--log",
            "/tmp/x",
        ])
        .unwrap();
        assert_eq!(
            p,
            Parsed::Run(Config {
                runtime_ns: 1_500_000_000,
                walltime_ns: 60_000_000_000,
                id: 42,
                cores: 16,
                submit_ns: Some(1_700_000_000_250_000_000),
                node: Some("vn0001".into()),
                devices: formats::record::Devices::parse_list("vn0001:gpu=0,1").unwrap(),
                log: "/tmp/x".into(),
                parent: None,
                ready_file: None,
                held: false,
                realtime: false,
            })
        );
    }

    #[test]
    fn repeated_device_lists_add_up_in_order() {
        let Ok(Parsed::Run(c)) = run(&[
            "--runtime",
            "1",
            "--log",
            "x",
            "--devices",
            "vn1:gpu=0;vn2:gpu=1",
            "--devices",
            "vn3:gpu=0,1",
        ]) else {
            panic!("did not parse");
        };
        let list = formats::record::Devices::parse_list("vn1:gpu=0;vn2:gpu=1;vn3:gpu=0,1");
        assert_eq!(c.devices, list.unwrap());
    }

    #[test]
    fn log_from_environment() {
        let p = parse(
            ["sigsleep", "--runtime", "0"].map(OsString::from),
            Some("/tmp/env.log".into()),
        )
        .unwrap();
        match p {
            Parsed::Run(c) => assert_eq!(c.log, PathBuf::from("/tmp/env.log")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_input_is_refused_with_the_flag_named() {
        for (args, needle) in [
            (&["--log", "x"][..], "--runtime"),
            (&["--runtime", "1"][..], "--log"),
            (&["--runtime", "-1", "--log", "x"][..], "--runtime"),
            (&["--runtime", "NaN", "--log", "x"][..], "--runtime"),
            (
                &["--runtime", "1", "--log", "x", "--cores", "0"][..],
                "--cores",
            ),
            (&["--runtime", "1", "--log", "x", "--id", "-3"][..], "--id"),
            (&["--runtime", "1", "--log", "x", "--bogus"][..], "--bogus"),
            (
                &["--runtime", "1", "--log", "x", "--devices", "vn1:gpu"][..],
                "--devices",
            ),
            (&["--runtime"][..], "--runtime"),
        ] {
            let err = run(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
