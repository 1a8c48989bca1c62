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
pub mod mongo;
pub mod oidc_issuer;
pub mod osb_client;
pub mod process;
pub mod rbac;
pub mod ws;

pub use process::{bin_path, free_port, wait_for_log, wait_for_port, Child, Spawn};
