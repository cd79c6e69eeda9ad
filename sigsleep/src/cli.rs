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
    sigsleep --log PATH [OPTIONS] [PROGRAM OPTIONS] -- PROGRAM [ARGS...]

With a PROGRAM, sigsleep runs it as the job instead of sleeping, and
supervises it: the job ends when PROGRAM ends, or at the wall-time limit, or
on SIGTERM/SIGINT; then every process PROGRAM left (children, daemons that
left its process group, processes that ignore SIGTERM) is killed and reaped
(sigsleep is their subreaper). The record's status says how the job ended:
completed (PROGRAM exited 0), failed (any other exit, or it could not be
started), cancelled or timeout; sigsleep's exit status carries PROGRAM's.

OPTIONS:
    --runtime SECONDS     unsuspended time to sleep (decimal seconds, e.g. 12.5)
    --log PATH            file to append the record to (or env SIGSLEEP_LOG)
    --id N                job id written in the record [default: 0]
    --cores N             cores allocated to the job [default: 1]
    --walltime SECONDS    wall-time limit; reaching it ends the job with status
                          timeout [default: 0, no limit]
    --submit UNIX_SECONDS when the job was submitted [default: the start,
                          flagged submit_unknown]
    --started UNIX_SECONDS
                          when the job started, by its launcher's clock: its
                          run counts from there, as a batch system counts a
                          job's run from its start, and its record says it
                          started then [default: this process's first
                          instant; never later than it, nor, without a
                          PROGRAM, earlier than its run time before it: the
                          rest of a launch that long counts as waiting]. With --held, the
                          SIGCONT that starts the job may carry it instead
    --node NAME           first node of the job [default: this host's name]
    --devices LIST        devices of generic resources the job holds, written
                          in the record: NODE:KIND=ID[,ID...] entries joined
                          by ';' (vn01:gpu=0,1;vn02:gpu=0,1); given more than
                          once, the lists add up, in order
    --die-with-parent PID end (SIGKILL, no record) when the launcher PID dies
                          (with a PROGRAM: as on SIGTERM, so that nothing of
                          it is left); if it is already gone, exit 1 at once
    --ready-file PATH     once every signal counts, write this process's pid
                          to PATH (atomically: it appears whole); removed
                          when the job ends. For launchers that cannot block
                          the job signals, such as a shell (see SIGNALS)
    --end-fd FD           once the record is written, tell the launcher
                          that the job ended: one message (pid, exit status,
                          when) written to FD, a socket the launcher reads, so
                          that it need not wait for this process to be torn
                          down and reaped. FD is kept from PROGRAM
    --held                start held: count nothing until the first SIGCONT,
                          which is the job's start (a SIGTSTP first starts
                          it suspended); SIGTERM or SIGINT before it end the
                          process without a record. Until then the process
                          is named sigsleep-held (ps, /proc). A SIGCONT
                          queued (sigqueue) with a value carries the job's
                          start, in wall-clock ns, as --started does. A launcher
                          starts the process ahead of the job's start, so
                          the start is a signal, not a process to spawn
PROGRAM OPTIONS (with a PROGRAM only):
    --chdir DIR           run PROGRAM in DIR
    --stdout PATH         PROGRAM's standard output, truncated first
                          [default: sigsleep's own]
    --stderr PATH         PROGRAM's standard error [default: --stdout's file]
    --signal [B:]SIG[@SECONDS]
                          send SIG (TERM, USR1, 10...) SECONDS [default: 60]
                          before the wall-time limit, to every process of the
                          job (B: to PROGRAM alone), as Slurm's --signal
    --kill-wait SECONDS   between SIGTERM and SIGKILL when the job is
                          cancelled or reaches its limit [default: 30]
    --suspend-grace SECONDS
                          after a SIGTSTP, the job's processes get SIGSTOP
                          this much later, as Slurm does [default: 2]
    --exit-file PATH      at the end, write how the job ended to PATH, one
                          line: STATE CODE SIGNAL (STATE: completed, failed,
                          cancelled, timeout or out_of_memory), for a
                          launcher that needs more than an exit status
    --mem-limit MIB       memory the job's processes may hold together,
                          sampled every second: beyond it, the largest of
                          them is killed (SIGKILL) as an out-of-memory
                          killer would, the job goes on, and it ends
                          out_of_memory (its record: failed, flagged)
    --open-append         add to the output files rather than empty them
                          first (Slurm's --open-mode=append)
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
    log. Read it with `calcmets dump`. A sleep that counted its time ends,
    in its record, when it was due, however late the host woke it.

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
    With a PROGRAM: 0 completed, 124 timeout, 128+N cancelled by signal N;
    otherwise PROGRAM's own exit code (128+N if signal N ended it; 126 if
    it could not be started, 127 if it was not found).
";

/// A checked command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub runtime_ns: u64,
    pub walltime_ns: u64,
    pub id: u64,
    pub cores: u32,
    pub submit_ns: Option<i64>,
    /// `--started`: the job's start by its launcher's clock.
    pub started_ns: Option<i64>,
    pub node: Option<String>,
    /// Devices of generic resources the job holds, for its record.
    pub devices: Vec<formats::record::Devices<'static>>,
    pub log: PathBuf,
    /// The launcher whose death ends this job.
    pub parent: Option<u32>,
    /// Written (this process's pid) once every signal counts; removed at
    /// the end.
    pub ready_file: Option<PathBuf>,
    /// `--end-fd`: where to say that the job ended ([`crate::end`]).
    pub end_fd: Option<i32>,
    /// Held until the first SIGCONT, which starts the job.
    pub held: bool,
    /// Waits under SCHED_FIFO, where allowed.
    pub realtime: bool,
    /// The program to run as the job, instead of sleeping.
    pub program: Option<Box<Program>>,
}

/// A program run as the job ([`crate::supervise`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    pub chdir: Option<PathBuf>,
    pub stdout: Option<PathBuf>,
    pub stderr: Option<PathBuf>,
    /// `--signal`: which signal, how long before the limit (ns), and
    /// whether to the program alone.
    pub signal: Option<Warning>,
    pub kill_wait_ns: u64,
    pub suspend_grace_ns: u64,
    pub exit_file: Option<PathBuf>,
    /// `--mem-limit`, in KiB: what its processes may hold together.
    pub mem_limit_kib: Option<u64>,
    /// `--open-append`: its output files are added to, not emptied.
    pub append: bool,
}

/// `--signal [B:]SIG[@SECONDS]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Warning {
    pub signal: i32,
    pub before_ns: u64,
    /// `B:`: to the program alone, not every process of the job.
    pub program_only: bool,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Config),
    Help,
    Version,
    /// `--source-id` (not in the help: for the agent): [`crate::SOURCE_ID`].
    SourceId,
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
    let mut started = None;
    let mut node = None;
    let mut devices = Vec::new();
    let mut log = None;
    let mut parent = None;
    let mut ready_file = None;
    let mut end_fd = None;
    let mut held = false;
    let mut realtime = false;
    let mut argv: Vec<OsString> = Vec::new();
    let mut chdir = None;
    let mut stdout = None;
    let mut stderr = None;
    let mut warning = None;
    let mut kill_wait = 30_000_000_000;
    let mut suspend_grace = 2_000_000_000;
    let mut program_flag = None;
    let mut exit_file = None;
    let mut mem_limit = None;
    let mut append = false;
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
            Long("started") => started = Some(instant("--started", &text(&mut p)?)?),
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
            Long("end-fd") => {
                let fd: u16 = number("--end-fd", &text(&mut p)?)?;
                end_fd = Some(i32::from(fd));
            }
            Long("held") => held = true,
            Long("realtime") => realtime = true,
            Long(f @ ("chdir" | "stdout" | "stderr")) => {
                let f = f.to_string();
                let v = PathBuf::from(p.value().map_err(|e| e.to_string())?);
                match f.as_str() {
                    "chdir" => chdir = Some(v),
                    "stdout" => stdout = Some(v),
                    _ => stderr = Some(v),
                }
                program_flag = Some(f);
            }
            Long("exit-file") => {
                exit_file = Some(PathBuf::from(p.value().map_err(|e| e.to_string())?));
                program_flag = Some("exit-file".into());
            }
            Long("signal") => {
                warning = Some(signal_spec(&text(&mut p)?)?);
                program_flag = Some("signal".into());
            }
            Long("mem-limit") => {
                let mib: u64 = number("--mem-limit", &text(&mut p)?)?;
                if mib == 0 {
                    return Err("--mem-limit must be at least 1".into());
                }
                mem_limit = Some(mib.saturating_mul(1024));
                program_flag = Some("mem-limit".into());
            }
            Long("open-append") => {
                append = true;
                program_flag = Some("open-append".into());
            }
            Long("kill-wait") => {
                kill_wait = seconds("--kill-wait", &text(&mut p)?)?;
                program_flag = Some("kill-wait".into());
            }
            Long("suspend-grace") => {
                suspend_grace = seconds("--suspend-grace", &text(&mut p)?)?;
                program_flag = Some("suspend-grace".into());
            }
            Value(v) => {
                argv.push(v);
                argv.extend(p.raw_args().map_err(|e| e.to_string())?);
            }
            Short('h') | Long("help") => return Ok(Parsed::Help),
            Short('V') | Long("version") => return Ok(Parsed::Version),
            Long("source-id") => return Ok(Parsed::SourceId),
            other => return Err(other.unexpected().to_string()),
        }
    }
    let program = if argv.is_empty() {
        if let Some(f) = program_flag {
            return Err(format!("--{f} needs a PROGRAM (after --)"));
        }
        None
    } else {
        if runtime.is_some() {
            return Err("--runtime is for a job that sleeps; a PROGRAM runs until it ends".into());
        }
        Some(Box::new(Program {
            argv,
            chdir,
            stdout,
            stderr,
            signal: warning,
            kill_wait_ns: kill_wait,
            suspend_grace_ns: suspend_grace,
            exit_file,
            mem_limit_kib: mem_limit,
            append,
        }))
    };
    // A program's run time is its own: only the wall-time limit bounds it.
    let runtime_ns = match &program {
        Some(_) => u64::MAX,
        None => runtime.ok_or("--runtime SECONDS is required")?,
    };
    let log = log
        .or_else(|| env_log.filter(|v| !v.is_empty()).map(PathBuf::from))
        .ok_or("--log PATH (or SIGSLEEP_LOG) is required")?;
    Ok(Parsed::Run(Config {
        runtime_ns,
        walltime_ns: walltime,
        id,
        cores,
        submit_ns: submit,
        started_ns: started,
        node,
        devices,
        log,
        parent,
        ready_file,
        end_fd,
        held,
        realtime,
        program,
    }))
}

/// `[B:]SIG[@SECONDS]`: SIG by name (TERM, SIGUSR1) or number; SECONDS
/// defaults to 60, as Slurm's.
fn signal_spec(v: &str) -> Result<Warning, String> {
    let (program_only, rest) = match v.strip_prefix("B:") {
        Some(r) => (true, r),
        None => (false, v),
    };
    let (sig, at) = match rest.split_once('@') {
        Some((s, t)) => (s, Some(t)),
        None => (rest, None),
    };
    let signal = signal_number(sig).ok_or_else(|| {
        format!("--signal: unknown signal {sig:?} (a name such as USR1, or a number)")
    })?;
    let before_ns = match at {
        Some(t) => seconds("--signal", t)?,
        None => 60_000_000_000,
    };
    Ok(Warning {
        signal,
        before_ns,
        program_only,
    })
}

/// A signal's number from its name (with or without SIG) or number.
pub fn signal_number(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "ABRT" => libc::SIGABRT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "PIPE" => libc::SIGPIPE,
        "ALRM" => libc::SIGALRM,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        "TSTP" => libc::SIGTSTP,
        "URG" => libc::SIGURG,
        "XCPU" => libc::SIGXCPU,
        "XFSZ" => libc::SIGXFSZ,
        "WINCH" => libc::SIGWINCH,
        _ => return None,
    })
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
            "--started",
            "1700000001.5",
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
                started_ns: Some(1_700_000_001_500_000_000),
                node: Some("vn0001".into()),
                devices: formats::record::Devices::parse_list("vn0001:gpu=0,1").unwrap(),
                log: "/tmp/x".into(),
                parent: None,
                ready_file: None,
                end_fd: None,
                held: false,
                realtime: false,
                program: None,
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
