//! The status Liqo v1.2.0's NamespaceOffloading controller writes
//! (`pkg/liqo-controller-manager/offloading/namespaceoffloading-controller/status.go`,
//! ST below), as a decision apart from its write: from the
//! NamespaceOffloading and the cluster's local NamespaceMaps, the
//! `remoteNamespaceName`, the `observedGeneration`, per map (named after
//! its peer's cluster ID) an `OffloadingRequired` and a `Ready` condition,
//! and the `offloadingPhase` that sums them up. Written by
//! the NamespaceOffloading controller after every reconcile, whatever its
//! outcome (`namespaceoffloading_controller.go:88-98`).

use serde_json::{json, Map, Value};

/// `apis/offloading/v1beta1/namespaceoffloading_types.go:76`.
pub const REQUIRED: &str = "OffloadingRequired";
/// `apis/offloading/v1beta1/namespaceoffloading_types.go:78`.
pub const READY: &str = "Ready";

/// ST:30-48: the status `nsoff` is to have, with `remote_name` its remote
/// namespace's name (ST:65-79), `maps` the local NamespaceMaps, and `now`
/// the time a condition that changes is stamped with. Fields Go leaves
/// out when empty (`omitempty`) are left out, so the result compares
/// with the stored status as `equality.Semantic.DeepEqual` does (ST:51).
pub fn status<'a>(
    nsoff: &Value,
    remote_name: &str,
    maps: impl IntoIterator<Item = &'a Value> + Clone,
    now: &str,
) -> Value {
    let namespace = nsoff["metadata"]["namespace"].as_str().unwrap_or_default();
    let deleting = nsoff["metadata"]["deletionTimestamp"].is_string();
    let mut conditions = nsoff["status"]["remoteNamespacesConditions"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // ST:81-96: the conditions of peers whose map is gone are dropped.
    conditions.retain(|name, _| {
        maps.clone()
            .into_iter()
            .any(|nm| nm["metadata"]["name"].as_str() == Some(name))
    });
    // ST:100-137.
    let (mut required, mut ready, mut failed) = (0u32, 0u32, 0u32);
    for nm in maps {
        let name = nm["metadata"]["name"].as_str().unwrap_or_default();
        let requested = nm["spec"]["desiredMapping"].get(namespace).is_some();
        required += u32::from(requested);
        let phase = nm["status"]["currentMapping"][namespace]["phase"]
            .as_str()
            .unwrap_or_default();
        match phase {
            "Accepted" => ready += 1,
            "CreationLoopBackOff" => failed += 1,
            _ => {}
        }
        if deleting && !requested && phase.is_empty() {
            // ST:124-126: offloading there correctly ended.
            conditions.remove(name);
            continue;
        }
        let list = conditions.entry(name.to_string()).or_insert(json!([]));
        set_condition(list, required_condition(requested), now);
        if requested || !phase.is_empty() {
            set_condition(list, ready_condition(phase), now);
        }
    }
    let mut status = Map::new();
    status.insert(
        "offloadingPhase".into(),
        json!(offloading_phase(deleting, required, ready, failed)),
    );
    if !conditions.is_empty() {
        status.insert("remoteNamespacesConditions".into(), json!(conditions));
    }
    let generation = nsoff["metadata"]["generation"].as_i64().unwrap_or_default();
    if generation != 0 {
        status.insert("observedGeneration".into(), json!(generation));
    }
    if !remote_name.is_empty() {
        status.insert("remoteNamespaceName".into(), json!(remote_name));
    }
    Value::Object(status)
}

/// ST:204-220.
pub fn offloading_phase(deleting: bool, required: u32, ready: u32, failed: u32) -> &'static str {
    if deleting {
        "Terminating"
    } else if required == 0 {
        "NoClusterSelected"
    } else if ready == required {
        "Ready"
    } else if failed == required {
        "AllFailed"
    } else if failed > 0 {
        "SomeFailed"
    } else {
        "InProgress"
    }
}

/// ST:139-159: a condition of the same type is replaced only when its
/// status or reason differs, so its `lastTransitionTime` stays put.
fn set_condition(list: &mut Value, (kind, status, reason, message): Condition, now: &str) {
    let condition = json!({"type": kind, "status": status, "lastTransitionTime": now,
                           "reason": reason, "message": message});
    let Some(list) = list.as_array_mut() else {
        *list = json!([condition]);
        return;
    };
    match list.iter_mut().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status && c["reason"] == reason => {}
        Some(c) => *c = condition,
        None => list.push(condition),
    }
}

/// Type, status, reason, message.
type Condition = (&'static str, &'static str, &'static str, &'static str);

/// ST:161-176.
fn required_condition(required: bool) -> Condition {
    if required {
        (
            REQUIRED,
            "True",
            "ClusterSelected",
            "The remote cluster has been selected through the ClusterSelector field",
        )
    } else {
        (
            REQUIRED,
            "False",
            "ClusterNotSelected",
            "The remote cluster has not been selected through the ClusterSelector field",
        )
    }
}

/// ST:178-202.
fn ready_condition(phase: &str) -> Condition {
    match phase {
        "Accepted" => (
            READY,
            "True",
            "NamespaceCreated",
            "Namespace correctly offloaded to the remote cluster",
        ),
        "CreationLoopBackOff" => (
            READY,
            "False",
            "CreationLoopBackOff",
            "Some problems occurred during remote namespace creation",
        ),
        "Terminating" => (
            READY,
            "False",
            "Terminating",
            "The remote namespace is being deleted",
        ),
        _ => (
            READY,
            "False",
            "Creating",
            "The remote namespace is being created",
        ),
    }
}
