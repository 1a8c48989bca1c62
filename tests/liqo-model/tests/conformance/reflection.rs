//! The virtual kubelet's reflection of Secrets, ConfigMaps and Services
//! (`liqo_model::reflection_objects`): namespace `app` of cluster `origin`
//! offloaded to peer `p2` (remote namespace `app-origin`), its objects
//! copied there as Liqo v1.2.0's reflectors copy them, changes and
//! deletions followed, what Liqo leaves alone left alone.

use kube_test_server::{GroupResource, KubeApiServer};
use liqo_model::offloading::{Cluster, Peering};
use liqo_model::reflection_forge::Options;
use liqo_model::reflection_objects::{Reflection, FIELD_MANAGER};
use serde_json::{json, Value};

use crate::{get, wait_for, NAMESPACES, SECRETS};

const CONFIG_MAPS: (&str, &str) = ("", "configmaps");
const SERVICES: (&str, &str) = ("", "services");
const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
const REMOTE_NS: &str = "app-origin";

/// `app` of `origin` offloaded to `p2`, its reflection running.
struct World {
    origin: KubeApiServer,
    p2: KubeApiServer,
    _liqo: (Cluster, Peering, Reflection),
}

async fn world() -> World {
    world_with(|_| {}).await
}

/// [`world`], with `before` written into `app` before it is offloaded.
async fn world_with(before: impl FnOnce(&KubeApiServer)) -> World {
    let (origin, p2, cluster, peering) = crate::origin_and_p2().await;
    let reflection = Reflection::start(&origin, "origin", &p2, "p2", Options::default())
        .await
        .unwrap();
    before(&origin);
    origin.apply(
        OFFLOADINGS,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
               "metadata": {"name": "offloading", "namespace": "app"},
               "spec": {"podOffloadingStrategy": "Local", "clusterSelector": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "liqo.io/remote-cluster-id",
                                          "operator": "In", "values": ["p2"]}]}]}}}),
    );
    wait_for(
        &p2,
        NAMESPACES,
        None,
        REMOTE_NS,
        "the remote namespace",
        |_| true,
    )
    .await;
    World {
        origin,
        p2,
        _liqo: (cluster, peering, reflection),
    }
}

fn secret(name: &str, extra: Value) -> Value {
    let mut s = json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": name, "namespace": "app"},
                       "type": "Opaque", "data": {"password": "czNjcjN0"}});
    merge(&mut s, extra);
    s
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

async fn remote(
    world: &World,
    kind: (&str, &str),
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(&world.p2, kind, Some(REMOTE_NS), name, what, ready).await
}

/// A new Secret, once copied: every key the reflector was given before
/// it has been reconciled.
async fn marker(world: &World, n: u32) {
    let name = format!("marker-{n}");
    world.origin.apply(SECRETS, secret(&name, json!({})));
    remote(world, SECRETS, &name, "the marker", |_| true).await;
}

/// Wait until `name` is gone from the remote namespace.
async fn gone(world: &World, kind: (&str, &str), name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&world.p2, kind, Some(REMOTE_NS), name).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} still on the peer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A Secret's copy: same name and data, the local labels plus Liqo's
/// reflection labels, the annotations but the skipped ones; written by
/// server-side apply as `origin` (the peering's identity) with Liqo's field
/// manager; changes and the deletion followed.
#[tokio::test]
async fn a_secret_is_copied_labelled_kept_in_step_and_deleted() {
    let world = world().await;
    world.origin.apply(
        SECRETS,
        secret(
            "db",
            json!({"metadata": {
                "labels": {"app": "db", "broker.liqo-broker.io/binding": "b1"},
                "annotations": {"broker.liqo-broker.io/target-name": "creds",
                                "metallb.universe.tf/address-pool": "skipped by the chart"}}}),
        ),
    );
    let copy = remote(&world, SECRETS, "db", "the copy", |_| true).await;
    assert_eq!(
        copy["metadata"]["labels"],
        json!({"app": "db", "broker.liqo-broker.io/binding": "b1",
               "offloading.liqo.io/origin": "origin", "offloading.liqo.io/destination": "p2"})
    );
    assert_eq!(
        copy["metadata"]["annotations"],
        json!({"broker.liqo-broker.io/target-name": "creds"})
    );
    assert_eq!(copy["data"], json!({"password": "czNjcjN0"}));
    assert_eq!(copy["type"], "Opaque");
    let writes: Vec<_> = world
        .p2
        .audit()
        .into_iter()
        .filter(|a| {
            a.path
                .ends_with(&format!("/namespaces/{REMOTE_NS}/secrets/db"))
                && a.verb == "patch"
        })
        .collect();
    assert!(!writes.is_empty());
    for w in &writes {
        assert_eq!(w.user.as_deref(), Some("origin"));
        assert_eq!(w.field_manager.as_deref(), Some(FIELD_MANAGER));
        assert!(w.code < 300, "{w:?}");
    }

    // A change of data and labels is followed; a label gone locally goes.
    let mut changed = secret("db", json!({"data": {"password": "bmV3"}}));
    changed["metadata"]["labels"] = json!({"app": "db"});
    world.origin.apply(SECRETS, changed);
    let copy = remote(&world, SECRETS, "db", "the new data", |s| {
        s["data"]["password"] == "bmV3"
    })
    .await;
    assert!(copy["metadata"]["labels"]["broker.liqo-broker.io/binding"].is_null());
    assert_eq!(
        copy["metadata"]["labels"]["offloading.liqo.io/origin"],
        "origin"
    );

    // Deleted on the peer by someone else: made again.
    world
        .p2
        .delete_object(GroupResource::new("", "secrets"), Some(REMOTE_NS), "db")
        .unwrap();
    remote(&world, SECRETS, "db", "made again", |_| true).await;

    world.origin.delete(SECRETS, "app/db");
    gone(&world, SECRETS, "db").await;
}

/// What Liqo does not reflect: service-account tokens (`secret.go:93-98`),
/// a Secret marked `liqo.io/skip-reflection` (and a copy made before the
/// mark is deleted, `secret.go:115-136`), and a Secret of the peer's own of
/// the same name, which stays as it is (`secret.go:106-113`). A marker
/// Secret written after each is the sync point: the reflector takes keys
/// one at a time, in the order its watch reports them.
#[tokio::test]
async fn tokens_skipped_secrets_and_the_peers_own_are_left_alone() {
    let world = world().await;
    world.origin.apply(
        SECRETS,
        secret(
            "token",
            json!({"type": "kubernetes.io/service-account-token",
                   "metadata": {"annotations": {"kubernetes.io/service-account.name": "default"}}}),
        ),
    );
    world.origin.apply(
        SECRETS,
        secret(
            "hidden",
            json!({"metadata": {"annotations": {"liqo.io/skip-reflection": ""}}}),
        ),
    );
    marker(&world, 1).await;
    assert!(get(&world.p2, SECRETS, Some(REMOTE_NS), "token").is_none());
    assert!(get(&world.p2, SECRETS, Some(REMOTE_NS), "hidden").is_none());

    // Marked after being reflected: the copy goes.
    world.origin.apply(SECRETS, secret("later", json!({})));
    remote(&world, SECRETS, "later", "the copy", |_| true).await;
    world.origin.apply(
        SECRETS,
        secret(
            "later",
            json!({"metadata": {"annotations": {"liqo.io/skip-reflection": "true"}}}),
        ),
    );
    gone(&world, SECRETS, "later").await;

    // The peer's own Secret of the same name is neither changed nor deleted.
    let theirs = json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "mine", "namespace": REMOTE_NS},
                        "type": "Opaque", "data": {"k": "dGhlaXJz"}});
    world.p2.apply(SECRETS, theirs);
    world.origin.apply(SECRETS, secret("mine", json!({})));
    marker(&world, 2).await;
    let kept = get(&world.p2, SECRETS, Some(REMOTE_NS), "mine").unwrap();
    assert_eq!(kept["data"], json!({"k": "dGhlaXJz"}));
    world.origin.delete(SECRETS, "app/mine");
    marker(&world, 3).await;
    assert!(get(&world.p2, SECRETS, Some(REMOTE_NS), "mine").is_some());
}

/// ConfigMaps: copied with data and binary data; the root CA ConfigMap
/// under `kube-root-ca.crt.<first five characters of the origin's ID>`
/// (`forge/configmaps.go:49-68`), deleted by its local name.
#[tokio::test]
async fn config_maps_are_copied_and_the_root_ca_renamed() {
    let world = world().await;
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "app", "labels": {"k": "v"}},
               "data": {"ca.crt": "PEM"}, "binaryData": {"blob": "AAE="}})
    };
    world.origin.apply(CONFIG_MAPS, cm("settings"));
    world.origin.apply(CONFIG_MAPS, cm("kube-root-ca.crt"));
    let copy = remote(&world, CONFIG_MAPS, "settings", "the copy", |_| true).await;
    assert_eq!(copy["data"], json!({"ca.crt": "PEM"}));
    assert_eq!(copy["binaryData"], json!({"blob": "AAE="}));
    assert_eq!(
        copy["metadata"]["labels"]["offloading.liqo.io/destination"],
        "p2"
    );
    remote(
        &world,
        CONFIG_MAPS,
        "kube-root-ca.crt.origi",
        "the renamed root CA",
        |_| true,
    )
    .await;
    assert!(get(&world.p2, CONFIG_MAPS, Some(REMOTE_NS), "kube-root-ca.crt").is_none());
    world.origin.delete(CONFIG_MAPS, "app/kube-root-ca.crt");
    gone(&world, CONFIG_MAPS, "kube-root-ca.crt.origi").await;
}

/// Services: type, selector and ports copied, not the cluster IP nor a
/// node port (`forge/services.go:28-96`); a change of ports followed; the
/// copy deleted with the Service.
#[tokio::test]
async fn a_service_is_copied_without_its_addresses_and_follows_its_ports() {
    let world = world().await;
    let svc = |port: i64| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "db", "namespace": "app"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.9", "selector": {"app": "db"},
                     "sessionAffinity": "None",
                     "ports": [{"name": "sql", "port": port, "targetPort": 5432,
                                "protocol": "TCP", "nodePort": 30009}]}})
    };
    world.origin.apply(SERVICES, svc(5432));
    let copy = remote(&world, SERVICES, "db", "the copy", |_| true).await;
    assert_eq!(
        copy["spec"],
        json!({"type": "NodePort", "selector": {"app": "db"}, "sessionAffinity": "None",
               "ports": [{"name": "sql", "port": 5432, "targetPort": 5432, "protocol": "TCP"}]})
    );
    world.origin.apply(SERVICES, svc(3306));
    remote(&world, SERVICES, "db", "the new port", |s| {
        s["spec"]["ports"][0]["port"] == 3306
    })
    .await;
    world
        .origin
        .delete_object(GroupResource::new("", "services"), Some("app"), "db")
        .unwrap();
    gone(&world, SERVICES, "db").await;
}

/// What the namespace held before it was offloaded is copied once its
/// mapping is `Accepted` (the namespaced reflector starts with a list of
/// the namespace, `reflection/namespacemap/namespace.go:138-146`).
#[tokio::test]
async fn objects_already_in_the_namespace_are_copied_once_it_is_offloaded() {
    let world = world_with(|origin| {
        origin.apply(SECRETS, secret("early", json!({})));
    })
    .await;
    remote(&world, SECRETS, "early", "the copy", |_| true).await;
}
