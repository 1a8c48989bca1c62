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
//! - [`claim`]: a consumer cluster ID belongs to one consumer at a time
//!   per provider (pure; the stores write it atomically).
//! - [`extension`]: contracts that continue — extending one before it
//!   ends (pure).
//! - [`network_policy`]: the buyer's network policy carried on a contract
//!   and its provider's report — revisions, who may change what (pure).
//! - [`http`]: the `/contracts` endpoints and the provider's
//!   `/provider/contracts/{id}/peering` and
//!   `/provider/contracts/{id}/network-policy/status`.

pub mod claim;
pub mod extension;
pub mod http;
pub mod model;
pub mod network_policy;
pub mod peering;
pub mod service;
