//! CustomResourceDefinitions written through the API (`kubectl apply` of
//! a CRD manifest) served as the apiextensions-apiserver's controllers
//! serve them (Kubernetes v1.31.0,
//! `staging/src/k8s.io/apiextensions-apiserver/pkg/controller/`):
//!
//! - the naming controller (`status/naming_controller.go`, `sync`): the
//!   spec's names become `status.acceptedNames`, with `NamesAccepted`
//!   `True`, reason `NoConflicts`, message `no conflicts found`;
//! - the establishing controller (`establish/establishing_controller.go`,
//!   `sync`): `Established` `True`, reason `InitialNamesAccepted`,
//!   message `the initial names have been accepted`, after which the
//!   resource is served (discovery, OpenAPI, its REST paths);
//! - `status.storedVersions` holds the storage version
//!   (`registry/customresourcedefinition/strategy.go`, `PrepareForCreate`).
//!
//! A CRD this server cannot serve (a rule or pattern it cannot enforce,
//! [`crate::rule_check`]) gets `NamesAccepted` `False` with the reason
//! rather than being served unchecked. A CRD deleted is marked, its
//! custom resources deleted (the `crd_finalizer` module), then it is gone
//! and no longer served.
//!
//! Runs as one pass per change, like the other controllers beside the
//! server.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::crd::{self, GroupResource};
use crate::crd_conditions::{conditions_of, set_condition};
use crate::store::{Target, World};

/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = crate::builtin::APIEXTENSIONS;
/// Their resource.
pub const RESOURCE: &str = crate::builtin::CRDS;

/// What the controller has served: each CRD's name, the
/// `resourceVersion` it last synced and the resource it registered.
#[derive(Debug, Default)]
pub struct Establisher {
    seen: HashMap<String, (String, Option<GroupResource>)>,
}

impl Establisher {
    /// One pass over the stored CRDs.
    pub fn sync(&mut self, world: &mut World) {
        let crds_gr = GroupResource::new(GROUP, RESOURCE);
        let Some(crds) = world.registry.get(&crds_gr) else {
            return;
        };
        let stored = world.list_objects(&crds_gr);
        let names: Vec<String> = stored.iter().filter_map(name_of).collect();
        // Deleted CRDs: no longer served.
        let gone: Vec<String> = self
            .seen
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some((_, Some(gr))) = self.seen.remove(&name) {
                world.registry.unregister(&gr);
            }
        }
        for object in stored {
            let Some(name) = name_of(&object) else {
                continue;
            };
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if self.seen.get(&name).is_some_and(|(seen, _)| *seen == rv) {
                continue;
            }
            let (status, served) = match crd::crd_definition(&object) {
                Ok(def) => {
                    let gr = def.group_resource();
                    let storage = def.storage_version().to_string();
                    world.registry.register(def);
                    (established(&object, &storage), Some(gr))
                }
                Err(e) => (refused(&object, &format!("{e:#}")), None),
            };
            let mut updated = object.clone();
            updated["status"] = status;
            let rv = if updated["status"] == object["status"] {
                rv
            } else {
                match world.update(&crds, None, &name, updated, Target::Status) {
                    Ok(written) => written["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    Err(e) => {
                        tracing::warn!(crd = %name, "status not written: {e}");
                        continue;
                    }
                }
            };
            self.seen.insert(name, (rv, served));
        }
    }
}

fn name_of(object: &Value) -> Option<String> {
    object["metadata"]["name"].as_str().map(str::to_string)
}

/// The status of a CRD whose names are accepted and which is served.
fn established(object: &Value, storage_version: &str) -> Value {
    let mut conditions = conditions_of(object);
    set_condition(
        &mut conditions,
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
               "message": "no conflicts found"}),
    );
    set_condition(
        &mut conditions,
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted"}),
    );
    let mut stored_versions: Vec<Value> = object["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored_versions.iter().any(|v| v == storage_version) {
        stored_versions.push(json!(storage_version));
    }
    let mut accepted = object["spec"]["names"].clone();
    // Defaulted as the API server defaults the spec's names
    // (apis/apiextensions/v1/defaults.go `SetDefaults_CustomResourceDefinitionSpec`).
    if let (Some(kind), Some(names)) = (
        object["spec"]["names"]["kind"].as_str(),
        accepted.as_object_mut(),
    ) {
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    json!({
        "acceptedNames": accepted,
        "conditions": conditions,
        "storedVersions": stored_versions,
    })
}

/// The status of a CRD this server will not serve.
fn refused(object: &Value, reason: &str) -> Value {
    let mut conditions = conditions_of(object);
    set_condition(
        &mut conditions,
        json!({"type": "NamesAccepted", "status": "False", "reason": "NotServedByKubeTestServer",
               "message": reason}),
    );
    let mut status = object["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    status["conditions"] = json!(conditions);
    status
}
