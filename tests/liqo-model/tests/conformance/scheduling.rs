//! The scheduler's predicates ([`liqo_model::scheduling::feasible`]): each
//! reason a node is refused, and a node that takes the pod.

use liqo_model::scheduling::{feasible, matches_terms};
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
            Some("node(s) were not ready"),
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
            Some("node(s) had untolerated taint"),
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
