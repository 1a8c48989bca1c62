//! The `contracts` grant policy's view of the catalog: the provider's
//! active contracts, followed on the catalog's contract change stream
//! through `catalog-client`'s
//! [`ContractFollower`](catalog_client::contract_follower::ContractFollower)
//! (conditional polling of `GET /contracts?active=true` only while the
//! stream is unavailable), with the provider's own credentials.
//!
//! - [`book`]: what the decision needs of them — per consumer cluster, the
//!   sum of its active contracts' resources — and which consumers changed
//!   between two listings (pure functions);
//! - the catalog client is `catalog-client`'s provider
//!   [`Session`](catalog_client::Session): the credentials file (refused
//!   when others may read it), `POST /authenticate` and the token's
//!   renewal; the follower has a session of its own;
//! - [`follower`]: the task reading the follower: it keeps the last known
//!   book while the catalog is unreachable (WARN once per outage, the
//!   `slice_controller_catalog_reachable` gauge, a `/readyz` note) and
//!   names the consumers whose contracts changed, so they are reconciled
//!   without waiting for a slice event.

pub mod book;
pub mod follower;

pub use book::ContractBook;
pub use catalog_client::Error as ClientError;
pub use catalog_client::Session as CatalogClient;
pub use follower::{Contracts, FollowerSettings};
