//! Offloading end to end on the model, without the broker's orchestrator:
//! a NamespaceOffloading selecting one of two peers labels its namespace
//! and maps it there only; a pod created afterwards gets Liqo's toleration
//! and selector, is bound to that peer's virtual node, becomes a ShadowPod
//! there with the creator label, runs on the peer's node, and its status
//! comes back. A pod created before the NamespaceOffloading is untouched
//! and stays Pending (the create-time webhook, as in Liqo).

use kube::api::{Api, DynamicObject, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, Peering};
use serde_json::{json, Value};

use crate::{get, namespace, wait_for, NAMESPACES, NODES};

pub const PODS: (&str, &str) = ("", "pods");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
const VIRTUAL_NODES: (&str, &str) = ("offloading.liqo.io", "virtualnodes");

/// A peer `id` with node `node-<id>`, and the origin's VirtualNode for it.
async fn peer(origin: &KubeApiServer, id: &str) -> (KubeApiServer, Cluster, Peering) {
    let kube = KubeApiServer::start().await.unwrap();
    let node = format!("node-{id}");
    kube.apply(
        NODES,
        kube_test_server::node(&node, true, false, "4", "8Gi"),
    );
    let cluster = Cluster::start(&kube, id, &[&node]).await.unwrap();
    let tenant = format!("liqo-tenant-{id}");
    namespace(
        origin,
        &tenant,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": id}),
    );
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": format!("liqo-{id}"), "namespace": tenant},
               "spec": {"clusterID": id, "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
    );
    let peering = Peering::start(origin, "origin", &kube, id, &format!("liqo-{id}"))
        .await
        .unwrap();
    (kube, cluster, peering)
}

/// A client of `kube` that may create pods and NamespaceOffloadings.
async fn user(kube: &KubeApiServer) -> kube::Client {
    use liqo_model::identity::{self, Rule, ALL};
    const RULES: &[Rule] = &[
        Rule::new(&[""], &["pods"], ALL),
        Rule::new(&["offloading.liqo.io"], &["namespaceoffloadings"], ALL),
    ];
    identity::grant(kube, "alice", "alice", RULES);
    identity::client_as(kube, "alice").await.unwrap()
}

fn pod(name: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "app"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}))
    .unwrap()
}

fn offloading(strategy: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading", "metadata": {"name": "offloading", "namespace": "app"},
        "spec": {"podOffloadingStrategy": strategy, "clusterSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "liqo.io/remote-cluster-id", "operator": "In", "values": ["p2"]}]}]}}}))
    .unwrap()
}

#[tokio::test]
async fn a_pod_created_after_the_offloading_runs_on_the_selected_peer() {
    let origin = KubeApiServer::start().await.unwrap();
    let _origin_liqo = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let _nodes = liqo_model::Consumer::start(&origin).await.unwrap();
    let (p1, _c1, _r1) = peer(&origin, "p1").await;
    let (p2, _c2, _r2) = peer(&origin, "p2").await;
    namespace(&origin, "app", json!({}));
    let alice = user(&origin).await;
    let pods: Api<DynamicObject> =
        Api::namespaced_with(alice.clone(), "app", &liqo_model::offloading_consts::pods());
    pods.create(&PostParams::default(), &pod("early"))
        .await
        .unwrap();
    let offloadings: Api<DynamicObject> = Api::namespaced_with(
        alice,
        "app",
        &liqo_model::offloading_consts::namespace_offloadings(),
    );
    offloadings
        .create(&PostParams::default(), &offloading("Remote"))
        .await
        .unwrap();
    wait_for(
        &origin,
        NAMESPACES,
        None,
        "app",
        "labelled for the webhook",
        |ns| ns["metadata"]["labels"]["liqo.io/scheduling-enabled"] == "true",
    )
    .await;
    let remote_ns = wait_for(&p2, NAMESPACES, None, "app-origin", "made on p2", |_| true).await;
    let meta = &remote_ns["metadata"];
    assert_eq!(meta["labels"]["liqo.io/remote-cluster-id"], "origin");
    let annotations = &meta["annotations"];
    assert_eq!(annotations["liqo.io/original-name"], "app");
    let map = "liqo-tenant-origin/p2";
    assert_eq!(annotations["liqo.io/managed-by-namespace-map"], map);

    pods.create(&PostParams::default(), &pod("late"))
        .await
        .unwrap();
    let late = wait_for(&origin, PODS, Some("app"), "late", "Running", |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(late["spec"]["nodeName"], "liqo-p2");
    assert_eq!(late["status"]["hostIP"], "1.1.1.1");
    let remote = get(&p2, PODS, Some("app-origin"), "late").unwrap();
    assert_eq!(remote["spec"]["nodeName"], "node-p2");
    let shadow = get(
        &p2,
        ("offloading.liqo.io", "shadowpods"),
        Some("app-origin"),
        "late",
    )
    .unwrap();
    for label in ["liqo.io/creator-user", "offloading.liqo.io/origin"] {
        assert_eq!(shadow["metadata"]["labels"][label], "origin", "{label}");
    }
    assert!(get(&p1, NAMESPACES, None, "app-origin").is_none());

    // Created before: no toleration of Liqo's (only the API server's
    // not-ready and unreachable ones), no selector, and no node fits it.
    let early = get(&origin, PODS, Some("app"), "early").unwrap();
    let keys: Vec<&str> = early["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["key"].as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ],
        "{early}"
    );
    assert!(early["spec"]["nodeName"].is_null(), "{early}");
    let unschedulable = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["reason"] == "Unschedulable")
    };
    wait_for(
        &origin,
        PODS,
        Some("app"),
        "early",
        "Unschedulable",
        unschedulable,
    )
    .await;
}

#[tokio::test]
async fn the_mapping_strategy_cannot_change() {
    let origin = KubeApiServer::start().await.unwrap();
    let _liqo = Cluster::start(&origin, "origin", &[]).await.unwrap();
    namespace(&origin, "app", json!({}));
    let alice = user(&origin).await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        alice,
        "app",
        &liqo_model::offloading_consts::namespace_offloadings(),
    );
    let mut other = offloading("Remote");
    other.metadata.name = Some("other".into());
    let refused = api
        .create(&PostParams::default(), &other)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("NamespaceOffloading name must match offloading"),
        "{refused}"
    );
    let mut created = api
        .create(&PostParams::default(), &offloading("Remote"))
        .await
        .unwrap();
    created.data["spec"]["namespaceMappingStrategy"] = json!("EnforceSameName");
    let refused = api
        .replace("offloading", &PostParams::default(), &created)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("The NamespaceMappingStrategy value cannot be modified after creation"),
        "{refused}"
    );
    let stored = get(&origin, OFFLOADINGS, Some("app"), "offloading").unwrap();
    assert_eq!(stored["spec"]["namespaceMappingStrategy"], "DefaultName");
}

const NAMESPACE_MAPS: (&str, &str) = ("offloading.liqo.io", "namespacemaps");

/// The origin's map for peer `p2` once `ready` holds of its `currentMapping`.
async fn map_status(origin: &KubeApiServer, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait_for(
        origin,
        NAMESPACE_MAPS,
        Some("liqo-tenant-p2"),
        "p2",
        what,
        |nm| ready(&nm["status"]["currentMapping"]),
    )
    .await
}

/// `namespacemap-controller/enforcement.go:134-193`: a mapping taken out
/// of `desiredMapping` has its remote namespace deleted, and its
/// `currentMapping` entry dropped once the namespace is gone; a namespace
/// another map manages is left alone (:145-149).
#[tokio::test]
async fn a_mapping_removed_from_the_namespace_map_deletes_its_remote_namespace() {
    let origin = KubeApiServer::start().await.unwrap();
    let p2 = KubeApiServer::start().await.unwrap();
    let _peering = Peering::start(&origin, "origin", &p2, "p2", "liqo-p2")
        .await
        .unwrap();
    p2.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "taken",
            "annotations": {"liqo.io/managed-by-namespace-map": "liqo-tenant-other/p2"}}}),
    );
    let desired = |mapping: Value| json!({"spec": {"desiredMapping": mapping}});
    origin
        .merge_patch(
            NAMESPACE_MAPS,
            Some("liqo-tenant-p2"),
            "p2",
            desired(json!({"app": "app-origin", "other": "taken"})),
            false,
        )
        .unwrap();
    map_status(&origin, "app Accepted, other in back-off", |m| {
        m["app"]["phase"] == "Accepted" && m["other"]["phase"] == "CreationLoopBackOff"
    })
    .await;
    assert!(get(&p2, NAMESPACES, None, "app-origin").is_some());

    origin
        .merge_patch(
            NAMESPACE_MAPS,
            Some("liqo-tenant-p2"),
            "p2",
            desired(json!({"app": null, "other": null})),
            false,
        )
        .unwrap();
    map_status(&origin, "no entry left", |m| {
        m.as_object().is_none_or(|m| m.is_empty())
    })
    .await;
    assert!(get(&p2, NAMESPACES, None, "app-origin").is_none());
    assert!(get(&p2, NAMESPACES, None, "taken").is_some());
}

/// Two virtual nodes of one peer (two ResourceSlices, as two Purchases of
/// one provider make): each virtual kubelet reflects its own node's pods
/// only — Liqo's `RemoteShadowNamespacedKeyer`
/// (`reflection/workload/shadowpod.go`) passes on a remote change only
/// when its `offloading.liqo.io/nodename` is the kubelet's node — so the
/// other one never takes the ShadowPod for an orphan and deletes it.
#[tokio::test]
async fn a_second_virtual_node_of_the_peer_leaves_the_first_ones_shadowpods_alone() {
    use liqo_model::identity::{client_as, client_in_groups};
    use liqo_model::reflection;
    let origin = KubeApiServer::start().await.unwrap();
    let _origin_liqo = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let _nodes = liqo_model::Consumer::start(&origin).await.unwrap();
    let (p2, _c2, _r2) = peer(&origin, "p2").await;
    // The second node's virtual kubelet, as `Peering::start` runs the
    // first's (same identities, another node).
    let second = reflection::Reflector {
        local: client_as(&origin, liqo_model::VIRTUAL_KUBELET)
            .await
            .unwrap(),
        remote: client_in_groups(&p2, "origin", &["liqo.io"]).await.unwrap(),
        remote_user: "origin".into(),
        node_name: "liqo-p2-second".into(),
        local_cluster_id: "origin".into(),
        remote_cluster_id: "p2".into(),
        reflect_ips: true,
    };
    let second = tokio::spawn(reflection::run(second));
    namespace(&origin, "app", json!({}));
    let alice = user(&origin).await;
    let offloadings: Api<DynamicObject> = Api::namespaced_with(
        alice.clone(),
        "app",
        &liqo_model::offloading_consts::namespace_offloadings(),
    );
    offloadings
        .create(&PostParams::default(), &offloading("Remote"))
        .await
        .unwrap();
    wait_for(&p2, NAMESPACES, None, "app-origin", "made on p2", |_| true).await;
    let pods: Api<DynamicObject> =
        Api::namespaced_with(alice, "app", &liqo_model::offloading_consts::pods());
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let web = wait_for(&origin, PODS, Some("app"), "web", "Running", |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(web["spec"]["nodeName"], "liqo-p2");
    // Both kubelets have seen the ShadowPod's creation and the remote
    // pod's changes by now (the status came back through them).
    let deleted: Vec<String> = p2
        .audit()
        .into_iter()
        .filter_map(|r| r.resource)
        .filter(|r| r.resource == "shadowpods" && r.verb == "delete")
        .map(|r| format!("{r:?}"))
        .collect();
    assert!(deleted.is_empty(), "ShadowPods deleted: {deleted:?}");
    second.abort();
}
