//! `service-controller`: on a service provider's cluster, ServiceCatalogs
//! become service offers and each service contract a running instance.
//! Parses the flags and runs the library's controller until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use edge::log::LogFormat;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Provider-side controller: ServiceCatalogs become service offers in the catalog; each service contract a peering towards the customer, an offloaded instance namespace with the rendered objects, and binding Secrets"
)]
struct Cli {
    #[command(flatten)]
    args: service_controller::config::Args,

    /// Log format: text or json.
    #[arg(
        long,
        env = "SERVICE_CONTROLLER_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,

    #[arg(
        long,
        env = "SERVICE_CONTROLLER_LOG_LEVEL",
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
            |stop| async move { service_controller::config::run(&cli.args, stop).await },
        ),
    )
}

/// How long SIGTERM waits for the controller to stop.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
