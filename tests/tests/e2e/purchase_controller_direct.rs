//! `purchase-controller` without a catalog (issue 32): a Purchase whose
//! `peeringCredentialsSecretRef` names a peering user's kubeconfig peers
//! with that user's cluster, asks for `spec.resources` and offloads its
//! namespaces there only; and, on the cluster offloaded to, the binding
//! Secrets Liqo reflects are copied into the namespaces that accept them.
//!
//! The world is [`DirectWorld`]: two HTTPS test API servers with the model
//! of Liqo v1.2 (authentication, offloading, the reflection of Secrets)
//! and the real `purchase-controller` on both.

use base64::Engine;
use serde_json::{json, Value};

use crate::liqo_support::{self, tenant_namespace};
use crate::purchase_controller_support::*;

const EVENTS: (&str, &str) = ("events.k8s.io", "events");

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn direct_spec(extra: Value) -> Value {
    let mut spec = json!({"peeringCredentialsSecretRef": {"name": "peer", "key": "kubeconfig"}});
    for (k, v) in extra.as_object().expect("an object") {
        spec[k] = v.clone();
    }
    spec
}

/// The CRD takes exactly one source, and the catalog's fields only with a
/// catalog source.
#[test]
fn the_crd_takes_exactly_one_source() {
    let rt = runtime();
    let consumer = Consumer::start(&rt, "v1", "t").expect("consumer cluster");
    let catalog = json!({"catalogURL": "http://127.0.0.1:1",
                         "credentialsSecretRef": {"name": "catalog-token", "key": "token"}});
    let with = |base: &Value, extra: Value| {
        let mut spec = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    let one_source = "set exactly one of";
    let catalog_fields = "need catalogURL and credentialsSecretRef";
    let refused = [
        ("two", direct_spec(json!({"contractID": "c"})), one_source),
        ("offer", direct_spec(json!({"offerID": "o"})), one_source),
        (
            "url",
            direct_spec(json!({"catalogURL": "http://127.0.0.1:1"})),
            catalog_fields,
        ),
        ("nocatalog", json!({"contractID": "c"}), catalog_fields),
        ("none", with(&catalog, json!({})), one_source),
        (
            "badqty",
            direct_spec(json!({"resources": {"memory": "lots"}})),
            "spec.resources.memory",
        ),
    ];
    for (name, spec, says) in refused {
        match consumer.create_purchase(name, spec.clone()) {
            Ok(_) => panic!("{name}: {spec} was accepted"),
            Err(e) => assert!(e.code == 422 && e.message.contains(says), "{name}: {e}"),
        }
    }
    consumer
        .create_purchase(
            "direct",
            direct_spec(json!({"resources": {"cpu": 2, "memory": "4Gi"}})),
        )
        .expect("a direct Purchase");
    consumer
        .create_purchase("bought", with(&catalog, json!({"contractID": "c"})))
        .expect("a catalog Purchase");
}

/// A Secret in the consumer's offloaded namespace `svc-1` with the binding
/// label and its target, as the service-controller writes it.
fn binding(world: &DirectWorld, id: &str, target: (&str, &str), password: &str) {
    world.consumer.kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": format!("binding-{id}"), "namespace": "svc-1",
                            "labels": {"broker.liqo-broker.io/binding": id},
                            "annotations": {"broker.liqo-broker.io/target-namespace": target.0,
                                            "broker.liqo-broker.io/target-name": target.1}},
               "data": {"password": b64(password)}}),
    );
}

fn remote_secret(world: &DirectWorld, namespace: &str, name: &str) -> Option<Value> {
    world.remote.get(SECRETS, Some(namespace), name)
}

/// A Warning Event `BindingCopyRefused` on the remote cluster about the
/// reflected Secret `name`.
fn refusal(world: &DirectWorld, name: &str) -> Option<Value> {
    world.remote.objects(EVENTS).into_iter().find(|e| {
        e["reason"] == "BindingCopyRefused"
            && e["regarding"]["name"] == name
            && e["type"] == "Warning"
    })
}

#[test]
fn a_purchase_from_peering_credentials_peers_offloads_and_its_bindings_are_copied() {
    let world = DirectWorld::open();
    let c = &world.consumer;
    liqo_support::namespace(&c.kube, "svc-1", json!({}));
    c.create_purchase(
        "svc",
        direct_spec(json!({"resources": {"cpu": 2, "memory": "4Gi"},
                           "namespaces": ["svc-1"], "podOffloadingStrategy": "Remote"})),
    )
    .expect("the Purchase");
    let ready = c.wait_phase("svc", "Ready").unwrap();
    let status = &ready["status"];
    assert_eq!(status["providerClusterID"], PROVIDER_ID, "{status:#}");
    assert_eq!(status["resources"], json!({"cpu": "2", "memory": "4Gi"}));
    assert_eq!(status["offloadedNamespaces"], json!(["svc-1"]));
    assert_eq!(
        condition(&ready, "PeeringCredentialsValid")["status"],
        "True"
    );
    assert!(
        condition(&ready, "CatalogReachable").is_null(),
        "{status:#}"
    );
    assert!(status.get("catalogState").is_none(), "{status:#}");

    // The slice asks for spec.resources, of Liqo's default class.
    let uid = ready["metadata"]["uid"].as_str().unwrap();
    let slice = c
        .kube
        .get(
            SLICES,
            Some(&tenant_namespace(PROVIDER_ID)),
            &format!("purchase-{uid}"),
        )
        .expect("the ResourceSlice");
    assert_eq!(
        slice["spec"]["resources"],
        json!({"cpu": "2", "memory": "4Gi"})
    );
    assert_eq!(slice["spec"]["class"], "");
    // Offloaded to that cluster only.
    let offloading = c
        .kube
        .get(OFFLOADINGS, Some("svc-1"), "offloading")
        .unwrap();
    assert_eq!(
        offloading["spec"],
        json!({"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "Remote",
               "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": [PROVIDER_ID]}]}]}})
    );

    // Binding copies on the remote cluster: one namespace accepts them,
    // one does not, one holds a Secret of its own under the target name.
    let r = &world.remote;
    liqo_support::namespace(
        r,
        "app",
        json!({"broker.liqo-broker.io/accept-bindings": "true"}),
    );
    liqo_support::namespace(r, "closed", json!({}));
    liqo_support::namespace(
        r,
        "taken",
        json!({"broker.liqo-broker.io/accept-bindings": "true"}),
    );
    r.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "taken"}, "data": {"own": b64("mine")}}),
    );
    // The service provider's own cluster runs the copier too: its Secret,
    // not reflected there, is no source even for a namespace that accepts.
    liqo_support::namespace(
        &c.kube,
        "app",
        json!({"broker.liqo-broker.io/accept-bindings": "true"}),
    );
    binding(&world, "b1", ("app", "db-creds"), "one");
    binding(&world, "b2", ("closed", "db-creds"), "two");
    binding(&world, "b3", ("taken", "db"), "three");
    wait_until("the binding copied into app", || {
        remote_secret(&world, "app", "db-creds")
            .is_some_and(|s| s["data"]["password"] == b64("one"))
    });
    assert!(c.kube.get(SECRETS, Some("app"), "db-creds").is_none());
    wait_until("both refusals said", || {
        refusal(&world, "binding-b2").is_some() && refusal(&world, "binding-b3").is_some()
    });
    let closed = refusal(&world, "binding-b2").unwrap();
    assert!(
        closed["note"]
            .as_str()
            .unwrap()
            .contains("does not accept bindings"),
        "{closed:#}"
    );
    assert!(remote_secret(&world, "closed", "db-creds").is_none());
    let taken = remote_secret(&world, "taken", "db").unwrap();
    assert_eq!(
        taken["data"],
        json!({"own": b64("mine")}),
        "overwritten: {taken:#}"
    );

    // Kept in step, and gone with its source.
    binding(&world, "b1", ("app", "db-creds"), "one-rotated");
    wait_until("the copy follows its source", || {
        remote_secret(&world, "app", "db-creds")
            .is_some_and(|s| s["data"]["password"] == b64("one-rotated"))
    });
    c.kube
        .delete_object(SECRETS, Some("svc-1"), "binding-b1")
        .expect("source deleted");
    wait_until("the copy goes with its source", || {
        remote_secret(&world, "app", "db-creds").is_none()
    });

    // Deleting the Purchase unpeers: nothing else uses the peer.
    c.delete_purchase("svc");
    assert!(c
        .kube
        .get(
            SLICES,
            Some(&tenant_namespace(PROVIDER_ID)),
            &format!("purchase-{uid}")
        )
        .is_none());
}
