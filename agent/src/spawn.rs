//! Starting job processes and learning how they ended. Owns the two
//! process-wide threads that do it: the spawner and the reaper.
//!
//! - The **spawner** starts every job with `posix_spawn` (glibc's fast
//!   vfork path): in a process group of its own, with the four job signals
//!   blocked (sigsleep lets them in once its handlers are ready, so a
//!   suspension sent at once is not lost), stdin on `/dev/null`. It is one
//!   long-lived thread on purpose: sigsleep asks for SIGKILL when its
//!   parent dies (`--die-with-parent`), and the kernel means the *thread*
//!   that created it. A short-lived thread would kill its jobs when it
//!   exits. It serves two queues: jobs to start now first, processes
//!   started ahead of their job ([`Priority::Ahead`], held until a pass
//!   claims them) only when no start waits, so that a guess about a coming
//!   pass never delays a start decided now.
//! - The **reaper** waits for any child (`waitid(P_ALL)`) and hands each
//!   exit to whoever spawned that pid. One thread for thousands of jobs,
//!   no file descriptor per job. It reaps every child of the process, so
//!   nothing else in a process that hosts agents may start children of
//!   its own and wait for them. It first sees an exit without reaping
//!   (`WNOWAIT`), then reaps behind a gate that whoever signals a job
//!   holds open ([`while_unreaped`]): a pid is signalled only while it is
//!   still the job's, alive or a zombie, never once the kernel may have
//!   given it to another process.
//! - The **ends** thread reads the socket every job gets as [`END_FD`]:
//!   sigsleep (`--end-fd`) writes its exit status there once its record is
//!   written, before the kernel tears the process down ([`sigsleep::end`]).
//!   That status is handed on at once, as the exit; the reaper still reaps
//!   the process and hands nothing more. Each message is a datagram that
//!   the kernel stamps with its sender's pid: one that is not a whole
//!   message, or that speaks for another process than its sender, is
//!   dropped, so that nothing but a job's own process can end it. A job's end thus reaches its
//!   node tens of microseconds sooner, and so does the start that follows
//!   it. A process that never says so (killed, or held and never
//!   started) is handed on by the reaper, as before.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

use formats::wire::Exit;
use nix::errno::Errno;
use nix::spawn::{posix_spawn, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::sync::oneshot;

/// The descriptor on which each job gets the launcher's end socket
/// (`sigsleep --end-fd 3`).
pub const END_FD: i32 = 3;

/// A started job process.
pub struct Spawned {
    pub pid: i32,
    /// When it was spawned (CLOCK_MONOTONIC, ns): with its pid, which
    /// process it is, for [`while_unreaped`] (a pid can be a later
    /// child's once this one is reaped).
    pub born: i64,
    /// Fires once, when the process has said it ended (its record is
    /// written; only its teardown is left) or has been reaped, whichever
    /// comes first.
    pub exit: oneshot::Receiver<Exit>,
}

/// Which queue of the spawner a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A job to start now.
    Now,
    /// A process started ahead of its job, held: after every `Now`.
    Ahead,
}

/// The spawner's two queues, and the sign that one got a request.
#[derive(Default)]
struct Queues {
    lists: Mutex<(VecDeque<Request>, VecDeque<Request>)>,
    filled: Condvar,
}

impl Queues {
    fn push(&self, req: Request, priority: Priority) {
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        match priority {
            Priority::Now => lists.0.push_back(req),
            Priority::Ahead => lists.1.push_back(req),
        }
        self.filled.notify_one();
    }

    /// The next request: a start first, else one ahead; waits for one.
    fn pop(&self) -> Request {
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = lists.0.pop_front().or_else(|| lists.1.pop_front()) {
                return r;
            }
            lists = self.filled.wait(lists).unwrap_or_else(|p| p.into_inner());
        }
    }
}

struct Request {
    argv: Vec<CString>,
    /// `NAME=VALUE` entries the job gets besides the agent's environment
    /// (replacing any of the same name), or instead of it (`alone`).
    env: Vec<CString>,
    alone: bool,
    reply: oneshot::Sender<io::Result<Spawned>>,
}

/// Children the reaper waits for, and who wants to hear of each.
#[derive(Default)]
struct Children {
    waiters: HashMap<i32, Waiter>,
}

/// Who wants to hear of a child's exit: until the child said it ended
/// (then the entry stays, without a sender, until the reaper reaps it).
struct Waiter {
    tx: Option<oneshot::Sender<Exit>>,
    /// When it was spawned (CLOCK_MONOTONIC, ns): an end message older
    /// than that is from an earlier process of the same pid.
    since_ns: i64,
}

struct Shared {
    children: Mutex<Children>,
    /// Signalled when a child is added, so the reaper can stop idling.
    added: Condvar,
    /// Held for reading while a child is signalled, for writing while one
    /// is reaped: see [`while_unreaped`].
    reaping: RwLock<()>,
}

impl Shared {
    fn while_unreaped<R>(&self, pid: i32, born: i64, f: impl FnOnce() -> R) -> Option<R> {
        let _open = self.reaping.read().unwrap_or_else(|p| p.into_inner());
        let ours = self
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .waiters
            .get(&pid)
            .is_some_and(|w| w.since_ns == born);
        ours.then(f)
    }
}

/// Runs `f` (which signals `pid`, its group or its descendants) if `pid`
/// is still the child the launcher started at `born` ([`Spawned::born`])
/// and has not reaped, and keeps it unreaped until `f` returns: the pid
/// cannot be another process's meanwhile. `None` when it was reaped
/// already (its pid perhaps a later child's by now). `f` must not call
/// this again: a reap waiting between two reads would wait for ever.
pub fn while_unreaped<R>(pid: i32, born: i64, f: impl FnOnce() -> R) -> Option<R> {
    Launcher::global().ok()?.shared.while_unreaped(pid, born, f)
}

/// Handle to the process's spawner and reaper threads.
#[derive(Clone)]
pub struct Launcher {
    requests: Arc<Queues>,
    shared: Arc<Shared>,
}

impl Launcher {
    /// The process's launcher, starting its threads on first use.
    pub fn global() -> io::Result<Launcher> {
        static GLOBAL: OnceLock<Launcher> = OnceLock::new();
        if let Some(l) = GLOBAL.get() {
            return Ok(l.clone());
        }
        let l = Launcher::start()?;
        Ok(GLOBAL.get_or_init(|| l).clone())
    }

    fn start() -> io::Result<Launcher> {
        let shared = Arc::new(Shared {
            children: Mutex::new(Children::default()),
            added: Condvar::new(),
            reaping: RwLock::new(()),
        });
        let queues = Arc::new(Queues::default());
        use nix::sys::socket::{
            setsockopt, socketpair, sockopt, AddressFamily, SockFlag, SockType,
        };
        let (ends_rx, ends_tx) = socketpair(
            AddressFamily::Unix,
            SockType::Datagram,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        // Each message comes with its sender's pid, as the kernel knows it.
        setsockopt(&ends_rx, sockopt::PassCred, &true)?;
        // Away from END_FD, so that putting it there in a job is a copy
        // (a dup2 onto itself would leave it close-on-exec).
        let ends_tx =
            nix::fcntl::fcntl(&ends_tx, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(16)).map(|fd| {
                // SAFETY: fcntl just returned this new descriptor, owned
                // by nothing else.
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
            })?;
        // A job never waits to say it ended: with the socket's queue full
        // (the ends thread stuck), the write fails and the reaper tells
        // instead.
        nix::fcntl::fcntl(
            &ends_tx,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        let (q, s) = (Arc::clone(&queues), Arc::clone(&shared));
        std::thread::Builder::new()
            .name("clemu-spawner".into())
            .spawn(move || spawner(&q, &s, ends_tx))?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("clemu-reaper".into())
            .spawn(move || reaper(&s))?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("clemu-ends".into())
            .spawn(move || ends(&s, ends_rx))?;
        Ok(Launcher {
            requests: queues,
            shared,
        })
    }

    /// Starts `program` with `args`, and `env` (name, value) on top of
    /// the agent's own environment, in the spawner's queue of `priority`.
    pub async fn spawn(
        &self,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        priority: Priority,
    ) -> io::Result<Spawned> {
        answered(self.queue(program, args, env, false, priority)?).await
    }

    /// As [`Launcher::spawn`], with `env` its whole environment: a batch
    /// script's, which its submission carries whole (as Slurm's `--export`
    /// says), and which must hold nothing of the agent's own.
    pub async fn spawn_alone(
        &self,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        priority: Priority,
    ) -> io::Result<Spawned> {
        answered(self.queue(program, args, env, true, priority)?).await
    }

    /// Queues the start of `program` (with `env` on top of the agent's
    /// environment, or alone), without waiting for it: the answer comes
    /// on the receiver. Dropping it gives the start up: the spawner skips
    /// it, or kills the process if it was started meanwhile.
    pub fn queue(
        &self,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        alone: bool,
        priority: Priority,
    ) -> io::Result<Answer> {
        let mut argv = Vec::with_capacity(args.len() + 1);
        argv.push(cstring(program.as_os_str().as_bytes())?);
        for a in args {
            argv.push(cstring(a.as_bytes())?);
        }
        let env = env
            .iter()
            .map(|(k, v)| cstring(format!("{k}={v}").as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let (reply, answer) = oneshot::channel();
        self.requests.push(
            Request {
                argv,
                env,
                alone,
                reply,
            },
            priority,
        );
        Ok(answer)
    }
}

/// The spawner's answer to a queued start.
pub type Answer = oneshot::Receiver<io::Result<Spawned>>;

/// The process `answer` started, once the spawner has started it.
pub async fn answered(answer: Answer) -> io::Result<Spawned> {
    answer
        .await
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in argument"))
}

/// The signals a job starts with blocked and their default actions: the
/// four sigsleep handles, and the realtime one that brings it a new
/// limit (which nix's `Signal` cannot name).
fn job_signals() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [
        Signal::SIGTSTP,
        Signal::SIGCONT,
        Signal::SIGTERM,
        Signal::SIGINT,
    ] {
        s.add(sig);
    }
    let mut set: libc::sigset_t = *s.as_ref();
    // SAFETY: a valid set and signal number; the set stays a valid
    // sigset_t for nix to hold.
    unsafe {
        libc::sigaddset(&mut set, sigsleep::signals::limit_signal());
        SigSet::from_sigset_t_unchecked(set)
    }
}

fn attributes(ends: i32) -> nix::Result<(PosixSpawnAttr, PosixSpawnFileActions)> {
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    // Group 0: a new group led by the job, so signals go to the group.
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&job_signals())?;
    let mut defaults = job_signals();
    defaults.add(Signal::SIGPIPE);
    defaults.add(Signal::SIGHUP);
    attr.set_sigdefault(&defaults)?;
    let mut files = PosixSpawnFileActions::init()?;
    files.add_open(
        0,
        c"/dev/null",
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    )?;
    files.add_dup2(ends, END_FD)?;
    Ok((attr, files))
}

fn spawner(requests: &Queues, shared: &Shared, ends: std::os::fd::OwnedFd) -> ! {
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    // Held open for as long as this thread lives, which is for ever.
    let prepared = attributes(std::os::fd::AsRawFd::as_raw_fd(&ends));
    // This thread must outlive every child (see the module docs), so it
    // never returns: it blocks here when idle.
    loop {
        let req = requests.pop();
        // Its requester gave up (a process to hold for a job whose start
        // came first): nothing to start.
        if req.reply.is_closed() {
            continue;
        }
        let result = match &prepared {
            Err(e) => Err(io::Error::from(*e)),
            Ok((attr, files)) => {
                let (tx, rx) = oneshot::channel();
                // Registered under the lock, before the reaper can look
                // the pid up.
                // Most jobs add nothing: the agent's environment as it is.
                let with_extra;
                let envp = if req.alone {
                    &req.env
                } else if req.env.is_empty() {
                    &env
                } else {
                    with_extra = job_env(&env, &req.env);
                    &with_extra
                };
                let mut children = shared.children.lock().unwrap_or_else(|p| p.into_inner());
                let since_ns = sigsleep::clock::now().mono;
                match posix_spawn(req.argv[0].as_c_str(), files, attr, &req.argv, envp) {
                    Ok(pid) => {
                        let waiter = Waiter {
                            tx: Some(tx),
                            since_ns,
                        };
                        children.waiters.insert(pid.as_raw(), waiter);
                        shared.added.notify_one();
                        Ok(Spawned {
                            pid: pid.as_raw(),
                            born: since_ns,
                            exit: rx,
                        })
                    }
                    Err(e) => Err(io::Error::from(e)),
                }
            }
        };
        // The requester gave up meanwhile: nothing would ever claim, end
        // or signal the child, so it goes now (and is reaped as any).
        if let Err(Ok(orphan)) = req.reply.send(result) {
            shared.while_unreaped(orphan.pid, orphan.born, || {
                nix::sys::signal::kill(Pid::from_raw(orphan.pid), Signal::SIGKILL)
            });
        }
    }
}

/// The agent's environment `base` with `extra`'s entries on top: an entry
/// of `base` whose name one of `extra` sets is left out.
fn job_env(base: &[CString], extra: &[CString]) -> Vec<CString> {
    let name = |e: &CString| -> Vec<u8> {
        let b = e.as_bytes();
        b[..b.iter().position(|&c| c == b'=').unwrap_or(b.len())].to_vec()
    };
    let set: Vec<Vec<u8>> = extra.iter().map(name).collect();
    base.iter()
        .filter(|e| !set.contains(&name(e)))
        .chain(extra)
        .cloned()
        .collect()
}

fn reaper(shared: &Shared) {
    loop {
        {
            let mut children = shared.children.lock().unwrap_or_else(|p| p.into_inner());
            while children.waiters.is_empty() {
                children = shared
                    .added
                    .wait(children)
                    .unwrap_or_else(|p| p.into_inner());
            }
        }
        // Seen, not reaped: the pid stays this child's until the gate is
        // shut, so that no signal meant for it reaches another process.
        let pid = match waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(status) => match status.pid() {
                Some(pid) => pid,
                None => continue,
            },
            Err(Errno::EINTR) => continue,
            Err(_) => {
                // ECHILD: the children we wait for were reaped by someone
                // else. Forget them rather than spin.
                let mut children = shared.children.lock().unwrap_or_else(|p| p.into_inner());
                for tx in children.waiters.drain().filter_map(|(_, w)| w.tx) {
                    let _ = tx.send(Exit::Signal(0));
                }
                continue;
            }
        };
        let (exit, waiter) = {
            let _shut = shared.reaping.write().unwrap_or_else(|p| p.into_inner());
            let exit = loop {
                match waitid(Id::Pid(pid), WaitPidFlag::WEXITED) {
                    Ok(WaitStatus::Exited(_, code)) => break Some(Exit::Code(code)),
                    Ok(WaitStatus::Signaled(_, sig, _)) => break Some(Exit::Signal(sig as i32)),
                    Err(Errno::EINTR) => continue,
                    // Reaped by someone else meanwhile: as ECHILD above.
                    Ok(_) | Err(_) => break None,
                }
            };
            let waiter = shared
                .children
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .waiters
                .remove(&pid.as_raw());
            (exit.unwrap_or(Exit::Signal(0)), waiter)
        };
        // Told already by its end message, or never spawned here.
        if let Some(tx) = waiter.and_then(|w| w.tx) {
            let _ = tx.send(exit);
        }
    }
}

/// Reads the jobs' end messages for ever, handing each on as its process's
/// exit. A message is taken only from the process it speaks for, only
/// from the process that has the pid now, and only once.
fn ends(shared: &Shared, socket: std::os::fd::OwnedFd) {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use sigsleep::end::{End, LEN};
    use std::os::fd::AsRawFd;
    // One byte more than a message: a longer datagram shows as such.
    let mut buf = [0u8; LEN + 1];
    let mut space = nix::cmsg_space!(nix::sys::socket::UnixCredentials);
    loop {
        let (bytes, sender) = {
            let mut iov = [io::IoSliceMut::new(&mut buf)];
            // No address: the sender's socket has no name.
            match recvmsg::<()>(
                socket.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::empty(),
            ) {
                Ok(m) => {
                    let sender = m.cmsgs().ok().and_then(|mut c| {
                        c.find_map(|c| match c {
                            ControlMessageOwned::ScmCredentials(cred) => Some(cred.pid()),
                            _ => None,
                        })
                    });
                    (m.bytes, sender)
                }
                Err(Errno::EINTR) => continue,
                // Cannot happen (the spawner holds the other end for
                // ever); the socket stays open all the same, so that no
                // job's write fails for want of a reader, and the reaper
                // tells.
                Err(_) => loop {
                    std::thread::park();
                },
            }
        };
        if bytes != LEN {
            continue;
        }
        let mut b = [0u8; LEN];
        b.copy_from_slice(&buf[..LEN]);
        let end = End::decode(&b);
        if sender != Some(end.pid) {
            continue;
        }
        let mut children = shared.children.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = children.waiters.get_mut(&end.pid) else {
            continue;
        };
        if end.at_ns >= w.since_ns {
            if let Some(tx) = w.tx.take() {
                let _ = tx.send(Exit::Code(end.code));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell line that writes, in one write to END_FD, an end message
    /// for process `pid` (a shell expression) with exit status `code`,
    /// said at `at` (eight bytes as printf's octal escapes).
    fn say_end(pid: &str, code: u8, at: &str) -> String {
        format!(
            r#"o() {{ printf '\\%03o' $(( ($1 >> $2) & 255 )); }}; p={pid}; f="$(o $p 0)$(o $p 8)$(o $p 16)$(o $p 24)\{code:03o}\000\000\000{at}"; printf "$f" >&3"#
        )
    }

    const NEVER: &str = r"\377\377\377\377\377\377\377\177";

    async fn sh(l: &Launcher, script: String) -> Spawned {
        l.spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script],
            &[],
            Priority::Now,
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn an_end_said_on_the_socket_is_the_exit_before_the_process_is_gone() {
        let l = Launcher::global().unwrap();
        // Said, then still running: the exit is the one it said.
        let s = sh(&l, format!("{}; exec sleep 30", say_end("$$", 7, NEVER))).await;
        let exit = tokio::time::timeout(std::time::Duration::from_secs(10), s.exit)
            .await
            .expect("the end it said never came");
        assert_eq!(exit.unwrap(), Exit::Code(7));
        assert!(nix::sys::signal::kill(Pid::from_raw(s.pid), None).is_ok());
        let _ = nix::sys::signal::kill(Pid::from_raw(s.pid), Signal::SIGKILL);
        // An end said before the process was spawned (a message of an
        // earlier process of the same pid) is not its exit.
        let stale = r"\000\000\000\000\000\000\000\000";
        let s = sh(&l, format!("{}; exit 3", say_end("$$", 9, stale))).await;
        assert_eq!(s.exit.await.unwrap(), Exit::Code(3));
    }

    /// The state letter of process `pid` in `/proc` (`Z` for a zombie).
    fn state(pid: i32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.chars().next()
    }

    #[tokio::test]
    async fn a_process_is_not_reaped_while_it_is_signalled_nor_signalled_once_reaped() {
        let l = Launcher::global().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        let s = sh(
            &l,
            format!(
                "while [ ! -e '{}' ]; do sleep 0.01; done; exit 4",
                go.display()
            ),
        )
        .await;
        let pid = s.pid;
        // Its pid with another birth is another process, which may have
        // the pid once this one is reaped: not this one.
        assert_eq!(while_unreaped(pid, s.born - 1, || ()), None);
        assert_eq!(while_unreaped(pid, s.born, || ()), Some(()));
        let held = while_unreaped(pid, s.born, || {
            // It ends while the gate is held: the reaper sees it, and must
            // leave it a zombie, its pid still its own.
            std::fs::write(&go, "").unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                match state(pid) {
                    Some('Z') => break,
                    None => panic!("reaped while the gate was held"),
                    Some(_) => {}
                }
                assert!(std::time::Instant::now() < deadline, "it never ended");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            state(pid)
        });
        assert_eq!(held, Some(Some('Z')));
        assert_eq!(s.exit.await.unwrap(), Exit::Code(4));
        // Reaped: not ours any more, whoever has the pid now.
        assert_eq!(while_unreaped(pid, s.born, || ()), None);
    }

    #[tokio::test]
    async fn no_process_can_end_another() {
        let l = Launcher::global().unwrap();
        let mut victim = sh(&l, "exec sleep 30".into()).await;
        // Another job's process says the victim ended, as a whole message
        // and as a broken one: neither is taken.
        let forger = sh(
            &l,
            format!(
                "{}; printf 'abc' >&3; exit 0",
                say_end(&victim.pid.to_string(), 7, NEVER)
            ),
        )
        .await;
        assert_eq!(forger.exit.await.unwrap(), Exit::Code(0));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(matches!(
            victim.exit.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ));
        let _ = nix::sys::signal::kill(Pid::from_raw(victim.pid), Signal::SIGKILL);
        assert_eq!(victim.exit.await.unwrap(), Exit::Signal(9));
    }

    #[tokio::test]
    async fn exit_codes_and_signals_reach_the_spawner() {
        let l = Launcher::global().unwrap();
        let ok = l
            .spawn(
                Path::new("/bin/sh"),
                &["-c".into(), "exit 7".into()],
                &[],
                Priority::Now,
            )
            .await
            .unwrap();
        assert_eq!(ok.exit.await.unwrap(), Exit::Code(7));
        let killed = l
            .spawn(
                Path::new("/bin/sh"),
                &["-c".into(), "kill -9 $$".into()],
                &[],
                Priority::Now,
            )
            .await
            .unwrap();
        assert_eq!(killed.exit.await.unwrap(), Exit::Signal(9));
        let missing = l
            .spawn(Path::new("/nonexistent/sigsleep"), &[], &[], Priority::Now)
            .await;
        assert!(missing.is_err());
    }

    #[tokio::test]
    async fn a_job_gets_its_own_variables_on_top_of_the_agents() {
        let l = Launcher::global().unwrap();
        let script = r#"[ "$CUDA_VISIBLE_DEVICES" = 0,3 ] && [ -n "$PATH" ] && exit 5"#;
        let env = [("CUDA_VISIBLE_DEVICES".to_string(), "0,3".to_string())];
        let s = l
            .spawn(
                Path::new("/bin/sh"),
                &["-c".into(), script.into()],
                &env,
                Priority::Now,
            )
            .await
            .unwrap();
        assert_eq!(s.exit.await.unwrap(), Exit::Code(5));
        let base = l
            .spawn(
                Path::new("/bin/sh"),
                &["-c".into(), script.into()],
                &[],
                Priority::Now,
            )
            .await
            .unwrap();
        assert_eq!(
            base.exit.await.unwrap(),
            Exit::Code(1),
            "others' jobs get none"
        );
        // Alone: its variables and nothing of the agent's (no HOME).
        let alone = l
            .spawn_alone(
                Path::new("/bin/sh"),
                &[
                    "-c".into(),
                    r#"[ -z "$HOME$CARGO_MANIFEST_DIR" ] && [ "$A" = 1 ] && exit 6"#.into(),
                ],
                &[("A".to_string(), "1".to_string())],
                Priority::Now,
            )
            .await
            .unwrap();
        assert_eq!(alone.exit.await.unwrap(), Exit::Code(6));
    }

    #[test]
    fn a_start_decided_now_goes_before_every_process_started_ahead() {
        let q = Queues::default();
        let req = |name: &str| Request {
            argv: vec![cstring(name.as_bytes()).unwrap()],
            env: Vec::new(),
            alone: false,
            reply: oneshot::channel().0,
        };
        q.push(req("ahead-1"), Priority::Ahead);
        q.push(req("ahead-2"), Priority::Ahead);
        q.push(req("now"), Priority::Now);
        let order: Vec<String> = (0..3)
            .map(|_| q.pop().argv[0].to_string_lossy().into_owned())
            .collect();
        assert_eq!(order, ["now", "ahead-1", "ahead-2"]);
    }

    #[test]
    fn a_jobs_variable_replaces_the_agents_of_the_same_name() {
        let c = |s: &str| CString::new(s).unwrap();
        let env = job_env(
            &[c("PATH=/bin"), c("CUDA_VISIBLE_DEVICES=7"), c("HOME=/root")],
            &[c("CUDA_VISIBLE_DEVICES=0,1")],
        );
        assert_eq!(
            env,
            vec![
                c("PATH=/bin"),
                c("HOME=/root"),
                c("CUDA_VISIBLE_DEVICES=0,1")
            ]
        );
    }

    #[tokio::test]
    async fn children_start_in_their_own_group_with_job_signals_blocked() {
        let l = Launcher::global().unwrap();
        let dir = tempfile::tempdir().unwrap();
        // cp copies its own /proc entries and touches no signal.
        let copy = |from: &str, to: &str| {
            let l = l.clone();
            let to = dir.path().join(to);
            let from = from.to_string();
            async move {
                let s = l
                    .spawn(
                        Path::new("/bin/cp"),
                        &[from, to.display().to_string()],
                        &[],
                        Priority::Now,
                    )
                    .await
                    .unwrap();
                assert_eq!(s.exit.await.unwrap(), Exit::Code(0));
                std::fs::read_to_string(to).unwrap()
            }
        };
        let status = copy("/proc/self/status", "status").await;
        let blk = status.lines().find(|l| l.starts_with("SigBlk")).unwrap();
        let mask = u64::from_str_radix(blk.split_whitespace().nth(1).unwrap(), 16).unwrap();
        // SIGINT 2, SIGTERM 15, SIGCONT 18, SIGTSTP 20: bits 1, 14, 17, 19.
        assert_eq!(mask & 0xa4002, 0xa4002, "{blk}");
        let limit = 1u64 << (sigsleep::signals::limit_signal() - 1);
        assert_eq!(mask & limit, limit, "{blk}");
        let stat = copy("/proc/self/stat", "stat").await;
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // After the name: state, ppid, pgrp.
        let pid = stat.split(' ').next().unwrap();
        assert_eq!(fields[2], pid, "own process group: {stat}");
    }
}
