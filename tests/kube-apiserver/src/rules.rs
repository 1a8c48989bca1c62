//! `x-kubernetes-validations` (CEL validation rules) of a CRD schema, at
//! every level — the object, its properties, list items and
//! `additionalProperties` values — as the real API server checks them
//! when a CRD is registered and evaluates them on every write.
//!
//! Followed, from kubernetes/kubernetes
//! `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`:
//! `self` is the value at the rule's level, `oldSelf` its old value on an
//! update; a transition rule (one that reads `oldSelf`) is skipped when no
//! old value correlates (a create, a new map key, an item of a list that
//! is not `x-kubernetes-list-type: map`, anything under an
//! `x-kubernetes-map-type: atomic` map); the detail is the `message`, else
//! the evaluated `messageExpression`, else `failed rule: <rule>`; the
//! field is the rule's level joined with its `fieldPath`; `reason` picks
//! the error type; the value is shown for scalars and omitted for objects
//! and arrays (`fieldErrorForReason`, `validateExpressions`) — the shape
//! since Kubernetes v1.35 (kubernetes/kubernetes#132798 and #133832, merged
//! September 2025); v1.34 and earlier printed the schema type instead
//! (`Invalid value: "string": …`). As in
//! `pkg/registry/customresource/strategy.go` (`hasBlockingErr`), the rules
//! are not evaluated when the schema check already found a type, required,
//! enum or size error.
//!
//! What is refused at registration instead is in [`crate::rule_check`].

use serde_json::Value;

use crate::cel;
use crate::rule_check::{child, normalized_field_path, rules_in};
use crate::status::Cause;

/// Whether a schema error keeps the rules from running (`hasBlockingErr`).
pub fn blocking(causes: &[Cause]) -> bool {
    causes.iter().any(|c| {
        matches!(
            c.reason.as_str(),
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
    })
}

/// The cause `hasBlockingErr` adds instead of running the rules.
pub fn not_checked() -> Cause {
    Cause::new(
        "FieldValueInvalid",
        "",
        "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    )
}

/// Every rule violated by `value` (with `old`, the stored object on an
/// update) under `schema`.
pub fn validate(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    walk_value(schema, value, old, "", &mut out);
    out
}

/// How `field.Error` prints a bad value: `"text"`, `3`, `true`; objects and
/// arrays are omitted (`field.OmitValueType`).
fn value_part(value: &Value) -> Option<String> {
    match value {
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn walk_value(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    if !schema.is_object() || value.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    evaluate(schema, value, old, path, out);
    for s in schema["allOf"].as_array().into_iter().flatten() {
        walk_value(s, value, old, path, out);
    }
    let atomic = schema["x-kubernetes-map-type"] == "atomic";
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let old_v = old.and_then(|o| o.get(key)).filter(|_| !atomic);
                if let Some(s) = schema["properties"].get(key) {
                    if !(path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind")) {
                        walk_value(s, v, old_v, &child(path, key), out);
                    }
                } else if schema["additionalProperties"].is_object() {
                    walk_value(
                        &schema["additionalProperties"],
                        v,
                        old_v,
                        &format!("{path}[{key}]"),
                        out,
                    );
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let keyed = schema["x-kubernetes-list-type"] == "map" && !keys.is_empty();
            for (i, item) in items.iter().enumerate() {
                // Only map-type lists correlate items with old ones, by key.
                let old_item = old
                    .filter(|_| keyed)
                    .and_then(Value::as_array)
                    .and_then(|olds| {
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
                    });
                walk_value(
                    &schema["items"],
                    item,
                    old_item,
                    &format!("{path}[{i}]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

fn evaluate(schema: &Value, value: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    let ty = schema["type"].as_str().unwrap_or("object");
    for rule in rules_in(schema) {
        let text = rule["rule"].as_str().unwrap_or_default();
        // Registration compiled every rule; one that no longer does is
        // reported, as the real server reports a compile error.
        let compiled = match cel::compile(text, &["self", "oldSelf"]) {
            Ok(c) => c,
            Err(e) => {
                out.push(Cause::new(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {ty:?}: rule compile error: {e}"),
                ));
                continue;
            }
        };
        if compiled.uses("oldSelf") && old.is_none() {
            continue;
        }
        let mut vars: Vec<(&str, &Value)> = vec![("self", value)];
        if let Some(old) = old {
            vars.push(("oldSelf", old));
        }
        let rule_text = rule["message"]
            .as_str()
            .filter(|m| !m.is_empty())
            .unwrap_or(text)
            .trim();
        match compiled.eval(&vars) {
            Ok(cel::CelValue::Bool(true)) => continue,
            Ok(_) => {}
            Err(e) => {
                let detail = if e.contains("found no matching overload") {
                    format!("'{e}': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}")
                } else {
                    format!("{e} evaluating rule: {rule_text}")
                };
                out.push(Cause::new(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {ty:?}: {detail}"),
                ));
                continue;
            }
        }
        let field = match rule["fieldPath"].as_str() {
            Some(fp) => match normalized_field_path(schema, fp) {
                Ok(rel) if rel.starts_with('[') => format!("{path}{rel}"),
                Ok(rel) => child(path, &rel),
                Err(_) => path.to_string(),
            },
            None => path.to_string(),
        };
        let detail = message_expression(rule, &vars).unwrap_or_else(|| {
            match rule["message"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => m.trim().to_string(),
                None => format!("failed rule: {}", text.trim()),
            }
        });
        let shown = value_part(value);
        let cause = match rule["reason"].as_str().unwrap_or("FieldValueInvalid") {
            "FieldValueForbidden" => {
                Cause::new("FieldValueForbidden", field, format!("Forbidden: {detail}"))
            }
            "FieldValueRequired" => Cause::new(
                "FieldValueRequired",
                field,
                format!("Required value: {detail}"),
            ),
            "FieldValueDuplicate" => Cause::new(
                "FieldValueDuplicate",
                field,
                match shown {
                    Some(v) => format!("Duplicate value: {v}"),
                    None => "Duplicate value".to_string(),
                },
            ),
            _ => Cause::new(
                "FieldValueInvalid",
                field,
                match shown {
                    Some(v) => format!("Invalid value: {v}: {detail}"),
                    None => format!("Invalid value: {detail}"),
                },
            ),
        };
        out.push(cause);
    }
}

/// The evaluated `messageExpression`, when it gives a usable message
/// (`evalMessageExpression`: a string, trimmed, not empty, one line).
fn message_expression(rule: &Value, vars: &[(&str, &Value)]) -> Option<String> {
    let expr = rule["messageExpression"].as_str()?;
    let compiled = cel::compile(expr, &["self", "oldSelf"]).ok()?;
    match compiled.eval(vars) {
        Ok(cel::CelValue::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n')).then(|| s.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(causes: &[Cause]) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = causes
            .iter()
            .map(|c| (c.field.clone(), c.reason.clone(), c.message.clone()))
            .collect();
        out.sort();
        out
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max", "fieldPath": ".min"},
                {"rule": "!has(self.mode) || self.mode != 'Off' || self.min == 0",
                 "messageExpression": "'mode Off needs min 0, not ' + string(self.min)"},
                {"rule": "self.max <= oldSelf.max + 10", "reason": "FieldValueForbidden"}],
            "properties": {
                "min": {"type": "integer"}, "max": {"type": "integer"}, "mode": {"type": "string"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer",
                        "x-kubernetes-validations": [{"rule": "self > 0"}, {"rule": "self == oldSelf", "message": "port is immutable"}]}}}},
                "tags": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self.size() <= 3", "reason": "FieldValueRequired"}]}},
                "labels": {"type": "object", "additionalProperties": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self != ''"}, {"rule": "self == oldSelf"}]}}}}}})
    }

    #[test]
    fn rules_run_at_every_level_with_message_field_path_and_reason() {
        let object = json!({"spec": {"min": 5, "max": 2, "mode": "Off",
            "ports": [{"name": "a", "port": 0}], "tags": ["ok", "toolong"],
            "labels": {"x": ""}}});
        assert_eq!(
            fields(&validate(&schema(), &object, None)),
            [
                (
                    "spec".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: mode Off needs min 0, not 5".into()
                ),
                (
                    "spec.labels[x]".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: \"\": failed rule: self != ''".into()
                ),
                (
                    "spec.min".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: min must not exceed max".into()
                ),
                (
                    "spec.ports[0].port".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: 0: failed rule: self > 0".into()
                ),
                (
                    "spec.tags[1]".into(),
                    "FieldValueRequired".into(),
                    "Required value: failed rule: self.size() <= 3".into()
                ),
            ]
        );
    }

    #[test]
    fn transition_rules_run_only_where_an_old_value_correlates() {
        let old = json!({"spec": {"min": 0, "max": 1, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}],
            "labels": {"x": "1"}}});
        let new = json!({"spec": {"min": 0, "max": 20, "ports": [{"name": "b", "port": 90}, {"name": "c", "port": 1}],
            "labels": {"x": "2", "y": "3"}}});
        assert_eq!(
            fields(&validate(&schema(), &new, Some(&old))),
            [
                (
                    "spec".into(),
                    "FieldValueForbidden".into(),
                    "Forbidden: failed rule: self.max <= oldSelf.max + 10".into()
                ),
                (
                    "spec.labels[x]".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: \"2\": failed rule: self == oldSelf".into()
                ),
                (
                    "spec.ports[0].port".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: 90: port is immutable".into()
                ),
            ]
        );
        assert!(
            validate(&schema(), &new, None).is_empty(),
            "a create runs no transition rule"
        );
    }
}
