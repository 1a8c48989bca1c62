//! The consumer's virtual-node creator and the virtual kubelet's node
//! provider, with the cases of `pkg/virtualKubelet/liqoNodeProvider/nodeProvider_test.go`.

use kube::api::DynamicObject;
use kube_test_server::{GroupResource, KubeApiServer};
use liqo_model::node_provider::{node_status, Network};
use liqo_model::Consumer;
use serde_json::{json, Value};

use super::*;

const PROVIDER: &str = "provider-1";
const TENANT_NS: &str = "liqo-tenant-provider-1";

/// A consumer peered with [`PROVIDER`]: tenant namespace, the
/// ForeignCluster with networking as given, Liqo's controllers running.
async fn consumer(networking: Value) -> (KubeApiServer, Consumer) {
    let kube = KubeApiServer::start().await.unwrap();
    namespace(
        &kube,
        TENANT_NS,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": PROVIDER}),
    );
    kube.create(
        FOREIGN_CLUSTERS,
        json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
        "metadata": {"name": PROVIDER, "labels": {"liqo.io/remote-cluster-id": PROVIDER}},
        "spec": {"clusterID": PROVIDER}}),
    )
    .unwrap();
    kube.merge_patch(FOREIGN_CLUSTERS, None, PROVIDER, json!({"status": {"observedGeneration": 1, "modules": {
        "authentication": {"enabled": true}, "offloading": {"enabled": true}, "networking": networking}}}), true)
        .unwrap();
    let running = Consumer::start(&kube).await.unwrap();
    (kube, running)
}

/// The consumer's slice `name` asking for a virtual node, with its
/// Identity and kubeconfig Secret as Liqo makes them from the grant.
fn slice_with_identity(kube: &KubeApiServer, name: &str) {
    kube.create(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": name, "namespace": TENANT_NS,
                     "annotations": {"liqo.io/create-virtual-node": "true"},
                     "labels": {"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER,
                                "liqo.io/remote-cluster-id": PROVIDER}},
        "spec": {"class": "gold", "providerClusterID": PROVIDER, "resources": {"cpu": "2"}}}),
    )
    .unwrap();
    let secret = format!("kubeconfig-{name}");
    kube.create(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret, "namespace": TENANT_NS}, "data": {"kubeconfig": "e30="}}),
    )
    .unwrap();
    kube.create(IDENTITIES, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
        "metadata": {"name": format!("{name}-identity"), "namespace": TENANT_NS,
                     "labels": {"liqo.io/remote-cluster-id": PROVIDER, "liqo.io/resourceslice-name": name}},
        "spec": {"clusterID": PROVIDER, "type": "ResourceSlice", "namespace": "liqo-tenant-consumer-1"}}))
        .unwrap();
    kube.merge_patch(
        IDENTITIES,
        Some(TENANT_NS),
        &format!("{name}-identity"),
        json!({"status": {"kubeconfigSecretRef": {"name": secret}}}),
        true,
    )
    .unwrap();
}

/// The provider's grant, as the replicator copies it back.
fn granted(kube: &KubeApiServer, name: &str, resources_condition: &str, resources: Value) {
    let conditions = json!([
        {"type": "Authentication", "status": "Accepted", "reason": "x", "message": "x",
         "lastTransitionTime": "2026-11-26T00:00:00Z"},
        {"type": "Resources", "status": resources_condition, "reason": "x", "message": "x",
         "lastTransitionTime": "2026-11-26T00:00:00Z"}]);
    kube.merge_patch(
        SLICES,
        Some(TENANT_NS),
        name,
        json!({"status": {"conditions": conditions, "resources": resources}}),
        true,
    )
    .unwrap();
}

fn node_condition(node: &Value, kind: &str) -> Option<String> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

#[tokio::test]
async fn an_accepted_slice_yields_a_ready_node_whose_allocatable_is_the_grant_pods_included() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    slice_with_identity(&kube, "gold");
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "10"});
    granted(&kube, "gold", "Accepted", grant.clone());
    let vn = wait_for(
        &kube,
        VIRTUAL_NODES,
        Some(TENANT_NS),
        "gold",
        "a VirtualNode",
        |_| true,
    )
    .await;
    assert_eq!(vn["spec"]["resourceQuota"]["hard"], grant);
    assert_eq!(vn["spec"]["clusterID"], PROVIDER);
    let node = wait_for(&kube, NODES, None, "gold", "Ready", |n| {
        node_condition(n, "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(node["status"]["allocatable"], grant);
    assert_eq!(node["status"]["capacity"], grant);
    assert!(node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["key"] == "virtual-node.liqo.io/not-allowed"));
}

#[tokio::test]
async fn zeros_make_the_node_not_ready_and_a_dropped_key_stays_on_the_node() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    slice_with_identity(&kube, "gold");
    granted(
        &kube,
        "gold",
        "Accepted",
        json!({"cpu": "2", "memory": "4Gi", "pods": "10"}),
    );
    wait_for(&kube, NODES, None, "gold", "Ready", |n| {
        node_condition(n, "Ready").as_deref() == Some("True")
    })
    .await;
    // A revocation by zeros, `pods` left out: cpu and memory at zero make
    // the node NotReady, and `pods` keeps its old value (never deleted).
    granted(
        &kube,
        "gold",
        "Accepted",
        json!({"cpu": "0", "memory": "0"}),
    );
    let node = wait_for(&kube, NODES, None, "gold", "NotReady", |n| {
        node_condition(n, "Ready").as_deref() == Some("False")
    })
    .await;
    assert_eq!(
        node["status"]["allocatable"],
        json!({"cpu": "0", "memory": "0", "pods": "10"})
    );
    assert_eq!(
        node_condition(&node, "MemoryPressure").as_deref(),
        Some("True")
    );
}

#[tokio::test]
async fn a_gpu_only_grant_gives_a_node_that_is_never_ready() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    slice_with_identity(&kube, "gpu");
    granted(&kube, "gpu", "Accepted", json!({"nvidia.com/gpu": "1"}));
    let node = wait_for(&kube, NODES, None, "gpu", "its conditions", |n| {
        node_condition(n, "Ready").is_some()
    })
    .await;
    assert_eq!(node_condition(&node, "Ready").as_deref(), Some("False"));
}

#[tokio::test]
async fn denied_after_accepted_leaves_the_virtual_node_as_it_was() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    slice_with_identity(&kube, "gold");
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "10"});
    granted(&kube, "gold", "Accepted", grant.clone());
    wait_for(
        &kube,
        VIRTUAL_NODES,
        Some(TENANT_NS),
        "gold",
        "a VirtualNode",
        |_| true,
    )
    .await;
    granted(&kube, "gold", "Denied", Value::Null);
    // Sync point: a later slice's VirtualNode means the Denied was seen.
    slice_with_identity(&kube, "marker");
    granted(
        &kube,
        "marker",
        "Accepted",
        json!({"cpu": "1", "memory": "1Gi"}),
    );
    wait_for(
        &kube,
        VIRTUAL_NODES,
        Some(TENANT_NS),
        "marker",
        "the marker's VirtualNode",
        |_| true,
    )
    .await;
    let vn = kube
        .get(
            GroupResource::new(VIRTUAL_NODES.0, VIRTUAL_NODES.1),
            Some(TENANT_NS),
            "gold",
        )
        .unwrap();
    assert_eq!(vn["spec"]["resourceQuota"]["hard"], grant);
}

#[tokio::test]
async fn a_slice_not_asking_for_a_virtual_node_gets_none() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    slice_with_identity(&kube, "quiet");
    kube.merge_patch(
        SLICES,
        Some(TENANT_NS),
        "quiet",
        json!({"metadata": {"annotations": {"liqo.io/create-virtual-node": "false"}}}),
        false,
    )
    .unwrap();
    granted(
        &kube,
        "quiet",
        "Accepted",
        json!({"cpu": "1", "memory": "1Gi"}),
    );
    slice_with_identity(&kube, "marker");
    granted(
        &kube,
        "marker",
        "Accepted",
        json!({"cpu": "1", "memory": "1Gi"}),
    );
    wait_for(
        &kube,
        VIRTUAL_NODES,
        Some(TENANT_NS),
        "marker",
        "the marker's VirtualNode",
        |_| true,
    )
    .await;
    assert!(kube
        .get(
            GroupResource::new(VIRTUAL_NODES.0, VIRTUAL_NODES.1),
            Some(TENANT_NS),
            "quiet"
        )
        .is_none());
}

// ---- nodeProvider_test.go's table (:175-345), on the pure decision ------

fn virtual_node(hard: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": "vn", "namespace": "ns"},
        "spec": {"clusterID": "remote-id", "resourceQuota": {"hard": hard}}}),
    )
    .unwrap()
}

fn foreign_cluster(observed: i64, networking_enabled: bool, established: bool) -> DynamicObject {
    let conditions = if established {
        json!([{"type": "NetworkConnectionStatus", "status": "Established"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
        "metadata": {"name": "remote-id"}, "spec": {"clusterID": "remote-id"},
        "status": {"observedGeneration": observed,
                   "modules": {"networking": {"enabled": networking_enabled, "conditions": conditions}}}}))
    .unwrap()
}

fn conditions(status: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    all.sort();
    all
}

fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    all.sort();
    all
}

#[test]
fn networking_disabled_offloading_enabled_is_ready_without_a_network_condition() {
    let fc = foreign_cluster(1, false, false);
    let status = node_status(
        &Value::Null,
        &virtual_node(json!({"cpu": "2", "memory": "3"})),
        Network::of(Some(&fc), true),
    );
    assert_eq!(
        conditions(&status),
        expect(&[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False")
        ])
    );
}

#[test]
fn networking_enabled_and_disconnected_without_resources_is_not_ready_with_the_network_down() {
    let fc = foreign_cluster(1, true, false);
    let status = node_status(
        &Value::Null,
        &virtual_node(json!({})),
        Network::of(Some(&fc), true),
    );
    assert_eq!(
        conditions(&status),
        expect(&[
            ("Ready", "False"),
            ("MemoryPressure", "True"),
            ("DiskPressure", "True"),
            ("PIDPressure", "True"),
            ("NetworkUnavailable", "True")
        ])
    );
}

#[test]
fn networking_enabled_and_connected_without_resources_is_not_ready_with_the_network_up() {
    let fc = foreign_cluster(1, true, true);
    let status = node_status(
        &Value::Null,
        &virtual_node(json!({})),
        Network::of(Some(&fc), true),
    );
    assert_eq!(
        conditions(&status),
        expect(&[
            ("Ready", "False"),
            ("MemoryPressure", "True"),
            ("DiskPressure", "True"),
            ("PIDPressure", "True"),
            ("NetworkUnavailable", "False")
        ])
    );
}

#[test]
fn networking_enabled_and_connected_with_resources_is_ready() {
    let fc = foreign_cluster(1, true, true);
    let status = node_status(
        &Value::Null,
        &virtual_node(json!({"cpu": "2", "memory": "3"})),
        Network::of(Some(&fc), true),
    );
    assert_eq!(
        conditions(&status),
        expect(&[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
            ("NetworkUnavailable", "False")
        ])
    );
}

#[test]
fn a_foreign_cluster_not_yet_reconciled_counts_networking_as_enabled_and_down() {
    let fc = foreign_cluster(0, false, false);
    let status = node_status(
        &Value::Null,
        &virtual_node(json!({"cpu": "2", "memory": "3"})),
        Network::of(Some(&fc), true),
    );
    let all = conditions(&status);
    assert!(all.contains(&("Ready".into(), "False".into())), "{all:?}");
    assert!(
        all.contains(&("NetworkUnavailable".into(), "True".into())),
        "{all:?}"
    );
}
