//! The shell scripts `deploy` and `undeploy` run on an agent host (POSIX
//! sh, coreutils, procps-free). Each touches only the agents' directory
//! and prints `key=value` lines for the controller to read. Deploy marks
//! the directory as its own ([`MARK`]): one it did not make is neither
//! written into nor removed.

/// The file that says a directory is deploy's.
pub const MARK: &str = ".clemu-deploy";

use std::time::Duration;

use super::remote::quote;

/// A running agent of the directory (by its pid file, and only if that
/// pid is this directory's agent binary), the free disk where the
/// directory is or would be, and the binaries already there. Changes
/// nothing.
pub fn inspect(dir: &str) -> String {
    format!(
        r#"d={dir}
if [ -d "$d" ]; then echo deployed=yes; else echo deployed=no; fi
if [ -f "$d/{MARK}" ]; then echo mark=yes; else echo mark=no; fi
if [ -d "$d" ] && [ -z "$(ls -A -- "$d")" ]; then echo empty=yes; fi
p=$d
while [ ! -d "$p" ]; do p=$(dirname -- "$p"); done
echo "free_kb=$(df -Pk -- "$p" | awk 'NR==2 {{print $4}}')"
if [ -d "$d" ]; then
  a=$(cd -- "$d" && pwd)
  echo "root=$a"
  pid=$(cat "$a/agent.pid" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
      "$a/bin/agent"*)
        echo "pid=$pid"
        echo "running_sha=$(sha256sum "/proc/$pid/exe" | cut -d' ' -f1)"
        echo "running_args= $(tr '\0' ' ' < "/proc/$pid/cmdline")"
        ;;
    esac
  fi
  for b in agent sigsleep; do
    if [ -f "$a/bin/$b" ]; then echo "${{b}}_sha=$(sha256sum "$a/bin/$b" | cut -d' ' -f1)"; fi
  done
fi
exit 0
"#,
        dir = quote(dir)
    )
}

/// The directory, readable by its owner only (it holds the secret), and
/// marked as deploy's.
pub fn prepare(dir: &str) -> String {
    let d = quote(dir);
    format!("mkdir -p -- {d}/bin {d}/records && chmod 700 -- {d} && touch -- {d}/{MARK}\n")
}

/// Starts `agent` (a command line whose paths use `$d`, the directory)
/// in a session of its own, so that it outlives the ssh connection,
/// logging to `agent.log`; prints its pid, or why it stopped at once.
pub fn start(dir: &str, agent: &str) -> String {
    format!(
        r#"d=$(cd -- {dir} && pwd) || exit 1
cd "$d" || exit 1
chmod 600 secret
if command -v setsid >/dev/null 2>&1; then detach=setsid; else detach=nohup; fi
$detach {agent} >> agent.log 2>&1 < /dev/null &
pid=$!
echo "$pid" > agent.pid
sleep 0.5
if kill -0 "$pid" 2>/dev/null; then
  echo "pid=$pid"
else
  echo "the agent stopped at once; the end of $d/agent.log:"
  tail -n 3 agent.log
  rm -f agent.pid
  exit 1
fi
"#,
        dir = quote(dir)
    )
}

/// Stops the directory's agent: `SIGTERM` (it ends its jobs first), then
/// `SIGKILL` after `grace`. Then lists any job process of the directory
/// still alive (there should be none: jobs die with their agent).
pub fn stop(dir: &str, grace: Duration) -> String {
    let tenths = (grace.as_millis() / 100).max(1);
    format!(
        r#"d={dir}
if [ ! -d "$d" ]; then echo deployed=no; echo agent=not_deployed; echo left=; exit 0; fi
echo deployed=yes
a=$(cd -- "$d" && pwd)
state=not_running
pid=$(cat "$a/agent.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
    "$a/bin/agent"*)
      kill -TERM "$pid"
      i=0
      while kill -0 "$pid" 2>/dev/null && [ "$i" -lt {tenths} ]; do sleep 0.1; i=$((i + 1)); done
      if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        state=killed_after_the_grace_period
        sleep 0.2
      else
        state=stopped
      fi
      ;;
  esac
fi
rm -f "$a/agent.pid"
echo "agent=$state"
if [ -f "$a/agent.log" ]; then echo log=yes; else echo log=no; fi
if [ -f "$a/{MARK}" ]; then echo mark=yes; else echo mark=no; fi
sleep 0.2
left=
for p in /proc/[0-9]*; do
  if tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q -- "$a/bin/[s]igsleep"; then
    left="$left ${{p#/proc/}}"
  fi
done
echo "left=$left"
"#,
        dir = quote(dir)
    )
}

/// Removes the directory, and with it everything deploy put there; one
/// without deploy's mark is left alone.
pub fn remove(dir: &str) -> String {
    let d = quote(dir);
    format!(
        "if [ -f {d}/{MARK} ]; then rm -rf -- {d}; else echo \"{dir} has no {MARK}: deploy did not make it; left alone\"; exit 1; fi\n"
    )
}
