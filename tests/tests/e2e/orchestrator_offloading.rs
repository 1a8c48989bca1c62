//! The orchestrator on a broker running the model of Liqo v1.2.0's
//! offloading (`liqo_model::offloading`: the NamespaceOffloading controller,
//! the create-time pod webhook, a scheduler, the virtual kubelets'
//! reflection, the ShadowPod controller, the providers' kubelets), peered
//! with two providers, each its own Kubernetes API test server.
//!
//! The pods of a consumer's namespace exist before the orchestrator places
//! it — one running on the broker's own node, one too big for it and
//! Pending, both made by the broker's ShadowPod controller from the
//! consumer's ShadowPods, and one bare pod. Liqo's pod webhook would never
//! touch them; the orchestrator recreates the two controlled ones once Liqo
//! labels the namespace, and they run on the chosen provider; the bare pod
//! stays, with a `MustBeRecreated` warning. When the provider withdraws,
//! the namespace moves, and so do the pods — recreated, not migrated: the
//! webhook pinned them to the old provider when they were made.

use std::time::{Duration, Instant};

use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::orchestrator_support::{Broker, PODS};

const SHADOWPODS: (&str, &str) = ("offloading.liqo.io", "shadowpods");
const NODES: (&str, &str) = ("", "nodes");
const VIRTUAL_NODES: (&str, &str) = ("offloading.liqo.io", "virtualnodes");
const BROKER_ID: &str = "broker";
const CONSUMER_ID: &str = "consumer-9";
const NAMESPACE: &str = "app-o";
/// The namespace a provider holds for it (Liqo's `DefaultName` mapping).
const REMOTE_NAMESPACE: &str = "app-o-broker";

/// A provider's cluster: its API server, one ordinary node, Liqo's
/// offloading and the broker's peering with it.
struct Provider {
    kube: KubeApiServer,
    _liqo: liqo_model::offloading::Cluster,
    _peering: liqo_model::offloading::Peering,
}

/// Provider `cluster-<n>`, with node `node-<n>`, peered with the broker
/// through the broker's virtual node `liqo-cluster-<n>`.
fn provider(broker: &Broker, n: u32) -> Provider {
    let id = format!("cluster-{n}");
    let node = format!("node-{n}");
    broker.runtime().block_on(async {
        let kube = KubeApiServer::start().await.unwrap();
        kube.apply(NODES, kube_test_server::node(&node, true, false, "8", "16Gi"));
        let liqo = liqo_model::offloading::Cluster::start(&kube, &id, &[&node])
            .await
            .unwrap();
        // The broker's VirtualNode for it, as Liqo's virtual-node creator
        // makes it from an accepted slice (the network check off: no
        // network fabric is modelled).
        let tenant = format!("liqo-tenant-{id}");
        broker.kube.apply(
            ("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant,
                "labels": {"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": id}}}),
        );
        broker.kube.apply(
            VIRTUAL_NODES,
            json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
                   "metadata": {"name": format!("liqo-{id}"), "namespace": tenant},
                   "spec": {"clusterID": id, "createNode": true, "disableNetworkCheck": true,
                            "resourceQuota": {"hard": {"cpu": "8", "memory": "16Gi", "pods": "20"}}}}),
        );
        let peering = liqo_model::offloading::Peering::start(
            &broker.kube,
            BROKER_ID,
            &kube,
            &id,
            &format!("liqo-{id}"),
        )
        .await
        .unwrap();
        Provider {
            kube,
            _liqo: liqo,
            _peering: peering,
        }
    })
}

/// The consumer's virtual kubelet's ShadowPod `name` on the broker,
/// requesting `cpu`.
fn shadowpod(broker: &Broker, name: &str, cpu: &str) {
    broker.kube.apply(
        SHADOWPODS,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
               "metadata": {"name": name, "namespace": NAMESPACE,
                   "labels": {"app": name, "offloading.liqo.io/origin": CONSUMER_ID,
                              "offloading.liqo.io/destination": BROKER_ID}},
               "spec": {"pod": {"containers": [{"name": "app", "image": "nginx",
                   "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}}}),
    );
}

/// Wait until pod `name` in `namespace` on `kube` satisfies `ready`.
fn wait_pod(
    kube: &KubeApiServer,
    namespace: &str,
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        let seen = kube.get(PODS, Some(namespace), name);
        if let Some(pod) = seen.as_ref().filter(|p| ready(p)) {
            return pod.clone();
        }
        assert!(
            Instant::now() < deadline,
            "pod {namespace}/{name}: not {what} within {:?}; last seen {seen:#?}",
            e2e::EVENTUALLY
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until the broker's pod `name` runs on provider `n`'s virtual node
/// and its pod there on node `node-<n>`; both pods.
fn running_on(broker: &Broker, provider: &Provider, n: u32, name: &str) -> (Value, Value) {
    let node = format!("liqo-cluster-{n}");
    let pod = wait_pod(
        &broker.kube,
        NAMESPACE,
        name,
        &format!("running on {node}"),
        |p| p["spec"]["nodeName"] == node.as_str() && phase(p) == "Running",
    );
    let what = format!("running on cluster-{n}");
    let remote = wait_pod(&provider.kube, REMOTE_NAMESPACE, name, &what, |p| {
        phase(p) == "Running"
    });
    assert_eq!(remote["spec"]["nodeName"], format!("node-{n}"));
    (pod, remote)
}

fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or_default()
}

#[test]
fn pods_created_before_the_placement_run_on_the_chosen_provider_and_move_with_it() {
    let broker = Broker::start_plain().unwrap();
    // cluster-2 is the cheaper of two that fit the pods' 3.2 CPU.
    broker.offer(1, "o1", json!({}), &[("m", "3", "4", "8Gi")]);
    broker.offer(2, "o2", json!({}), &[("m", "1", "4", "8Gi")]);
    let (_liqo, _consumer, _node) = broker.runtime().block_on(async {
        // The broker's own node runs what fits on it, until placed.
        broker.kube.apply(
            NODES,
            kube_test_server::node("broker-node", true, false, "2", "4Gi"),
        );
        let liqo =
            liqo_model::offloading::Cluster::start(&broker.kube, BROKER_ID, &["broker-node"])
                .await
                .unwrap();
        // The virtual kubelet's nodes of the broker's VirtualNodes.
        let consumer = liqo_model::Consumer::start(&broker.kube).await.unwrap();
        (liqo, consumer, ())
    });
    let p1 = provider(&broker, 1);
    let p2 = provider(&broker, 2);

    // Before any placement: the consumer's namespace on the broker and its pods.
    broker.offloaded_namespace(NAMESPACE, CONSUMER_ID);
    shadowpod(&broker, "web", "200m");
    shadowpod(&broker, "big", "3");
    broker.pod(NAMESPACE, "bare", "0", "0");
    let web = wait_pod(
        &broker.kube,
        NAMESPACE,
        "web",
        "running on the broker",
        |p| phase(p) == "Running",
    );
    assert_eq!(web["spec"]["nodeName"], "broker-node");
    let big = wait_pod(&broker.kube, NAMESPACE, "big", "unschedulable", |p| {
        p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["reason"] == "Unschedulable")
    });
    assert!(big["spec"]["nodeName"].is_null(), "{big}");

    let policy = broker.policy("");
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    broker.wait_selected(NAMESPACE, &["cluster-2"]).unwrap();

    for name in ["web", "big"] {
        let (pod, remote) = running_on(&broker, &p2, 2, name);
        // Through Liqo's webhook this time: its toleration and selector.
        let tolerations = pod["spec"]["tolerations"].to_string();
        assert!(
            tolerations.contains("virtual-node.liqo.io/not-allowed"),
            "{pod}"
        );
        assert_eq!(
            remote["metadata"]["labels"]["liqo.io/creator-user"],
            BROKER_ID
        );
        assert!(p1.kube.get(PODS, Some(REMOTE_NAMESPACE), name).is_none());
    }
    let recreated = broker.wait_event(NAMESPACE, "RecreatedToOffload").unwrap();
    assert_eq!(recreated["regarding"]["kind"], "Pod", "{recreated}");
    // The bare pod: nobody would recreate it, so it stays, with a warning.
    let warning = broker.wait_event(NAMESPACE, "MustBeRecreated").unwrap();
    assert_eq!(warning["regarding"]["name"], "bare", "{warning}");
    assert_eq!(warning["type"], "Warning");
    let bare = broker.kube.get(PODS, Some(NAMESPACE), "bare").unwrap();
    assert_eq!(bare["spec"]["nodeName"], "broker-node");

    // cluster-2 withdraws: the namespace moves to cluster-1, and the pods
    // pinned to cluster-2 by the webhook are made again there.
    broker.withdraw(2, "o2");
    broker.wait_selected(NAMESPACE, &["cluster-1"]).unwrap();
    for name in ["web", "big"] {
        running_on(&broker, &p1, 1, name);
    }
}
