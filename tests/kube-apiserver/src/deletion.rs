//! What a DELETE does to an object before it is gone, as the generic
//! registry of Kubernetes v1.31.0 decides it (pure decisions; the store
//! makes the writes):
//!
//! - `DeleteOptions` checked as `ValidateDeleteOptions`
//!   (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`):
//!   `orphanDependents` and `propagationPolicy` not both, and a known policy;
//! - the garbage-collection finalizers the options ask for,
//!   `deletionFinalizersForGarbageCollection`, `shouldOrphanDependents` and
//!   `shouldDeleteDependents`
//!   (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`):
//!   `Orphan` puts `orphan`, `Foreground` puts `foregroundDeletion`,
//!   `Background` takes both away; without options the object's own
//!   finalizers decide, and the default is background (every resource
//!   served here has the `DeleteDependents` default policy);
//! - `markAsDeleting` (same file) and `BeforeDelete`
//!   (`staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go`): the first
//!   time an object is marked for deletion its `metadata.generation`, if
//!   set (> 0), goes up by one, so that a controller sees that it must act;
//!   `deletionTimestamp` is now and `deletionGracePeriodSeconds` 0.

use serde_json::{json, Value};

use crate::status::{ApiError, Cause};

/// `metav1.FinalizerOrphanDependents`.
pub const ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub const FOREGROUND: &str = "foregroundDeletion";

/// `metav1.DeletionPropagation`, or what the options leave to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }

    /// A `DeleteOptions` body asking for this policy.
    pub fn options(self) -> Value {
        json!({"propagationPolicy": self.as_str()})
    }
}

/// What `DeleteOptions` ask of garbage collection: the explicit
/// `orphanDependents` (deprecated) or `propagationPolicy`, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    pub orphan_dependents: Option<bool>,
    pub propagation: Option<Propagation>,
}

/// The 422 `ValidateDeleteOptions` gives (`NewInvalid` on the
/// `DeleteOptions` kind of `meta.k8s.io`, with no name).
fn invalid(causes: Vec<Cause>) -> ApiError {
    let joined: Vec<String> = causes.iter().map(Cause::text).collect();
    let message = if joined.len() == 1 {
        joined[0].clone()
    } else {
        format!("[{}]", joined.join(", "))
    };
    let causes_json: Vec<Value> = causes
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect();
    ApiError::new(
        422,
        "Invalid",
        format!("DeleteOptions.meta.k8s.io \"\" is invalid: {message}"),
    )
    .with_details(json!({"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": causes_json}))
}

/// Read and check a DELETE's options (`Null`: none sent).
pub fn parse(options: &Value) -> Result<Options, ApiError> {
    let orphan_dependents = options["orphanDependents"].as_bool();
    let policy = options["propagationPolicy"].as_str();
    let mut causes = Vec::new();
    if orphan_dependents.is_some() && policy.is_some() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "propagationPolicy",
            format!(
                "Invalid value: \"{}\": orphanDependents and deletionPropagation cannot be both set",
                policy.unwrap_or_default()
            ),
        ));
    }
    let propagation = match policy {
        None => None,
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some(other) => {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                "propagationPolicy",
                format!("Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""),
            ));
            None
        }
    };
    if !causes.is_empty() {
        return Err(invalid(causes));
    }
    Ok(Options {
        orphan_dependents,
        propagation,
    })
}

/// `shouldOrphanDependents`.
fn should_orphan(options: &Options, finalizers: &[String]) -> bool {
    if let Some(orphan) = options.orphan_dependents {
        return orphan;
    }
    if let Some(p) = options.propagation {
        return p == Propagation::Orphan;
    }
    for f in finalizers {
        match f.as_str() {
            ORPHAN => return true,
            FOREGROUND => return false,
            _ => {}
        }
    }
    false
}

/// `shouldDeleteDependents`.
fn should_delete_dependents(options: &Options, finalizers: &[String]) -> bool {
    if options.orphan_dependents.is_some() {
        return false;
    }
    if let Some(p) = options.propagation {
        return p == Propagation::Foreground;
    }
    for f in finalizers {
        match f.as_str() {
            FOREGROUND => return true,
            ORPHAN => return false,
            _ => {}
        }
    }
    false
}

/// `deletionFinalizersForGarbageCollection`: the finalizers the object
/// should have, if they differ (as a set) from `finalizers`.
pub fn gc_finalizers(options: &Options, finalizers: &[String]) -> Option<Vec<String>> {
    let mut new: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if should_orphan(options, finalizers) {
        new.push(ORPHAN.into());
    }
    if should_delete_dependents(options, finalizers) {
        new.push(FOREGROUND.into());
    }
    let mut a: Vec<&String> = finalizers.iter().collect();
    let mut b: Vec<&String> = new.iter().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    (a != b).then_some(new)
}

/// `markAsDeleting`: the object as it is kept, marked, while finalizers
/// remain. The generation goes up only the first time.
pub fn mark_as_deleting(object: &mut Value, now: &str) {
    let meta = &mut object["metadata"];
    if !meta["deletionTimestamp"].is_string() {
        if let Some(generation) = meta["generation"].as_i64().filter(|g| *g > 0) {
            meta["generation"] = json!(generation + 1);
        }
        meta["deletionTimestamp"] = json!(now);
    }
    meta["deletionGracePeriodSeconds"] = json!(0);
}

/// The finalizers of an object, as strings.
pub fn finalizer_names(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_are_checked_as_validate_delete_options() {
        assert_eq!(parse(&Value::Null).unwrap(), Options::default());
        let e = parse(&json!({"propagationPolicy": "Sideways"})).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\""
        );
        assert!(parse(&json!({"propagationPolicy": "Orphan", "orphanDependents": true})).is_err());
    }

    #[test]
    fn the_policy_puts_or_takes_the_gc_finalizers() {
        let foreground = parse(&Propagation::Foreground.options()).unwrap();
        assert_eq!(
            gc_finalizers(&foreground, &names(&["a"])),
            Some(names(&["a", FOREGROUND]))
        );
        let orphan = parse(&Propagation::Orphan.options()).unwrap();
        assert_eq!(
            gc_finalizers(&orphan, &names(&[FOREGROUND])),
            Some(names(&[ORPHAN]))
        );
        let background = parse(&Propagation::Background.options()).unwrap();
        assert_eq!(
            gc_finalizers(&background, &names(&[ORPHAN, "a"])),
            Some(names(&["a"]))
        );
        // Without options, the object's own finalizers stand.
        assert_eq!(gc_finalizers(&Options::default(), &names(&[ORPHAN])), None);
        assert_eq!(gc_finalizers(&Options::default(), &[]), None);
    }

    #[test]
    fn marking_bumps_a_set_generation_once() {
        let mut o = json!({"metadata": {"generation": 3}});
        mark_as_deleting(&mut o, "t1");
        mark_as_deleting(&mut o, "t2");
        assert_eq!(o["metadata"]["generation"], 4);
        assert_eq!(o["metadata"]["deletionTimestamp"], "t1");
        let mut unset = json!({"metadata": {}});
        mark_as_deleting(&mut unset, "t1");
        assert!(unset["metadata"]["generation"].is_null());
    }
}
