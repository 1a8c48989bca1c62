//! A virtual node going away, as Liqo v1.2.0's VirtualNode controller
//! removes it (`liqo_model::virtual_node_controller`): the VirtualNode
//! carries Liqo's finalizer; once it is deleted its Node is cordoned, the
//! pods offloaded through it are evicted through `pods/eviction` — a
//! PodDisruptionBudget's refusal keeps the node cordoned and is tried again
//! until the budget allows it — and only then are the Node and the
//! VirtualNode gone. With the peer's ForeignCluster gone (a dead peer) the
//! pods are deleted at once, budgets or not.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, Peering};
use serde_json::{json, Value};

use crate::offloading::{OFFLOADINGS, PODS};
use crate::{get, namespace, wait_for, FOREIGN_CLUSTERS, NAMESPACES, NODES, VIRTUAL_NODES, WAIT};

const PDBS: (&str, &str) = ("policy", "poddisruptionbudgets");
const SHADOW_PODS: (&str, &str) = ("offloading.liqo.io", "shadowpods");
const TENANT: &str = "liqo-tenant-p2";
const NODE: &str = "liqo-p2";

/// Cluster `origin` offloading namespace `app` to peer `p2` through the
/// virtual node `liqo-p2`, with Liqo's consumer-side controllers and two
/// pods running there: `a-free` (no budget) and `b-guarded` (a budget
/// that allows no disruption, `minAvailable: 1` of its one pod).
struct World {
    origin: KubeApiServer,
    p2: KubeApiServer,
    _liqo: (Cluster, liqo_model::Consumer, Cluster, Peering),
}

async fn world(with_foreign_cluster: bool) -> World {
    let origin = KubeApiServer::start().await.unwrap();
    let origin_liqo = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let consumer = liqo_model::Consumer::start(&origin).await.unwrap();
    let p2 = KubeApiServer::start().await.unwrap();
    p2.apply(
        NODES,
        kube_test_server::node("node-p2", true, false, "4", "8Gi"),
    );
    let p2_liqo = Cluster::start(&p2, "p2", &["node-p2"]).await.unwrap();
    namespace(
        &origin,
        TENANT,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": "p2"}),
    );
    if with_foreign_cluster {
        // What the ForeignCluster controller makes for a peer
        // (`foreigncluster_controller.go:187-233`), found by its label.
        origin.apply(
            FOREIGN_CLUSTERS,
            json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
                   "metadata": {"name": "p2", "labels": {"liqo.io/remote-cluster-id": "p2"}},
                   "spec": {"clusterID": "p2"}}),
        );
    }
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": NODE, "namespace": TENANT},
               "spec": {"clusterID": "p2", "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
    );
    let peering = Peering::start(&origin, "origin", &p2, "p2", NODE)
        .await
        .unwrap();
    namespace(&origin, "app", json!({}));
    origin.apply(
        OFFLOADINGS,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
               "metadata": {"name": "offloading", "namespace": "app"},
               "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "liqo.io/remote-cluster-id",
                                          "operator": "In", "values": ["p2"]}]}]}}}),
    );
    wait_for(
        &origin,
        NAMESPACES,
        None,
        "app",
        "labelled for the webhook",
        |ns| ns["metadata"]["labels"]["liqo.io/scheduling-enabled"] == "true",
    )
    .await;
    origin.apply(
        PDBS,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "guard", "namespace": "app"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}),
    );
    // Through the API, so the pod webhook mutates them (at creation only,
    // once its cache has the namespace's label: made again until it has).
    use liqo_model::identity::{self, Rule, ALL};
    const RULES: &[Rule] = &[Rule::new(&[""], &["pods"], ALL)];
    identity::grant(&origin, "alice", "alice", RULES);
    let alice = identity::client_as(&origin, "alice").await.unwrap();
    let pods: Api<DynamicObject> =
        Api::namespaced_with(alice, "app", &liqo_model::offloading_consts::pods());
    for (name, app) in [("a-free", "free"), ("b-guarded", "guarded")] {
        let pod: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "app", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}))
        .unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let made = pods.create(&PostParams::default(), &pod).await.unwrap();
            let mutated = made.data["spec"]["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == "virtual-node.liqo.io/not-allowed");
            if mutated {
                break;
            }
            assert!(Instant::now() < deadline, "{name} never mutated");
            pods.delete(name, &Default::default()).await.unwrap();
        }
        wait_for(
            &origin,
            PODS,
            Some("app"),
            name,
            "Running on the virtual node",
            |p| p["status"]["phase"] == "Running" && p["spec"]["nodeName"] == NODE,
        )
        .await;
    }
    World {
        origin,
        p2,
        _liqo: (origin_liqo, consumer, p2_liqo, peering),
    }
}

/// The eviction POSTs for pod `name` answered with `code`.
fn evictions(kube: &KubeApiServer, name: &str, code: u16) -> usize {
    kube.audit()
        .iter()
        .filter(|r| r.code == code && r.method == "POST")
        .filter_map(|r| r.resource.as_ref())
        .filter(|r| {
            r.resource == "pods"
                && r.subresource.as_deref() == Some("eviction")
                && r.name.as_deref() == Some(name)
        })
        .count()
}

async fn until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn node_condition(vn: &Value) -> Vec<String> {
    vn["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == "Node")
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_deleted_virtual_node_is_cordoned_and_drained_through_evictions_a_budget_holds_it() {
    let w = world(true).await;
    let vn = get(&w.origin, VIRTUAL_NODES, Some(TENANT), NODE).unwrap();
    assert_eq!(
        vn["metadata"]["finalizers"],
        json!(["virtualnode-controller.liqo.io/finalizer"])
    );
    // The reflection marks each offloaded pod; the ShadowPod does not get
    // the mark.
    let local = get(&w.origin, PODS, Some("app"), "b-guarded").unwrap();
    assert_eq!(local["metadata"]["labels"]["liqo.io/shadowPod"], "true");
    let shadow = get(&w.p2, SHADOW_PODS, Some("app-origin"), "b-guarded").unwrap();
    assert!(shadow["metadata"]["labels"]["liqo.io/shadowPod"].is_null());
    wait_for(&w.origin, PDBS, Some("app"), "guard", "its status", |b| {
        b["status"]["currentHealthy"] == 1 && b["status"]["disruptionsAllowed"] == 0
    })
    .await;

    let deleted_at = Instant::now();
    w.origin
        .delete_object(VIRTUAL_NODES, Some(TENANT), NODE)
        .unwrap();
    wait_for(&w.origin, NODES, None, NODE, "cordoned", |n| {
        n["spec"]["unschedulable"] == true
    })
    .await;
    // Refused, and tried again: Liqo never gives up nor forces the pod.
    until("two refused evictions of b-guarded", WAIT, || {
        evictions(&w.origin, "b-guarded", 429) >= 2
    })
    .await;
    assert_eq!(evictions(&w.origin, "a-free", 201), 1);
    assert!(get(&w.origin, PODS, Some("app"), "a-free").is_none());
    assert!(get(&w.origin, PODS, Some("app"), "b-guarded").is_some());
    assert!(get(&w.origin, NODES, None, NODE).is_some());
    let vn = get(&w.origin, VIRTUAL_NODES, Some(TENANT), NODE).unwrap();
    assert_eq!(node_condition(&vn), ["Draining"]);
    // The shadow of the evicted pod goes with it.
    until("a-free's ShadowPod gone", WAIT, || {
        get(&w.p2, SHADOW_PODS, Some("app-origin"), "a-free").is_none()
    })
    .await;

    // The budget lifted: the next try (the work queue's backoff doubles,
    // so it comes within the time spent so far, plus the usual wait)
    // evicts the pod, deletes the node and lets the VirtualNode go.
    w.origin.delete_object(PDBS, Some("app"), "guard").unwrap();
    let within = deleted_at.elapsed() * 2 + WAIT;
    until("the VirtualNode gone", within, || {
        get(&w.origin, VIRTUAL_NODES, Some(TENANT), NODE).is_none()
    })
    .await;
    assert_eq!(evictions(&w.origin, "b-guarded", 201), 1);
    assert!(get(&w.origin, PODS, Some("app"), "b-guarded").is_none());
    assert!(get(&w.origin, NODES, None, NODE).is_none());
}

#[tokio::test]
async fn the_pods_of_a_dead_peer_are_deleted_without_evictions() {
    // No ForeignCluster for p2: Liqo takes the peer as dead.
    let w = world(false).await;
    wait_for(&w.origin, PDBS, Some("app"), "guard", "its status", |b| {
        b["status"]["disruptionsAllowed"] == 0
    })
    .await;
    w.origin
        .delete_object(VIRTUAL_NODES, Some(TENANT), NODE)
        .unwrap();
    until("the VirtualNode gone", WAIT, || {
        get(&w.origin, VIRTUAL_NODES, Some(TENANT), NODE).is_none()
    })
    .await;
    for pod in ["a-free", "b-guarded"] {
        assert!(get(&w.origin, PODS, Some("app"), pod).is_none(), "{pod}");
        assert_eq!(
            evictions(&w.origin, pod, 201) + evictions(&w.origin, pod, 429),
            0
        );
    }
    assert!(get(&w.origin, NODES, None, NODE).is_none());
}
