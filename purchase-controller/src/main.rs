//! `purchase-controller`: on a consumer cluster, turn Purchases into Liqo
//! peerings, ResourceSlices and NamespaceOffloadings. Parses the flags and
//! runs the library's controller until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use edge::log::LogFormat;
use tokio_util::sync::CancellationToken;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    edge::run(cli.log_format, run(cli.args))
}

async fn run(args: purchase_controller::config::Args) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move { purchase_controller::config::run(&args, stop).await })
    };
    tokio::pin!(task);
    tokio::select! {
        result = &mut task => return Ok(result??),
        () = edge::signal::shutdown() => {}
    }
    stop.cancel();
    // kube's Controller waits for ever for a cache that never filled (the
    // API server unreachable), and a reconcile may be stuck on a call: the
    // process exits after `STOP_TIMEOUT` regardless.
    match tokio::time::timeout(STOP_TIMEOUT, &mut task).await {
        Ok(result) => Ok(result??),
        Err(_) => {
            tracing::warn!("the controller still running after {STOP_TIMEOUT:?}; exiting anyway");
            Ok(())
        }
    }
}

/// How long SIGTERM waits for the controller to stop.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
