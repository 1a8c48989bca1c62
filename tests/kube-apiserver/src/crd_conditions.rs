//! A CustomResourceDefinition's status conditions and its deletion mark,
//! as the apiextensions-apiserver writes them: the pure part the CRD
//! controllers (`crd_controller`, `crd_finalizer`) and the
//! store's DELETE share.

use serde_json::{json, Value};

use crate::deletion;

/// `apiextensions.CustomResourceCleanupFinalizer`.
pub const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// `conditions` with `condition` set as `SetCRDCondition` sets it
/// (`apiextensions-apiserver/pkg/apihelpers/helpers.go`): the transition
/// time kept when the status did not change.
pub fn set_condition(conditions: &mut Vec<Value>, mut condition: Value) {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    match conditions
        .iter_mut()
        .find(|c| c["type"] == condition["type"])
    {
        Some(existing) => {
            condition["lastTransitionTime"] = if existing["status"] == condition["status"] {
                existing["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *existing = condition;
        }
        None => {
            condition["lastTransitionTime"] = json!(now);
            conditions.push(condition);
        }
    }
}

/// The conditions of a CRD's status (none when it has no status yet).
pub fn conditions_of(object: &Value) -> Vec<Value> {
    object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `REST.Delete`'s first request: the CRD marked, its finalizer added,
/// `Terminating` `InstanceDeletionPending`. `None` when it is already
/// marked, for the generic store's DELETE to handle.
pub fn mark_for_deletion(existing: &Value, now: &str) -> Option<Value> {
    if existing["metadata"]["deletionTimestamp"].is_string() {
        return None;
    }
    let mut marked = existing.clone();
    marked["metadata"]["deletionTimestamp"] = json!(now);
    let mut finalizers = deletion::finalizer_names(existing);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.into());
    }
    marked["metadata"]["finalizers"] = json!(finalizers);
    let mut conditions = conditions_of(existing);
    set_condition(
        &mut conditions,
        json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
               "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"}),
    );
    if !marked["status"].is_object() {
        marked["status"] = json!({});
    }
    marked["status"]["conditions"] = json!(conditions);
    Some(marked)
}
