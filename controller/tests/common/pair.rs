//! A primary and its backup: two real `controller serve` processes of one
//! config on loopback, each with its own state directory under `dir`
//! (`state0`, `state1`), their logs beside it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{binary, json_of};

pub struct Pair {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub addrs: [String; 2],
    pub serve: [Option<Child>; 2],
    /// An agent process of the test's, stopped with the controllers.
    pub agent: Option<Child>,
    /// Removed last, if the pair owns its directory.
    _tmp: Option<tempfile::TempDir>,
}

impl Pair {
    /// The pair's config, `text` of its directory and addresses, written
    /// to `dir`; no controller started yet.
    pub fn configure(
        dir: PathBuf,
        addrs: [String; 2],
        text: impl Fn(&Path, &[String; 2]) -> String,
    ) -> Pair {
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("cluster.toml");
        std::fs::write(&config, text(&dir, &addrs)).unwrap();
        Pair {
            dir,
            config,
            addrs,
            serve: [None, None],
            agent: None,
            _tmp: None,
        }
    }

    /// [`Pair::configure`] in a directory of its own, on free ports.
    pub fn in_temp_dir(text: impl Fn(&Path, &[String; 2]) -> String) -> Pair {
        let tmp = tempfile::tempdir().unwrap();
        let addrs = [0, 1].map(|_| format!("127.0.0.1:{}", super::free_port()));
        let mut p = Pair::configure(tmp.path().to_path_buf(), addrs, text);
        p._tmp = Some(tmp);
        p
    }

    pub fn log_file(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap()
    }

    pub fn state_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("state{i}"))
    }

    /// Starts controller `i` and waits until it answers.
    pub fn serve(&mut self, i: usize) {
        let child = Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(["serve", "--listen", &self.addrs[i], "--state-dir"])
            .arg(self.state_dir(i))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file(&format!("serve{i}")))
            .spawn()
            .unwrap();
        self.serve[i] = Some(child);
        self.wait_for("the controller to listen", |p| {
            p.ctl(i, &["stats"]).status.success()
        });
    }

    /// A client command to controller `i` alone.
    pub fn ctl(&self, i: usize, args: &[&str]) -> Output {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(["--addr", &self.addrs[i]])
            .args(args)
            .output()
            .unwrap()
    }

    /// [`Pair::ctl`], which must succeed: its standard output.
    pub fn ok(&self, i: usize, args: &[&str]) -> String {
        let out = self.ctl(i, args);
        assert!(
            out.status.success(),
            "controller {i} {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn stats(&self, i: usize) -> serde_json::Value {
        json_of(&self.ok(i, &["stats", "--format", "json"]))
    }

    pub fn pid(&self, i: usize) -> i32 {
        self.serve[i].as_ref().unwrap().id() as i32
    }

    pub fn signal(&self, i: usize, sig: i32) {
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(self.pid(i), sig) }, 0);
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut c) = self.serve[i].take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Every log of the pair's directory.
    pub fn logs(&self) -> String {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.retain(|p| p.extension().is_some_and(|e| e == "log"));
        names.sort();
        names
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(n).unwrap_or_default();
                format!("--- {}\n{text}", n.display())
            })
            .collect()
    }

    pub fn wait_for(&self, what: &str, mut ok: impl FnMut(&Pair) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(40);
        while !ok(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for c in self.serve.iter_mut().chain([&mut self.agent]).flatten() {
            // SAFETY: kill(2) on our own children; SIGCONT first, for one
            // a test left stopped.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
