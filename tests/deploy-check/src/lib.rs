//! Checks that what `deploy/` ships is what the code needs, no more:
//!
//! - [`kustomize`] renders `deploy/kubernetes/*/kustomization.yaml` (a
//!   subset of kustomize that refuses every field it does not implement);
//! - [`rbac`] holds the calls the end-to-end tests saw ([`audit`], written
//!   by the test API server under `KUBE_TEST_AUDIT_DIR`) against the
//!   Roles and ClusterRoles bound to each ServiceAccount: every call
//!   allowed, every permission used, every bound account seen;
//! - [`dockerfile`] holds each `deploy/docker/<image>.Dockerfile` to a
//!   multi-stage, non-root build of the right binary;
//! - [`workloads`] compares each container's flags and variables with the
//!   binary's `--help`;
//! - [`checks`] runs them over the repository, for the binary and tests.

pub mod audit;
pub mod checks;
pub mod dockerfile;
pub mod kustomize;
pub mod rbac;
pub mod workloads;
