//! The chart's values and objects as a platform team installs them
//! (issue 46): `values.schema.json` refuses a typo at any level, a value
//! out of its set and a component turned on without the URL or ID it
//! needs, before anything is rendered; `helm lint --strict` passes with
//! the defaults, every component and the variants; namespaced objects
//! name their namespace and cluster-scoped ones carry the release's name,
//! so `helm template | kubectl apply -f -` and two releases cannot split a
//! ServiceAccount from its bindings or collide.

use anyhow::{ensure, Result};

use crate::chart_support::*;

#[test]
fn a_typo_or_a_value_out_of_its_set_is_refused_at_every_level() -> Result<()> {
    // The defaults and every component on are valid.
    ensure!(!template("liqo", &[])?.is_empty());
    ensure!(template("liqo", EVERY_COMPONENT)?.len() > 50);

    for (set, named) in [
        // A key no component has, at the top, one and three levels down.
        ("catalgo.enabled=false", "catalgo"),
        ("catalog.mongodb.secretNmae=other", "secretNmae"),
        (
            "peeringUserController.isolation.probe.intervall=1h",
            "intervall",
        ),
        // A value out of its set.
        ("logFormat=yaml", "logFormat"),
        ("resourceMonitor.liqoApi=v9", "liqoApi"),
        ("purchaseController.liqoApi=v2", "liqoApi"),
        // A type helm would otherwise print as it came.
        ("catalog.replicas=two", "replicas"),
    ] {
        let said = template_refused(&[set])?;
        ensure!(
            said.contains("schema") && said.contains(named),
            "--set {set}: {said}"
        );
    }

    // A component turned on without what it cannot run without.
    for (sets, named) in [
        (&["sliceController.enabled=true"][..], "catalogURL"),
        (&["purchaseController.enabled=true"][..], "clusterID"),
        (
            &[
                "peeringUserController.enabled=true",
                "peeringUserController.catalogURL=https://catalog.example",
            ][..],
            "apiServerAddress",
        ),
        (&["serviceController.enabled=true"][..], "catalogURL"),
        (
            &["catalog.enabled=false", "orchestrator.enabled=true"][..],
            "catalogURL",
        ),
        (
            &[
                "marketAutoscaler.enabled=true",
                "marketAutoscaler.namespaces=null",
            ][..],
            "namespaces",
        ),
    ] {
        let said = template_refused(sets)?;
        ensure!(said.contains(named), "--set {sets:?}: {said}");
    }
    Ok(())
}

#[test]
fn the_chart_lints_clean_with_strict_for_every_component_and_variant() -> Result<()> {
    let mut variants: Vec<Vec<&str>> = vec![Vec::new(), EVERY_COMPONENT.to_vec()];
    for more in [
        &["purchaseController.autoPeer=false"][..],
        &["purchaseController.liqoApi=v0"],
        &[
            "purchaseController.liqoNamespace=liqo-system",
            "peeringUserController.liqoNamespace=liqo-system",
            "sliceController.liqoNamespace=liqo-system",
        ],
        &[
            "createNamespace=true",
            "catalog.persistentVolumeClaim=catalog-data",
        ],
    ] {
        let mut sets = EVERY_COMPONENT.to_vec();
        sets.extend(more);
        variants.push(sets);
    }
    for sets in variants {
        let (passed, said) = lint(&sets)?;
        ensure!(
            passed && said.contains("0 chart(s) failed"),
            "helm lint --strict {sets:?}:\n{said}"
        );
        ensure!(!said.contains("[WARNING]"), "{sets:?}:\n{said}");
    }
    Ok(())
}

/// The kinds the chart renders that are not namespaced.
const CLUSTER_SCOPED: [&str; 6] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

#[test]
fn namespaced_objects_name_their_namespace_and_cluster_scoped_ones_the_release() -> Result<()> {
    let mut sets = EVERY_COMPONENT.to_vec();
    sets.push("createNamespace=true");
    let objects = template_as("acme", "team-x", &sets)?;
    let mut cluster_scoped = 0;
    for object in &objects {
        let kind = text(&object["kind"]);
        let name = text(&object["metadata"]["name"]);
        let namespace = &object["metadata"]["namespace"];
        if !CLUSTER_SCOPED.contains(&kind) {
            // Here, or in Liqo's namespace (the defaults' `liqo`: the
            // Roles on Liqo's objects, the market autoscaler's token
            // Roles in marketAutoscaler.namespaces).
            ensure!(
                namespace == "team-x" || (namespace == "liqo" && kind.starts_with("Role")),
                "{} names no namespace, or another",
                id(object)
            );
            continue;
        }
        ensure!(namespace.is_null(), "{} is cluster-scoped", id(object));
        cluster_scoped += 1;
        match kind {
            // Named by their group, and the release's own namespace.
            "CustomResourceDefinition" | "Namespace" => {}
            // The probe's ClusterRole: peering-user-controller binds it
            // by this name.
            "ClusterRole" if name == "liqo-broker-isolation-probe" => {}
            _ => ensure!(
                name.starts_with("acme-"),
                "{kind} {name} does not carry the release's name"
            ),
        }
    }
    ensure!(
        cluster_scoped >= 15,
        "{cluster_scoped} cluster-scoped objects"
    );

    // What refers to them follows.
    for binding in of_kind(&objects, "ClusterRoleBinding") {
        named(&objects, "ClusterRole", text(&binding["roleRef"]["name"]))?;
    }
    for binding in of_kind(&objects, "RoleBinding") {
        if binding["roleRef"]["kind"] == "ClusterRole" {
            named(&objects, "ClusterRole", text(&binding["roleRef"]["name"]))?;
        }
    }
    for binding in of_kind(&objects, "ValidatingAdmissionPolicyBinding") {
        named(
            &objects,
            "ValidatingAdmissionPolicy",
            text(&binding["spec"]["policyName"]),
        )?;
    }
    Ok(())
}
