//! Buying: consumers reserve a plan of an offer, then purchase the
//! reservation before it expires — getting a contract with the provider's
//! Liqo peering credentials — or release it. Providers may cap how many
//! concurrent reservations and purchases a plan accepts.
//!
//! - [`model`]: reservations and purchases (a REST purchase with its
//!   contract's terms), and the rules both backends follow
//!   ([`model::step`] for state transitions, [`model::sold_out`] for caps).
//! - [`contracts`]: contracts (what a REST purchase yields, its state
//!   reports, who sees what): their rules, operations and endpoints.
//! - [`changes`]: the contract change stream, `GET /contract-changes`.
//! - [`store`]: the [`ReservationStore`] trait the backends implement.
//! - [`service`]: the operations, shared by the REST API and the Open
//!   Service Broker API (the `osb` feature, above this one).
//! - [`http`], [`capacity`]: the REST endpoints; [`error`]: their answers.
//! - [`sweeper`]: the background expiry of due reservations and contracts.
//! - [`terms`]: a reservation's terms hold — a purchase gets the plan as
//!   reserved, or a 409 naming what the provider changed meanwhile.
//! - [`config`]: the flags; [`openapi`]: this feature's part of the
//!   document.
//!
//! Handlers get this feature's own state, [`Buying`], as
//! `web::Data<Buying>`.

pub mod capacity;
pub mod changes;
pub mod config;
pub mod contracts;
pub mod error;
pub mod http;
pub mod model;
pub mod openapi;
pub mod service;
pub mod store;
pub mod sweeper;
pub mod terms;

pub use config::BuyingConfig;
pub use error::BuyError;
pub use service::Buying;
pub use store::{ReservationStore, ReserveError, TransitionError};
