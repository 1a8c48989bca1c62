//! Contracts: what a REST purchase yields. The contract is the purchased
//! record itself (a [`Reservation`](crate::buying::model::Reservation)
//! with its [`ContractTerms`](crate::buying::model::ContractTerms)); this
//! folder is what is built on that record.
//!
//! - [`model`]: the contract as each party sees it, state reports, who
//!   sees what, and the rules about them, written once (pure).
//! - [`service`]: the operations, independent of HTTP: terms and
//!   credentials at purchase, listing, reading and reporting.
//! - [`peering`]: a Liqo v1 contract's own peering credentials — the
//!   consumer cluster ID a purchase names, the kubeconfig its provider
//!   attaches, what is released and the state the consumer follows (pure).
//! - [`extension`]: contracts that continue — extending one before it
//!   ends (pure).
//! - [`http`]: the `/contracts` endpoints and the provider's
//!   `/provider/contracts/{id}/peering`.

pub mod extension;
pub mod http;
pub mod model;
pub mod peering;
pub mod service;
