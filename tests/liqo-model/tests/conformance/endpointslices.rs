//! The EndpointSlice data path of a namespace offloaded with strategy
//! `Local` (issue 45): cluster `origin` runs a pod of Service `db` on its
//! own node; the test API server's EndpointSlice controller lists it; the
//! virtual kubelet reflects the slice to peer `p2` as a
//! ShadowEndpointSlice (`liqo_model::reflection_endpointslices`,
//! `pkg/virtualKubelet/reflection/exposition/endpointslice.go`,
//! `forge/endpointslices.go`), the local pod's address as it is; `p2`'s
//! controller manager makes the EndpointSlice of it
//! (`liqo_model::shadowendpointslice_controller`,
//! `shadowendpointslice-controller/shadowendpointslice_controller.go`),
//! the address remapped into how `p2` sees the origin's pod CIDR — both
//! clusters are on `10.244.0.0/16`, so `p2`'s Configuration for the origin
//! remaps it (`mapping.go:33-65`) — and not ready while the clusters' network
//! Connection is not up (SESC:156-167). Changes and deletions follow.

use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, ClusterOptions, Peering};
use liqo_model::reflection_endpointslices::{self, Reflection};
use liqo_model::shadowendpointslice_controller::Controller;
use serde_json::{json, Value};

use crate::offloading::{OFFLOADINGS, PODS};
use crate::{
    get, namespace, wait_for, CONFIGURATIONS, FOREIGN_CLUSTERS, NAMESPACES, NODES, VIRTUAL_NODES,
    WAIT,
};

const POD_CIDR: &str = "10.244.0.0/16";
const SERVICES: (&str, &str) = ("", "services");
const SLICES: (&str, &str) = ("discovery.k8s.io", "endpointslices");
const SHADOWS: (&str, &str) = ("offloading.liqo.io", "shadowendpointslices");
const REMOTE_NS: &str = "app-origin";
const TENANT_ON_P2: &str = "liqo-tenant-origin";

/// The origin's slice of Service `db` once `check` holds for it.
async fn local_slice(kube: &KubeApiServer, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let found = kube
            .objects(SLICES)
            .into_iter()
            .find(|s| {
                s["metadata"]["namespace"] == "app"
                    && s["metadata"]["labels"]["kubernetes.io/service-name"] == "db"
            })
            .filter(|s| check(s));
        if let Some(slice) = found {
            return slice;
        }
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_local_pods_endpoints_reach_the_peer_remapped() {
    // The origin: its own node with a /24 of its pod CIDR, Liqo's offloading
    // and the NamespaceMap half of a peering with p2.
    let origin = KubeApiServer::start().await.unwrap();
    let p2 = KubeApiServer::start().await.unwrap();
    origin.apply(
        NODES,
        kube_test_server::node("node-o", true, false, "4", "8Gi"),
    );
    let options = ClusterOptions {
        pod_cidr: Some(POD_CIDR.into()),
    };
    let _cluster = Cluster::start_with(&origin, "origin", &["node-o"], options)
        .await
        .unwrap();
    let _peering = Peering::start_namespaces(&origin, "origin", &p2, "p2")
        .await
        .unwrap();
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": "liqo-p2", "namespace": "liqo-tenant-p2"},
               "spec": {"clusterID": "p2", "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
    );
    let _objects = liqo_model::reflection_objects::Reflection::start(
        &origin,
        "origin",
        &p2,
        "p2",
        liqo_model::reflection_forge::Options::default(),
    )
    .await
    .unwrap();
    let _slices = Reflection::start(
        &origin,
        "origin",
        &p2,
        "p2",
        reflection_endpointslices::Options::default(),
    )
    .await
    .unwrap();
    // p2: Liqo's controller manager with its networking module (the
    // ForeignCluster controller and the Configuration controller), the
    // Configuration `liqoctl peer` makes there for the origin
    // (`forge/configuration.go:73-110`), and the ShadowEndpointSlice
    // controller.
    let _p2_liqo = liqo_model::Consumer::start_as(&p2, "p2")
        .await
        .unwrap()
        .with_networking(&p2, liqo_model::networking::Options::default())
        .await
        .unwrap();
    let _controller = Controller::start(&p2).await.unwrap();
    namespace(
        &p2,
        TENANT_ON_P2,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": "origin"}),
    );
    p2.create(
        CONFIGURATIONS,
        json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
               "metadata": {"name": "origin", "namespace": TENANT_ON_P2,
                            "labels": {"liqo.io/remote-cluster-id": "origin"}},
               "spec": {"remote": {"cidr": {"pod": [POD_CIDR], "external": ["10.70.0.0/16"]}}}}),
    )
    .unwrap();
    let cfg = wait_for(
        &p2,
        CONFIGURATIONS,
        Some(TENANT_ON_P2),
        "origin",
        "remapped",
        liqo_model::networking::mapping::configured,
    )
    .await;
    // The clash: p2 sees the origin's pods at another network.
    let seen_as = cfg["status"]["remote"]["cidr"]["pod"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(seen_as, POD_CIDR);
    wait_for(
        &p2,
        FOREIGN_CLUSTERS,
        None,
        "origin",
        "networking enabled",
        |fc| fc["status"]["modules"]["networking"]["enabled"] == true,
    )
    .await;

    // `app` offloaded with strategy Local: its pods stay at the origin.
    namespace(&origin, "app", json!({}));
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
    origin.apply(
        SERVICES,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "db", "namespace": "app"},
               "spec": {"selector": {"app": "db"}, "ports": [{"name": "sql", "port": 5432}]}}),
    );
    let mut pod =
        kube_test_server::pod("db-0", "", "Pending", json!({"app": "db"}), "100m", "64Mi");
    pod["metadata"]["namespace"] = json!("app");
    pod["spec"].as_object_mut().unwrap().remove("nodeName");
    pod["status"] = json!({});
    origin.apply(PODS, pod);

    // At the origin: the pod on its own node, listed ready.
    let local = local_slice(&origin, "the pod listed", |s| {
        s["endpoints"][0]["conditions"]["ready"] == true
    })
    .await;
    let name = local["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(local["endpoints"][0]["addresses"], json!(["10.244.0.2"]));
    assert_eq!(local["endpoints"][0]["nodeName"], "node-o");

    // On p2: the ShadowEndpointSlice, the address as it is
    // (`endpointslice.go:381-390`: a local pod address is not translated).
    let shadow = wait_for(&p2, SHADOWS, Some(REMOTE_NS), &name, "the shadow", |s| {
        s["spec"]["template"]["endpoints"].is_array()
    })
    .await;
    assert_eq!(
        shadow["spec"]["template"]["endpoints"],
        json!([{"addresses": ["10.244.0.2"], "conditions": {"ready": true},
                "nodeName": "origin",
                "targetRef": {"kind": "RemotePod", "namespace": "app", "name": "db-0",
                              "uid": local["endpoints"][0]["targetRef"]["uid"]}}])
    );
    let labels = &shadow["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/service-name"], "db");
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice.reflection.liqo.io"
    );
    assert_eq!(labels["offloading.liqo.io/origin"], "origin");
    assert_eq!(shadow["spec"]["template"]["ports"], local["ports"]);

    // p2's EndpointSlice: the address remapped, host bits kept; not ready,
    // as the clusters' Connection is not established.
    let remapped = {
        let from = liqo_model::networking::remap::Cidr::parse(POD_CIDR).unwrap();
        let to = liqo_model::networking::remap::Cidr::parse(&seen_as).unwrap();
        liqo_model::networking::mapping::translate("10.244.0.2".parse().unwrap(), &from, &to)
            .unwrap()
            .to_string()
    };
    let on_p2 = wait_for(&p2, SLICES, Some(REMOTE_NS), &name, "the slice", |s| {
        s["endpoints"].is_array()
    })
    .await;
    assert_eq!(on_p2["endpoints"][0]["addresses"], json!([remapped]));
    assert_eq!(on_p2["endpoints"][0]["conditions"]["ready"], false);
    assert_eq!(on_p2["addressType"], "IPv4");
    assert_eq!(
        on_p2["metadata"]["labels"]["liqo.io/managed-by"],
        "shadowendpointslice"
    );
    assert_eq!(
        on_p2["metadata"]["ownerReferences"][0]["kind"],
        "ShadowEndpointSlice"
    );
    // p2's own EndpointSlice controller keeps the reflected Service's
    // slice of p2's pods beside it: none there, a placeholder.
    let p2_own: Vec<Value> = p2
        .objects(SLICES)
        .into_iter()
        .filter(|s| {
            s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
                == "endpointslice-controller.k8s.io"
        })
        .collect();
    assert!(
        p2_own.iter().all(|s| s["endpoints"] == json!([])),
        "{p2_own:#?}"
    );

    // The pod gone: the origin's slice is replaced by a placeholder
    // (`reconciler.go` `reconcileByAddressType`: the slice of ports no pod
    // has any more deleted, a placeholder made), and so is p2's.
    origin.delete_object(PODS, Some("app"), "db-0").unwrap();
    let reflected = |kube: &KubeApiServer| -> Vec<Value> {
        kube.objects(SLICES)
            .into_iter()
            .filter(|s| {
                s["metadata"]["namespace"] == REMOTE_NS
                    && s["metadata"]["labels"]["liqo.io/managed-by"] == "shadowendpointslice"
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let now = reflected(&p2);
        let placeholder_only = now.len() == 1
            && now[0]["metadata"]["name"] != name.as_str()
            && now[0]["endpoints"].as_array().is_none_or(Vec::is_empty);
        if placeholder_only {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no placeholder alone on p2: {now:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The Service gone: its slices at the origin (owner references), then
    // their shadows and p2's slices.
    origin.delete_object(SERVICES, Some("app"), "db").unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while !reflected(&p2).is_empty()
        || p2
            .objects(SHADOWS)
            .iter()
            .any(|s| s["metadata"]["namespace"] == REMOTE_NS)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the shadows and their slices still on p2"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(get(&p2, SLICES, Some(REMOTE_NS), &name).is_none());
}
