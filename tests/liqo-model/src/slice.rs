//! Reading and writing a ResourceSlice's conditions and names as Liqo's
//! helpers do (`pkg/liqo-controller-manager/authentication/resourceslice.go`,
//! `…/authentication/csr.go`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::runner::Key;

/// `apis/authentication/v1beta1/resourceslice_types.go:66-80`: condition types and statuses.
pub const AUTHENTICATION: &str = "Authentication";
pub const RESOURCES: &str = "Resources";
pub const ACCEPTED: &str = "Accepted";
pub const DENIED: &str = "Denied";

/// The status of the condition of `kind`, if there is one
/// (`resourceslice.go:25-33`).
pub fn condition<'a>(slice: &'a DynamicObject, kind: &str) -> Option<&'a str> {
    slice.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap_or(""))
}

/// Whether the condition of `kind` is `Accepted`
/// (`quotacreator_controller.go:81-82`, `virtualnodecreator_controller.go:172-179`).
pub fn accepted(slice: &DynamicObject, kind: &str) -> bool {
    condition(slice, kind) == Some(ACCEPTED)
}

/// Set the condition of `kind` to `status`, changing its transition time
/// only when status, reason or message change (`resourceslice.go:36-59`).
pub fn ensure_condition(
    slice: &mut DynamicObject,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let fresh = json!({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now});
    let status_obj = object_at(&mut slice.data, "status");
    let conditions = status_obj
        .as_object_mut()
        .map(|o| o.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else {
        return;
    };
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status && c["reason"] == reason && c["message"] == message => {}
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

/// `spec.consumerClusterID`, if set.
pub fn consumer_cluster_id(slice: &DynamicObject) -> Option<&str> {
    slice.data["spec"]["consumerClusterID"].as_str()
}

/// `spec.class` (empty when unset).
pub fn class(slice: &DynamicObject) -> &str {
    slice.data["spec"]["class"].as_str().unwrap_or("")
}

/// The user a slice's certificate names, which is also its Quota's name:
/// `<slice>-<first 6 bytes of sha256(consumer ID), hex>`
/// (`csr.go:46-63`).
pub fn common_name(slice_name: &str, consumer_id: &str) -> String {
    let hash = Sha256::digest(consumer_id.as_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("{slice_name}-{hex}")
}

/// The JSON object at `data[key]`, made an empty object when missing or null.
pub fn object_at<'a>(data: &'a mut Value, key: &str) -> &'a mut Value {
    if !data.is_object() {
        *data = json!({});
    }
    let entry = &mut data[key];
    if !entry.is_object() {
        *entry = json!({});
    }
    entry
}

/// Make `slice` the controller owner of `obj`, replacing any other
/// controller, as controller-runtime's `SetControllerReference` does (with
/// `blockOwnerDeletion`).
pub fn set_controller(obj: &mut DynamicObject, slice: &DynamicObject) {
    let owner = OwnerReference {
        api_version: "authentication.liqo.io/v1beta1".into(),
        kind: "ResourceSlice".into(),
        name: slice.metadata.name.clone().unwrap_or_default(),
        uid: slice.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let owners = obj.metadata.owner_references.get_or_insert_with(Vec::new);
    owners.retain(|o| o.controller != Some(true));
    owners.push(owner);
}

/// The slice controlling `obj`, for controller-runtime's `Owns(...)`
/// watches: an owned object's change reconciles its owner.
pub fn controlling_slice(obj: &DynamicObject) -> Option<Key> {
    let owner = obj
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "ResourceSlice")?;
    Some(Key {
        namespace: obj.metadata.namespace.clone().unwrap_or_default(),
        name: owner.name.clone(),
    })
}
