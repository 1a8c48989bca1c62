//! What the real API server checks of a CRD schema's CEL rules and
//! patterns when the CRD is written, as
//! `staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go`
//! refuses them: a rule or `messageExpression` that does not compile, a
//! `reason` outside the four allowed, a `fieldPath` that names no field,
//! `oldSelf` where nothing correlates — and this server's own limit, a
//! rule using a function or variable it does not evaluate ([`crate::cel`]).
//! A `pattern` that does not compile is refused too. The rules themselves
//! run in the `rules` module, on every write.

use serde_json::Value;

use crate::cel::{self, CelError};

/// A schema this server refuses to register, naming the rule or pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{path}: x-kubernetes-validations rule {rule:?}: {error}")]
    Rule {
        path: String,
        rule: String,
        error: String,
    },
    #[error("{path}: pattern {pattern:?} does not compile: {error}")]
    Pattern {
        path: String,
        pattern: String,
        error: String,
    },
}

const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// The `.`-joined child path, as `field.Path.Child` prints it.
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The variables a rule at this level may read.
fn declared(correlatable: bool) -> &'static [&'static str] {
    if correlatable {
        &["self", "oldSelf"]
    } else {
        &["self"]
    }
}

/// Everything the real server checks of a schema's rules and patterns when
/// a CRD is written (and the functions this server evaluates).
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    walk_schema(schema, "", true)
}

fn walk_schema(schema: &Value, path: &str, correlatable: bool) -> Result<(), SchemaError> {
    if !schema.is_object() {
        return Ok(());
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        regex::Regex::new(pattern).map_err(|e| SchemaError::Pattern {
            path: path.to_string(),
            pattern: pattern.to_string(),
            error: e.to_string(),
        })?;
    }
    for rule in rules_in(schema) {
        let text = rule["rule"].as_str().unwrap_or_default();
        let fail = |error: String| SchemaError::Rule {
            path: path.to_string(),
            rule: text.to_string(),
            error,
        };
        let uncorrelated = |e: CelError| match e {
            CelError::UndeclaredVariable(v) if v == "oldSelf" => format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {}",
                if path.is_empty() { "<root>" } else { path }
            ),
            other => other.to_string(),
        };
        cel::compile(text, declared(correlatable)).map_err(|e| fail(uncorrelated(e)))?;
        if let Some(expr) = rule["messageExpression"].as_str() {
            cel::compile(expr, declared(correlatable))
                .map_err(|e| fail(format!("messageExpression: {}", uncorrelated(e))))?;
        }
        if let Some(reason) = rule["reason"].as_str() {
            if !REASONS.contains(&reason) {
                return Err(fail(format!(
                    "reason {reason:?}: supported values: {}",
                    REASONS.join(", ")
                )));
            }
        }
        if let Some(field_path) = rule["fieldPath"].as_str() {
            normalized_field_path(schema, field_path)
                .map_err(|e| fail(format!("fieldPath {field_path:?}: {e}")))?;
        }
    }
    let atomic = schema["x-kubernetes-map-type"] == "atomic";
    if let Some(props) = schema["properties"].as_object() {
        for (key, s) in props {
            walk_schema(s, &child(path, key), correlatable && !atomic)?;
        }
    }
    if schema["additionalProperties"].is_object() {
        walk_schema(
            &schema["additionalProperties"],
            &child(path, "*"),
            correlatable && !atomic,
        )?;
    }
    if schema["items"].is_object() {
        let keyed = schema["x-kubernetes-list-type"] == "map";
        walk_schema(
            &schema["items"],
            &format!("{path}[*]"),
            correlatable && keyed,
        )?;
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for s in schema[combinator].as_array().into_iter().flatten() {
            walk_schema(s, path, correlatable)?;
        }
    }
    walk_schema(&schema["not"], path, correlatable)
}

pub(crate) fn rules_in(schema: &Value) -> impl Iterator<Item = &Value> {
    schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
}

/// A rule's `fieldPath` (`.spec.x`, `.labels['a.b']`) as a field path
/// relative to the rule's level (`spec.x`, `labels[a.b]`), checked
/// against the schema as `ValidFieldPath` does.
pub(crate) fn normalized_field_path(schema: &Value, field_path: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut node = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (name, quoted, after) = if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']").ok_or("unexpected end of JSON path")?;
            (&r[..end], true, &r[end + 2..])
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (&r[..end], false, &r[end..])
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        };
        if name.is_empty() {
            return Err("unexpected end of JSON path".into());
        }
        if let Some(s) = node["properties"].get(name) {
            out = child(&out, name);
            node = s;
        } else if node["properties"].is_object() || !node["additionalProperties"].is_object() {
            return Err("does not refer to a valid field".into());
        } else {
            out = format!("{out}[{name}]");
            node = &node["additionalProperties"];
        }
        let _ = quoted;
        rest = after;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn registration_refuses_what_cannot_be_enforced() {
        let with_rule = |rule: Value| {
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"l": {"type": "array", "items": {"type": "string"}}},
            "x-kubernetes-validations": [rule]}}})
        };
        assert_eq!(
            check_schema(&with_rule(
                json!({"rule": "self.l.size() < 3", "fieldPath": ".l",
                "messageExpression": "'too many: ' + string(self.l.size())"})
            )),
            Ok(())
        );
        let err = check_schema(&with_rule(json!({"rule": "self.l.isSorted()"}))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec: x-kubernetes-validations rule \"self.l.isSorted()\": function 'isSorted' is not evaluated by this server"
        );
        assert!(check_schema(&with_rule(json!({"rule": "self.l ="}))).is_err());
        assert!(check_schema(&with_rule(json!({"rule": "true", "reason": "Nope"}))).is_err());
        assert!(check_schema(&with_rule(json!({"rule": "true", "fieldPath": ".nope"}))).is_err());
        assert!(check_schema(&with_rule(
            json!({"rule": "true", "messageExpression": "x +"})
        ))
        .is_err());
        let in_set = json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}});
        assert!(check_schema(&in_set).unwrap_err().to_string().contains(
            "oldSelf cannot be used on the uncorrelatable portion of the schema within l[*]"
        ));
        let pattern = json!({"properties": {"s": {"type": "string", "pattern": "a("}}});
        assert!(matches!(
            check_schema(&pattern),
            Err(SchemaError::Pattern { .. })
        ));
    }
}
