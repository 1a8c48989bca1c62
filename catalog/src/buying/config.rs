//! Flags for buying: reservation and contract lifetimes, when a contract
//! reads "ending soon", and the expiry sweeper.

use std::time::Duration;

use crate::duration::parse_duration;

/// Reservation flags (flattened into the catalog's `Config`).
#[derive(Debug, Clone, clap::Args)]
pub struct BuyingConfig {
    /// How long a reservation holds its unit unless purchased; also the
    /// longest `ttlSeconds` a consumer may ask for (e.g. 5m, 30s).
    #[arg(long, env = "CATALOG_RESERVATION_TTL", default_value = "5m", value_parser = parse_duration)]
    pub reservation_ttl: Duration,

    /// How long a contract (a REST purchase) lasts before it expires and
    /// frees its unit; also the longest `durationSeconds` a purchase may ask
    /// for (e.g. 30d, 12h).
    #[arg(long, env = "CATALOG_CONTRACT_DURATION", default_value = "30d", value_parser = parse_duration)]
    pub contract_duration: Duration,

    /// How long before its end a contract reads `endingSoon: true`, so the
    /// consumer's side can warn and extend it (`POST
    /// /contracts/{id}/extend`) in time (e.g. 1d, 12h).
    #[arg(long, env = "CATALOG_CONTRACT_ENDING_SOON", default_value = "1d", value_parser = parse_duration)]
    pub contract_ending_soon: Duration,

    /// How often the sweeper expires reservations and contracts past their
    /// deadline (reads and new reservations also expire them on the spot).
    #[arg(long, env = "CATALOG_RESERVATION_SWEEP_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reservation_sweep_interval: Duration,
}
