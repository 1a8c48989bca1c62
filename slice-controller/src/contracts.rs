//! The `contracts` grant policy's view of the catalog: the provider's
//! active contracts, followed by conditional polling of `GET
//! /contracts?active=true` with the provider's own credentials.
//!
//! - [`book`]: what the decision needs of them — per consumer cluster, the
//!   sum of its active contracts' resources — and which consumers changed
//!   between two listings (a pure function);
//! - [`client`]: the catalog client (the credentials file, `POST
//!   /authenticate`, the conditional `GET`);
//! - [`follower`]: the polling task: it keeps the last known book while
//!   the catalog is unreachable (WARN once per outage, the
//!   `slice_controller_catalog_reachable` gauge, a `/readyz` note) and
//!   names the consumers whose contracts changed, so they are reconciled
//!   without waiting for a slice event.

pub mod book;
pub mod client;
pub mod follower;

pub use book::ContractBook;
pub use client::{CatalogClient, ClientError, Credentials};
pub use follower::{Contracts, FollowerSettings};
