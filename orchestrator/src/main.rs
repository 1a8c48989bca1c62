//! `orchestrator`: places the namespaces consumers offloaded to the broker
//! on providers chosen by policy. Parses the command line and hands over to
//! the library, through the edge every binary shares (logging, exit code,
//! shutdown signal); see `orchestrator --help` and the crate's README.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = orchestrator::config::Cli::parse();
    edge::run(cli.log_format, cli.log_level.clone(), async move {
        orchestrator::config::main(cli, edge::signal::shutdown()).await
    })
}
