//! The three packaging defects of issue 46, each held by the real tools:
//!
//! - a kustomize overlay moving the bases to another namespace moves every
//!   binding's ServiceAccount subject with them (kustomize's `namespace:`
//!   field sets a subject's namespace only for subjects named `default`:
//!   the overlay of `deploy/kubernetes/examples/other-namespace` uses the
//!   NamespaceTransformer with `setRoleBindingSubjects:
//!   allServiceAccounts`), while what is Liqo's stays in Liqo's namespace;
//! - the Roles on Liqo's objects go to `*.liqoNamespace`, not to the
//!   release's namespace, and exist only while what uses them is on
//!   (`purchaseController.autoPeer`, `.liqoApi`): with `autoPeer=false` no
//!   Role names Liqo's private key;
//! - a configuration a pod reads only at start (the orchestrator's policy,
//!   the slice controller's chain) is hashed into its pod template
//!   (`checksum/config`), so `helm upgrade` of it rolls the pods.

use std::collections::BTreeSet;

use anyhow::{ensure, Result};
use serde_json::Value;

use crate::chart_support::*;

/// The namespace the example overlay moves the consumer's bases to.
const MOVED_TO: &str = "liqo-broker";

#[test]
fn an_overlay_moving_the_bases_moves_every_binding_subject_with_them() -> Result<()> {
    let objects = kustomize("deploy/kubernetes/examples/other-namespace")?;

    // The accounts and their pods moved.
    let accounts: BTreeSet<(&str, &str)> = of_kind(&objects, "ServiceAccount")
        .into_iter()
        .map(|a| {
            (
                text(&a["metadata"]["namespace"]),
                text(&a["metadata"]["name"]),
            )
        })
        .collect();
    ensure!(accounts.len() >= 2, "{accounts:?}");
    for object in of_kind(&objects, "ServiceAccount")
        .into_iter()
        .chain(of_kind(&objects, "Deployment"))
    {
        ensure!(
            object["metadata"]["namespace"] == MOVED_TO,
            "{} not moved",
            id(object)
        );
    }

    // Every ServiceAccount subject of every binding names the new
    // namespace, and an account that is there.
    let mut subjects = 0;
    for binding in of_kind(&objects, "RoleBinding")
        .into_iter()
        .chain(of_kind(&objects, "ClusterRoleBinding"))
    {
        for subject in binding["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] != "ServiceAccount" {
                continue;
            }
            subjects += 1;
            ensure!(
                subject["namespace"] == MOVED_TO,
                "{}: subject {subject} left behind (the account is in {MOVED_TO})",
                id(binding)
            );
            ensure!(
                accounts.contains(&(MOVED_TO, text(&subject["name"]))),
                "{}: subject {subject} names no account of the overlay",
                id(binding)
            );
        }
    }
    ensure!(subjects >= 5, "{subjects} subjects");

    // Liqo's own namespace stays where Liqo is: the Roles reading Liqo's
    // objects, bound there, and the flag telling the controller so.
    let liqo_roles: Vec<&Value> = of_kind(&objects, "Role")
        .into_iter()
        .chain(of_kind(&objects, "RoleBinding"))
        .filter(|r| text(&r["metadata"]["name"]).starts_with("purchase-controller-liqo-"))
        .collect();
    ensure!(!liqo_roles.is_empty(), "no Role on Liqo's objects");
    for role in liqo_roles {
        ensure!(
            role["metadata"]["namespace"] == "liqo",
            "{} moved away from Liqo",
            id(role)
        );
    }
    let controller = named(&objects, "Deployment", "purchase-controller")?;
    ensure!(
        controller["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "--liqo-namespace=liqo")),
        "{controller}"
    );
    // Every RoleBinding binds a Role of its own namespace that is there
    // (or a ClusterRole).
    for binding in of_kind(&objects, "RoleBinding") {
        if binding["roleRef"]["kind"] == "Role" {
            ensure!(
                objects.iter().any(|r| r["kind"] == "Role"
                    && r["metadata"]["name"] == binding["roleRef"]["name"]
                    && r["metadata"]["namespace"] == binding["metadata"]["namespace"]),
                "{}: binds a Role its namespace does not have",
                id(binding)
            );
        }
    }
    Ok(())
}

/// Each Role of `objects` whose rules match `wanted`, as `namespace/name`.
fn roles_with(objects: &[Value], wanted: impl Fn(&Value) -> bool) -> Vec<String> {
    of_kind(objects, "Role")
        .into_iter()
        .filter(|r| rules(r).any(&wanted))
        .map(|r| {
            format!(
                "{}/{}",
                text(&r["metadata"]["namespace"]),
                text(&r["metadata"]["name"])
            )
        })
        .collect()
}

/// Each rendered Role is in `namespace` (by `namespace/name`).
fn all_in(found: &[String], namespace: &str, what: &str) -> Result<()> {
    ensure!(!found.is_empty(), "no Role {what}");
    for role in found {
        ensure!(
            role.starts_with(&format!("{namespace}/")),
            "Role {role} ({what}) is not in {namespace}"
        );
    }
    Ok(())
}

/// The rules that read or bind Liqo's own objects, in Liqo's namespace.
fn reads_liqos_objects(rule: &Value) -> bool {
    names_object(rule, "authentication-keys")
        || grants(rule, "configmaps", "list")
        || grants(rule, "networks", "list")
        || grants(rule, "deployments", "get")
        || grants(rule, "roles", "bind")
        // Liqo v0.x's token Secrets (listed, never created here).
        || (grants(rule, "secrets", "list") && !grants(rule, "secrets", "create"))
}

/// Every RoleBinding binds a Role rendered in its own namespace, and
/// every ServiceAccount subject is in `namespace`.
fn bindings_consistent(objects: &[Value], namespace: &str) -> Result<()> {
    for binding in of_kind(objects, "RoleBinding") {
        if binding["roleRef"]["kind"] == "Role" {
            ensure!(
                objects.iter().any(|r| r["kind"] == "Role"
                    && r["metadata"]["name"] == binding["roleRef"]["name"]
                    && r["metadata"]["namespace"] == binding["metadata"]["namespace"]),
                "{}: binds a Role not rendered in its namespace",
                id(binding)
            );
        }
    }
    for binding in of_kind(objects, "RoleBinding")
        .into_iter()
        .chain(of_kind(objects, "ClusterRoleBinding"))
    {
        for subject in binding["subjects"].as_array().into_iter().flatten() {
            ensure!(
                subject["namespace"] == namespace,
                "{}: subject {subject}",
                id(binding)
            );
        }
    }
    Ok(())
}

#[test]
fn the_roles_on_liqos_objects_go_to_the_liqo_namespace_values() -> Result<()> {
    let liqo = "liqo-system";
    let sets = |liqo_api: &str| {
        vec![
            "catalog.enabled=false".to_string(),
            "purchaseController.enabled=true".into(),
            "purchaseController.clusterID=consumer-1".into(),
            format!("purchaseController.liqoApi={liqo_api}"),
            format!("purchaseController.liqoNamespace={liqo}"),
            "peeringUserController.enabled=true".into(),
            "peeringUserController.catalogURL=https://catalog.example".into(),
            "peeringUserController.apiServerAddress=https://203.0.113.1:6443".into(),
            format!("peeringUserController.liqoNamespace={liqo}"),
            "sliceController.enabled=true".into(),
            "sliceController.catalogURL=https://catalog.example".into(),
            format!("sliceController.liqoNamespace={liqo}"),
        ]
    };
    for liqo_api in ["v1", "v0"] {
        let sets = sets(liqo_api);
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let objects = template("broker", &sets)?;
        // What reads or binds Liqo's objects: in Liqo's namespace.
        all_in(
            &roles_with(&objects, reads_liqos_objects),
            liqo,
            "on Liqo's objects",
        )?;
        // What is the controllers' own (Leases, the peering users' keys):
        // in the release's.
        all_in(
            &roles_with(&objects, |r| {
                grants(r, "leases", "update") || grants(r, "secrets", "create")
            }),
            "broker",
            "on the controllers' own objects",
        )?;
        bindings_consistent(&objects, "broker")?;
        // The controllers are told where Liqo is.
        for controller in ["purchase-controller", "peering-user-controller"] {
            let deployment = named(&objects, "Deployment", controller)?;
            ensure!(
                deployment["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|v| *v == format!("--liqo-namespace={liqo}"))),
                "{controller}: {deployment}"
            );
        }
    }
    Ok(())
}

#[test]
fn only_what_is_enabled_reads_liqos_private_key_or_its_secrets() -> Result<()> {
    let consumer = |more: &[&'static str]| {
        let mut sets = vec![
            "catalog.enabled=false",
            "purchaseController.enabled=true",
            "purchaseController.clusterID=consumer-1",
        ];
        sets.extend(more);
        template("liqo", &sets)
    };
    let private_key = |r: &Value| names_object(r, "authentication-keys");
    let v0_tokens = |r: &Value| grants(r, "secrets", "list") && !grants(r, "secrets", "create");
    let liqo_network = |r: &Value| grants(r, "configmaps", "list") || grants(r, "networks", "list");

    // Liqo v1 with --auto-peer (the default): the key and the network
    // read, no v0.x token Secrets.
    let auto_peer = consumer(&[])?;
    ensure!(!roles_with(&auto_peer, private_key).is_empty());
    ensure!(!roles_with(&auto_peer, liqo_network).is_empty());
    ensure!(roles_with(&auto_peer, v0_tokens).is_empty());
    bindings_consistent(&auto_peer, "liqo")?;

    // --auto-peer=false: nothing of Liqo's is read, and no binding is
    // left to a Role not rendered.
    let by_hand = consumer(&["purchaseController.autoPeer=false"])?;
    let args = &named(&by_hand, "Deployment", "purchase-controller")?["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    ensure!(
        args.as_array()
            .is_some_and(|a| a.iter().any(|v| v == "--auto-peer=false")),
        "{args}"
    );
    for found in [
        roles_with(&by_hand, private_key),
        roles_with(&by_hand, liqo_network),
        roles_with(&by_hand, v0_tokens),
    ] {
        ensure!(found.is_empty(), "rendered with autoPeer=false: {found:?}");
    }
    bindings_consistent(&by_hand, "liqo")?;

    // Liqo v0.x: its token Secrets, nothing of v1's (autoPeer is v1's).
    let v0 = consumer(&["purchaseController.liqoApi=v0"])?;
    ensure!(roles_with(&v0, private_key).is_empty());
    ensure!(roles_with(&v0, liqo_network).is_empty());
    all_in(&roles_with(&v0, v0_tokens), "liqo", "on Liqo v0.x's tokens")?;
    bindings_consistent(&v0, "liqo")?;
    Ok(())
}

/// A sha256, as `sha256sum` prints it.
fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[test]
fn a_configuration_read_at_start_rolls_its_pods_when_it_changes() -> Result<()> {
    // The orchestrator's policy.
    let orchestrator = |policy: &str| -> Result<String> {
        let policy = format!("orchestrator.policy={policy}");
        let objects = template("liqo", &["orchestrator.enabled=true", &policy])?;
        Ok(pod_annotation(&objects, "orchestrator", "checksum/config")?.to_string())
    };
    let before = orchestrator("spread = 1")?;
    ensure!(is_sha256(&before), "{before}");
    let after = orchestrator("spread = 2")?;
    ensure!(
        before != after,
        "a changed policy leaves the pod template as it was: {before}"
    );
    ensure!(
        orchestrator("spread = 1")? == before,
        "the same policy rendered twice gives two checksums"
    );

    // The slice controller's chain (its inventory is re-read, the chain
    // file is read at start).
    let slices = |percent: &str| -> Result<String> {
        let chain = format!("sliceController.chain=[quota]\npercent = {percent}\n");
        let objects = template(
            "liqo",
            &[
                "catalog.enabled=false",
                "sliceController.enabled=true",
                "sliceController.catalogURL=https://catalog.example",
                &chain,
            ],
        )?;
        Ok(pod_annotation(&objects, "slice-controller", "checksum/config")?.to_string())
    };
    let before = slices("50")?;
    ensure!(is_sha256(&before), "{before}");
    ensure!(slices("40")? != before, "a changed chain rolls nothing");
    Ok(())
}
