//! `purchase-controller`: on a consumer cluster, turn Purchases into Liqo
//! peerings, ResourceSlices and NamespaceOffloadings. Parses the flags and
//! runs the library's controller until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use edge::log::LogFormat;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Consumer-side controller: a Purchase (a catalog contract) becomes a Liqo peering, a ResourceSlice and NamespaceOffloadings"
)]
struct Cli {
    #[command(flatten)]
    args: purchase_controller::config::Args,

    /// Log format: text or json.
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,

    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_LOG_LEVEL",
        value_name = "LEVEL",
        default_value = "info",
        help = edge::log::LOG_LEVEL_HELP
    )]
    log_level: edge::log::LogLevel,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    edge::run(
        cli.log_format,
        cli.log_level.clone(),
        controller_core::shutdown::run_until_signal(
            "the controller",
            STOP_TIMEOUT,
            |stop| async move { purchase_controller::config::run(&cli.args, stop).await },
        ),
    )
}

/// How long SIGTERM waits for the controller to stop.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
