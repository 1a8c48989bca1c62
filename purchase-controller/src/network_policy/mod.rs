//! Multi-cluster network policies (issue 43, part 2): a
//! `MultiClusterNetworkPolicy` in a namespace of this consumer — the
//! thesis' requirement format (§5.2: peers named by `service`, `cluster`
//! and `domain`, or by CIDR) — refined (§5.3) into standard
//! `networking.k8s.io/v1` NetworkPolicies: one here, and, for every
//! provider the namespace is offloaded to, a policy in the document the
//! catalog carries on the contracts with that provider
//! (`catalog_client::wire::tenant_policy`), which the provider renders.
//! docs/network-policy.md tells the whole story.
//!
//! - [`model`]: the kind and its status;
//! - [`snapshot`]: what a refinement looks at, read from the cluster's
//!   objects;
//! - [`refine`]: the refinement, pure (refusals included);
//! - [`status`]: the status, judged from what was applied here and what
//!   the providers reported;
//! - [`cluster`]: reads and writes on this cluster;
//! - [`catalog`]: the buyer's contracts, and the documents put on them;
//! - [`controller`]: the watch-driven loop.

pub mod catalog;
pub mod cluster;
pub mod controller;
pub mod model;
pub mod refine;
pub mod snapshot;
pub mod status;
