//! The consumer side of a catalog contract: a controller, run on the
//! consumer's cluster, that turns a `Purchase` (a contract id, or an offer
//! and plan to buy) into a Liqo peering with the provider, a ResourceSlice
//! of the contract's class and resources (Liqo v1), and a
//! NamespaceOffloading in each listed namespace — reporting each step on
//! the Purchase and as the contract's state in the catalog.
//!
//! - [`model`]: the `Purchase` kind;
//! - [`catalog`]: a consumer session with the catalog (`catalog-client`),
//!   opened from the credentials Secret, and its answers sorted;
//! - [`direct`]: a Purchase from a peering user's kubeconfig, with no
//!   catalog (what a contract would say, made from the spec and the
//!   remote cluster);
//! - [`contract_stream`]: the buyer's contracts on the catalog's change
//!   stream, one follower per catalog and credentials Secret, whose
//!   changes wake the Purchases of the contracts that changed;
//! - [`secret_ref`]: the Secrets a spec names;
//! - [`secret_scope`]: the namespaces whose Secrets the controller may
//!   use (`--secret-namespaces`), and the refusal of a Purchase needing
//!   another;
//! - [`liqo`]: the Liqo objects (v0.10.3 and v1.2.0), built and read as
//!   pure functions, and the ownership marks;
//! - [`networking`] and [`authentication`]: Liqo v1's networking and
//!   authentication steps of a peering, done as `liqoctl peer` does them,
//!   against both API servers;
//! - [`sharing`]: Purchases of one provider sharing its virtual nodes
//!   (the `NodesShared` condition), judged;
//! - [`decision`]: the pure judgement — [`Phase`](decision::Phase),
//!   conditions, the state the catalog must hear;
//! - [`cluster`]: the objects on the consumer's cluster — created, read,
//!   removed (only its own);
//! - [`liqo_watch`]: Liqo's objects here that a peering waits on,
//!   watched, their changes waking the Purchases they concern;
//! - [`caches`]: what a round reads without asking an API server (the
//!   watches' stores, what earlier rounds saw of a peering's steps);
//! - [`last_written`]: the status last written per Purchase, so a round
//!   on a cache that lags behind neither writes it nor announces it again;
//! - [`reconcile`]: the kube-rs controller (`reconcile` over kube's
//!   finalizer helper, its context and error policy), the status, the
//!   Events and the state reports;
//! - [`binding_copy`] and [`binding_copier`]: binding Secrets a service
//!   provider's Liqo reflected here, copied into the namespaces that
//!   accept them (`--copy-bindings`; needs no Purchase);
//! - [`network_policy`]: MultiClusterNetworkPolicies refined into
//!   NetworkPolicies here and, through the catalog, on the providers
//!   (`--network-policies`);
//! - [`metrics`] and [`http`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`config`]: the flags and [`run`](config::run).

pub mod authentication;
pub mod binding_copier;
pub mod binding_copy;
pub mod caches;
pub mod catalog;
pub mod cluster;
pub mod cluster_id;
pub mod config;
pub mod contract_stream;
pub mod decision;
pub mod direct;
pub mod http;
pub mod last_written;
pub mod liqo;
pub mod liqo_watch;
pub mod metrics;
pub mod model;
pub mod network_policy;
pub mod networking;
pub mod reconcile;
pub mod secret_ref;
pub mod secret_scope;
pub mod sharing;
