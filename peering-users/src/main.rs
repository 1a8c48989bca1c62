//! `peering-user-controller`: on a Liqo v1 provider, a peering user per
//! consumer cluster that bought from it, its kubeconfig attached to that
//! consumer's contracts in the catalog. Parses the flags and runs the
//! library's controller until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use edge::log::LogFormat;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Provider-side controller: a Liqo v1 peering user per consumer cluster with an active contract, its kubeconfig attached to that consumer's contracts in the catalog"
)]
struct Cli {
    #[command(flatten)]
    args: peering_users::config::Args,

    /// Log format: text or json.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,

    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_LOG_LEVEL",
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
            |stop| async move { peering_users::config::run(&cli.args, stop).await },
        ),
    )
}

/// How long SIGTERM waits for the controller to stop.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
