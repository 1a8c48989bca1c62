//! Tenant isolation on this provider, on by default. Liqo v1.2 connects
//! every pod to every pod across peered clusters, reflects no
//! NetworkPolicy and gives consumers no right to write one here
//! (`../shared/spec/liqo-network-isolation.md` §2, §3, §6), so two
//! strangers who bought from this provider could reach each other's pods
//! and the provider's. This controller keeps them apart with standard
//! `networking.k8s.io/v1` NetworkPolicies, written with the provider's
//! credentials: each consumer's offloaded namespaces admit only that
//! consumer (here and, by its remapped CIDRs, in its other clusters), DNS
//! and the provider's opt-ins; the provider's protected namespaces admit
//! no consumer. A buyer may add its own policy for its pods here, read
//! from its contracts and rendered never wider than that
//! ([`render::buyer`]). What is rendered, and why: [`render`]. Whether the
//! cluster's CNI enforces it on traffic that arrives through Liqo's
//! gateway is not documented by Liqo: `docs/isolation.md` says how to
//! check.
//!
//! - [`settings`]: the flags;
//! - [`controller`]: the loop (watches as triggers, a pass, backoff);
//! - [`probe`]: the pod pair that shows whether the CNI enforces them,
//!   and its verdict (pure); [`prober`]: running it;
//! - [`report`]: the level told to the catalog;
//! - [`cluster`]: the reads and writes of a pass (effects);
//! - [`render`]: what a pass wants (pure).

pub mod cluster;
pub mod controller;
pub mod probe;
pub mod prober;
pub mod render;
pub mod report;
pub mod settings;
