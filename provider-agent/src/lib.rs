//! The provider agent: keeps one plan of a provider's offer in the catalog
//! in step with what the provider's ResourceReader chain offers, so the
//! offer is "pulled directly from the provider's Liqo instance and
//! automatically updated" instead of typed by hand.
//!
//! - [`config`]: the credentials file, the reader to follow, the target
//!   offer and plan, checked before anything is contacted;
//! - the catalog itself is reached through the `catalog-client` crate (a
//!   provider [`Session`](catalog_client::Session): authenticate, keep the
//!   token fresh, read and write an offer, failures sorted into retry or
//!   stop);
//! - [`offer`]: replacing one plan's resources in an offer and nothing else;
//! - [`sync`]: the loop — debounce notifications, detect changes, write,
//!   retry with [`edge::backoff`].
//!
//! The reader is any [`resource_reader::ResourceReader`]: a running
//! `resource-monitor` over gRPC (its reconnecting
//! [`UpstreamClient`](resource_reader::client::UpstreamClient)), or a
//! chain built in-process from a chain file (the `chain` feature, on by
//! default).

pub mod config;
pub mod offer;
pub mod sync;

pub use catalog_client::Error as CatalogError;
pub use catalog_client::Session as CatalogClient;
pub use config::{CreateDefaults, Credentials, ReaderSpec, Target};
pub use sync::{Agent, SyncError, SyncOptions};
