//! A chain of ResourceReaders for Liqo: *which resources may be offered to
//! cluster X right now?*
//!
//! The contract — the [`ResourceReader`] trait, its notifications, the wire
//! shapes, the gRPC server and client — lives in the `resource-reader`
//! crate and is re-exported here, so a chain's user needs one dependency.
//! This crate holds what produces and transforms answers:
//!
//! - [`source`]: the first reader of a chain — Kubernetes, this host, a
//!   static file, or an upstream reader in another process over gRPC;
//! - [`stage`]: readers that wrap a reader and transform its answer (quota,
//!   filter), composed with [`ReaderExt::layer`];
//! - [`directory`] and [`pattern`]: who is asking (cluster labels,
//!   selectors) and resource-name patterns, shared by the stages;
//! - [`config`]: the chain file; [`chain`]: a chain built from it.
//!
//! The `resource-monitor` binary serves a chain with [`server`], so every
//! stage works in one process or across processes.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use resource_monitor::{ReaderExt, server::{self, LiqoApi, ServerOptions}};
//! use resource_monitor::source::StaticFile;
//! use resource_monitor::stage::{QuotaLayer, QuotaConfig, FilterLayer, FilterConfig};
//!
//! let reader = StaticFile::open("resources.yaml").await?
//!     .layer(QuotaLayer::new(QuotaConfig::percent(50)?, Default::default()))
//!     .layer(FilterLayer::new(FilterConfig::default(), Default::default()));
//! let options = ServerOptions::new(LiqoApi::V06);
//! server::serve(Arc::new(reader), "127.0.0.1:6001".parse()?, options, std::future::pending()).await?;
//! # Ok(()) }
//! ```

pub mod chain;
pub mod config;
pub mod directory;
pub mod pattern;
pub mod source;
pub mod stage;
#[cfg(test)]
mod test_support;

pub use directory::{ClusterDirectory, Selector};
/// The contract and its transport, from `resource-reader`.
pub use resource_reader::{
    client, reader, server, wire, Layer, LiqoApi, Notification, NotificationStream, Notifier,
    ReadError, ReaderExt, ResourceReader,
};
