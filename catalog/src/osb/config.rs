//! Flags of the Open Service Broker API.

use clap::ValueEnum;

/// When provisioning and deprovisioning answer asynchronously.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AsyncMode {
    /// Always synchronous (201/200), even with `accepts_incomplete=true`.
    Never,
    /// Asynchronous (202, then `last_operation`) when the platform sends
    /// `accepts_incomplete=true`, synchronous otherwise.
    Allowed,
    /// Asynchronous only: requests without `accepts_incomplete=true` get
    /// 422 `AsyncRequired`.
    Required,
}

/// OSB flags (flattened into the catalog's `Config`).
#[derive(Debug, Clone, clap::Args)]
pub struct OsbConfig {
    /// User name of the platform account for HTTP basic authentication on
    /// /v2 (with --osb-password). Bearer tokens with the consumer or admin
    /// role are accepted as well.
    #[arg(long, env = "CATALOG_OSB_USERNAME", requires = "osb_password")]
    pub osb_username: Option<String>,

    /// Password of the platform account (at least 16 bytes). Prefer the
    /// environment variable to the flag.
    #[arg(
        long,
        env = "CATALOG_OSB_PASSWORD",
        hide_env_values = true,
        requires = "osb_username"
    )]
    pub osb_password: Option<String>,

    /// When provisioning answers 202 and runs in the background.
    #[arg(long, env = "CATALOG_OSB_ASYNC", value_enum, default_value_t = AsyncMode::Allowed)]
    pub osb_async: AsyncMode,

    /// Currency key of plan costs in the OSB catalog
    /// (`metadata.costs[].amount`). Default: --currency in lower case
    /// (`eur`), as OSB's examples spell currencies.
    #[arg(long, env = "CATALOG_OSB_CURRENCY")]
    pub osb_currency: Option<String>,

    /// Unit of plan costs in the OSB catalog (`metadata.costs[].unit`).
    /// Default: from --cost-period, HOURLY or MONTHLY.
    #[arg(long, env = "CATALOG_OSB_COST_UNIT")]
    pub osb_cost_unit: Option<String>,

    /// Hold every asynchronous operation this long before doing it (e.g.
    /// 5s), so a platform's handling of `last_operation` polling and of
    /// ConcurrencyError can be exercised. Keep 0s in production.
    #[arg(long, env = "CATALOG_OSB_ASYNC_DELAY", default_value = "0s", value_parser = crate::duration::parse_duration)]
    pub osb_async_delay: std::time::Duration,
}
