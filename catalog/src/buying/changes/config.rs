//! The contract change stream's limits and timings, as command-line flags
//! (flattened into the catalog's `Config`), each with an environment
//! fallback.

use std::time::Duration;

use clap::Args;

use crate::duration::parse_duration;

/// Limits of `GET /contract-changes`.
#[derive(Debug, Clone, Args)]
pub struct ContractStreamConfig {
    /// How often a contract change stream with nothing to send sends a
    /// `heartbeat` line carrying its position (e.g. 15s, 500ms).
    #[arg(long, env = "CATALOG_CONTRACT_STREAM_HEARTBEAT", default_value = "15s", value_parser = parse_duration)]
    pub contract_stream_heartbeat: Duration,

    /// Most contract change streams one identity (a token's subject) may
    /// hold open; one more is answered 429 until one closes.
    #[arg(long, env = "CATALOG_CONTRACT_STREAM_PER_IDENTITY", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub contract_stream_per_identity: u32,

    /// Most contract change streams this process holds open; one more is
    /// answered 503 until one closes.
    #[arg(long, env = "CATALOG_CONTRACT_STREAM_MAX", default_value_t = 20_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub contract_stream_max: u32,

    /// Lines a stream may have waiting for its client; one more and the
    /// stream is closed as too slow (its client resumes from the last
    /// sequence it read).
    #[arg(long, env = "CATALOG_CONTRACT_STREAM_QUEUE", default_value_t = 64,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub contract_stream_queue: u16,
}

impl Default for ContractStreamConfig {
    fn default() -> Self {
        ContractStreamConfig {
            contract_stream_heartbeat: Duration::from_secs(15),
            contract_stream_per_identity: 4,
            contract_stream_max: 20_000,
            contract_stream_queue: 64,
        }
    }
}

impl ContractStreamConfig {
    /// Refuse a heartbeat of zero (a stream that never waits).
    pub fn validate(&self) -> Result<(), String> {
        if self.contract_stream_heartbeat.is_zero() {
            return Err("--contract-stream-heartbeat must be more than zero".into());
        }
        Ok(())
    }
}
