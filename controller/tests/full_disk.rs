//! A full disk under the controller's state: what a client is told, what
//! the log says, and that nothing acknowledged is lost.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// A 1 MiB tmpfs on a directory of its own, unmounted, then the directory
/// removed, when dropped. `None` where this process may not mount one
/// (not root, or a container's): the test says it skipped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .output()
            .unwrap();
        if !out.status.success() {
            eprintln!("skipped: mounting a small tmpfs needs root (as .ci/run has)");
            return None;
        }
        Some(SmallDisk(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// Fills the file system of `dir` with `dir/filler` until it is full.
fn fill(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![7u8; 4096];
    while f.write_all(&chunk).is_ok() {}
}

#[test]
fn a_full_disk_refuses_new_jobs_says_so_once_and_loses_nothing_acknowledged() {
    // Answers wait for the sync, or only for the write: the same either way.
    for sync in ["answer", "background"] {
        // The disk outlives the cluster, whose directory links to it: the
        // controller is gone before it is unmounted.
        let Some(disk) = SmallDisk::mount() else {
            return;
        };
        full_disk(sync, disk.path());
    }
}

fn full_disk(sync: &str, disk: &Path) {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(disk, dir.path().join("state")).unwrap();
    // Cores to spare: a job submitted starts at once, unless the
    // controller holds its passes.
    let text = config_text_with(
        dir.path(),
        "vn1",
        64,
        true,
        &format!("journal_sync = \"{sync}\""),
        &format!("127.0.0.1:{}", free_port()),
        2000,
    );
    let mut c = Cluster::start_text(dir, &text);
    let submit = || c.ctl(&["submit", "--cores", "1", "--runtime", "1000"]);
    let mut acknowledged: Vec<u64> = c.submit(&["--cores", "1", "--runtime", "1000"]);
    c.wait_state(1, "running");
    c.wait_for("job 1's process", || !c.pids(1).is_empty());

    // The disk fills. The journal's last page may still take a few jobs:
    // each is acknowledged, and on disk.
    fill(disk);
    let mut refusals = Vec::new();
    for _ in 0..300 {
        let out = submit();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            assert!(refusals.is_empty(), "acknowledged after a refusal: {out:?}");
            acknowledged.push(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap());
        } else {
            refusals.push(err);
        }
        if refusals.len() == 20 {
            break;
        }
    }
    assert_eq!(refusals.len(), 20, "the disk never filled");
    // The submission that met the full disk was queued before the write
    // failed: its answer says so, with its job, rather than that nothing
    // was submitted.
    let queued_anyway = acknowledged.last().unwrap() + 1;
    assert!(
        refusals[0].contains(&format!(
            "job {queued_anyway} is queued, but not safely on disk"
        )) && refusals[0].contains("No space left on device"),
        "{}",
        refusals[0]
    );
    // Every one after it is refused before it is acted on.
    for r in &refusals[1..] {
        assert!(
            r.contains("no job submitted: the controller cannot write its journal")
                && r.contains("No space left on device"),
            "{r}"
        );
    }
    // Nothing starts meanwhile, though cores are free: its start could
    // not be journaled.
    assert_eq!(c.state(queued_anyway), "pending");
    // A cancel is made, and said not to be on disk, but no agent hears
    // of it before it is written: job 1's process lives on.
    let pid = c.pids(1)[0];
    let out = c.ctl(&["cancel", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not safely on disk"), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        proc_state(pid).is_some_and(|s| s != 'Z'),
        "job 1's process heard of a cancel the journal does not hold"
    );
    assert_eq!(c.state(queued_anyway), "pending");
    // One line in the log for twenty failed commits, and the controller
    // still answers, and says why it takes nothing.
    let said = |what: &str| c.log().lines().filter(|l| l.contains(what)).count();
    assert_eq!(said("No space left on device"), 1, "{}", c.log());
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert_eq!(stats["submitted"], acknowledged.len() as u64 + 1);
    let why = stats["journal_error"].as_str().unwrap_or_default();
    assert!(why.contains("No space left on device"), "{stats}");

    // Room again: the job kept in memory is written, and submissions are
    // taken at once.
    std::fs::remove_file(disk.join("filler")).unwrap();
    let after = c.submit(&["--cores", "1", "--runtime", "1000"]);
    assert_eq!(after, [queued_anyway + 1]);
    assert_eq!(said("writing the journal works again"), 1, "{}", c.log());
    // The cancel, written now, reaches job 1; the job queued meanwhile
    // starts.
    c.wait_state(1, "cancelled");
    c.wait_state(queued_anyway, "running");
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    assert!(stats["journal_error"].is_null(), "{stats}");

    // After a crash, every job acknowledged is there, the one queued
    // anyway too, and none of those refused.
    c.kill9();
    c.restart();
    let ids = queue_ids(&c.ok(&["queue", "--all", "--format", "json"]));
    let mut want = acknowledged.clone();
    want.extend([queued_anyway, queued_anyway + 1]);
    assert_eq!(ids, want);
}

/// Fills the disk under the record file `disk/jobs.rec`, and the page it
/// ends in but `room` bytes (a tmpfs gives room by pages, and a record
/// file's last page has room for a few more records): stray bytes, which
/// readers skip. With less room than a record takes, the next record is
/// cut short.
fn fill_records(disk: &Path, room: usize) {
    // SAFETY: sysconf(3) reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let path = disk.join("jobs.rec");
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let free = page - len % page;
    f.write_all(&vec![0u8; (free + page - room) % page])
        .unwrap();
    fill(disk);
}

/// The record file alone on a full disk, its records from an agent on
/// another "host": each record waits in the controller's memory, and its
/// agent keeps it until the controller has it on disk, so that neither
/// the outage nor a crash during it loses one.
#[test]
fn records_that_cannot_be_written_wait_and_their_agent_keeps_them() {
    let Some(small) = SmallDisk::mount() else {
        return;
    };
    let disk = small.path();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(disk, dir.path().join("records")).unwrap();
    let text = config_text_with(
        dir.path(),
        "rn[1-2]",
        4,
        false,
        "",
        &format!("127.0.0.1:{}", free_port()),
        2000,
    );
    let mut c = Cluster::start_text_remote(dir, &text);
    let mut agent = spawn_agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    // Records as the file holds them, each job's counted: a write the
    // full disk cut short leaves a torn frame, which readers skip.
    let counts = || {
        let bytes = std::fs::read(disk.join("jobs.rec")).unwrap_or_default();
        let mut n = std::collections::BTreeMap::<u64, usize>::new();
        for r in formats::record::decode_all(&bytes).0 {
            *n.entry(r.id).or_default() += 1;
        }
        n
    };
    let records_error = |c: &Cluster| {
        json_of(&c.ok(&["stats", "--format", "json"]))["records_error"]
            .as_str()
            .map(str::to_string)
    };
    let before = c.submit(&["--cores", "1", "--runtime", "0.2"]);
    c.wait_for("the first record", || counts().contains_key(&before[0]));

    // Jobs end while the disk is full: their records are not in the file,
    // and stats say why. The first is cut short by the last bytes there
    // were.
    fill_records(disk, 40);
    let cut = std::fs::metadata(disk.join("jobs.rec")).unwrap().len() as usize;
    let during = c.submit(&["--cores", "1", "--runtime", "0.2", "--count", "3"]);
    for &id in &during {
        c.wait_state(id, "completed");
    }
    c.wait_for("stats to say records wait", || {
        records_error(&c).is_some_and(|e| e.contains("No space left on device"))
    });
    let held = counts();
    assert!(during.iter().all(|id| !held.contains_key(id)), "{held:?}");
    let said = |c: &Cluster, what: &str| c.log().lines().filter(|l| l.contains(what)).count();
    // Said once (again a minute later on a slow machine), not at every
    // try.
    let n = said(&c, "cannot write records");
    assert!((1..=2).contains(&n), "{}", c.log());

    // The controller dies with them in memory; the disk has room again
    // and the controller comes back: the agent, registering again, sends
    // the records it kept, and each is written once.
    c.kill9();
    std::fs::remove_file(disk.join("filler")).unwrap();
    c.restart();
    c.wait_for("the records kept by the agent", || {
        let n = counts();
        during.iter().all(|id| n.contains_key(id))
    });

    // Full again, with no restart: written once there is room, and stats
    // say so.
    fill_records(disk, 40);
    let cut_again = std::fs::metadata(disk.join("jobs.rec")).unwrap().len() as usize;
    let more = c.submit(&["--cores", "1", "--runtime", "0.2", "--count", "2"]);
    for &id in &more {
        c.wait_state(id, "completed");
    }
    c.wait_for("stats to say records wait", || records_error(&c).is_some());
    std::fs::remove_file(disk.join("filler")).unwrap();
    c.wait_for("the records written from memory", || {
        let n = counts();
        more.iter().all(|id| n.contains_key(id))
    });
    c.wait_for("stats to clear", || records_error(&c).is_none());
    assert_eq!(
        said(&c, "writing the record file works again"),
        1,
        "{}",
        c.log()
    );

    // Each time, the record cut short is there, its 40 bytes, then zeros
    // to the length its header claims (the first time, written by the
    // controller that came back), then the record whole: a reader that
    // skips the torn frame finds the whole one past it, however large.
    use formats::record::{frame_len, MAGIC};
    let bytes = std::fs::read(disk.join("jobs.rec")).unwrap();
    for cut in [cut, cut_again] {
        assert_eq!(bytes[cut..cut + 4], MAGIC);
        let claimed = frame_len(&bytes[cut..]).unwrap();
        assert!(claimed > 40, "{claimed}");
        assert!(bytes[cut + 40..cut + claimed].iter().all(|&b| b == 0));
        assert_eq!(bytes[cut + claimed..cut + claimed + 4], MAGIC);
    }
    // Every job, once.
    let n = counts();
    for id in before.iter().chain(&during).chain(&more) {
        assert_eq!(n.get(id), Some(&1), "records of job {id}: {n:?}");
    }
    c.ok(&["shutdown"]);
    assert!(agent.wait().unwrap().success());
}

/// A shutdown while the journal cannot be written: the controller stops
/// in its usual time, and no job process is left behind, though the
/// orders it held (a cancel) never went out.
#[test]
fn a_shutdown_on_a_full_disk_stops_every_job_and_the_controller() {
    let Some(disk) = SmallDisk::mount() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(disk.path(), dir.path().join("state")).unwrap();
    let text = config_text(dir.path(), "vn[1-2]", 4, true, "max_jobs = 3");
    let mut c = Cluster::start_text(dir, &text);
    let ids = c.submit(&["--cores", "4", "--runtime", "1000", "--count", "2"]);
    for &id in &ids {
        c.wait_for("the jobs' processes", || !c.pids(id).is_empty());
    }
    let pids: Vec<i32> = ids.iter().map(|&id| c.pids(id)[0]).collect();
    // A third job, which waits: the queue is full to `max_jobs`.
    c.submit(&["--cores", "1", "--runtime", "1"]);
    fill(disk.path());
    // The journal's last page may still take a few changes.
    let mut drained = false;
    c.wait_for("the full disk to be met", || {
        drained = !drained;
        let out = c.ctl(&[if drained { "drain" } else { "undrain" }, "vn2"]);
        String::from_utf8_lossy(&out.stderr).contains("not safely on disk")
    });
    // A queue full to `max_jobs` on a full disk: a submission is refused
    // as any is then, not held for room that no pass can make.
    let out = Command::new("timeout")
        .arg("10")
        .arg(binary("controller"))
        .arg("--config")
        .arg(&c.config)
        .args(["submit", "--cores", "1", "--runtime", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write its journal"), "{out:?}");

    let out = c.ctl(&["cancel", &ids[0].to_string()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not safely on disk"),
        "{out:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        proc_state(pids[0]).is_some_and(|s| s != 'Z'),
        "the cancel went out"
    );

    let asked = std::time::Instant::now();
    c.ok(&["shutdown"]);
    let status = loop {
        if let Some(s) = c.serve.try_wait().unwrap() {
            break s;
        }
        // kill_grace_ms (2 s) and the 5 s the controller gives agents.
        assert!(
            asked.elapsed().as_secs() < 20,
            "the controller is still up\n{}",
            c.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}\n{}", c.log());
    for pid in pids {
        assert!(
            proc_state(pid).is_none_or(|s| s == 'Z'),
            "process {pid} outlived the shutdown"
        );
    }
}
