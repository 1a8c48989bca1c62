//! What the chart asks of the cluster, checked by the real Helm before
//! anything is written: the slice controller's ValidatingAdmissionPolicy
//! (`admissionregistration.k8s.io/v1`) is served from Kubernetes 1.30, so
//! `Chart.yaml`'s `kubeVersion: ">=1.30.0-0"` makes Helm refuse an older
//! cluster (Helm's `chartutil.IsCompatibleRange`, run by `helm install`
//! and `helm template` alike against the cluster's, or `--kube-version`'s,
//! version). Without that line Helm renders the policy for a 1.29 cluster,
//! whose API server then refuses the kind at apply time, after the rest of
//! the release was written.
//!
//! Helm is the one `scripts/install-test-deps.sh` installs into
//! `build/bin/`; without it the test fails.

use std::process::Output;

use anyhow::{ensure, Result};

use crate::chart_support::helm;

/// `helm template` of the chart with the slice controller on, for a cluster
/// of `version`.
fn template(version: &str) -> Result<Output> {
    helm(&[
        "template",
        "liqo-broker",
        "charts/liqo-broker",
        "--namespace",
        "liqo",
        "--kube-version",
        version,
        "--set",
        "sliceController.enabled=true",
        "--set",
        "sliceController.catalogURL=http://catalog.liqo-broker:8080",
    ])
}

#[test]
fn the_chart_refuses_a_cluster_older_than_kubernetes_1_30() -> Result<()> {
    let old = template("1.29.9")?;
    ensure!(
        !old.status.success(),
        "rendered for Kubernetes 1.29: {}",
        String::from_utf8_lossy(&old.stdout)
    );
    let said = String::from_utf8_lossy(&old.stderr);
    ensure!(
        said.contains(
            "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.9"
        ),
        "{said}"
    );

    let new = template("1.30.0")?;
    let rendered = String::from_utf8_lossy(&new.stdout);
    ensure!(
        new.status.success(),
        "{}",
        String::from_utf8_lossy(&new.stderr)
    );
    ensure!(
        rendered.contains("kind: ValidatingAdmissionPolicy\n"),
        "the policy is rendered from 1.30: {rendered}"
    );
    Ok(())
}
