//! The broker's offer catalog: providers publish offers, consumers browse
//! them live and buy plans, platforms buy through the Open Service Broker
//! API.
//!
//! # Layout
//!
//! Modules are layered: each imports only those listed before it (the
//! arrows point down, never up), so each can be read and changed on its
//! own.
//!
//! **Plumbing**, below every feature:
//!
//! - [`http`]: the JSON error shape ([`http::ApiError`]), reading bodies
//!   within a limit, strict input parsing and the identifier grammar,
//!   request observation (tracing span and metrics), the 405 answer with
//!   `Allow`, the per-client rate limiter.
//! - [`duration`]: the duration grammar of the flags.
//! - [`auth`]: the catalog's JWTs, argon2 secrets, the signing key, an
//!   external OIDC issuer, and the [`auth::Caller`] extractor.
//! - [`store`]: the vocabulary every feature's store trait speaks
//!   ([`store::StoreError`], the clock, the backend's health).
//!
//! **Features**, each a folder with its handlers, service logic, model,
//! store trait and its own state (handed to its handlers as its own
//! `web::Data`):
//!
//! - [`providers`]: accounts, `POST /authenticate` and `/rotate`, sealed
//!   peering tokens, the administrator's endpoints.
//! - [`offers`]: offers, plans and costs, filters, the write rules,
//!   `GET /offers` and `/offer/{id}`.
//! - [`buying`]: reservations, purchases and contracts, plan caps, their
//!   state transitions, the expiry sweeper.
//! - [`osb`]: the Open Service Broker API over buying.
//! - [`feed`]: the `/subscribe` WebSocket feed of offer changes.
//! - [`webui`]: the embedded browser UI.
//!
//! **Backends**, above the features: [`backends`] — [`backends::embedded`]
//! (one redb file) and [`backends::mongo`] (one MongoDB client), each
//! implementing every feature's store trait, opened once by
//! [`backends::Backend::open`].
//!
//! **Top**: [`config`] (the flags, composing each feature's), [`routes`]
//! (the route table), [`openapi`] (the document), [`ops`] (health,
//! readiness, metrics endpoints), [`metrics`] (the registry), [`demo`]
//! (`--demo` seeding) and [`server`] (open the backend, build each
//! feature's state, serve, shut down).

pub mod http;

pub mod auth;
pub mod duration;
pub mod store;

pub mod buying;
pub mod feed;
pub mod offers;
pub mod osb;
pub mod providers;
pub mod webui;

pub mod backends;

pub mod config;
pub mod demo;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod routes;
pub mod server;

pub use config::Config;
