use std::process::ExitCode;

use controller::cli::{Cli, Command, Outcome};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match formats::usage::parse::<Cli>("controller") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let serving = matches!(cli.command, Command::Serve { .. });
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLEMU_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(if serving { "info" } else { "warn" })
            }),
        )
        .init();
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
        match controller::cli::run(cli, shutdown).await {
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
