//! The Liqo ResourceReader contract and its gRPC transport — everything a
//! program needs to *be* or to *use* a ResourceReader, without the sources
//! and stages of `resource-monitor`.
//!
//! A [`ResourceReader`] answers *which resources may be offered to cluster X
//! right now?* ([`ResourceReader::read`]) and tells when that answer may have
//! changed ([`ResourceReader::subscribe`] yields [`Notification`]s). Readers
//! chain like tower services: a [`Layer`] wraps one reader in another.
//!
//! The crate is laid out from the contract outwards:
//!
//! - [`reader`]: the trait, notifications, [`Notifier`], [`ReadError`],
//!   [`Layer`] and [`ReaderExt`];
//! - [`memory`]: [`MemorySource`], a reader whose answer is set by code (for
//!   embedding, tests and benchmarks);
//! - [`wire`]: Liqo's three wire shapes ([`LiqoApi`]) and the conversions
//!   between them and the in-process types;
//! - [`server`]: serves any reader over gRPC in any shape, with health
//!   checking, reflection and connection guards;
//! - [`client`]: [`UpstreamClient`](client::UpstreamClient), a reconnecting
//!   client of a reader served by another process, itself a reader;
//! - [`task`]: [`AbortOnDrop`], how readers own their background tasks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use quantity::ResourceList;
//! use resource_reader::{MemorySource, server::{self, ServerOptions}, LiqoApi};
//!
//! let resources = ResourceList::from_strings([("cpu", "4"), ("memory", "16Gi")])
//!     .map_err(|(name, e)| format!("{name}: {e}"))?;
//! let reader = MemorySource::new(resources);
//! let options = ServerOptions::new(LiqoApi::V06);
//! server::serve(Arc::new(reader), "127.0.0.1:6001".parse()?, options, std::future::pending()).await?;
//! # Ok(()) }
//! ```

pub mod client;
pub mod memory;
pub mod reader;
pub mod server;
pub mod task;
pub mod wire;

pub use memory::MemorySource;
pub use reader::{
    Layer, Notification, NotificationStream, Notifier, ReadError, ReaderExt, ResourceReader,
};
pub use task::AbortOnDrop;
pub use wire::LiqoApi;
