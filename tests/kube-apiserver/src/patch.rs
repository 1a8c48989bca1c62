//! PATCH bodies by content type: JSON merge patch (RFC 7386), JSON patch
//! (RFC 6902), strategic merge patch (built-in resources only; a real
//! server answers 415 for custom resources), and server-side apply
//! (`application/apply-patch+yaml`).
//!
//! Strategic merge is simplified: lists merge by their key only for the
//! well-known fields in [`merge_key`] (`containers`/`env`/`volumes`… by
//! `name`, `conditions` by `type`, `ownerReferences` by `uid`), `finalizers`
//! merge as a set, and `$patch: delete` in a list item removes it; other
//! directives (`$retainKeys`, `$setElementOrder`, `$deleteFromPrimitiveList`)
//! are not understood.
//!
//! Server-side apply is a field merge good enough for managers that do
//! not fight: each manager's last applied configuration is kept; fields it
//! applied before and leaves out now are removed (unless another apply
//! manager also applied them); a field another apply manager applied with
//! a different value is a 409 conflict unless `force=true`, which takes it
//! over. Objects merge field by field; lists are atomic (replaced whole,
//! `x-kubernetes-list-type: map` is not merged by key). Fields written by
//! update/patch (non-apply) managers are not tracked, so they never
//! conflict with an apply.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::status::ApiError;

/// The PATCH content types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Parse a JSON body (400 if it is not JSON).
pub fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Apply a merge, JSON or strategic patch `body` to `target` (an apply
/// patch is server-side apply's, [`server_side_apply`], and changes
/// nothing here).
pub fn apply_patch(target: &mut Value, patch_type: PatchType, body: &[u8]) -> Result<(), ApiError> {
    match patch_type {
        PatchType::Merge => merge_patch(target, &json_body(body)?),
        PatchType::Json => json_patch(target, body)?,
        PatchType::Strategic => strategic_merge(target, &json_body(body)?),
        PatchType::Apply => {}
    }
    Ok(())
}

/// JSON merge patch (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// JSON patch (RFC 6902); a failing operation is a 422, as the real
/// server answers.
pub fn json_patch(target: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let mut patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    patch
        .0
        .retain(|op| !null_test_of_an_absent_member(target, op));
    json_patch::patch(target, &patch.0).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {e}"),
        )
    })
}

/// Whether `op` is a `test` for `null` of a member that is absent from an
/// object that exists. The API server's JSON patch (gopkg.in/evanphx/
/// json-patch.v4, `patch.go`, `func (p Patch) test`: a missing key reads as
/// `nil`, and a `nil` value passes a test whose value is `null`) lets it
/// pass, where RFC 6902 (and the `json-patch` crate) fail it. kube-runtime's
/// `finalizer` helper relies on it: its first finalizer is added with
/// `test /metadata/finalizers null` + `add`, and an object without
/// finalizers has no `finalizers` member at all.
fn null_test_of_an_absent_member(target: &Value, op: &json_patch::PatchOperation) -> bool {
    let json_patch::PatchOperation::Test(test) = op else {
        return false;
    };
    if !test.value.is_null() {
        return false;
    }
    let path = test.path.to_string();
    let Some((parent, member)) = path.rsplit_once('/') else {
        return false;
    };
    let member = member.replace("~1", "/").replace("~0", "~");
    match target.pointer(parent) {
        Some(Value::Object(map)) => !map.contains_key(&member),
        _ => false,
    }
}

/// The key strategic merge patch merges a list field by.
pub fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "volumeDevices" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "conditions" | "addresses" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" => Some("containerPort"),
        _ => None,
    }
}

/// Strategic merge patch for built-in resources (see the module doc for
/// what is simplified).
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let (Value::Object(into), Value::Object(from)) = (&mut *target, patch) else {
        *target = patch.clone();
        return;
    };
    for (key, p) in from {
        if key.starts_with('$') {
            continue;
        }
        if p.is_null() {
            into.remove(key);
            continue;
        }
        match (into.get_mut(key), p) {
            (Some(t @ Value::Object(_)), Value::Object(_)) => strategic_merge(t, p),
            (Some(Value::Array(t)), Value::Array(items)) if key == "finalizers" => {
                for item in items {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            }
            (Some(Value::Array(t)), Value::Array(items)) if merge_key(key).is_some() => {
                let k = merge_key(key).unwrap_or_default();
                for item in items {
                    let position = t
                        .iter()
                        .position(|e| e.get(k).is_some() && e.get(k) == item.get(k));
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (position, delete) {
                        (Some(i), true) => {
                            t.remove(i);
                        }
                        (Some(i), false) => strategic_merge(&mut t[i], item),
                        (None, true) => {}
                        (None, false) => {
                            let mut fresh = item.clone();
                            strip_directives(&mut fresh);
                            t.push(fresh);
                        }
                    }
                }
            }
            _ => {
                let mut fresh = p.clone();
                strip_directives(&mut fresh);
                into.insert(key.clone(), fresh);
            }
        }
    }
}

fn strip_directives(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, v| !k.starts_with('$') && !v.is_null());
            map.values_mut().for_each(strip_directives);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

/// A leaf of an applied configuration: a path of object keys to a scalar
/// or a (whole, atomic) list.
type FieldPath = Vec<String>;

fn leaves(value: &Value, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                prefix.push(k.clone());
                leaves(v, prefix, out);
                prefix.pop();
            }
        }
        _ => out.push(prefix.clone()),
    }
}

/// The fields an applied configuration sets (identity fields excluded).
fn owned(config: &Value) -> Vec<FieldPath> {
    let mut out = Vec::new();
    leaves(config, &mut Vec::new(), &mut out);
    out.retain(|p| {
        !matches!(
            p.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
            ["apiVersion"]
                | ["kind"]
                | [
                    "metadata",
                    "name"
                        | "namespace"
                        | "resourceVersion"
                        | "uid"
                        | "generation"
                        | "creationTimestamp"
                        | "managedFields"
                ]
        )
    });
    out
}

fn at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(k))
}

fn remove_at(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut v = value;
    for k in parents {
        match v.get_mut(k) {
            Some(next) => v = next,
            None => return,
        }
    }
    if let Value::Object(map) = v {
        map.remove(last);
    }
}

fn deep_merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v)
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// A conflict of one apply with what other managers applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    pub manager: String,
    pub field: String,
}

/// Server-side apply of `config` by `manager` onto `live` (an empty
/// object when creating). `applied` holds every apply manager's last
/// configuration and is updated (this manager's, and with `force` the
/// fields taken from others). Returns the new object, or the conflicts.
pub fn server_side_apply(
    live: &Value,
    config: &Value,
    manager: &str,
    applied: &mut BTreeMap<String, Value>,
    force: bool,
) -> Result<Value, Vec<ApplyConflict>> {
    let fields = owned(config);
    let mut conflicts = Vec::new();
    for (other, their) in applied.iter() {
        if other == manager {
            continue;
        }
        for path in &fields {
            if let Some(theirs) = at(their, path) {
                if Some(theirs) != at(config, path) {
                    conflicts.push(ApplyConflict {
                        manager: other.clone(),
                        field: format!(".{}", path.join(".")),
                    });
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    if force {
        for their in applied
            .iter_mut()
            .filter(|(m, _)| m.as_str() != manager)
            .map(|(_, c)| c)
        {
            for path in &fields {
                remove_at(their, path);
            }
        }
    }
    let mut object = live.clone();
    if let Some(previous) = applied.get(manager) {
        for path in owned(previous) {
            let still_mine = at(config, &path).is_some();
            let others = applied
                .iter()
                .any(|(m, c)| m != manager && at(c, &path).is_some());
            if !still_mine && !others {
                remove_at(&mut object, &path);
            }
        }
    }
    if !object.is_object() {
        object = Value::Object(Map::new());
    }
    deep_merge(&mut object, config);
    applied.insert(manager.to_string(), config.clone());
    Ok(object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }

    #[test]
    fn json_patch_applies_and_refuses() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        json_patch(
            &mut doc,
            br#"[{"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
                                  {"op": "remove", "path": "/metadata/finalizers/0"}]"#,
        )
        .unwrap();
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b"]}}));
        let e = json_patch(
            &mut doc,
            br#"[{"op": "test", "path": "/metadata/finalizers/0", "value": "a"}]"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(json_patch(&mut doc, b"{").unwrap_err().code, 400);
    }

    #[test]
    fn a_null_test_of_an_absent_member_passes_as_on_the_api_server() {
        // kube-runtime's finalizer helper, on an object without finalizers.
        let mut doc = json!({"metadata": {"name": "p"}});
        json_patch(
            &mut doc,
            br#"[{"op": "test", "path": "/metadata/finalizers", "value": null},
                 {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]"#,
        )
        .unwrap();
        assert_eq!(doc, json!({"metadata": {"name": "p", "finalizers": ["f"]}}));
        // A member that exists is tested as RFC 6902 says.
        let e = json_patch(
            &mut doc,
            br#"[{"op": "test", "path": "/metadata/finalizers", "value": null}]"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        // So is a member of an object that does not exist.
        let e = json_patch(
            &mut doc,
            br#"[{"op": "test", "path": "/spec/x", "value": null}]"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn strategic_merge_merges_known_lists_by_key() {
        let mut pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [
            {"name": "main", "image": "x:1"}, {"name": "side", "image": "y:1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        strategic_merge(
            &mut pod,
            &json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [
            {"name": "main", "image": "x:2"}, {"name": "side", "$patch": "delete"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "New", "status": "True"}]}}),
        );
        assert_eq!(
            pod,
            json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [
            {"name": "main", "image": "x:2"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "New", "status": "True"}]}})
        );
    }

    #[test]
    fn apply_merges_removes_and_conflicts() {
        let mut applied = BTreeMap::new();
        let live = json!({"metadata": {"name": "x"}, "spec": {"a": 1, "kept": true}});
        let one = json!({"metadata": {"name": "x"}, "spec": {"a": 2, "b": 3}});
        let after = server_side_apply(&live, &one, "m1", &mut applied, false).unwrap();
        assert_eq!(after["spec"], json!({"a": 2, "b": 3, "kept": true}));
        // m1 drops b: it goes; kept (not m1's) stays.
        let two = json!({"metadata": {"name": "x"}, "spec": {"a": 2}});
        let after = server_side_apply(&after, &two, "m1", &mut applied, false).unwrap();
        assert_eq!(after["spec"], json!({"a": 2, "kept": true}));
        // m2 sets a differently: conflict, unless forced.
        let other = json!({"metadata": {"name": "x"}, "spec": {"a": 5}});
        let conflicts = server_side_apply(&after, &other, "m2", &mut applied, false).unwrap_err();
        assert_eq!(
            conflicts,
            [ApplyConflict {
                manager: "m1".into(),
                field: ".spec.a".into()
            }]
        );
        let same = json!({"metadata": {"name": "x"}, "spec": {"a": 2, "c": 1}});
        assert!(server_side_apply(&after, &same, "m2", &mut applied, false).is_ok());
        let forced = server_side_apply(&after, &other, "m2", &mut applied, true).unwrap();
        assert_eq!(forced["spec"]["a"], 5);
        assert_eq!(applied["m1"]["spec"], json!({}));
    }
}
