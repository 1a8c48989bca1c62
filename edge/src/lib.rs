//! What every liqo-broker binary shares at its edge — the part between the
//! operating system and the program's own logic (ripgrep's `grep-cli` is the
//! model):
//!
//! - [`duration`]: the one duration grammar of every flag, environment
//!   variable and config file value (`30s`, `5m`, `1h 30m`, `7d`, or bare
//!   seconds), as a clap `value_parser`;
//! - [`log`]: `--log-format text|json`, `--log-level` and logging set-up;
//! - [`signal`]: the shutdown signal (SIGTERM or Ctrl-C);
//! - [`run`]: run a program's async `main` and turn its outcome into an exit
//!   code with a one-line error;
//! - [`conn`]: a guarded TCP accept loop for servers facing untrusted
//!   clients (a handshake deadline, per-peer and total connection limits);
//! - [`config_file`]: reading a file a flag names — regular files only,
//!   size-bounded, within a deadline, errors naming the flag and the file;
//! - [`backoff`]: capped exponential retry delays with jitter;
//! - [`announce`]: the stdout line a server prints for each port it bound,
//!   so it can be started on port 0 and found;
//! - `metrics` (feature `metrics`): what every `/metrics` shares, the
//!   `<binary>_build_info` gauge and the exposition format a scraper asks
//!   for (OpenMetrics or the Prometheus text format);
//! - `probe` (feature `axum`): the operator's HTTP port, `/healthz`,
//!   `/readyz` and `/metrics`, guarded and announced.
//!
//! ```no_run
//! use std::process::ExitCode;
//! use std::time::Duration;
//!
//! #[derive(clap::Parser)]
//! struct Args {
//!     #[arg(long, value_parser = edge::duration::parse, default_value = "30s")]
//!     timeout: Duration,
//!     #[arg(long, default_value = "text")]
//!     log_format: edge::log::LogFormat,
//!     #[arg(long, default_value = "info", help = edge::log::LOG_LEVEL_HELP)]
//!     log_level: edge::log::LogLevel,
//! }
//!
//! fn main() -> ExitCode {
//!     let args = <Args as clap::Parser>::parse();
//!     edge::run(args.log_format, args.log_level, async move {
//!         edge::signal::shutdown().await;
//!         Ok(())
//!     })
//! }
//! ```

pub mod announce;
pub mod backoff;
pub mod config_file;
pub mod conn;
pub mod duration;
pub mod log;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "axum")]
pub mod probe;
mod run;
pub mod signal;

pub use run::{describe, run, SHUTDOWN_GRACE};
