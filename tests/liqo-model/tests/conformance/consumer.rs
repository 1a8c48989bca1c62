//! The consumer's virtual-node creator and the virtual kubelet's node
//! provider, with the cases of `pkg/virtualKubelet/liqoNodeProvider/nodeProvider_test.go`.

use base64::Engine;
use kube::api::DynamicObject;
use kube_test_server::KubeApiServer;
use liqo_model::node_provider::{node_status, Network};
use liqo_model::Consumer;
use serde_json::{json, Value};

use super::*;

const PROVIDER: &str = "provider-1";
const TENANT_NS: &str = "liqo-tenant-provider-1";

/// A consumer peered with [`PROVIDER`]: tenant namespace, the
/// ForeignCluster with networking as given, Liqo's controllers running.
async fn consumer(networking: Value) -> (KubeApiServer, Consumer) {
    let kube = peered_with(PROVIDER, TENANT_NS).await;
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

/// Slice `name`, with its Identity, granted `resources` by the provider.
fn granted(kube: &KubeApiServer, name: &str, resources: Value) {
    slice_with_identity(kube, name);
    write_status(kube, TENANT_NS, name, "Accepted", resources);
}

/// Slice `name` granted `resources` by the provider; its VirtualNode once made.
async fn granted_virtual_node(kube: &KubeApiServer, name: &str, resources: Value) -> Value {
    granted(kube, name, resources);
    wait_for(
        kube,
        VIRTUAL_NODES,
        Some(TENANT_NS),
        name,
        "a VirtualNode",
        |_| true,
    )
    .await
}

/// A slice granted now: once its VirtualNode exists, the virtual-node
/// creator's queue has passed every earlier slice event.
async fn marker(kube: &KubeApiServer) {
    granted_virtual_node(kube, "marker", json!({"cpu": "1", "memory": "1Gi"})).await;
}

/// The node `name` once its Ready condition is `status`.
async fn node_when_ready_is(kube: &KubeApiServer, name: &str, status: &str) -> Value {
    wait_for(kube, NODES, None, name, &format!("Ready {status}"), |n| {
        node_condition(n, "Ready").as_deref() == Some(status)
    })
    .await
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
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "10"});
    let vn = granted_virtual_node(&kube, "gold", grant.clone()).await;
    assert_eq!(vn["spec"]["resourceQuota"]["hard"], grant);
    assert_eq!(vn["spec"]["clusterID"], PROVIDER);
    let node = node_when_ready_is(&kube, "gold", "True").await;
    assert_eq!(node["status"]["allocatable"], grant);
    assert_eq!(node["status"]["capacity"], grant);
    assert!(node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["key"] == "virtual-node.liqo.io/not-allowed"));
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["liqo.io/type"], "virtual-node");
    assert_eq!(labels["liqo.io/remote-cluster-id"], PROVIDER);
    assert_eq!(labels["storage.liqo.io/available"], "false");
}

#[tokio::test]
async fn zeros_make_the_node_not_ready_and_a_dropped_key_stays_on_the_node() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    granted(
        &kube,
        "gold",
        json!({"cpu": "2", "memory": "4Gi", "pods": "10"}),
    );
    node_when_ready_is(&kube, "gold", "True").await;
    // A revocation by zeros, `pods` left out: cpu and memory at zero make
    // the node NotReady, and `pods` keeps its old value (never deleted).
    write_status(
        &kube,
        TENANT_NS,
        "gold",
        "Accepted",
        json!({"cpu": "0", "memory": "0"}),
    );
    let node = node_when_ready_is(&kube, "gold", "False").await;
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
    granted(&kube, "gpu", json!({"nvidia.com/gpu": "1"}));
    let node = wait_for(&kube, NODES, None, "gpu", "its conditions", |n| {
        node_condition(n, "Ready").is_some()
    })
    .await;
    assert_eq!(node_condition(&node, "Ready").as_deref(), Some("False"));
}

#[tokio::test]
async fn denied_after_accepted_leaves_the_virtual_node_as_it_was() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "10"});
    granted_virtual_node(&kube, "gold", grant.clone()).await;
    write_status(&kube, TENANT_NS, "gold", "Denied", Value::Null);
    // Sync point: a later slice's VirtualNode means the Denied was seen.
    marker(&kube).await;
    let vn = get(&kube, VIRTUAL_NODES, Some(TENANT_NS), "gold").unwrap();
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
    write_status(
        &kube,
        TENANT_NS,
        "quiet",
        "Accepted",
        json!({"cpu": "1", "memory": "1Gi"}),
    );
    marker(&kube).await;
    assert!(get(&kube, VIRTUAL_NODES, Some(TENANT_NS), "quiet").is_none());
}

// ---- nodeProvider_test.go's table (:175-345), on the pure decision ------

/// The node's conditions, sorted, for a VirtualNode with `hard` and a
/// ForeignCluster as given, the network check on.
fn conditions_for(
    observed: i64,
    networking: bool,
    established: bool,
    hard: Value,
) -> Vec<(String, String)> {
    let vn: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "VirtualNode", "metadata": {"name": "vn", "namespace": "ns"},
        "spec": {"clusterID": "remote-id", "resourceQuota": {"hard": hard}}}))
        .unwrap();
    let conditions = if established {
        json!([{"type": "NetworkConnectionStatus", "status": "Established"}])
    } else {
        json!([])
    };
    let fc: DynamicObject = serde_json::from_value(json!({"apiVersion": "core.liqo.io/v1beta1",
        "kind": "ForeignCluster", "metadata": {"name": "remote-id"}, "spec": {"clusterID": "remote-id"},
        "status": {"observedGeneration": observed,
                   "modules": {"networking": {"enabled": networking, "conditions": conditions}}}}))
    .unwrap();
    let status = node_status(&Value::Null, &vn, Network::of(Some(&fc), true));
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

const RESOURCES_READY: [(&str, &str); 4] = [
    ("Ready", "True"),
    ("MemoryPressure", "False"),
    ("DiskPressure", "False"),
    ("PIDPressure", "False"),
];
const NO_RESOURCES: [(&str, &str); 4] = [
    ("Ready", "False"),
    ("MemoryPressure", "True"),
    ("DiskPressure", "True"),
    ("PIDPressure", "True"),
];

/// A row of the table: name, ForeignCluster, quota, expected conditions.
type Row<'a> = (&'a str, (i64, bool, bool), Value, Vec<(&'a str, &'a str)>);

/// nodeProvider_test.go:135-346, one row per `Entry`: the ForeignCluster
/// (observedGeneration, networking enabled, connection established), the
/// VirtualNode's quota, and the conditions expected among the node's.
#[test]
fn the_node_provider_table() {
    let ready = RESOURCES_READY.as_slice();
    let none = NO_RESOURCES.as_slice();
    let rows: [Row; 5] = [
        (
            "networking disabled, offloading enabled",
            (1, false, false),
            json!({"cpu": "2", "memory": "3"}),
            ready.to_vec(),
        ),
        (
            "networking enabled (disconnected), no resources",
            (1, true, false),
            json!({}),
            [none, &[("NetworkUnavailable", "True")]].concat(),
        ),
        (
            "networking enabled (connected), no resources",
            (1, true, true),
            json!({}),
            [none, &[("NetworkUnavailable", "False")]].concat(),
        ),
        (
            "networking enabled (connected), offloading enabled",
            (1, true, true),
            json!({"cpu": "2", "memory": "3"}),
            [ready, &[("NetworkUnavailable", "False")]].concat(),
        ),
        (
            "ForeignCluster not yet reconciled (observedGeneration 0)",
            (0, false, false),
            json!({"cpu": "2", "memory": "3"}),
            vec![("Ready", "False"), ("NetworkUnavailable", "True")],
        ),
    ];
    for (name, (observed, networking, established), hard, expected) in rows {
        let got = conditions_for(observed, networking, established, hard);
        for pair in expect(&expected) {
            assert!(
                got.contains(&pair),
                "{name}: expected {pair:?} among {got:?}"
            );
        }
        if name.starts_with("networking disabled") {
            assert_eq!(got, expect(&expected), "{name}: no network condition");
        }
    }
}

// ---- the controllers a consumer runs knowing who it is (start_as) -------

const CONSUMER: &str = "consumer-1";

/// A consumer peered with [`PROVIDER`] as `liqoctl peer` leaves it: its
/// tenant namespace and the control-plane Identity (with its kubeconfig
/// Secret), Liqo's controllers running as cluster [`CONSUMER`].
async fn consumer_as_liqo() -> (KubeApiServer, Consumer) {
    let kube = peered_with(PROVIDER, TENANT_NS).await;
    kube.create(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "control-plane", "namespace": TENANT_NS}, "data": {"kubeconfig": "e30="}}),
    )
    .unwrap();
    kube.create(IDENTITIES, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
        "metadata": {"name": "control-plane", "namespace": TENANT_NS,
                     "labels": {"liqo.io/remote-cluster-id": PROVIDER}},
        "spec": {"clusterID": PROVIDER, "type": "ControlPlane", "namespace": "liqo-tenant-consumer-1",
                 "authParams": {"apiServer": "https://provider.example:6443", "ca": "Y2E=", "signedCRT": "Y3J0"}}}))
        .unwrap();
    kube.merge_patch(
        IDENTITIES,
        Some(TENANT_NS),
        "control-plane",
        json!({"status": {"kubeconfigSecretRef": {"name": "control-plane"}}}),
        true,
    )
    .unwrap();
    let running = Consumer::start_as(&kube, CONSUMER).await.unwrap();
    (kube, running)
}

#[tokio::test]
async fn a_local_slice_gets_the_consumer_and_provider_ids_and_a_csr() {
    let (kube, _liqo) = consumer_as_liqo().await;
    // As purchase-controller writes it: no consumer ID, no CSR.
    kube.create(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "gold", "namespace": TENANT_NS,
                     "labels": {"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER,
                                "liqo.io/remote-cluster-id": PROVIDER}},
        "spec": {"class": "gold", "resources": {"cpu": "2"}}}),
    )
    .unwrap();
    let slice = wait_for(&kube, SLICES, Some(TENANT_NS), "gold", "a CSR", |s| {
        s["spec"]["csr"].is_string()
    })
    .await;
    assert_eq!(slice["spec"]["consumerClusterID"], CONSUMER);
    assert_eq!(slice["spec"]["providerClusterID"], PROVIDER);
    assert!(liqo_model::remote_resource_slice::csr_is_one_pem_block(
        &slice["spec"]["csr"]
    ));
    // A PKCS#10 request for Liqo's CN and O (`authentication/csr.go:39-68`).
    let csr = base64::engine::general_purpose::STANDARD
        .decode(slice["spec"]["csr"].as_str().unwrap())
        .unwrap();
    liqo_model::remote_resource_slice::check_request(
        &csr,
        &liqo_model::slice::common_name("gold", CONSUMER),
        CONSUMER,
        None,
    )
    .unwrap();
    // LRS:83: a consumer ID already there is left as it is.
    kube.create(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "set", "namespace": TENANT_NS,
                     "labels": {"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER}},
        "spec": {"class": "gold", "consumerClusterID": "someone-else"}}),
    )
    .unwrap();
    let slice = wait_for(&kube, SLICES, Some(TENANT_NS), "set", "a CSR", |s| {
        s["spec"]["csr"].is_string()
    })
    .await;
    assert_eq!(slice["spec"]["consumerClusterID"], "someone-else");
    // LRS:92-108: no label, the provider is the tenant namespace's cluster.
    assert_eq!(slice["spec"]["providerClusterID"], PROVIDER);
}

#[tokio::test]
async fn the_foreign_cluster_says_provider_peered_and_its_node_is_ready() {
    let (kube, _liqo) = consumer_as_liqo().await;
    // Made by the ForeignCluster controller from the Identity (FCC:203-225).
    let fc = wait_for(&kube, FOREIGN_CLUSTERS, None, PROVIDER, "a role", |fc| {
        fc["status"]["role"] == "Provider"
    })
    .await;
    assert_eq!(fc["spec"]["clusterID"], PROVIDER);
    assert_eq!(fc["status"]["observedGeneration"], 1);
    assert_eq!(
        fc["status"]["apiServerUrl"],
        "https://provider.example:6443"
    );
    assert_eq!(
        fc["status"]["tenantNamespace"],
        json!({"local": TENANT_NS, "remote": "liqo-tenant-consumer-1"})
    );
    let modules = &fc["status"]["modules"];
    assert_eq!(modules["networking"], json!({"enabled": false}));
    assert_eq!(modules["authentication"]["enabled"], true);
    let auth = &modules["authentication"]["conditions"][0];
    assert_eq!(auth["type"], "AuthIdentityControlPlaneStatus", "{fc:#}");
    assert_eq!(auth["status"], "Ready");
    assert_eq!(auth["reason"], "IdentityReady");
    // A granted slice: a node, Ready (no network to check), and the
    // offloading module says so.
    granted(
        &kube,
        "gold",
        json!({"cpu": "2", "memory": "4Gi", "pods": "10"}),
    );
    node_when_ready_is(&kube, "gold", "True").await;
    let fc = offloading_nodes_are(&kube, "Ready").await;
    assert_eq!(fc["status"]["modules"]["offloading"]["enabled"], true);
    // Zeros make the node NotReady, and the ForeignCluster says so.
    write_status(
        &kube,
        TENANT_NS,
        "gold",
        "Accepted",
        json!({"cpu": "0", "memory": "0", "pods": "0"}),
    );
    node_when_ready_is(&kube, "gold", "False").await;
    offloading_nodes_are(&kube, "NotReady").await;
}

/// The ForeignCluster of [`PROVIDER`] once its offloading module's
/// `OffloadingNodeStatus` is `status`.
async fn offloading_nodes_are(kube: &KubeApiServer, status: &str) -> Value {
    let what = format!("OffloadingNodeStatus {status}");
    wait_for(kube, FOREIGN_CLUSTERS, None, PROVIDER, &what, |fc| {
        fc["status"]["modules"]["offloading"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "OffloadingNodeStatus" && c["status"] == status)
            })
    })
    .await
}

// ---- nodeProvider_test.go's hydration and label cases (:348-535), on the
// running virtual kubelet ----------------------------------------------

/// The VirtualNode `name` for [`PROVIDER`] with `spec` besides the cluster
/// and a quota of 2 cpu and 3Gi, written as the virtual-node creator would.
fn virtual_node(kube: &KubeApiServer, name: &str, spec: Value) {
    let mut full = json!({"clusterID": PROVIDER,
        "resourceQuota": {"hard": {"cpu": "2", "memory": "3Gi"}}});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    kube.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": name, "namespace": TENANT_NS}, "spec": full}),
    );
}

const ESTABLISHED: &str = "Established";

/// nodeProvider_test.go:348-432 ("hydrates the node from virtual node and
/// foreign cluster"): the VirtualNode's labels, annotations, taints,
/// quota and images on the node, storage available, Ready with the
/// network up.
#[tokio::test]
async fn the_node_carries_the_virtual_nodes_labels_annotations_taints_quota_and_images() {
    let networking = json!({"enabled": true, "conditions": [
        {"type": "NetworkConnectionStatus", "status": ESTABLISHED}]});
    let (kube, _liqo) = consumer(networking).await;
    let images = json!([{"names": ["nginx:latest"], "sizeBytes": 1234}]);
    let taint = json!({"key": "virtual-taint", "value": "taint-value", "effect": "NoSchedule"});
    virtual_node(
        &kube,
        "node-name",
        json!({"labels": {"virtual-label": "virtual-value"},
               "annotations": {"virtual-annotation": "annotation-value"},
               "taints": [taint], "storageClasses": [{"storageClassName": "fast"}],
               "images": images}),
    );
    let node = node_when_ready_is(&kube, "node-name", "True").await;
    let meta = &node["metadata"];
    assert_eq!(meta["labels"]["virtual-label"], "virtual-value");
    assert_eq!(meta["labels"]["storage.liqo.io/available"], "true");
    assert_eq!(
        meta["annotations"]["virtual-annotation"],
        "annotation-value"
    );
    let taints = node["spec"]["taints"].as_array().unwrap();
    assert!(taints.contains(&taint), "{taints:?}");
    let own =
        json!({"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"});
    assert!(taints.contains(&own), "{taints:?}");
    let quota = json!({"cpu": "2", "memory": "3Gi"});
    assert_eq!(node["status"]["capacity"], quota);
    assert_eq!(node["status"]["allocatable"], quota);
    assert_eq!(node["status"]["images"], images);
    for (kind, status) in [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("NetworkUnavailable", "False"),
    ] {
        assert_eq!(
            node_condition(&node, kind).as_deref(),
            Some(status),
            "{kind}"
        );
    }
}

/// nodeProvider_test.go:434-467 ("hydrates the node when virtual node
/// labels and annotations are nil"): no storage, no annotation.
#[tokio::test]
async fn a_virtual_node_without_labels_or_annotations_gives_a_node_without_storage() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    virtual_node(&kube, "node-name", json!({}));
    let node = node_when_ready_is(&kube, "node-name", "True").await;
    assert_eq!(
        node["metadata"]["labels"]["storage.liqo.io/available"],
        "false"
    );
    assert!(node["metadata"]["annotations"]["virtual-annotation"].is_null());
    assert!(node["status"]["images"].is_null(), "{node:#}");
}

/// nodeProvider_test.go:469-535 ("Labels patch"), through the VirtualNode
/// as `reconciler.go:92-97` applies it: labels added, changed, and one
/// dropped from the VirtualNode is taken off the node; a label someone
/// else put on the node stays (UTILS:143-148 removes only what it applied).
#[tokio::test]
async fn labels_follow_the_virtual_node_added_changed_and_removed() {
    let (kube, _liqo) = consumer(json!({"enabled": false})).await;
    let labels_are = |want: Value| {
        let kube = &kube;
        async move {
            let what = format!("labels {want}");
            wait_for(kube, NODES, None, "node-name", &what, |n| {
                want.as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| n["metadata"]["labels"][k] == *v)
            })
            .await
        }
    };
    virtual_node(
        &kube,
        "node-name",
        json!({"labels": {"test1": "value1", "test2": "value2"}}),
    );
    labels_are(json!({"test1": "value1", "test2": "value2"})).await;
    kube.merge_patch(
        NODES,
        None,
        "node-name",
        json!({"metadata": {"labels": {"someone-else": "x"}}}),
        false,
    )
    .unwrap();
    virtual_node(
        &kube,
        "node-name",
        json!({"labels": {"test1": "value3", "test2": "value4"}}),
    );
    labels_are(json!({"test1": "value3", "test2": "value4"})).await;
    virtual_node(&kube, "node-name", json!({"labels": {"test1": "value3"}}));
    let node = labels_are(json!({"test1": "value3", "test2": null})).await;
    assert_eq!(node["metadata"]["labels"]["someone-else"], "x");
    assert_eq!(node["metadata"]["labels"]["liqo.io/type"], "virtual-node");
}
