//! Giving back, in process under the shipped RBAC against the Kubernetes
//! API test server (its ReplicaSet controller and `pods/eviction`): an
//! empty bought node has its Purchase deleted with a `ScaleDown` Event on
//! the node; an underutilised one has its pod evicted first (its
//! ReplicaSet makes another), then its Purchase deleted.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use kube_test_server::KubeApiServer;
use market_autoscaler::context::Settings;
use market_autoscaler::controller;
use market_autoscaler::metrics::Metrics;
use serde_json::{json, Value};
use support::*;
use tokio_util::sync::CancellationToken;

const MAS: (&str, &str) = ("broker.liqo-broker.io", "marketautoscalers");
const PURCHASES: (&str, &str) = ("broker.liqo-broker.io", "purchases");
const WITHIN: Duration = Duration::from_secs(10);
/// Liqo names the virtual node after the slice, purchase-controller the
/// slice after the contract (`purchase_controller::liqo::slice_name`).
const NODE: &str = "contract-c1";

fn settings() -> Settings {
    Settings {
        scan_interval: Duration::from_millis(200),
        batch_idle: Duration::from_millis(50),
        batch_max: Duration::from_secs(1),
        purchase_deadline: Duration::from_secs(600),
        backoff_initial: Duration::from_secs(300),
        backoff_max: Duration::from_secs(1800),
        backoff_reset: Duration::from_secs(3 * 3600),
        retry: Duration::from_millis(200),
        catalog_timeout: Duration::from_secs(2),
        max_drain_time: Duration::from_secs(120),
        instance: "test".into(),
    }
}

fn start(kube: &KubeApiServer) -> (Metrics, CancellationToken) {
    let metrics = Metrics::new();
    let stop = CancellationToken::new();
    tokio::spawn(controller::run(
        market_autoscaler::context::Clients::same(autoscaler_client(kube)),
        settings(),
        metrics.clone(),
        stop.clone(),
    ));
    (metrics, stop)
}

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                      "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A MarketAutoscaler giving back at once, a Ready Purchase of it and its
/// virtual node.
async fn world() -> (KubeApiServer, Catalog) {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![offer("o1", "provider-a", "small", "4", "0.5")]).await;
    token_secret(&kube);
    let mut ma = autoscaler("web", &catalog.url);
    ma["spec"]["scaleDown"] = json!({"policy": "WhenEmptyOrUnderutilized", "unneededTime": "0s",
                                     "delayAfterPurchase": "0s", "utilizationThreshold": "0.5"});
    kube.apply(MAS, ma);
    kube.apply(
        PURCHASES,
        json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
               "metadata": {"name": "web-1", "namespace": NS,
                            "labels": {"broker.liqo-broker.io/market-autoscaler": "web"}},
               "spec": {"catalogURL": catalog.url, "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                        "offerID": "o1", "planID": "small", "namespaces": [SERVED]},
               "status": {"phase": "Ready", "contractID": "c1", "providerClusterID": "provider-a"}}),
    );
    kube.apply(
        ("", "nodes"),
        node(
            NODE,
            json!({"liqo.io/remote-cluster-id": "provider-a", "liqo.io/type": "virtual-node"}),
        ),
    );
    (kube, catalog)
}

fn scale_down_event(kube: &KubeApiServer) -> Option<Value> {
    kube.objects(("events.k8s.io", "events"))
        .into_iter()
        .find(|e| e["reason"] == "ScaleDown" && e["regarding"]["name"] == NODE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_bought_node_is_given_back() {
    let (kube, _catalog) = world().await;
    let (metrics, stop) = start(&kube);
    eventually(WITHIN, "the Purchase deleted", || {
        kube.objects(PURCHASES).is_empty().then_some(())
    })
    .await;
    let event = eventually(WITHIN, "ScaleDown on the node", || scale_down_event(&kube)).await;
    assert!(event["note"].as_str().unwrap().contains("empty"), "{event}");
    let rendered = metrics.render();
    assert!(
        rendered.contains(r#"market_autoscaler_given_back_total{reason="empty"} 1"#),
        "{}",
        rendered
            .lines()
            .filter(|l| l.contains("given_back"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underutilised_node_has_its_pods_evicted_then_its_purchase_deleted() {
    let (kube, _catalog) = world().await;
    // Room elsewhere for its pod.
    kube.apply(("", "nodes"), node("local", json!({})));
    // A ReplicaSet's pod on the bought node (its template pins it there).
    kube.apply(
        ("apps", "replicasets"),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "web", "namespace": SERVED},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "app",
                                              "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}}}),
    );
    let first = eventually(WITHIN, "the ReplicaSet's pod", || {
        kube.objects(("", "pods")).into_iter().next()
    })
    .await;
    let first_uid = first["metadata"]["uid"].clone();
    let (_metrics, stop) = start(&kube);
    eventually(WITHIN, "the Purchase deleted", || {
        kube.objects(PURCHASES).is_empty().then_some(())
    })
    .await;
    assert!(
        kube.objects(("", "pods"))
            .iter()
            .all(|p| p["metadata"]["uid"] != first_uid),
        "the pod was evicted before the Purchase went"
    );
    let event = eventually(WITHIN, "ScaleDown on the node", || scale_down_event(&kube)).await;
    assert!(
        event["note"].as_str().unwrap().contains("underutilized"),
        "{event}"
    );
    stop.cancel();
}
