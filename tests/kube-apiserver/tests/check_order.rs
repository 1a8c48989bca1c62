//! The order a real API server checks a write in
//! (`pkg/kubeapiserver/options/plugins.go`, `AllOrderedPlugins`, and the
//! RBAC storage), seen through which refusal a client gets when a write
//! breaks two rules: NamespaceLifecycle first, before mutating hooks and
//! validation; the RBAC escalation check on what mutating admission made;
//! OwnerReferencesPermissionEnforcement after validation, among the
//! validating plugins.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, MutatingHook};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{admin, from_kubeconfig, status};

const USER: &str = "system:serviceaccount:default:writer";

/// A client presenting `USER`'s token, which RBAC holds to its bindings.
async fn restricted(kube: &KubeApiServer, dir: &tempfile::TempDir) -> Client {
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&path, USER).unwrap();
    from_kubeconfig(&path).await.unwrap()
}

/// `USER` may do `verbs` on `resources` of `group`, and nothing else.
fn grant(kube: &KubeApiServer, group: &str, resources: &[&str], verbs: &[&str]) {
    kube.load_rbac(&[
        json!({"kind": "ClusterRole", "metadata": {"name": "writer"},
               "rules": [{"apiGroups": [group], "resources": resources, "verbs": verbs}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "writer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "writer"},
               "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "default"}]}),
    ]);
}

/// Counts the writes it is asked about.
struct Counting(AtomicUsize);
impl MutatingHook for Counting {
    fn name(&self) -> &str {
        "count.example.com"
    }
    fn admit(&self, _: &Attributes<'_>, _: &mut Value) -> Result<(), Denial> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// NamespaceLifecycle runs before everything else: an invalid object sent
/// into a namespace that does not exist is a 404 for the namespace (not
/// the 422 validation would give), and a create into a terminating
/// namespace is refused before any mutating hook is asked.
#[tokio::test]
async fn namespace_lifecycle_comes_first() {
    let kube = KubeApiServer::start().await.unwrap();
    let hook = Arc::new(Counting(AtomicUsize::new(0)));
    kube.add_mutating_hook(hook.clone());
    let c = admin(&kube).await;
    let mut bad = ConfigMap::default();
    bad.metadata.name = Some("Not_A_Name".into());
    let e = Api::<ConfigMap>::namespaced(c.clone(), "nowhere")
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 404, "reason": "NotFound",
               "message": "namespaces \"nowhere\" not found",
               "details": {"name": "nowhere", "kind": "namespaces"}})
    );
    assert_eq!(hook.0.load(Ordering::SeqCst), 0);

    let namespaces: Api<Namespace> = Api::all(c.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("closing".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let held: Api<Secret> = Api::namespaced(c.clone(), "closing");
    let mut hold = Secret::default();
    hold.metadata.name = Some("hold".into());
    hold.metadata.finalizers = Some(vec!["test.io/hold".into()]);
    held.create(&PostParams::default(), &hold).await.unwrap();
    namespaces
        .delete("closing", &DeleteParams::default())
        .await
        .unwrap();
    let calls = hook.0.load(Ordering::SeqCst);
    let e = Api::<ConfigMap>::namespaced(c, "closing")
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert_eq!(
        status(e)["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
    assert_eq!(hook.0.load(Ordering::SeqCst), calls, "no hook was asked");
}

/// OwnerReferencesPermissionEnforcement is a validating plugin: a write
/// that sets `blockOwnerDeletion` without the right to and is invalid is
/// refused by validation (422) first; valid, it is the plugin's 403.
#[tokio::test]
async fn owner_reference_enforcement_runs_after_validation() {
    let kube = KubeApiServer::start().await.unwrap();
    grant(&kube, "", &["secrets", "configmaps"], &["create", "get"]);
    let dir = tempfile::tempdir().unwrap();
    let c = restricted(&kube, &dir).await;
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("owner".into());
    let owner = Api::<ConfigMap>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(c, "default");
    let mut owned = Secret::default();
    owned.metadata.name = Some("owned".into());
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.unwrap(),
        block_owner_deletion: Some(true),
        controller: Some(true),
    }]);
    let mut invalid = owned.clone();
    invalid.metadata.labels = Some([("bad".to_string(), "no spaces".to_string())].into());
    let e = status(
        secrets
            .create(&PostParams::default(), &invalid)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (
            e["code"].clone(),
            e["reason"].clone(),
            e["details"]["causes"][0]["field"].clone()
        ),
        (json!(422), json!("Invalid"), json!("metadata.labels")),
        "{e}"
    );
    let e = secrets
        .create(&PostParams::default(), &owned)
        .await
        .unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 403, "reason": "Forbidden",
               "message": "secrets \"owned\" is forbidden: cannot set blockOwnerDeletion if an ownerReference \
                           refers to a resource you can't set finalizers on: , <nil>",
               "details": {"name": "owned", "kind": "secrets"}})
    );
}

/// Strips the rules of every Role written (as a mutating webhook might).
struct StripRules;
impl MutatingHook for StripRules {
    fn name(&self) -> &str {
        "strip.example.com"
    }
    fn admit(&self, a: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        if a.def.kind == "Role" {
            object["rules"] = json!([]);
        }
        Ok(())
    }
}

/// The escalation check runs in the RBAC storage, on the object mutating
/// admission made: a Role whose rules a mutating hook strips is no
/// escalation; without the hook, the same write is the real 403.
#[tokio::test]
async fn the_escalation_check_sees_what_mutating_admission_made() {
    let kube = KubeApiServer::start().await.unwrap();
    grant(&kube, "rbac.authorization.k8s.io", &["roles"], &["create"]);
    let dir = tempfile::tempdir().unwrap();
    let c = restricted(&kube, &dir).await;
    let roles: Api<Role> = Api::namespaced(c, "default");
    let role = |name: &str| {
        let mut r = Role::default();
        r.metadata.name = Some(name.into());
        r.rules = Some(vec![PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec!["secrets".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]);
        r
    };
    let e = status(
        roles
            .create(&PostParams::default(), &role("escalating"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e["code"].clone(), e["reason"].clone()),
        (json!(403), json!("Forbidden"))
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("roles.rbac.authorization.k8s.io \"escalating\" is forbidden: user \"system:serviceaccount:default:writer\""),
        "{e}"
    );
    kube.add_mutating_hook(Arc::new(StripRules));
    let stored = roles
        .create(&PostParams::default(), &role("stripped"))
        .await
        .unwrap();
    assert_eq!(stored.rules, Some(vec![]));
}
