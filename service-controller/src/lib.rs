//! The service provider's controller (issue 32): it sells running
//! services, not raw capacity. A `ServiceCatalog` lists services, their
//! plans (cost, hosting policy, resources, OSB schemas), object templates
//! and a binding credentials template; each service is published as an
//! offer of kind `service`. For every service contract the catalog sells,
//! the controller peers towards the customer with the peering user the
//! customer handed over (a Purchase for purchase-controller), offloads the
//! instance namespace to the customer's cluster with the plan's hosting
//! policy, renders and applies the templates, and reports each step to
//! the catalog; bindings become Secrets the customer's purchase-controller
//! copies into the application's namespace; deprovisioning removes it all.
//!
//! Modules, imports pointing down the list:
//!
//! - [`config`]: the flags and [`run`](config::run);
//! - [`reconcile`]: the kube-rs controller over ServiceCatalogs (validate,
//!   publish, status, finalizer);
//! - [`contracts`]: the pass over the service contracts (provision,
//!   bindings, deprovision);
//! - [`cluster`]: the objects on the provider's cluster — applied with
//!   server-side apply, read, removed;
//! - [`metrics`]: `/metrics` and the probes;
//! - [`render`]: templates rendered off the async runtime, within their
//!   bounds, each verdict kept so a refused template is refused once;
//! - [`offer`], [`instance`], [`template`], [`placement`], [`rbac_allow`]:
//!   pure — the offer body, the names and Purchase of an instance, template
//!   rendering and its checks, where a template's pods run, the RBAC a
//!   template may make;
//! - [`model`]: the `ServiceCatalog` kind.

pub mod cluster;
pub mod config;
pub mod contracts;
pub mod instance;
pub mod metrics;
pub mod model;
pub mod offer;
pub mod placement;
pub mod purchase_watch;
pub mod rbac_allow;
pub mod reconcile;
pub mod render;
pub mod template;
