//! Taints and tolerations as Kubernetes v1.31.0 decides with them, the
//! rules alone (no store): the tolerations DefaultTolerationSeconds gives
//! a pod (`plugin/pkg/admission/defaulttolerationseconds/admission.go`),
//! the NoExecute taint a node's `Ready` condition calls for
//! (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`), and when
//! the taint eviction controller deletes a pod
//! (`pkg/controller/tainteviction/taint_eviction.go`). The controller that
//! acts on them is `taint_eviction.rs`.

use std::time::Duration;

use serde_json::{json, Value};

/// `v1.TaintNodeNotReady`.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `v1.TaintNodeUnreachable`.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The plugin's default for both tolerations.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;
const NO_EXECUTE: &str = "NoExecute";

/// DefaultTolerationSeconds on a pod being created.
pub fn default_tolerations(pod: &mut Value) {
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tolerates = |key: &str| {
        tolerations.iter().any(|t| {
            let k = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (k == key || k.is_empty()) && (effect == NO_EXECUTE || effect.is_empty())
        })
    };
    let mut added = tolerations.clone();
    for key in [NOT_READY, UNREACHABLE] {
        if !tolerates(key) {
            added.push(
                json!({"key": key, "operator": "Exists", "effect": NO_EXECUTE,
                              "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}),
            );
        }
    }
    if added.len() != tolerations.len() {
        pod["spec"]["tolerations"] = Value::Array(added);
    }
}

/// The node's `Ready` condition status (`None`: it has none yet).
fn ready(node: &Value) -> Option<&str> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?["status"]
        .as_str()
}

/// The node's taints with the NoExecute taint its `Ready` condition calls
/// for (and without the other), or `None` when they are already so.
pub fn tainted(node: &Value, now: &str) -> Option<Vec<Value>> {
    let wanted = match ready(node) {
        Some("False") => Some(NOT_READY),
        Some("Unknown") => Some(UNREACHABLE),
        // Ready, or no condition posted yet (the grace not modelled).
        _ => None,
    };
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = |t: &Value, key: &str| t["key"] == key && t["effect"] == NO_EXECUTE;
    let mut next: Vec<Value> = taints
        .iter()
        .filter(|t| {
            [NOT_READY, UNREACHABLE]
                .iter()
                .all(|key| !ours(t, key) || Some(*key) == wanted)
        })
        .cloned()
        .collect();
    if let Some(key) = wanted {
        if !next.iter().any(|t| ours(t, key)) {
            next.push(json!({"key": key, "effect": NO_EXECUTE, "timeAdded": now}));
        }
    }
    (next != taints).then_some(next)
}

/// Whether `toleration` tolerates `taint` (`Toleration.ToleratesTaint`,
/// `staging/src/k8s.io/api/core/v1/toleration.go`): the key (empty: every
/// key), the effect (empty: every effect), then `Exists` or `Equal` value.
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or_default();
    if !effect.is_empty() && taint["effect"].as_str() != Some(effect) {
        return false;
    }
    let key = toleration["key"].as_str().unwrap_or_default();
    if !key.is_empty() && taint["key"].as_str() != Some(key) {
        return false;
    }
    match toleration["operator"].as_str().unwrap_or("Equal") {
        "Exists" => true,
        "" | "Equal" => {
            toleration["value"].as_str().unwrap_or_default()
                == taint["value"].as_str().unwrap_or_default()
        }
        _ => false,
    }
}

/// What the controller does with a pod on a node with `taints`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No NoExecute taint, or all tolerated for ever: nothing (a schedule
    /// is cancelled).
    Stay,
    /// Deleted after this long from when it was first seen so.
    After(Duration),
}

/// `processPodOnNode` for a pod's tolerations and its node's taints.
pub fn verdict(pod: &Value, taints: &[Value]) -> Verdict {
    let no_execute: Vec<&Value> = taints
        .iter()
        .filter(|t| t["effect"] == NO_EXECUTE)
        .collect();
    if no_execute.is_empty() {
        return Verdict::Stay;
    }
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // `GetMatchingTolerations`: every taint needs one; those used.
    let mut used = Vec::new();
    for taint in &no_execute {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return Verdict::After(Duration::ZERO),
        }
    }
    // `getMinTolerationTime`: the smallest given, 0 for any ≤ 0, never
    // when none gives one.
    let mut min: Option<i64> = None;
    for t in used {
        if let Some(seconds) = t["tolerationSeconds"].as_i64() {
            if seconds <= 0 {
                return Verdict::After(Duration::ZERO);
            }
            min = Some(min.map_or(seconds, |m| m.min(seconds)));
        }
    }
    match min {
        Some(seconds) => Verdict::After(Duration::from_secs(seconds as u64)),
        None => Verdict::Stay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(tolerations: Value) -> Value {
        json!({"spec": {"nodeName": "n", "tolerations": tolerations}})
    }

    fn node(ready: &str, taints: Value) -> Value {
        json!({"spec": {"taints": taints},
               "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    /// Both tolerations added with 300 s, unless the pod has its own (an
    /// empty key or effect counts); what it has is kept.
    #[test]
    fn default_tolerations_are_added_unless_the_pod_has_its_own() {
        let mut p = pod(json!([{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]));
        default_tolerations(&mut p);
        let t = p["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[1]["key"], NOT_READY);
        assert_eq!(t[1]["tolerationSeconds"], 300);
        assert_eq!(t[2]["key"], UNREACHABLE);
        let mut own = pod(
            json!([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 2}]),
        );
        default_tolerations(&mut own);
        let t = own["spec"]["tolerations"].as_array().unwrap();
        assert_eq!((t.len(), &t[0]["tolerationSeconds"]), (2, &json!(2)));
        let mut everything = pod(json!([{"operator": "Exists"}]));
        default_tolerations(&mut everything);
        assert_eq!(
            everything["spec"]["tolerations"].as_array().unwrap().len(),
            1
        );
    }

    /// NotReady → not-ready, Unknown → unreachable, Ready → neither; other
    /// taints kept; nothing to do when already so.
    #[test]
    fn nodes_are_tainted_as_their_ready_condition_says() {
        let other = json!({"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"});
        let t = tainted(&node("False", json!([other])), "T").unwrap();
        assert_eq!(
            t,
            [
                other.clone(),
                json!({"key": NOT_READY, "effect": "NoExecute", "timeAdded": "T"})
            ]
        );
        assert_eq!(tainted(&node("False", Value::Array(t.clone())), "U"), None);
        let u = tainted(&node("Unknown", Value::Array(t.clone())), "U").unwrap();
        assert_eq!(
            u,
            [
                other.clone(),
                json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "U"})
            ]
        );
        assert_eq!(
            tainted(&node("True", Value::Array(u)), "V").unwrap(),
            std::slice::from_ref(&other)
        );
        assert_eq!(tainted(&node("True", json!([other])), "V"), None);
    }

    /// Untolerated: at once; tolerated: after the smallest
    /// tolerationSeconds; for ever: never; no NoExecute taint: stay.
    #[test]
    fn pods_are_deleted_after_their_smallest_toleration() {
        let not_ready = [json!({"key": NOT_READY, "effect": "NoExecute"})];
        assert_eq!(
            verdict(&pod(json!([])), &not_ready),
            Verdict::After(Duration::ZERO)
        );
        let mut p = pod(json!([]));
        default_tolerations(&mut p);
        assert_eq!(
            verdict(&p, &not_ready),
            Verdict::After(Duration::from_secs(300))
        );
        let short = pod(
            json!([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
                               {"operator": "Exists", "tolerationSeconds": 9}]),
        );
        assert_eq!(
            verdict(&short, &not_ready),
            Verdict::After(Duration::from_secs(2))
        );
        let forever = pod(json!([{"operator": "Exists"}]));
        assert_eq!(verdict(&forever, &not_ready), Verdict::Stay);
        let no_schedule = [json!({"key": "k", "effect": "NoSchedule"})];
        assert_eq!(verdict(&pod(json!([])), &no_schedule), Verdict::Stay);
        let equal = pod(json!([{"key": "k", "value": "a", "effect": "NoExecute"}]));
        let other_value = [json!({"key": "k", "value": "b", "effect": "NoExecute"})];
        assert_eq!(
            verdict(&equal, &other_value),
            Verdict::After(Duration::ZERO)
        );
    }
}
