//! What every Kubernetes controller of the broker shares — the class
//! controller (`slice-controller`), the orchestrator and the purchase
//! controller — and the resource monitor's Kubernetes source, so that none
//! of them depends on another controller to reach it.
//!
//! Modules, each one concept; imports point down this list:
//!
//! - [`liqo`]: Liqo's vocabulary — API groups, versions and kinds, label,
//!   annotation, condition and phase names — each declared once, with the
//!   Liqo source it comes from;
//! - [`clock`]: the time as the Kubernetes API writes it (RFC 3339);
//! - [`crd`]: what the broker's own CRDs share (schema adjustments, the
//!   `metav1.Condition` of their statuses);
//! - [`kubeconfig`]: a Kubernetes client from a kubeconfig, or in-cluster,
//!   as `kubectl` builds one;
//! - [`bounded`]: a client of another party's API server whose answers
//!   are bounded in size and in total time, watches included;
//! - [`retry`]: edge's backoff for every loop that reaches the API server,
//!   failures logged once per run (not per attempt), and work stopped
//!   within a bound;
//! - [`runtime`]: a watch that fills a reflector cache, and Events
//!   published in the background;
//! - [`lease`]: leader election on a `coordination.k8s.io` Lease;
//! - [`flags`]: the probe port's and the Lease election's flags, flattened
//!   into each binary's under that binary's environment variables;
//! - [`metrics`]: one reconcile-metrics type (runs, failures by kind,
//!   duration) with the leader and readiness state, registered into the
//!   controller's own Prometheus registry under the names it chooses; and
//!   that registry with the controller's handles, rendered for `/metrics`
//!   ([`metrics::Registered`], declared by [`controller_metrics!`]).
//! - [`shutdown`]: a controller binary's one task, run until it ends or a
//!   signal stops it within a grace period;
//! - [`pods`]: pure rules on pods the orchestrator and the market
//!   autoscaler share (effective requests as kube-scheduler counts them,
//!   waiting for room, stale pods Liqo's webhook never saw).

pub mod bounded;
pub mod clock;
pub mod crd;
pub mod flags;
pub mod kubeconfig;
pub mod lease;
pub mod liqo;
pub mod metrics;
pub mod pods;
pub mod retry;
pub mod runtime;
pub mod shutdown;
