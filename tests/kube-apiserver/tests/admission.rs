//! Admission in the real order — mutating hooks, validation,
//! ValidatingAdmissionPolicies, validating hooks — with the API server's
//! answers for a policy's and a hook's refusal.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kube_test_server::admission::{Attributes, Denial, MutatingHook, ValidatingHook};
use kube_test_server::{GroupResource, Kind, KubeApiServer};
use serde_json::{json, Value};

fn policies() -> GroupResource {
    GroupResource::new(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    )
}

fn bindings() -> GroupResource {
    GroupResource::new(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    )
}

/// A policy: Leases in namespaces labelled `guarded` must last 10 s or more.
fn lease_policy(extra: Value) -> Value {
    let mut policy = json!({"metadata": {"name": "long-leases"}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["leases"]}]},
        "variables": [{"name": "duration", "expression": "object.spec.leaseDurationSeconds"}],
        "validations": [{"expression": "variables.duration >= 10",
            "messageExpression": "'lease of ' + string(variables.duration) + 's is too short'"}]}});
    if let (Some(spec), Some(extra)) = (policy["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    policy
}

fn binding(actions: &[&str]) -> Value {
    json!({"metadata": {"name": "long-leases-binding"}, "spec": {"policyName": "long-leases",
        "validationActions": actions,
        "matchResources": {"namespaceSelector": {"matchLabels": {"guarded": "yes"}}}}})
}

fn lease(namespace: &str, seconds: i64) -> Value {
    json!({"metadata": {"name": "l", "namespace": namespace}, "spec": {"leaseDurationSeconds": seconds}})
}

async fn server() -> KubeApiServer {
    let kube = KubeApiServer::start().await.unwrap();
    kube.create(
        Kind::Namespace,
        json!({"metadata": {"name": "guarded", "labels": {"guarded": "yes"}}}),
    )
    .unwrap();
    kube.create(Kind::Namespace, json!({"metadata": {"name": "open"}}))
        .unwrap();
    kube
}

#[tokio::test]
async fn a_validating_admission_policy_denies_with_the_real_status() {
    let kube = server().await;
    kube.create(policies(), lease_policy(json!({}))).unwrap();
    kube.create(bindings(), binding(&["Deny"])).unwrap();
    let e = kube.create(Kind::Lease, lease("guarded", 5)).unwrap_err();
    let cause = "ValidatingAdmissionPolicy 'long-leases' with binding 'long-leases-binding' denied request: lease of 5s is too short";
    assert_eq!(
        e.to_status(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("leases.coordination.k8s.io \"l\" is forbidden: {cause}"),
               "reason": "Invalid", "code": 422,
               "details": {"name": "l", "group": "coordination.k8s.io", "kind": "leases",
                           "causes": [{"message": cause}]}})
    );
    // Outside the binding's namespaces, and within the rule, it is admitted.
    kube.create(Kind::Lease, lease("open", 5)).unwrap();
    kube.create(Kind::Lease, lease("guarded", 15)).unwrap();
}

#[tokio::test]
async fn only_deny_refuses_and_what_cannot_be_evaluated_fails_closed() {
    let kube = server().await;
    kube.create(policies(), lease_policy(json!({}))).unwrap();
    kube.create(bindings(), binding(&["Warn", "Audit"]))
        .unwrap();
    kube.create(Kind::Lease, lease("guarded", 5)).unwrap();
    // A policy this server cannot evaluate refuses, under failurePolicy Fail.
    let kube = server().await;
    kube.create(
        policies(),
        lease_policy(json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}})),
    )
    .unwrap();
    kube.create(bindings(), binding(&["Deny"])).unwrap();
    let e = kube.create(Kind::Lease, lease("guarded", 50)).unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("paramKind is not evaluated"),
        "{}",
        e.message
    );
}

struct AddLabel;
impl MutatingHook for AddLabel {
    fn name(&self) -> &str {
        "label.example.com"
    }
    fn admit(&self, _: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        object["metadata"]["labels"]["seen"] = json!("yes");
        // A duration fixed before validation: mutation runs first.
        if object["spec"]["leaseDurationSeconds"] == 0 {
            object["spec"]["leaseDurationSeconds"] = json!(30);
        }
        Ok(())
    }
}

struct RequireLabel(AtomicUsize);
impl ValidatingHook for RequireLabel {
    fn name(&self) -> &str {
        "require.example.com"
    }
    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        self.0.fetch_add(1, Ordering::SeqCst);
        if a.object["metadata"]["labels"]["seen"] != "yes" {
            return Err(Denial::new(403, "Forbidden", "not mutated first"));
        }
        // `rest.BeforeCreate` ran: a created object has its uid already.
        if a.operation == "CREATE" && !a.object["metadata"]["uid"].is_string() {
            return Err(Denial::new(403, "Forbidden", "no uid yet"));
        }
        if a.name == "refused" {
            return Err(Denial::new(400, "", "name taken by the model"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn hooks_run_in_the_real_order_and_refuse_as_webhooks() {
    let kube = server().await;
    let validating = Arc::new(RequireLabel(AtomicUsize::new(0)));
    kube.add_validating_hook(validating.clone());
    kube.add_mutating_hook(Arc::new(AddLabel));
    let created = kube.create(Kind::Lease, lease("open", 0)).unwrap();
    assert_eq!(created["spec"]["leaseDurationSeconds"], 30);
    assert_eq!(created["metadata"]["labels"]["seen"], "yes");
    let mut refused = lease("open", 20);
    refused["metadata"]["name"] = json!("refused");
    let e = kube.create(Kind::Lease, refused).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "admission webhook \"require.example.com\" denied the request: name taken by the model"
        )
    );
    // Validation refuses before the validating hooks are asked.
    let calls = validating.0.load(Ordering::SeqCst);
    let e = kube.create(Kind::Lease, lease("open", -1)).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(validating.0.load(Ordering::SeqCst), calls);
}
