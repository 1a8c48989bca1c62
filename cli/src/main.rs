//! `brokerctl` (or `kubectl broker`, installed as `kubectl-broker`): parse
//! the command line, run the command, print its output, exit with its
//! code (docs/cli.md). The logic is in the library.

use std::io::Write;
use std::process::ExitCode;

use brokerctl::args::Cli;
use brokerctl::exit::Code;
use clap::Parser;

fn main() -> ExitCode {
    // clap exits 2 on a usage error and 0 for --help and --version.
    let cli = Cli::parse();
    // Logs (warnings and above unless RUST_LOG says otherwise) go to
    // stderr; stdout is the command's output alone, for scripts.
    edge::log::init(edge::log::LogFormat::Text, "warn");
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
