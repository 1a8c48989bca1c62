//! What the workload controllers (`replicaset`,
//! `deployment`), the disruption controller
//! (`disruption`) and the eviction subresource
//! (`eviction`) share: the registry strategies of the kinds they
//! write, and the pod predicates of `pkg/api/v1/pod/util.go` and
//! `pkg/controller/controller_utils.go`.
//!
//! Sources: Kubernetes v1.31.0, as the rest of this crate (a tagged
//! checkout was not to be had here; the functions named are unchanged in
//! v1.33).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::crd::GroupResource;

/// `GroupResource`s the controllers write.
pub fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}
pub fn replica_sets() -> GroupResource {
    GroupResource::new("apps", "replicasets")
}
pub fn deployments() -> GroupResource {
    GroupResource::new("apps", "deployments")
}
pub fn pod_disruption_budgets() -> GroupResource {
    GroupResource::new("policy", "poddisruptionbudgets")
}
pub fn events() -> GroupResource {
    GroupResource::new("", "events")
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}
pub fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}
pub fn uid(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}
pub fn deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}
pub fn generation(object: &Value) -> i64 {
    object["metadata"]["generation"].as_i64().unwrap_or(0)
}

/// `spec.replicas`, 1 when absent (`SetDefaults_Deployment`,
/// `SetDefaults_ReplicaSet`, `pkg/apis/apps/v1/defaults.go`: the server
/// defaults it; here the readers do).
pub fn replicas(object: &Value) -> i64 {
    object["spec"]["replicas"].as_i64().unwrap_or(1).max(0)
}

/// `metav1.GetControllerOf`: the owner reference with `controller: true`.
pub fn controller_of(object: &Value) -> Option<&Value> {
    object["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == json!(true))
}

/// The pod's `Ready` condition, if `True` (`IsPodReady`,
/// `pkg/api/v1/pod/util.go`).
pub fn ready_condition(pod: &Value) -> Option<&Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")
}

pub fn is_ready(pod: &Value) -> bool {
    ready_condition(pod).is_some()
}

/// `IsPodAvailable` (`pkg/api/v1/pod/util.go`): Ready for at least
/// `min_ready_seconds` (by the condition's `lastTransitionTime`).
pub fn is_available(
    pod: &Value,
    min_ready_seconds: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let Some(ready) = ready_condition(pod) else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    ready["lastTransitionTime"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| {
            t.with_timezone(&chrono::Utc) + chrono::Duration::seconds(min_ready_seconds) < now
        })
}

pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or_default()
}

/// `IsPodActive` (`pkg/controller/controller_utils.go`): neither
/// `Succeeded` nor `Failed`, and not being deleted.
pub fn is_active(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && !deleting(pod)
}

/// Whether `selector` (a `metav1.LabelSelector`) selects `object`, as
/// `LabelSelectorAsSelector(selector).Matches(labels)`: a missing selector
/// is `labels.Nothing()`, an empty one `labels.Everything()`, an invalid
/// one selects nothing (the callers skip it).
pub fn selects(selector: &Value, object: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    crate::selector::label_selector_matches(selector, &object["metadata"]["labels"])
        .unwrap_or(false)
}

/// Whether a selector is empty (`labels.Selector.Empty()`): no
/// `matchLabels`, no `matchExpressions` — or none at all.
pub fn selector_is_empty(selector: &Value) -> bool {
    let none = |field: &str| match &selector[field] {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => true,
    };
    none("matchLabels") && none("matchExpressions")
}

/// `GetScaledValueFromIntOrPercent`
/// (`staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go`): an int
/// as it is, a `"N%"` of `total` rounded up or down; `None` for anything
/// else (the callers fail the sync, as `invalid value for IntOrString`).
pub fn scaled_value(value: &Value, total: i64, round_up: bool) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    let scaled = percent * total;
    Some(if round_up {
        (scaled + 99).div_euclid(100)
    } else {
        scaled.div_euclid(100)
    })
}

/// An Event about `object` by `component`, as a controller's
/// `record.EventRecorder` writes it (core/v1). Repeated Events with the
/// same reason and message are one Event with a count, as the recorder's
/// aggregation makes them (`staging/src/k8s.io/client-go/tools/record/events_cache.go`).
pub fn record_event(
    world: &mut crate::store::World,
    component: &str,
    object: &Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let Some(def) = world.registry.get(&events()) else {
        return;
    };
    let ns = match namespace(object) {
        "" => "default",
        ns => ns,
    }
    .to_string();
    let stamp = crate::store::now();
    let existing = world.list_objects(&events()).into_iter().find(|e| {
        e["metadata"]["namespace"] == json!(ns)
            && e["involvedObject"]["uid"] == object["metadata"]["uid"]
            && e["reason"] == reason
            && e["message"] == message
            && e["source"]["component"] == component
    });
    if let Some(mut event) = existing {
        let count = event["count"].as_i64().unwrap_or(1) + 1;
        event["count"] = json!(count);
        event["lastTimestamp"] = json!(stamp);
        let name = self::name(&event).to_string();
        if let Err(e) = world.update(&def, Some(&ns), &name, event, crate::store::Target::Main) {
            tracing::debug!(error = %e, "{component}: event");
        }
        return;
    }
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let event = json!({
        "metadata": {"name": format!("{}.{nanos:x}", self::name(object)), "namespace": ns},
        "involvedObject": {
            "kind": object["kind"], "apiVersion": object["apiVersion"],
            "namespace": object["metadata"]["namespace"], "name": object["metadata"]["name"],
            "uid": object["metadata"]["uid"],
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": type_,
        "reportingComponent": component, "reportingInstance": "",
    });
    if let Err(e) = world.create(&def, Some(&ns), event) {
        tracing::debug!(error = %e, "{component}: event");
    }
}

/// Pods by namespace, for the controllers' per-namespace selection.
pub fn pods_by_namespace(world: &crate::store::World) -> HashMap<String, Vec<Value>> {
    let mut by_ns: HashMap<String, Vec<Value>> = HashMap::new();
    for pod in world.list_objects(&pods()) {
        by_ns
            .entry(namespace(&pod).to_string())
            .or_default()
            .push(pod);
    }
    by_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_percent_scales_as_intstr_does() {
        assert_eq!(scaled_value(&json!(2), 10, true), Some(2));
        assert_eq!(scaled_value(&json!("25%"), 10, true), Some(3));
        assert_eq!(scaled_value(&json!("25%"), 10, false), Some(2));
        assert_eq!(scaled_value(&json!("100%"), 3, true), Some(3));
        assert_eq!(scaled_value(&json!("x"), 3, true), None);
    }

    #[test]
    fn selectors_nil_selects_nothing_and_empty_everything() {
        let pod = json!({"metadata": {"labels": {"app": "a"}}});
        assert!(!selects(&Value::Null, &pod));
        assert!(selects(&json!({}), &pod));
        assert!(selects(&json!({"matchLabels": {"app": "a"}}), &pod));
        assert!(!selects(&json!({"matchLabels": {"app": "b"}}), &pod));
        assert!(selector_is_empty(&json!({})));
        assert!(selector_is_empty(&Value::Null));
        assert!(!selector_is_empty(&json!({"matchLabels": {"app": "a"}})));
    }
}
