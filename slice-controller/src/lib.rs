//! The controller of one Liqo v1 ResourceSlice class.
//!
//! Liqo v1 replaced the gRPC resource plugin with ResourceSlices: a consumer
//! asks a provider for resources with a slice of some *class*, Liqo
//! replicates it into the provider's tenant namespace and authenticates it,
//! and — for any class but `""` and `"default"` — leaves the grant to the
//! class's controller. This crate is that controller, fed by a
//! [`ResourceReader`](resource_reader::ResourceReader) chain: each consumer
//! is granted out of what the chain offers it, by a stated
//! [`GrantPolicy`](decision::GrantPolicy).
//!
//! - [`model`]: the `ResourceSlice` and `Tenant` kinds, kept as raw JSON
//!   with typed accessors;
//! - [`decision`]: the grant decision, a pure function;
//! - [`contracts`]: the `contracts` policy's view of the catalog (the
//!   provider's active contracts, followed on the catalog's change stream,
//!   polled only as the fallback);
//! - [`enforcement`]: the provider self-check — Liqo's enforcement
//!   settings read from its Deployments, reported, and new grants held back
//!   while they do not enforce what the capacity is sold with;
//! - [`enforcement_report`]: the self-check's level sent to the catalog,
//!   which shows it on the provider's offers;
//! - [`index`]: the slice and Tenant caches indexed by consumer, so that
//!   a reconcile reads only its consumer's slices;
//! - [`status`]: the status to write for a decision, or none;
//! - [`reconcile`]: the kube-rs controller — one reconcile per consumer
//!   (Tenant), driven by slice changes, Tenant changes and chain
//!   notifications — and the status write with its 409 handling;
//! - [`metrics`] and [`http`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`config`]: the flags (clap `Args`, flattened into `resource-monitor`)
//!   and [`run`](config::run), which starts it all.
//!
//! The Kubernetes plumbing every controller shares — the client, Lease
//! election, the cache-filling watch, Events, the clock and Liqo's names —
//! is the `controller-core` crate.

pub mod config;
pub mod contracts;
pub mod decision;
pub mod enforcement;
pub mod enforcement_report;
pub mod http;
pub mod index;
pub mod metrics;
pub mod model;
pub mod reconcile;
pub mod status;
