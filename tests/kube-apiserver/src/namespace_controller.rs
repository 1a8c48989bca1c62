//! The namespace controller of kube-controller-manager, as
//! `pkg/controller/namespace/deletion/namespaced_resources_deleter.go`
//! (`Delete`, `deleteAllContent`, `deleteAllContentForGroupVersionResource`,
//! `finalizeNamespace`) and `status_condition_utils.go` (Kubernetes
//! v1.31.0) have it, for every namespace with a `deletionTimestamp`:
//!
//! - phase `Terminating` (`updateNamespaceStatusFunc`);
//! - nothing more once `spec.finalizers` is empty (`finalized`);
//! - every namespaced object in it deleted, background propagation
//!   (`deleteCollection`); what remains — objects whose finalizers hold
//!   them — counted per resource and per finalizer;
//! - the five conditions it maintains set on the status, in order
//!   (`NamespaceDeletionDiscoveryFailure`,
//!   `NamespaceDeletionGroupVersionParsingFailure`,
//!   `NamespaceDeletionContentFailure`, `NamespaceContentRemaining`,
//!   `NamespaceFinalizersRemaining`), `False` with the "ok" reason and
//!   message unless content remains (`SomeResourcesRemain`:
//!   `Some resources are remaining: secrets. has 1 resource instances`;
//!   `SomeFinalizerRemain`: `Some finalizers are remaining: x in 1
//!   resource instances`);
//! - when nothing remains, the `kubernetes` finalizer taken out of
//!   `spec.finalizers` through `/finalize`, after which the API server
//!   removes the namespace (its `metadata.finalizers` permitting).
//!
//! When it syncs a namespace is the real controller's work queue's
//! (`pkg/controller/namespace/namespace_controller.go`, v1.31.0):
//!
//! - every add or update of a namespace with a `deletionTimestamp` queues
//!   it `namespaceDeletionGracePeriod` (5 s) later (`enqueueNamespace`:
//!   `nm.queue.AddAfter(key, namespaceDeletionGracePeriod)`), so a DELETE's
//!   answer says `Terminating` and the content goes seconds later;
//! - a sync that leaves content held by finalizers is a
//!   `ResourcesRemainingError` with `finalizerEstimateSeconds` (15), queued
//!   again `Estimate/2 + 1` = 8 s later (`worker`); its own status write is
//!   an update, queued 5 s later — the delaying queue keeps the earlier.
//!
//! The server's controller loop asks [`NamespaceController::sync`] at
//! every change and at the time it returns.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::crd::GroupResource;
use crate::deletion::{self, Propagation};
use crate::namespace_lifecycle::{self as lifecycle, KUBERNETES};
use crate::store::{Target, World};

/// `conditionTypes` with their `okReasons` and `okMessages`.
const CONDITIONS: &[(&str, &str, &str)] = &[
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What remains in a namespace after a deletion pass.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Remaining {
    /// `resource.group` → objects left.
    pub by_resource: BTreeMap<String, usize>,
    /// finalizer → objects holding it.
    pub by_finalizer: BTreeMap<String, usize>,
}

/// `ProcessContentTotals` then `updateConditions`: the conditions after
/// this pass, given the ones the namespace has (a condition keeps its
/// `lastTransitionTime` unless its status changes).
pub fn conditions(old: &[Value], remaining: &Remaining) -> Vec<Value> {
    let mut failing: BTreeMap<&str, (String, String)> = BTreeMap::new();
    if !remaining.by_resource.is_empty() {
        let list: Vec<String> = remaining
            .by_resource
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        failing.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain".into(),
                format!("Some resources are remaining: {}", list.join(", ")),
            ),
        );
    }
    if !remaining.by_finalizer.is_empty() {
        let list: Vec<String> = remaining
            .by_finalizer
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        failing.insert(
            "NamespaceFinalizersRemaining",
            (
                "SomeFinalizerRemain".into(),
                format!("Some finalizers are remaining: {}", list.join(", ")),
            ),
        );
    }
    let mut out: Vec<Value> = old.to_vec();
    for (kind, ok_reason, ok_message) in CONDITIONS {
        let (status, reason, message) = match failing.get(kind) {
            Some((r, m)) => ("True", r.clone(), m.clone()),
            None => ("False", ok_reason.to_string(), ok_message.to_string()),
        };
        match out.iter_mut().find(|c| c["type"] == *kind) {
            None => out.push(
                json!({"type": kind, "status": status, "lastTransitionTime": now(),
                                    "reason": reason, "message": message}),
            ),
            Some(c) => {
                if c["status"] != status {
                    c["lastTransitionTime"] = json!(now());
                }
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
        }
    }
    out
}

/// `namespaceDeletionGracePeriod` (`namespace_controller.go`): how long
/// after an event of a deleted namespace it is synced.
pub const DELETION_GRACE: Duration = Duration::from_secs(5);
/// `finalizerEstimateSeconds` (`namespaced_resources_deleter.go`), as the
/// worker requeues it: `Estimate/2 + 1` seconds.
pub const REMAINING_RECHECK: Duration = Duration::from_secs(15 / 2 + 1);

/// The controller's work queue: the namespaces it will sync, and when,
/// and the `resourceVersion` of each it last observed (its informer).
#[derive(Debug, Default)]
pub struct NamespaceController {
    queue: HashMap<String, Instant>,
    observed: HashMap<String, String>,
    failures: HashMap<String, u32>,
}

impl NamespaceController {
    /// `AddAfter`: a namespace already waiting keeps the earlier time, as
    /// client-go's delaying queue keeps it (`delaying_queue.go`,
    /// `insert`: "if the entry already exists, update the time only if it
    /// would cause the item to be queued sooner").
    fn add_after(&mut self, name: &str, at: Instant) {
        let due = self.queue.entry(name.to_string()).or_insert(at);
        if at < *due {
            *due = at;
        }
    }

    /// Observe the namespaces as the informer's event handlers do, then
    /// sync those due at `now`. Returns when the next is due.
    pub fn sync(&mut self, world: &mut World, now: Instant) -> Option<Instant> {
        let namespaces = world.registry.get(&GroupResource::new("", "namespaces"))?;
        // Read in place, not copied: this runs after every batch of
        // writes, and a world may hold thousands of namespaces.
        let empty = std::collections::BTreeMap::new();
        let stored = world
            .objects
            .get(&namespaces.group_resource())
            .unwrap_or(&empty);
        for (name, namespace) in stored {
            let rv = namespace["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            // AddFunc/UpdateFunc → `enqueueNamespace`: only deleted ones.
            if self.observed.get(name).is_some_and(|seen| seen == rv) {
                continue;
            }
            self.observed.insert(name.clone(), rv.to_string());
            if namespace["metadata"]["deletionTimestamp"].is_string() {
                self.add_after(name, now + DELETION_GRACE);
            }
        }
        // `syncNamespaceFromKey`: a namespace gone is nothing to do. Every
        // stored one is observed now, so a count that differs means some
        // observed ones are gone.
        if self.observed.len() != stored.len() {
            self.observed.retain(|name, _| stored.contains_key(name));
            self.queue.retain(|name, _| stored.contains_key(name));
            self.failures.retain(|name, _| stored.contains_key(name));
        }
        let due: Vec<String> = self
            .queue
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.queue.remove(&name);
            match sync_namespace(world, &name) {
                Synced::Done => {
                    self.failures.remove(&name);
                }
                Synced::ContentRemains => {
                    self.failures.remove(&name);
                    self.add_after(&name, now + REMAINING_RECHECK);
                }
                Synced::Failed => {
                    // `nsControllerRateLimiter`: 5 ms doubling per failure,
                    // at most 60 s.
                    let n = self.failures.entry(name.clone()).or_default();
                    let backoff = Duration::from_millis(5)
                        .saturating_mul(1 << (*n).min(14))
                        .min(Duration::from_secs(60));
                    *n += 1;
                    self.add_after(&name, now + backoff);
                }
            }
        }
        self.queue.values().min().copied()
    }
}

/// How a namespace's sync ended.
#[derive(Debug, PartialEq, Eq)]
enum Synced {
    Done,
    ContentRemains,
    /// A write refused: `AddRateLimited`.
    Failed,
}

/// `namespacedResourcesDeleter.Delete` for one namespace.
fn sync_namespace(world: &mut World, name: &str) -> Synced {
    let Some(namespaces) = world.registry.get(&GroupResource::new("", "namespaces")) else {
        return Synced::Done;
    };
    let Some(namespace) = world
        .stored(&namespaces.group_resource(), name)
        .cloned()
        .filter(|n| n["metadata"]["deletionTimestamp"].is_string())
    else {
        return Synced::Done;
    };
    let name = name.to_string();
    let mut namespace = namespace;
    if !lifecycle::terminating(&namespace) {
        let mut status = namespace.clone();
        status["status"]["phase"] = json!("Terminating");
        match world.update(&namespaces, None, &name, status, Target::Status) {
            Ok(updated) => namespace = updated,
            Err(e) => {
                tracing::warn!(namespace = %name, error = %e, "namespace controller: phase");
                return Synced::Failed;
            }
        }
    }
    if lifecycle::spec_finalized(&namespace) {
        return Synced::Done;
    }
    let remaining = delete_all_content(world, &name);
    let old = namespace["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let new = conditions(&old, &remaining);
    if new != old {
        let mut status = namespace.clone();
        status["status"]["conditions"] = json!(new);
        match world.update(&namespaces, None, &name, status, Target::Status) {
            Ok(updated) => namespace = updated,
            Err(e) => {
                tracing::warn!(namespace = %name, error = %e, "namespace controller: conditions");
                return Synced::Failed;
            }
        }
    }
    if remaining != Remaining::default() {
        return Synced::ContentRemains;
    }
    let mut finalized = namespace.clone();
    let kept: Vec<Value> = namespace["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != KUBERNETES)
        .cloned()
        .collect();
    finalized["spec"]["finalizers"] = json!(kept);
    if let Err(e) = world.update(&namespaces, None, &name, finalized, Target::Finalize) {
        tracing::warn!(namespace = %name, error = %e, "namespace controller: finalize");
        return Synced::Failed;
    }
    Synced::Done
}

/// `deleteAllContent`: delete what is in `namespace`, then count what
/// is left.
fn delete_all_content(world: &mut World, namespace: &str) -> Remaining {
    let defs: Vec<_> = world
        .registry
        .all()
        .filter(|d| d.namespaced)
        .cloned()
        .collect();
    let mut remaining = Remaining::default();
    let prefix = format!("{namespace}/");
    for def in defs {
        let gr = def.group_resource();
        let in_namespace = |world: &World| -> Vec<Value> {
            world
                .objects
                .get(&gr)
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| k.starts_with(&prefix))
                        .map(|(_, v)| v.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        for object in in_namespace(world) {
            if let Err(e) = world.delete_with(&def, &object, Propagation::Background) {
                tracing::warn!(namespace, error = %e, "namespace controller: delete");
            }
        }
        let left = in_namespace(world);
        if left.is_empty() {
            continue;
        }
        remaining
            .by_resource
            .insert(format!("{}.{}", def.plural, def.group), left.len());
        for object in &left {
            for f in deletion::finalizer_names(object) {
                *remaining.by_finalizer.entry(f).or_default() += 1;
            }
        }
    }
    remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_say_what_remains() {
        let mut remaining = Remaining::default();
        remaining.by_resource.insert("secrets.".into(), 1);
        remaining.by_finalizer.insert("x.io/hold".into(), 1);
        let c = conditions(&[], &remaining);
        let types: Vec<&str> = c.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, CONDITIONS.iter().map(|c| c.0).collect::<Vec<_>>());
        assert_eq!(c[3]["status"], "True");
        assert_eq!(
            c[3]["message"],
            "Some resources are remaining: secrets. has 1 resource instances"
        );
        assert_eq!(
            c[4]["message"],
            "Some finalizers are remaining: x.io/hold in 1 resource instances"
        );
        let done = conditions(&c, &Remaining::default());
        assert_eq!(done[3]["status"], "False");
        assert_eq!(done[3]["reason"], "ContentRemoved");
    }
}
