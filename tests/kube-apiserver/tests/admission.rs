//! Admission in the real order — mutating hooks, validation,
//! ValidatingAdmissionPolicies, validating hooks — with the API server's
//! answers for a policy's and a hook's refusal.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kube_test_server::admission::{Attributes, Denial, MutatingHook, ValidatingHook};
use kube_test_server::{GroupResource, Kind, KubeApiServer};
use serde_json::{json, Value};

mod common;
use common::{answer, as_admin};

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

/// `method path` with a JSON `body`, as the tests' own user (over HTTP, as
/// a client sends it).
async fn call(
    kube: &KubeApiServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = as_admin(reqwest::Client::builder().no_proxy(), kube)
        .build()
        .unwrap();
    let mut request = client.request(method, format!("{}{path}", kube.url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    answer(request).await
}

/// A policy `name` on `resources` of `group` for `operations`, refusing
/// what `expression` does not hold with `message_expression`, bound with
/// `Deny` everywhere.
fn deny_policy(
    kube: &KubeApiServer,
    group: &str,
    resources: &[&str],
    operations: &[&str],
    expression: &str,
    message_expression: &str,
) {
    kube.create(
        policies(),
        json!({"metadata": {"name": "p"}, "spec": {"failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"],
            "operations": operations, "resources": resources}]},
        "validations": [{"expression": expression, "messageExpression": message_expression}]}}),
    )
    .unwrap();
    kube.create(
        bindings(),
        json!({"metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny"]}}),
    )
    .unwrap();
}

/// `request.userInfo` is whoever sent the request (`admission.Attributes`
/// carries the authenticated user of every request;
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/`
/// builds `request` from it), RBAC-restricted or, as here, a member of
/// `system:masters` — not `{}`.
#[tokio::test]
async fn a_policy_sees_every_requester() {
    let kube = server().await;
    deny_policy(
        &kube,
        "",
        &["configmaps"],
        &["CREATE"],
        "false",
        "'by ' + request.userInfo.username + ' in ' + request.userInfo.groups.join(',')",
    );
    let sent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (code, refused) = call(
        &kube,
        reqwest::Method::POST,
        "/api/v1/namespaces/open/configmaps",
        Some(sent),
    )
    .await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: \
         by kube-test-admin in system:masters,system:authenticated"
    );
}

/// A rule's `resources: ["*"]` is every resource but no subresource;
/// `*/*` both (`Matcher.resource`,
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`).
#[tokio::test]
async fn a_star_rule_covers_main_resources_not_subresources() {
    let kube = server().await;
    let slices = GroupResource::new("authentication.liqo.io", "resourceslices");
    let slice = kube.apply(
        slices.clone(),
        json!({"metadata": {"name": "s", "namespace": "open"},
            "spec": {"class": "default", "providerClusterID": "p", "resources": {"cpu": "1"}}}),
    );
    deny_policy(
        &kube,
        "authentication.liqo.io",
        &["*"],
        &["UPDATE"],
        "false",
        "'no ' + request.subResource + ' write'",
    );
    let mut status = slice.clone();
    status["status"] = json!({});
    kube.replace(slices.clone(), status, true)
        .expect("a status write is not under `*`");
    let mut main = kube.get(slices.clone(), Some("open"), "s").unwrap();
    main["metadata"]["labels"] = json!({"a": "b"});
    let refused = kube.replace(slices, main, false).unwrap_err();
    assert!(
        refused.message.ends_with("denied request: no  write"),
        "{}",
        refused.message
    );
}

/// What a hook registered for DELETE is asked.
struct SeeDeletes(std::sync::Mutex<Vec<(String, Value, Option<Value>)>>);
impl ValidatingHook for SeeDeletes {
    fn name(&self) -> &str {
        "deletes.example.com"
    }
    fn operations(&self) -> &[&str] {
        &["DELETE"]
    }
    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        self.0.lock().unwrap().push((
            a.operation.to_string(),
            a.object.clone(),
            a.old_object.cloned(),
        ));
        Ok(())
    }
}

/// A DELETE passes the policies and hooks registered for it, as
/// `rest.AdmissionToValidateObjectDeleteFunc`
/// (`staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go`) admits it:
/// no `object`, the stored one as `oldObject`, the request's name (none in
/// a deletecollection's static attributes); a refusal names `Unknown`
/// (`admission.NewForbidden` finds no object to name). Hooks registered
/// for creates and updates only are not asked.
#[tokio::test]
async fn deletes_are_admitted_by_policies_and_hooks() {
    let kube = server().await;
    let seen = Arc::new(SeeDeletes(Default::default()));
    kube.add_validating_hook(seen.clone());
    let creates = Arc::new(RequireLabel(AtomicUsize::new(0)));
    for name in ["kept", "other", "batch"] {
        kube.create(
            Kind::ConfigMap,
            json!({"metadata": {"name": name, "namespace": "open", "labels": {"set": name}}}),
        )
        .unwrap();
    }
    deny_policy(
        &kube,
        "",
        &["configmaps"],
        &["DELETE"],
        "object == null && oldObject.metadata.name != 'kept' && oldObject.metadata.name != 'batch'",
        "oldObject.metadata.name + ' stays (request.name=' + request.name + ')'",
    );
    kube.add_validating_hook(creates.clone());
    let path = "/api/v1/namespaces/open/configmaps";
    let (code, refused) = call(
        &kube,
        reqwest::Method::DELETE,
        &format!("{path}/kept"),
        None,
    )
    .await;
    let cause = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: kept stays (request.name=kept)";
    assert_eq!(
        (code, refused),
        (
            422,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("configmaps \"Unknown\" is forbidden: {cause}"),
            "reason": "Invalid", "code": 422,
            "details": {"name": "Unknown", "kind": "configmaps", "causes": [{"message": cause}]}})
        )
    );
    assert!(kube.get(Kind::ConfigMap, Some("open"), "kept").is_some());
    let (code, _) = call(
        &kube,
        reqwest::Method::DELETE,
        &format!("{path}/other"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert!(kube.get(Kind::ConfigMap, Some("open"), "other").is_none());
    let (code, refused) = call(
        &kube,
        reqwest::Method::DELETE,
        &format!("{path}?labelSelector=set%3Dbatch"),
        None,
    )
    .await;
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with("batch stays (request.name=)"),
        "{refused}"
    );
    let seen = seen.0.lock().unwrap();
    // `kept` was refused by the policy before the hooks were asked.
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (operation, object, old) = &seen[0];
    assert_eq!((operation.as_str(), object), ("DELETE", &Value::Null));
    assert_eq!(old.as_ref().unwrap()["metadata"]["name"], "other");
    assert_eq!(
        creates.0.load(Ordering::SeqCst),
        0,
        "a CREATE/UPDATE hook asked on DELETE"
    );
}
