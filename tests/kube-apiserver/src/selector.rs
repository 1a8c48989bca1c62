//! `labelSelector` and `fieldSelector`, parsed and matched as the real
//! server does: label terms `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
//! `k notin (a,b)` (comma = and); field terms `=`, `==`, `!=` on the
//! fields the resource can be selected by (`metadata.name`, and
//! `metadata.namespace` if namespaced, plus its own list). Anything else
//! is refused (400), as the real server refuses unknown fields, so a test
//! never passes on a selector the server silently ignored.

use serde_json::Value;

use crate::crd::ResourceDef;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// One requirement of a field selector: `field` (not) equal to `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub equal: bool,
    pub value: String,
}

/// A parsed `labelSelector` and `fieldSelector`, and the namespace of the
/// request path; every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub labels: Vec<LabelRequirement>,
    pub fields: Vec<FieldRequirement>,
    pub namespace: Option<String>,
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

fn valid_label_value(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Selector {
    pub fn parse(def: &ResourceDef, labels: &str, fields: &str) -> Result<Self, String> {
        Ok(Self {
            labels: parse_label_selector(labels)?,
            fields: parse_field_selector(def, fields)?,
            namespace: None,
        })
    }

    pub fn in_namespace(mut self, namespace: Option<&str>) -> Self {
        self.namespace = namespace.map(str::to_string);
        self
    }

    /// No label or field requirement (the namespace does not count).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if object["metadata"]["namespace"].as_str() != Some(ns.as_str()) {
                return false;
            }
        }
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            // As in Kubernetes, an object without the label matches `!=`.
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
        });
        labels_match
            && self
                .fields
                .iter()
                .all(|r| (field_value(object, &r.field) == r.value) == r.equal)
    }
}

/// A selectable field's value; absent fields are empty (`false` for
/// `spec.unschedulable`), booleans `true`/`false`, as the real server
/// indexes them.
pub fn field_value(object: &Value, field: &str) -> String {
    let mut at = object;
    for part in field.split('.') {
        at = &at[part];
    }
    match at {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null if field == "spec.unschedulable" || field == "spec.hostNetwork" => {
            "false".to_string()
        }
        _ => String::new(),
    }
}

/// Split on commas outside parentheses.
fn terms(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn set_term(term: &str) -> Option<Result<LabelRequirement, ()>> {
    for (op, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(op) {
            let set = set.trim();
            let inner = set.strip_prefix('(').and_then(|s| s.strip_suffix(')'));
            let Some(inner) = inner else {
                return Some(Err(()));
            };
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            let key = key.trim().to_string();
            if !valid_label_key(&key) || values.iter().any(|v| !valid_label_value(v)) {
                return Some(Err(()));
            }
            return Some(Ok(if negated {
                LabelRequirement::NotIn(key, values)
            } else {
                LabelRequirement::In(key, values)
            }));
        }
    }
    None
}

/// `metav1.LabelSelectorAsSelector(&selector).Matches(labels)`
/// (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`):
/// `matchLabels` are `=` requirements, `matchExpressions` `In`, `NotIn`,
/// `Exists`, `DoesNotExist` (`In`/`NotIn` need values, the others none);
/// a selector with neither selects everything.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> Result<bool, String> {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let mut ok = true;
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        ok &= label(k) == v.as_str();
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let operator = e["operator"].as_str().unwrap_or_default();
        ok &= match operator {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!(
                    "values: Invalid value: []string(nil): for '{}', '{}' operators, values set can't be empty",
                    "in", "notin"
                ))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!(
                    "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
                ))
            }
            "In" => label(key).is_some_and(|l| values.contains(&l)),
            "NotIn" => label(key).is_none_or(|l| !values.contains(&l)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        };
    }
    Ok(ok)
}

pub fn parse_label_selector(text: &str) -> Result<Vec<LabelRequirement>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    terms(text)
        .into_iter()
        .map(|term| {
            let term = term.trim();
            let bad = || format!("unable to parse requirement: {term:?}");
            if let Some(set) = set_term(term) {
                return set.map_err(|_| bad());
            }
            let requirement = if let Some(key) = term.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelRequirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else {
                LabelRequirement::Exists(term.to_string())
            };
            let (key, value) = match &requirement {
                LabelRequirement::Equals(k, v) | LabelRequirement::NotEquals(k, v) => {
                    (k, v.as_str())
                }
                LabelRequirement::Exists(k)
                | LabelRequirement::NotExists(k)
                | LabelRequirement::In(k, _)
                | LabelRequirement::NotIn(k, _) => (k, ""),
            };
            if valid_label_key(key) && valid_label_value(value) {
                Ok(requirement)
            } else {
                Err(bad())
            }
        })
        .collect()
}

pub fn parse_field_selector(
    def: &ResourceDef,
    text: &str,
) -> Result<Vec<FieldRequirement>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|term| {
            let term = term.trim();
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !def.field_selectable(field) {
                return Err(format!("field label not supported: {field}"));
            }
            Ok(FieldRequirement {
                field: field.to_string(),
                equal,
                value: value.trim().to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::builtin::{definitions, node, pod};

    fn def(plural: &str) -> ResourceDef {
        definitions()
            .into_iter()
            .find(|d| d.plural == plural && d.group.is_empty())
            .unwrap()
    }

    fn object(labels: Value) -> Value {
        json!({ "metadata": { "name": "p", "namespace": "default", "labels": labels } })
    }

    #[test]
    fn label_selectors_parse_and_match() {
        let pods = def("pods");
        let sel = |s: &str| Selector::parse(&pods, s, "").unwrap();
        let shadow = sel("liqo.io/shadowPod!=true");
        assert!(
            shadow.matches(&object(json!({}))),
            "!= matches an absent label"
        );
        assert!(shadow.matches(&object(json!({"liqo.io/shadowPod": "false"}))));
        assert!(!shadow.matches(&object(json!({"liqo.io/shadowPod": "true"}))));
        for equal in ["a=1", "a==1", " a = 1 "] {
            assert!(sel(equal).matches(&object(json!({"a": "1"}))), "{equal}");
            assert!(!sel(equal).matches(&object(json!({"a": "2"}))), "{equal}");
            assert!(!sel(equal).matches(&object(json!({}))), "{equal}");
        }
        assert!(sel("a").matches(&object(json!({"a": ""}))));
        assert!(!sel("a").matches(&object(json!({"b": "1"}))));
        assert!(sel("!a").matches(&object(json!({"b": "1"}))));
        assert!(!sel("!a").matches(&object(json!({"a": "1"}))));
        let both = sel("a=1,!b");
        assert!(both.matches(&object(json!({"a": "1"}))));
        assert!(!both.matches(&object(json!({"a": "1", "b": "x"}))));
        assert!(!both.matches(&object(json!({"b": "x"}))));
        assert!(sel("").is_empty() && sel("").matches(&object(json!({}))));
        let set = sel("a in (x, y),b notin (z)");
        assert!(set.matches(&object(json!({"a": "y"}))));
        assert!(!set.matches(&object(json!({"a": "y", "b": "z"}))));
        assert!(!set.matches(&object(json!({"a": "w"}))));
        for bad in ["a in x", "=x", "a=b c", "a=1,", "!", "a!=b!c", "a in (b c)"] {
            assert!(
                Selector::parse(&pods, bad, "").is_err(),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn field_selectors_parse_and_match() {
        let (pods, nodes) = (def("pods"), def("nodes"));
        let running = Selector::parse(&pods, "", "status.phase=Running").unwrap();
        let pod_on = |node: &str, phase: &str| pod("p", node, phase, json!({}), "1", "1Gi");
        assert!(running.matches(&pod_on("n1", "Running")));
        assert!(!running.matches(&pod_on("n1", "Succeeded")));
        let elsewhere = Selector::parse(&pods, "", "spec.nodeName!=n1,metadata.name==p").unwrap();
        assert!(elsewhere.matches(&pod_on("n2", "Running")));
        assert!(!elsewhere.matches(&pod_on("n1", "Running")));
        let unscheduled = Selector::parse(&pods, "", "spec.nodeName=").unwrap();
        assert!(unscheduled.matches(&json!({ "metadata": { "name": "q" }, "spec": {} })));
        let schedulable = Selector::parse(&nodes, "", "spec.unschedulable=false").unwrap();
        assert!(schedulable.matches(&node("n", true, false, "1", "1Gi")));
        assert_eq!(
            Selector::parse(&pods, "", "spec.foo=x"),
            Err("field label not supported: spec.foo".to_string())
        );
        assert!(Selector::parse(&nodes, "", "status.phase=Running").is_err());
        assert!(Selector::parse(&nodes, "", "metadata.namespace=x").is_err());
        assert!(Selector::parse(&pods, "", "status.phase").is_err());
        let in_ns = Selector::default().in_namespace(Some("other"));
        assert!(!in_ns.matches(&pod_on("n1", "Running")));
    }
}
