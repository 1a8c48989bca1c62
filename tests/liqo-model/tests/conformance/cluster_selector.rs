//! Why the broker selects providers, not contracts' virtual nodes (issue
//! 40, item 8): Liqo v1.2.0 maps a namespace per *cluster*. Its
//! NamespaceOffloading controller walks every VirtualNode and, per node,
//! adds the namespace to the node's cluster's NamespaceMap when the node
//! matches the cluster selector and removes it when it does not
//! (`pkg/liqo-controller-manager/offloading/namespaceoffloading-controller/clusterselector.go:37-75`),
//! matching the node's real Node labels
//! (`pkg/utils/virtualnode/virtualnode.go:35-64`). With two virtual nodes
//! of one provider and a selector matching one of them, the one map is
//! written both ways in every pass, and every write of the map starts
//! another pass (`namespaceoffloading_controller.go:142-147` watches the
//! NamespaceMaps): the mapping flaps. The broker's selector
//! (`liqo.io/remote-cluster-id In [provider]`) matches both nodes, and the
//! mapping holds.

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, Peering};
use serde_json::json;
use std::time::Duration;

use crate::{namespace, wait_for, NODES, VIRTUAL_NODES};

const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");

/// Node `name` of peer `p1`: a VirtualNode in `p1`'s tenant namespace,
/// whose Node the virtual kubelet makes.
fn virtual_node(origin: &KubeApiServer, name: &str) {
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": name, "namespace": "liqo-tenant-p1"},
               "spec": {"clusterID": "p1", "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}}),
    );
}

fn offloading(key: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "app"},
        "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}})
}

#[tokio::test]
async fn a_selector_matching_one_of_a_clusters_two_nodes_adds_and_removes_its_mapping() {
    let origin = KubeApiServer::start().await.unwrap();
    let p1 = KubeApiServer::start().await.unwrap();
    let _cluster = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let _nodes = liqo_model::Consumer::start(&origin).await.unwrap();
    let _peering = Peering::start_namespaces(&origin, "origin", &p1, "p1")
        .await
        .unwrap();
    // Two contracts with one provider: two virtual nodes of cluster p1.
    for name in ["liqo-p1-a", "liqo-p1-b"] {
        virtual_node(&origin, name);
        wait_for(&origin, NODES, None, name, "its Node", |n| {
            n["metadata"]["labels"]["kubernetes.io/hostname"] == name
        })
        .await;
    }
    namespace(&origin, "app", json!({}));

    use liqo_model::identity::{self, Rule, READ};
    identity::grant(
        &origin,
        "watcher",
        "watcher",
        &[Rule::new(&["offloading.liqo.io"], &["namespacemaps"], READ)],
    );
    let client = identity::client_as(&origin, "watcher").await.unwrap();
    let maps: Api<DynamicObject> = Api::namespaced_with(
        client,
        "liqo-tenant-p1",
        &liqo_model::offloading_consts::namespace_maps(),
    );
    let start = maps.get("p1").await.unwrap();
    let rv = start.metadata.resource_version.clone().unwrap();
    let mut events = maps
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    // A selector naming one node (by the label every Node carries).
    origin
        .create(
            OFFLOADINGS,
            offloading("kubernetes.io/hostname", "liqo-p1-a"),
        )
        .unwrap();
    // Every write of the map is seen: the mapping added for liqo-p1-a and
    // removed for liqo-p1-b, then again.
    let (mut added, mut removed) = (0, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while added < 2 || removed < 2 {
        let event = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .unwrap_or_else(|_| {
                panic!("the mapping was added {added} and removed {removed} times in 10 s")
            })
            .unwrap()
            .expect("the watch goes on");
        let WatchEvent::Modified(nm) = event else {
            continue;
        };
        let mapped = nm.data["spec"]["desiredMapping"]["app"].is_string();
        match (mapped, added > removed) {
            (true, false) => added += 1,
            (false, true) => removed += 1,
            _ => {}
        }
    }
}

/// The broker's selector: both nodes of the provider match, so every pass
/// adds the mapping and none removes it; Liqo reports the offloading
/// Ready for its generation (status.go), which a flapping map never
/// settles into.
#[tokio::test]
async fn the_providers_selector_matches_both_nodes_and_the_mapping_holds() {
    let origin = KubeApiServer::start().await.unwrap();
    let p1 = KubeApiServer::start().await.unwrap();
    let _cluster = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let _nodes = liqo_model::Consumer::start(&origin).await.unwrap();
    let _peering = Peering::start_namespaces(&origin, "origin", &p1, "p1")
        .await
        .unwrap();
    for name in ["liqo-p1-a", "liqo-p1-b"] {
        virtual_node(&origin, name);
        wait_for(&origin, NODES, None, name, "its Node", |n| {
            n["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "p1"
        })
        .await;
    }
    namespace(&origin, "app", json!({}));
    origin
        .create(OFFLOADINGS, offloading("liqo.io/remote-cluster-id", "p1"))
        .unwrap();
    wait_for(
        &origin,
        OFFLOADINGS,
        Some("app"),
        "offloading",
        "Ready",
        |o| {
            o["status"]["offloadingPhase"] == "Ready"
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        },
    )
    .await;
    let map = crate::get(
        &origin,
        ("offloading.liqo.io", "namespacemaps"),
        Some("liqo-tenant-p1"),
        "p1",
    )
    .unwrap();
    assert_eq!(map["spec"]["desiredMapping"]["app"], "app-origin", "{map}");
}
