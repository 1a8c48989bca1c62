//! Deleting a CustomResourceDefinition deletes its custom resources first,
//! as the apiextensions-apiserver does it (Kubernetes v1.31.0,
//! `staging/src/k8s.io/apiextensions-apiserver/`):
//!
//! - the first DELETE of a CRD (`pkg/registry/customresourcedefinition/etcd.go`,
//!   `REST.Delete`, "upon first request to delete, add our finalizer and
//!   then delegate") only marks it: `deletionTimestamp` now, the finalizer
//!   `customresourcecleanup.apiextensions.k8s.io` added, and the condition
//!   `Terminating` `True`, reason `InstanceDeletionPending`; a later DELETE
//!   is the generic store's (finalizers honoured) — [`mark_for_deletion`],
//!   which the store's DELETE calls;
//! - the CRD finalizer (`pkg/controller/finalizer/crd_finalizer.go`,
//!   `sync`, `deleteInstances`) then, for a CRD marked and holding that
//!   finalizer: `Terminating` `True` `InstanceDeletionInProgress`; if the
//!   resource was established, every custom resource of it deleted
//!   (`DeleteCollection` per namespace, no options: each object's own
//!   finalizers decide, and one held by a finalizer is marked and waits),
//!   then a poll every 5 s for at most a minute (`wait.PollImmediate(5s,
//!   1m)`) until none is left — `Terminating` `False`
//!   `InstanceDeletionCompleted` `removed all instances` — or, past the
//!   minute, `InstanceDeletionCheck` and the sync is retried; a CRD never
//!   established gets `NeverEstablished`. Last the finalizer is removed,
//!   and with no finalizer left the API server removes the CRD
//!   (`ShouldDeleteDuringUpdate`), after which it is no longer served
//!   ([`crate::crd_controller`]).
//!
//! The real finalizer takes its finalizer out in the same `UpdateStatus`
//! that writes the condition (the CRD status strategy keeps the request's
//! `metadata.finalizers`); this server's status writes keep the stored
//! metadata, so the finalizer goes in a second, main write just after.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::crd::{self, GroupResource};
use crate::crd_conditions::{conditions_of, set_condition, FINALIZER};
use crate::crd_controller::{GROUP, RESOURCE};
use crate::deletion;
use crate::store::{Target, World};

/// `wait.PollImmediate(5*time.Second, 1*time.Minute, …)` in
/// `deleteInstances`.
const POLL: Duration = Duration::from_secs(5);
const POLL_TIMEOUT: Duration = Duration::from_secs(60);
/// `workqueue.DefaultControllerRateLimiter`'s first retry.
const RETRY: Duration = Duration::from_millis(5);

fn condition_true(object: &Value, kind: &str) -> bool {
    conditions_of(object)
        .iter()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// A `deleteInstances` poll under way for one CRD (by uid).
#[derive(Debug)]
struct Poll {
    uid: String,
    started: Instant,
    next: Instant,
}

/// The CRD finalizer's state between passes.
#[derive(Debug, Default)]
pub struct CrdFinalizer {
    polls: HashMap<String, Poll>,
    /// A sync to retry at this time (`AddRateLimited`).
    retry: HashMap<String, Instant>,
}

impl CrdFinalizer {
    /// One pass at `now`; returns when the next poll or retry is due.
    pub fn sync(&mut self, world: &mut World, now: Instant) -> Option<Instant> {
        let crds_gr = GroupResource::new(GROUP, RESOURCE);
        let stored = world.list_objects(&crds_gr);
        let marked: Vec<Value> = stored
            .into_iter()
            .filter(|c| {
                c["metadata"]["deletionTimestamp"].is_string()
                    && deletion::finalizer_names(c).iter().any(|f| f == FINALIZER)
            })
            .collect();
        let names: Vec<String> = marked
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        self.polls.retain(|n, _| names.contains(n));
        self.retry.retain(|n, _| names.contains(n));
        for crd in marked {
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let uid = crd["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if self.retry.get(&name).is_some_and(|at| *at > now) {
                continue;
            }
            self.retry.remove(&name);
            match self.polls.get(&name) {
                Some(poll) if poll.uid == uid && poll.next > now => continue,
                Some(poll) if poll.uid == uid => {
                    let started = poll.started;
                    self.poll(world, &crd, &name, started, now);
                }
                _ => self.start(world, crd, &name, now),
            }
        }
        self.polls
            .values()
            .map(|p| p.next)
            .chain(self.retry.values().copied())
            .min()
    }

    /// `sync` from its start: the in-progress condition, the deletes,
    /// then the first (immediate) poll.
    fn start(&mut self, world: &mut World, crd: Value, name: &str, now: Instant) {
        self.polls.remove(name);
        let mut status = crd.clone();
        let mut conditions = conditions_of(&crd);
        set_condition(
            &mut conditions,
            json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                   "message": "CustomResource deletion is in progress"}),
        );
        status["status"]["conditions"] = json!(conditions);
        let Some(crd) = write(world, name, status, Target::Status) else {
            return;
        };
        // `IsCRDConditionTrue(crd, Established)`: only a served resource
        // has instances to delete.
        let served = crd::crd_definition(&crd)
            .ok()
            .and_then(|d| world.registry.get(&d.group_resource()));
        let Some(def) = served.filter(|_| condition_true(&crd, "Established")) else {
            let condition = json!({"type": "Terminating", "status": "False", "reason": "NeverEstablished",
                                   "message": "resource was never established"});
            self.finish(world, &crd, name, condition);
            return;
        };
        let mut errors = Vec::new();
        for object in world.list_objects(&def.group_resource()) {
            let ns = object["metadata"]["namespace"].as_str();
            let object_name = object["metadata"]["name"].as_str().unwrap_or_default();
            if let Err(e) = world.delete(&def, ns, object_name, &Value::Null) {
                if e.code != 404 {
                    errors.push(e.message);
                }
            }
        }
        if !errors.is_empty() {
            let mut failed = crd.clone();
            let mut conditions = conditions_of(&crd);
            let joined = if errors.len() == 1 {
                errors[0].clone()
            } else {
                format!("[{}]", errors.join(", "))
            };
            set_condition(
                &mut conditions,
                json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionFailed",
                       "message": format!("could not issue all deletes: {joined}")}),
            );
            failed["status"]["conditions"] = json!(conditions);
            write(world, name, failed, Target::Status);
            self.retry.insert(name.to_string(), now + RETRY);
            return;
        }
        let uid = crd["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.polls.insert(
            name.to_string(),
            Poll {
                uid,
                started: now,
                next: now,
            },
        );
        self.poll(world, &crd, name, now, now);
    }

    /// One poll of `deleteInstances`: none left, still some, or past the
    /// minute.
    fn poll(&mut self, world: &mut World, crd: &Value, name: &str, started: Instant, now: Instant) {
        let left = crd::crd_definition(crd)
            .ok()
            .map(|d| world.list_objects(&d.group_resource()).len())
            .unwrap_or_default();
        if left == 0 {
            self.polls.remove(name);
            let condition = json!({"type": "Terminating", "status": "False",
                                   "reason": "InstanceDeletionCompleted", "message": "removed all instances"});
            self.finish(world, crd, name, condition);
            return;
        }
        if now.duration_since(started) >= POLL_TIMEOUT {
            self.polls.remove(name);
            let mut failed = crd.clone();
            let mut conditions = conditions_of(crd);
            set_condition(
                &mut conditions,
                json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionCheck",
                       "message": "could not confirm zero CustomResources remaining: timed out waiting for the condition"}),
            );
            failed["status"]["conditions"] = json!(conditions);
            write(world, name, failed, Target::Status);
            self.retry.insert(name.to_string(), now + RETRY);
            return;
        }
        if let Some(poll) = self.polls.get_mut(name) {
            poll.next = now + POLL;
        }
    }

    /// The last condition, then `CRDRemoveFinalizer`.
    fn finish(&mut self, world: &mut World, crd: &Value, name: &str, condition: Value) {
        let mut status = crd.clone();
        let mut conditions = conditions_of(crd);
        set_condition(&mut conditions, condition);
        status["status"]["conditions"] = json!(conditions);
        let Some(crd) = write(world, name, status, Target::Status) else {
            return;
        };
        let mut finalized = crd.clone();
        let kept: Vec<String> = deletion::finalizer_names(&crd)
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        finalized["metadata"]["finalizers"] = json!(kept);
        write(world, name, finalized, Target::Main);
    }
}

/// An update of the CRD at the resourceVersion read; a conflict or a CRD
/// gone is left to the next pass ("deleted or changed in the meantime,
/// we'll get called again").
fn write(world: &mut World, name: &str, object: Value, target: Target) -> Option<Value> {
    let crds = world.registry.get(&GroupResource::new(GROUP, RESOURCE))?;
    match world.update(&crds, None, name, object, target) {
        Ok(written) => Some(written),
        Err(e) => {
            tracing::debug!(crd = %name, error = %e, "crd finalizer: update");
            None
        }
    }
}
