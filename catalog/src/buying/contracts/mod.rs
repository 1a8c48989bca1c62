//! Contracts: what a REST purchase yields. The contract is the purchased
//! record itself (a [`Reservation`](crate::buying::model::Reservation)
//! with its [`ContractTerms`](crate::buying::model::ContractTerms)); this
//! folder is what is built on that record.
//!
//! - [`model`]: the contract as each party sees it, state reports, who
//!   sees what, and the rules about them, written once (pure).
//! - [`service`]: the operations, independent of HTTP: terms and
//!   credentials at purchase, listing, reading and reporting.
//! - [`http`]: the `/contracts` endpoints.

pub mod http;
pub mod model;
pub mod service;
