//! `catalog`: parse the flags, set up logging, run the server.

use clap::Parser;

use catalog::config::Config;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    // Per-connection client errors are counted and summarised, not logged
    // one ERROR each (see `ClientErrorLog`).
    edge::log::init_with(
        config.log_format,
        config.log_level.as_str(),
        catalog::http::observe::ClientErrorLog,
    );
    catalog::server::run(config).await
}
