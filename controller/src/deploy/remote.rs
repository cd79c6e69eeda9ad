//! What crosses to the agent hosts: shell scripts run over `ssh` (on
//! standard input, to a remote `sh -s`), files copied with `scp`, each
//! host's commands in a task of its own, at most `fanout` commands at
//! once across hosts.
//! With `[agents] clush = true` (and ClusterShell's `clush` installed),
//! `clush` carries the same commands and copies instead.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::Semaphore;

/// Options every ssh and scp call gets: never ask a question (a deploy
/// runs unattended), and give up on a host that does not answer.
const BATCH: [&str; 4] = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"];

/// The longest one remote command may take: a host that accepted the
/// connection and then hangs must not hold the deploy back for ever.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// How to reach the hosts.
#[derive(Debug, Clone)]
pub struct Ssh {
    /// `[agents] ssh_options`, passed to ssh and scp alike.
    pub options: Vec<String>,
    /// At most this many hosts at once.
    pub fanout: Arc<Semaphore>,
    /// Through ClusterShell's `clush` rather than ssh and scp.
    pub clush: bool,
}

/// What a remote command printed, or why it could not run.
pub type Outcome = Result<String, String>;

impl Ssh {
    pub fn new(options: Vec<String>, fanout: usize, clush: bool) -> Ssh {
        Ssh {
            options,
            fanout: Arc::new(Semaphore::new(fanout.max(1))),
            clush,
        }
    }

    /// The command that runs a script on `dest`, as a person would type
    /// it (the script goes to its standard input).
    pub fn run_line(&self, dest: &str) -> Vec<String> {
        if self.clush {
            let mut args = self.clush_args(dest);
            args.push("sh -s".into());
            return args;
        }
        let mut args = vec!["ssh".to_string()];
        args.extend(BATCH.iter().map(|s| s.to_string()));
        args.extend(self.options.iter().cloned());
        args.push(dest.to_string());
        args.push("sh -s".into());
        args
    }

    /// The same, as one line.
    pub fn ssh_line(&self, dest: &str) -> String {
        join(&self.run_line(dest))
    }

    /// `clush` for one host: its user apart (`@` means a group to
    /// ClusterShell), ssh's options as one `-o`, a port as `Port=`
    /// (ClusterShell hands the options to scp too, whose `-p` is another
    /// flag), labels off, the remote exit code as its own.
    fn clush_args(&self, dest: &str) -> Vec<String> {
        let (user, host) = match dest.split_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, dest),
        };
        let mut opts = vec!["-o".to_string(), "BatchMode=yes".to_string()];
        let mut it = self.options.iter();
        while let Some(o) = it.next() {
            if o == "-p" {
                if let Some(port) = it.next() {
                    opts.push("-o".into());
                    opts.push(format!("Port={port}"));
                }
            } else {
                opts.push(o.clone());
            }
        }
        let mut args = vec![
            "clush".to_string(),
            "-N".into(),
            "-S".into(),
            "-t".into(),
            "5".into(),
            "-w".into(),
            host.to_string(),
        ];
        if let Some(u) = user {
            args.push("-l".into());
            args.push(u.to_string());
        }
        args.push("-o".into());
        args.push(join(&opts));
        args
    }

    /// scp takes ssh's options but its port as `-P`.
    fn scp_options(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut it = self.options.iter();
        while let Some(o) = it.next() {
            if o == "-p" {
                out.push("-P".into());
                if let Some(port) = it.next() {
                    out.push(port.clone());
                }
            } else {
                out.push(o.clone());
            }
        }
        out
    }

    /// The scp command line copying `from` to `dest:to`.
    pub fn scp_line(&self, from: &[&Path], dest: &str, to: &str) -> Vec<String> {
        if self.clush {
            let mut args = self.clush_args(dest);
            args.push("--copy".into());
            args.extend(from.iter().map(|p| p.display().to_string()));
            args.push(format!("--dest={to}"));
            return args;
        }
        let mut args = vec!["scp".to_string(), "-q".into(), "-p".into()];
        args.extend(BATCH.iter().map(|s| s.to_string()));
        args.extend(self.scp_options());
        args.extend(from.iter().map(|p| p.display().to_string()));
        args.push(format!("{dest}:{to}"));
        args
    }

    /// Runs `script` on `dest` with `sh -s`; its standard output, or why
    /// it failed (ssh's own complaint, or the script's last words).
    pub async fn run(&self, dest: &str, script: &str) -> Outcome {
        let _turn = self.fanout.acquire().await.map_err(|e| e.to_string())?;
        execute(&self.run_line(dest), Some(script)).await
    }

    /// Copies local files `from` into `dest:to`, keeping their modes.
    pub async fn copy(&self, from: &[&Path], dest: &str, to: &str) -> Outcome {
        let _turn = self.fanout.acquire().await.map_err(|e| e.to_string())?;
        execute(&self.scp_line(from, dest, to), None).await
    }

    /// The command line copying `dest:from` to the local file `to`.
    /// `clush --rcopy` names the copy `FILE.HOST` in a directory: it goes
    /// into one beside `to` ([`fetching_dir`]), to be renamed.
    pub fn fetch_line(&self, dest: &str, from: &str, to: &Path) -> Vec<String> {
        if self.clush {
            let mut line = self.clush_args(dest);
            line.push("--rcopy".into());
            line.push(from.to_string());
            line.push(format!("--dest={}", fetching_dir(to).display()));
            return line;
        }
        let mut line = vec!["scp".to_string(), "-q".into(), "-p".into()];
        line.extend(BATCH.iter().map(|s| s.to_string()));
        line.extend(self.scp_options());
        line.push(format!("{dest}:{from}"));
        line.push(to.display().to_string());
        line
    }

    /// Copies `dest:from` to the local file `to`.
    pub async fn fetch(&self, dest: &str, from: &str, to: &Path) -> Outcome {
        if self.clush {
            return self.clush_fetch(dest, from, to).await;
        }
        let _turn = self.fanout.acquire().await.map_err(|e| e.to_string())?;
        execute(&self.fetch_line(dest, from, to), None).await
    }

    async fn clush_fetch(&self, dest: &str, from: &str, to: &Path) -> Outcome {
        let dir = fetching_dir(to);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = {
            let _turn = self.fanout.acquire().await.map_err(|e| e.to_string())?;
            execute(&self.fetch_line(dest, from, to), None).await
        };
        let got = std::fs::read_dir(&dir)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path());
        let moved = match (&out, got) {
            (Ok(_), Some(file)) => std::fs::rename(&file, to).map_err(|e| e.to_string()),
            (Ok(_), None) => Err("clush fetched nothing".into()),
            (Err(e), _) => Err(e.clone()),
        };
        let _ = std::fs::remove_dir_all(&dir);
        moved.map(|()| String::new())
    }
}

/// Where `clush --rcopy` puts a file to be renamed `to`.
fn fetching_dir(to: &Path) -> std::path::PathBuf {
    to.with_extension("fetching")
}

/// Runs `line` (the program, then its arguments), `input` on its
/// standard input; what it printed, or why it failed.
async fn execute(line: &[String], input: Option<&str>) -> Outcome {
    let mut child = Command::new(&line[0])
        .args(&line[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", line[0]))?;
    if let (Some(mut stdin), Some(text)) = (child.stdin.take(), input) {
        // A host that closed the connection already says why on stderr.
        let _ = stdin.write_all(text.as_bytes()).await;
    }
    finish(child, &line[0]).await
}

async fn finish(child: tokio::process::Child, what: &str) -> Outcome {
    let out = match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(format!("{what}: {e}")),
        Err(_) => return Err(format!("{what}: no end in {} s", COMMAND_TIMEOUT.as_secs())),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    // The last line said is the reason (ssh's "connect to host ...: No
    // route to host", or the script's own).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no reason given")
        .to_string();
    Err(match out.status.code() {
        // ssh's own failure: the host, not the script.
        Some(255) => format!("unreachable: {why}"),
        _ => why,
    })
}

/// `s` as one word of a POSIX shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Words as one shell command line.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        // Brackets are a glob to the shell.
        assert_eq!(quote("vn[001-034]"), "'vn[001-034]'");
        assert_eq!(quote("root@vm03:/srv/clemu"), "root@vm03:/srv/clemu");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$(reboot)"), "'$(reboot)'");
    }

    #[test]
    fn scp_gets_the_port_as_scp_spells_it() {
        let ssh = Ssh::new(
            [
                "-i",
                "k",
                "-p",
                "2222",
                "-o",
                "StrictHostKeyChecking=accept-new",
            ]
            .map(String::from)
            .to_vec(),
            4,
            false,
        );
        assert_eq!(
            ssh.scp_options(),
            [
                "-i",
                "k",
                "-P",
                "2222",
                "-o",
                "StrictHostKeyChecking=accept-new"
            ]
        );
        assert!(ssh
            .ssh_line("root@vm03")
            .ends_with("-p 2222 -o StrictHostKeyChecking=accept-new root@vm03 'sh -s'"));
        // The log's fetch, as undeploy runs it and as --dry-run prints it.
        let to = Path::new("/l/h1.log");
        assert!(
            join(&ssh.fetch_line("root@vm03", "d/agent.log", to)).ends_with(
                "-i k -P 2222 -o StrictHostKeyChecking=accept-new root@vm03:d/agent.log /l/h1.log"
            )
        );
        let clush = Ssh { clush: true, ..ssh };
        assert_eq!(
            clush.ssh_line("root@vm03"),
            "clush -N -S -t 5 -w vm03 -l root -o '-o BatchMode=yes -i k -o Port=2222 -o \
             StrictHostKeyChecking=accept-new' 'sh -s'"
        );
        assert!(join(&clush.fetch_line("root@vm03", "d/agent.log", to))
            .ends_with("--rcopy d/agent.log --dest=/l/h1.fetching"));
    }
}
