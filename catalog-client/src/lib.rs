//! The catalog, as every other program of the workspace talks to it: one
//! set of wire types, one client. (Laid out like tokio's mini-redis: each
//! module holds one thing and says so.)
//!
//! Always built (no HTTP, so the catalog server itself can depend on it with
//! `default-features = false` and a renamed field fails the build instead of
//! an end-to-end test):
//!
//! - [`wire`]: the JSON the catalog reads and writes — offers, plans, costs,
//!   contracts, peering credentials, tokens, feed events, error bodies;
//! - [`routes`]: the catalog's paths, the only place outside the server
//!   that spells them;
//! - [`kubeconfig`]: the one allow-list for kubeconfigs another party
//!   wrote (peering users): the catalog checks what it takes in with it,
//!   the controllers what they build a client from.
//!
//! With the `client` feature (on by default):
//!
//! - [`credentials`]: the provider's credentials file — owner-only, bounded,
//!   JSON or TOML, never echoing the secret;
//! - [`error`]: every failure, sorted by what a caller does about it;
//! - [`http`]: the HTTPS transport (rustls with the ring provider), bounded
//!   reads, the catalog's error bodies;
//! - [`session`]: an authenticated session — a provider (`POST
//!   /authenticate`), an administrator or a consumer's bearer token — that
//!   renews its token before it expires and once on a 401;
//! - [`offers`], [`contracts`], [`admin`], [`self_check`], [`services`]:
//!   the endpoints the workspace's programs call, as methods of
//!   [`Session`] ([`self_check`]: the provider's enforcement and isolation
//!   reports);
//! - [`market`]: browsing and buying from a terminal — the offer list with
//!   its filters, one offer, reservations, purchases answered with the
//!   contract, the caller's contracts with theirs;
//! - [`feed`]: an async follower of the WebSocket feed `GET /subscribe`,
//!   reconnecting with [`Backoff`] and starting over from the snapshot the
//!   catalog sends on every connect;
//! - [`contract_follower`]: one follower of the caller's contracts for every
//!   controller — the change stream `GET /contract-changes`, resumed after
//!   a reconnect, with polling only while the stream is unavailable.
//!
//! Imports point down: `feed` and the endpoints use `session`, which uses
//! `http`, `credentials` and `error`; all of them use `wire` and `routes`.

pub mod kubeconfig;
pub mod routes;
pub mod wire;

#[cfg(feature = "client")]
pub mod admin;
#[cfg(feature = "client")]
pub mod contract_follower;
#[cfg(feature = "client")]
pub mod contracts;
#[cfg(feature = "client")]
pub mod credentials;
#[cfg(feature = "client")]
pub mod error;
#[cfg(feature = "client")]
pub mod feed;
#[cfg(feature = "client")]
pub mod http;
#[cfg(feature = "client")]
pub mod market;
#[cfg(feature = "client")]
pub mod offers;
#[cfg(feature = "client")]
pub mod self_check;
#[cfg(feature = "client")]
pub mod services;
#[cfg(feature = "client")]
pub mod session;

#[cfg(feature = "client")]
pub use credentials::{CredentialsError, Exposure};
#[cfg(feature = "client")]
pub use edge::backoff::Backoff;
#[cfg(feature = "client")]
pub use error::Error;
#[cfg(feature = "client")]
pub use http::Http;
#[cfg(feature = "client")]
pub use session::{Login, Session};
