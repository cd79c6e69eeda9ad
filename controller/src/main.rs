use std::process::ExitCode;

use controller::cli::{Cli, Command, Outcome};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match formats::usage::parse::<Cli>("controller") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let serving = matches!(cli.command, Command::Serve { .. });
    let detach = matches!(cli.command, Command::Serve { detach: true, .. });
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person: a log file or a pipe gets plain text.
        .with_ansi(!detach && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLEMU_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(if serving { "info" } else { "warn" })
            }),
        )
        .init();
    // Forked before the runtime starts any thread.
    let ready = if detach {
        let forked = controller::cli::serve_config(&cli).and_then(|config| {
            let log = match &cli.command {
                Command::Serve { log, .. } => log.as_deref(),
                _ => None,
            };
            let log = controller::detach::log_path(&config.state_dir, log)?;
            controller::detach::fork_serving(&log)
        });
        match forked {
            Ok(ready) => Some(ready),
            Err(e) => {
                eprintln!("controller: {e:#}");
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("controller: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async {
        let shutdown = CancellationToken::new();
        // One task turns SIGINT and SIGTERM into a shutdown.
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
        match controller::cli::run(cli, shutdown, ready).await {
            Ok(Outcome::Ok) => ExitCode::SUCCESS,
            Ok(Outcome::Refused) => ExitCode::from(1),
            // `controller nodeset -e … | head` closing the pipe is not an
            // error.
            Err(e)
                if e.chain().any(|c| {
                    c.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                }) =>
            {
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("controller: {e:#}");
                ExitCode::from(2)
            }
        }
    })
}
