//! The `NamespaceLifecycle` admission plugin, first of the admission chain
//! (`pkg/kubeapiserver/options/plugins.go`, `AllOrderedPlugins`), as
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go`
//! (`Lifecycle.Admit`, Kubernetes v1.31.0) has it, and the namespace
//! strategy's rules for `spec.finalizers`
//! (`pkg/registry/core/namespace/strategy.go`):
//!
//! - `default`, `kube-system` and `kube-public` may not be deleted (403
//!   `this namespace may not be deleted`);
//! - a namespaced create or update needs its namespace to exist (404
//!   `namespaces "x" not found`);
//! - a create into a namespace whose `status.phase` is `Terminating` is a
//!   403 (`admission.NewForbidden`): `unable to create new content in
//!   namespace X because it is being terminated`, with a
//!   `NamespaceTerminating` cause on `metadata.namespace`; namespaces
//!   themselves and deletes are always let through.

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::status::ApiError;

/// The finalizer the namespace controller owns (`v1.FinalizerKubernetes`).
pub const KUBERNETES: &str = "kubernetes";

/// `immortalNamespaces` of `Register`.
const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

fn is_namespaces(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "namespaces"
}

/// Whether a namespace object is terminating (`status.phase`).
pub fn terminating(namespace: &Value) -> bool {
    namespace["status"]["phase"] == "Terminating"
}

/// `Admit` for a DELETE of `name`.
pub fn admit_delete(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    if is_namespaces(def) && IMMORTAL.contains(&name) {
        return Err(ApiError::forbidden(
            def,
            name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

/// `Admit` for a create (`creating`) or update of an object of `def` in
/// `namespace`, whose stored namespace object is `stored` (`None`: there
/// is none). `name` is the object's name, or its `generateName` when it
/// has none yet (`extractResourceName`: names are generated after
/// admission).
pub fn admit_write(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    creating: bool,
    stored: Option<&Value>,
) -> Result<(), ApiError> {
    if !def.namespaced || is_namespaces(def) || namespace.is_empty() {
        return Ok(());
    }
    let Some(ns) = stored else {
        return Err(ApiError::namespace_not_found(namespace));
    };
    if creating && terminating(ns) {
        let mut e = ApiError::forbidden(
            def,
            name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        );
        if let Some(details) = e.details.as_mut() {
            details["causes"] = json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {namespace} is being terminated"),
                "field": "metadata.namespace",
            }]);
        }
        return Err(e);
    }
    Ok(())
}

/// `namespaceStrategy.PrepareForCreate`: a new namespace is `Active` and
/// has the `kubernetes` finalizer in `spec.finalizers` (added to any the
/// client set).
pub fn prepare_for_create(object: &mut Value) {
    let mut finalizers: Vec<Value> = object["spec"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == KUBERNETES) {
        finalizers.push(json!(KUBERNETES));
    }
    object["spec"]["finalizers"] = json!(finalizers);
    object["status"] = json!({ "phase": "Active" });
}

/// `namespaceStrategy.PrepareForUpdate`: `spec.finalizers` are only
/// changed through `/finalize`, the status only through `/status`.
pub fn prepare_for_update(object: &mut Value, old: &Value) {
    match old["spec"].get("finalizers") {
        Some(f) => object["spec"]["finalizers"] = f.clone(),
        None => {
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("finalizers");
            }
        }
    }
}

/// `namespaceFinalizeStrategy`: a write to `/finalize` changes only
/// `spec.finalizers`.
pub fn finalize(old: &Value, body: &Value) -> Value {
    let mut new = old.clone();
    new["spec"]["finalizers"] = body["spec"]["finalizers"].clone();
    if new["spec"]["finalizers"].is_null() {
        new["spec"]["finalizers"] = json!([]);
    }
    new
}

/// `ShouldDeleteNamespaceDuringUpdate`: a namespace being deleted goes
/// when both its `spec.finalizers` and `metadata.finalizers` are empty.
pub fn spec_finalized(namespace: &Value) -> bool {
    namespace["spec"]["finalizers"]
        .as_array()
        .is_none_or(|f| f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn def(plural: &str) -> ResourceDef {
        builtin::definitions()
            .into_iter()
            .find(|d| d.group.is_empty() && d.plural == plural)
            .unwrap()
    }

    #[test]
    fn creates_into_a_terminating_namespace_are_forbidden() {
        let secrets = def("secrets");
        let ns = json!({"metadata": {"name": "a"}, "status": {"phase": "Terminating"}});
        let e = admit_write(&secrets, "a", "s", true, Some(&ns)).unwrap_err();
        let mut status = e.to_status();
        // `group` is `omitempty` on the wire.
        if status["details"]["group"] == "" {
            status["details"].as_object_mut().unwrap().remove("group");
        }
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "secrets \"s\" is forbidden: unable to create new content in namespace a because it is being terminated",
                   "reason": "Forbidden", "code": 403,
                   "details": {"name": "s", "kind": "secrets", "causes": [
                       {"reason": "NamespaceTerminating", "message": "namespace a is being terminated",
                        "field": "metadata.namespace"}]}})
        );
        assert!(admit_write(&secrets, "a", "s", false, Some(&ns)).is_ok());
        assert_eq!(
            admit_write(&secrets, "b", "s", true, None)
                .unwrap_err()
                .code,
            404
        );
        assert_eq!(
            admit_delete(&def("namespaces"), "default")
                .unwrap_err()
                .message,
            "namespaces \"default\" is forbidden: this namespace may not be deleted"
        );
    }
}
