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
//! No image of the broker is published: `images.registry` is required
//! while any component is enabled, and `helm template` (and so `helm
//! install`) fails naming it rather than rendering images Kubernetes would
//! pull from docker.io (issue 46).
//!
//! Helm is the one `scripts/install-test-deps.sh` installs into
//! `build/bin/`; without it the test fails.

use std::process::Output;

use anyhow::{ensure, Result};

use crate::chart_support::{self, helm, template_refused, EVERY_COMPONENT, REGISTRY};

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
        REGISTRY,
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

#[test]
fn the_chart_refuses_to_render_images_without_a_registry() -> Result<()> {
    // The defaults (the catalog on), every component, each alone.
    let mut renders: Vec<Vec<&str>> = vec![vec![], EVERY_COMPONENT.to_vec()];
    renders.push(vec!["catalog.enabled=false", "aggregator.enabled=true"]);
    for sets in renders {
        let mut without = sets.clone();
        without.push("images.registry=");
        let said = template_refused(&without)?;
        ensure!(
            said.contains("set images.registry:") && said.contains("docker.io"),
            "{sets:?}: {said}"
        );
        // With one, every container's image is under it.
        let mut with = sets.clone();
        with.push("images.registry=registry.example.com:5000/team");
        for object in chart_support::template("liqo", &with)? {
            for container in object["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let image = container["image"].as_str().unwrap_or_default();
                ensure!(
                    image.starts_with("registry.example.com:5000/team/liqo-broker/"),
                    "{sets:?}: {image}"
                );
            }
        }
    }
    // Nothing enabled: no image, nothing to refuse.
    let none = chart_support::template("liqo", &["catalog.enabled=false", "images.registry="])?;
    ensure!(none.is_empty(), "{none:?}");
    Ok(())
}
