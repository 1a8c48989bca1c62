//! Shared support for the end-to-end tests: find the workspace's built
//! binaries, start them as real processes on free loopback ports, wait until
//! they listen, and kill them when the test ends.
//!
//! The binaries are built by the test script (`cargo build --workspace
//! --bins`) before the tests run; they live next to the test executable's
//! `deps/` directory, whatever `CARGO_TARGET_DIR` is.

pub mod buying;
pub mod catalog;
pub mod contracts;
pub mod grpc;
pub mod http;
/// What the benches read of a process (kept here for the benches that
/// already take `e2e`; the controllers' benches take `bench-support` alone).
pub use bench_support::measure;
pub mod mongo;
pub mod oidc_issuer;
pub mod osb_client;
pub mod process;
pub mod rbac;
pub mod ws;

pub use process::{bin_path, free_port, wait_for_log, wait_for_port, Child, Spawn};

/// How long a test waits for something the product does eventually (a
/// Purchase reaching Ready, a feed message arriving, a controller
/// converging, a server answering) when no product setting bounds it.
///
/// Long enough that only a hang or a lost event fails: on a loaded
/// two-core machine a product that works can take many seconds to get
/// there, and a wait that polls ends as soon as the condition holds, so a
/// longer bound never slows a passing test. Well under nextest's
/// per-test limit (`.config/nextest.toml`: terminated after 6 × 30 s), so
/// a hang fails with this wait's message rather than a kill.
///
/// Only for waits that succeed early: not for "nothing happens within X"
/// (each run would last the whole bound), nor for a bound the product
/// promises (an answer within its configured timeout, a takeover within
/// its lease, a shutdown within its grace), which stays derived from the
/// product's setting.
pub const EVENTUALLY: std::time::Duration = std::time::Duration::from_secs(60);
