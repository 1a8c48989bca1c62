//! The provider's peering users: for each consumer cluster with an active
//! Liqo v1 contract of this provider in the catalog, what `liqoctl
//! generate peering-user --consumer-cluster-id X` makes (v1.2.0) — the
//! tenant namespace, a key and a CSR approved only after checking it, the
//! two RoleBindings — and its kubeconfig, attached to that consumer's
//! contracts only (`PUT /provider/contracts/{id}/peering`). When the
//! consumer's last contract ends, its side here goes in `liqoctl unpeer`'s
//! order: its Tenant (drained first if asked), its networking objects
//! (GatewayServer, PublicKey, Connection, Configuration), then its
//! RoleBindings, key and CSR.
//!
//! Modules, each one concept; imports point down this list:
//!
//! - [`config`]: the flags and [`config::run`] (probe port, leader
//!   election, the loop);
//! - [`reconcile`]: the loop — read the contracts, move each peering user
//!   on, attach, remove;
//! - [`cluster`]: the Kubernetes side of one peering user (effects);
//! - [`survey`]: what a pass lists in bulk of the objects it made;
//! - [`isolation`]: tenant isolation — each consumer's offloaded
//!   namespaces kept apart from other consumers' and the provider's by
//!   NetworkPolicies (its own loop, watch-driven, beside the contracts');
//! - [`metrics`]: `/metrics` and `/readyz`;
//! - [`drain`]: when a drained Tenant may go (pure);
//! - [`network`]: the consumer's networking objects and their order;
//! - [`plan`]: what a pass has to do (pure);
//! - [`kubeconfig`]: the kubeconfig as liqoctl writes it (pure);
//! - [`identity`]: the key, the request and the check before approval;
//! - [`names`]: Liqo's names of a peering user's objects.

pub mod cluster;
pub mod config;
pub mod drain;
pub mod identity;
pub mod isolation;
pub mod kubeconfig;
pub mod metrics;
pub mod names;
pub mod network;
pub mod plan;
pub mod reconcile;
pub mod survey;
