//! Label selectors (`metav1.LabelSelector`) over an object's
//! `metadata.labels`, as `LabelSelectorAsSelector` and
//! `labels.Requirement.Matches` evaluate them.

use serde_json::{Map, Value};

/// Whether `selector` (a JSON `LabelSelector`) matches `labels` (an
/// object's `metadata.labels`, absent when it has none). `matchLabels` and
/// every `matchExpressions` requirement must hold; `{}` matches everything.
/// A selector that is not an object (`null`) matches nothing: callers treat
/// an absent selector field themselves.
pub(crate) fn matches(selector: &Value, labels: Option<&Map<String, Value>>) -> bool {
    let Some(selector) = selector.as_object() else {
        return false;
    };
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(key, want)| label(key).is_some() && label(key) == want.as_str());
    if !match_labels {
        return false;
    }
    selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|requirement| {
            let key = requirement.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = requirement
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let value = label(key);
            match requirement.get("operator").and_then(Value::as_str) {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                _ => false,
            }
        })
}

/// `metadata.labels` of an object, if it has any.
pub(crate) fn labels_of(object: &Value) -> Option<&Map<String, Value>> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::matches;
    use serde_json::json;

    #[test]
    fn operators() {
        let labels = json!({"pod": "a", "tier": "web"});
        let labels = labels.as_object();
        let ok = |s| matches(&s, labels);
        assert!(ok(json!({})));
        assert!(ok(json!({"matchLabels": {"pod": "a"}})));
        assert!(!ok(json!({"matchLabels": {"pod": "b"}})));
        assert!(!ok(json!({"matchLabels": {"other": "a"}})));
        let expr = |op: &str, key: &str, values: &[&str]| json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]});
        assert!(ok(expr("In", "pod", &["a", "b"])));
        assert!(!ok(expr("In", "pod", &["b"])));
        assert!(!ok(expr("In", "missing", &["a"])));
        assert!(ok(expr("NotIn", "pod", &["b"])));
        assert!(!ok(expr("NotIn", "pod", &["a"])));
        assert!(ok(expr("NotIn", "missing", &["a"])));
        assert!(ok(expr("Exists", "tier", &[])));
        assert!(!ok(expr("Exists", "missing", &[])));
        assert!(ok(expr("DoesNotExist", "missing", &[])));
        assert!(!ok(expr("DoesNotExist", "tier", &[])));
        assert!(!ok(expr("Gt", "pod", &["1"])));
        // matchLabels AND matchExpressions.
        assert!(!ok(json!({
            "matchLabels": {"pod": "a"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}],
        })));
        // No labels at all.
        assert!(matches(&json!({}), None));
        assert!(!matches(&json!({"matchLabels": {"pod": "a"}}), None));
        assert!(matches(
            &json!({"matchExpressions": [{"key": "pod", "operator": "DoesNotExist"}]}),
            None
        ));
    }
}
