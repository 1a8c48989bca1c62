//! Liqo's accounting rules, driven by watch events without an API server.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::{Accounting, Changed};
use crate::test_support::pairs;
use controller_core::liqo::POD_ORIGIN_LABELS;

fn node(name: &str, ready: bool, virtual_node: bool, cpu: &str, memory: &str) -> Node {
    let mut labels = serde_json::Map::new();
    if virtual_node {
        labels.insert("liqo.io/type".into(), json!("virtual-node"));
    }
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "status": {
            "allocatable": { "cpu": cpu, "memory": memory, "pods": "110" },
            "conditions": [
                { "type": "MemoryPressure", "status": "False" },
                { "type": "Ready", "status": if ready { "True" } else { "False" } }
            ]
        }
    }))
    .unwrap()
}

fn pod(name: &str, phase: &str, labels: serde_json::Value, cpu: &str, memory: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default", "labels": labels },
        "spec": {
            "nodeName": "n1",
            "containers": [
                { "name": "a", "resources": { "requests": { "cpu": cpu, "memory": memory } } }
            ]
        },
        "status": { "phase": phase }
    }))
    .unwrap()
}

fn accounting() -> Accounting {
    Accounting::new(POD_ORIGIN_LABELS.iter().map(|s| s.to_string()).collect())
}

fn synced(nodes: Vec<Node>, pods: Vec<Pod>) -> Accounting {
    let mut a = accounting();
    a.on_node_event(Event::Init);
    for n in nodes {
        a.on_node_event(Event::InitApply(n));
    }
    a.on_node_event(Event::InitDone);
    a.on_pod_event(Event::Init);
    for p in pods {
        a.on_pod_event(Event::InitApply(p));
    }
    assert_eq!(
        a.on_pod_event(Event::InitDone),
        Changed::Yes,
        "first sync notifies"
    );
    a
}

fn answer(a: &Accounting, originator: &str) -> Vec<(String, String)> {
    a.answer(originator)
        .unwrap()
        .to_strings()
        .into_iter()
        .collect()
}

#[test]
fn nothing_is_answered_before_both_kinds_are_listed() {
    let mut a = accounting();
    assert!(a.answer("x").is_none());
    a.on_node_event(Event::Init);
    a.on_node_event(Event::InitApply(node("n1", true, false, "4", "8Gi")));
    assert_eq!(a.on_node_event(Event::InitDone), Changed::No);
    assert!(a.answer("x").is_none());
}

#[test]
fn ready_physical_nodes_minus_running_pods() {
    let a = synced(
        vec![
            node("n1", true, false, "4", "8Gi"),
            node("n2", true, false, "2", "4Gi"),
            node("down", false, false, "16", "64Gi"),
            node("liqo-peer", true, true, "100", "1Ti"),
        ],
        vec![
            pod("running", "Running", json!({}), "500m", "1Gi"),
            pod("pending", "Pending", json!({}), "1", "1Gi"),
            pod("done", "Succeeded", json!({}), "1", "1Gi"),
            pod(
                "shadow",
                "Running",
                json!({"liqo.io/shadowPod": "true"}),
                "3",
                "3Gi",
            ),
        ],
    );
    assert_eq!(
        answer(&a, "anyone"),
        pairs(&[("cpu", "5500m"), ("memory", "11Gi"), ("pods", "220")])
    );
}

#[test]
fn a_peer_gets_its_own_offloaded_pods_added_back() {
    let a = synced(
        vec![node("n1", true, false, "4", "8Gi")],
        vec![
            pod("local", "Running", json!({}), "1", "1Gi"),
            pod(
                "from-a",
                "Running",
                json!({"virtualkubelet.liqo.io/origin": "peer-a"}),
                "1",
                "2Gi",
            ),
            pod(
                "from-b",
                "Running",
                json!({"offloading.liqo.io/origin": "peer-b"}),
                "500m",
                "1Gi",
            ),
        ],
    );
    assert_eq!(
        answer(&a, "someone"),
        pairs(&[("cpu", "1500m"), ("memory", "4Gi"), ("pods", "110")])
    );
    assert_eq!(
        answer(&a, "peer-a"),
        pairs(&[("cpu", "2500m"), ("memory", "6Gi"), ("pods", "110")])
    );
    assert_eq!(
        answer(&a, "peer-b"),
        pairs(&[("cpu", "2"), ("memory", "5Gi"), ("pods", "110")])
    );
}

#[test]
fn never_negative() {
    let a = synced(
        vec![node("n1", true, false, "1", "1Gi")],
        vec![pod("big", "Running", json!({}), "3", "2Gi")],
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "0"), ("memory", "0"), ("pods", "110")])
    );
}

#[test]
fn node_going_not_ready_and_back() {
    let mut a = synced(
        vec![
            node("n1", true, false, "4", "8Gi"),
            node("n2", true, false, "4", "8Gi"),
        ],
        vec![],
    );
    assert_eq!(
        a.on_node_event(Event::Apply(node("n2", false, false, "4", "8Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    // A status update that changes nothing we count is not a change.
    assert_eq!(
        a.on_node_event(Event::Apply(node("n2", false, false, "4", "8Gi"))),
        Changed::No
    );
    assert_eq!(
        a.on_node_event(Event::Apply(node("n2", true, false, "4", "8Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "220")])
    );
    assert_eq!(
        a.on_node_event(Event::Delete(node("n1", true, false, "4", "8Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
}

#[test]
fn pods_starting_and_finishing() {
    let mut a = synced(vec![node("n1", true, false, "4", "8Gi")], vec![]);
    assert_eq!(
        a.on_pod_event(Event::Apply(pod("p", "Pending", json!({}), "1", "1Gi"))),
        Changed::No
    );
    assert_eq!(
        a.on_pod_event(Event::Apply(pod("p", "Running", json!({}), "1", "1Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );
    assert_eq!(
        a.on_pod_event(Event::Apply(pod("p", "Running", json!({}), "1", "1Gi"))),
        Changed::No
    );
    assert_eq!(
        a.on_pod_event(Event::Apply(pod("p", "Succeeded", json!({}), "1", "1Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    a.on_pod_event(Event::Apply(pod(
        "q",
        "Running",
        json!({"virtualkubelet.liqo.io/origin": "a"}),
        "2",
        "2Gi",
    )));
    assert_eq!(
        answer(&a, "a"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    assert_eq!(
        a.on_pod_event(Event::Delete(pod("q", "Running", json!({}), "2", "2Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "a"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    assert_eq!(
        answer(&a, "b"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
}

#[test]
fn a_relist_replaces_everything() {
    let mut a = synced(
        vec![node("n1", true, false, "4", "8Gi")],
        vec![pod("p", "Running", json!({}), "1", "1Gi")],
    );
    // The watch broke; the re-list no longer has the pod (deleted meanwhile).
    a.on_pod_event(Event::Init);
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );
    assert_eq!(a.on_pod_event(Event::InitDone), Changed::Yes);
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
}

#[test]
fn init_containers_sidecars_and_overhead() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": { "name": "p", "namespace": "default" },
        "spec": {
            "containers": [
                { "name": "a", "resources": { "requests": { "cpu": "100m", "memory": "100Mi" } } },
                { "name": "b", "resources": { "requests": { "cpu": "100m" } } }
            ],
            "initContainers": [
                { "name": "big-init", "resources": { "requests": { "cpu": "1", "memory": "50Mi" } } },
                { "name": "sidecar", "restartPolicy": "Always",
                  "resources": { "requests": { "cpu": "50m", "memory": "10Mi" } } }
            ],
            "overhead": { "cpu": "10m" }
        },
        "status": { "phase": "Running" }
    }))
    .unwrap();
    let a = synced(vec![node("n1", true, false, "4", "8Gi")], vec![p]);
    // cpu: max(100m+100m+50m, 1) + 10m; memory: max(100Mi+10Mi, 50Mi).
    assert_eq!(
        answer(&a, "x"),
        pairs(&[("cpu", "2990m"), ("memory", "8082Mi"), ("pods", "110")])
    );
}

/// Under the Pod watch's selectors, a pod that stops running leaves the
/// watch as a DELETED event carrying its new state, and one that starts
/// running (or loses its shadow label) joins it as ADDED.
#[test]
fn objects_leaving_and_joining_the_selected_set() {
    let mut a = synced(
        vec![
            node("n1", true, false, "4", "8Gi"),
            node("n2", true, false, "2", "4Gi"),
        ],
        vec![pod(
            "job",
            "Running",
            json!({"offloading.liqo.io/origin": "peer-a"}),
            "1",
            "1Gi",
        )],
    );
    assert_eq!(
        answer(&a, "peer-b"),
        pairs(&[("cpu", "5"), ("memory", "11Gi"), ("pods", "220")])
    );
    // Running → Succeeded, delivered as DELETED with the Succeeded object.
    assert_eq!(
        a.on_pod_event(Event::Delete(pod(
            "job",
            "Succeeded",
            json!({"offloading.liqo.io/origin": "peer-a"}),
            "1",
            "1Gi"
        ))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "peer-b"),
        pairs(&[("cpu", "6"), ("memory", "12Gi"), ("pods", "220")])
    );
    assert_eq!(answer(&a, "peer-a"), answer(&a, "peer-b"));
    // A DELETED for a pod that was never counted changes nothing.
    assert_eq!(
        a.on_pod_event(Event::Delete(pod("other", "Failed", json!({}), "1", "1Gi"))),
        Changed::No
    );
    // A node labelled virtual leaves the Node watch the same way.
    assert_eq!(
        a.on_node_event(Event::Delete(node("n2", true, true, "2", "4Gi"))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "peer-b"),
        pairs(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    // A shadow pod that is no longer one joins as ADDED.
    assert_eq!(
        a.on_pod_event(Event::Apply(pod(
            "was-shadow",
            "Running",
            json!({}),
            "1",
            "2Gi"
        ))),
        Changed::Yes
    );
    assert_eq!(
        answer(&a, "peer-b"),
        pairs(&[("cpu", "3"), ("memory", "6Gi"), ("pods", "110")])
    );
}

/// The selectors sent to the API server say what the client-side checks
/// say: an object they exclude is one `counted_*` rejects.
#[test]
fn selectors_agree_with_the_client_side_rules() {
    use super::objects::{
        counted_node, counted_pod, node_label_selector, pod_label_selector, POD_FIELD_SELECTOR,
    };
    assert_eq!(node_label_selector(), "liqo.io/type!=virtual-node");
    assert_eq!(pod_label_selector(), "liqo.io/shadowPod!=true");
    assert_eq!(POD_FIELD_SELECTOR, "status.phase=Running");
    let origin: Vec<String> = POD_ORIGIN_LABELS.iter().map(|s| s.to_string()).collect();
    assert!(counted_node(&node("v", true, true, "1", "1Gi")).is_none());
    assert!(counted_node(&node("n", true, false, "1", "1Gi")).is_some());
    assert!(counted_pod(
        &pod(
            "s",
            "Running",
            json!({"liqo.io/shadowPod": "true"}),
            "1",
            "1Gi"
        ),
        &origin
    )
    .is_none());
    for phase in ["Pending", "Succeeded", "Failed", "Unknown"] {
        assert!(counted_pod(&pod("p", phase, json!({}), "1", "1Gi"), &origin).is_none());
    }
    assert!(counted_pod(&pod("p", "Running", json!({}), "1", "1Gi"), &origin).is_some());
}

/// The log of a failed watch names the cause at the bottom of the chain,
/// once.
#[test]
fn watch_errors_are_logged_with_every_cause() {
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }
    let chain = Layer(
        "client error (Connect)",
        Some(Box::new(Layer(
            "invalid peer certificate: UnknownIssuer",
            Some(Box::new(Layer("UnknownIssuer", None))),
        ))),
    );
    assert_eq!(
        super::causes(&chain),
        "client error (Connect): invalid peer certificate: UnknownIssuer"
    );
}
