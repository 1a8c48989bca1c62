//! The disruption controller of kube-controller-manager
//! (`pkg/controller/disruption/disruption.go`, Kubernetes v1.31.0): it
//! keeps each policy/v1 PodDisruptionBudget's status, which the eviction
//! subresource (`eviction`) reads and decrements.
//!
//! Per PodDisruptionBudget, one pass (`trySync`):
//!
//! - its pods (`getPodsForPdb`): the pods of its namespace its
//!   `spec.selector` selects (`LabelSelectorAsSelector`: no selector
//!   selects none, an empty one all);
//! - `expectedPods` and `desiredHealthy` (`getExpectedPodCount`): with
//!   `maxUnavailable` (int or percent, rounded up), the scale of the pods'
//!   controllers less it (never below 0); with an integer `minAvailable`,
//!   it, and the number of pods; with a percent `minAvailable`, it of the
//!   controllers' scale, rounded up. The scale (`getExpectedScale`) is the
//!   sum, over the distinct controllers of the pods, of a Deployment's
//!   `spec.replicas` (for a pod of a ReplicaSet a Deployment controls,
//!   `getPodDeployment`) or a ReplicaSet's (`getPodReplicaSet`); pods with
//!   no controller are left out (`unmanagedPods`); a controller of any
//!   other kind (StatefulSets, ReplicationControllers, scale subresources
//!   of custom resources: not served here) fails the sync, as the real
//!   one fails on a controller it cannot find ("found no controllers for
//!   pod");
//! - `currentHealthy` (`countHealthyPods`): pods not being deleted, not in
//!   `disruptedPods` younger than `DeletionTimeout` (2 minutes), and
//!   Ready; `disruptedPods` (`buildDisruptedPodMap`) keeps the entries the
//!   eviction subresource wrote for pods still there and not past the
//!   timeout, and the controller looks again when the first one expires;
//! - the status (`updatePdbStatus`): `disruptionsAllowed = currentHealthy
//!   − desiredHealthy`, 0 when negative or when `expectedPods` is 0, with
//!   `observedGeneration` and the `DisruptionAllowed` condition
//!   (`UpdateDisruptionAllowedCondition`,
//!   `staging/src/k8s.io/component-helpers/apps/poddisruptionbudget/helpers.go`:
//!   `SufficientPods` / `InsufficientPods`); a failed sync (`failSafe`)
//!   sets `disruptionsAllowed` to 0 and the condition to `False`,
//!   `SyncFailed`, with the error, leaving `observedGeneration` as it was.
//!
//! Not modelled: the controller's Events (`NoPods`, `UnmanagedPods`,
//! `CalculateExpectedPodCountFailed`: this controller runs after every
//! change in the server, and an Event per pass would never settle), and
//! the stale `DisruptionTarget` condition clean-up.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde_json::{json, Value};

use crate::store::{Target, World};
use crate::workload::{self as w, controller_of};

/// `DeletionTimeout`: how long an eviction's entry in `disruptedPods`
/// keeps its pod from counting as healthy.
pub const DELETION_TIMEOUT: chrono::Duration = chrono::Duration::minutes(2);

/// `policy.DisruptionAllowedCondition` and its reasons
/// (`staging/src/k8s.io/api/policy/v1/types.go`).
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
const SUFFICIENT_PODS: &str = "SufficientPods";
const INSUFFICIENT_PODS: &str = "InsufficientPods";
const SYNC_FAILED: &str = "SyncFailed";

/// `apimeta.SetStatusCondition`
/// (`staging/src/k8s.io/apimachinery/pkg/api/meta/conditions.go`): added
/// with `lastTransitionTime` now; an existing one gets the new status (and
/// a new transition time only when the status changed), reason, message
/// and observedGeneration.
pub fn set_condition(conditions: &mut Vec<Value>, mut condition: Value, now: &str) {
    match conditions
        .iter_mut()
        .find(|c| c["type"] == condition["type"])
    {
        Some(existing) => {
            if existing["status"] != condition["status"] {
                existing["lastTransitionTime"] = json!(now);
            }
            for field in ["status", "reason", "message", "observedGeneration"] {
                existing[field] = condition[field].clone();
            }
        }
        None => {
            condition["lastTransitionTime"] = json!(now);
            conditions.push(condition);
        }
    }
}

/// `UpdateDisruptionAllowedCondition`: `True`/`SufficientPods` while
/// disruptions are allowed, else `False`/`InsufficientPods`.
pub fn update_disruption_allowed_condition(status: &mut Value, now: &str) {
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0) > 0;
    let (value, reason) = if allowed {
        ("True", SUFFICIENT_PODS)
    } else {
        ("False", INSUFFICIENT_PODS)
    };
    set_condition(
        &mut conditions,
        json!({"type": DISRUPTION_ALLOWED, "status": value, "reason": reason, "message": "",
               "observedGeneration": status["observedGeneration"]}),
        now,
    );
    status["conditions"] = Value::Array(conditions);
}

/// What a sync computed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counts {
    expected: i64,
    desired_healthy: i64,
}

/// `getExpectedScale`: the summed scale of the pods' controllers.
fn expected_scale(world: &World, pdb: &Value, pods: &[Value]) -> Result<i64, String> {
    let ns = w::namespace(pdb);
    let find = |gr: &crate::crd::GroupResource, name: &str| {
        world
            .stored(gr, &crate::store::key(Some(ns), name))
            .cloned()
    };
    let mut scales: BTreeMap<String, i64> = BTreeMap::new();
    for pod in pods {
        // Unmanaged pods are left out (`unmanagedPods`).
        let Some(reference) = controller_of(pod) else {
            continue;
        };
        let ref_uid = reference["uid"].as_str().unwrap_or_default();
        if scales.contains_key(ref_uid) {
            continue;
        }
        let apps = reference["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apps/"));
        let ref_name = reference["name"].as_str().unwrap_or_default();
        let rs = (apps && reference["kind"] == "ReplicaSet")
            .then(|| find(&w::replica_sets(), ref_name))
            .flatten()
            .filter(|rs| w::uid(rs) == ref_uid);
        let found = rs.and_then(|rs| match controller_of(&rs) {
            // `getPodDeployment`: the Deployment of the ReplicaSet.
            Some(owner) if owner["kind"] == "Deployment" => {
                let name = owner["name"].as_str().unwrap_or_default();
                find(&w::deployments(), name)
                    .filter(|d| w::uid(d) == owner["uid"].as_str().unwrap_or_default())
                    .map(|d| (w::uid(&d).to_string(), w::replicas(&d)))
            }
            // `getPodReplicaSet`: a ReplicaSet no Deployment controls.
            _ => Some((w::uid(&rs).to_string(), w::replicas(&rs))),
        });
        match found {
            Some((uid, scale)) => {
                scales.insert(uid, scale);
                // The pod's own reference is known too, so its siblings
                // are not looked up again.
                scales.entry(ref_uid.to_string()).or_insert(0);
            }
            None => return Err(format!("found no controllers for pod {:?}", w::name(pod))),
        }
    }
    Ok(scales.values().sum())
}

/// `getExpectedPodCount`.
fn expected_pod_count(world: &World, pdb: &Value, pods: &[Value]) -> Result<Counts, String> {
    let spec = &pdb["spec"];
    let invalid = |v: &Value| format!("invalid value for IntOrString: {v}");
    if !spec["maxUnavailable"].is_null() {
        let expected = expected_scale(world, pdb, pods)?;
        let max_unavailable = w::scaled_value(&spec["maxUnavailable"], expected, true)
            .ok_or_else(|| invalid(&spec["maxUnavailable"]))?;
        return Ok(Counts {
            expected,
            desired_healthy: (expected - max_unavailable).max(0),
        });
    }
    let min_available = &spec["minAvailable"];
    if let Some(n) = min_available.as_i64() {
        return Ok(Counts {
            expected: pods.len() as i64,
            desired_healthy: n,
        });
    }
    if min_available.is_string() {
        let expected = expected_scale(world, pdb, pods)?;
        let desired =
            w::scaled_value(min_available, expected, true).ok_or_else(|| invalid(min_available))?;
        return Ok(Counts {
            expected,
            desired_healthy: desired,
        });
    }
    Ok(Counts {
        expected: 0,
        desired_healthy: 0,
    })
}

fn parse_time(value: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// `buildDisruptedPodMap`: the entries still pending, and when the first
/// of them expires.
fn disrupted_pods(
    pods: &[Value],
    pdb: &Value,
    now: chrono::DateTime<chrono::Utc>,
) -> (
    serde_json::Map<String, Value>,
    Option<chrono::DateTime<chrono::Utc>>,
) {
    let mut kept = serde_json::Map::new();
    let mut recheck: Option<chrono::DateTime<chrono::Utc>> = None;
    let Some(recorded) = pdb["status"]["disruptedPods"].as_object() else {
        return (kept, recheck);
    };
    for pod in pods.iter().filter(|p| !w::deleting(p)) {
        let Some(at) = recorded.get(w::name(pod)) else {
            continue;
        };
        let Some(time) = parse_time(at) else {
            continue;
        };
        let expected_deletion = time + DELETION_TIMEOUT;
        if expected_deletion >= now {
            recheck = Some(recheck.map_or(expected_deletion, |r| r.min(expected_deletion)));
            kept.insert(w::name(pod).to_string(), at.clone());
        }
    }
    (kept, recheck)
}

/// `countHealthyPods`.
fn healthy(
    pods: &[Value],
    disrupted: &serde_json::Map<String, Value>,
    now: chrono::DateTime<chrono::Utc>,
) -> i64 {
    pods.iter()
        .filter(|p| !w::deleting(p))
        .filter(|p| {
            disrupted
                .get(w::name(p))
                .and_then(parse_time)
                .is_none_or(|t| t + DELETION_TIMEOUT <= now)
        })
        .filter(|p| w::is_ready(p))
        .count() as i64
}

/// The status `trySync` (or `failSafe`) writes for `pdb`, and when to look
/// again.
fn next_status(
    world: &World,
    pdb: &Value,
    pods: &[Value],
    now: chrono::DateTime<chrono::Utc>,
) -> (Value, Option<chrono::DateTime<chrono::Utc>>) {
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let counts = match expected_pod_count(world, pdb, pods) {
        Ok(counts) => counts,
        Err(error) => {
            // `failSafe`.
            let mut status = pdb["status"].clone();
            if !status.is_object() {
                status = json!({});
            }
            status["disruptionsAllowed"] = json!(0);
            let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
            set_condition(
                &mut conditions,
                json!({"type": DISRUPTION_ALLOWED, "status": "False", "reason": SYNC_FAILED,
                       "message": error,
                       "observedGeneration": status["observedGeneration"].as_i64().unwrap_or(0)}),
                &stamp,
            );
            status["conditions"] = Value::Array(conditions);
            return (status, None);
        }
    };
    let (disrupted, recheck) = disrupted_pods(pods, pdb, now);
    let current_healthy = healthy(pods, &disrupted, now);
    // `updatePdbStatus`: "We require expectedCount to be > 0 so that PDBs
    // which currently match no pods are in a safe state when their first
    // pods appear but this controller has not updated their status yet."
    let mut allowed = current_healthy - counts.desired_healthy;
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = &pdb["status"];
    let unchanged = old["currentHealthy"].as_i64().unwrap_or(0) == current_healthy
        && old["desiredHealthy"].as_i64().unwrap_or(0) == counts.desired_healthy
        && old["expectedPods"].as_i64().unwrap_or(0) == counts.expected
        && old["disruptionsAllowed"].as_i64().unwrap_or(0) == allowed
        && old["observedGeneration"].as_i64().unwrap_or(0) == w::generation(pdb)
        && old["disruptedPods"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            == disrupted;
    if unchanged {
        return (old.clone(), recheck);
    }
    let mut status = json!({
        "currentHealthy": current_healthy,
        "desiredHealthy": counts.desired_healthy,
        "expectedPods": counts.expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": w::generation(pdb),
        "conditions": old["conditions"].as_array().cloned().unwrap_or_default(),
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    update_disruption_allowed_condition(&mut status, &stamp);
    (status, recheck)
}

/// One pass over every PodDisruptionBudget at `now`; the next time one
/// must be looked at again (an entry of `disruptedPods` expiring), if any.
pub fn sync(world: &mut World, now: Instant) -> Option<Instant> {
    let gr = w::pod_disruption_budgets();
    let def = world.registry.get(&gr)?;
    let utc = chrono::Utc::now();
    let pdbs = world.list_objects(&gr);
    if pdbs.is_empty() {
        return None;
    }
    let pods_by_ns: HashMap<String, Vec<Value>> = w::pods_by_namespace(world);
    let mut due: Option<Instant> = None;
    for pdb in pdbs.iter().filter(|p| !w::deleting(p)) {
        let pods: Vec<Value> = pods_by_ns
            .get(w::namespace(pdb))
            .into_iter()
            .flatten()
            .filter(|p| w::selects(&pdb["spec"]["selector"], p))
            .cloned()
            .collect();
        let (status, recheck) = next_status(world, pdb, &pods, utc);
        if let Some(at) = recheck {
            let wait = (at - utc).to_std().unwrap_or_default();
            let at = now + wait;
            due = Some(due.map_or(at, |d| d.min(at)));
        }
        if status == pdb["status"] {
            continue;
        }
        let mut updated = pdb.clone();
        updated["status"] = status;
        let ns = w::namespace(pdb).to_string();
        let name = w::name(pdb).to_string();
        if let Err(e) = world.update(&def, Some(&ns), &name, updated, Target::Status) {
            tracing::debug!(error = %e, pdb = %name, "disruption controller: status");
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool, owner: Option<(&str, &str)>) -> Value {
        let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "a"}},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if let Some((kind, uid)) = owner {
            pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
                "name": "rs", "uid": uid, "controller": true}]);
        }
        pod
    }

    #[test]
    fn healthy_pods_are_ready_not_deleting_and_not_just_disrupted() {
        let now = chrono::Utc::now();
        let mut deleting = pod("d", true, None);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let pods = vec![
            pod("a", true, None),
            pod("b", false, None),
            deleting,
            pod("e", true, None),
        ];
        let mut disrupted = serde_json::Map::new();
        disrupted.insert("e".into(), json!(now.to_rfc3339()));
        assert_eq!(healthy(&pods, &disrupted, now), 1);
        // Past the timeout the entry no longer counts.
        assert_eq!(healthy(&pods, &disrupted, now + DELETION_TIMEOUT * 2), 2);
    }

    #[test]
    fn min_available_int_expects_the_pods_selected() {
        let world =
            crate::store::World::new(Default::default(), tokio::sync::broadcast::channel(1).0);
        let pdb = json!({"metadata": {"namespace": "ns"}, "spec": {"minAvailable": 2}});
        let pods = vec![
            pod("a", true, None),
            pod("b", true, None),
            pod("c", true, None),
        ];
        let counts = expected_pod_count(&world, &pdb, &pods).unwrap();
        assert_eq!(
            counts,
            Counts {
                expected: 3,
                desired_healthy: 2
            }
        );
        let (status, _) = next_status(&world, &pdb, &pods, chrono::Utc::now());
        assert_eq!(status["disruptionsAllowed"], 1);
        assert_eq!(status["conditions"][0]["reason"], SUFFICIENT_PODS);
    }

    #[test]
    fn a_percentage_without_a_known_controller_fails_safe() {
        let world =
            crate::store::World::new(Default::default(), tokio::sync::broadcast::channel(1).0);
        let pdb = json!({"metadata": {"namespace": "ns", "generation": 1},
            "spec": {"maxUnavailable": "50%"}, "status": {"disruptionsAllowed": 3}});
        let pods = vec![pod("a", true, Some(("StatefulSet", "u1")))];
        let (status, _) = next_status(&world, &pdb, &pods, chrono::Utc::now());
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["conditions"][0]["reason"], SYNC_FAILED);
        assert_eq!(
            status["conditions"][0]["message"],
            "found no controllers for pod \"a\""
        );
        assert!(status["observedGeneration"].is_null());
        // Unmanaged pods are left out: no controller, no scale, nothing allowed.
        let pods = vec![pod("a", true, None)];
        let (status, _) = next_status(&world, &pdb, &pods, chrono::Utc::now());
        assert_eq!(
            (
                status["expectedPods"].as_i64(),
                status["disruptionsAllowed"].as_i64()
            ),
            (Some(0), Some(0))
        );
    }
}
