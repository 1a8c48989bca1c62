//! The Deployment controller of kube-controller-manager
//! (`pkg/controller/deployment/`, Kubernetes v1.31.0), its basics, one
//! pass over every Deployment at a time (`syncDeployment`):
//!
//! - its ReplicaSets (`getReplicaSetsForDeployment`, `ClaimReplicaSets`):
//!   adopted and released by its selector as [`crate::replicaset::claim`]
//!   does for pods; a Deployment selecting everything is left alone
//!   (`SelectingAll`);
//! - the new ReplicaSet (`getNewReplicaSet`, `sync.go`): the oldest of its
//!   ReplicaSets whose pod template equals the Deployment's but for the
//!   `pod-template-hash` label (`FindNewReplicaSet`, `EqualIgnoreHash`,
//!   `util/deployment_util.go`); if none, one is created named
//!   `<deployment>-<hash>`, the hash of the template and
//!   `status.collisionCount` (`ComputeHash`,
//!   `pkg/controller/controller_utils.go`) as the `pod-template-hash` label
//!   of the ReplicaSet, of its selector and of its template, with the
//!   Deployment's `minReadySeconds`, a controller reference to the
//!   Deployment and the `deployment.kubernetes.io/revision`,
//!   `desired-replicas` and `max-replicas` annotations; a name taken by a
//!   ReplicaSet with another template bumps `status.collisionCount`
//!   (`getNewReplicaSet`'s hash-collision branch);
//! - scaling: the new ReplicaSet to `spec.replicas`, every old one to 0
//!   (Event `ScalingReplicaSet`, "Scaled up/down replica set …");
//! - old ReplicaSets beyond `revisionHistoryLimit` (default 10) with no
//!   replicas are deleted (`cleanupDeployment`);
//! - the status (`calculateStatus`, `sync.go`): `replicas`,
//!   `updatedReplicas`, `readyReplicas`, `availableReplicas`,
//!   `unavailableReplicas`, `observedGeneration`, `collisionCount`, and the
//!   `Available` condition (`MinimumReplicasAvailable` /
//!   `MinimumReplicasUnavailable`, against `maxUnavailable`, 25% of
//!   `replicas` rounded down by default, 0 for `Recreate`). The revision is
//!   written into the Deployment's `deployment.kubernetes.io/revision`.
//!
//! Not modelled, on purpose: the pacing of a rollout — `RollingUpdate`'s
//! `maxSurge`/`maxUnavailable` steps and `Recreate`'s wait for old pods to
//! go are one step here (the new ReplicaSet at full scale, the old ones at
//! 0, at once); `paused` Deployments are only given a status; the
//! `Progressing` condition and `progressDeadlineSeconds`; rollbacks. The
//! template hash is FNV-32a over the template's canonical JSON, not over
//! Go's `DeepHashObject` print of it: the same shape of name, another
//! value than a real cluster's.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::replicaset::{claim, controller_ref};
use crate::store::{Target, World};
use crate::workload::{self as w, record_event};

/// The component the Events name.
pub const COMPONENT: &str = "deployment-controller";

/// `DefaultDeploymentUniqueLabelKey`.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// `RevisionAnnotation`, `DesiredReplicasAnnotation`, `MaxReplicasAnnotation`.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// A JSON value with every object's keys in order, so that equal
/// templates hash alike whatever order they were written in.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            let mut out = serde_json::Map::new();
            for (k, v) in sorted {
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// `rand.SafeEncodeString`'s alphabet
/// (`staging/src/k8s.io/apimachinery/pkg/util/rand/rand.go`).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `ComputeHash`: FNV-32a of the template (here its canonical JSON), then
/// of the collision count as 8 little-endian bytes, the decimal of the sum
/// written in `SafeEncodeString`'s alphabet.
pub fn compute_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(canonical(template).to_string().as_bytes());
    if let Some(count) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        feed(&bytes);
    }
    hash.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The template without its `pod-template-hash` label (`EqualIgnoreHash`).
fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            if let Some(meta) = t["metadata"].as_object_mut() {
                meta.remove("labels");
            }
        }
    }
    if t["metadata"].as_object().is_some_and(|m| m.is_empty()) {
        if let Some(map) = t.as_object_mut() {
            map.remove("metadata");
        }
    }
    canonical(&t)
}

fn revision(object: &Value) -> i64 {
    object["metadata"]["annotations"][REVISION]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// `MaxUnavailable`: 0 for `Recreate`, else `maxUnavailable` (default
/// 25%) of `replicas` rounded down, never above `replicas`.
fn max_unavailable(d: &Value) -> i64 {
    let replicas = w::replicas(d);
    if d["spec"]["strategy"]["type"] == "Recreate" || replicas == 0 {
        return 0;
    }
    let value = match &d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] {
        Value::Null => json!("25%"),
        v => v.clone(),
    };
    w::scaled_value(&value, replicas, false)
        .unwrap_or(0)
        .clamp(0, replicas)
}

/// The new ReplicaSet of `d` with `hash`.
fn new_replica_set(d: &Value, hash: &str, revision: i64) -> Value {
    let mut template = d["spec"]["template"].clone();
    template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
    let mut selector = d["spec"]["selector"].clone();
    selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
    let replicas = w::replicas(d);
    let max = replicas + surge(d);
    let mut spec = json!({"replicas": replicas, "selector": selector, "template": template});
    if let Some(min_ready) = d["spec"]["minReadySeconds"].as_i64() {
        spec["minReadySeconds"] = json!(min_ready);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{}-{hash}", w::name(d)),
            "namespace": w::namespace(d),
            "labels": template["metadata"]["labels"],
            "annotations": {
                REVISION: revision.to_string(),
                DESIRED_REPLICAS: replicas.to_string(),
                MAX_REPLICAS: max.to_string(),
            },
            "ownerReferences": [controller_ref(d)],
        },
        "spec": spec,
    })
}

/// `MaxSurge`: 0 for `Recreate`, else `maxSurge` (default 25%) rounded up.
fn surge(d: &Value) -> i64 {
    if d["spec"]["strategy"]["type"] == "Recreate" {
        return 0;
    }
    let value = match &d["spec"]["strategy"]["rollingUpdate"]["maxSurge"] {
        Value::Null => json!("25%"),
        v => v.clone(),
    };
    w::scaled_value(&value, w::replicas(d), true)
        .unwrap_or(0)
        .max(0)
}

/// `scaleReplicaSetAndRecordEvent`.
fn scale(world: &mut World, d: &Value, rs: &Value, to: i64) {
    let from = w::replicas(rs);
    if from == to {
        return;
    }
    let Some(def) = world.registry.get(&w::replica_sets()) else {
        return;
    };
    let mut scaled = rs.clone();
    scaled["spec"]["replicas"] = json!(to);
    scaled["metadata"]["annotations"][DESIRED_REPLICAS] = json!(w::replicas(d).to_string());
    scaled["metadata"]["annotations"][MAX_REPLICAS] =
        json!((w::replicas(d) + surge(d)).to_string());
    let ns = w::namespace(rs).to_string();
    let name = w::name(rs).to_string();
    match world.update(&def, Some(&ns), &name, scaled, Target::Main) {
        Ok(_) => {
            let way = if to > from { "up" } else { "down" };
            let message = format!("Scaled {way} replica set {name} from {from} to {to}");
            record_event(world, COMPONENT, d, "Normal", "ScalingReplicaSet", &message);
        }
        Err(e) => tracing::debug!(error = %e, rs = %name, "deployment: scale"),
    }
}

/// `calculateStatus`.
fn status(d: &Value, all: &[Value], new: Option<&Value>) -> Value {
    let sum = |sets: &[&Value], f: &dyn Fn(&Value) -> i64| sets.iter().map(|rs| f(rs)).sum::<i64>();
    let all_refs: Vec<&Value> = all.iter().collect();
    let actual = |rs: &Value| rs["status"]["replicas"].as_i64().unwrap_or(0);
    let available = sum(&all_refs, &|rs| {
        rs["status"]["availableReplicas"].as_i64().unwrap_or(0)
    });
    let total = sum(&all_refs, &|rs| w::replicas(rs));
    let mut status = json!({
        "observedGeneration": w::generation(d),
        "replicas": sum(&all_refs, &actual),
        "updatedReplicas": new.map_or(0, actual),
        "readyReplicas": sum(&all_refs, &|rs| rs["status"]["readyReplicas"].as_i64().unwrap_or(0)),
        "availableReplicas": available,
        "unavailableReplicas": (total - available).max(0),
    });
    if let Some(count) = d["status"]["collisionCount"].as_i64() {
        status["collisionCount"] = json!(count);
    }
    let mut conditions = d["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let (value, reason, message) = if available >= w::replicas(d) - max_unavailable(d) {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    // `SetDeploymentCondition`: replaced when status or reason changes,
    // with the transition time kept if the status did not change.
    let now = crate::store::now();
    match conditions.iter_mut().find(|c| c["type"] == "Available") {
        Some(c) if c["status"] == value && c["reason"] == reason => {}
        Some(c) => {
            let transition = if c["status"] == value {
                c["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *c = json!({"type": "Available", "status": value, "reason": reason, "message": message,
                        "lastUpdateTime": now, "lastTransitionTime": transition});
        }
        None => conditions.push(
            json!({"type": "Available", "status": value, "reason": reason,
            "message": message, "lastUpdateTime": now, "lastTransitionTime": now}),
        ),
    }
    status["conditions"] = json!(conditions);
    status
}

/// One pass over every Deployment.
pub fn sync(world: &mut World) {
    let (Some(d_def), Some(rs_def)) = (
        world.registry.get(&w::deployments()),
        world.registry.get(&w::replica_sets()),
    ) else {
        return;
    };
    for d in world.list_objects(&w::deployments()) {
        let ns = w::namespace(&d).to_string();
        let name = w::name(&d).to_string();
        let selector = d["spec"]["selector"].clone();
        if w::selector_is_empty(&selector) {
            // `SelectingAll`: "This deployment is selecting all pods. A
            // non-empty selector is required."
            continue;
        }
        let candidates: Vec<Value> = world
            .list_objects(&w::replica_sets())
            .into_iter()
            .filter(|rs| w::namespace(rs) == ns)
            .collect();
        let mut owned = claim(world, &rs_def, &d, &selector, candidates);
        // Oldest first (`ReplicaSetsByCreationTimestamp`: then by name).
        owned.sort_by(|a, b| {
            let key = |rs: &Value| {
                (
                    rs["metadata"]["creationTimestamp"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    w::name(rs).to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        let template = without_hash(&d["spec"]["template"]);
        let mut new = owned
            .iter()
            .find(|rs| without_hash(&rs["spec"]["template"]) == template)
            .cloned();
        let paused = d["spec"]["paused"] == json!(true);
        if !w::deleting(&d) && !paused {
            if new.is_none() {
                let collisions = d["status"]["collisionCount"].as_i64();
                let hash = compute_hash(&d["spec"]["template"], collisions);
                let next_revision = owned.iter().map(revision).max().unwrap_or(0) + 1;
                let rs = new_replica_set(&d, &hash, next_revision);
                match world.create(&rs_def, Some(&ns), rs) {
                    Ok(created) => {
                        let message = format!(
                            "Scaled up replica set {} from 0 to {}",
                            w::name(&created),
                            w::replicas(&created)
                        );
                        record_event(
                            world,
                            COMPONENT,
                            &d,
                            "Normal",
                            "ScalingReplicaSet",
                            &message,
                        );
                        owned.push(created.clone());
                        new = Some(created);
                    }
                    Err(e) if e.code == 409 => {
                        // A ReplicaSet of that name with another template:
                        // a hash collision, resolved by the next count.
                        let mut bumped = d.clone();
                        bumped["status"]["collisionCount"] = json!(collisions.unwrap_or(0) + 1);
                        if let Err(e) =
                            world.update(&d_def, Some(&ns), &name, bumped, Target::Status)
                        {
                            tracing::debug!(error = %e, deployment = %name, "collision count");
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, deployment = %name, "deployment: new replica set");
                        continue;
                    }
                }
            }
            let new_uid = new.as_ref().map(|rs| w::uid(rs).to_string());
            for rs in &owned {
                let to = if Some(w::uid(rs).to_string()) == new_uid {
                    w::replicas(&d)
                } else {
                    0
                };
                scale(world, &d, rs, to);
            }
            cleanup(world, &d, &owned, new_uid.as_deref());
            // Refreshed: the scaling and clean-up above changed them.
            owned = owned
                .iter()
                .filter_map(|rs| {
                    world
                        .stored(&w::replica_sets(), &crate::store::key_of(rs))
                        .cloned()
                })
                .collect();
            new = new.and_then(|n| owned.iter().find(|rs| w::uid(rs) == w::uid(&n)).cloned());
        }
        let mut updated = d.clone();
        updated["status"] = status(&d, &owned, new.as_ref());
        if updated["status"] != d["status"] {
            if let Err(e) = world.update(&d_def, Some(&ns), &name, updated, Target::Status) {
                tracing::debug!(error = %e, deployment = %name, "deployment: status");
            }
        }
        if let Some(rev) = new.as_ref().map(revision).filter(|r| *r > 0) {
            if let Some(current) =
                world.stored(&w::deployments(), &crate::store::key(Some(&ns), &name))
            {
                if current["metadata"]["annotations"][REVISION] != json!(rev.to_string()) {
                    let mut annotated = current.clone();
                    annotated["metadata"]["annotations"][REVISION] = json!(rev.to_string());
                    if let Err(e) = world.update(&d_def, Some(&ns), &name, annotated, Target::Main)
                    {
                        tracing::debug!(error = %e, deployment = %name, "deployment: revision");
                    }
                }
            }
        }
    }
}

/// `cleanupDeployment`: old ReplicaSets with no replicas beyond
/// `revisionHistoryLimit`, oldest revision first.
fn cleanup(world: &mut World, d: &Value, owned: &[Value], new_uid: Option<&str>) {
    let limit = d["spec"]["revisionHistoryLimit"]
        .as_i64()
        .unwrap_or(10)
        .max(0) as usize;
    let mut old: Vec<&Value> = owned
        .iter()
        .filter(|rs| Some(w::uid(rs)) != new_uid && !w::deleting(rs))
        .collect();
    if old.len() <= limit {
        return;
    }
    old.sort_by_key(|rs| revision(rs));
    let excess = old.len() - limit;
    let Some(def) = world.registry.get(&w::replica_sets()) else {
        return;
    };
    for rs in old.into_iter().take(excess) {
        let empty = rs["status"]["replicas"].as_i64().unwrap_or(0) == 0 && w::replicas(rs) == 0;
        if !empty {
            continue;
        }
        if let Err(e) = world.delete(&def, Some(w::namespace(rs)), w::name(rs), &json!({})) {
            tracing::debug!(error = %e, rs = %w::name(rs), "deployment: clean-up");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_follows_the_collision_count() {
        let a =
            json!({"metadata": {"labels": {"app": "w", "tier": "x"}}, "spec": {"containers": []}});
        let b =
            json!({"spec": {"containers": []}, "metadata": {"labels": {"tier": "x", "app": "w"}}});
        assert_eq!(compute_hash(&a, None), compute_hash(&b, None));
        assert_ne!(compute_hash(&a, None), compute_hash(&a, Some(1)));
        assert!(compute_hash(&a, None)
            .bytes()
            .all(|c| ALPHANUMS.contains(&c)));
    }

    #[test]
    fn templates_compare_without_the_hash_label() {
        let d =
            json!({"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c"}]}});
        let mut rs = d.clone();
        rs["metadata"]["labels"][POD_TEMPLATE_HASH] = json!("abc");
        assert_eq!(without_hash(&d), without_hash(&rs));
        rs["spec"]["containers"][0]["image"] = json!("other");
        assert_ne!(without_hash(&d), without_hash(&rs));
    }

    #[test]
    fn max_unavailable_defaults_to_a_quarter_rounded_down() {
        let d = |strategy: Value| json!({"spec": {"replicas": 10, "strategy": strategy}});
        assert_eq!(max_unavailable(&d(json!({}))), 2);
        assert_eq!(max_unavailable(&d(json!({"type": "Recreate"}))), 0);
        assert_eq!(
            max_unavailable(&d(json!({"rollingUpdate": {"maxUnavailable": 3}}))),
            3
        );
    }
}
