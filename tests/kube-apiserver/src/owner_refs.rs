//! The `OwnerReferencesPermissionEnforcement` admission plugin, as
//! `plugin/pkg/admission/gc/gc_admission.go` (Kubernetes v1.31.0) has it:
//! a create or update that changes an object's `ownerReferences` needs
//! `delete` on the object itself (updates only: whoever creates it may
//! own it), and one that sets `blockOwnerDeletion: true` on a reference
//! (new, or turned from unset/false) needs `update` on the owner's
//! `finalizers` subresource — unless the user may update every
//! `*/finalizers` in the namespace. `pods/status` is exempt. The owner's
//! resource comes from its `apiVersion` and `kind` through the served
//! resources (the REST mapper); an unknown kind is refused.

use serde_json::Value;

use crate::audit::ResourceAttributes;
use crate::rbac::{forbidden_status, Attributes, Decision, Policy, UserInfo};
use crate::status::ApiError;

/// The write being admitted.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub api_group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// The object as it will be stored.
    pub object: &'a Value,
    /// The stored object an update replaces; `None` for a create.
    pub old: Option<&'a Value>,
}

fn refs(object: &Value) -> Vec<Value> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn blocking(reference: &Value) -> bool {
    reference["blockOwnerDeletion"].as_bool() == Some(true)
}

/// `isChangingOwnerReference`.
fn is_changing(object: &Value, old: Option<&Value>) -> bool {
    match old {
        None => !refs(object).is_empty(),
        Some(old) => refs(object) != refs(old),
    }
}

/// `newBlockingOwnerDeletionRefs`: blocking references new by `uid`, or
/// that were not blocking before.
fn new_blocking(object: &Value, old: Option<&Value>) -> Vec<Value> {
    let before = old.map(refs).unwrap_or_default();
    refs(object)
        .into_iter()
        .filter(blocking)
        .filter(|r| !before.iter().any(|o| o["uid"] == r["uid"] && blocking(o)))
        .collect()
}

/// Admit `write` by `user`; `resolve` maps an owner's `(group, version,
/// kind)` to its plural resource, `None` when not served.
pub fn admit(
    policy: &Policy,
    user: &UserInfo,
    write: &Write<'_>,
    resolve: &dyn Fn(&str, &str, &str) -> Option<String>,
) -> Result<(), ApiError> {
    if write.api_group.is_empty() && write.resource == "pods" && write.subresource == Some("status")
    {
        return Ok(());
    }
    if !is_changing(write.object, write.old) {
        return Ok(());
    }
    // `admission.NewForbidden`: the object's resource and name.
    let refuse = |why: String| forbidden_status(write.api_group, write.resource, write.name, &why);
    let ask =
        |attrs: ResourceAttributes| match policy.authorize(user, &Attributes::Resource(&attrs)) {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(reason),
        };
    let namespace = write.namespace.map(str::to_string);
    if write.old.is_some() {
        ask(ResourceAttributes {
            verb: "delete".into(),
            api_group: write.api_group.into(),
            resource: write.resource.into(),
            subresource: write.subresource.map(str::to_string),
            namespace: namespace.clone(),
            name: Some(write.name.to_string()),
        })
        .map_err(|reason| {
            refuse(format!(
                "cannot set an ownerRef on a resource you can't delete: {reason}, <nil>"
            ))
        })?;
    }
    let blocking_refs = new_blocking(write.object, write.old);
    if blocking_refs.is_empty() {
        return Ok(());
    }
    let finalize = |group: &str, resource: &str, name: &str| ResourceAttributes {
        verb: "update".into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: Some("finalizers".into()),
        namespace: namespace.clone(),
        name: Some(name.into()),
    };
    if ask(finalize("*", "*", "*")).is_ok() {
        return Ok(());
    }
    for reference in blocking_refs {
        let api_version = reference["apiVersion"].as_str().unwrap_or_default();
        let kind = reference["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(resource) = resolve(group, version, kind) else {
            return Err(refuse(format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: no matches for kind {kind:?} in version {api_version:?}"
            )));
        };
        let name = reference["name"].as_str().unwrap_or_default();
        ask(finalize(group, &resource, name)).map_err(|reason| {
            refuse(format!(
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: {reason}, <nil>"
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::Stored;
    use serde_json::json;

    const SA: &str = "system:serviceaccount:liqo:ctl";

    fn policy(rules: Value) -> Policy {
        Policy::new(&Stored {
            cluster_roles: vec![json!({"metadata": {"name": "r"}, "rules": rules})],
            cluster_role_bindings: vec![json!({"metadata": {"name": "r"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "liqo"}]})],
            ..Stored::default()
        })
    }

    fn secret(block: Option<bool>) -> Value {
        let mut owner = json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
                               "name": "p", "uid": "u1", "controller": true});
        if let Some(b) = block {
            owner["blockOwnerDeletion"] = json!(b);
        }
        json!({"metadata": {"name": "s", "namespace": "a", "ownerReferences": [owner]}})
    }

    fn resolve(group: &str, _version: &str, kind: &str) -> Option<String> {
        (group == "broker.liqo-broker.io" && kind == "Purchase").then(|| "purchases".to_string())
    }

    fn write<'a>(object: &'a Value, old: Option<&'a Value>) -> Write<'a> {
        Write {
            api_group: "",
            resource: "secrets",
            subresource: None,
            namespace: Some("a"),
            name: "s",
            object,
            old,
        }
    }

    #[test]
    fn blocking_an_owners_deletion_needs_update_on_its_finalizers() {
        let user = UserInfo::authenticated(SA, &[]);
        let creator =
            policy(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]));
        let blocking = secret(Some(true));
        let e = admit(&creator, &user, &write(&blocking, None), &resolve).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "secrets \"s\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a \
             resource you can't set finalizers on: , <nil>"
        );
        // Without blockOwnerDeletion, creating it is enough.
        assert!(admit(&creator, &user, &write(&secret(None), None), &resolve).is_ok());
        assert!(admit(
            &creator,
            &user,
            &write(&secret(Some(false)), None),
            &resolve
        )
        .is_ok());
        let finalizer = policy(json!([{"apiGroups": ["broker.liqo-broker.io"],
                                       "resources": ["purchases/finalizers"], "verbs": ["update"]}]));
        assert!(admit(&finalizer, &user, &write(&blocking, None), &resolve).is_ok());
        // An owner of a kind nobody serves.
        let e = admit(&creator, &user, &write(&blocking, None), &|_, _, _| None).unwrap_err();
        assert!(
            e.message.contains("cannot find RESTMapping"),
            "{}",
            e.message
        );
    }

    #[test]
    fn changing_owners_on_update_needs_delete_on_the_object() {
        let user = UserInfo::authenticated(SA, &[]);
        let updater =
            policy(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["update"]}]));
        let old = json!({"metadata": {"name": "s", "namespace": "a"}});
        let new = secret(None);
        let e = admit(&updater, &user, &write(&new, Some(&old)), &resolve).unwrap_err();
        assert!(
            e.message
                .contains("cannot set an ownerRef on a resource you can't delete"),
            "{}",
            e.message
        );
        // Unchanged references need nothing.
        assert!(admit(&updater, &user, &write(&new, Some(&new)), &resolve).is_ok());
        let deleter = policy(
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["update", "delete"]}]),
        );
        assert!(admit(&deleter, &user, &write(&new, Some(&old)), &resolve).is_ok());
        // Turning blocking on for a kept reference is a new blocking one.
        let e = admit(
            &deleter,
            &user,
            &write(&secret(Some(true)), Some(&new)),
            &resolve,
        )
        .unwrap_err();
        assert!(
            e.message.contains("can't set finalizers on"),
            "{}",
            e.message
        );
    }
}
