//! The scheduler's predicates ([`liqo_model::scheduling::feasible`]): each
//! reason a node is refused, and a node that takes the pod; the message a
//! pod refused everywhere gets, as kube-scheduler writes it.

use liqo_model::scheduling::{feasible, filter, matches_terms, unschedulable_message};
use serde_json::{json, Value};

fn node(extra: Value) -> Value {
    let mut n = json!({"metadata": {"name": "n1", "labels": {"zone": "a", "liqo.io/type": "virtual-node"}},
        "spec": {"taints": [{"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "2"},
                   "conditions": [{"type": "Ready", "status": "True"}]}});
    for (k, v) in extra.as_object().unwrap() {
        let (outer, inner) = k.split_once('.').unwrap();
        n[outer][inner] = v.clone();
    }
    n
}

fn pod(cpu: &str, extra: Value) -> Value {
    let mut p = json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
        "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"}]}});
    for (k, v) in extra.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

#[test]
fn each_reason_a_node_is_refused() {
    let one = pod("1", json!({}));
    let cases = [
        (node(json!({})), one.clone(), vec![], None),
        (
            node(json!({"status.conditions": [{"type": "Ready", "status": "False"}]})),
            one.clone(),
            vec![],
            // The node lifecycle controller's NoSchedule taint.
            Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }"),
        ),
        (
            node(json!({"spec.unschedulable": true})),
            one.clone(),
            vec![],
            Some("node(s) were unschedulable"),
        ),
        (
            node(json!({})),
            pod("1", json!({"tolerations": []})),
            vec![],
            Some("node(s) had untolerated taint {virtual-node.liqo.io/not-allowed: true}"),
        ),
        (
            node(json!({})),
            pod("1", json!({"nodeSelector": {"zone": "b"}})),
            vec![],
            Some("node(s) didn't match Pod's node affinity/selector"),
        ),
        (
            node(json!({})),
            pod(
                "1",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]}}}}),
            ),
            vec![],
            Some("node(s) didn't match Pod's node affinity/selector"),
        ),
        (
            node(json!({})),
            pod("3", json!({})),
            vec![],
            Some("Insufficient cpu"),
        ),
        (
            node(json!({})),
            one.clone(),
            vec![pod("1500m", json!({}))],
            Some("Insufficient cpu"),
        ),
        (
            node(json!({})),
            pod("0", json!({})),
            vec![pod("0", json!({})), pod("0", json!({}))],
            Some("Too many pods"),
        ),
    ];
    for (i, (node, pod, bound, want)) in cases.into_iter().enumerate() {
        let bound: Vec<&Value> = bound.iter().collect();
        assert_eq!(feasible(&pod, &node, &bound).as_deref(), want, "case {i}");
    }
}

#[test]
fn node_selector_terms_are_ored_and_their_requirements_anded() {
    let n = node(json!({}));
    let sel = |terms: Value| json!({"nodeSelectorTerms": terms});
    let zone = |op: &str, v: &str| json!({"key": "zone", "operator": op, "values": [v]});
    assert!(matches_terms(
        &n,
        &sel(json!([{"matchExpressions": [zone("In", "b")]},
                                           {"matchExpressions": [zone("In", "a")]}]))
    ));
    assert!(!matches_terms(
        &n,
        &sel(json!([{"matchExpressions": [zone("In", "a"), zone("NotIn", "a")]}]))
    ));
    // A term with no requirement, and no term at all, match nothing.
    assert!(!matches_terms(&n, &sel(json!([{}]))));
    assert!(!matches_terms(&n, &sel(json!([]))));
    let by_name =
        json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]);
    assert!(matches_terms(&n, &sel(by_name)));
}

#[test]
fn room_counts_init_containers_sidecars_and_overhead_and_names_every_short_resource() {
    // kube-scheduler's PodRequests: an init container of 2 cpu needs 2 cpu
    // of a 2-cpu node even though the containers ask for 1; a sidecar adds
    // to the containers; the overhead adds to it all.
    let init = |extra: Value| {
        let mut p = pod(
            "1",
            json!({"initContainers": [
            {"name": "i", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}),
        );
        for (k, v) in extra.as_object().unwrap() {
            p["spec"][k] = v.clone();
        }
        p
    };
    let n = node(json!({}));
    assert_eq!(feasible(&init(json!({})), &n, &[]), None);
    assert_eq!(
        feasible(&init(json!({"overhead": {"cpu": "1m"}})), &n, &[]).as_deref(),
        Some("Insufficient cpu")
    );
    let mut sidecar = init(json!({}));
    sidecar["spec"]["initContainers"][0]["restartPolicy"] = json!("Always");
    assert_eq!(
        feasible(&sidecar, &n, &[]).as_deref(),
        Some("Insufficient cpu")
    );
    // Every resource short is a reason of its own, the pod count first.
    let big = pod("3", json!({}));
    let mut big = big;
    big["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("5Gi");
    let full = [pod("0", json!({})), pod("0", json!({}))];
    let full: Vec<&Value> = full.iter().collect();
    assert_eq!(
        filter(&big, &n, &full).unwrap_err().reasons,
        ["Too many pods", "Insufficient cpu", "Insufficient memory"]
    );
}

#[test]
fn the_unschedulable_message_is_kube_schedulers() {
    let p = pod("3", json!({}));
    let virtual_node = node(json!({}));
    let mut cordoned = node(json!({"spec.unschedulable": true}));
    cordoned["metadata"]["name"] = json!("n0");
    let mut other = node(json!({}));
    other["metadata"]["name"] = json!("n2");
    let nodes = [&cordoned, &virtual_node, &other];
    let refused: Vec<_> = nodes
        .iter()
        .map(|n| (*n, vec![], filter(&p, n, &[]).unwrap_err()))
        .collect();
    assert_eq!(
        unschedulable_message(&p, &refused),
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. \
         preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, \
         2 No preemption victims found for incoming pod."
    );
    // Taints and affinity: preemption cannot help anywhere.
    let untolerating = pod("1", json!({"tolerations": []}));
    let refused = vec![(
        &virtual_node,
        vec![],
        filter(&untolerating, &virtual_node, &[]).unwrap_err(),
    )];
    assert_eq!(
        unschedulable_message(&untolerating, &refused),
        "0/1 nodes are available: 1 node(s) had untolerated taint \
         {virtual-node.liqo.io/not-allowed: true}. preemption: 0/1 nodes are available: \
         1 Preemption is not helpful for scheduling."
    );
    // A pod that may not preempt, and a node whose lower-priority pod
    // would not make room.
    let mut never = p.clone();
    never["spec"]["preemptionPolicy"] = json!("Never");
    let one = vec![(
        &virtual_node,
        vec![],
        filter(&never, &virtual_node, &[]).unwrap_err(),
    )];
    assert!(unschedulable_message(&never, &one)
        .ends_with(". preemption: not eligible due to preemptionPolicy=Never."));
    let mut urgent = p.clone();
    urgent["spec"]["priority"] = json!(1000);
    let low = pod("1", json!({}));
    let refused = vec![(
        &virtual_node,
        vec![&low],
        filter(&urgent, &virtual_node, &[&low]).unwrap_err(),
    )];
    assert_eq!(
        unschedulable_message(&urgent, &refused),
        "0/1 nodes are available: 1 Insufficient cpu. \
         preemption: 0/1 nodes are available: 1 Insufficient cpu."
    );
    // No node at all: ErrNoNodesAvailable's text.
    assert_eq!(
        unschedulable_message(&p, &[]),
        "no nodes available to schedule pods"
    );
}
