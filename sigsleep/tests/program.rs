//! A program as the job (`sigsleep ... -- PROGRAM`): run where it was
//! asked, its output where it was asked, its exit kept in the record;
//! suspended and resumed whole, children and daemons included; ended at
//! its limit or on cancel; and nothing of it left once the job is over.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::path::Path;
use std::process::Child;

use formats::record::{ProgramEnd, Status};

/// Signals the job's process group, as the agent does.
fn signal_group(child: &Child, sig: libc::c_int) {
    // SAFETY: plain killpg(2) on our own child's group.
    let rc = unsafe { libc::killpg(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "killpg({}, {sig})", child.id());
}

fn alive(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    !stat[stat.rfind(')').unwrap() + 2..].starts_with('Z')
}

fn proc_state(pid: &str) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

/// Waits (up to 10 s) until `path` has `n` lines; returns them.
fn lines(path: &Path, n: usize) -> Vec<String> {
    for _ in 0..1000 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n {
            return text.lines().map(String::from).collect();
        }
        sleep_ms(10);
    }
    panic!("{} never had {n} lines", path.display());
}

/// sigsleep with `flags`, running `script` in sh, its output in `out`.
fn job(dir: &Path, flags: &[&str], script: &str) -> std::process::Command {
    let mut cmd = sigsleep();
    cmd.args(flags)
        .args(["--id", "9", "--log"])
        .arg(dir.join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.join("out"))
        .args(["--", "/bin/sh", "-c", script]);
    cmd
}

#[test]
fn a_program_runs_in_its_directory_and_its_exit_code_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut cmd = sigsleep();
    cmd.args(["--id", "4", "--cores", "2", "--log"])
        .arg(dir.path().join("jobs.rec"))
        .arg("--chdir")
        .arg(&work)
        .arg("--stdout")
        .arg(dir.path().join("out"))
        .arg("--stderr")
        .arg(dir.path().join("err"))
        .arg("--exit-file")
        .arg(dir.path().join("exit"))
        .args(["--", "/bin/sh", "-c", "pwd; echo to-err >&2; exit 3"]);
    let mut child = launch(cmd);
    assert_eq!(child.wait().unwrap().code(), Some(3));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert_eq!(out.trim(), work.to_str().unwrap());
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    assert_eq!(err, "to-err\n");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!((rec.id, rec.cores, rec.status), (4, 2, Status::Failed));
    let end = rec.program.unwrap();
    assert_eq!((end.kind, end.value), (ProgramEnd::EXITED, 3));
    assert_eq!(end.exit_code(), "3:0");
    let exit = std::fs::read_to_string(dir.path().join("exit")).unwrap();
    assert_eq!(exit, "failed 3 0\n");
}

#[test]
fn a_program_that_exits_0_completes_with_both_outputs_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    // Some CPU time to account.
    let script = "echo one; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo two >&2";
    let mut child = launch(job(dir.path(), &[], script));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert_eq!(out, "one\ntwo\n");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Completed);
    let end = rec.program.unwrap();
    assert_eq!(end.exit_code(), "0:0");
    assert!(end.cpu_ns > 0 && end.max_rss_kib > 0, "{end:?}");
}

#[test]
fn a_program_that_cannot_run_fails_with_127() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = sigsleep();
    cmd.arg("--log")
        .arg(dir.path().join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.path().join("out"))
        .args(["--", "/nonexistent/program"]);
    let mut child = launch(cmd);
    assert_eq!(child.wait().unwrap().code(), Some(127));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert!(out.contains("cannot run /nonexistent/program"), "{out}");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Failed);
    let end = rec.program.unwrap();
    assert_eq!((end.kind, end.value), (ProgramEnd::NOT_STARTED, 127));
}

/// An output that cannot be opened: the program never runs, and the exit
/// file says the launch failure as Slurm's job shows it (0:53).
#[test]
fn a_program_whose_output_cannot_be_opened_never_runs_and_says_so_as_slurm() {
    let dir = tempfile::tempdir().unwrap();
    let (ran, exit) = (dir.path().join("ran"), dir.path().join("exit"));
    let mut cmd = sigsleep();
    cmd.arg("--log")
        .arg(dir.path().join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.path().join("missing/out"))
        .arg("--exit-file")
        .arg(&exit)
        .args(["--", "/bin/touch"])
        .arg(&ran);
    let mut child = launch(cmd);
    assert_eq!(child.wait().unwrap().code(), Some(126));
    assert!(!ran.exists(), "the program ran");
    assert_eq!(std::fs::read_to_string(&exit).unwrap(), "failed 0 53\n");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Failed);
    let end = rec.program.unwrap();
    // Never launched, for want of its directory (ENOENT).
    assert_eq!(
        (end.kind, end.value),
        (ProgramEnd::NOT_LAUNCHED, libc::ENOENT)
    );
    assert_eq!(end.exit_code(), "0:53");
}

/// A child, a daemon that left the group, and a process that ignores
/// SIGTERM, all left running when the program exits: none survives the
/// job.
#[test]
fn nothing_of_a_program_outlives_its_job() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "sleep 300 & echo $! >> {p}\n\
         setsid sh -c 'sleep 300 & echo $! >> {p}; wait' &\n\
         sh -c 'trap \"\" TERM; echo $$ >> {p}; while :; do sleep 1; done' &\n\
         while [ $(wc -l < {p}) -lt 3 ]; do sleep 0.01; done\n\
         exit 0",
        p = pids.display()
    );
    let mut child = launch(job(dir.path(), &[], &script));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let left: Vec<String> = lines(&pids, 3).into_iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(status(dir.path()), Status::Completed);
}

/// The status in the job's record.
fn status(dir: &Path) -> Status {
    only_record(&dir.join("jobs.rec")).status
}

#[test]
fn a_cancel_ends_every_process_even_one_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "setsid sh -c 'trap \"\" TERM; echo $$ >> {p}; while :; do sleep 1; done' &\n\
         trap '' TERM; echo $$ >> {p}; while :; do sleep 1; done",
        p = pids.display()
    );
    let mut child = launch(job(dir.path(), &["--kill-wait", "0.3"], &script));
    let seen = lines(&pids, 2);
    signal_group(&child, libc::SIGTERM);
    assert_eq!(child.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    let left: Vec<&String> = seen.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(status(dir.path()), Status::Cancelled);
}

/// A script run from its file, as the agent runs a batch script, starts
/// with no signal blocked: it hears the cancel's SIGTERM and may end on
/// its own before the kill wait (a checkpoint, as on Slurm).
#[test]
fn a_script_hears_sigterm_on_cancel_and_ends_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(
        &script,
        "#!/bin/sh\ntrap 'echo saved; exit 3' TERM\necho trapped\nsleep 30 &\nwait\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = sigsleep();
    cmd.args(["--id", "9", "--kill-wait", "20", "--log"])
        .arg(dir.path().join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.path().join("out"))
        .arg("--")
        .arg(&script);
    let mut child = launch(cmd);
    assert_eq!(lines(&dir.path().join("out"), 1), ["trapped"]);
    let asked = now_ns();
    signal_group(&child, libc::SIGTERM);
    assert_eq!(child.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    // Well before the 20 s kill wait: the trap ended it.
    assert!(now_ns() - asked < 10 * S, "it waited for the kill");
    // The trap's line and sigsleep's step line (the error file is the
    // output file here) in either order: the whole group was signalled,
    // so the script and sigsleep hear the cancel at once.
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out:?}");
    assert_eq!(lines[0], "trapped", "{out:?}");
    assert!(lines.contains(&"saved"), "{out:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("slurmstepd: error: *** JOB 9 ON ")
                && l.contains(" CANCELLED AT ")),
        "{out:?}"
    );
    assert_eq!(status(dir.path()), Status::Cancelled);
}

/// Whatever the launcher blocked, the program starts with no signal
/// blocked, as a process started by Slurm does.
#[test]
fn a_program_starts_with_no_signal_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = sigsleep();
    cmd.args(["--id", "9", "--log"])
        .arg(dir.path().join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.path().join("out"))
        .args(["--", "/bin/grep", "SigBlk", "/proc/self/status"]);
    assert_eq!(launch(cmd).wait().unwrap().code(), Some(0));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert_eq!(out, "SigBlk:\t0000000000000000\n");
}

#[test]
fn the_limit_warns_with_signal_then_ends_the_job_in_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--walltime",
        "1",
        "--signal",
        "USR1@0.5",
        "--kill-wait",
        "0.2",
    ];
    let script = "trap 'echo warned' USR1; trap 'echo term' TERM; while :; do sleep 0.05; done";
    let mut child = launch(job(dir.path(), &flags, script));
    assert_eq!(child.wait().unwrap().code(), Some(124));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    // Every process of the job got it (the shell's sleep too, which it
    // says), the warning first.
    let (warned, term) = (out.find("warned\n"), out.find("term\n"));
    assert!(warned.is_some() && warned < term, "{out:?}");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Timeout);
    // The limit, then at most the kill wait (the shell traps SIGTERM).
    let ran = rec.end - rec.start;
    assert!((S..=S + 200 * MS + DELIVERY).contains(&ran), "ran {ran} ns");
}

/// A suspension stops every process of the job, the daemon that left the
/// group too (after the grace, as Slurm does), and a resume continues
/// them; the record counts the suspension.
#[test]
fn a_suspension_stops_every_process_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "setsid sh -c 'echo $$ >> {p}; while :; do sleep 0.05; done' &\n\
         echo $$ >> {p}; i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done",
        p = pids.display()
    );
    let mut child = launch(job(dir.path(), &["--suspend-grace", "0.2"], &script));
    let seen = lines(&pids, 2);
    let suspended = now_ns();
    signal_group(&child, libc::SIGTSTP);
    // The supervisor goes on; every process of the job stops.
    for _ in 0..500 {
        if seen.iter().all(|p| proc_state(p) == 'T') {
            break;
        }
        sleep_ms(10);
    }
    for p in &seen {
        assert_eq!(proc_state(p), 'T', "process {p} of the job not stopped");
    }
    assert_ne!(state(&child), 'T', "the supervisor itself stopped");
    sleep_ms(500);
    let resumed = now_ns();
    signal_group(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(seen.iter().all(|p| !alive(p)), "left behind");
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.suspensions.len(), 1, "{rec:?}");
    assert_near(
        "suspended",
        rec.suspended_ns(),
        resumed - suspended,
        DELIVERY,
    );
}

/// A held process whose start and cancel come together (a job cancelled
/// the instant it started) never runs its program.
#[test]
fn a_program_cancelled_with_its_start_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let script = format!("touch {}", ran.display());
    let mut child = launch(job(dir.path(), &["--held"], &script));
    let comm = format!("/proc/{}/comm", child.id());
    for _ in 0..1000 {
        if std::fs::read_to_string(&comm).unwrap_or_default().trim() == "sigsleep-held" {
            break;
        }
        sleep_ms(10);
    }
    // Stopped, so that both signals are pending when it next runs.
    signal(&child, libc::SIGSTOP);
    wait_state(&child, 'T');
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGCONT);
    assert_eq!(child.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    assert!(!ran.exists(), "the program ran");
    assert_eq!(status(dir.path()), Status::Cancelled);
}

#[test]
fn a_job_over_its_memory_limit_loses_its_largest_process_and_ends_out_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let exit = dir.path().join("exit");
    let mut cmd = sigsleep();
    cmd.args(["--mem-limit", "64", "--id", "12", "--log"])
        .arg(dir.path().join("jobs.rec"))
        .arg("--stdout")
        .arg(dir.path().join("out"))
        .arg("--exit-file")
        .arg(&exit)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "python3 -c 'import time; b = bytearray(256 << 20); time.sleep(60)'; \
             echo after $?",
        ]);
    let started = std::time::Instant::now();
    let mut child = launch(cmd);
    child.wait().unwrap();
    assert!(started.elapsed().as_secs() < 30, "not killed");
    // The script went on after its largest process was killed.
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert!(out.contains("after 137\n"), "{out}");
    assert!(
        out.contains("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=12.batch."),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&exit).unwrap(),
        "out_of_memory 0 0\n"
    );
    let rec = only_record(&dir.path().join("jobs.rec"));
    assert_eq!(rec.status, Status::Failed);
    assert!(rec.flags.contains(formats::record::Flags::OUT_OF_MEMORY));
}
