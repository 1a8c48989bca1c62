//! The RBAC storage's escalation check on Role, ClusterRole, RoleBinding
//! and ClusterRoleBinding writes, where a real server runs it: in the
//! storage (`pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/storage.go`,
//! Kubernetes v1.31.0), on the object mutating admission produced and
//! before the generic store validates it and runs the validating
//! admission plugins. The rules themselves are [`rbac::check_escalation`];
//! an update changing nothing but owner references and finalizers is not
//! checked (`IsOnlyMutatingGCFields`, `pkg/registry/rbac/helpers.go`).

use serde_json::Value;

use crate::crd::ResourceDef;
use crate::rbac::{self, Policy, RbacWrite, Rule, UserInfo};
use crate::status::ApiError;

/// `IsOnlyMutatingGCFields`.
fn only_gc_fields(new: &Value, old: &Value) -> bool {
    let mut copy = old.clone();
    for field in ["ownerReferences", "finalizers"] {
        match new["metadata"].get(field) {
            Some(v) => copy["metadata"][field] = v.clone(),
            None => {
                if let Some(meta) = copy["metadata"].as_object_mut() {
                    meta.remove(field);
                }
            }
        }
    }
    &copy == new
}

/// Check a write of `object` (replacing `old`, if an update) by `user`.
pub fn check(
    policy: &Policy,
    user: &UserInfo,
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if def.group != rbac::RBAC_GROUP || old.is_some_and(|o| only_gc_fields(object, o)) {
        return Ok(());
    }
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let resource = def.plural.as_str();
    match resource {
        "roles" | "clusterroles" => {
            let rules: Vec<Rule> = rbac::rules_of(object);
            rbac::check_escalation(
                policy,
                user,
                &RbacWrite::Role {
                    resource,
                    namespace,
                    name,
                    rules: &rules,
                },
            )
        }
        _ => match serde_json::from_value(object["roleRef"].clone()) {
            Ok(role_ref) => rbac::check_escalation(
                policy,
                user,
                &RbacWrite::Binding {
                    resource,
                    namespace,
                    name,
                    role_ref: &role_ref,
                },
            ),
            // A binding without a valid roleRef is refused by validation.
            Err(_) => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gc_field_changes_are_not_escalation_checked() {
        let old = json!({"metadata": {"name": "r"}, "rules": []});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["x"]);
        assert!(only_gc_fields(&new, &old));
        new["rules"] = json!([{"verbs": ["*"]}]);
        assert!(!only_gc_fields(&new, &old));
    }
}
