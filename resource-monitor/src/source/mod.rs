//! Sources: the first reader of a chain, producing the local answer.
//!
//! - [`KubernetesSource`]: Liqo's local monitor — watches Nodes and Pods.
//! - [`HostSource`]: this machine's CPUs, memory and disk.
//! - [`StaticFile`]: a YAML/JSON file of resources, re-read when it changes.
//! - [`GrpcSource`]: an upstream ResourceReader in another process.
//! - [`MemorySource`]: a list set by code.

mod host;
pub mod kubernetes;
mod static_file;

pub use host::{HostError, HostOptions, HostSource};
pub use kubernetes::{KubernetesError, KubernetesOptions, KubernetesSource};
pub use resource_reader::client::UpstreamClient as GrpcSource;
pub use resource_reader::MemorySource;
pub use static_file::{StaticFile, StaticFileError};

#[cfg(test)]
pub(crate) use static_file::parse as static_file_parse;
