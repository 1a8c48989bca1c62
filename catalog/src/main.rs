//! `catalog`: parse the flags, set up logging, run the server.

use std::io::IsTerminal;

use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use catalog::config::{Config, LogFormat};

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(&config.log))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Never fails, never panics when stderr's reader is gone (U-09):
        // a logging panic in the signal task would make SIGTERM ignored.
        .with_writer(edge::log::Stderr)
        .log_internal_errors(false);
    // Per-connection client errors are counted and summarised, not logged
    // one ERROR each (see `ClientErrorLog`).
    let client_errors = catalog::http::observe::ClientErrorLog;
    match config.log_format {
        // Colour codes are noise in a file or a pipe: only a terminal gets them.
        LogFormat::Text => logs
            .with_ansi(std::io::stderr().is_terminal())
            .finish()
            .with(client_errors)
            .init(),
        LogFormat::Json => logs.json().finish().with(client_errors).init(),
    }
    catalog::server::run(config).await
}
