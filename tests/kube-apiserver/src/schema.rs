//! A CRD's `openAPIV3Schema` applied to objects as the real server applies
//! it to every create and update, in the same order: unknown fields are
//! pruned (and `null`s in non-nullable fields dropped), `default`s are
//! filled in, then the object is validated, every violation becoming one
//! `details.causes[]` entry of a 422.
//!
//! Enforced: `type` (object, array, string, integer, number, boolean),
//! `x-kubernetes-int-or-string`, `nullable`, `required`, `enum`,
//! `properties`, `additionalProperties`, `items`, `pattern`,
//! `minLength`/`maxLength`, `minimum`/`maximum` (and their exclusive
//! forms), `minItems`/`maxItems`, `minProperties`/`maxProperties`,
//! `anyOf`/`allOf`/`oneOf`/`not`, `format` `date-time`, `date` and
//! `byte`, `x-kubernetes-list-type` `set` and `map` (duplicates),
//! `x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-embedded-resource`, and the CEL rules of
//! `x-kubernetes-validations` at every level ([`rules`]; a rule or
//! `pattern` this server could not enforce is refused when the CRD is
//! registered, [`crate::rule_check`]). Messages follow the real server's wording closely but not
//! byte for byte.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use crate::rules;
use crate::status::Cause;

/// The `metadata` fields an object keeps (ObjectMeta); others are pruned.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Prune, then default `object` (a whole custom object) under `schema`.
pub fn prune_and_default(schema: &Value, object: &mut Value) {
    prune(schema, object, true, "", &mut Vec::new());
    default(schema, object);
}

/// The paths of the fields of `object` pruning drops for not being in
/// `schema` (outside `metadata`, whose fields ObjectMeta decides), as
/// `PruneWithOptions` with `TrackUnknownFieldPaths` lists them
/// (`apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm.go`):
/// `spec.foo`, `spec.items[0].bar`, sorted.
pub fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune(schema, &mut object.clone(), true, "", &mut unknown);
    unknown.sort();
    unknown
}

fn keeps_embedded(schema: &Value, root: bool, key: &str) -> bool {
    (root || schema["x-kubernetes-embedded-resource"] == true)
        && matches!(key, "apiVersion" | "kind" | "metadata")
}

/// The schema of `key` in an object under `schema`, if any.
fn property<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(s) = schema["properties"].get(key) {
        return Some(s);
    }
    match &schema["additionalProperties"] {
        s @ Value::Object(_) => Some(s),
        _ => None,
    }
}

fn path_to(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Prune `value` (at `path`) under `schema`, noting in `unknown` the
/// fields dropped for having no schema (not the `null`s dropped from
/// non-nullable fields, which are known).
fn prune(schema: &Value, value: &mut Value, root: bool, path: &str, unknown: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true
        || schema["additionalProperties"] == true;
    match value {
        Value::Object(map) => {
            map.retain(|key, v| {
                if keeps_embedded(schema, root, key) {
                    return true;
                }
                match property(schema, key) {
                    Some(s) => !(v.is_null() && s["nullable"] != true),
                    None if preserve => true,
                    None => {
                        unknown.push(path_to(path, key));
                        false
                    }
                }
            });
            for (key, v) in map.iter_mut() {
                if keeps_embedded(schema, root, key) {
                    if key == "metadata" {
                        if let Value::Object(meta) = v {
                            meta.retain(|k, _| OBJECT_META.contains(&k.as_str()));
                        }
                    }
                    continue;
                }
                if let Some(s) = property(schema, key) {
                    prune(s, v, false, &path_to(path, key), unknown);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (i, item) in items.iter_mut().enumerate() {
                prune(
                    &schema["items"],
                    item,
                    false,
                    &format!("{path}[{i}]"),
                    unknown,
                );
            }
        }
        _ => {}
    }
}

fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema["properties"].as_object() {
                for (key, s) in props {
                    if let Some(d) = s.get("default") {
                        map.entry(key.clone()).or_insert_with(|| d.clone());
                    }
                }
            }
            for (key, v) in map.iter_mut() {
                if key == "metadata" && schema["properties"]["metadata"].is_object() {
                    continue;
                }
                if let Some(s) = property(schema, key) {
                    default(s, v);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for item in items {
                default(&schema["items"], item);
            }
        }
        _ => {}
    }
}

/// Every violation of `schema` by `object`; `old` is the stored object on
/// an update (for the CEL transition rules, [`rules`]). The rules run only
/// when the schema check found no error that blocks them, as in the real
/// server (`hasBlockingErr`).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    check(schema, object, "", &mut causes);
    if rules::blocking(&causes) {
        if schema_has_rules(schema) {
            causes.push(rules::not_checked());
        }
    } else {
        causes.extend(rules::validate(schema, object, old));
    }
    causes
}

/// Whether any level of `schema` has CEL rules (the real server builds no
/// CEL validator, and adds no "not checked" cause, without one).
fn schema_has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty())
                || map.iter().any(|(k, v)| {
                    k != "x-kubernetes-validations"
                        && k != "default"
                        && k != "enum"
                        && k != "example"
                        && schema_has_rules(v)
                })
        }
        Value::Array(items) => items.iter().any(schema_has_rules),
        _ => false,
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// How Go prints a value in these messages.
fn shown(value: &Value) -> String {
    match value {
        Value::Object(_) => "\"object\"".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        Value::Null => "\"null\"".to_string(),
        other => other.to_string(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    }
}

fn regex(pattern: &str) -> Option<Regex> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok())
        .clone()
}

fn invalid(path: &str, value: &Value, detail: String) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        path,
        format!("Invalid value: {}: {detail}", shown(value)),
    )
}

fn format_ok(format: &str, s: &str) -> bool {
    use base64::Engine;
    match format {
        "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        _ => true,
    }
}

fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<Cause>) {
    if !schema.is_object() {
        return;
    }
    let shown_path = if path.is_empty() { "body" } else { path };
    if value.is_null() {
        if schema["nullable"] != true {
            out.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"null\": {shown_path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
            ));
        }
        return;
    }
    // The type, before anything that needs it.
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            out.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: {}: {shown_path} in body must be of type integer or string: \"{}\"",
                    shown(value),
                    type_name(value)
                ),
            ));
            return;
        }
    } else if let Some(ty) = schema["type"].as_str() {
        if !has_type(ty, value) {
            out.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: {}: {shown_path} in body must be of type {ty}: \"{}\"",
                    shown(value),
                    type_name(value)
                ),
            ));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(|v| v.to_string()).collect();
            out.push(Cause::new(
                "FieldValueNotSupported",
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    value,
                    list.join(", ")
                ),
            ));
        }
    }
    for_combinators(schema, value, path, out);
    match value {
        Value::String(s) => {
            if let Some(p) = schema["pattern"].as_str() {
                match regex(p) {
                    Some(re) if !re.is_match(s) => out.push(invalid(
                        path,
                        value,
                        format!("{shown_path} in body should match '{p}'"),
                    )),
                    _ => {}
                }
            }
            let len = s.chars().count() as u64;
            if let Some(max) = schema["maxLength"].as_u64() {
                if len > max {
                    out.push(Cause::new(
                        "FieldValueTooLong",
                        path,
                        format!("Too long: may not be more than {max} bytes"),
                    ));
                }
            }
            if let Some(min) = schema["minLength"].as_u64() {
                if len < min {
                    out.push(invalid(
                        path,
                        value,
                        format!("{shown_path} in body should be at least {min} chars long"),
                    ));
                }
            }
            if let Some(format) = schema["format"].as_str() {
                if !format_ok(format, s) {
                    out.push(invalid(
                        path,
                        value,
                        format!("{shown_path} in body must be of type {format}: {value}"),
                    ));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or_default();
            if let Some(min) = schema["minimum"].as_f64() {
                let exclusive = schema["exclusiveMinimum"] == true;
                if x < min || (exclusive && x == min) {
                    let op = if exclusive {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    out.push(invalid(
                        path,
                        value,
                        format!("{shown_path} in body should be {op} {min}"),
                    ));
                }
            }
            if let Some(max) = schema["maximum"].as_f64() {
                let exclusive = schema["exclusiveMaximum"] == true;
                if x > max || (exclusive && x == max) {
                    let op = if exclusive {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    out.push(invalid(
                        path,
                        value,
                        format!("{shown_path} in body should be {op} {max}"),
                    ));
                }
            }
        }
        Value::Array(items) => check_array(schema, items, path, shown_path, value, out),
        Value::Object(map) => check_object(schema, map, path, shown_path, value, out),
        _ => {}
    }
}

fn for_combinators(schema: &Value, value: &Value, path: &str, out: &mut Vec<Cause>) {
    let run = |s: &Value| {
        let mut errs = Vec::new();
        check(s, value, path, &mut errs);
        errs
    };
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if let Some(any) = schema["anyOf"].as_array() {
        // The int-or-string idiom's branches only restate the type.
        if !int_or_string {
            let results: Vec<Vec<Cause>> = any.iter().map(run).collect();
            if !results.iter().any(Vec::is_empty) {
                out.push(invalid(
                    path,
                    value,
                    "must validate at least one schema (anyOf)".into(),
                ));
                out.extend(results.into_iter().next().unwrap_or_default());
            }
        }
    }
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            out.extend(run(s));
        }
    }
    if let Some(one) = schema["oneOf"].as_array() {
        let passing = one.iter().filter(|s| run(s).is_empty()).count();
        if passing != 1 {
            out.push(invalid(
                path,
                value,
                "must validate one and only one schema (oneOf)".into(),
            ));
        }
    }
    if schema["not"].is_object() && run(&schema["not"]).is_empty() {
        out.push(invalid(
            path,
            value,
            "must not validate the schema (not)".into(),
        ));
    }
}

/// What the real server says when `count` is below `schema[key]`
/// (`minItems`, `minProperties`) of `noun` at `shown_path`; `None` when not.
fn too_few(
    schema: &Value,
    key: &str,
    count: usize,
    noun: &str,
    shown_path: &str,
) -> Option<String> {
    let min = schema[key].as_u64()?;
    ((count as u64) < min)
        .then(|| format!("{shown_path} in body should have at least {min} {noun}"))
}

fn check_array(
    schema: &Value,
    items: &[Value],
    path: &str,
    shown_path: &str,
    value: &Value,
    out: &mut Vec<Cause>,
) {
    if let Some(message) = too_few(schema, "minItems", items.len(), "items", shown_path) {
        out.push(invalid(path, value, message));
    }
    if let Some(max) = schema["maxItems"].as_u64() {
        if items.len() as u64 > max {
            out.push(Cause::new(
                "FieldValueTooMany",
                path,
                format!("Too many: {}: must have at most {max} items", items.len()),
            ));
        }
    }
    for (i, item) in items.iter().enumerate() {
        check(&schema["items"], item, &format!("{path}[{i}]"), out);
    }
    let keys: Option<Vec<&str>> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .map(|k| k.iter().filter_map(Value::as_str).collect());
    let identity = |item: &Value| -> Value {
        match (schema["x-kubernetes-list-type"].as_str(), &keys) {
            (Some("map"), Some(keys)) => {
                Value::Array(keys.iter().map(|k| item[*k].clone()).collect())
            }
            _ => item.clone(),
        }
    };
    if matches!(
        schema["x-kubernetes-list-type"].as_str(),
        Some("set" | "map")
    ) {
        for (i, item) in items.iter().enumerate() {
            let id = identity(item);
            if items[..i].iter().any(|earlier| identity(earlier) == id) {
                out.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("{path}[{i}]"),
                    format!(
                        "Duplicate value: {}",
                        if item.is_object() {
                            id.to_string()
                        } else {
                            item.to_string()
                        }
                    ),
                ));
            }
        }
    }
}

fn check_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    shown_path: &str,
    value: &Value,
    out: &mut Vec<Cause>,
) {
    for required in schema["required"].as_array().into_iter().flatten() {
        if let Some(key) = required.as_str() {
            if map.get(key).is_none_or(Value::is_null) {
                out.push(Cause::new(
                    "FieldValueRequired",
                    child(path, key),
                    "Required value",
                ));
            }
        }
    }
    if let Some(message) = too_few(schema, "minProperties", map.len(), "properties", shown_path) {
        out.push(invalid(path, value, message));
    }
    if let Some(max) = schema["maxProperties"].as_u64() {
        if map.len() as u64 > max {
            out.push(invalid(
                path,
                value,
                format!("{shown_path} in body should have at most {max} properties"),
            ));
        }
    }
    for (key, v) in map {
        if path.is_empty() && matches!(key.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        if let Some(s) = property(schema, key) {
            check(s, v, &child(path, key), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::{liqo_crd_dir, read_crd_file};

    fn slice_schema() -> Value {
        let path = liqo_crd_dir("v1.2.0").join("authentication.liqo.io_resourceslices.yaml");
        read_crd_file(&path).unwrap()[0].schemas["v1beta1"].clone()
    }

    /// (field, reason) of every cause, sorted.
    fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
        let mut out: Vec<_> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn quantities_are_int_or_string_matching_the_pattern() {
        let schema = slice_schema();
        let slice = |cpu: Value| {
            json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                   "metadata": {"name": "s"}, "spec": {"resources": {"cpu": cpu}}})
        };
        for ok in [
            json!("4"),
            json!("500m"),
            json!("1.5Gi"),
            json!(2),
            json!("1e3"),
        ] {
            assert!(
                validate(&schema, &slice(ok.clone()), None).is_empty(),
                "{ok}"
            );
        }
        let causes = validate(&schema, &slice(json!("four")), None);
        assert_eq!(
            fields(&causes),
            [("spec.resources.cpu", "FieldValueInvalid")]
        );
        assert!(
            causes[0].message.contains("should match"),
            "{}",
            causes[0].message
        );
        let causes = validate(&schema, &slice(json!(true)), None);
        assert_eq!(
            fields(&causes),
            [("spec.resources.cpu", "FieldValueTypeInvalid")]
        );
        let causes = validate(&schema, &slice(json!(1.5)), None);
        assert_eq!(
            fields(&causes),
            [("spec.resources.cpu", "FieldValueTypeInvalid")]
        );
    }

    #[test]
    fn enums_required_types_and_formats() {
        let schema = slice_schema();
        let object = json!({"metadata": {"name": "s"}, "spec": {"class": 3, "consumerClusterID": "Bad_ID"},
            "status": {"conditions": [
                {"type": "Resources", "status": "Maybe"},
                {"status": "Accepted", "lastTransitionTime": "yesterday"}]}});
        let causes = validate(&schema, &object, None);
        assert_eq!(
            fields(&causes),
            [
                ("spec.class", "FieldValueTypeInvalid"),
                ("spec.consumerClusterID", "FieldValueInvalid"),
                ("status.conditions[0].status", "FieldValueNotSupported"),
                (
                    "status.conditions[1].lastTransitionTime",
                    "FieldValueInvalid"
                ),
                ("status.conditions[1].type", "FieldValueRequired"),
            ]
        );
        let status = causes
            .iter()
            .find(|c| c.field == "status.conditions[0].status")
            .unwrap();
        assert_eq!(
            status.message,
            "Unsupported value: \"Maybe\": supported values: \"Accepted\", \"Denied\""
        );
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_filled() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "mode": {"type": "string", "default": "Auto"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "opaque": {"type": "object"},
                "maybe": {"type": "string", "nullable": true},
                "never": {"type": "string"}}}}});
        let mut object = json!({"apiVersion": "x/v1", "kind": "X",
            "metadata": {"name": "a", "bogus": 1}, "extra": 1,
            "spec": {"unknown": 1, "free": {"any": {"thing": 1}}, "opaque": {"gone": 1},
                     "maybe": null, "never": null}});
        prune_and_default(&schema, &mut object);
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
                   "spec": {"mode": "Auto", "free": {"any": {"thing": 1}}, "opaque": {}, "maybe": null}})
        );
        assert!(validate(&schema, &object, None).is_empty());
    }

    #[test]
    fn bounds_lists_and_immutability() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 3},
            "s": {"type": "string", "maxLength": 2, "minLength": 1},
            "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"},
                  "x-kubernetes-list-type": "set"},
            "id": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "id is immutable"}]}}});
        let bad = json!({"n": 4, "s": "abc", "l": ["a", "a", "b"], "id": "y"});
        let causes = validate(&schema, &bad, Some(&json!({"id": "x"})));
        assert_eq!(
            fields(&causes),
            [
                ("", "FieldValueInvalid"),
                ("l", "FieldValueTooMany"),
                ("l[1]", "FieldValueDuplicate"),
                ("n", "FieldValueInvalid"),
                ("s", "FieldValueTooLong"),
            ]
        );
        let blocked = causes.iter().find(|c| c.field.is_empty()).unwrap();
        assert_eq!(
            blocked.message,
            rules::not_checked().message,
            "blocked rules"
        );
        let good = json!({"n": 1, "s": "ab", "l": ["a"], "id": "x"});
        assert!(validate(&schema, &good, Some(&json!({"id": "x"}))).is_empty());
        assert!(
            validate(&schema, &json!({"id": "new"}), None).is_empty(),
            "create is free"
        );
        // With the schema errors gone, the rule runs; the value is shown.
        let changed = json!({"n": 1, "s": "ab", "l": ["a"], "id": "y"});
        let causes = validate(&schema, &changed, Some(&json!({"id": "x"})));
        assert_eq!(fields(&causes), [("id", "FieldValueInvalid")]);
        assert_eq!(causes[0].message, "Invalid value: \"y\": id is immutable");
    }
}
