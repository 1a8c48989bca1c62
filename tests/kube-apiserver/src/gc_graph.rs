//! The garbage collector's dependency graph, as
//! `pkg/controller/garbagecollector/graph_builder.go` (Kubernetes v1.31.0)
//! keeps it: every object by uid (`uidToNode`), each object's owners and
//! each owner's dependents (`node.owners`, `node.dependents`), kept up to
//! date from the changes the store records instead of being rebuilt from
//! every stored object at each pass, so a pass costs what changed, not the
//! size of the world.
//!
//! Taking in a change answers the objects whose collector decision it may
//! have changed (`processGraphChanges` enqueueing into `attemptToDelete`
//! and `attemptToOrphan`):
//! - the changed object itself;
//! - its owners, old and new (`addUnblockedOwnersToDeleteQueue`, and on
//!   deletion the owners waiting for their dependents): an owner deleted
//!   in the foreground or orphaning waits on its dependents' references;
//! - its dependents when it was created or deleted, or started or stopped
//!   waiting for them (deleting with `foregroundDeletion`:
//!   `startsWaitingForDependentsDeleted`, and on deletion "dependents are
//!   now dangling"): those are the only owner states a dependent's
//!   classification reads (gone, a different uid, waiting, or solid).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::crd::GroupResource;
use crate::deletion::{self, FOREGROUND};
use crate::store::{key_of, Change, World};

/// Where an object is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub gr: GroupResource,
    pub key: String,
}

/// The graph, as of the last change taken in.
#[derive(Debug, Default)]
pub struct Graph {
    /// The resourceVersion of the last change taken in (`None` before the
    /// first pass: the whole store is read then).
    seen: Option<u64>,
    /// Every stored object's place, by uid.
    locations: HashMap<String, Location>,
    /// The owner uids each object's `ownerReferences` name, by its uid
    /// (only objects with references).
    owners: HashMap<String, Vec<String>>,
    /// The uids of the objects referring to an owner, by owner uid (the
    /// owner may be gone: its dependents are then dangling until they are
    /// collected or their reference is taken out).
    dependents: HashMap<String, BTreeSet<String>>,
}

/// The uid of a stored object.
pub fn uid_of(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

/// The owner uids an object's references name.
fn owner_uids(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

/// Deleting with `foregroundDeletion`: what makes an owner *waiting*.
fn waits_for_dependents(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
        && deletion::finalizer_names(object)
            .iter()
            .any(|f| f == FOREGROUND)
}

/// Whether the collector has anything to do with an object by itself:
/// it refers to owners, or it is being deleted (an owner orphaning or
/// deleting its dependents).
fn collectable(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
        || object["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
}

impl Graph {
    /// Take in every change since the last call and answer the uids of
    /// the objects to look at (in uid order, the order of the pass). After
    /// a compaction that took changes not taken in yet, the graph is read
    /// again from the stored objects and every collectable object is
    /// looked at.
    pub fn observe(&mut self, world: &World) -> BTreeSet<String> {
        let mut dirty = BTreeSet::new();
        match self.seen {
            Some(seen) if world.compacted <= seen && seen <= world.rv => {
                let start = world.history.partition_point(|c| c.rv <= seen);
                for change in &world.history[start..] {
                    self.take(change, &mut dirty);
                }
            }
            _ => self.rebuild(world, &mut dirty),
        }
        self.seen = Some(world.rv);
        dirty
    }

    /// Where the object with this uid is stored, if it is.
    pub fn location(&self, uid: &str) -> Option<&Location> {
        self.locations.get(uid)
    }

    /// The uids of the objects referring to `owner_uid`, in uid order.
    pub fn dependents(&self, owner_uid: &str) -> impl Iterator<Item = &String> {
        self.dependents.get(owner_uid).into_iter().flatten()
    }

    fn rebuild(&mut self, world: &World, dirty: &mut BTreeSet<String>) {
        self.locations.clear();
        self.owners.clear();
        self.dependents.clear();
        for (gr, objects) in &world.objects {
            for (key, object) in objects {
                let uid = uid_of(object).to_string();
                self.link(&uid, owner_uids(object));
                if collectable(object) {
                    dirty.insert(uid.clone());
                }
                let location = Location {
                    gr: gr.clone(),
                    key: key.clone(),
                };
                self.locations.insert(uid, location);
            }
        }
    }

    fn take(&mut self, change: &Change, dirty: &mut BTreeSet<String>) {
        let object = &change.object;
        let uid = uid_of(object).to_string();
        for owner in self.unlink(&uid) {
            dirty.insert(owner);
        }
        let created = change.previous.is_none();
        if change.deleted {
            self.locations.remove(&uid);
        } else {
            let owners = owner_uids(object);
            dirty.extend(owners.iter().cloned());
            self.link(&uid, owners);
            let location = Location {
                gr: change.gr.clone(),
                key: key_of(object),
            };
            self.locations.insert(uid.clone(), location);
        }
        let waiting_changed = change
            .previous
            .as_ref()
            .is_some_and(|p| waits_for_dependents(p) != waits_for_dependents(object));
        if created || change.deleted || waiting_changed {
            dirty.extend(self.dependents(&uid).cloned());
        }
        dirty.insert(uid);
    }

    /// Record `uid`'s references to `owners`.
    fn link(&mut self, uid: &str, owners: Vec<String>) {
        if owners.is_empty() {
            return;
        }
        for owner in &owners {
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(uid.to_string());
        }
        self.owners.insert(uid.to_string(), owners);
    }

    /// Forget `uid`'s references; answers the owners they named.
    fn unlink(&mut self, uid: &str) -> Vec<String> {
        let owners = self.owners.remove(uid).unwrap_or_default();
        for owner in &owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
        owners
    }
}
