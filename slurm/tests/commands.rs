//! Slurm's commands on a real emulated cluster: `clemu-slurm up` starts
//! it, and users' batch scripts run as real processes on its nodes, seen
//! through squeue, sacct, sinfo and scontrol as Slurm shows them.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Up {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl Up {
    fn start(nodes: u32, cpus: u32) -> Up {
        Up::start_with(nodes, cpus, &[])
    }

    /// `up` with more of its options.
    fn start_with(nodes: u32, cpus: u32, more: &[&str]) -> Up {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_clemu-slurm"))
            .args([
                "up",
                "--nodes",
                &nodes.to_string(),
                "--cpus",
                &cpus.to_string(),
            ])
            .args(more)
            .args(["--memory", "1000M", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The two lines to set, and nothing else on standard output.
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let conf = PathBuf::from(lines[0].strip_prefix("export CLEMU_CONF=").unwrap());
        assert_eq!(
            lines[1],
            format!(
                "export PATH={}/bin:$PATH",
                dir.path().canonicalize().unwrap().display()
            )
        );
        Up { dir, conf }
    }

    /// Runs Slurm's command `name` from the cluster's bin/, in `cwd`.
    fn run(&self, cwd: &Path, name: &str, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_with(cwd, name, args, stdin, &[])
    }

    /// As [`Up::run`], with variables `env` set too.
    fn run_with(
        &self,
        cwd: &Path,
        name: &str,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> Output {
        use std::io::Write;
        let mut cmd = Command::new(self.dir.path().join("bin").join(name));
        // As the two lines `up` prints set it: the cluster's bin/ first
        // (a job's script finds srun there too).
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.args(args)
            .current_dir(cwd)
            .env("CLEMU_CONF", &self.conf)
            .env("PATH", path)
            // Dates in the standard form unless a test asks otherwise.
            .env_remove("SLURM_TIME_FORMAT")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// As [`Up::run`], left running, its outputs piped.
    fn spawn(&self, cwd: &Path, name: &str, args: &[&str]) -> std::process::Child {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new(self.dir.path().join("bin").join(name))
            .args(args)
            .current_dir(cwd)
            .env("CLEMU_CONF", &self.conf)
            .env("PATH", path)
            .env_remove("SLURM_TIME_FORMAT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `sbatch ARGS` in `cwd`, which must succeed: what it printed,
    /// trimmed (the id, with `--parsable`).
    fn sbatch(&self, cwd: &Path, args: &[&str]) -> String {
        self.ok(cwd, "sbatch", args).trim().to_string()
    }

    fn ok(&self, cwd: &Path, name: &str, args: &[&str]) -> String {
        let out = self.run(cwd, name, args, None);
        assert!(
            out.status.success(),
            "{name} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The job's `State` and `ExitCode` once it is over.
    fn wait_over(&self, cwd: &Path, id: &str) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let line = self.ok(
                cwd,
                "sacct",
                &["-X", "-P", "-n", "-j", id, "--format", "State,ExitCode"],
            );
            let line = line.trim().to_string();
            if !line.is_empty() && !line.starts_with("PENDING") && !line.starts_with("RUNNING") {
                return line;
            }
            assert!(Instant::now() < until, "job {id} not over: {line}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_clemu-slurm"))
            .args(["down", "--dir"])
            .arg(self.dir.path())
            .output();
    }
}

#[test]
fn batch_scripts_run_with_slurms_variables_and_are_accounted_as_slurm_does() {
    let c = Up::start(4, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let script = "#!/bin/sh\n#SBATCH -J fit\n#SBATCH -o out-%j.txt\n#SBATCH -n 2\n\
                  echo \"$SLURM_JOB_ID $SLURM_JOB_NAME $SLURM_NTASKS $SLURM_JOB_PARTITION $(pwd)\"\n\
                  echo \"$#:$1:$2\"\n\
                  echo \"$SLURM_JOB_UID:$SLURM_JOB_GID:$SLURM_SUBMIT_HOST\"\n\
                  echo \"$SLURM_JOB_ACCOUNT:$SLURM_JOB_QOS:$SLURM_TOPOLOGY_ADDR_PATTERN\"\n";
    std::fs::write(w.join("fit.sh"), script).unwrap();
    // What follows the script is its arguments, options included.
    let out = c.ok(w, "sbatch", &["fit.sh", "-n", "two words"]);
    let id = out
        .strip_prefix("Submitted batch job ")
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(c.wait_over(w, &id), "COMPLETED|0:0");
    let written = std::fs::read_to_string(w.join(format!("out-{id}.txt"))).unwrap();
    let me = format!(
        "{}:{}:{}",
        nix::unistd::getuid(),
        nix::unistd::getgid(),
        nix::unistd::gethostname().unwrap().to_string_lossy()
    );
    assert_eq!(
        written,
        // Charged to the one account of the cluster's users, as a Slurm
        // with accounting says.
        format!(
            "{id} fit 2 batch {}\n2:-n:two words\n{me}\nroot:normal:node\n",
            w.display()
        )
    );
    // Its command is its script's path, as scontrol and squeue show it:
    // a bare name made absolute, a path with a slash as given, as Slurm's.
    let shown = c.ok(w, "scontrol", &["show", "job", &id]);
    assert!(
        shown.contains(&format!("\n   Command={}/fit.sh\n", w.display())),
        "{shown}"
    );
    let held = c.ok(w, "sbatch", &["--parsable", "-H", "./fit.sh"]);
    let held = held.trim();
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", held, "-o", "%o"]),
        "./fit.sh\n"
    );
    // Pending, it has no nodes: `NodeList=`, as Slurm's scontrol writes.
    let shown = c.ok(w, "scontrol", &["show", "job", held]);
    assert!(shown.contains(" NodeList=\n"), "{shown}");
    c.ok(w, "scancel", &[held]);

    // A script on standard input that fails: its code is the job's. Its
    // comment is the job's line's alone, as Slurm's database keeps it.
    let out = c.run(
        w,
        "sbatch",
        &["--parsable", "--comment", "rule_a"],
        Some("#!/bin/sh\nexit 3\n"),
    );
    let failed = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(failed.parse::<u64>().is_ok(), "{failed}");
    assert_eq!(c.wait_over(w, &failed), "FAILED|3:0");
    let steps = c.ok(
        w,
        "sacct",
        &[
            "-P",
            "-n",
            "-j",
            &failed,
            "--format",
            "JobID,JobName,State,ExitCode,Comment",
        ],
    );
    assert_eq!(
        steps,
        format!("{failed}|sbatch|FAILED|3:0|rule_a\n{failed}.batch|batch|FAILED|3:0|\n")
    );
    // afterok on it can never run, and says so; afternotok runs.
    let never = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("afterok:{failed}"),
            "--wrap",
            "true",
        ],
    );
    let notok = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("afternotok:{failed}"),
            "--wrap",
            "true",
        ],
    );
    assert_eq!(c.wait_over(w, &notok), "COMPLETED|0:0");
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &never, "-o", "%i %t %r"]),
        format!("{never} PD DependencyNeverSatisfied\n")
    );
    // What it waits for, as Slurm's %E and Dependency= say it.
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &never, "-o", "%E"]),
        format!("afterok:{failed}(failed)\n")
    );
    assert!(c
        .ok(w, "scontrol", &["show", "job", &never])
        .contains(&format!(" Dependency=afterok:{failed}(failed)\n")));
    assert_eq!(
        c.ok(w, "squeue", &["-t", "all", "-j", &notok, "-o", "%E"]),
        "DEPENDENCY\n(null)\n"
    );
    c.ok(w, "scancel", &[&never]);
    assert_eq!(c.wait_over(w, &never), "CANCELLED by 0|0:0");
    // A delay past a job's start (`+MINUTES`) is waited out, and shown
    // while it is; a job the controller does not know is left out, as
    // Slurm leaves it out; what is no dependency is Slurm's refusal.
    let later = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("after:{failed}+1:{failed}"),
            "--wrap",
            "true",
        ],
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &later, "-o", "%t %r %E"]),
        format!("PD Dependency after:{failed}+1(unfulfilled)\n")
    );
    c.ok(w, "scancel", &[&later]);
    let unknown = c.sbatch(w, &["--parsable", "-d", "afterok:999999", "--wrap", "true"]);
    assert_eq!(c.wait_over(w, &unknown), "COMPLETED|0:0");
    for bad in ["bogus:3", "afterok:abc", "after:1+x"] {
        let refused = c.run(w, "sbatch", &["-d", bad, "--wrap", "true"], None);
        assert_eq!(refused.status.code(), Some(1), "{bad}");
        assert_eq!(
            String::from_utf8_lossy(&refused.stderr),
            "sbatch: error: Batch job submission failed: Job dependency problem\n"
        );
    }
    // Held at submission: it waits until released.
    let held = c.sbatch(w, &["--parsable", "-H", "--wrap", "true"]);
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%i %t %R"]),
        format!("{held} PD (JobHeldUser)\n")
    );
    // Its limit changes while it waits.
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={held}"), "TimeLimit=1:30:00"],
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%l"]),
        "1:30:00\n"
    );
    let after = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("afterany:{held}"),
            "--wrap",
            "true",
        ],
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &after, "-O", "dependency:40"]),
        format!("{:40}\n", format!("afterany:{held}(unfulfilled)"))
    );
    // Kinds in the order asked, as Slurm keeps them; `aftercorr` as
    // asked, though it waits as each task's `afterok`.
    let ordered = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("afterok:{after}?afterany:{held}"),
            "--wrap",
            "true",
        ],
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &ordered, "-o", "%E"]),
        format!("afterok:{after}(unfulfilled)?afterany:{held}(unfulfilled)\n")
    );
    let array = c.sbatch(w, &["--parsable", "-H", "-a", "1-2", "--wrap", "true"]);
    let corr = c.sbatch(
        w,
        &[
            "--parsable",
            "-a",
            "1-2",
            "-d",
            &format!("aftercorr:{array}"),
            "--wrap",
            "true",
        ],
    );
    // A line each task: each is a record of its own, as on Slurm.
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &corr, "-o", "%E"]),
        format!("aftercorr:{array}_*(unfulfilled)\n").repeat(2)
    );
    c.ok(w, "scancel", &[&ordered, &array, &corr]);
    c.ok(w, "scontrol", &["release", &held]);
    assert_eq!(c.wait_over(w, &held), "COMPLETED|0:0");
    assert_eq!(c.wait_over(w, &after), "COMPLETED|0:0");
    let shown = c.ok(w, "scontrol", &["show", "job", &failed]);
    assert!(
        shown.contains("JobState=FAILED Reason=NonZeroExitCode"),
        "{shown}"
    );
    assert!(shown.contains("ExitCode=3:0"), "{shown}");

    // Steps: srun runs a task each with its own rank, numbers the steps,
    // writes a file per task where asked, and its exit is the job's.
    let steps = "#!/bin/sh\n#SBATCH -n 3\n\
                 srun sh -c 'echo step $SLURM_STEPID task $SLURM_PROCID of $SLURM_NTASKS' | sort\n\
                 srun -n 2 -o task-%j-%t.out sh -c 'echo $SLURM_STEPID $SLURM_LOCALID'\n\
                 srun -l sh -c 'echo hi; echo there' | sort\n\
                 srun -n 2 sh -c 'exit $((SLURM_PROCID + 4))'\n";
    std::fs::write(w.join("steps.sh"), steps).unwrap();
    let job = c.sbatch(w, &["--parsable", "steps.sh"]);
    let state = c.wait_over(w, &job);
    let text = std::fs::read_to_string(w.join(format!("slurm-{job}.out"))).unwrap();
    assert_eq!(state, "FAILED|5:0", "{text}");
    assert_eq!(
        text,
        "step 0 task 0 of 3\nstep 0 task 1 of 3\nstep 0 task 2 of 3\n\
         0: hi\n0: there\n1: hi\n1: there\n2: hi\n2: there\n\
         srun: error: node1: task 0: Exited with exit code 4\n\
         srun: error: node2: task 1: Exited with exit code 5\n"
    );
    // Two tasks on the job's two nodes (2 and 1 cores): one on each, the
    // first of its node.
    for t in 0..2 {
        let f = w.join(format!("task-{job}-{t}.out"));
        assert_eq!(std::fs::read_to_string(f).unwrap(), "1 0\n");
    }
    // sacct shows each step under the batch step, as Slurm's does.
    let acct = c.ok(
        w,
        "sacct",
        &[
            "-P",
            "-n",
            "-j",
            &job,
            "-o",
            "JobID,JobName,State,ExitCode,NTasks,NNodes",
        ],
    );
    assert_eq!(
        acct,
        format!(
            "{job}|steps.sh|FAILED|5:0||2\n{job}.batch|batch|FAILED|5:0|1|1\n\
             {job}.0|sh|COMPLETED|0:0|3|2\n{job}.1|sh|COMPLETED|0:0|2|2\n\
             {job}.2|sh|COMPLETED|0:0|3|2\n{job}.3|sh|FAILED|5:0|2|2\n"
        )
    );

    // An array: a file per task, named by Slurm's default pattern.
    let out = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-a",
            "1-3",
            "--wrap",
            "echo task $SLURM_ARRAY_TASK_ID",
        ],
    );
    let array = out.trim().to_string();
    let until = Instant::now() + Duration::from_secs(60);
    for i in 1..=3 {
        let f = w.join(format!("slurm-{array}_{i}.out"));
        while std::fs::read_to_string(&f).map_or(true, |s| s.is_empty()) {
            assert!(Instant::now() < until, "no {}", f.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("task {i}\n"));
    }
}

#[test]
fn the_queue_shows_what_waits_and_why_and_a_cancel_leaves_nothing_running() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Its own sleep length tells the jobs' processes from any other.
    let marker = format!("sleep 300.{}", std::process::id());
    let long = marker.clone();
    let ids: Vec<String> = (0..3)
        .map(|_| c.sbatch(w, &["--parsable", "-n", "2", "--wrap", &long]))
        .collect();
    let after = c.sbatch(
        w,
        &[
            "--parsable",
            "-d",
            &format!("afterany:{}", ids[0]),
            "--wrap",
            "true",
        ],
    );
    // Two run (one node each); the third waits for resources, the last
    // for its dependency.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let q = c.ok(w, "squeue", &["-h", "-o", "%i %t %R"]);
        let expected = format!(
            "{} PD (Resources)\n{after} PD (Dependency)\n{} R node1\n{} R node2\n",
            ids[2], ids[0], ids[1]
        );
        let alt = format!(
            "{} PD (Resources)\n{after} PD (Dependency)\n{} R node2\n{} R node1\n",
            ids[2], ids[0], ids[1]
        );
        if q == expected || q == alt {
            break;
        }
        assert!(Instant::now() < until, "queue never settled: {q}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Waiting for another job, it is not yet eligible.
    let show = c.ok(w, "scontrol", &["show", "job", &after]);
    assert!(show.contains(" EligibleTime=Unknown"), "{show}");
    let header = c.ok(w, "squeue", &[]);
    assert!(header.starts_with(
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    ));
    let sinfo = c.ok(w, "sinfo", &[]);
    assert_eq!(
        sinfo,
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
         batch*       up   infinite      2  alloc node[1-2]\n"
    );
    assert!(running(&marker), "the jobs' processes are not running");
    // Cancel all of them by name: nothing of them is left.
    c.ok(w, "scancel", &["-n", "wrap"]);
    assert_eq!(c.wait_over(w, &ids[0]), "CANCELLED by 0|0:0");
    wait_gone(&marker);
    assert_eq!(c.ok(w, "squeue", &["-h"]), "");
    // Cancelled while they waited, they started and ended at the cancel;
    // the one waiting for another job never was eligible, and sacct
    // lists it only when asked by id, as Slurm's does (measured).
    let held = c.sbatch(w, &["--parsable", "--hold", "--wrap", "true"]);
    let later = c.sbatch(w, &["--parsable", "--begin", "now+1hour", "--wrap", "true"]);
    c.ok(w, "scancel", &[&held, &later]);
    let listed = c.ok(w, "sacct", &["-X", "-n", "-P", "-o", "JobID"]);
    assert!(listed.contains(&format!("{}\n", ids[2])), "{listed}");
    for never in [&after, &held, &later] {
        assert!(!listed.contains(&format!("{never}\n")), "{listed}");
        let line = c.ok(
            w,
            "sacct",
            &["-X", "-n", "-P", "-j", never, "-o", "Eligible,Start,End"],
        );
        let times: Vec<&str> = line.trim().split('|').collect();
        assert_eq!(times[0], "Unknown", "{line}");
        assert_eq!(times[1], times[2], "{line}");
    }
}

/// Waits (up to 30 s) until `look` gives `want`.
fn wait_shows(mut look: impl FnMut() -> String, want: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let got = look();
        if got == want {
            return;
        }
        assert!(Instant::now() < until, "never {want:?}; last {got:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to 30 s) until no process's command line holds `marker`:
/// nothing of a job is left.
fn wait_gone(marker: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while running(marker) {
        assert!(Instant::now() < until, "a process of {marker:?} is left");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a process whose command line holds `marker` runs.
fn running(marker: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_requeued_job_is_ended_and_waits_again_under_its_id_as_on_slurm() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 301.{}", std::process::id());
    let script = format!(
        "trap 'echo TERM at restart ${{SLURM_RESTART_COUNT:-0}}; sleep 0.5; exit 3' TERM\n{marker} &\nwait\n"
    );
    let id = c.sbatch(w, &["--parsable", "-o", "out.txt", "--wrap", &script]);
    let no = c.sbatch(w, &["--parsable", "--no-requeue", "--wrap", &marker]);
    wait_shows(
        || {
            let running = c.ok(w, "squeue", &["-h", "-t", "R", "-o", "%i"]);
            running.lines().count().to_string()
        },
        "2",
    );
    // The script hears SIGTERM, once (a second one, while its trap runs,
    // would run the trap again); the job waits again, eligible later, as
    // Slurm's requeued jobs are (reason BeginTime).
    c.ok(w, "scontrol", &["requeue", &id]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-j", &id, "-o", "%i %t %r"]),
        &format!("{id} PD BeginTime\n"),
    );
    // Slurm's step says why first, then the script's trap runs.
    let out = std::fs::read_to_string(w.join("out.txt")).unwrap();
    let (said, trapped) = out.split_once('\n').unwrap_or_default();
    assert_step_line(said, &id, "node1", " DUE TO JOB REQUEUE");
    assert_eq!(trapped, "TERM at restart 0\n");
    let show = c.ok(w, "scontrol", &["show", "job", &id]);
    assert!(
        show.contains(" Requeue=1 Restarts=1 BatchFlag=1 "),
        "{show}"
    );
    assert!(
        show.contains("JobState=PENDING Reason=BeginTime "),
        "{show}"
    );
    // Eligible once its wait is over, not at its submission.
    let times = show
        .split_whitespace()
        .find(|w| w.starts_with("SubmitTime="))
        .zip(
            show.split_whitespace()
                .find(|w| w.starts_with("EligibleTime=")),
        )
        .unwrap();
    assert!(
        times.1["EligibleTime=".len()..] > times.0["SubmitTime=".len()..],
        "{show}"
    );
    // squeue's start of it is that instant, as Slurm's.
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &id, "-o", "%S"]).trim(),
        &times.1["EligibleTime=".len()..]
    );
    // A pending job, and one submitted --no-requeue, are refused as
    // Slurm refuses them.
    let again = c.run(w, "scontrol", &["requeue", &id], None);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        format!("Job is pending execution for job {id}\n")
    );
    let refused = c.run(w, "scontrol", &["requeue", &format!("JobId={no}")], None);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!("Requested operation is presently disabled for job {no}\n")
    );
    // Suspended or resumed out of turn, or unknown, in Slurm's words.
    let said = |args: &[&str]| {
        let o = c.run(w, "scontrol", args, None);
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert_eq!(
        said(&["suspend", &id]),
        format!("Job is pending execution for job {id}\n")
    );
    assert_eq!(
        said(&["requeue", "999999"]),
        "Invalid job id specified for job 999999\n"
    );
    assert_eq!(
        said(&["update", "JobId=999999", "TimeLimit=5"]),
        "Invalid job id specified for job 999999\n"
    );
    assert!(c
        .ok(w, "scontrol", &["show", "job", &no])
        .contains(" Requeue=0 Restarts=0 "));
    // requeuehold: held once its process is gone.
    let held = c.sbatch(w, &["--parsable", "--wrap", &marker]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%t"]),
        "R\n",
    );
    // A hold of a running job: it runs on, held (priority 0), as on
    // Slurm, by the operator if root asks; released, it runs on as
    // before, and a release of a job not held is no error.
    c.ok(w, "scontrol", &["hold", &held]);
    let whose = if nix::unistd::getuid().is_root() {
        "JobHeldAdmin"
    } else {
        "JobHeldUser"
    };
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%t %r %Q"]),
        format!("R {whose} 0\n")
    );
    c.ok(w, "scontrol", &["release", &held]);
    c.ok(w, "scontrol", &["release", &held]);
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%t %r"]),
        "R None\n"
    );
    c.ok(w, "scontrol", &["requeuehold", &held]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%t %r"]),
        "PD job requeued in held state\n",
    );
    assert!(c
        .ok(w, "scontrol", &["show", "job", &held])
        .contains(" Reason=job_requeued_in_held_state "));
    // A hold of a job requeued held leaves it so.
    c.ok(w, "scontrol", &["hold", &held]);
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &held, "-o", "%r"]),
        "job requeued in held state\n"
    );
    // A batch job over is requeued too, as Slurm requeues one it still
    // keeps: pending again under its id, its restart counted.
    let over = c.sbatch(w, &["--parsable", "--wrap", "exit 3"]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-t", "all", "-j", &over, "-o", "%t"]),
        "F\n",
    );
    c.ok(w, "scontrol", &["requeue", &over]);
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &over, "-o", "%i %t %r"]),
        format!("{over} PD BeginTime\n")
    );
    assert!(c
        .ok(w, "scontrol", &["show", "job", &over])
        .contains(" Requeue=1 Restarts=1 BatchFlag=1 "));
    c.ok(w, "scancel", &[&id, &no, &held, &over]);
    wait_gone(&marker);
}

/// `line` is what Slurm's step writes to a job's error file when the job
/// is told to end: `*** JOB id ON node CANCELLED AT <local time><due> ***`.
fn assert_step_line(line: &str, id: &str, node: &str, due: &str) {
    let at = line
        .strip_prefix(&format!(
            "slurmstepd: error: *** JOB {id} ON {node} CANCELLED AT "
        ))
        .and_then(|rest| rest.strip_suffix(&format!("{due} ***")))
        .unwrap_or_else(|| panic!("not the step's line for job {id}{due}: {line:?}"));
    let digits: String = at.chars().filter(char::is_ascii_digit).collect();
    assert!(
        at.len() == 19 && digits.len() == 14 && &at[10..11] == "T",
        "{line:?}"
    );
}

/// Waits (up to 30 s) until file `path` holds `text`.
fn wait_for_text(path: &Path, text: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let got = std::fs::read_to_string(path).unwrap_or_default();
        if got.contains(text) {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} never said {text:?}: {got:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn scancel_signals_the_steps_the_batch_script_or_all_of_a_job_as_slurm_does() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 302.{}", std::process::id());
    // The batch shell waits in `wait`, where a trapped signal reaches it
    // at once (in a foreground command it would wait for its end).
    let script = format!(
        "#!/bin/sh\ntrap 'echo batch got USR1' USR1\ntrap 'echo batch got USR2' USR2\n\
         srun -o step.out sh -c 'trap \"echo step got USR1; exit 0\" USR1; echo step ready; \
         while :; do sleep 0.1; done' &\n{marker} &\nwhile :; do wait; done\n"
    );
    let out = c.run(w, "sbatch", &["--parsable", "-n", "2"], Some(&script));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let pending = c.sbatch(w, &["--parsable", "--wrap", "true"]);
    wait_for_text(&w.join("step.out"), "step ready\n");
    // By default the steps' tasks, not the batch script.
    c.ok(w, "scancel", &["--signal=USR1", &id]);
    wait_for_text(&w.join("step.out"), "step got USR1\n");
    // --batch: the batch script's shell alone.
    c.ok(w, "scancel", &["-b", "-s", "SIGUSR2", &id]);
    let batch_out = w.join(format!("slurm-{id}.out"));
    wait_for_text(&batch_out, "batch got USR2\n");
    assert!(!std::fs::read_to_string(&batch_out)
        .unwrap()
        .contains("USR1"));
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", &id, "-o", "%t"]), "R\n");
    // A pending job cannot be signalled: Slurm's error and status.
    let refused = c.run(w, "scancel", &["-s", "USR1", &pending], None);
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "scancel: error: Kill job error on job id {pending}: Job can not be altered now, \
             try again later\n"
        )
    );
    assert_eq!(refused.status.code(), Some(2020 & 0xff));
    let bad = c.run(w, "scancel", &["-s", "NOSUCH", &id], None);
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "Unknown job signal: NOSUCH\n"
    );
    assert_eq!(bad.status.code(), Some(1));
    // --full: every process; the batch shell does not trap SIGTERM.
    c.ok(w, "scancel", &["--full", "--signal=TERM", &id]);
    wait_gone(&marker);
    assert_eq!(c.wait_over(w, &id), "FAILED|0:15");
    c.ok(w, "scancel", &[&pending]);
}

#[test]
fn a_cancelled_job_is_completing_until_its_processes_are_gone() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // It ignores SIGTERM: the SIGKILL of KillWait (5 s) ends it.
    let id = c
        .ok(
            w,
            "sbatch",
            &[
                "--parsable",
                "--wrap",
                "trap '' TERM; touch trapped; while :; do sleep 0.1; done",
            ],
        )
        .trim()
        .to_string();
    wait_shows(|| c.ok(w, "squeue", &["-h", "-o", "%t"]), "R\n");
    // Running is not enough: a SIGTERM before the trap would end it at
    // once, never COMPLETING.
    let until = Instant::now() + Duration::from_secs(30);
    while !w.join("trapped").exists() {
        assert!(Instant::now() < until, "the script never set its trap");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.ok(w, "scancel", &[&id]);
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-o", "%i %t %T"]),
        format!("{id} CG COMPLETING\n")
    );
    assert_eq!(c.ok(w, "squeue", &["-h", "-t", "R"]), "");
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-t", "CG", "-o", "%i"]),
        format!("{id}\n")
    );
    assert!(c
        .ok(w, "scontrol", &["show", "job", &id])
        .contains("JobState=COMPLETING "));
    assert_eq!(c.wait_over(w, &id), "CANCELLED by 0|0:0");
    assert_eq!(c.ok(w, "squeue", &["-h"]), "");
    let out = std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap();
    assert_step_line(out.trim_end(), &id, "node1", "");
    let batch = |id: &str| {
        c.ok(
            w,
            "sacct",
            &[
                "-n",
                "-P",
                "-j",
                &format!("{id}.batch"),
                "-o",
                "State,ExitCode",
            ],
        )
    };
    assert_eq!(batch(&id), "CANCELLED|0:9\n");
    // A script that catches the SIGTERM and exits: its step ends as its
    // status says, the job cancelled (measured on Slurm 22.05).
    for (status, want) in [(7, "FAILED|7:0\n"), (0, "COMPLETED|0:0\n")] {
        let _ = std::fs::remove_file(w.join("trapped"));
        let script =
            format!("trap 'exit {status}' TERM; touch trapped; while :; do sleep 0.1; done");
        let id = c.sbatch(w, &["--parsable", "-o", "/dev/null", "--wrap", &script]);
        let until = Instant::now() + Duration::from_secs(30);
        while !w.join("trapped").exists() {
            assert!(Instant::now() < until, "the script never set its trap");
            std::thread::sleep(Duration::from_millis(20));
        }
        c.ok(w, "scancel", &[&id]);
        assert_eq!(c.wait_over(w, &id), "CANCELLED by 0|0:0");
        assert_eq!(batch(&id), want, "exit {status}");
    }
}

/// `up --preempt`: a job of `urgent` ends a `batch` job in its way, which
/// ends PREEMPTED (cancel) or waits again (requeue), as on Slurm; the job
/// it made room for then runs.
#[test]
fn a_job_of_a_higher_priority_partition_preempts_as_on_slurm() {
    for mode in ["cancel", "requeue"] {
        let c = Up::start_with(2, 2, &["--preempt", mode]);
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let marker = format!("preempted-{mode}-{}", std::process::id());
        let submit = |args: &[&str]| c.sbatch(w, args);
        let script = format!("sleep 300 # {marker}");
        let low = submit(&["--parsable", "-n", "2", "--wrap", &script]);
        let other = submit(&["--parsable", "-n", "2", "--wrap", "sleep 300"]);
        wait_shows(|| c.ok(w, "squeue", &["-h", "-o", "%t"]), "R\nR\n");
        // The urgent partition is node1 alone here: the job on it goes.
        let where_ = c.ok(w, "squeue", &["-h", "-o", "%i %N"]);
        let (victim, spared) = if where_.contains(&format!("{low} node1\n")) {
            (low.clone(), other.clone())
        } else {
            (other.clone(), low.clone())
        };
        let urgent = submit(&["--parsable", "-p", "urgent", "-n", "2", "--wrap", "sleep 1"]);
        wait_shows(
            || c.ok(w, "squeue", &["-h", "-j", &urgent, "-o", "%t"]),
            "R\n",
        );
        let shown = c.ok(w, "scontrol", &["show", "job", &victim]);
        // Its output says why, as Slurm's step writes it.
        let due = match mode {
            "cancel" => " DUE TO PREEMPTION",
            _ => " DUE TO JOB REQUEUE",
        };
        wait_for_text(&w.join(format!("slurm-{victim}.out")), "***");
        let out = std::fs::read_to_string(w.join(format!("slurm-{victim}.out"))).unwrap();
        assert_step_line(out.trim_end(), &victim, "node1", due);
        if mode == "cancel" {
            assert!(shown.contains("JobState=PREEMPTED Reason=None"), "{shown}");
            assert!(shown.contains("ExitCode=0:15"), "{shown}");
            let preempt_time = shown
                .split_whitespace()
                .find_map(|w| w.strip_prefix("PreemptTime="))
                .unwrap_or_default();
            assert!(preempt_time.starts_with("20"), "{shown}");
            assert_eq!(
                c.ok(
                    w,
                    "squeue",
                    &["-h", "-t", "all", "-j", &victim, "-o", "%t %T"]
                ),
                "PR PREEMPTED\n"
            );
            assert_eq!(c.wait_over(w, &victim), "PREEMPTED|0:0");
        } else {
            assert!(
                shown.contains("JobState=PENDING Reason=BeginTime") && shown.contains("Restarts=1"),
                "{shown}"
            );
        }
        if victim == low {
            wait_gone(&marker);
        }
        assert!(c
            .ok(w, "scontrol", &["show", "job", &spared])
            .contains("JobState=RUNNING"));
        assert_eq!(c.wait_over(w, &urgent), "COMPLETED|0:0");
        let config = c.ok(w, "scontrol", &["show", "config"]);
        assert!(
            config.contains(&format!(
                "PreemptMode             = {}",
                mode.to_uppercase()
            )),
            "{config}"
        );
        c.ok(w, "scancel", &[&spared, &victim]);
    }
}

#[test]
fn up_again_in_the_same_directory_starts_a_new_cluster() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let first = c.ok(w, "sbatch", &["--parsable", "--wrap", "true"]);
    assert_eq!(c.wait_over(w, first.trim()), "COMPLETED|0:0");
    // `scontrol ping` says whether the controller answers, as Slurm's
    // (this machine's name for a controller on loopback).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let up = format!("Slurmctld(primary) at {} is UP\n", host.trim());
    assert_eq!(c.ok(w, "scontrol", &["ping"]), up);
    // Down, then up again in the same directory (a stale state from
    // another version of clemu is never read either).
    let bin = env!("CARGO_BIN_EXE_clemu-slurm");
    let dir = c.dir.path();
    assert!(Command::new(bin)
        .args(["down", "--dir"])
        .arg(dir)
        .status()
        .unwrap()
        .success());
    let down = c.run(w, "scontrol", &["ping"], None);
    assert_eq!(down.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&down.stdout),
        up.replace("UP", "DOWN")
    );
    std::fs::write(dir.join("state/journal"), b"not a journal").unwrap();
    let out = Command::new(bin)
        .args(["up", "--nodes", "1", "--cpus", "1", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        c.ok(w, "sacct", &["-X", "-n", "-P", "--format", "JobID"]),
        ""
    );
    let again = c.ok(w, "sbatch", &["--parsable", "--wrap", "true"]);
    assert_eq!(again.trim(), "1");
    // A controller that will not take the request to stop (another
    // version's, after an upgrade; here its secret is no longer the
    // file's) is still this cluster's, and `down` stops it.
    let pid: i32 = std::fs::read_to_string(dir.join("controller.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(dir.join("state/secret"), "another secret\n").unwrap();
    let out = Command::new(bin)
        .args(["down", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("sending its controller (pid {pid}) SIGTERM")),
        "{err}"
    );
    assert!(
        !Path::new(&format!("/proc/{pid}/cmdline")).exists()
            || std::fs::read(format!("/proc/{pid}/cmdline"))
                .unwrap()
                .is_empty()
    );
}

#[test]
fn scancel_v_says_each_job_it_acts_on_as_slurm_does() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let held = || c.sbatch(w, &["--parsable", "-H", "-J", "v", "--wrap", "true"]);
    let (a, b) = (held(), held());
    // Ids as given; with filters, the jobs they match.
    let out = c.run(w, "scancel", &["-v", &a], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("scancel: Terminating job {a}\n")
    );
    let out = c.run(w, "scancel", &["-v", "-n", "v"], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("scancel: Terminating job {b}\n")
    );
    assert_eq!(c.wait_over(w, &b), "CANCELLED by 0|0:0");
    // An id of no job: said so, and still 0, as Slurm 22.05's.
    let out = c.run(w, "scancel", &["-v", "999999"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "scancel: Terminating job 999999\nscancel: error: Kill job error on job id 999999: \
         Invalid job id specified\n"
    );
}

#[test]
fn accounts_are_a_new_databases_and_what_clemu_lacks_is_refused() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // The account a workflow tool guesses for its user: root's, whose
    // cluster this is (the tests run as the cluster's owner).
    let id = Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert_eq!(
        c.ok(
            w,
            "sacctmgr",
            &["-n", "-s", "list", "user", &me, "format=account%12"]
        ),
        "        root \n"
    );
    assert_eq!(
        c.ok(
            w,
            "sacctmgr",
            &[
                "-nP",
                "show",
                "users",
                "withassoc",
                "format=account,qos",
                "where",
                &format!("user={me}")
            ]
        ),
        "root|normal\n"
    );
    assert_eq!(
        c.ok(w, "sacctmgr", &["-P", "show", "user", "nobody-here"]),
        "User|Def Acct|Admin\n"
    );
    assert_eq!(
        c.ok(w, "sshare", &["-U", "-n", "-P", "-o", "account,user"]),
        format!("root|{me}\n")
    );
    // No changes, and no usage: said, not made up.
    for (name, args, said) in [
        ("sacctmgr", &["add", "account", "x"][..], "takes no changes"),
        (
            "sacctmgr",
            &["list", "user", "format=bogus"][..],
            "Unknown field 'bogus'",
        ),
        ("sshare", &["-U"][..], "clemu keeps no usage or fair share"),
    ] {
        let out = c.run(w, name, args, None);
        assert_eq!(out.status.code(), Some(1), "{name} {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said), "{name} {args:?}: {err}");
    }
}

/// A reader that stops early (`squeue | head`) ends the command by
/// SIGPIPE, as Slurm's C commands end, not by a panic.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_clemu-slurm"),
        dir.path().join("scontrol"),
    )
    .unwrap();
    // Far more than a pipe holds.
    let mut child = Command::new(dir.path().join("scontrol"))
        .args(["show", "hostnames", "node[1-300000]"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 6];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    assert_eq!(&first, b"node1\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `-p a,b`: each must exist; the job goes to the first with room now.
#[test]
fn a_job_asking_several_partitions_goes_to_one_with_room() {
    // `urgent` is node1, `batch` both nodes.
    let c = Up::start_with(2, 2, &["--preempt", "cancel"]);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 302.{}", std::process::id());
    let submit = |parts: &str| {
        c.sbatch(
            w,
            &["--parsable", "-n", "2", "-p", parts, "--wrap", &marker],
        )
    };
    let first = submit("urgent,batch");
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-j", &first, "-o", "%P %t"]),
        "urgent R\n",
    );
    // urgent is full: batch has room.
    let second = submit("urgent,batch");
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &second, "-o", "%P"]),
        "batch\n"
    );
    let out = c.run(w, "sbatch", &["-p", "batch,nope", "--wrap", "true"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: error: Batch job submission failed: invalid partition specified: nope\n"
    );
    c.ok(w, "scancel", &[&first, &second]);
    wait_gone(&marker);
}

/// As Slurm's hostlist: the names in the order given, repeats kept.
#[test]
fn hostnames_keep_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_clemu-slurm"),
        dir.path().join("scontrol"),
    )
    .unwrap();
    let out = Command::new(dir.path().join("scontrol"))
        .args(["show", "hostnames", "node[1-3,7],gpu[01-02],node1"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "node1\nnode2\nnode3\nnode7\ngpu01\ngpu02\nnode1\n"
    );
}

#[test]
fn a_waiting_jobs_tres_and_the_json_documents_are_slurms() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let running = c.sbatch(w, &["--parsable", "-n", "4", "--wrap", "sleep 60"]);
    let waiting = c.sbatch(
        w,
        &["--parsable", "-n", "4", "--mem", "50", "--wrap", "sleep 60"],
    );
    // While it waits, what it asks: the fewest nodes (one unless -N) and
    // the memory asked on them, as Slurm 22.05 writes it; once it runs,
    // what it holds.
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &waiting, "-O", "tres-alloc:40"]),
        format!("{:<40}\n", "cpu=4,mem=50M,node=1,billing=4")
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", &running, "-O", "tres-alloc:40"]),
        format!("{:<40}\n", "cpu=4,node=2,billing=4")
    );
    // --json ignores the filters, as Slurm's: both jobs, each with every
    // key of Slurm's document (110, and `job_resources` for a job that
    // runs), and each node with 45.
    let doc: serde_json::Value =
        serde_json::from_str(&c.ok(w, "squeue", &["--json", "-j", &waiting])).unwrap();
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{doc:#}");
    let run = jobs
        .iter()
        .find(|j| j["job_id"] == running.parse::<u64>().unwrap())
        .unwrap();
    assert_eq!(run.as_object().unwrap().len(), 111);
    assert_eq!(run["job_resources"]["allocated_hosts"], 2);
    assert_eq!(run["tres_alloc_str"], "cpu=4,node=2,billing=4");
    let wait = jobs
        .iter()
        .find(|j| j["job_id"] == waiting.parse::<u64>().unwrap())
        .unwrap();
    assert_eq!(wait.as_object().unwrap().len(), 110);
    assert_eq!(wait["memory_per_node"], 50);
    assert_eq!(wait["flags"], serde_json::json!(["JOB_MEM_SET"]));
    let doc: serde_json::Value =
        serde_json::from_str(&c.ok(w, "sinfo", &["--json", "-n", "node1"])).unwrap();
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.as_object().unwrap().len() == 45));
    assert_eq!(nodes[0]["state"], "allocated");
    assert_eq!(nodes[0]["tres_used"], "cpu=2");
    c.ok(w, "scancel", &[&running, &waiting]);
}

#[test]
fn sinfo_all_and_the_load_and_memory_fields_are_slurms() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let id = c.sbatch(w, &["--parsable", "--mem", "100", "--wrap", "sleep 60"]);
    let all = c.ok(w, "sinfo", &["-o", "%all"]);
    let lines: Vec<&str> = all.lines().collect();
    // Slurm 22.05's header, word for word.
    assert_eq!(
        lines[0],
        "AVAIL|ACTIVE_FEATURES|CPUS|TMP_DISK|FREE_MEM|AVAIL_FEATURES|GROUPS|OVERSUBSCRIBE|\
         TIMELIMIT|MEMORY|HOSTNAMES|NODE_ADDR|PRIO_TIER|ROOT|JOB_SIZE|STATE|USER|VERSION|\
         WEIGHT|S:C:T|NODES(A/I) |MAX_CPUS_PER_NODE |CPUS(A/I/O/T) |NODES |REASON \
         |NODES(A/I/O/T) |GRES |TIMESTAMP |PRIO_JOB_FACTOR |DEFAULTTIME |PREEMPT_MODE \
         |NODELIST |CPU_LOAD |PARTITION |PARTITION |ALLOCNODES |STATE |USER |CLUSTER \
         |SOCKETS |CORES |THREADS "
    );
    // The idle node, as Slurm writes one configured with CPUs=2 (its
    // host's name and free memory its own).
    assert_eq!(
        lines[2],
        "up|(null)|2|0|1000|(null)|all|NO|infinite|1000|node2|node2|1|no|1-infinite|idle|\
         Unknown|22.05.8|1|2:1:1|0/1 |UNLIMITED |0/2/0/2 |1 |none |0/1/0/1 |(null) \
         |Unknown |1 |n/a |OFF |node2 |0.00 |batch* |batch |all |idle |Unknown |N/A |2 |1 |1 "
    );
    assert_eq!(
        c.ok(
            w,
            "sinfo",
            &[
                "-h",
                "-N",
                "-O",
                "nodelist:6,allocmem:6,freemem:6,cpusload:5"
            ]
        ),
        "node1 100   900   0.00 \nnode2 0     1000  0.00 \n"
    );
    c.ok(w, "scancel", &[&id]);
}

#[test]
fn sacct_json_is_slurms_document_with_its_steps() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let id = c.sbatch(
        w,
        &[
            "--parsable",
            "-n",
            "2",
            "--wrap",
            "srun true; srun -n 1 false; exit 3",
        ],
    );
    assert_eq!(c.wait_over(w, &id), "FAILED|3:0");
    let doc: serde_json::Value =
        serde_json::from_str(&c.ok(w, "sacct", &["--json", "-j", &id])).unwrap();
    let doc_all = doc.clone();
    assert_ne!(doc["jobs"][0]["time"]["total"]["microseconds"], 0);
    assert_eq!(doc["meta"]["plugin"]["type"], "openapi/dbv0.0.38");
    let job = &doc["jobs"][0];
    // Slurm 22.05's 30 keys, its exit codes as its plugin writes them.
    assert_eq!(job.as_object().unwrap().len(), 30, "{job:#}");
    assert_eq!(job["state"]["current"], "FAILED");
    assert_eq!(
        job["exit_code"],
        serde_json::json!({"status": "SUCCESS", "return_code": 0})
    );
    let steps: Vec<_> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"]["id"].to_string(),
                s["state"].as_str().unwrap().to_string(),
                s["task"]["distribution"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("\"batch\"".into(), "FAILED".into(), "Unknown".into()),
            ("0".into(), "COMPLETED".into(), "Block".into()),
            ("1".into(), "FAILED".into(), "Cyclic".into()),
        ]
    );
    // One step asked for: its job, with that step alone.
    let doc: serde_json::Value =
        serde_json::from_str(&c.ok(w, "sacct", &["--json", "-j", &format!("{id}.1")])).unwrap();
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{doc:#}");
    assert_eq!(jobs[0]["job_id"], id.parse::<u64>().unwrap());
    assert_eq!(jobs[0]["steps"].as_array().unwrap().len(), 1);
    assert_eq!(jobs[0]["steps"][0]["step"]["id"], 1);
    // The job's CPU time is its record's, whichever of its lines is asked.
    assert_eq!(
        jobs[0]["time"]["total"], doc_all["jobs"][0]["time"]["total"],
        "{doc:#}"
    );
}

#[test]
fn an_arrays_limit_shows_with_its_pending_tasks_as_on_slurm() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-H", "--array=1-6%2", "--wrap", "true"],
    );
    let id = id.trim();
    // As Slurm 22.05 shows a held array limited to two tasks at once.
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-o", "%i|%K|%r"]),
        format!("{id}_[1-6%2]|1-6%2|JobHeldUser\n")
    );
    let shown = c.ok(w, "scontrol", &["show", "job", &format!("{id}_3")]);
    let first = shown.lines().next().unwrap_or_default().to_string();
    assert!(
        first.contains("ArrayTaskId=3 ArrayTaskThrottle=2 JobName=wrap"),
        "{first}"
    );
    // Without a limit, neither.
    let free = c.ok(
        w,
        "sbatch",
        &["--parsable", "-H", "--array=1-3", "--wrap", "true"],
    );
    let free = free.trim();
    let line = c.ok(w, "squeue", &["-h", "-j", free, "-o", "%i"]);
    assert_eq!(line, format!("{free}_[1-3]\n"));
}

/// Which pending tasks share a line, as Slurm 22.05's squeue showed them
/// on this machine: those still in their array's record fold, the only
/// task of an array included (`12_[5]`); the last pending task of an
/// array some of whose tasks started, and the tasks of an `aftercorr`
/// array, each have a record and a line of their own.
#[test]
fn pending_array_tasks_share_a_line_as_slurms_array_record_holds_them() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let sbatch = |args: &[&str]| {
        let mut all = vec!["--parsable", "-o", "/dev/null"];
        all.extend_from_slice(args);
        c.ok(w, "sbatch", &all).trim().to_string()
    };
    let started = sbatch(&["-n", "2", "-a", "1-3", "--wrap", "sleep 60"]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-t", "R", "-o", "%i"]),
        &format!("{started}_1\n{started}_2\n"),
    );
    let waiting = sbatch(&["-n", "1", "-a", "1-2", "--wrap", "sleep 60"]);
    let corr = sbatch(&[
        "-n",
        "1",
        "-a",
        "1-2",
        "-d",
        &format!("aftercorr:{waiting}"),
        "--wrap",
        "true",
    ]);
    let only = sbatch(&["-n", "1", "-a", "5", "--wrap", "true"]);
    let mut lines: Vec<String> = c
        .ok(w, "squeue", &["-h", "-t", "PD", "-o", "%i"])
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    let mut want = vec![
        format!("{started}_3"),
        format!("{waiting}_[1-2]"),
        format!("{corr}_1"),
        format!("{corr}_2"),
        format!("{only}_[5]"),
    ];
    want.sort();
    assert_eq!(lines, want);
    // One line a task with -r, as Slurm's.
    let r = c.ok(w, "squeue", &["-h", "-r", "-j", &only, "-o", "%i"]);
    assert_eq!(r, format!("{only}_5\n"));
}

#[test]
fn srun_of_a_command_that_is_not_there_fails_its_task_as_slurmstepd_does() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let id = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-o",
            "o",
            "--wrap",
            "srun no-such-cmd-here; echo rc=$?",
        ],
    );
    assert_eq!(c.wait_over(w, id.trim()), "COMPLETED|0:0");
    let out = std::fs::read_to_string(w.join("o")).unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "rc=2",
            "slurmstepd-node1: error: execve(): no-such-cmd-here: No such file or directory",
            "srun: error: node1: task 0: Exited with exit code 2",
        ],
        "{out}"
    );
}

#[test]
fn a_node_count_spreads_a_job_over_that_many_nodes() {
    let c = Up::start(4, 4);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let show = "echo $SLURM_JOB_NUM_NODES $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE";
    let id = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-N",
            "2",
            "-n",
            "4",
            "-o",
            "out-%j",
            "--wrap",
            show,
        ],
    );
    let id = id.trim();
    assert_eq!(c.wait_over(w, id), "COMPLETED|0:0");
    // Packed, four cores fit one node; asked for two, three and one, as
    // Slurm 22.05 lays them on empty nodes.
    let out = std::fs::read_to_string(w.join(format!("out-{id}"))).unwrap();
    assert_eq!(out, "2 3,1 3,1\n");
    let acct = c.ok(
        w,
        "sacct",
        &["-X", "-P", "-n", "-j", id, "-o", "NNodes,NCPUS"],
    );
    assert_eq!(acct, "2|4\n");
    // -N alone: a task on each node.
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-N", "3", "-o", "o3", "--wrap", show],
    );
    assert_eq!(c.wait_over(w, id.trim()), "COMPLETED|0:0");
    let out = std::fs::read_to_string(w.join("o3")).unwrap();
    assert_eq!(out, "3 1(x3) 1(x3)\n");
    // --ntasks-per-node: so many on each node, as on Slurm 22.05, with or
    // without -N; more tasks than it lets the nodes hold are refused.
    let per_node = format!("{show} $SLURM_NTASKS $SLURM_NTASKS_PER_NODE");
    for (args, want) in [
        (
            &["-N", "2", "--ntasks-per-node=2"][..],
            "2 2(x2) 2(x2) 4 2\n",
        ),
        (
            &["-n", "3", "--ntasks-per-node=1"][..],
            "3 1(x3) 1(x3) 3 1\n",
        ),
    ] {
        let mut argv = vec!["--parsable", "-o", "opn"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--wrap", &per_node]);
        let id = c.ok(w, "sbatch", &argv);
        assert_eq!(c.wait_over(w, id.trim()), "COMPLETED|0:0");
        let out = std::fs::read_to_string(w.join("opn")).unwrap();
        assert_eq!(out, want, "{args:?}");
    }
    let out = c.run(
        w,
        "sbatch",
        &[
            "-n",
            "2",
            "--ntasks-per-node=1",
            "-N",
            "1",
            "--wrap",
            "true",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: error: Batch job submission failed: Requested node configuration is not \
         available\n"
    );
    // Pending, the range asked shows as Slurm shows it.
    let held = c.ok(
        w,
        "sbatch",
        &["--parsable", "--hold", "-N", "2", "--wrap", "true"],
    );
    let held = held.trim();
    let job = c.ok(w, "scontrol", &["show", "job", held]);
    assert!(job.contains(" NumNodes=2-2 NumCPUs=2 "), "{job}");
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", held, "-o", "%D"]), "2\n");
    // The cores a job needs on each node: a task's times its tasks on
    // each (Slurm's MIN_CPUS and MinCPUsNode), and its batch host only
    // once it runs.
    let wide = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "--hold",
            "-n",
            "4",
            "-c",
            "2",
            "--ntasks-per-node=2",
            "--wrap",
            "true",
        ],
    );
    let wide = wide.trim();
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", wide, "-o", "%c|%B|%h|%z"]),
        "4|n/a|OK|*:*:*\n"
    );
    let job = c.ok(w, "scontrol", &["show", "job", wide]);
    assert!(job.contains(" NtasksPerN:B:S:C=2:0:*:* "), "{job}");
    assert!(job.contains(" MinCPUsNode=4 "), "{job}");
    c.ok(w, "scancel", &[wide]);
    // Fewer tasks than nodes: Slurm's warning, and a node per task.
    let out = c.run(
        w,
        "sbatch",
        &["--hold", "-N", "3", "-n", "2", "--wrap", "true"],
        None,
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "sbatch: Warning: can't run 2 processes on 3 nodes, setting nnodes to 2\n"
    );
    // More nodes than there are: refused with one line, no job made.
    let before = c.ok(w, "squeue", &["-h"]);
    let out = c.run(w, "sbatch", &["-N", "5", "--wrap", "true"], None);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("sbatch: error: Batch job submission failed: "),
        "{err}"
    );
    assert!(err.contains("asks 5 nodes"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(out.status.code(), Some(1));
    // A task's cores go whole on one node: -c 3 -n 2 is three and three
    // (not four and two), and tasks no node holds are refused.
    let id = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-c",
            "3",
            "-n",
            "2",
            "-o",
            "o4",
            "--wrap",
            "echo $SLURM_JOB_CPUS_PER_NODE",
        ],
    );
    assert_eq!(c.wait_over(w, id.trim()), "COMPLETED|0:0");
    assert_eq!(std::fs::read_to_string(w.join("o4")).unwrap(), "3(x2)\n");
    for (tasks, cores) in [("1", "8"), ("5", "3")] {
        let out = c.run(
            w,
            "sbatch",
            &["-n", tasks, "-c", cores, "--wrap", "true"],
            None,
        );
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("tasks of"), "{err}");
    }
    // Worded and exiting as Slurm 22.05's sbatch.
    for (args, err, code) in [
        (
            &["-N", "2-1"][..],
            "sbatch: error: Maximum node count 1 is less than minimum node count 2\n",
            255,
        ),
        (
            &["-N", "0"][..],
            "sbatch: error: Batch job submission failed: Node count specification invalid\n",
            1,
        ),
        (
            &["--array=5-1"][..],
            "sbatch: error: Batch job submission failed: Invalid job array specification\n",
            1,
        ),
        (
            &["-p", "nosuch"][..],
            "sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job \
             submission failed: Invalid partition name specified\n",
            1,
        ),
        (
            &["--gres=gpu:x"][..],
            "sbatch: error: Invalid generic resource (gres) specification\n",
            1,
        ),
        (
            &["-t", "abc"][..],
            "sbatch: error: Invalid --time specification\n",
            255,
        ),
    ] {
        let mut argv = args.to_vec();
        argv.extend_from_slice(&["--wrap", "true"]);
        let out = c.run(w, "sbatch", &argv, None);
        assert_eq!(String::from_utf8(out.stderr).unwrap(), err, "{args:?}");
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
    let out = c.run(
        w,
        "sbatch",
        &["--mem=1G", "--mem-per-cpu=1G", "--wrap", "true"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.\n"
    );
    let out = c.run(w, "srun", &[], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "srun: fatal: No command given to execute.\n"
    );
    let out = c.run(w, "sbatch", &["--begin=2026-13-45", "--wrap", "true"], None);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid --begin specification"),
        "{out:?}"
    );
    let out = c.run(w, "squeue", &["-h", "-o", "%70000i"], None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // A width of billions (Slurm's own squeue crashes on it) is padded
    // to a mebibyte at most, not to memory's end.
    for (program, argv) in [
        ("squeue", &["-o", "%99999999999j"][..]),
        ("sacct", &["-o", "JobID%2147483647"][..]),
    ] {
        let out = c.run(w, program, argv, None);
        assert_eq!(out.status.code(), Some(0), "{program}");
        assert!(
            out.stdout
                .split(|&b| b == b'\n')
                .all(|l| l.len() <= (1 << 20) + 1),
            "{program}"
        );
    }
    assert_eq!(c.ok(w, "squeue", &["-h"]), before);
}

#[test]
fn a_job_past_its_limit_completes_with_its_time_stopped_there() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // It ignores the SIGTERM at its limit: the SIGKILL comes a grace later.
    let id = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-t",
            "0:02",
            "--wrap",
            "trap '' TERM; sleep 60; sleep 60",
        ],
    );
    let id = id.trim();
    wait_shows(|| c.ok(w, "squeue", &["-h", "-j", id, "-o", "%t"]), "R\n");
    // Past its limit, its processes not gone yet: completing, its time
    // stopped at the limit, as on Slurm.
    wait_shows(|| c.ok(w, "squeue", &["-h", "-j", id, "-o", "%t"]), "CG\n");
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-j", id, "-o", "%T %M"]),
        "COMPLETING 0:02\n"
    );
    assert_eq!(c.wait_over(w, id), "TIMEOUT|0:0");
    // Over: it ended at its limit, and its step by the SIGKILL.
    let shown = c.ok(w, "scontrol", &["show", "job", id]);
    assert!(shown.contains("RunTime=00:00:02 "), "{shown}");
    assert!(shown.contains("ExitCode=0:9"), "{shown}");
}

#[test]
fn a_running_jobs_time_limit_changes_as_on_slurm() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 301.{}", std::process::id());
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-t", "0:04", "--wrap", &marker],
    );
    let id = id.trim();
    wait_shows(|| c.ok(w, "squeue", &["-h", "-j", id, "-o", "%t"]), "R\n");
    let running = Instant::now();
    // A limit given with seconds holds to the second, and shows so.
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", id, "-o", "%l"]), "0:04\n");
    // Raised: squeue shows it, and the job outlives its first limit.
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=10"],
    );
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", id, "-o", "%l"]), "10:00\n");
    // Added to and taken from, as on Slurm; not below nothing.
    // The job named as `job N`, too, as Slurm's scontrol takes it.
    c.ok(w, "scontrol", &["update", "job", id, "TimeLimit=+5"]);
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", id, "-o", "%l"]), "15:00\n");
    let shown = c.ok(w, "scontrol", &["show", &format!("jobid={id}")]);
    assert!(shown.contains(" TimeLimit=00:15:00 "), "{shown}");
    assert_eq!(
        c.ok(w, "scontrol", &["show", "reservation"]),
        "No reservations in the system\n"
    );
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=-0:30"],
    );
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", id, "-o", "%l"]), "14:30\n");
    let out = c.run(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=-40"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "scontrol: error: TimeLimit decrement larger than current time limit (40 > 15)\n"
    );
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=10"],
    );
    std::thread::sleep(Duration::from_secs(5).saturating_sub(running.elapsed()));
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", id, "-o", "%t"]), "R\n");
    // Lowered below what it ran: ended at once, timed out, nothing left.
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=0:01"],
    );
    assert_eq!(c.wait_over(w, id), "TIMEOUT|0:0");
    // scontrol has the batch step's end: the SIGTERM at the limit.
    let shown = c.ok(w, "scontrol", &["show", "job", id]);
    assert!(shown.contains("JobState=TIMEOUT"), "{shown}");
    assert!(shown.contains("ExitCode=0:15"), "{shown}");
    wait_gone(&marker);
    let out = std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap();
    assert_step_line(out.trim_end(), id, "node1", " DUE TO TIME LIMIT");
    // Over, it can no longer change.
    let out = c.run(
        w,
        "scontrol",
        &["update", &format!("JobId={id}"), "TimeLimit=5"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    // An array's every task, or one of them.
    let array = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-H",
            "-a",
            "1-3",
            "-t",
            "10",
            "--wrap",
            "true",
        ],
    );
    let array = array.trim();
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={array}"), "TimeLimit=3"],
    );
    c.ok(
        w,
        "scontrol",
        &["update", &format!("JobId={array}_2"), "TimeLimit=4"],
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-r", "-j", array, "-o", "%i %l"]),
        format!("{array}_1 3:00\n{array}_2 4:00\n{array}_3 3:00\n")
    );
    c.ok(w, "scancel", &[array]);
}

#[test]
fn a_job_over_its_memory_is_out_of_memory_as_on_slurm() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let hog = "python3 -c 'import time; b = bytearray(256 << 20); time.sleep(60)'; echo after $?";
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "--mem=64M", "-o", "oom.out", "--wrap", hog],
    );
    let id = id.trim();
    assert_eq!(c.wait_over(w, id), "OUT_OF_MEMORY|0:125");
    // Asked per node, its memory shows per node.
    let shown = c.ok(w, "scontrol", &["show", "job", id]);
    assert!(shown.contains(" MinMemoryNode=64M "), "{shown}");
    let acct = c.ok(
        w,
        "sacct",
        &["-P", "-n", "-j", id, "-o", "JobID,State,ExitCode"],
    );
    assert_eq!(
        acct,
        format!("{id}|OUT_OF_MEMORY|0:125\n{id}.batch|OUT_OF_MEMORY|0:125\n")
    );
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-t", "OOM", "-o", "%i %t %r"]),
        format!("{id} OOM OutOfMemory\n")
    );
    // The script went on; the job's file says what Slurm's says.
    let out = std::fs::read_to_string(w.join("oom.out")).unwrap();
    assert!(out.contains("after 137\n"), "{out}");
    assert!(
        out.ends_with(&format!(
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId={id}.batch. Some of your \
             processes may have been killed by the cgroup out-of-memory handler.\n"
        )),
        "{out}"
    );
}

#[test]
fn bad_input_gets_one_line_and_no_job() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let out = c.run(w, "sbatch", &[], Some("echo no interpreter\n"));
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("sbatch: error: This does not look like a batch script"),
        "{err}"
    );
    let out = c.run(w, "sbatch", &["-t", "soon", "--wrap", "true"], None);
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "sbatch: error: Invalid --time specification\n"
    );
    assert_eq!(out.status.code(), Some(255));
    let out = c.run(w, "squeue", &["-t", "bogus"], None);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("squeue: error: Invalid job state specified: bogus\n"),
        "{err}"
    );
    let out = c.run(w, "squeue", &["-j", "999"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(c.ok(w, "sacct", &["-X", "-n"]), "");
    // Each as Slurm 22.05 says it, and exits (measured on it).
    for (cmd, args, err, code) in [
        (
            "squeue",
            &["-h", "-u", "no-such-user-of-clemu"][..],
            "squeue: error: Invalid user: no-such-user-of-clemu\n\n",
            0,
        ),
        (
            "sacct",
            &["-j", "abc"][..],
            "sacct: fatal: Bad job/step specified: abc\n",
            1,
        ),
        (
            "sacct",
            &["-j", "1.x"][..],
            "sacct: fatal: Bad step specified: 1\n",
            1,
        ),
        (
            "sinfo",
            &["-h", "-o", "%P %Q"][..],
            "Invalid node format specification: Q\n",
            0,
        ),
        (
            "sacct",
            &["--units=X"][..],
            "sacct: error: Invalid unit type 'X'. Possible options are 'KMGTP'\n\
             sacct: fatal: Invalid unit type\n",
            1,
        ),
        (
            "sbatch",
            &["-n", "0", "--wrap", "true"][..],
            "sbatch: error: Invalid numeric value \"0\" for --ntasks.\n",
            1,
        ),
        (
            "sbatch",
            &["-a", "1000-1001", "--wrap", "true"][..],
            "sbatch: error: Batch job submission failed: Invalid job array specification\n",
            1,
        ),
        (
            "sbatch",
            &["--frobnicate", "--wrap", "true"][..],
            "sbatch: error: unexpected argument '--frobnicate' found\n",
            1,
        ),
        (
            "sbatch",
            &["--nice=5", "--wrap", "true"][..],
            "sbatch: error: --nice is an option of Slurm's that clemu does not take yet\n",
            1,
        ),
        (
            "squeue",
            &["--sort=S"][..],
            "squeue: error: --sort is an option of Slurm's that clemu does not take yet\n",
            1,
        ),
        (
            "sacct",
            &["-D"][..],
            "sacct: error: -D is an option of Slurm's that clemu does not take yet\n",
            1,
        ),
        (
            "sinfo",
            &["--frobnicate"][..],
            "sinfo: error: unexpected argument '--frobnicate' found\n",
            1,
        ),
        (
            "sbatch",
            &["--ntasks-per-node=2", "--wrap", "true"][..],
            "sbatch: error: CPU count per node can not be satisfied\n\
             sbatch: error: Batch job submission failed: Requested node configuration is not \
             available\n",
            1,
        ),
        (
            "sacct",
            &["-u", "no-such-user-of-clemu"][..],
            "sacct: error: Invalid user id: no-such-user-of-clemu\n",
            1,
        ),
        (
            "sbatch",
            &["--mail-type=END,FOO", "--wrap", "true"][..],
            "sbatch: error: Invalid --mail-type specification\n",
            255,
        ),
        // A command of Slurm's that clemu has not: its own, never the
        // real Slurm's that may be next on the PATH.
        (
            "salloc",
            &["-N", "1"][..],
            "salloc: error: clemu does not provide salloc; its Slurm commands are sbatch, \
             squeue, scancel, sacct, sinfo, scontrol, srun, sacctmgr, sshare\n",
            1,
        ),
    ] {
        let out = c.run(w, cmd, args, None);
        assert_eq!(String::from_utf8_lossy(&out.stderr), err, "{cmd} {args:?}");
        assert_eq!(out.status.code(), Some(code), "{cmd} {args:?}");
    }
    // An option of Slurm's in an #SBATCH line: refused with its line,
    // nothing submitted, the lines after it not taken for the script's.
    let out = c.run(
        w,
        "sbatch",
        &["--parsable"],
        Some("#!/bin/sh\n#SBATCH -J okname\n#SBATCH --mem-per-gpu=1G\n#SBATCH -t 5\ntrue\n"),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: error: script line 3: --mem-per-gpu is an option of Slurm's that clemu does not \
         take yet\n"
    );
    assert_eq!(out.status.code(), Some(1));
    // A script with DOS line breaks: refused as on Slurm, not failed on
    // its node.
    let out = c.run(
        w,
        "sbatch",
        &[],
        Some("#!/bin/bash\r\n#SBATCH -J dos\r\necho hi\r\n"),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n\
         sbatch: error: instead of expected UNIX line breaks (\\n).\n"
    );
    assert_eq!(out.status.code(), Some(1));
    // A value joined to its short option, in a line and on the command.
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-Jjoined", "-n1", "-t5", "--wrap", "true"],
    );
    assert_eq!(
        c.ok(
            w,
            "squeue",
            &["-h", "-t", "all", "-j", id.trim(), "-o", "%j %l"]
        ),
        "joined 5:00\n"
    );
    // Without CLEMU_CONF, the command says what to set.
    let out = Command::new(c.dir.path().join("bin/squeue"))
        .env_remove("CLEMU_CONF")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("CLEMU_CONF is not set"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn sbatch_takes_slurms_input_variables_between_the_script_and_the_command() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let script = "#!/bin/sh\n#SBATCH -J fromscript\n#SBATCH -t 3\nexit 3\n";
    let submit = |args: &[&str], env: &[(&str, &str)]| {
        let out = c.run_with(w, "sbatch", args, Some(script), env);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let held = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["--parsable", "--hold"];
        all.extend(args);
        let (code, id, err) = submit(&all, env);
        assert_eq!(code, Some(0), "{err}");
        c.ok(w, "squeue", &["-h", "-j", &id, "-o", "%j %l"])
    };
    // A variable overrides the script's line, the command's option the
    // variable (measured on Slurm 22.05).
    assert_eq!(
        held(&[], &[("SBATCH_JOB_NAME", "fromenv")]),
        "fromenv 3:00\n"
    );
    assert_eq!(
        held(&["-J", "fromcmd"], &[("SBATCH_JOB_NAME", "fromenv")]),
        "fromcmd 3:00\n"
    );
    assert_eq!(held(&[], &[("SBATCH_TIMELIMIT", "7")]), "fromscript 7:00\n");
    // A flag's value is not read: SBATCH_WAIT=0 waits, and returns the
    // script's status.
    let (code, _, _) = submit(&["-Q"], &[("SBATCH_WAIT", "0")]);
    assert_eq!(code, Some(3));
    // A memory option of the command's replaces the variables' memory
    // (the two at once would be refused).
    let (code, _, err) = submit(&["--hold", "--mem=100M"], &[("SBATCH_MEM_PER_CPU", "300")]);
    assert_eq!(code, Some(0), "{err}");
    // What the cluster refuses, or clemu does not take, names itself.
    let (code, _, err) = submit(&[], &[("SBATCH_PARTITION", "nosuch")]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "sbatch: error: invalid partition specified: nosuch\n\
         sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    );
    let (code, _, err) = submit(&[], &[("SBATCH_DEBUG", "1")]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "sbatch: error: SBATCH_DEBUG: --verbose is an option of Slurm's that clemu does not \
         take yet\n"
    );
}

/// `after` waits for a start, `?` for any one dependency, `aftercorr`
/// pairs the tasks of two arrays by index, as on Slurm.
#[test]
fn dependencies_on_starts_on_any_one_and_on_the_task_of_the_same_index() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 302.{}", std::process::id());
    let submit = |args: &[&str]| c.sbatch(w, args);
    let first = submit(&["--parsable", "-n", "2", "--wrap", &marker]);
    wait_shows(|| c.ok(w, "squeue", &["-h", "-o", "%t"]), "R\n");
    let second = submit(&["--parsable", "-n", "2", "--wrap", "sleep 1"]);
    let started = submit(&[
        "--parsable",
        "-d",
        &format!("after:{second}"),
        "--wrap",
        "true",
    ]);
    let either = submit(&[
        "--parsable",
        "-d",
        &format!("afterok:{first}?afterok:{second}"),
        "--wrap",
        "true",
    ]);
    let reasons = || c.ok(w, "squeue", &["-h", "-t", "PD", "-o", "%i %r"]);
    assert_eq!(
        reasons(),
        format!("{second} Resources\n{started} Dependency\n{either} Dependency\n")
    );
    // The first cancelled: the second starts, which lets the third go;
    // the fourth still has the second's end to wait for.
    c.ok(w, "scancel", &[&first]);
    assert_eq!(c.wait_over(w, &started), "COMPLETED|0:0");
    assert_eq!(c.wait_over(w, &second), "COMPLETED|0:0");
    assert_eq!(c.wait_over(w, &either), "COMPLETED|0:0");
    wait_gone(&marker);

    // Task 1 completes, task 2 fails: of the three tasks that follow
    // them, the second can never run, nor can the third, which has no
    // partner and so waits for the whole array to complete, as Slurm
    // 22.05's does.
    let pairs = submit(&[
        "--parsable",
        "-a",
        "1-2",
        "--wrap",
        "exit $((SLURM_ARRAY_TASK_ID - 1))",
    ]);
    let follow = submit(&[
        "--parsable",
        "-a",
        "1-3",
        "-d",
        &format!("aftercorr:{pairs}"),
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_over(w, &format!("{follow}_1")), "COMPLETED|0:0");
    wait_shows(
        reasons,
        &format!("{follow}_2 DependencyNeverSatisfied\n{follow}_3 DependencyNeverSatisfied\n"),
    );
    c.ok(w, "scancel", &[&follow]);
    // A singleton that any one other may stand for: the arrays' starts
    // are enough.
    let either = submit(&[
        "--parsable",
        "-J",
        "lone",
        "-d",
        &format!("singleton?after:{pairs}"),
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_over(w, &either), "COMPLETED|0:0");
}

/// `scontrol update NodeName=...`: drained nodes take no new job, a node
/// taken down loses its job, and RESUME brings both back, as on Slurm.
#[test]
fn an_administrator_drains_downs_and_resumes_nodes() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 303.{}", std::process::id());
    let update = |args: &[&str]| {
        let mut all = vec!["update"];
        all.extend_from_slice(args);
        c.run(w, "scontrol", &all, None)
    };
    let refused = update(&["NodeName=node1", "State=DRAIN"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
    );
    assert!(
        update(&["NodeName=node1", "State=DRAIN", "Reason=maintenance"])
            .status
            .success()
    );
    let nodes = || c.ok(w, "sinfo", &["-N", "-h", "-o", "%N %t %E"]);
    assert!(
        nodes().starts_with("node1 drain maintenance\n"),
        "{}",
        nodes()
    );
    // Why, by whom and since when, as Slurm's -R and scontrol say it;
    // -t picks nodes by state, a drained idle node being idle too.
    let user = Command::new("id").arg("-un").output().unwrap().stdout;
    let user = String::from_utf8(user).unwrap();
    let reasons = c.ok(w, "sinfo", &["-R", "-h"]);
    let (reason, when) = reasons.split_at(31);
    assert_eq!(reason, format!("maintenance          {:<10}", user.trim()));
    assert_eq!(&when[19..], " node1\n", "{reasons}");
    assert!(c
        .ok(w, "scontrol", &["show", "node", "node1"])
        .contains(&format!(
            "   Reason=maintenance [{}@{}]\n",
            user.trim(),
            &when[..19]
        )));
    assert_eq!(
        c.ok(w, "sinfo", &["-h", "-N", "-t", "drain", "-o", "%N"]),
        "node1\n"
    );
    assert_eq!(
        c.ok(w, "sinfo", &["-h", "-N", "-t", "IDLE", "-o", "%N %t"]),
        "node1 drain\nnode2 idle\n"
    );
    let bad = c.run(w, "sinfo", &["-t", "bogus"], None);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr)
        .starts_with("sinfo: error: Bad state string: \"bogus\"\n"));
    // Two jobs of a whole node: one runs on node2, the other waits.
    let submit = || c.sbatch(w, &["--parsable", "-n", "2", "--wrap", &marker]);
    let (one, two) = (submit(), submit());
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-t", "R", "-o", "%N"]),
        "node2\n",
    );
    // Down, node2's job is killed; nothing runs.
    assert!(update(&["NodeName=node2", "State=DOWN", "Reason=broken"])
        .status
        .success());
    wait_gone(&marker);
    assert!(nodes().contains("node2 down broken"), "{}", nodes());
    assert_eq!(c.ok(w, "squeue", &["-h", "-t", "R"]), "");
    // Its job goes back to the queue (the partition requeues on a lost
    // node) once its end is in (its processes may be gone a moment
    // before): both wait.
    wait_shows(|| c.ok(w, "squeue", &["-h", "-o", "%t"]), "PD\nPD\n");
    // Both nodes back: both jobs run, one per node.
    assert!(update(&["NodeName=node[1-2]", "State=RESUME"])
        .status
        .success());
    wait_shows(
        || {
            c.ok(w, "squeue", &["-h", "-t", "R", "-o", "%N"])
                .lines()
                .count()
                .to_string()
        },
        "2",
    );
    let unknown = update(&["NodeName=node9", "State=RESUME"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&unknown.stderr),
        "slurm_update error: Invalid node name specified\n"
    );
    let bogus = update(&["NodeName=node1", "State=bogus"]);
    assert_eq!(bogus.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bogus.stderr).starts_with("Invalid input: State=bogus\n"));
    c.ok(w, "scancel", &[&one, &two]);
    wait_gone(&marker);
}

#[test]
fn srun_outside_a_job_makes_its_allocation_and_answers_as_its_tasks() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    // A job id that is no running job's (set by hand, or an ended job's):
    // refused as Slurm's srun refuses it, not run here.
    let out = c.run_with(
        w,
        "srun",
        &["touch", "ran"],
        None,
        &[("SLURM_JOB_ID", "9999")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "srun: error: Unable to confirm allocation for job 9999: Invalid job id specified\n\
         srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 9999\n"
    );
    assert!(!w.join("ran").exists());
    // The memory asked is not told to the tasks, as Slurm's srun does not.
    let out = c.run(
        w,
        "srun",
        &["--mem=100M", "sh", "-c", "echo ${SLURM_MEM_PER_NODE-none}"],
        None,
    );
    assert_eq!(text(&out.stdout), "none\n", "{}", text(&out.stderr));
    // Its tasks' output and errors, labelled, on srun's own, and the job
    // named after the command.
    let out = c.run(
        w,
        "srun",
        &[
            "-n",
            "2",
            "-l",
            "sh",
            "-c",
            "echo $SLURM_PROCID $SLURM_STEPID $SLURM_JOB_NAME; echo warn >&2",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["0: 0 0 sh", "1: 1 0 sh"]);
    let mut errs: Vec<String> = text(&out.stderr).lines().map(String::from).collect();
    errs.sort();
    assert_eq!(errs, ["0: warn", "1: warn"]);

    // The step's exit status is srun's, said as Slurm says it, and the
    // job is accounted.
    let failed = c.run(w, "srun", &["-J", "three", "sh", "-c", "exit 3"], None);
    assert_eq!(failed.status.code(), Some(3));
    assert_eq!(
        text(&failed.stderr),
        "srun: error: node1: task 0: Exited with exit code 3\n"
    );
    let acct = c.ok(
        w,
        "sacct",
        &[
            "-X",
            "-P",
            "-n",
            "--name",
            "three",
            "--format",
            "JobName,State,ExitCode",
        ],
    );
    assert_eq!(acct, "three|FAILED|3:0\n");

    // An allocation that cannot be is refused at once.
    let refused = c.run(w, "srun", &["-N", "3", "true"], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).starts_with("srun: error: Unable to allocate resources: "),
        "{}",
        text(&refused.stderr)
    );
    // sbatch's refusal said as srun's, as Slurm's srun says it.
    let refused = c.run(w, "srun", &["-p", "nope", "true"], None);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        text(&refused.stderr),
        "srun: error: invalid partition specified: nope\nsrun: error: Unable to allocate \
         resources: Invalid partition name specified\n"
    );

    // One waits while another holds the cluster; a SIGTERM to the first
    // cancels its job, nothing of it is left, and the second runs.
    let marker = format!("sleep 304.{}", std::process::id());
    let holder = c.spawn(w, "srun", &["-n", "4", "sh", "-c", &marker]);
    wait_shows(|| c.ok(w, "squeue", &["-h", "-o", "%t"]), "R\n");
    let mut waiting = c.spawn(w, "srun", &["-J", "second", "echo", "ran"]);
    let mut said = std::io::BufReader::new(waiting.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut said, &mut first).unwrap();
    assert!(
        first.starts_with("srun: job ") && first.ends_with(" queued and waiting for resources\n"),
        "{first}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let held = within_a_minute(holder);
    assert_eq!(held.status.code(), Some(143), "{}", text(&held.stderr));
    assert!(
        text(&held.stderr).starts_with("srun: forcing job termination\n"),
        "{}",
        text(&held.stderr)
    );
    wait_gone(&marker);
    let second = within_a_minute(waiting);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut said, &mut rest).unwrap();
    assert!(second.status.success(), "{rest}");
    assert_eq!(text(&second.stdout), "ran\n");
    assert!(rest.ends_with(" has been allocated resources\n"), "{rest}");
    // No one reads its output any more: srun cancels the job, and ends.
    let marker = format!("reader-{}", std::process::id());
    let mut chatty = c.spawn(
        w,
        "srun",
        &[
            "sh",
            "-c",
            &format!("while :; do echo y; : {marker}; sleep 0.05; done"),
        ],
    );
    let mut first = String::new();
    let mut lines = std::io::BufReader::new(chatty.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut lines, &mut first).unwrap();
    assert_eq!(first, "y\n");
    drop(lines);
    let gone = within_a_minute(chatty);
    assert_eq!(gone.status.code(), Some(143), "{}", text(&gone.stderr));
    wait_gone(&marker);
    // -D: where the job runs.
    std::fs::create_dir(w.join("sub")).unwrap();
    let pwd = c.ok(w, "srun", &["-D", "sub", "pwd"]);
    assert_eq!(
        pwd.trim(),
        w.join("sub").canonicalize().unwrap().display().to_string()
    );
    // srun leaves nothing of its own in the cluster's directory.
    let left = std::fs::read_dir(c.dir.path().join("srun"))
        .unwrap()
        .count();
    assert_eq!(left, 0);
}

/// The child's output once it has ended; it fails the test, rather than
/// hang it, if that takes more than a minute.
fn within_a_minute(mut child: std::process::Child) -> Output {
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!(
                "still running after a minute: {:?}",
                child.wait_with_output()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn sbatch_wait_returns_the_jobs_status_and_squeue_me_shows_ones_own() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let waited = c.run(w, "sbatch", &["--wait", "--wrap", "exit 7"], None);
    assert_eq!(waited.status.code(), Some(7), "{}", text(&waited.stderr));
    assert!(
        text(&waited.stdout).starts_with("Submitted batch job "),
        "{}",
        text(&waited.stdout)
    );
    // A script ended by a signal: 1, as Slurm's sbatch says.
    let killed = c.run(
        w,
        "sbatch",
        &["-W", "-o", "/dev/null", "--wrap", "kill -9 $$"],
        None,
    );
    assert_eq!(killed.status.code(), Some(1));
    // An array: the highest of its tasks'.
    let array = c.run(
        w,
        "sbatch",
        &[
            "-W",
            "--parsable",
            "-o",
            "/dev/null",
            "-a",
            "1-3",
            "--wrap",
            "exit $SLURM_ARRAY_TASK_ID",
        ],
        None,
    );
    assert_eq!(array.status.code(), Some(3), "{}", text(&array.stderr));

    let marker = format!("sleep 305.{}", std::process::id());
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-o", "/dev/null", "--wrap", &marker],
    );
    let id = id.trim();
    wait_shows(
        || c.ok(w, "squeue", &["--me", "-h", "-o", "%i %t"]),
        &format!("{id} R\n"),
    );
    // The last of --me and -u wins, as on Slurm.
    assert_eq!(c.ok(w, "squeue", &["-h", "--me", "-u", "nobody"]), "");
    assert_eq!(
        c.ok(w, "squeue", &["-h", "-o", "%i", "-u", "nobody", "--me"]),
        format!("{id}\n")
    );
    // scancel --me cancels one's own; -u someone else's last, none.
    c.ok(w, "scancel", &["--me", "-u", "nobody"]);
    // A cancel is taken before scancel returns: it would be CG now.
    assert_eq!(c.ok(w, "squeue", &["-h", "-o", "%t", "-j", id]), "R\n");
    c.ok(w, "scancel", &["--me"]);
    wait_gone(&marker);
}

#[test]
fn a_cluster_named_by_m_heads_the_lists_and_an_unknown_one_is_refused_as_on_slurm() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Open OnDemand's way: sbatch -M, its id before the `;`, then squeue
    // -M, whose first two lines it skips.
    let id = c.ok(
        w,
        "sbatch",
        &["-M", "clemu", "--parsable", "-H", "--wrap", "true"],
    );
    let id = id.trim().strip_suffix(";clemu").unwrap().to_string();
    assert_eq!(
        c.ok(w, "squeue", &["-M", "CLEMU", "-o", "%i|%c|%h|%z"]),
        format!("CLUSTER: clemu\nJOBID|MIN_CPUS|OVER_SUBSCRIBE|S:C:T\n{id}|1|OK|*:*:*\n")
    );
    assert_eq!(
        c.ok(w, "squeue", &["--clusters=all", "-h", "-o", "%i"]),
        format!("{id}\n")
    );
    let said = c.ok(w, "sbatch", &["-M", "clemu", "-H", "--wrap", "true"]);
    assert!(
        said.starts_with("Submitted batch job ") && said.ends_with(" on cluster clemu\n"),
        "{said}"
    );
    assert!(c
        .ok(w, "sinfo", &["-M", "clemu"])
        .starts_with("CLUSTER: clemu\nPARTITION "));
    for program in ["squeue", "sinfo", "scancel", "sbatch"] {
        let out = c.run(
            w,
            program,
            &["-M", "nosuch", "--wrap", "true"][..if program == "sbatch" { 4 } else { 2 }],
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{program}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "{program}: error: No cluster 'nosuch' known by database.\n{program}: error: \
                 'nosuch' can't be reached now, or it is an invalid entry for --cluster.  Use \
                 'sacctmgr list clusters' to see available clusters.\n"
            )
        );
    }
    // sacct lists no job of a cluster it does not hold.
    let rows = |m: &str| {
        c.ok(
            w,
            "sacct",
            &["-M", m, "-X", "-n", "-P", "-j", &id, "-o", "JobID"],
        )
    };
    assert_eq!(rows("clemu"), format!("{id}\n"));
    assert_eq!(rows("other"), "");
}

#[test]
fn what_open_ondemand_reads_of_a_job_is_as_slurm_gives_it() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let held = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-H",
            "-n",
            "2",
            "--mem=512M",
            "--wrap",
            "true",
        ],
    );
    let held = held.trim();
    // An -O name Slurm 22.05 does not know (Open OnDemand asks ExcNodes):
    // said, and its field empty with its separator kept; the rest shown.
    let out = c.run(
        w,
        "squeue",
        &[
            "-j",
            held,
            "--noconvert",
            "-O",
            "JobID:|,ExcNodes:9|,MinMemory:|,tres-alloc:|,JobArrayID:|",
        ],
        None,
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "squeue: error: Invalid job format specification: ExcNodes\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "JOBID||MIN_MEMORY|TRES_ALLOC|JOBID|\n{held}||512M|cpu=2,mem=512M,node=1,billing=2|{held}|\n"
        )
    );
    // %all: every field, as Slurm 22.05's squeue lists them.
    let all = c.ok(w, "squeue", &["-j", held, "-o", "%all"]);
    assert_eq!(
        all.lines().next().unwrap(),
        "ACCOUNT|TRES_PER_NODE|MIN_CPUS|MIN_TMP_DISK|END_TIME|FEATURES|GROUP|OVER_SUBSCRIBE|\
         JOBID|NAME|COMMENT|TIME_LIMIT|MIN_MEMORY|REQ_NODES|COMMAND|PRIORITY|QOS|REASON||ST|\
         USER|RESERVATION|WCKEY|EXC_NODES|NICE|S:C:T|JOBID|EXEC_HOST|CPUS|NODES|DEPENDENCY|\
         ARRAY_JOB_ID|GROUP|SOCKETS_PER_NODE|CORES_PER_SOCKET|THREADS_PER_CORE|ARRAY_TASK_ID|\
         TIME_LEFT|TIME|NODELIST|CONTIGUOUS|PARTITION|PRIORITY|NODELIST(REASON)|START_TIME|\
         STATE|UID|SUBMIT_TIME|LICENSES|CORE_SPEC|SCHEDNODES|WORK_DIR"
    );
    // Its memory per node, as asked.
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", held, "-o", "%m"]), "512M\n");
    // sacct: the group, and what it asked with memory in --units.
    c.ok(w, "scontrol", &["release", held]);
    assert_eq!(c.wait_over(w, held), "COMPLETED|0:0");
    assert_eq!(
        c.ok(
            w,
            "sacct",
            &[
                "-P",
                "-n",
                "--units",
                "G",
                "-j",
                held,
                "-o",
                "JobID,Group,ReqMem,ReqTRES"
            ]
        ),
        format!("{held}|root|0.50G|billing=2,cpu=2,mem=0.50G,node=1\n{held}.batch|||\n")
    );
    // Memory no node has (they have 1000M) is refused, as Slurm refuses
    // it, per node or for a task's cores.
    for asked in [&["--mem=1G"][..], &["-c", "2", "--mem-per-cpu=600M"][..]] {
        let mut argv = asked.to_vec();
        argv.extend(["--wrap", "true"]);
        let out = c.run(w, "sbatch", &argv, None);
        assert_eq!(out.status.code(), Some(1), "{asked:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "sbatch: error: Memory specification can not be satisfied\nsbatch: error: Batch job \
             submission failed: Requested node configuration is not available\n"
        );
    }
}

#[test]
fn steps_asked_by_name_bad_ids_and_signals_and_the_config_are_as_on_slurm() {
    let c = Up::start(1, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // sacct -j JOB.STEP: that step's line alone; with -X, the job's.
    let id = c.ok(
        w,
        "sbatch",
        &[
            "--parsable",
            "-n",
            "2",
            "--wrap",
            "srun -n 1 true; srun -n 1 true",
        ],
    );
    let id = id.trim();
    assert_eq!(c.wait_over(w, id), "COMPLETED|0:0");
    let steps = |list: &str, x: bool| {
        let mut argv = vec!["-P", "-n", "-o", "JobID,State", "-j", list];
        if x {
            argv.push("-X");
        }
        c.ok(w, "sacct", &argv)
    };
    assert_eq!(
        steps(&format!("{id}.batch,{id}.1"), false),
        format!("{id}.batch|COMPLETED\n{id}.1|COMPLETED\n")
    );
    assert_eq!(steps(&format!("{id}.0"), true), format!("{id}|COMPLETED\n"));
    // Every field of Slurm's sacct is taken: those clemu has nothing for
    // (energy, averages over tasks) print empty, as where Slurm gathers
    // none; the job's own are the job line's.
    assert_eq!(
        c.ok(
            w,
            "sacct",
            &[
                "-P",
                "-n",
                "-j",
                id,
                "-o",
                "JobID,DerivedExitCode,Reason,AveRSS,ConsumedEnergy,Layout"
            ]
        ),
        format!(
            "{id}|0:0|None|||\n{id}.batch||||0|Unknown\n{id}.0||||0|Unknown\n\
             {id}.1||||0|Unknown\n"
        )
    );
    // scancel: bad ids, users and states said, nothing cancelled.
    for (argv, said) in [
        (&["0"][..], "scancel: error: Invalid job id 0\n"),
        (&["1_["][..], "scancel: error: Invalid job id 1_[\n"),
        (
            &["-u", "nosuchuser"][..],
            "scancel: error: Invalid user name: nosuchuser\n",
        ),
        (
            &["-t", "pd,r"][..],
            "Invalid job state specified: pd,r\nValid job states are PENDING, RUNNING, and \
             SUSPENDED\n",
        ),
    ] {
        let out = c.run(w, "scancel", argv, None);
        assert_eq!(out.status.code(), Some(1), "{argv:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), said, "{argv:?}");
    }
    // sbatch --signal: Slurm's forms taken, the rest refused.
    for good in ["usr1", "B:10", "R:USR1@30", "SIGUSR2@"] {
        let held = c.ok(
            w,
            "sbatch",
            &[
                "--parsable",
                "-H",
                &format!("--signal={good}"),
                "--wrap",
                "true",
            ],
        );
        c.ok(w, "scancel", &[held.trim()]);
    }
    // Numbers and files refused in Slurm's words, not clap's or Rust's.
    for (argv, said) in [
        (
            &["-n", "-3", "--wrap", "true"][..],
            "Invalid numeric value \"-3\" for --ntasks.",
        ),
        (
            &["-c", "x", "--wrap", "true"][..],
            "Invalid numeric value \"x\" for --cpus-per-task.",
        ),
        (&["nosuch.sh"][..], "Unable to open file nosuch.sh"),
    ] {
        let out = c.run(w, "sbatch", argv, None);
        assert_eq!(out.status.code(), Some(1), "{argv:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("sbatch: error: {said}\n"),
            "{argv:?}"
        );
    }
    for bad in ["FOO@10", "B:USR1@-5", "USR1@70000", "0", "X:USR1"] {
        let out = c.run(
            w,
            "sbatch",
            &[&format!("--signal={bad}"), "--wrap", "true"],
            None,
        );
        assert_eq!(out.status.code(), Some(255), "{bad}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "sbatch: error: Invalid --signal specification\n",
            "{bad}"
        );
    }
    // squeue -w: the jobs on those nodes; a node the cluster has not,
    // refused. scontrol show hostlist folds as Slurm's.
    let held = c.ok(w, "sbatch", &["--parsable", "--wrap", "sleep 30"]);
    let held = held.trim();
    let until = Instant::now() + Duration::from_secs(30);
    while c.ok(w, "squeue", &["-h", "-w", "node1", "-o", "%i"]).trim() != held {
        assert!(Instant::now() < until, "job {held} never ran on node1");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = c.run(w, "squeue", &["-w", "node9"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "squeue: error: Invalid node name node9\n"
    );
    c.ok(w, "scancel", &[held]);
    assert_eq!(
        c.ok(w, "scontrol", &["show", "hostlist", "node3,node1,node2"]),
        "node[3,1-2]\n"
    );
    assert_eq!(
        c.ok(
            w,
            "scontrol",
            &["show", "hostlistsorted", "node3,node1,node2"]
        ),
        "node[1-3]\n"
    );
    // scontrol show config: the keys tools read, as clemu is.
    let config = c.ok(w, "scontrol", &["show", "config"]);
    for line in [
        "AccountingStorageType   = accounting_storage/slurmdbd\n",
        "MaxArraySize            = 1001\n",
        "SchedulerType           = sched/backfill\n",
        "SelectTypeParameters    = CR_CORE_MEMORY\n",
        // The wait a cancelled job gets before SIGKILL (5 s: see the
        // script that ignores SIGTERM above), not the agents' whole grace.
        "KillWait                = 5 sec\n",
    ] {
        assert!(config.contains(line), "{line}: {config}");
    }
}

#[test]
fn a_step_of_fewer_tasks_than_the_jobs_nodes_gets_its_own_layout_as_on_slurm() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Each line as Slurm 22.05 writes it for this script.
    let script = "#!/bin/sh\n#SBATCH -N 2 -n 4\n\
                  srun -n 1 sh -c 'echo $SLURM_NNODES $SLURM_TASKS_PER_NODE \
                  $SLURM_STEP_TASKS_PER_NODE $SLURM_NODELIST $SLURM_JOB_NUM_NODES'\n\
                  srun -l --ntasks-per-node=1 true\n\
                  srun -n 2 --ntasks-per-node=1 true\n";
    std::fs::write(w.join("layout.sh"), script).unwrap();
    let id = c.ok(
        w,
        "sbatch",
        &["--parsable", "-o", "layout.out", "layout.sh"],
    );
    assert_eq!(c.wait_over(w, id.trim()), "COMPLETED|0:0");
    assert_eq!(
        std::fs::read_to_string(w.join("layout.out")).unwrap(),
        "srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n\
         1 1 1 node[1-2] 2\n\
         srun: Warning: can't honor --ntasks-per-node set to 1 which doesn't match the \
         requested tasks 4 with the number of requested nodes 2. Ignoring --ntasks-per-node.\n"
    );
}

/// `up`, `down` and the job files of a cluster whose controller was
/// killed (SIGKILL, or a host that crashed): `down` says it was not
/// running, `up` starts again at once, and the files of the jobs the
/// killed controller's agents had started are removed.
#[test]
fn a_killed_cluster_is_down_comes_up_again_and_leaves_no_job_files() {
    let bin = env!("CARGO_BIN_EXE_clemu-slurm");
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let jobs_root = tmp
        .path()
        .join(format!("clemu-jobs-{}", nix::unistd::getuid()));
    let clemu = |args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .arg("--dir")
            .arg(dir.path())
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let up = || {
        let (ok, err) = clemu(&["up", "--nodes", "2", "--cpus", "1"]);
        assert!(ok, "up: {err}");
    };
    let controller = || -> i32 {
        std::fs::read_to_string(dir.path().join("controller.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // Files of jobs started by the agents of the controller `pid`
    // (`HOST-PID-JOB-LAUNCH`).
    let files_of = |pid: i32| {
        std::fs::read_dir(&jobs_root).map_or(0, |d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .rsplit('-')
                        .nth(2)
                        .is_some_and(|p| p == pid.to_string())
                })
                .count()
        })
    };
    let kill = |pid: i32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };

    up();
    let first = controller();
    for _ in 0..2 {
        let out = Command::new(dir.path().join("bin/sbatch"))
            .args(["-o", "/dev/null", "--wrap", "sleep 60"])
            .current_dir(tmp.path())
            .env("CLEMU_CONF", dir.path().join("cluster.toml"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let until = Instant::now() + Duration::from_secs(20);
    while files_of(first) < 2 {
        assert!(Instant::now() < until, "the two jobs never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(first);
    // At once: the killed controller may not even be reaped yet.
    up();
    let second = controller();
    assert_ne!(first, second);
    let until = Instant::now() + Duration::from_secs(20);
    while files_of(first) > 0 {
        assert!(
            Instant::now() < until,
            "the killed cluster's job files stay"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Killed again: `down` says the cluster was not running, and is no error.
    kill(second);
    let until = Instant::now() + Duration::from_secs(20);
    while std::fs::read(format!("/proc/{second}/cmdline")).is_ok_and(|c| !c.is_empty()) {
        assert!(Instant::now() < until, "a killed controller still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (ok, err) = clemu(&["down"]);
    assert!(ok, "down: {err}");
    assert!(
        err.contains(&format!(
            "was not running (its controller, pid {second}, is gone)"
        )),
        "{err}"
    );
    assert!(!dir.path().join("controller.pid").exists());
    up();
    let (ok, err) = clemu(&["down"]);
    assert!(ok && err.contains("is down"), "down: {err}");
}

/// `-w` and `-x` as Slurm takes them: every node named and more from
/// the first named on, none excluded, refusals in Slurm's words, and a
/// job waiting for a drained node it names says so and holds up no one.
#[test]
fn named_nodes_are_given_excluded_ones_never_and_a_drained_one_is_waited_for() {
    let c = Up::start(4, 4);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Where a real job ran, and what it was told.
    let ran = |args: &[&str]| {
        let mut all = vec!["--parsable", "-o", "out.%j"];
        all.extend_from_slice(args);
        all.extend(["--wrap", "echo $SLURM_JOB_NODELIST $SLURM_TASKS_PER_NODE"]);
        let id = c.sbatch(w, &all);
        assert_eq!(c.wait_over(w, &id), "COMPLETED|0:0");
        std::fs::read_to_string(w.join(format!("out.{id}"))).unwrap()
    };
    assert_eq!(ran(&["-w", "node4", "-N", "2"]), "node[3-4] 1(x2)\n");
    assert_eq!(ran(&["-w", "node1,node3", "-N", "3"]), "node[1-3] 1(x3)\n");
    assert_eq!(ran(&["-w", "node2", "-n", "6"]), "node[2-3] 4,2\n");
    assert_eq!(ran(&["--nodelist=node[2-3]"]), "node[2-3] 1(x2)\n");
    assert_eq!(ran(&["-x", "node[1-2]", "-N", "2"]), "node[3-4] 1(x2)\n");
    assert_eq!(ran(&["--exclude=node1", "-w", "node3"]), "node3 1\n");
    // Fewer tasks than nodes named: the first so many, as Slurm's sbatch.
    let out = c.run(
        w,
        "sbatch",
        &[
            "--parsable",
            "-o",
            "/dev/null",
            "-n",
            "1",
            "-w",
            "node[3-4]",
            "--wrap",
            "true",
        ],
        None,
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n"
    );
    let id = String::from_utf8(out.stdout).unwrap();
    let shown = c.ok(w, "scontrol", &["show", "job", id.trim()]);
    assert!(
        shown.contains("   ReqNodeList=node3 ExcNodeList=(null)\n"),
        "{shown}"
    );
    for (args, code, said) in [
        (
            &["-w", "node9"][..],
            1,
            "Batch job submission failed: Invalid node name specified",
        ),
        (
            &["-x", "node[1-4]"],
            1,
            "Batch job submission failed: Requested node configuration is not available",
        ),
        (
            &["-w", "node1", "-x", "node1"],
            1,
            "Batch job submission failed: Invalid node name specified",
        ),
        (
            &["-w", "node[1-2]", "-N", "1"],
            1,
            "invalid number of nodes (-N 2-1)",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend(["--wrap", "true"]);
        let out = c.run(w, "sbatch", &all, None);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("sbatch: error: {said}\n"),
            "{args:?}"
        );
    }
    // node2 drained: a job naming it waits, and one behind it starts.
    c.ok(
        w,
        "scontrol",
        &["update", "nodename=node2", "state=drain", "reason=fix"],
    );
    let waits = c.sbatch(
        w,
        &[
            "--parsable",
            "-o",
            "/dev/null",
            "-w",
            "node2",
            "--wrap",
            "true",
        ],
    );
    let marker = format!("sleep 303.{}", std::process::id());
    let behind = c.sbatch(
        w,
        &[
            "--parsable",
            "-o",
            "/dev/null",
            "-x",
            "node1",
            "--wrap",
            &marker,
        ],
    );
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-o", "%i %t %R %n %x"]),
        &format!(
            "{waits} PD (ReqNodeNotAvail, UnavailableNodes:node2) node2 \n{behind} R node3  node1\n"
        ),
    );
    c.ok(w, "scontrol", &["update", "nodename=node2", "state=resume"]);
    assert_eq!(c.wait_over(w, &waits), "COMPLETED|0:0");
    c.ok(w, "scancel", &[&behind]);
    wait_gone(&marker);
}

/// Dates in the form `SLURM_TIME_FORMAT` asks, in every command, as
/// tools that set it read them (ReFrame reads sacct's in `%s`).
#[test]
fn dates_come_as_slurm_time_format_asks() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let id = c.sbatch(w, &["--parsable", "-o", "/dev/null", "--wrap", "true"]);
    let id = id.trim();
    c.wait_over(w, id);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let with = |format: &str, cmd: &str, args: &[&str]| {
        let out = c.run_with(w, cmd, args, None, &[("SLURM_TIME_FORMAT", format)]);
        assert!(out.status.success());
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (out, _) = with(
        "%s",
        "sacct",
        &["-X", "-P", "-n", "-j", id, "-o", "Submit,End"],
    );
    for field in out.trim().split('|') {
        let t: i64 = field.parse().unwrap_or_else(|_| panic!("{out}"));
        assert!((now - 120..=now).contains(&t), "{out}");
    }
    let (out, _) = with("%Y", "scontrol", &["show", "job", id]);
    let year = &text_date(now)[..4];
    assert!(out.contains(&format!(" SubmitTime={year} ")), "{out}");
    let (out, err) = with(
        "bogus",
        "sacct",
        &["-X", "-P", "-n", "-j", id, "-o", "JobID,End"],
    );
    assert_eq!(err, "sacct: error: invalid SLURM_TIME_FORMAT = 'bogus'\n");
    assert_eq!(
        out.trim().split('|').nth(1).map(str::len),
        Some(19),
        "{out}"
    );
}

/// The local date of `s` as sacct writes it by default.
fn text_date(s: i64) -> String {
    slurm::text::date(s)
}

/// `squeue --start` as Slurm's: pending jobs only, soonest first, each
/// with when the queue run forward starts it and on which nodes, held
/// jobs without a start.
#[test]
fn squeue_start_shows_when_and_where_pending_jobs_are_expected_to_start() {
    let c = Up::start(4, 4);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marker = format!("sleep 304.{}", std::process::id());
    let submit = |args: &[&str]| {
        let mut all = vec!["--parsable", "-o", "/dev/null"];
        all.extend_from_slice(args);
        all.extend(["--wrap", &marker]);
        c.sbatch(w, &all).trim().to_string()
    };
    let running: Vec<String> = (0..4).map(|_| submit(&["-n", "4", "-t", "5"])).collect();
    let p1 = submit(&["-n", "4", "-t", "10", "-J", "p1"]);
    let p2 = submit(&["-n", "8", "-t", "10", "-J", "p2"]);
    let p3 = submit(&["-n", "2", "-J", "p3"]);
    let p4 = submit(&["-n", "2", "-H", "-J", "p4"]);
    for id in &running {
        wait_shows(|| c.ok(w, "squeue", &["-h", "-j", id, "-o", "%t"]), "R\n");
    }
    // In seconds since the epoch, as SLURM_TIME_FORMAT=%s gives them.
    let seconds = |args: &[&str]| -> Vec<i64> {
        let out = c.run_with(w, "squeue", args, None, &[("SLURM_TIME_FORMAT", "%s")]);
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap_or_else(|_| panic!("{l:?}")))
            .collect()
    };
    let mut ends = seconds(&["-h", "-t", "R", "-o", "%S"]);
    ends.sort_unstable();
    for e in &mut ends {
        *e += 300;
    }
    let out = c.ok(w, "squeue", &["--start"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES \
         SCHEDNODES           NODELIST(REASON)"
    );
    // As the running jobs end at their five minutes: p1 on the first
    // node free, p2 once two more are, p3 (no limit: it must not delay
    // p2) on the last (all at once when they started in one second).
    let at = |id: &str| seconds(&["--start", "-h", "-j", id, "-o", "%S"])[0];
    for (id, name, nodes, sched, end) in [
        (&p1, "p1", "1", "node1", ends[0]),
        (&p2, "p2", "2", "node[2-3]", ends[2]),
        (&p3, "p3", "1", "node4", ends[3]),
    ] {
        // (A start's second and its instant's may differ by one.)
        assert!((at(id) - end).abs() <= 1, "{id}: {} for {end}", at(id));
        let line = lines
            .iter()
            .find(|l| l.contains(&format!(" {name} ")))
            .unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&words[6..8], [nodes, sched], "{line}");
    }
    // Soonest first: the held job, without a start, last.
    assert!(
        lines[4].contains(" p4 ") && lines[4].contains(" N/A "),
        "{out}"
    );
    assert!(lines[4].trim_start().starts_with(&p4), "{out}");
    assert_eq!(lines.len(), 5, "{out}");
    c.ok(w, "scancel", &["-u", &slurm::text::user_name()]);
    wait_gone(&marker);
}

/// A date longer than Slurm's buffers is cut as Slurm cuts it: squeue's
/// and scontrol's at 31 bytes, sacct's at its field's width, even with
/// `-P`.
#[test]
fn a_long_date_is_cut_as_slurm_cuts_it() {
    let c = Up::start(1, 1);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let held = c.sbatch(
        w,
        &["--parsable", "-H", "-o", "/dev/null", "--wrap", "true"],
    );
    let held = held.trim();
    let long = [("SLURM_TIME_FORMAT", "%FT%T %FT%T")];
    let out = |cmd: &str, args: &[&str]| {
        String::from_utf8(c.run_with(w, cmd, args, None, &long).stdout).unwrap()
    };
    let v = out("squeue", &["-h", "-j", held, "-o", "%V"]);
    assert_eq!(v.trim_end().len(), 31, "{v:?}");
    let p = out(
        "sacct",
        &["-X", "-P", "-n", "-j", held, "-o", "Submit,Submit%40"],
    );
    let (narrow, wide) = p.trim_end().split_once('|').unwrap();
    assert_eq!(narrow.len(), 19, "{p:?}");
    assert!(wide.len() == 39 && wide.starts_with(narrow), "{p:?}");
    c.ok(w, "scancel", &[held]);
}

#[test]
fn scancel_of_a_step_ends_that_step_alone_and_its_srun_says_so_as_on_slurm() {
    let c = Up::start(2, 2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let script = "#!/bin/sh\n\
                  srun -n 2 sh -c 'touch started-$SLURM_PROCID; exec env -u SLURM_STEP_ID sleep 300'\n\
                  echo \"srun said $?\"\n\
                  srun -n 1 echo after\n";
    let id = c.run(w, "sbatch", &["--parsable", "-n", "2"], Some(script));
    assert!(
        id.status.success(),
        "{}",
        String::from_utf8_lossy(&id.stderr)
    );
    let id = String::from_utf8(id.stdout).unwrap().trim().to_string();
    let until = Instant::now() + Duration::from_secs(60);
    while !(w.join("started-0").exists() && w.join("started-1").exists()) {
        assert!(Instant::now() < until, "the step never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A step the job does not run: nothing to end, as nothing is said;
    // and filters with it name no job of their own.
    let other = c.sbatch(w, &["--parsable", "--wrap", "sleep 300"]);
    wait_shows(
        || c.ok(w, "squeue", &["-h", "-j", &other, "-o", "%t"]),
        "R\n",
    );
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    c.ok(w, "scancel", &["-u", &me, &format!("{id}.5")]);
    assert_eq!(c.ok(w, "squeue", &["-h", "-j", &other, "-o", "%t"]), "R\n");
    c.ok(w, "scancel", &[&other]);
    // Its tasks are found below its srun, whatever their environment.
    c.ok(w, "scancel", &[&format!("{id}.0")]);
    assert_eq!(c.wait_over(w, &id), "COMPLETED|0:0");
    let out = std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    // KillWait (5 s) and two, as Slurm's srun says it.
    assert_eq!(
        lines[0], "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.",
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "slurmstepd: error: *** STEP {id}.0 ON node1 CANCELLED AT "
        )) && lines[1].ends_with(" ***"),
        "{out}"
    );
    assert_eq!(
        lines[2..],
        [
            "srun: error: node1: tasks 0-1: Killed",
            "srun said 137",
            "after"
        ],
        "{out}"
    );
    let uid = nix::unistd::getuid();
    assert_eq!(
        c.ok(
            w,
            "sacct",
            &["-P", "-n", "-j", &id, "-o", "JobID,State,ExitCode"]
        ),
        format!(
            "{id}|COMPLETED|0:0\n{id}.batch|COMPLETED|0:0\n{id}.0|CANCELLED by {uid}|0:9\n\
             {id}.1|COMPLETED|0:0\n"
        )
    );
    // A job that is not there: Slurm's words and status.
    let gone = c.run(w, "scancel", &["999999.0"], None);
    assert_eq!(
        String::from_utf8_lossy(&gone.stderr),
        "scancel: error: Kill job error on job step id 999999.0: Invalid job id specified\n"
    );
    assert_eq!(gone.status.code(), Some(1));
}
