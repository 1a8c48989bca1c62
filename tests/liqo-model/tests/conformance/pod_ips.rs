//! Pods' addresses (issue 43): the nodes of a cluster with a pod CIDR get
//! a `/24` of it each, in turn, from kube-controller-manager's node IPAM
//! controller (`liqo_model::node_ipam`); a kubelet gives each pod the next
//! address of its node's podCIDR as the CNI `host-local` IPAM plugin does
//! (`liqo_model::kubelet`); and a pod offloaded through Liqo shows on the
//! origin its remote pod's address as the origin sees the provider's pod
//! CIDR — remapped when the two clusters' pod CIDRs clash
//! (`pkg/virtualKubelet/reflection/workload/podns.go:410-423, 734-753`,
//! `pkg/utils/ipam/mapping/ips.go:134-160`), copied as it is with the
//! networking module off.

use std::time::Instant;

use kube::api::{Api, DynamicObject, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, ClusterOptions, Peering};
use serde_json::{json, Value};

use crate::offloading::{OFFLOADINGS, PODS};
use crate::{
    get, namespace, wait_for, CONFIGURATIONS, FOREIGN_CLUSTERS, NAMESPACES, NODES, VIRTUAL_NODES,
    WAIT,
};

/// kind's pod CIDR, which both clusters below use.
const POD_CIDR: &str = "10.244.0.0/16";

fn with_pod_cidr() -> ClusterOptions {
    ClusterOptions {
        pod_cidr: Some(POD_CIDR.into()),
    }
}

/// A ready node, with an `InternalIP` when `address` is given.
fn node(name: &str, address: Option<&str>) -> Value {
    let mut node = kube_test_server::node(name, true, false, "4", "8Gi");
    if let Some(address) = address {
        node["status"]["addresses"] = json!([{"type": "InternalIP", "address": address},
                                             {"type": "Hostname", "address": name}]);
    }
    node
}

async fn pod_cidr_of(kube: &KubeApiServer, name: &str) -> String {
    let node = wait_for(kube, NODES, None, name, "a podCIDR", |n| {
        n["spec"]["podCIDR"].is_string()
    })
    .await;
    assert_eq!(node["spec"]["podCIDRs"], json!([node["spec"]["podCIDR"]]));
    node["spec"]["podCIDR"].as_str().unwrap().to_string()
}

/// A pod bound to `node` in `default`, as the scheduler leaves it.
fn bound_pod(kube: &KubeApiServer, name: &str, node: &str, host_network: bool) {
    let mut pod = kube_test_server::pod(name, node, "Pending", json!({}), "100m", "64Mi");
    pod["status"] = json!({});
    if host_network {
        pod["spec"]["hostNetwork"] = json!(true);
    }
    kube.apply(PODS, pod);
}

async fn running(kube: &KubeApiServer, name: &str) -> Value {
    wait_for(kube, PODS, Some("default"), name, "Running", |p| {
        p["status"]["phase"] == "Running"
    })
    .await
}

/// `pkg/controller/nodeipam/ipam/range_allocator.go` with
/// `cidrset/cidr_set.go` `AllocateNext`: a /24 of the cluster CIDR for
/// each node, in turn; the kubelet with host-local on it
/// (`plugins/ipam/host-local/backend/allocator/`): the network address and
/// the gateway (`.1`) skipped, addresses given round robin, none given
/// twice among running pods, a given one kept; the host IP the node's
/// `InternalIP` (`GetNodeHostIPs`), none without one; a host-network pod
/// at the node's address.
#[tokio::test]
async fn pods_get_distinct_addresses_from_their_nodes_pod_cidr() {
    let kube = KubeApiServer::start().await.unwrap();
    // Pod Security lets a host-network pod in only at `privileged`.
    namespace(
        &kube,
        "default",
        json!({"pod-security.kubernetes.io/enforce": "privileged"}),
    );
    kube.apply(NODES, node("node-a", Some("172.18.0.2")));
    let _cluster = Cluster::start_with(&kube, "c1", &["node-a", "node-b"], with_pod_cidr())
        .await
        .unwrap();
    assert_eq!(pod_cidr_of(&kube, "node-a").await, "10.244.0.0/24");
    kube.apply(NODES, node("node-b", None));
    assert_eq!(pod_cidr_of(&kube, "node-b").await, "10.244.1.0/24");

    bound_pod(&kube, "p1", "node-a", false);
    let p1 = running(&kube, "p1").await;
    bound_pod(&kube, "p2", "node-a", false);
    let p2 = running(&kube, "p2").await;
    bound_pod(&kube, "p3", "node-b", false);
    let p3 = running(&kube, "p3").await;
    bound_pod(&kube, "host", "node-a", true);
    let host = running(&kube, "host").await;

    let ip = |p: &Value| p["status"]["podIP"].as_str().unwrap().to_string();
    assert_eq!(ip(&p1), "10.244.0.2", "{p1:#}");
    assert_eq!(ip(&p2), "10.244.0.3", "{p2:#}");
    assert_ne!(ip(&p1), ip(&p2));
    assert_eq!(p1["status"]["podIPs"], json!([{"ip": "10.244.0.2"}]));
    assert_eq!(p1["status"]["hostIP"], "172.18.0.2");
    assert_eq!(p1["status"]["hostIPs"], json!([{"ip": "172.18.0.2"}]));
    assert_eq!(ip(&p3), "10.244.1.2", "{p3:#}");
    assert!(p3["status"]["hostIP"].is_null(), "{p3:#}");
    assert_eq!(ip(&host), "172.18.0.2", "{host:#}");

    // p2 gone, a new pod gets the next address, not p2's (host-local's
    // round robin), and p1 keeps its own.
    kube.delete(PODS, "default/p2");
    bound_pod(&kube, "p4", "node-a", false);
    let p4 = running(&kube, "p4").await;
    assert_eq!(ip(&p4), "10.244.0.4", "{p4:#}");
    let p1 = get(&kube, PODS, Some("default"), "p1").unwrap();
    assert_eq!(ip(&p1), "10.244.0.2");
}

/// Without a pod CIDR the nodes get none and the pods no address, as
/// before.
#[tokio::test]
async fn without_a_pod_cidr_pods_run_without_an_address() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.apply(NODES, node("node-a", None));
    let _cluster = Cluster::start(&kube, "c1", &["node-a"]).await.unwrap();
    bound_pod(&kube, "p1", "node-a", false);
    let p1 = running(&kube, "p1").await;
    assert!(p1["status"]["podIP"].is_null(), "{p1:#}");
    let node = get(&kube, NODES, None, "node-a").unwrap();
    assert!(node["spec"]["podCIDR"].is_null(), "{node:#}");
}

const TENANT: &str = "liqo-tenant-p2";
const VIRTUAL_NODE: &str = "liqo-p2";

/// Cluster `origin` offloading namespace `app` to `p2` through the virtual
/// node `liqo-p2`, both clusters on the pod CIDR `10.244.0.0/16`, `p2`'s
/// node `node-p2` getting `10.244.0.0/24`; with `networking`, the origin
/// runs Liqo's networking module and holds the Configuration `liqoctl
/// peer` makes for `p2` (`forge/configuration.go:73-110`), so its
/// ForeignCluster has networking enabled. The pod `web` is created and
/// runs there; its remote pod's address and the origin's pod are returned.
async fn offloaded_pod(networking: bool) -> (String, Value) {
    let origin = KubeApiServer::start().await.unwrap();
    let _origin_liqo = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let consumer = liqo_model::Consumer::start_as(&origin, "origin")
        .await
        .unwrap();
    let _consumer = if networking {
        consumer
            .with_networking(&origin, liqo_model::networking::Options::default())
            .await
            .unwrap()
    } else {
        consumer
    };
    let p2 = KubeApiServer::start().await.unwrap();
    p2.apply(NODES, node("node-p2", Some("172.18.0.3")));
    let _p2_liqo = Cluster::start_with(&p2, "p2", &["node-p2"], with_pod_cidr())
        .await
        .unwrap();
    assert_eq!(pod_cidr_of(&p2, "node-p2").await, "10.244.0.0/24");
    namespace(
        &origin,
        TENANT,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": "p2"}),
    );
    if networking {
        origin
            .create(
                CONFIGURATIONS,
                json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
                       "metadata": {"name": "p2", "namespace": TENANT,
                                    "labels": {"liqo.io/remote-cluster-id": "p2"}},
                       "spec": {"remote": {"cidr": {"pod": [POD_CIDR],
                                                    "external": ["10.70.0.0/16"]}}}}),
            )
            .unwrap();
        let cfg = wait_for(
            &origin,
            CONFIGURATIONS,
            Some(TENANT),
            "p2",
            "remapped",
            liqo_model::networking::mapping::configured,
        )
        .await;
        // The clash: the origin sees p2's pods at another network.
        assert_eq!(
            cfg["status"]["remote"]["cidr"]["pod"],
            json!(["10.0.0.0/16"])
        );
        wait_for(
            &origin,
            FOREIGN_CLUSTERS,
            None,
            "p2",
            "networking enabled",
            |fc| fc["status"]["modules"]["networking"]["enabled"] == true,
        )
        .await;
    }
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": VIRTUAL_NODE, "namespace": TENANT},
               "spec": {"clusterID": "p2", "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
    );
    let _peering = Peering::start(&origin, "origin", &p2, "p2", VIRTUAL_NODE)
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
    // Through the API, so the pod webhook mutates it (at creation only,
    // once its cache has the namespace's label: made again until it has).
    use liqo_model::identity::{self, Rule, ALL};
    const RULES: &[Rule] = &[Rule::new(&[""], &["pods"], ALL)];
    identity::grant(&origin, "alice", "alice", RULES);
    let alice = identity::client_as(&origin, "alice").await.unwrap();
    let pods: Api<DynamicObject> =
        Api::namespaced_with(alice, "app", &liqo_model::offloading_consts::pods());
    let pod: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "app"},
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
        assert!(Instant::now() < deadline, "web never mutated");
        pods.delete("web", &Default::default()).await.unwrap();
    }
    let remote = wait_for(&p2, PODS, Some("app-origin"), "web", "an address", |p| {
        p["status"]["podIP"].is_string()
    })
    .await;
    assert_eq!(remote["spec"]["nodeName"], "node-p2");
    assert_eq!(remote["status"]["hostIP"], "172.18.0.3");
    let remote_ip = remote["status"]["podIP"].as_str().unwrap().to_string();
    let local = wait_for(
        &origin,
        PODS,
        Some("app"),
        "web",
        "Running with an address",
        |p| p["status"]["phase"] == "Running" && p["status"]["podIP"].is_string(),
    )
    .await;
    (remote_ip, local)
}

/// Both clusters on `10.244.0.0/16`: the origin's Configuration for p2
/// remaps p2's pod CIDR to `10.0.0.0/16`, and the offloaded pod shows the
/// remote pod's address translated into it, host bits kept
/// (`MapAddressWithConfiguration`, `RemapMask`), the host IP the virtual
/// node's (`forge/pods.go:101-124`).
#[tokio::test]
async fn a_reflected_pod_shows_the_remote_address_in_the_remapped_pod_cidr() {
    let (remote_ip, local) = offloaded_pod(true).await;
    assert_eq!(remote_ip, "10.244.0.2");
    assert_eq!(local["status"]["podIP"], "10.0.0.2", "{local:#}");
    assert_eq!(local["status"]["podIPs"], json!([{"ip": "10.0.0.2"}]));
    assert_eq!(local["status"]["hostIP"], "1.1.1.1");
    // The model's translation is the public one the e2e tests use.
    let (from, to) = (
        liqo_model::networking::remap::Cidr::parse(POD_CIDR).unwrap(),
        liqo_model::networking::remap::Cidr::parse("10.0.0.0/16").unwrap(),
    );
    let translated =
        liqo_model::networking::mapping::translate(remote_ip.parse().unwrap(), &from, &to);
    assert_eq!(local["status"]["podIP"], translated.unwrap().to_string());
}

/// With the networking module off (no Configuration, no ForeignCluster
/// networking) the virtual kubelet has no Configuration and translates
/// nothing (`podns.go:413-416`): the remote pod's address is copied.
#[tokio::test]
async fn with_networking_off_a_reflected_pod_shows_the_remote_address_as_it_is() {
    let (remote_ip, local) = offloaded_pod(false).await;
    assert_eq!(remote_ip, "10.244.0.2");
    assert_eq!(local["status"]["podIP"], "10.244.0.2", "{local:#}");
    assert_eq!(local["status"]["podIPs"], json!([{"ip": "10.244.0.2"}]));
}
