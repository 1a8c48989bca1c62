//! `aggregator`: pool N upstream Liqo ResourceReaders into one. Parses the
//! command line and hands over to the library, through the edge every
//! binary shares (logging, exit code, shutdown signal); see
//! `aggregator --help` and the crate's README.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = aggregator::Cli::parse();
    edge::run(cli.log_format, cli.log_level.clone(), async move {
        aggregator::app::run(cli, edge::signal::shutdown()).await?;
        Ok(())
    })
}
