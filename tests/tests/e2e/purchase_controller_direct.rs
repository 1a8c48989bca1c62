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

/// Namespace `name` on `kube`, labelled to accept bindings and annotated
/// with whom from (`broker.liqo-broker.io/accept-bindings-from`).
fn accepting(kube: &kube_test_server::KubeApiServer, name: &str, from: &str) {
    kube.apply(
        liqo_support::NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
               "labels": {"broker.liqo-broker.io/accept-bindings": "true"},
               "annotations": {"broker.liqo-broker.io/accept-bindings-from": from}}}),
    );
}

/// What a second service provider, `EVIL`, peered with the remote cluster,
/// has Liqo reflect there: its instance namespace as Liqo's namespace map
/// makes it (`liqo.io/remote-cluster-id`, annotated
/// `liqo.io/managed-by-namespace-map`) and its binding Secret in it, with
/// Liqo's reflection labels naming EVIL as the origin. The world has one
/// peering only, so the test writes what the reflection would.
fn evil_source(world: &DirectWorld, target: (&str, &str), uri: &str) {
    let r = &world.remote;
    r.apply(
        liqo_support::NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "svc-evil",
               "labels": {"liqo.io/remote-cluster-id": EVIL},
               "annotations": {"liqo.io/managed-by-namespace-map": format!("liqo-tenant-{EVIL}/{EVIL}")}}}),
    );
    r.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "binding-x4", "namespace": "svc-evil",
                            "labels": {"broker.liqo-broker.io/binding": "x4",
                                       "offloading.liqo.io/origin": EVIL,
                                       "offloading.liqo.io/destination": PROVIDER_ID},
                            "annotations": {"broker.liqo-broker.io/target-namespace": target.0,
                                            "broker.liqo-broker.io/target-name": target.1}},
               "data": {"uri": b64(uri)}}),
    );
}

const EVIL: &str = "evil-provider";

/// [`binding`] of Secret type `type_` with `data`.
fn typed_binding(world: &DirectWorld, id: &str, target: (&str, &str), type_: &str, data: Value) {
    world.consumer.kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
               "metadata": {"name": format!("binding-{id}"), "namespace": "svc-1",
                            "labels": {"broker.liqo-broker.io/binding": id},
                            "annotations": {"broker.liqo-broker.io/target-namespace": target.0,
                                            "broker.liqo-broker.io/target-name": target.1}},
               "data": data}),
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
    offloadable_namespace(&c.kube, "svc-1");
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
    // `app` takes EVIL's bindings too, and the consumer's (the provider of
    // svc-1), whose alone the name db-creds is.
    accepting(
        r,
        "app",
        &format!("{EVIL}, {CONSUMER_ID}/db-creds {CONSUMER_ID}"),
    );
    liqo_support::namespace(r, "closed", json!({}));
    accepting(r, "taken", CONSUMER_ID);
    r.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "taken"}, "data": {"own": b64("mine")}}),
    );
    // The service provider's own cluster runs the copier too: its Secret,
    // not reflected there, is no source even for a namespace that accepts.
    accepting(&c.kube, "app", CONSUMER_ID);
    // BC-04: EVIL aims at app/db-creds before the real binding lands: refused
    // (the name is the consumer's), so the real one is copied, and no copy
    // of EVIL's was ever made.
    evil_source(&world, ("app", "db-creds"), "db://attacker.example");
    wait_until("EVIL's source refused", || {
        refusal(&world, "binding-x4").is_some_and(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.contains("reserved for the bindings of provider"))
        })
    });
    assert!(remote_secret(&world, "app", "db-creds").is_none());
    binding(&world, "b1", ("app", "db-creds"), "one");
    binding(&world, "b2", ("closed", "db-creds"), "two");
    binding(&world, "b3", ("taken", "db"), "three");
    wait_until("the binding copied into app", || {
        remote_secret(&world, "app", "db-creds")
            .is_some_and(|s| s["data"]["password"] == b64("one"))
    });
    assert!(c.kube.get(SECRETS, Some("app"), "db-creds").is_none());
    let copy = remote_secret(&world, "app", "db-creds").unwrap();
    assert_eq!(copy["data"], json!({"password": b64("one")}), "{copy:#}");
    let copies_made = || {
        r.audit()
            .into_iter()
            .filter(|a| {
                a.user.as_deref() == Some(PURCHASE_USER)
                    && a.code < 300
                    && a.resource.as_ref().is_some_and(|x| {
                        x.verb == "create"
                            && x.resource == "secrets"
                            && x.namespace.as_deref() == Some("app")
                    })
            })
            .count()
    };
    assert_eq!(copies_made(), 1, "EVIL's copy was made, then replaced");
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
    // BC-08: image-pull credentials are no binding: `app` accepts Opaque
    // Secrets only.
    typed_binding(
        &world,
        "b4",
        ("app", "regcred"),
        "kubernetes.io/dockerconfigjson",
        json!({".dockerconfigjson": b64(r#"{"auths":{"registry.example":{"auth":"eDp5"}}}"#)}),
    );
    wait_until("the image-pull Secret refused", || {
        refusal(&world, "binding-b4").is_some_and(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.contains("Opaque only"))
        })
    });
    assert!(remote_secret(&world, "app", "regcred").is_none());
    assert_eq!(copies_made(), 1);
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

    // Whoever may create a Purchase in team may not offload kube-system
    // (nor a namespace that does not name team): refused, nothing written
    // there (issue 41, decision.rs:472-503 of 4d9a1b6).
    offloadable_namespace(&c.kube, "kube-system");
    c.create_purchase(
        "sys",
        direct_spec(json!({"namespaces": ["kube-system"], "podOffloadingStrategy": "Remote"})),
    )
    .expect("the Purchase");
    let failed = c.wait_phase("sys", "Failed").unwrap();
    let offloaded = condition(&failed, "NamespacesOffloaded");
    assert_eq!(offloaded["reason"], "NamespaceNotAllowed", "{failed:#}");
    assert!(
        offloaded["message"]
            .as_str()
            .unwrap()
            .contains("kube-system is a system namespace"),
        "{offloaded:#}"
    );
    assert!(c
        .kube
        .get(OFFLOADINGS, Some("kube-system"), "offloading")
        .is_none());
    c.delete_purchase("sys");

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
