//! `brokerctl` (or `kubectl broker`, installed as `kubectl-broker`): parse
//! the command line, run the command, print its output, exit with its
//! code (docs/cli.md). The logic is in the library.

use std::io::Write;
use std::process::ExitCode;

use brokerctl::args::{Cli, Given};
use brokerctl::exit::Code;
use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    // clap exits 2 on a usage error and 0 for --help and --version.
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which settings were typed, not inherited from the environment.
    cli.given = Given::from_matches(&matches);
    // Logs (warnings and above, more with -v, unless RUST_LOG says
    // otherwise) go to stderr; stdout is the command's output alone.
    edge::log::init(
        edge::log::LogFormat::Text,
        brokerctl::verbose::log_level(cli.global.verbose),
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(Code::Error.as_u8());
        }
    };
    let outcome = runtime.block_on(brokerctl::commands::run(cli));
    runtime.shutdown_timeout(edge::SHUTDOWN_GRACE);
    match outcome {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::from(Code::Error.as_u8());
            }
            ExitCode::SUCCESS
        }
        Err(failure) => {
            // Escaped: the message often quotes a server (issue 41, F6).
            eprint!("{}", brokerctl::output::error_line(&failure));
            ExitCode::from(failure.code.as_u8())
        }
    }
}
