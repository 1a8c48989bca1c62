//! What every bench reads and reports the same way, so figures in
//! `docs/benchmarks.md` from different benches mean the same thing:
//!
//! - [`measure`]: a process's CPU time and resident memory from `/proc`,
//!   and the open-file limit raised for many connections;
//! - [`percentile`]: the nearest-rank percentile of sorted samples;
//! - [`bins`]: where the workspace's binaries are (release before debug);
//! - [`units`]: durations and sizes as the tables print them;
//! - [`requests`]: a controller's API requests counted by kind.

pub mod bins;
pub mod measure;
pub mod percentile;
pub mod requests;
pub mod units;

pub use percentile::percentile;
