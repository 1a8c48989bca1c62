//! `catalog`: parse the flags, set up logging, run the server.

use clap::Parser;
use tracing_subscriber::EnvFilter;

use catalog::config::{Config, LogFormat};

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(&config.log))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    catalog::server::run(config).await
}
