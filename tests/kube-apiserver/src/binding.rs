//! The `pods/binding` subresource: a scheduler's POST of a `Binding`
//! assigns a pod to a node, once. As Kubernetes v1.31.0's `BindingREST`
//! (`pkg/registry/core/pod/storage/storage.go`: `Create`, `assignPod`,
//! `setPodNodeAndMetadata`) serves it:
//!
//! - the Binding's name must be the URL's (400), its target valid
//!   (`ValidatePodBinding`, `pkg/apis/core/validation/validation.go`:
//!   `target.kind` empty or `Node`, `target.name` set — an aggregate error
//!   the handler answers as a 500, as the real one does);
//! - its `metadata.uid` and `metadata.resourceVersion`, when set, are
//!   preconditions on the pod (409);
//! - the pod is written straight to storage (no pod admission, no pod
//!   validation: `GuaranteedUpdate`), refused with a 409 on `pods/binding`
//!   when it is being deleted, already has a node, or has scheduling gates;
//!   else `spec.nodeName` is set, the Binding's annotations merged into the
//!   pod's, and the `PodScheduled` condition made `True`
//!   (`UpdatePodCondition`, `pkg/api/v1/pod/util.go`);
//! - the answer is a `Status` `Success` with code 201.

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::status::ApiError;
use crate::store::{key, World};

/// Why a pod cannot be bound, as `setPodNodeAndMetadata` words it; `None`
/// when it can.
pub fn refusal(pod: &Value) -> Option<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return Some(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if !node.is_empty() {
        return Some(format!("pod {name} is already assigned to node {node:?}"));
    }
    if pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        return Some(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    None
}

/// `pod` bound to `node` at `now`, with `annotations` merged in.
pub fn bound(mut pod: Value, node: &str, annotations: &Value, now: &str) -> Value {
    pod["spec"]["nodeName"] = json!(node);
    if let Some(given) = annotations.as_object().filter(|a| !a.is_empty()) {
        if !pod["metadata"]["annotations"].is_object() {
            pod["metadata"]["annotations"] = json!({});
        }
        for (k, v) in given {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    // `UpdatePodCondition`: the transition time kept when the status does
    // not change.
    let mut condition = json!({"type": "PodScheduled", "status": "True",
        "lastProbeTime": null, "lastTransitionTime": now});
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = pod["status"]["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
            Some(old) => {
                if old["status"] == "True" {
                    condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
                }
                *old = condition;
            }
            None => conditions.push(condition),
        }
    }
    pod
}

/// `ValidatePodBinding`'s errors, as the aggregate's text.
fn invalid_target(binding: &Value) -> Option<String> {
    let mut errors = Vec::new();
    let kind = binding["target"]["kind"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != "Node" {
        errors.push(format!(
            "target.kind: Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""
        ));
    }
    if binding["target"]["name"].as_str().is_none_or(str::is_empty) {
        errors.push("target.name: Required value".to_string());
    }
    match errors.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// A 409 on `pods/binding`, as `assignPod` wraps a storage refusal.
fn conflict(name: &str, why: &str) -> ApiError {
    ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on pods/binding {name:?}: {why}"),
    )
    .with_details(json!({"name": name, "kind": "pods/binding"}))
}

/// POST `binding` to pod `name` in `namespace` (`pods` is the pods
/// resource): the `Status` answered.
pub fn bind(
    world: &mut World,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    binding: &Value,
) -> Result<Value, ApiError> {
    if binding["metadata"]["name"].as_str() != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    if let Some(errors) = invalid_target(binding) {
        return Err(ApiError::new(500, "InternalError", errors));
    }
    let pod = world.get(pods, Some(namespace), name)?;
    let meta = &binding["metadata"];
    // `storage.Preconditions`, worded as `Preconditions.Check` does.
    for (field, shown) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let stored = pod["metadata"][field].as_str().unwrap_or_default();
        if let Some(wanted) = meta[field]
            .as_str()
            .filter(|w| !w.is_empty() && *w != stored)
        {
            return Err(ApiError::conflict(
                pods,
                name,
                &format!(
                    "Precondition failed: {shown} in precondition: {wanted}, {shown} in object meta: {stored}"
                ),
            ));
        }
    }
    if let Some(why) = refusal(&pod) {
        return Err(conflict(name, &why));
    }
    let node = binding["target"]["name"].as_str().unwrap_or_default();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let new = bound(pod.clone(), node, &meta["annotations"], &now);
    world.store_as_is(pods, &key(Some(namespace), name), new);
    Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "code": 201}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_bound_once() {
        let pod = json!({"metadata": {"name": "p", "annotations": {"a": "1"}},
            "spec": {"containers": []},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": "t0"}]}});
        assert_eq!(refusal(&pod), None);
        let after = bound(pod, "n1", &json!({"b": "2"}), "t1");
        assert_eq!(after["spec"]["nodeName"], "n1");
        assert_eq!(
            after["metadata"]["annotations"],
            json!({"a": "1", "b": "2"})
        );
        assert_eq!(
            after["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "t1"}])
        );
        assert_eq!(
            refusal(&after).as_deref(),
            Some("pod p is already assigned to node \"n1\"")
        );
        let gated =
            json!({"metadata": {"name": "g"}, "spec": {"schedulingGates": [{"name": "x"}]}});
        assert_eq!(
            refusal(&gated).as_deref(),
            Some("pod g has non-empty .spec.schedulingGates")
        );
        assert_eq!(
            invalid_target(&json!({"target": {"kind": "Pod"}})).as_deref(),
            Some("[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", target.name: Required value]")
        );
    }
}
