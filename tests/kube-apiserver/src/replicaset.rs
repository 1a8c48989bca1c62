//! The ReplicaSet controller of kube-controller-manager
//! (`pkg/controller/replicaset/replica_set.go`, Kubernetes v1.31.0), one
//! pass over every ReplicaSet at a time (`syncReplicaSet`):
//!
//! - its pods: the active pods of its namespace (`FilterActivePods`: not
//!   `Succeeded`/`Failed`, not being deleted) it claims
//!   (`PodControllerRefManager.ClaimPods`,
//!   `pkg/controller/controller_ref_manager.go`): its own that its selector
//!   still selects; its own that it no longer selects are released (the
//!   reference taken out); orphans it selects are adopted (a controller
//!   reference, `controller: true`, `blockOwnerDeletion: true`) — neither
//!   while the ReplicaSet is being deleted; pods another controller owns
//!   are left alone;
//! - `manageReplicas`, unless the ReplicaSet is being deleted: too few pods
//!   → new ones from `spec.template` (`GetPodFromTemplate`,
//!   `pkg/controller/controller_utils.go`: the template's labels,
//!   annotations and finalizers, `generateName: <rs>-`, the controller
//!   reference of `NewControllerRef`), at most `burstReplicas` (500) per
//!   pass, each through the server's own create path — admission and
//!   mutating hooks included — as the controller's POST is; too many →
//!   the first of them in `ActivePodsWithRanks` order deleted
//!   (`getPodsToDelete`): unassigned before assigned, `Pending` before
//!   `Unknown` before `Running`, not Ready before Ready, lower
//!   `controller.kubernetes.io/pod-deletion-cost` first, more Ready
//!   siblings on the same node first, Ready more recently first, more
//!   container restarts first, newer first. Events `SuccessfulCreate`,
//!   `SuccessfulDelete`, `FailedCreate` as the pod control records them;
//! - the status (`calculateStatus`, `replica_set_utils.go`): `replicas`,
//!   `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`
//!   (`minReadySeconds`), `observedGeneration`, and the `ReplicaFailure`
//!   condition (`FailedCreate`) while creating fails.
//!
//! Simplified, and said so: pods are created one by one and a pass stops
//! at the first refusal (the real `slowStartBatch` doubles its batches and
//! stops at a failed batch); a refused ReplicaSet is tried again after a
//! backoff doubling from 1 s to 1 minute (the real work queue's rate
//! limiter: 5 ms to 1000 s), so that a refusal and its Event do not make a
//! pass after every pass; "siblings" for the ranking are the ReplicaSet's
//! own pods (the real one counts the pods of every ReplicaSet of the same
//! Deployment); the log-scale comparison of ready times
//! (`LogarithmicScaleDown`) is a plain one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::store::{Target, World};
use crate::workload::{self as w, controller_of, record_event};

/// The component the Events name.
pub const COMPONENT: &str = "replicaset-controller";

/// `BurstReplicas`: the most pods created or deleted for one ReplicaSet in
/// one pass.
pub const BURST_REPLICAS: i64 = 500;

/// The controller's memory: the ReplicaSets whose pod creation was
/// refused, by uid: failures in a row and when to try again.
#[derive(Default)]
pub struct ReplicaSetController {
    backoff: HashMap<String, (u32, Instant)>,
}

const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// `metav1.NewControllerRef`.
pub fn controller_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true,
    })
}

/// `GetPodFromTemplate`, with the status the pod strategy's
/// `PrepareForCreate` gives a new pod (`Pending`,
/// `pkg/registry/core/pod/strategy.go`).
pub fn pod_from_template(rs: &Value) -> Value {
    let template = &rs["spec"]["template"];
    let mut metadata = json!({
        "generateName": format!("{}-", w::name(rs)),
        "namespace": w::namespace(rs),
        "ownerReferences": [controller_ref(rs)],
    });
    for field in ["labels", "annotations", "finalizers"] {
        if !template["metadata"][field].is_null() {
            metadata[field] = template["metadata"][field].clone();
        }
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"],
        "status": {"phase": "Pending"},
    })
}

/// `ClaimObject` for `pods` (all of the owner's namespace): the ones
/// `owner` controls after adopting and releasing, writing those changes.
/// Shared with the Deployment controller's claim of ReplicaSets.
pub fn claim(
    world: &mut World,
    def: &ResourceDef,
    owner: &Value,
    selector: &Value,
    candidates: Vec<Value>,
) -> Vec<Value> {
    let owner_uid = w::uid(owner).to_string();
    let owner_deleting = w::deleting(owner);
    let mut claimed = Vec::new();
    for object in candidates {
        let selected = w::selects(selector, &object);
        match controller_of(&object) {
            Some(r) if r["uid"].as_str() == Some(&owner_uid) => {
                if selected || owner_deleting {
                    // Owned; one the owner being deleted no longer
                    // selects is not released either.
                    if selected {
                        claimed.push(object);
                    }
                    continue;
                }
                // `ReleasePod`: the reference taken out.
                let mut released = object.clone();
                let refs: Vec<Value> = object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["uid"].as_str() != Some(&owner_uid))
                    .cloned()
                    .collect();
                released["metadata"]["ownerReferences"] = json!(refs);
                write(world, def, released, "release");
            }
            Some(_) => {}
            None => {
                if owner_deleting || !selected || w::deleting(&object) {
                    continue;
                }
                // `AdoptPod`.
                let mut adopted = object.clone();
                let mut refs = object["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(controller_ref(owner));
                adopted["metadata"]["ownerReferences"] = json!(refs);
                if let Some(written) = write(world, def, adopted, "adopt") {
                    claimed.push(written);
                }
            }
        }
    }
    claimed
}

fn write(world: &mut World, def: &ResourceDef, object: Value, what: &str) -> Option<Value> {
    let ns = w::namespace(&object).to_string();
    let name = w::name(&object).to_string();
    match world.update(def, Some(&ns), &name, object, Target::Main) {
        Ok(written) => Some(written),
        Err(e) => {
            tracing::debug!(error = %e, object = %name, "{what}");
            None
        }
    }
}

/// `podPhaseToOrdinal`.
fn phase_ordinal(pod: &Value) -> u8 {
    match w::phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// `GetDeletionCostFromPodAnnotations` (an unparsable one counts as 0).
fn deletion_cost(pod: &Value) -> i64 {
    pod["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Value) -> i64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["restartCount"].as_i64())
        .max()
        .unwrap_or(0)
}

fn node(pod: &Value) -> &str {
    pod["spec"]["nodeName"].as_str().unwrap_or_default()
}

/// `ActivePodsWithRanks.Less`: whether `a` goes before `b`.
fn deleted_before(a: &Value, rank_a: usize, b: &Value, rank_b: usize) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    // 1. Unassigned < assigned.
    if node(a) != node(b) && (node(a).is_empty() || node(b).is_empty()) {
        return if node(a).is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    // 2. Pending < Unknown < Running.
    let by = phase_ordinal(a).cmp(&phase_ordinal(b));
    if by != Ordering::Equal {
        return by;
    }
    // 3. Not ready < ready.
    if w::is_ready(a) != w::is_ready(b) {
        return if w::is_ready(a) {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    // 4. Lower pod-deletion-cost first.
    let by = deletion_cost(a).cmp(&deletion_cost(b));
    if by != Ordering::Equal {
        return by;
    }
    // 5. Doubled up < not doubled up.
    let by = rank_b.cmp(&rank_a);
    if by != Ordering::Equal {
        return by;
    }
    // 6. Ready for less time first (an empty time first).
    if w::is_ready(a) && w::is_ready(b) {
        let since = |p: &Value| {
            w::ready_condition(p)
                .and_then(|c| c["lastTransitionTime"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let by = after_or_zero(&since(a), &since(b));
        if by != Ordering::Equal {
            return by;
        }
    }
    // 7. More restarts first.
    let by = max_restarts(b).cmp(&max_restarts(a));
    if by != Ordering::Equal {
        return by;
    }
    // 8. Newer first.
    let created = |p: &Value| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    after_or_zero(&created(a), &created(b))
}

/// `afterOrZero`: an empty time first, then the later one (RFC 3339 UTC
/// times compare as strings).
fn after_or_zero(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.is_empty(), b.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => b.cmp(a),
    }
}

/// `getPodsToDelete`: the first `count` of `pods` in deletion order.
pub fn pods_to_delete(mut pods: Vec<Value>, count: usize) -> Vec<Value> {
    // `getPodsRankedByRelatedPodsOnSameNode`: active siblings per node.
    let mut on_node: HashMap<String, usize> = HashMap::new();
    for pod in pods.iter().filter(|p| w::is_active(p)) {
        *on_node.entry(node(pod).to_string()).or_default() += 1;
    }
    let rank = |p: &Value| on_node.get(node(p)).copied().unwrap_or(0);
    pods.sort_by(|a, b| deleted_before(a, rank(a), b, rank(b)));
    pods.truncate(count);
    pods
}

/// `calculateStatus` and `updateReplicaSetStatus`: the status for `pods`
/// (claimed, active), with `failure` (a refused create) as the
/// `ReplicaFailure` condition.
fn status(rs: &Value, pods: &[Value], failure: Option<&str>) -> Value {
    let now = chrono::Utc::now();
    let min_ready = rs["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
    let template_labels = &rs["spec"]["template"]["metadata"]["labels"];
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            template_labels
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| p["metadata"]["labels"][k] == *v)
        })
        .count();
    let ready = pods.iter().filter(|p| w::is_ready(p)).count();
    let available = pods
        .iter()
        .filter(|p| w::is_available(p, min_ready, now))
        .count();
    let mut status = match &rs["status"] {
        Value::Object(o) => Value::Object(o.clone()),
        _ => json!({}),
    };
    status["replicas"] = json!(pods.len());
    status["fullyLabeledReplicas"] = json!(fully_labeled);
    status["readyReplicas"] = json!(ready);
    status["availableReplicas"] = json!(available);
    status["observedGeneration"] = json!(w::generation(rs));
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match failure {
        Some(message) if !has_failure => conditions.push(json!({
            "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
            "message": message, "lastTransitionTime": crate::store::now(),
        })),
        None if has_failure => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        _ => {}
    }
    if conditions.is_empty() {
        if let Some(map) = status.as_object_mut() {
            map.remove("conditions");
        }
    } else {
        status["conditions"] = json!(conditions);
    }
    status
}

impl ReplicaSetController {
    /// One pass over every ReplicaSet at `now`; when a refused one is due
    /// again, if any.
    pub fn sync(&mut self, world: &mut World, now: Instant) -> Option<Instant> {
        let (Some(rs_def), Some(pods_def)) = (
            world.registry.get(&w::replica_sets()),
            world.registry.get(&w::pods()),
        ) else {
            return None;
        };
        let replica_sets = world.list_objects(&w::replica_sets());
        let alive: std::collections::HashSet<String> = replica_sets
            .iter()
            .map(|rs| w::uid(rs).to_string())
            .collect();
        self.backoff.retain(|uid, _| alive.contains(uid));
        if replica_sets.is_empty() {
            return None;
        }
        let mut pods_by_ns = w::pods_by_namespace(world);
        for rs in replica_sets {
            let ns = w::namespace(&rs).to_string();
            let selector = rs["spec"]["selector"].clone();
            if w::selector_is_empty(&selector) {
                // Refused by validation on a real server; nothing to claim.
                continue;
            }
            let active: Vec<Value> = pods_by_ns
                .get(&ns)
                .into_iter()
                .flatten()
                .filter(|p| w::is_active(p))
                .cloned()
                .collect();
            let before = world.rv;
            let mut pods = claim(world, &pods_def, &rs, &selector, active);
            let mut failure = None;
            let uid = w::uid(&rs).to_string();
            let waiting = self.backoff.get(&uid).is_some_and(|(_, at)| *at > now);
            if !w::deleting(&rs) && !waiting {
                let (_, refused) = self.manage(world, &pods_def, &rs, &mut pods, now);
                failure = refused;
            } else if waiting {
                failure = rs["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "ReplicaFailure")
                    .and_then(|c| c["message"].as_str())
                    .map(str::to_string);
            }
            if world.rv != before {
                pods_by_ns = w::pods_by_namespace(world);
            }
            let next = status(&rs, &pods, failure.as_deref());
            if next != rs["status"] {
                let mut updated = rs.clone();
                updated["status"] = next;
                if let Err(e) =
                    world.update(&rs_def, Some(&ns), w::name(&rs), updated, Target::Status)
                {
                    tracing::debug!(error = %e, rs = %w::name(&rs), "replicaset: status");
                }
            }
        }
        self.backoff
            .values()
            .map(|(_, at)| *at)
            .filter(|at| *at > now)
            .min()
    }

    /// `manageReplicas`: whether pods were created or deleted, and the
    /// refusal of a create, if any. `pods` becomes the pods kept.
    fn manage(
        &mut self,
        world: &mut World,
        pods_def: &ResourceDef,
        rs: &Value,
        pods: &mut Vec<Value>,
        now: Instant,
    ) -> (bool, Option<String>) {
        let wanted = w::replicas(rs);
        let diff = pods.len() as i64 - wanted;
        let uid = w::uid(rs).to_string();
        if diff < 0 {
            let missing = (-diff).min(BURST_REPLICAS);
            let mut changed = false;
            for _ in 0..missing {
                let pod = pod_from_template(rs);
                match world.create(pods_def, Some(w::namespace(rs)), pod) {
                    Ok(created) => {
                        changed = true;
                        let message = format!("Created pod: {}", w::name(&created));
                        record_event(world, COMPONENT, rs, "Normal", "SuccessfulCreate", &message);
                        pods.push(created);
                    }
                    Err(e) => {
                        let message = format!("Error creating: {}", e.message);
                        record_event(world, COMPONENT, rs, "Warning", "FailedCreate", &message);
                        let failures = self.backoff.get(&uid).map_or(0, |(n, _)| *n);
                        let wait = BACKOFF_FIRST
                            .saturating_mul(2u32.saturating_pow(failures))
                            .min(BACKOFF_MAX);
                        self.backoff.insert(uid, (failures + 1, now + wait));
                        return (changed, Some(message));
                    }
                }
            }
            self.backoff.remove(&uid);
            return (changed, None);
        }
        self.backoff.remove(&uid);
        if diff == 0 {
            return (false, None);
        }
        let surplus = diff.min(BURST_REPLICAS) as usize;
        let victims = pods_to_delete(pods.clone(), surplus);
        let mut changed = false;
        for victim in &victims {
            let ns = w::namespace(victim).to_string();
            let name = w::name(victim).to_string();
            match world.delete(pods_def, Some(&ns), &name, &json!({})) {
                Ok(_) => {
                    changed = true;
                    let message = format!("Deleted pod: {name}");
                    record_event(world, COMPONENT, rs, "Normal", "SuccessfulDelete", &message);
                }
                Err(e) => {
                    let message = format!("Error deleting: {}", e.message);
                    record_event(world, COMPONENT, rs, "Warning", "FailedDelete", &message);
                }
            }
        }
        let gone: std::collections::HashSet<&str> = victims.iter().map(w::uid).collect();
        pods.retain(|p| !gone.contains(w::uid(p)));
        (changed, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, phase: &str, ready: bool, created: &str) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created},
               "spec": {"nodeName": node},
               "status": {"phase": phase, "conditions": [
                   {"type": "Ready", "status": if ready { "True" } else { "False" },
                    "lastTransitionTime": created}]}})
    }

    fn names(pods: &[Value]) -> Vec<&str> {
        pods.iter().map(w::name).collect()
    }

    #[test]
    fn surplus_pods_go_unscheduled_then_pending_then_not_ready_then_newest() {
        let pods = vec![
            pod("running-old", "n1", "Running", true, "2026-01-01T00:00:00Z"),
            pod("running-new", "n2", "Running", true, "2026-01-02T00:00:00Z"),
            pod("not-ready", "n3", "Running", false, "2026-01-01T00:00:00Z"),
            pod("pending", "n4", "Pending", false, "2026-01-01T00:00:00Z"),
            pod("unscheduled", "", "Pending", false, "2026-01-01T00:00:00Z"),
        ];
        let order = pods_to_delete(pods.clone(), 5);
        assert_eq!(
            names(&order),
            [
                "unscheduled",
                "pending",
                "not-ready",
                "running-new",
                "running-old"
            ]
        );
        assert_eq!(names(&pods_to_delete(pods, 2)), ["unscheduled", "pending"]);
    }

    #[test]
    fn a_lower_deletion_cost_and_a_crowded_node_go_first() {
        let mut cheap = pod("cheap", "n1", "Running", true, "2026-01-01T00:00:00Z");
        cheap["metadata"]["annotations"] =
            json!({"controller.kubernetes.io/pod-deletion-cost": "-5"});
        let pods = vec![
            pod("alone", "n2", "Running", true, "2026-01-03T00:00:00Z"),
            pod("crowded-a", "n3", "Running", true, "2026-01-01T00:00:00Z"),
            pod("crowded-b", "n3", "Running", true, "2026-01-01T00:00:00Z"),
            cheap,
        ];
        let order = pods_to_delete(pods, 2);
        assert_eq!(names(&order), ["cheap", "crowded-a"]);
    }

    #[test]
    fn pods_come_from_the_template_with_a_controller_reference() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-abc", "namespace": "team", "uid": "u1"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let pod = pod_from_template(&rs);
        assert_eq!(pod["metadata"]["generateName"], "web-abc-");
        assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(
            pod["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1",
                    "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(pod["status"]["phase"], "Pending");
    }
}
