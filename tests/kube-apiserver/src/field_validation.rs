//! Unknown and duplicate fields in a write, as the `fieldValidation`
//! query parameter asks a real API server to treat them (Kubernetes
//! v1.31.0; `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`,
//! `create.go`, `update.go`, `patch.go`):
//!
//! - `Ignore`: unknown fields are dropped, nothing said;
//! - `Warn` (the default when the parameter is absent, rest.go
//!   `fieldValidation`): dropped, one `Warning: 299 - "…"` header per field
//!   (`addStrictDecodingWarnings`);
//! - `Strict`: the write is refused — a create or update with the
//!   decoder's 400 (`transformDecodeError`: `<Kind> in version "<v>" cannot
//!   be handled as a <Kind>: strict decoding error: unknown field "spec.foo"`),
//!   a merge, JSON or strategic patch with the patcher's 422 on the field
//!   `patch` (`applyPatchToCurrentObject`, `applyPatchToObject`).
//!
//! A field is unknown when the kind's type has no such field: for a
//! built-in kind, the `k8s-openapi` type of the kind (read into it and
//! written back, what is lost is unknown, as Go's decoder into the
//! kind's struct loses it); for a custom resource, what the structural
//! schema prunes (`apiextensions-apiserver/pkg/apiserver/customresource_handler.go`
//! `schemaCoercingDecoder`, `schema/pruning/algorithm.go`) and the
//! `metadata` fields ObjectMeta lacks. A key given twice in one JSON
//! object is a duplicate field (`sigs.k8s.io/json` `UnmarshalStrict`).
//! Paths are written as that decoder writes them: `spec.containers[0].foo`.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::schema;
use crate::status::ApiError;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Directive {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl Directive {
    /// The query parameter's value; `options` names the request's options
    /// kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`) for the 422
    /// `ValidateFieldValidation` answers to any other value
    /// (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`).
    pub fn parse(value: Option<&str>, options: &str) -> Result<Self, ApiError> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => {
                let message = format!(
                    "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                );
                Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("{options}.meta.k8s.io \"\" is invalid: fieldValidation: {message}"),
                )
                .with_details(json!({
                    "group": "meta.k8s.io", "kind": options,
                    "causes": [{"reason": "FieldValueNotSupported", "message": message, "field": "fieldValidation"}],
                })))
            }
        }
    }
}

/// What a client's write is checked for: its directive and what was found
/// in the request body before it was decoded (duplicates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldCheck {
    pub directive: Directive,
    /// Strict decoding errors found so far, as the decoder words them
    /// (`duplicate field "metadata.name"`).
    pub problems: Vec<String>,
}

/// The outcome of a write's field check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create or update: refused as the decoder's 400.
    Decode,
    /// A merge, JSON or strategic patch: refused as the patcher's 422.
    Patch,
}

impl FieldCheck {
    pub fn new(directive: Directive) -> Self {
        Self {
            directive,
            problems: Vec::new(),
        }
    }

    /// Note the duplicate keys of a JSON body (a create's or update's
    /// object, a merge or strategic patch), `prefix` before each
    /// (`"json patch "` for a JSON patch's operations, as patch.go words them).
    pub fn body(&mut self, body: &[u8], prefix: &str) {
        if self.directive == Directive::Ignore {
            return;
        }
        for path in duplicate_fields(body) {
            self.push(format!("{prefix}duplicate field {path:?}"));
        }
    }

    /// Note the unknown fields of the operations of a JSON patch (each
    /// only `op`, `path`, `from` and `value`: patch.go `jsonPatchOp`).
    pub fn json_patch_ops(&mut self, body: &[u8]) {
        if self.directive == Directive::Ignore {
            return;
        }
        self.body(body, "json patch ");
        let Ok(Value::Array(ops)) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        for (i, op) in ops.iter().enumerate() {
            for key in op.as_object().into_iter().flat_map(|o| o.keys()) {
                if !matches!(key.as_str(), "op" | "path" | "from" | "value") {
                    self.push(format!("json patch unknown field \"[{i}].{key}\""));
                }
            }
        }
    }

    /// Find the unknown fields of `object` (a whole object of `def`), note
    /// them, and drop them from a built-in object (a custom one's schema
    /// pruning drops them later in the store).
    pub fn object(&mut self, def: &ResourceDef, object: &mut Value) {
        let unknown = unknown_fields(def, object);
        if !def.custom {
            for path in &unknown {
                remove(object, path);
            }
        }
        if self.directive != Directive::Ignore {
            for path in unknown {
                self.push(format!("unknown field {path:?}"));
            }
        }
    }

    fn push(&mut self, problem: String) {
        // The decoder reports each error once.
        if !self.problems.contains(&problem) {
            self.problems.push(problem);
        }
    }

    /// The warnings to answer with (`Warn`), or the refusal (`Strict`) of
    /// a write of `def` at `version` whose decoded or patched object is
    /// `object`.
    pub fn finish(
        &self,
        def: &ResourceDef,
        version: &str,
        operation: Operation,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        match (self.directive, self.problems.is_empty()) {
            (Directive::Ignore, _) | (_, true) => Ok(Vec::new()),
            (Directive::Warn, false) => Ok(self.problems.clone()),
            (Directive::Strict, false) => {
                let error = format!("strict decoding error: {}", self.problems.join(", "));
                Err(match operation {
                    Operation::Decode => ApiError::bad_request(format!(
                        "{kind} in version {version:?} cannot be handled as a {kind}: {error}",
                        kind = def.kind
                    )),
                    Operation::Patch => {
                        // `field.Invalid(field.NewPath("patch"), patchedJS, …)`
                        // in an Invalid of no kind and no name.
                        let shown = serde_json::to_string(&Value::String(object.to_string()))
                            .unwrap_or_default();
                        let message = format!("Invalid value: {shown}: {error}");
                        ApiError::new(
                            422,
                            "Invalid",
                            format!(" \"\" is invalid: patch: {message}"),
                        )
                        .with_details(json!({
                            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}],
                        }))
                    }
                })
            }
        }
    }
}

/// A server-side apply's configuration `config` (of a built-in kind) with
/// fields its kind does not have: the refusal whatever `fieldValidation`
/// says, as the field manager's type converter gives it — a plain error the
/// handler answers as a 500 of no reason
/// (`k8s.io/apimachinery/pkg/util/managedfields/internal/structuredmerge.go`
/// `Apply`, `objectGVKNN`; structured-merge-diff's `field not declared in
/// schema`, several as `errors:` one a line). `None` when every field is
/// known, or for a custom resource (pruned, as before).
pub fn apply_refusal(def: &ResourceDef, version: &str, config: &Value) -> Option<ApiError> {
    if def.custom {
        return None;
    }
    let unknown = unknown_fields(def, config);
    let errors: Vec<String> = unknown
        .iter()
        .map(|path| format!(".{path}: field not declared in schema"))
        .collect();
    let joined = match errors.as_slice() {
        [] => return None,
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    let meta = &config["metadata"];
    let text = |field: &str| meta[field].as_str().unwrap_or_default().to_string();
    Some(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {}/{version}, Kind={}): {joined}",
            text("namespace"),
            text("name"),
            def.group,
            def.kind
        ),
    ))
}

/// `Warning` header values for `warnings`, as `warning.AddWarning` writes
/// them: `299 - "<text>"`.
pub fn warning_headers(warnings: &[String]) -> Vec<String> {
    warnings
        .iter()
        .map(|w| format!("299 - {}", serde_json::to_string(w).unwrap_or_default()))
        .collect()
}

/// The paths of the keys given twice in an object of a JSON document, in
/// document order.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let walk = Walk {
        path: String::new(),
        out: &mut out,
    };
    // A body that is no JSON is the decoder's other error, answered
    // elsewhere.
    let _ = walk.deserialize(&mut de);
    out
}

/// A JSON walk noting duplicate keys.
struct Walk<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = child(&self.path, &key);
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The paths of the fields of `object` its kind does not have.
pub fn unknown_fields(def: &ResourceDef, object: &Value) -> Vec<String> {
    if def.custom {
        let mut paths = metadata_unknown(object);
        if let Some(schema) = def.schemas.get(def.storage_version()) {
            paths.extend(schema::unknown_fields(schema, object));
        }
        paths.sort();
        return paths;
    }
    let Some(known) = typed_round_trip(def, object) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    lost(object, &known, "", &mut paths);
    paths
}

/// The `metadata` fields ObjectMeta does not have.
fn metadata_unknown(object: &Value) -> Vec<String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let meta = &object["metadata"];
    if !meta.is_object() {
        return Vec::new();
    }
    let Some(known) = round_trip::<ObjectMeta>(meta) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    lost(meta, &known, "metadata", &mut paths);
    paths
}

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(value.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// `object` read into the `k8s-openapi` type of its kind and written back;
/// `None` for a kind without one, or an object that does not read (a
/// value of the wrong type: not this module's answer).
fn typed_round_trip(def: &ResourceDef, object: &Value) -> Option<Value> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, certificates::v1 as certificates,
        coordination::v1 as coordination, core::v1 as core, events::v1 as events, rbac::v1 as rbac,
    };
    let mut typed = object.clone();
    typed["apiVersion"] = json!(def.api_version(def.storage_version()));
    typed["kind"] = json!(def.kind);
    let t = &typed;
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Node") => round_trip::<core::Node>(t),
        ("", "Pod") => round_trip::<core::Pod>(t),
        ("", "Binding") => round_trip::<core::Binding>(t),
        ("", "Namespace") => round_trip::<core::Namespace>(t),
        ("", "Secret") => round_trip::<core::Secret>(t),
        ("", "ConfigMap") => round_trip::<core::ConfigMap>(t),
        ("", "Service") => round_trip::<core::Service>(t),
        ("", "ServiceAccount") => round_trip::<core::ServiceAccount>(t),
        ("", "ResourceQuota") => round_trip::<core::ResourceQuota>(t),
        ("", "Event") => round_trip::<core::Event>(t),
        ("events.k8s.io", "Event") => round_trip::<events::Event>(t),
        ("coordination.k8s.io", "Lease") => round_trip::<coordination::Lease>(t),
        ("rbac.authorization.k8s.io", "Role") => round_trip::<rbac::Role>(t),
        ("rbac.authorization.k8s.io", "ClusterRole") => round_trip::<rbac::ClusterRole>(t),
        ("rbac.authorization.k8s.io", "RoleBinding") => round_trip::<rbac::RoleBinding>(t),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            round_trip::<rbac::ClusterRoleBinding>(t)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            round_trip::<admission::ValidatingAdmissionPolicy>(t)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            round_trip::<admission::ValidatingAdmissionPolicyBinding>(t)
        }
        ("apps", "Deployment") => round_trip::<k8s_openapi::api::apps::v1::Deployment>(t),
        ("apps", "ReplicaSet") => round_trip::<k8s_openapi::api::apps::v1::ReplicaSet>(t),
        ("policy", "PodDisruptionBudget") => {
            round_trip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(t)
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            round_trip::<k8s_openapi::api::networking::v1::NetworkPolicy>(t)
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            round_trip::<k8s_openapi::api::discovery::v1::EndpointSlice>(t)
        }
        ("policy", "Eviction") => round_trip::<k8s_openapi::api::policy::v1::Eviction>(t),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => round_trip::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(t),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            round_trip::<certificates::CertificateSigningRequest>(t)
        }
        _ => None,
    }
}

/// The paths of the keys of `sent` that `known` lacks. A `null` counts as
/// absent (the typed object writes no `None`), so it is never called
/// unknown.
fn lost(sent: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, known) {
        (Value::Object(sent), Value::Object(known)) => {
            for (key, value) in sent {
                let here = child(path, key);
                match known.get(key) {
                    Some(k) => lost(value, k, &here, out),
                    None if value.is_null() => {}
                    None => out.push(here),
                }
            }
        }
        (Value::Array(sent), Value::Array(known)) if sent.len() == known.len() => {
            for (i, (s, k)) in sent.iter().zip(known).enumerate() {
                lost(s, k, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Remove the field at `path` (as [`lost`] writes it) from `object`.
fn remove(object: &mut Value, path: &str) {
    let mut steps: Vec<Step> = Vec::new();
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        steps.push(Step::Key(key.to_string()));
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                steps.push(Step::Index(i));
            }
        }
    }
    let Some((Step::Key(last), parents)) = steps.split_last() else {
        return;
    };
    let mut at = object;
    for step in parents {
        let next = match step {
            Step::Key(k) => at.get_mut(k.as_str()),
            Step::Index(i) => at.get_mut(*i),
        };
        match next {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

enum Step {
    Key(String),
    Index(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn def(kind: &str) -> ResourceDef {
        builtin::definitions()
            .into_iter()
            .find(|d| d.kind == kind && d.group.is_empty())
            .unwrap()
    }

    #[test]
    fn duplicates_are_found_with_their_paths() {
        let body = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"containers": [{"name": "c", "image": "i", "image": "j"}]}, "kind": "Pod", "kind": "Pod"}"#;
        assert_eq!(
            duplicate_fields(body),
            ["metadata.name", "spec.containers[0].image", "kind"]
        );
        assert!(duplicate_fields(br#"{"a": {"b": 1}, "c": {"b": 2}}"#).is_empty());
    }

    #[test]
    fn unknown_fields_of_a_built_in_kind_are_found_and_dropped() {
        let pods = def("Pod");
        let mut pod = json!({"metadata": {"name": "p", "bogus": 1, "labels": null},
            "spec": {"foo": "x", "containers": [{"name": "c", "image": "i", "imagePullPolcy": "Always"}]}});
        let mut check = FieldCheck::new(Directive::Warn);
        check.object(&pods, &mut pod);
        // The order of a JSON object's keys is serde_json's map order
        // (sorted, or as sent with `preserve_order`, which other crates of
        // the workspace may turn on): the set is what is checked.
        let mut problems = check.problems.clone();
        problems.sort();
        assert_eq!(
            problems,
            [
                "unknown field \"metadata.bogus\"",
                "unknown field \"spec.containers[0].imagePullPolcy\"",
                "unknown field \"spec.foo\""
            ]
        );
        assert_eq!(
            pod,
            json!({"metadata": {"name": "p", "labels": null},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
        );
        let secret =
            json!({"metadata": {"name": "s"}, "data": {"any-key": "eA=="}, "type": "Opaque"});
        assert!(unknown_fields(&def("Secret"), &secret).is_empty());
    }

    #[test]
    fn each_directive_answers_as_the_real_server() {
        let pods = def("Pod");
        let mut check = FieldCheck::new(Directive::Strict);
        check.problems = vec!["unknown field \"spec.foo\"".into()];
        let e = check
            .finish(&pods, "v1", Operation::Decode, &json!({}))
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""
        );
        let e = check
            .finish(&pods, "v1", Operation::Patch, &json!({"a": 1}))
            .unwrap_err();
        assert_eq!(
            e.message,
            " \"\" is invalid: patch: Invalid value: \"{\\\"a\\\":1}\": strict decoding error: unknown field \"spec.foo\""
        );
        check.directive = Directive::Warn;
        let warnings = check
            .finish(&pods, "v1", Operation::Decode, &json!({}))
            .unwrap();
        assert_eq!(
            warning_headers(&warnings),
            ["299 - \"unknown field \\\"spec.foo\\\"\""]
        );
        check.directive = Directive::Ignore;
        assert!(check
            .finish(&pods, "v1", Operation::Decode, &json!({}))
            .unwrap()
            .is_empty());
        assert_eq!(
            Directive::parse(Some("Loose"), "CreateOptions")
                .unwrap_err()
                .message,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
        assert_eq!(Directive::parse(None, "CreateOptions"), Ok(Directive::Warn));
    }
}
