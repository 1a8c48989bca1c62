//! The NamespaceOffloading's status as Liqo v1.2.0's controller writes it
//! (`namespaceoffloading-controller/status.go`, `lifecycle.go`), with one
//! peer `p2`: `NoClusterSelected` while the selector matches no peer,
//! `Ready` once the namespace exists on the selected peer, `AllFailed`
//! when the peer's namespace of that name is another's, and on deletion
//! `Terminating` while Liqo's finalizer is let go only after the remote
//! namespace is gone.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::namespace_offloading::FINALIZER;
use liqo_model::offloading::{Cluster, Peering};
use serde_json::{json, Value};

use crate::{get, namespace, wait_for, NAMESPACES};

const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
/// A finalizer of the test's, so the object outlives Liqo's finalizer.
const HOLD: &str = "example.com/hold";

/// The origin with Liqo's offloading, peered with `p2` through its
/// VirtualNode, namespace `app`, and a client of the origin that may
/// write NamespaceOffloadings in `app`.
struct World {
    origin: KubeApiServer,
    p2: KubeApiServer,
    offloadings: Api<DynamicObject>,
    _liqo: (Cluster, Peering),
}

async fn world() -> World {
    use liqo_model::identity::{self, Rule, ALL};
    let (origin, p2, cluster, peering) = crate::origin_and_p2().await;
    const RULES: &[Rule] = &[Rule::new(
        &["offloading.liqo.io"],
        &["namespaceoffloadings"],
        ALL,
    )];
    identity::grant(&origin, "alice", "alice", RULES);
    let alice = identity::client_as(&origin, "alice").await.unwrap();
    World {
        origin,
        p2,
        offloadings: Api::namespaced_with(
            alice,
            "app",
            &liqo_model::offloading_consts::namespace_offloadings(),
        ),
        _liqo: (cluster, peering),
    }
}

fn selecting(cluster: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": [cluster]}]}]})
}

async fn create(world: &World, cluster: &str) {
    let nsoff = serde_json::from_value(json!({"apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "app", "finalizers": [HOLD]},
        "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": selecting(cluster)}}))
    .unwrap();
    world
        .offloadings
        .create(&PostParams::default(), &nsoff)
        .await
        .unwrap();
}

async fn status(world: &World, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait_for(
        &world.origin,
        OFFLOADINGS,
        Some("app"),
        "offloading",
        what,
        |o| ready(&o["status"]),
    )
    .await["status"]
        .clone()
}

/// `p2`'s conditions as (type, status, reason).
fn conditions(status: &Value) -> Vec<(String, String, String)> {
    let field = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
    status["remoteNamespacesConditions"]["p2"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (field(c, "type"), field(c, "status"), field(c, "reason")))
        .collect()
}

fn condition(kind: &str, status: &str, reason: &str) -> (String, String, String) {
    (kind.into(), status.into(), reason.into())
}

#[tokio::test]
async fn the_phase_follows_the_selected_peers_remote_namespace() {
    let world = world().await;
    create(&world, "p9").await;
    let seen = status(&world, "NoClusterSelected", |s| {
        s["offloadingPhase"] == "NoClusterSelected"
    })
    .await;
    assert_eq!(seen["observedGeneration"], 1);
    assert_eq!(seen["remoteNamespaceName"], "app-origin");
    assert_eq!(
        conditions(&seen),
        [condition(
            "OffloadingRequired",
            "False",
            "ClusterNotSelected"
        )]
    );
    assert!(get(&world.p2, NAMESPACES, None, "app-origin").is_none());

    let patch = json!({"spec": {"clusterSelector": selecting("p2")}});
    world
        .offloadings
        .patch("offloading", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let seen = status(&world, "Ready for generation 2", |s| {
        s["offloadingPhase"] == "Ready" && s["observedGeneration"] == 2
    })
    .await;
    assert_eq!(
        conditions(&seen),
        [
            condition("OffloadingRequired", "True", "ClusterSelected"),
            condition("Ready", "True", "NamespaceCreated"),
        ]
    );
    assert!(get(&world.p2, NAMESPACES, None, "app-origin").is_some());

    // lifecycle.go:27-53: Liqo's finalizer stays while a peer's condition
    // is left, i.e. until the remote namespace (held here) is gone.
    let hold = |finalizers: Value| json!({"metadata": {"finalizers": finalizers}});
    world
        .p2
        .merge_patch(NAMESPACES, None, "app-origin", hold(json!([HOLD])), false)
        .unwrap();
    world
        .offloadings
        .delete("offloading", &DeleteParams::default())
        .await
        .unwrap();
    let seen = wait_for(
        &world.origin,
        OFFLOADINGS,
        Some("app"),
        "offloading",
        "Terminating, the remote namespace being deleted",
        |o| conditions(&o["status"]).contains(&condition("Ready", "False", "Terminating")),
    )
    .await;
    assert_eq!(seen["status"]["offloadingPhase"], "Terminating");
    assert_eq!(
        conditions(&seen["status"]),
        [
            condition("OffloadingRequired", "False", "ClusterNotSelected"),
            condition("Ready", "False", "Terminating"),
        ]
    );
    let held = seen["metadata"]["finalizers"].as_array().unwrap();
    assert!(held.contains(&json!(FINALIZER)), "{seen:#}");
    world
        .p2
        .merge_patch(NAMESPACES, None, "app-origin", hold(json!([])), false)
        .unwrap();
    let gone = wait_for(
        &world.origin,
        OFFLOADINGS,
        Some("app"),
        "offloading",
        "Terminating, Liqo's finalizer gone",
        |o| {
            o["status"]["offloadingPhase"] == "Terminating"
                && o["metadata"]["finalizers"] == json!([HOLD])
        },
    )
    .await;
    assert!(
        gone["status"]["remoteNamespacesConditions"].is_null(),
        "{gone:#}"
    );
    assert!(get(&world.p2, NAMESPACES, None, "app-origin").is_none());
    let app = get(&world.origin, NAMESPACES, None, "app").unwrap();
    assert!(
        app["metadata"]["labels"]["liqo.io/scheduling-enabled"].is_null(),
        "{app:#}"
    );
}

#[tokio::test]
async fn a_remote_namespace_taken_by_another_is_all_failed() {
    let world = world().await;
    namespace(&world.p2, "app-origin", json!({}));
    create(&world, "p2").await;
    let seen = status(&world, "AllFailed", |s| s["offloadingPhase"] == "AllFailed").await;
    assert_eq!(
        conditions(&seen),
        [
            condition("OffloadingRequired", "True", "ClusterSelected"),
            condition("Ready", "False", "CreationLoopBackOff"),
        ]
    );
}
