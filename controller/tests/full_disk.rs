//! A full disk under the controller's state: what a client is told, what
//! the log says, and that nothing acknowledged is lost.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted on `at`, unmounted when dropped; `None`
/// where this process may not mount one (not root, or a container's).
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path, size: &str) -> Option<Mounted> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .unwrap();
        out.status.success().then(|| Mounted(at.to_path_buf()))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
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
        let disk = tempfile::tempdir().unwrap();
        let Some(_mounted) = Mounted::tmpfs(disk.path(), "1m") else {
            eprintln!("skipped: mounting a small tmpfs needs root (as .ci/run has)");
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
