//! The aggregator: providers that pool present one offer. It fans each
//! read out to N upstream ResourceReaders (the `resource-monitor` chains of
//! the pooled clusters), answers with the per-resource sum, and joins their
//! notification streams into one.
//!
//! - [`config`]: flags and TOML file → [`config::Settings`].
//! - [`upstream`]: one upstream — `resource-reader`'s reconnecting client,
//!   its last-known answers, up/down.
//! - [`sum`]: the summing [`ResourceReader`](resource_reader::ResourceReader).
//! - [`policy`]: what a read does with an unreachable or slow upstream.
//! - [`notify`]: upstream notifications merged and coalesced.
//! - [`metrics`], [`http`]: Prometheus metrics, `/status`, `/healthz`.
//! - [`reload`]: SIGHUP and file-change reload.
//! - [`app`]: wiring; serving is `resource-reader`'s gRPC server.

pub mod app;
pub mod config;
pub mod http;
pub mod metrics;
pub mod notify;
pub mod policy;
pub mod reload;
pub mod sum;
pub mod upstream;

pub use config::{Cli, Settings};
pub use policy::Policy;
pub use sum::Aggregate;
