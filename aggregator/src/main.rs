//! `aggregator`: pool N upstream Liqo ResourceReaders into one. Parses the
//! command line, sets up logging and hands over to the library; see
//! `aggregator --help` and the crate's README.

use std::io::IsTerminal;
use std::process::ExitCode;

use aggregator::config::LogFormat;
use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = aggregator::Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(aggregator::app::run(
        cli,
        resource_monitor::cli::shutdown_signal(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The messages embed their causes; print them once, no backtrace.
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
