//! The command line is a contract too (scripts rely on the flags each
//! `--help` documents): every binary parses it with clap, and a mistake in
//! it is one line on standard error naming the binary, then exit code 2.

use std::process::ExitCode;

use clap::error::ErrorKind;

/// Parses the command line as `P`; on a mistake, prints one line and
/// returns the exit code to leave with. `--help` and `--version` print
/// what clap prints and succeed.
pub fn parse<P: clap::Parser>(bin: &str) -> Result<P, ExitCode> {
    P::try_parse().map_err(|e| report(bin, &e))
}

fn report(bin: &str, e: &clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        // A bare command with no subcommand: the help is the answer, but
        // nothing was done.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("{}", one_line(bin, &e.to_string()));
            ExitCode::from(2)
        }
    }
}

/// clap's message (`error: …`, a tip, the usage, a pointer to `--help`)
/// as one line: the error itself, and where to read more.
fn one_line(bin: &str, message: &str) -> String {
    // The first paragraph: the error, and the arguments it names on the
    // lines under it.
    let first: Vec<&str> = message
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let first = first.join(" ");
    let what = first.strip_prefix("error: ").unwrap_or(&first);
    format!("{bin}: {what} (see {bin} --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clap_message_becomes_one_line() {
        let msg = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a \
                   value, use '-- --bogus'\n\nUsage: calcmets [OPTIONS] [INPUT]...\n\nFor more \
                   information, try '--help'.\n";
        assert_eq!(
            one_line("calcmets", msg),
            "calcmets: unexpected argument '--bogus' found (see calcmets --help)"
        );
        let msg = "error: the following required arguments were not provided:\n  --controller \
                   <ADDR>\n  --nodes <NODESET>\n\nUsage: agent --controller <ADDR>\n";
        assert_eq!(
            one_line("agent", msg),
            "agent: the following required arguments were not provided: --controller <ADDR> \
             --nodes <NODESET> (see agent --help)"
        );
    }
}
