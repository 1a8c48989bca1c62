//! The broker's offer catalog.
//!
//! Providers authenticate with their Liqo peering credentials
//! (`POST /authenticate`, [`auth`]) and publish offers (`POST /offer/{id}`,
//! [`api`]); anyone lists and filters them (`GET /offers`). Offers live in a
//! [`store::Store`]: the embedded redb store by default, MongoDB when
//! configured; both publish committed changes on [`store::Store::changes`].
//!
//! Layout: [`model`] (offers, plans, costs, validation), [`store`],
//! [`auth`], [`api`] (handlers, error shape, observation), [`state`]
//! ([`AppState`]), [`feed`] (the `/subscribe` WebSocket feed), [`webui`]
//! (embedded UI files), [`metrics`], [`server`]
//! (wiring and shutdown), [`config`] (flags), [`demo`] (`--demo` seeding).

pub mod api;
pub mod auth;
pub mod config;
pub mod demo;
pub mod feed;
pub mod metrics;
pub mod model;
pub mod osb;
pub mod ratelimit;
pub mod reservation;
pub mod server;
pub mod state;
pub mod store;
pub mod webui;

pub use config::Config;
pub use state::{AppState, Limits};
