//! Flags for buying: reservation lifetime, the expiry sweeper, the key that
//! seals peering tokens, and the administrator's secret.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::parse_duration;

/// Reservation and administration flags (flattened into
/// [`crate::Config`]).
#[derive(Debug, Clone, clap::Args)]
pub struct BuyingConfig {
    /// How long a reservation holds its unit unless purchased; also the
    /// longest `ttlSeconds` a consumer may ask for (e.g. 5m, 30s).
    #[arg(long, env = "CATALOG_RESERVATION_TTL", default_value = "5m", value_parser = parse_duration)]
    pub reservation_ttl: Duration,

    /// How often the sweeper expires reservations past their deadline
    /// (reads and new reservations also expire them on the spot).
    #[arg(long, env = "CATALOG_RESERVATION_SWEEP_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reservation_sweep_interval: Duration,

    /// File whose bytes (at least 32) key the encryption of providers'
    /// peering tokens at rest. Default: a key derived from the JWT signing
    /// key. With MongoDB and no configured JWT key, the signing key lives in
    /// the database, so set this to keep the sealing key off it.
    #[arg(long, env = "CATALOG_PEERING_KEY_FILE")]
    pub peering_key_file: Option<PathBuf>,

    /// Administrator secret (at least 16 bytes), exchanged for an admin
    /// token at POST /authenticate/admin. Unset: no admin login (OIDC
    /// admins still work). Prefer the environment variable or the file.
    #[arg(long, env = "CATALOG_ADMIN_SECRET", hide_env_values = true)]
    pub admin_secret: Option<String>,

    /// File holding the administrator secret.
    #[arg(
        long,
        env = "CATALOG_ADMIN_SECRET_FILE",
        conflicts_with = "admin_secret"
    )]
    pub admin_secret_file: Option<PathBuf>,
}
