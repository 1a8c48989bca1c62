//! The garbage collector of kube-controller-manager, as
//! `pkg/controller/garbagecollector/garbagecollector.go` and
//! `graph_builder.go` (Kubernetes v1.31.0) have it. Each pass looks at
//! the objects the changes since the last pass may have made collectable
//! ([`crate::gc_graph`], the graph builder's queues) and at those whose
//! decision was put off or whose write failed, in uid order; a pass over
//! every stored object would decide the same, only in proportion to the
//! world's size:
//!
//! - an object being deleted with the `orphan` finalizer
//!   (`attemptToOrphanWorker`, `orphanDependents`): the reference to it is
//!   taken out of every dependent, then the finalizer;
//! - an object being deleted with the `foregroundDeletion` finalizer
//!   (`processDeletingDependentsItem`): its dependents are attempted (all
//!   of them, as `processTransitions` enqueues them when it starts
//!   waiting); once no dependent refers to it with `blockOwnerDeletion:
//!   true` (`blockingDependents`), the finalizer goes. A dependent that
//!   must go in the foreground (an owner waits, it has dependents) and
//!   has a dependent itself waiting for its dependents first makes its own
//!   references non-blocking (`unblockOwnerReferencesStrategicMergePatch`),
//!   which is how the real collector breaks a cycle of blocking
//!   references (garbagecollector.go, `attemptToDeleteItem`: "to prevent
//!   potential cycle, its ownerReferences are going to be modified to be
//!   non-blocking");
//! - any other object not being deleted that has owner references
//!   (`attemptToDeleteItem`, `classifyReferences`, `isDangling`): an owner
//!   is *dangling* when no object of the reference's kind and name exists
//!   in the dependent's namespace (cluster-scoped owners: anywhere) or its
//!   uid is not the reference's, *waiting* when it is being deleted with
//!   `foregroundDeletion`, else *solid*. With a solid owner, dangling and
//!   waiting references are taken out; with none, the object is deleted —
//!   in the foreground if an owner waits and it has dependents itself,
//!   else with the policy its own finalizers name (`orphan`, foreground,
//!   or background by default), with a uid precondition.
//! - A cluster-scoped dependent whose owner's kind is namespaced is never
//!   collected (`namespacedOwnerOfClusterScopedObjectErr`); a reference
//!   whose uid names an object in another namespace (or a namespaced
//!   object, from a cluster-scoped dependent) gets the graph builder's
//!   Warning Event `OwnerRefInvalidNamespace` on the dependent
//!   (`reportInvalidNamespaceOwnerRef`), once. An owner of a kind nobody
//!   serves leaves the dependent alone (a REST-mapping error, retried).
//!
//! Like the real collector it acts after the write that made an object
//! collectable, never inside it: the server's controller loop runs each
//! pass after the writes.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::crd::{GroupResource, ResourceDef};
use crate::deletion::{self, Propagation, FOREGROUND, ORPHAN};
use crate::gc_graph::{uid_of, Graph};
use crate::store::{key, Target, World};

/// The component the collector's events name (`garbage-collector-controller`).
const COMPONENT: &str = "garbage-collector-controller";

/// What the collector remembers between passes.
#[derive(Debug, Default)]
pub struct Collector {
    /// `(dependent uid, owner uid)` already reported invalid.
    reported: HashSet<(String, String)>,
    /// Owners and dependents, kept from the store's changes.
    graph: Graph,
    /// Objects to look at in the next pass whatever changes: a reference
    /// that could not be decided (an owner kind nobody serves yet, as the
    /// real collector retries a REST-mapping error) or a write that failed.
    retry: BTreeSet<String>,
}

/// One stored object and the resource serving it.
#[derive(Clone)]
struct Node {
    def: Arc<ResourceDef>,
    object: Value,
}

impl Node {
    fn uid(&self) -> &str {
        uid_of(&self.object)
    }
    fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
    fn deleting(&self) -> bool {
        self.object["metadata"]["deletionTimestamp"].is_string()
    }
    fn has_finalizer(&self, f: &str) -> bool {
        deletion::finalizer_names(&self.object)
            .iter()
            .any(|g| g == f)
    }
    fn refs(&self) -> Vec<Value> {
        owner_refs(&self.object)
    }
    fn refers_to(&self, owner_uid: &str) -> bool {
        self.refs().iter().any(|r| r["uid"] == owner_uid)
    }
}

fn owner_refs(object: &Value) -> Vec<Value> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// How an owner reference stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Solid,
    Dangling,
    Waiting,
}

impl Collector {
    /// One pass of the collector.
    pub fn sync(&mut self, world: &mut World) {
        let mut uids = self.graph.observe(world);
        uids.append(&mut self.retry);
        for uid in uids {
            // The stored state now: earlier writes of this pass may have
            // changed or removed it.
            let Some(node) = self.node(world, &uid) else {
                continue;
            };
            if node.deleting() && node.has_finalizer(ORPHAN) {
                self.orphan(world, &node);
            } else if node.deleting() && node.has_finalizer(FOREGROUND) {
                self.delete_dependents(world, &node);
            } else if !node.deleting() && !node.refs().is_empty() {
                self.attempt_to_delete(world, &node);
            }
        }
    }

    /// The stored object with this uid, if any (and its resource is
    /// still served).
    fn node(&self, world: &World, uid: &str) -> Option<Node> {
        let location = self.graph.location(uid)?;
        let object = world.stored(&location.gr, &location.key)?;
        if uid_of(object) != uid {
            return None;
        }
        Some(Node {
            def: world.registry.get(&location.gr)?,
            object: object.clone(),
        })
    }

    /// The objects referring to `owner_uid` now, in uid order.
    fn dependents_of(&self, world: &World, owner_uid: &str) -> Vec<Node> {
        self.graph
            .dependents(owner_uid)
            .filter_map(|uid| self.node(world, uid))
            .filter(|n| n.refers_to(owner_uid))
            .collect()
    }

    /// `processDeletingDependentsItem`.
    fn delete_dependents(&mut self, world: &mut World, owner: &Node) {
        let dependents = self.dependents_of(world, owner.uid());
        let blocking = dependents.iter().any(|d| {
            d.refs()
                .iter()
                .any(|r| r["uid"] == owner.uid() && r["blockOwnerDeletion"] == true)
        });
        if !blocking {
            self.remove_finalizer(world, owner, FOREGROUND);
            return;
        }
        for dependent in dependents {
            match self.node(world, dependent.uid()) {
                Some(d) if !d.deleting() => self.attempt_to_delete(world, &d),
                _ => {}
            }
        }
    }

    /// `attemptToDeleteItem` for an object not being deleted.
    fn attempt_to_delete(&mut self, world: &mut World, item: &Node) {
        let mut solid = Vec::new();
        let mut gone = Vec::new();
        let mut waiting = false;
        for reference in item.refs() {
            match self.classify(world, item, &reference) {
                Err(Skip) => {
                    self.retry.insert(item.uid().to_string());
                    return;
                }
                Ok(Owner::Solid) => solid.push(reference),
                Ok(Owner::Dangling) => gone.push(reference["uid"].clone()),
                Ok(Owner::Waiting) => {
                    waiting = true;
                    gone.push(reference["uid"].clone());
                }
            }
        }
        if !solid.is_empty() {
            if gone.is_empty() {
                return;
            }
            // `GenerateDeleteOwnerRefStrategicMergeBytes`: drop the
            // dangling and waiting references, keep the rest.
            let mut patched = item.object.clone();
            let kept: Vec<Value> = item
                .refs()
                .into_iter()
                .filter(|r| !gone.contains(&r["uid"]))
                .collect();
            patched["metadata"]["ownerReferences"] = json!(kept);
            self.update(world, item, patched);
            return;
        }
        let dependents = self.dependents_of(world, item.uid());
        let policy = if waiting && !dependents.is_empty() {
            // `attemptToDeleteItem` (garbagecollector.go, the case
            // `len(waitingForDependentsDeletion) != 0 &&
            // item.dependentsLength() != 0`): a dependent itself waiting
            // for its dependents may close a cycle of blocking references
            // (A owns B owns A), in which neither owner's
            // `foregroundDeletion` would ever go. So the item's own
            // blocking references are made non-blocking first
            // (`unblockOwnerReferencesStrategicMergePatch`, patch.go: every
            // reference with `blockOwnerDeletion: true` set to false), then
            // it is deleted in the foreground.
            let cycle = dependents
                .iter()
                .any(|d| d.deleting() && d.has_finalizer(FOREGROUND));
            if cycle {
                self.unblock_owner_references(world, item);
            }
            Propagation::Foreground
        } else if item.has_finalizer(ORPHAN) {
            Propagation::Orphan
        } else if item.has_finalizer(FOREGROUND) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        if let Err(e) = world.delete_with(&item.def, &item.object, policy) {
            tracing::debug!(object = %key_of(item), error = %e, "garbage collector: delete");
            self.retry.insert(item.uid().to_string());
        }
    }

    /// `isDangling` and `classifyReferences` for one reference.
    fn classify(
        &mut self,
        world: &mut World,
        item: &Node,
        reference: &Value,
    ) -> Result<Owner, Skip> {
        let api_version = reference["apiVersion"].as_str().unwrap_or_default();
        let kind = reference["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(def) = world.resource_for(group, version, kind) else {
            return Err(Skip);
        };
        let uid = reference["uid"].as_str().unwrap_or_default();
        // The graph builder's check of the observed owner's namespace.
        if let Some(observed) = self.node(world, uid) {
            let owner_ns = observed.namespace();
            if !owner_ns.is_empty() && owner_ns != item.namespace() {
                self.report_invalid_namespace(world, item, reference);
            }
        }
        if def.namespaced && item.namespace().is_empty() {
            return Err(Skip);
        }
        let name = reference["name"].as_str().unwrap_or_default();
        let owner_key = key(def.namespaced.then_some(item.namespace()), name);
        let Some(owner) = world.stored(&def.group_resource(), &owner_key) else {
            return Ok(Owner::Dangling);
        };
        if owner["metadata"]["uid"] != uid {
            return Ok(Owner::Dangling);
        }
        let deleting = owner["metadata"]["deletionTimestamp"].is_string();
        let foreground = deletion::finalizer_names(owner)
            .iter()
            .any(|f| f == FOREGROUND);
        Ok(if deleting && foreground {
            Owner::Waiting
        } else {
            Owner::Solid
        })
    }

    /// `reportInvalidNamespaceOwnerRef`: a Warning Event on the
    /// dependent (in `default` for a cluster-scoped one, as the event
    /// recorder places them).
    fn report_invalid_namespace(&mut self, world: &mut World, item: &Node, reference: &Value) {
        let owner_uid = reference["uid"].as_str().unwrap_or_default().to_string();
        if !self
            .reported
            .insert((item.uid().to_string(), owner_uid.clone()))
        {
            return;
        }
        let Some(events) = world.registry.get(&GroupResource::new("", "events")) else {
            return;
        };
        let namespace = match item.namespace() {
            "" => "default",
            ns => ns,
        };
        let identity = format!(
            "[{}/{}, namespace: {}, name: {}, uid: {owner_uid}]",
            reference["apiVersion"].as_str().unwrap_or_default(),
            reference["kind"].as_str().unwrap_or_default(),
            item.namespace(),
            reference["name"].as_str().unwrap_or_default(),
        );
        let now = chrono::Utc::now();
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let event = json!({
            "metadata": {
                "name": format!("{}.{:x}", item.name(), now.timestamp_nanos_opt().unwrap_or_default()),
                "namespace": namespace,
            },
            "involvedObject": {
                "kind": item.def.kind, "apiVersion": item.object["apiVersion"],
                "namespace": item.object["metadata"]["namespace"], "name": item.name(), "uid": item.uid(),
            },
            "reason": "OwnerRefInvalidNamespace",
            "message": format!("ownerRef {identity} does not exist in namespace {:?}", item.namespace()),
            "source": {"component": COMPONENT},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": "Warning",
            "reportingComponent": COMPONENT, "reportingInstance": "",
        });
        if let Err(e) = world.create(&events, Some(namespace), event) {
            tracing::debug!(error = %e, "garbage collector: event");
        }
    }
}

/// A reference that cannot be decided now.
struct Skip;

fn key_of(node: &Node) -> String {
    key(node.def.namespaced.then_some(node.namespace()), node.name())
}

impl Collector {
    /// Write `new` over `node`'s stored state (the collector's PATCH), at
    /// the resourceVersion it read; a refused write is tried again next
    /// pass, as the real collector requeues the item.
    fn update(&mut self, world: &mut World, node: &Node, new: Value) {
        let ns = node.def.namespaced.then_some(node.namespace());
        if let Err(e) = world.update(&node.def, ns, node.name(), new, Target::Main) {
            tracing::debug!(object = %key_of(node), error = %e, "garbage collector: update");
            self.retry.insert(node.uid().to_string());
        }
    }

    /// `unblockOwnerReferencesStrategicMergePatch` (patch.go): the item's
    /// references with `blockOwnerDeletion: true` made `false`, the others
    /// kept as they are.
    fn unblock_owner_references(&mut self, world: &mut World, item: &Node) {
        let Some(item) = self.node(world, item.uid()) else {
            return;
        };
        let refs: Vec<Value> = item
            .refs()
            .into_iter()
            .map(|mut r| {
                if r["blockOwnerDeletion"] == true {
                    r["blockOwnerDeletion"] = json!(false);
                }
                r
            })
            .collect();
        if refs == item.refs() {
            return;
        }
        let mut new = item.object.clone();
        new["metadata"]["ownerReferences"] = json!(refs);
        self.update(world, &item, new);
    }

    /// `removeFinalizer`.
    fn remove_finalizer(&mut self, world: &mut World, node: &Node, finalizer: &str) {
        let mut new = node.object.clone();
        let kept: Vec<String> = deletion::finalizer_names(&node.object)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        new["metadata"]["finalizers"] = json!(kept);
        self.update(world, node, new);
    }

    /// `attemptToOrphanWorker`: the owner's references out of its
    /// dependents, then its `orphan` finalizer.
    fn orphan(&mut self, world: &mut World, owner: &Node) {
        for dependent in self.dependents_of(world, owner.uid()) {
            let mut new = dependent.object.clone();
            let kept: Vec<Value> = dependent
                .refs()
                .into_iter()
                .filter(|r| r["uid"] != owner.uid())
                .collect();
            new["metadata"]["ownerReferences"] = json!(kept);
            self.update(world, &dependent, new);
        }
        if let Some(owner) = self.node(world, owner.uid()) {
            self.remove_finalizer(world, &owner, ORPHAN);
        }
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
