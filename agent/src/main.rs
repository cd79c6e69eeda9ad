use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent::uplink::{self, AgentSpec};
use anyhow::{anyhow, Context, Result};
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// clemu's agent: hosts virtual nodes on this machine for a controller.
#[derive(Debug, Parser)]
#[command(
    name = "agent",
    version,
    after_help = "Example:\n  agent --controller 10.0.0.1:7817 --nodes 'vn[000-359]' --cpus 16 --memory 64G \\\n        --secret-file /etc/clemu/secret\n\nExit status: 0 stopped by the controller or a signal, 2 error."
)]
struct Cli {
    /// Controller address; with a backup controller, both, the primary
    /// first, comma-separated (ADDR,ADDR): the agent registers with the
    /// one that leads.
    #[arg(long, value_name = "ADDR")]
    controller: String,
    /// Virtual nodes this agent hosts (nodeset notation).
    #[arg(long, value_name = "NODESET")]
    nodes: String,
    /// CPUs of each node (the controller's config is authoritative).
    #[arg(long, value_name = "N")]
    cpus: u32,
    /// Memory of each node: MiB, or a size like 64G.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    memory: String,
    /// Where jobs write their records before they are sent to the
    /// controller [default: a directory under the temporary directory].
    #[arg(long, value_name = "DIR")]
    record_dir: Option<PathBuf>,
    /// The controller's shared secret (mode 600; the controller creates it
    /// in its state directory).
    #[arg(long, value_name = "FILE", env = "CLEMU_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// Name of this host, as the controller shows it [default: hostname].
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// The job program [default: sigsleep beside this executable].
    #[arg(long, value_name = "PATH")]
    sigsleep: Option<PathBuf>,
    /// How long to keep trying to reach the controller at start, in
    /// seconds. Once registered, the agent reconnects for as long as it
    /// runs (its jobs go on meanwhile, until the controller's fence time).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    connect_timeout: u64,
}

/// Most virtual nodes one agent hosts.
const MAX_NODES: usize = 1_000_000;

fn size_mb(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.trim_end_matches("IB").trim_end_matches('B');
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 0),
        Some('M') => (&t[..t.len() - 1], 1),
        Some('G') => (&t[..t.len() - 1], 1024),
        Some('T') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("--memory: not a size: {s:?}"))?;
    Ok(if mult == 0 {
        n.div_ceil(1024)
    } else {
        n * mult
    })
}

async fn run(cli: Cli, shutdown: CancellationToken) -> Result<()> {
    let nodes = formats::nodeset::parse(&cli.nodes).map_err(|e| anyhow!("--nodes: {e}"))?;
    if nodes.len() > MAX_NODES {
        return Err(anyhow!(
            "--nodes: {} nodes, more than the {MAX_NODES} an agent hosts",
            nodes.len()
        ));
    }
    let nodes = formats::nodeset::expand(&nodes);
    if nodes.is_empty() {
        return Err(anyhow!("--nodes: no node"));
    }
    let host = cli.host.clone().unwrap_or_else(hostname);
    let dir = cli.record_dir.clone().unwrap_or_else(|| {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        std::env::temp_dir()
            .join(format!("clemu-{uid}"))
            .join(format!("agent-{host}"))
    });
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let secret_file = cli.secret_file.as_deref().ok_or_else(|| {
        anyhow!(
            "no shared secret: give --secret-file FILE (or set CLEMU_SECRET_FILE), a copy of the \
             controller's secret file"
        )
    })?;
    let secret = agent::secret(secret_file)?;
    let spec = AgentSpec {
        nodes,
        cpus: cli.cpus,
        memory_mb: size_mb(&cli.memory)?,
        sigsleep: cli
            .sigsleep
            .clone()
            .unwrap_or_else(agent::settings::default_sigsleep),
        log: dir.join(format!("{host}.rec")),
        host,
    };
    uplink::run(
        &cli.controller,
        &secret,
        spec,
        Duration::from_secs(cli.connect_timeout),
        shutdown,
    )
    .await
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "agent".into())
}

fn main() -> ExitCode {
    let cli = match formats::usage::parse::<Cli>("agent") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLEMU_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async {
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move {
            let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            token.cancel();
        });
        match run(cli, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("agent: {e:#}");
                ExitCode::from(2)
            }
        }
    })
}
