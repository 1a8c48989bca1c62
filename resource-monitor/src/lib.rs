//! A chain of ResourceReaders for Liqo: *which resources may be offered to
//! cluster X right now?*
//!
//! A [`ResourceReader`] can be asked ([`ResourceReader::read`]) and can tell
//! ([`ResourceReader::subscribe`] yields a [`Notification`] when an answer may
//! have changed). Readers chain like tower services: a **source** produces
//! the local answer ([`source`]: Kubernetes, this host, a static file, or an
//! upstream reader in another process over gRPC) and **stages** wrap a reader
//! and transform its answer ([`stage`]: quota, filter), composed with
//! [`ReaderExt::layer`]. The [`server`] serves any reader to Liqo in the wire
//! shape of the Liqo release at hand, and the [`client`] reads one served by
//! another process, so every stage works in one process or across processes.
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
pub mod cli;
pub mod client;
pub mod config;
pub mod directory;
pub mod pattern;
pub mod reader;
pub mod server;
pub mod source;
pub mod stage;
mod task;
pub mod wire;

pub use directory::{ClusterDirectory, Selector};
pub use reader::{
    Layer, Notification, NotificationStream, Notifier, ReadError, ReaderExt, ResourceReader,
};
pub use wire::LiqoApi;
