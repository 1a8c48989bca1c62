//! Command-line flags, each with an environment-variable fallback: the
//! server's own, composed with each feature's config struct (flattened).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::duration::parse_duration;

/// The offer catalog of the Liqo resource broker: providers publish offers
/// over a JWT-protected REST API; anyone can browse and filter them.
///
/// Stores offers in an embedded database under --data-dir, or in MongoDB when
/// --mongodb-uri is given. Every flag can also be set through the environment
/// variable shown with it.
#[derive(Debug, Clone, Parser)]
#[command(name = "catalog", version, about, long_about)]
pub struct Config {
    /// Address to serve HTTP on.
    #[arg(long, env = "CATALOG_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Address to serve /metrics on, apart from the API (e.g.
    /// 0.0.0.0:9090): /metrics is then served there only, with the same
    /// connection limits and deadlines as --listen, so the scraper needs no
    /// access to the API port and the API port does not publish the metrics.
    /// Unset: /metrics is served on --listen beside the API, as before this
    /// flag existed.
    #[arg(long, env = "CATALOG_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Directory for the embedded database and the generated JWT signing key.
    #[arg(long, env = "CATALOG_DATA_DIR", default_value = "./catalog-data")]
    pub data_dir: PathBuf,

    /// MongoDB connection string; when set, offers and providers live in
    /// MongoDB instead of the embedded store (several catalog processes may
    /// share one database).
    #[arg(long, env = "CATALOG_MONGODB_URI", hide_env_values = true)]
    pub mongodb_uri: Option<String>,

    /// MongoDB database name.
    #[arg(
        long,
        env = "CATALOG_MONGODB_DATABASE",
        default_value = "liqo_broker_catalog"
    )]
    pub mongodb_database: String,

    /// The longest one MongoDB store operation may take, retries included,
    /// before the request fails with 503 (e.g. 5s, 500ms): a database that
    /// is down or hangs is answered within it, a write cut short as "outcome
    /// unknown". Also the driver's server-selection and connect timeouts,
    /// and (kept within 0.5-10s) its heartbeat; `/readyz` pings within
    /// min(1s, this).
    #[arg(long, env = "CATALOG_MONGODB_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub mongodb_timeout: Duration,

    /// How long MongoDB keeps the tombstone of a deleted offer (which keeps
    /// the id's version counting, so a write conditioned on a version read
    /// before the deletion still fails) before purging it. 0s keeps them
    /// forever. The embedded store needs none.
    #[arg(long, env = "CATALOG_MONGODB_TOMBSTONE_TTL", default_value = "7d", value_parser = parse_duration)]
    pub mongodb_tombstone_ttl: Duration,

    /// File holding the JWT signing key (at least 32 bytes). Without it (and
    /// without --jwt-key), a key is generated once and kept: in
    /// <data-dir>/jwt-signing.key (mode 0600) for the embedded store, in the
    /// database for MongoDB, so every process sharing it accepts the same tokens.
    #[arg(long, env = "CATALOG_JWT_KEY_FILE")]
    pub jwt_key_file: Option<PathBuf>,

    /// The JWT signing key itself (at least 32 bytes). Prefer the environment
    /// variable to the flag, which other local users can see.
    #[arg(
        long,
        env = "CATALOG_JWT_KEY",
        hide_env_values = true,
        conflicts_with = "jwt_key_file"
    )]
    pub jwt_key: Option<String>,

    /// Issuer (`iss`) of the tokens this catalog issues and accepts.
    #[arg(
        long,
        env = "CATALOG_JWT_ISSUER",
        default_value = "liqo-broker-catalog"
    )]
    pub jwt_issuer: String,

    /// Audience (`aud`) of the tokens this catalog issues and accepts.
    #[arg(
        long,
        env = "CATALOG_JWT_AUDIENCE",
        default_value = "liqo-broker-catalog"
    )]
    pub jwt_audience: String,

    /// Lifetime of issued tokens (e.g. 1h, 30m).
    #[arg(long, env = "CATALOG_TOKEN_TTL", default_value = "1h", value_parser = parse_duration)]
    pub token_ttl: Duration,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "CATALOG_MAX_BODY_BYTES", default_value_t = 64 * 1024)]
    pub max_body_bytes: usize,

    /// POST /authenticate calls allowed per client address per minute
    /// (0: no limit).
    #[arg(long, env = "CATALOG_AUTH_RATE_LIMIT", default_value_t = 60)]
    pub auth_rate_limit: u32,

    /// How long a client may take to send a request's head (request line
    /// and headers) once its connection is open; slower ones get 408 and are
    /// disconnected. 0s: no limit.
    #[arg(long, env = "CATALOG_REQUEST_HEAD_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub request_head_timeout: Duration,

    /// How long a client may take to send a request's whole body once its
    /// head has arrived (bodies are at most --max-body-bytes); slower ones
    /// get 408 and are disconnected. Does not apply to WebSocket feeds.
    /// 0s: no limit.
    #[arg(long, env = "CATALOG_REQUEST_BODY_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub request_body_timeout: Duration,

    /// How long an idle keep-alive connection stays open waiting for its
    /// next request. 0s: close every connection after its response.
    #[arg(long, env = "CATALOG_KEEP_ALIVE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub keep_alive_timeout: Duration,

    /// Most concurrent connections per worker.
    #[arg(long, env = "CATALOG_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// HTTP worker threads (0: one per CPU).
    #[arg(long, env = "CATALOG_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish.
    #[arg(long, env = "CATALOG_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Seed a demo provider with a few offers if it does not exist yet, and
    /// print its credentials once.
    #[arg(long, env = "CATALOG_DEMO")]
    pub demo: bool,

    /// The currency plan costs are counted in: an ISO 4217 code, three
    /// upper-case letters (EUR, USD). Served on every offer and contract
    /// as `pricing.currency`.
    #[arg(long, env = "CATALOG_CURRENCY", default_value = "EUR", value_parser = parse_currency)]
    pub currency: String,

    /// The period one plan `cost` pays for: hour or month (30 days). A
    /// contract accrues its cost by the second while it is active; a
    /// cancelled one stops at its end. Served on every offer and contract
    /// as `pricing.per`.
    #[arg(long, env = "CATALOG_COST_PERIOD", default_value = "hour")]
    pub cost_period: CostPeriod,

    // `--log` is the flag's former name (issue 46), still accepted; its
    // variable, `CATALOG_LOG`, is not read any more.
    #[arg(
        long,
        visible_alias = "log",
        env = "CATALOG_LOG_LEVEL",
        value_name = "LEVEL",
        default_value = "info",
        help = edge::log::LOG_LEVEL_HELP
    )]
    pub log_level: edge::log::LogLevel,

    /// Log format.
    #[arg(long, env = "CATALOG_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub feed: crate::feed::FeedConfig,

    #[command(flatten)]
    pub buying: crate::buying::BuyingConfig,

    #[command(flatten)]
    pub contract_stream: crate::buying::changes::ContractStreamConfig,

    #[command(flatten)]
    pub providers: crate::providers::ProvidersConfig,

    #[command(flatten)]
    pub osb: crate::osb::OsbConfig,

    #[command(flatten)]
    pub oidc: crate::auth::oidc::OidcConfig,
}

/// `--log-format`: shared by every binary of the project.
pub use edge::log::LogFormat;

use catalog_client::wire::{CostPeriod, Pricing};

/// `--currency`: refused at start unless it has the ISO 4217 shape.
fn parse_currency(s: &str) -> Result<String, catalog_client::wire::PricingError> {
    catalog_client::wire::check_currency(s)?;
    Ok(s.to_string())
}

impl Config {
    /// The unit of every cost this catalog serves.
    pub fn pricing(&self) -> Pricing {
        Pricing {
            currency: self.currency.clone(),
            per: self.cost_period,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_an_env_fallback_and_help() {
        use clap::CommandFactory;
        let cmd = Config::command();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(
                arg.get_env().is_some(),
                "--{id} has no environment variable"
            );
            assert!(arg.get_help().is_some(), "--{id} has no help");
        }
    }

    #[test]
    fn pricing_flags_are_checked() {
        let parse = |args: &[&str]| {
            Config::try_parse_from(std::iter::once("catalog").chain(args.iter().copied()))
        };
        let c = parse(&[]).unwrap();
        assert_eq!(c.pricing().to_string(), "EUR/hour");
        let c = parse(&["--currency", "USD", "--cost-period", "month"]).unwrap();
        assert_eq!(c.pricing().to_string(), "USD/month");
        for bad in [
            &["--currency", "eur"][..],
            &["--currency", "EURO"],
            &["--cost-period", "day"],
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad[1]), "{e}");
        }
    }
}
