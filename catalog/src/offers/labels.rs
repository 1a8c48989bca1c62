//! Provider labels on offers (`region`, `topology.kubernetes.io/zone`,
//! `compliance`…): a map of Kubernetes label keys to label values, validated
//! exactly as Kubernetes validates object labels
//! (`k8s.io/apimachinery/pkg/util/validation`: `IsQualifiedName` for keys,
//! `IsValidLabelValue` for values), so a label a provider publishes can be
//! put on a Kubernetes object unchanged.

use std::collections::BTreeMap;

use crate::http::FieldError;

/// Labels of one offer: key → value.
pub type Labels = BTreeMap<String, String>;

/// Most labels one offer may carry.
pub const MAX_LABELS: usize = 64;
/// Longest name part of a key, and longest value (Kubernetes: 63).
const MAX_NAME_LEN: usize = 63;
/// Longest key prefix, a DNS-1123 subdomain (Kubernetes: 253).
const MAX_PREFIX_LEN: usize = 253;

/// Validate an offer's labels; the error names the offending key as
/// `labels.<key>`.
pub fn validate(labels: &Labels) -> Result<(), FieldError> {
    if labels.len() > MAX_LABELS {
        return Err(FieldError::new(
            "labels",
            format!("at most {MAX_LABELS} labels are allowed"),
        ));
    }
    for (key, value) in labels {
        let field = format!("labels.{key}");
        check_key(key).map_err(|m| FieldError::new(field.clone(), m))?;
        check_value(value).map_err(|m| FieldError::new(field, m))?;
    }
    Ok(())
}

/// A label key: an optional DNS-1123 subdomain prefix (≤253) and `/`, then a
/// name of 1 to 63 of `A-Z a-z 0-9 - _ .`, beginning and ending with an
/// alphanumeric character.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("the key's prefix (before '/') must not be empty".into());
        }
        if prefix.len() > MAX_PREFIX_LEN {
            return Err(format!(
                "the key's prefix must be at most {MAX_PREFIX_LEN} characters"
            ));
        }
        if !is_dns1123_subdomain(prefix) {
            return Err("the key's prefix must be a DNS-1123 subdomain: lower-case alphanumeric characters, '-' or '.', beginning and ending with an alphanumeric character".into());
        }
    }
    if name.is_empty() {
        return Err("the key's name part must not be empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "the key's name part must be at most {MAX_NAME_LEN} characters"
        ));
    }
    if !is_label_name(name) {
        return Err("the key's name part must consist of alphanumeric characters, '-', '_' or '.', beginning and ending with an alphanumeric character (one optional prefix and '/')".into());
    }
    Ok(())
}

/// A label value: empty, or 1 to 63 of `A-Z a-z 0-9 - _ .` beginning and
/// ending with an alphanumeric character.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_NAME_LEN {
        return Err(format!(
            "the value must be at most {MAX_NAME_LEN} characters"
        ));
    }
    if !value.is_empty() && !is_label_name(value) {
        return Err("the value must be empty or consist of alphanumeric characters, '-', '_' or '.', beginning and ending with an alphanumeric character".into());
    }
    Ok(())
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) if f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric() => b
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')),
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let b = part.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) if alnum(f) && alnum(l) => b.iter().all(|c| alnum(c) || *c == b'-'),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_kubernetes_validates_them() {
        for good in [
            "region",
            "a",
            "Region_1.x-y",
            "topology.kubernetes.io/zone",
            "liqo.io/remote-cluster-id",
            "example.com/A",
            &"a".repeat(63),
            &format!("{}/{}", "a".repeat(253), "b".repeat(63)),
        ] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/x",
            "x/",
            "a/b/c",
            "-a",
            "a-",
            "_a",
            "a b",
            "é",
            "Example.com/x",
            "ex_ample.com/x",
            "-ex.com/x",
            "ex..com/x",
            "ex.com./x",
            &"a".repeat(64),
            &format!("{}/b", "a".repeat(254)),
        ] {
            assert!(check_key(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn values_as_kubernetes_validates_them() {
        for good in ["", "eu-west-1", "A.b_c-9", &"v".repeat(63)] {
            assert_eq!(check_value(good), Ok(()), "{good}");
        }
        for bad in ["-x", "x-", "a/b", "a b", "a=b", &"v".repeat(64)] {
            assert!(check_value(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let labels: Labels = [("region".to_string(), "eu".to_string())]
            .into_iter()
            .chain([("bad key".to_string(), "x".to_string())])
            .collect();
        assert_eq!(validate(&labels).unwrap_err().field, "labels.bad key");
        let labels: Labels = [("zone".to_string(), "-x".to_string())].into();
        assert_eq!(validate(&labels).unwrap_err().field, "labels.zone");
        let many: Labels = (0..=MAX_LABELS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert_eq!(validate(&many).unwrap_err().field, "labels");
    }
}
