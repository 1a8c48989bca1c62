//! A node that stops being Ready, as a real API server and
//! kube-controller-manager handle it (`src/taint_eviction.rs`, each part
//! from its Kubernetes v1.31.0 source): pods are admitted with the default
//! `not-ready`/`unreachable` NoExecute tolerations of 300 s; a node whose
//! `Ready` turns `False` is tainted `node.kubernetes.io/not-ready:NoExecute`
//! (and untainted when Ready again); its pods are deleted after their
//! smallest `tolerationSeconds` — never sooner — with the
//! `TaintManagerEviction` Event, and a pod tolerating the taint for ever,
//! or for the default 300 s, stays.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{admin, eventually};

/// The short toleration under test: the eviction comes no sooner.
const SHORT: Duration = Duration::from_secs(1);

fn pod(name: &str, tolerations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "tolerations": tolerations,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}
    }))
    .unwrap()
}

async fn set_ready(nodes: &Api<Node>, status: &str) {
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": "KubeletReady", "lastHeartbeatTime": null, "lastTransitionTime": null}]}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn taints(nodes: &Api<Node>) -> Vec<Value> {
    let node = nodes.get("n1").await.unwrap();
    serde_json::to_value(node.spec.unwrap_or_default().taints.unwrap_or_default())
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_not_ready_node_is_tainted_and_its_pods_evicted_after_their_toleration() {
    let kube = KubeApiServer::start().await.unwrap();
    let client = admin(&kube).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    set_ready(&nodes, "True").await;

    let not_ready = |seconds: Option<u64>| {
        let mut t = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        t
    };
    let pp = PostParams::default();
    pods.create(
        &pp,
        &pod("short", json!([not_ready(Some(SHORT.as_secs()))])),
    )
    .await
    .unwrap();
    pods.create(&pp, &pod("forever", json!([not_ready(None)])))
        .await
        .unwrap();
    let defaulted = pods.create(&pp, &pod("default", json!([]))).await.unwrap();
    // DefaultTolerationSeconds: both, 300 s, on a pod that had neither.
    let given = serde_json::to_value(defaulted.spec.unwrap().tolerations.unwrap()).unwrap();
    assert_eq!(
        given,
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ])
    );
    // Ready: no NoExecute taint, nobody evicted.
    assert!(taints(&nodes).await.is_empty());

    let went_not_ready = Instant::now();
    set_ready(&nodes, "False").await;
    eventually("the node tainted not-ready:NoExecute", || async {
        taints(&nodes).await.iter().any(|t| {
            t["key"] == "node.kubernetes.io/not-ready"
                && t["effect"] == "NoExecute"
                && t["timeAdded"].is_string()
        })
    })
    .await;
    eventually("the pod with the short toleration deleted", || async {
        pods.get_opt("short").await.unwrap().is_none()
    })
    .await;
    assert!(
        went_not_ready.elapsed() >= SHORT,
        "deleted {:?} after the node went NotReady, before its toleration of {SHORT:?}",
        went_not_ready.elapsed()
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let evicted: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TaintManagerEviction"))
        .collect();
    assert_eq!(evicted.len(), 1, "{evicted:#?}");
    assert_eq!(evicted[0].involved_object.name.as_deref(), Some("short"));
    for stays in ["forever", "default"] {
        assert!(
            pods.get_opt(stays).await.unwrap().is_some(),
            "{stays} was evicted"
        );
    }

    // Ready again: the taint goes.
    set_ready(&nodes, "True").await;
    eventually("the taint removed", || async {
        taints(&nodes).await.is_empty()
    })
    .await;
}
