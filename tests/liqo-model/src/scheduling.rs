//! The predicates Kubernetes' scheduler (and Liqo, for cluster selectors)
//! decides with, as pure functions on JSON objects: node selector terms,
//! taints and tolerations, a node's readiness and room. Paths are in
//! `kubernetes/kubernetes` (files only, no lines: read at v1.33).
//!
//! - [`matches_terms`], after `staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`
//!   (NA): terms are ORed, a term's requirements ANDed, a term with none
//!   matches nothing, operators per
//!   `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`;
//! - [`tolerates_all`], after `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`
//!   (`NoSchedule` and `NoExecute` taints must be tolerated) with
//!   `staging/src/k8s.io/api/core/v1/toleration.go` (`ToleratesTaint`);
//! - [`feasible`], after the filter plugins the model's scheduler runs — node
//!   unschedulable (`nodeunschedulable/node_unschedulable.go`),
//!   `spec.nodeSelector` and required node affinity
//!   (`nodeaffinity/node_affinity.go`), taints, and room
//!   (`noderesources/fit.go`: the pods count and each requested
//!   resource within allocatable, requests counted as
//!   `pkg/api/v1/resource/helpers.go` does — the containers' sum, at least
//!   the largest init container's), on a node whose `Ready` condition is
//!   `True` (the node lifecycle controller taints others
//!   `node.kubernetes.io/not-ready`, which no pod here tolerates).

use std::collections::BTreeMap;

use kube_test_server::taints::tolerates;
use quantity::Quantity;
use serde_json::{json, Value};

use crate::shadowpod_webhook::{pod_quota, resource_list};

/// Whether one requirement `{key, operator, values}` holds on `labels`.
fn requirement(labels: &Value, req: &Value) -> bool {
    let value = labels[req["key"].as_str().unwrap_or_default()].as_str();
    let values: Vec<&str> = req["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |v: &str| v.parse::<i64>().ok();
    match req["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // selector.go: both sides integers, else no match.
        "Gt" | "Lt" => {
            let (Some(have), Some(limit)) = (
                value.and_then(number),
                values.first().and_then(|v| number(v)),
            ) else {
                return false;
            };
            if req["operator"] == "Gt" {
                have > limit
            } else {
                have < limit
            }
        }
        _ => false,
    }
}

/// NA: one term, its label and field (`metadata.name`) requirements.
fn term_matches(node: &Value, term: &Value) -> bool {
    let exprs = term["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let fields = term["matchFields"].as_array().cloned().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name_fields = json!({"metadata.name": node["metadata"]["name"]});
    exprs
        .iter()
        .all(|r| requirement(&node["metadata"]["labels"], r))
        && fields.iter().all(|r| requirement(&name_fields, r))
}

/// Whether `node` matches the `NodeSelector` `selector`
/// (`{nodeSelectorTerms: [...]}`): any of its terms.
pub fn matches_terms(node: &Value, selector: &Value) -> bool {
    selector["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| term_matches(node, t))
}

/// Whether `tolerations` tolerate every `NoSchedule` and `NoExecute` taint.
pub fn tolerates_all(taints: &Value, tolerations: &Value) -> bool {
    let tolerations = tolerations.as_array().cloned().unwrap_or_default();
    taints
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Whether `node`'s `Ready` condition is `True`.
pub fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// What a pod asks of a node: its requests, as the scheduler counts them.
pub fn requests(pod: &Value) -> BTreeMap<String, Quantity> {
    pod_quota(&json!({"spec": {"pod": pod["spec"]}}), "None").unwrap_or_default()
}

/// Why `pod` cannot go to `node`, which already runs `bound` (pods not
/// finished), or `None` when it can.
pub fn feasible(pod: &Value, node: &Value, bound: &[&Value]) -> Option<String> {
    let spec = &pod["spec"];
    if !ready(node) {
        return Some("node(s) were not ready".into());
    }
    if node["spec"]["unschedulable"] == true {
        return Some("node(s) were unschedulable".into());
    }
    let labels = &node["metadata"]["labels"];
    let selector_ok = spec["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v);
    let affinity =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if !selector_ok || (!affinity.is_null() && !matches_terms(node, affinity)) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    if !tolerates_all(&node["spec"]["taints"], &spec["tolerations"]) {
        return Some("node(s) had untolerated taint".into());
    }
    let allocatable = resource_list(&node["status"]["allocatable"]);
    let max_pods = allocatable.get("pods").map_or(0, Quantity::value);
    if i64::try_from(bound.len()).unwrap_or(i64::MAX) >= max_pods {
        return Some("Too many pods".into());
    }
    let mut used: BTreeMap<String, Quantity> = BTreeMap::new();
    for other in bound {
        for (k, v) in requests(other) {
            let sum = used.get(&k).map_or(v.clone(), |u| u.add(&v));
            used.insert(k, sum);
        }
    }
    for (k, want) in requests(pod) {
        let have = allocatable.get(&k).cloned().unwrap_or_else(Quantity::zero);
        let free = used.get(&k).map_or(have.clone(), |u| have.sub(u));
        if free.sub(&want).is_negative() {
            return Some(format!("Insufficient {k}"));
        }
    }
    None
}
