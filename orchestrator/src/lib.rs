//! The broker's orchestrator: a controller on the broker cluster that
//! places the namespaces consumers offloaded to the broker on providers
//! chosen by policy from the catalog's offers.
//!
//! A consumer that offloads a namespace to the broker gets, on the broker,
//! Liqo's *remote namespace*: created by the NamespaceMap controller with
//! the label `liqo.io/remote-cluster-id=<consumer>` and the annotations
//! `liqo.io/managed-by-namespace-map` and `liqo.io/original-name` (Liqo
//! v1.2.0, `namespacemap-controller/enforcement.go`). For each one the
//! orchestrator writes the NamespaceOffloading `offloading` whose
//! `clusterSelector` is `liqo.io/remote-cluster-id In [chosen…]`, so Liqo
//! re-offloads the workload to those providers.
//!
//! - [`policy`]: the policy file;
//! - [`offers`]: the catalog's offers as the decision reads them, and
//!   [`feed`]: following them live; [`disabled`]: the providers an
//!   administrator disabled (all three through `catalog-client`);
//! - [`demand`]: what a namespace needs (ResourceQuota, else pods);
//! - [`decision`]: the placement, a pure function, with its hysteresis;
//! - [`offloading`]: the NamespaceOffloading written and read back;
//! - the pods created before the placement, which Liqo's create-time pod
//!   webhook never offloads, and what to do with them: a pure rule the
//!   market autoscaler shares, [`controller_core::pods::stale`], acted on
//!   by the [`controller`];
//! - [`view`]: one namespace's inputs, gathered the same way by the
//!   controller and by `explain`;
//! - [`controller`]: the kube-rs controller, its writes and Events;
//!   [`offloaded`]: the offloaded namespaces it holds, counted as they
//!   come and go; [`recorders`]: its Event recorders;
//! - [`explain`]: the dry run;
//! - [`metrics`] and [`http`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`config`]: the flags and [`run`](config::run).

pub mod config;
pub mod controller;
pub mod decision;
pub mod demand;
pub mod disabled;
pub mod explain;
pub mod feed;
pub mod http;
pub mod metrics;
pub mod offers;
pub mod offloaded;
pub mod offloading;
pub mod policy;
pub mod recorders;
pub mod view;
