//! Checks that what `deploy/` ships is what the code needs, no more:
//!
//! - [`kubectl`] renders `deploy/kubernetes/*` with the real
//!   `kubectl kustomize`, as `kubectl apply -k` would;
//! - [`rbac`] holds the calls the end-to-end tests saw ([`audit`], written
//!   by the test API server under `KUBE_TEST_AUDIT_DIR`) against the
//!   Roles and ClusterRoles bound to each ServiceAccount: every call
//!   allowed, every permission used, every bound account seen;
//! - [`dockerfile`] holds each `deploy/docker/<image>.Dockerfile` to a
//!   multi-stage, non-root build of the right binary;
//! - [`workloads`] compares each container's flags and variables with the
//!   binary's `--help`;
//! - [`bases`] generates the kustomize bases from the Helm chart (with
//!   [`helm`]) and finds where the committed ones differ;
//! - [`checks`] runs them over the repository, for the binary and tests;
//!   [`cache`] keeps one rendering for the end-to-end tests' many processes.

pub mod audit;
pub mod bases;
pub mod cache;
pub mod checks;
pub mod dockerfile;
pub mod helm;
pub mod kubectl;
pub mod rbac;
pub mod workloads;
