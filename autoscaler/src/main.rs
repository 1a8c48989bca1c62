//! `market-autoscaler`: buys catalog capacity for pods that wait and gives
//! it back when idle. Parses the command line and hands over to the
//! library, through the edge every binary shares (logging, exit code,
//! shutdown signal); see `market-autoscaler --help`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = market_autoscaler::config::Cli::parse();
    edge::run(cli.log_format, cli.log_level.clone(), async move {
        market_autoscaler::config::main(cli, edge::signal::shutdown()).await
    })
}
