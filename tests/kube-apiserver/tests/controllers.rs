//! The controllers beside the server, driven by kube-rs as a client of a
//! real cluster drives them: each acts after the request that calls for
//! it, on its own schedule — the namespace controller 5 s after a
//! namespace is deleted, the garbage collector breaking a cycle of
//! blocking owner references, the CRD finalizer deleting a CRD's custom
//! resources before the CRD, the ClusterRole aggregation controller
//! keeping an aggregated role the union of the roles it selects.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, PropagationPolicy,
};
use kube::{Client, Config};
use kube_test_server::namespace_controller::DELETION_GRACE;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{admin, eventually, until};

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap().is_none()
}

/// `namespaceDeletionGracePeriod`: the DELETE of a namespace answers
/// `Terminating` with its content still there, and the content goes no
/// sooner than 5 s later — so a client that deletes a namespace and then
/// expects its content gone must wait for it, as on a real cluster.
#[tokio::test]
async fn a_namespace_is_emptied_only_after_the_controllers_grace_period() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("later".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "later");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("content".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let asked = Instant::now();
    let marked = namespaces
        .delete("later", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a namespace terminates first");
    assert_eq!(marked.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert!(
        !gone(&cms, "content").await,
        "the DELETE answers before the controller acts"
    );
    eventually("the content is deleted", || gone(&cms, "content")).await;
    let waited = asked.elapsed();
    assert!(
        waited >= DELETION_GRACE,
        "content deleted {waited:?} after the DELETE, before the controller's {DELETION_GRACE:?} grace"
    );
    eventually("the namespace disappears", || gone(&namespaces, "later")).await;
}

fn owner_ref(owner: &ConfigMap) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
           "uid": owner.metadata.uid, "blockOwnerDeletion": true})
}

/// garbagecollector.go `attemptToDeleteItem`: A owns B and B owns A, both
/// references blocking. Deleting A in the foreground makes B a foreground
/// deletion too; B, seeing its dependent A waiting for its own
/// dependents, makes its references non-blocking, so A's
/// `foregroundDeletion` can go, then B's. Without that, both wait on each
/// other for ever.
#[tokio::test]
async fn foreground_deletion_breaks_a_cycle_of_blocking_owner_references() {
    let kube = KubeApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(admin(&kube).await, "default");
    let mut a = ConfigMap::default();
    a.metadata.name = Some("a".into());
    let a = cms.create(&PostParams::default(), &a).await.unwrap();
    let mut b = ConfigMap::default();
    b.metadata.name = Some("b".into());
    let b = cms.create(&PostParams::default(), &b).await.unwrap();
    let owned_by = |owner: &ConfigMap| json!({"metadata": {"ownerReferences": [owner_ref(owner)]}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(owned_by(&b)))
        .await
        .unwrap();
    cms.patch("b", &PatchParams::default(), &Patch::Merge(owned_by(&a)))
        .await
        .unwrap();

    let foreground = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    let marked = cms.delete("a", &foreground).await.unwrap().left().unwrap();
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    eventually("the cycle's first owner goes", || gone(&cms, "a")).await;
    eventually("then the second", || gone(&cms, "b")).await;
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": {"type": "object",
                        "properties": {"size": {"type": "integer"}}}}}}}]},
    })
}

fn condition(crd: &CustomResourceDefinition, kind: &str) -> Option<(String, String, String)> {
    crd.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// `customresourcecleanup.apiextensions.k8s.io`: the DELETE of a CRD
/// marks it (`Terminating`, `InstanceDeletionPending`); the finalizer
/// deletes its custom resources, honouring theirs, and only once none is
/// left takes its own finalizer out, after which the CRD and its resource
/// are gone.
#[tokio::test]
async fn deleting_a_crd_deletes_its_custom_resources_first() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let c = admin(&kube).await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd()).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    until("the CRD is established", || async {
        let crd = crds.get("widgets.example.io").await.unwrap();
        condition(&crd, "Established").filter(|c| c.0 == "True")
    })
    .await;
    let gvk = GroupVersionKind::gvk("example.io", "v1", "Widget");
    let widgets_resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &widgets_resource);
    let mut plain = DynamicObject::new("plain", &widgets_resource);
    plain.data = json!({"spec": {"size": 1}});
    widgets
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    let mut held = DynamicObject::new("held", &widgets_resource);
    held.data = json!({"spec": {"size": 2}});
    held.metadata.finalizers = Some(vec!["example.io/hold".into()]);
    widgets.create(&PostParams::default(), &held).await.unwrap();

    let marked = crds
        .delete("widgets.example.io", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the CRD is kept while its resources go");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec![
            "customresourcecleanup.apiextensions.k8s.io".to_string()
        ])
    );
    assert_eq!(
        condition(&marked, "Terminating"),
        Some((
            "True".into(),
            "InstanceDeletionPending".into(),
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
                .into()
        ))
    );

    eventually("the custom resource without finalizers is deleted", || {
        gone(&widgets, "plain")
    })
    .await;
    let held = until("the held one is marked", || async {
        let w = widgets.get("held").await.unwrap();
        w.metadata.deletion_timestamp.is_some().then_some(w)
    })
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    let terminating = crds.get("widgets.example.io").await.unwrap();
    assert_eq!(
        condition(&terminating, "Terminating"),
        Some((
            "True".into(),
            "InstanceDeletionInProgress".into(),
            "CustomResource deletion is in progress".into()
        ))
    );

    widgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the CRD goes once its resources are gone", || {
        gone(&crds, "widgets.example.io")
    })
    .await;
    let e = widgets.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(&e, kube::Error::Api(s) if s.code == 404),
        "no longer served: {e:?}"
    );
}

/// clusterroleaggregation_controller.go `syncClusterRole`: an aggregated
/// ClusterRole's rules are those of the ClusterRoles its selectors pick,
/// in name order, kept so as they change — and RBAC grants what they say.
#[tokio::test]
async fn an_aggregated_cluster_role_gathers_the_rules_of_the_roles_it_selects() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let roles: Api<ClusterRole> = Api::all(c.clone());
    let create = |v: Value| {
        let roles = roles.clone();
        async move {
            let role: ClusterRole = serde_json::from_value(v).unwrap();
            roles.create(&PostParams::default(), &role).await.unwrap()
        }
    };
    create(json!({"metadata": {"name": "aggregate"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.io/aggregate-to-aggregate": "true"}}]},
        "rules": []}))
    .await;
    let read_cms = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
    let list_secrets = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]});
    create(json!({"metadata": {"name": "part-b",
            "labels": {"example.io/aggregate-to-aggregate": "true"}},
        "rules": [list_secrets, read_cms]}))
    .await;
    create(json!({"metadata": {"name": "part-a",
            "labels": {"example.io/aggregate-to-aggregate": "true"}},
        "rules": [read_cms]}))
    .await;
    create(json!({"metadata": {"name": "unrelated"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]}))
    .await;
    let rules_of = |name: &'static str| {
        let roles = roles.clone();
        async move {
            let role = roles.get(name).await.unwrap();
            serde_json::to_value(role.rules.unwrap_or_default()).unwrap()
        }
    };
    until("the aggregate gathers its parts' rules", || async {
        (rules_of("aggregate").await == json!([read_cms, list_secrets])).then_some(())
    })
    .await;

    // What the aggregate grants, through a binding to it.
    kube.load_rbac(&[json!({"kind": "ClusterRoleBinding", "metadata": {"name": "ann-aggregate"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "aggregate"},
        "subjects": [{"kind": "User", "name": "ann", "apiGroup": "rbac.authorization.k8s.io"}]})]);
    let mut config = Config::new(kube.url().parse().unwrap());
    config.auth_info.token = Some(kube.token_for("ann").into());
    let ann = Client::try_from(config).unwrap();
    let ann_secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(ann, "default");
    ann_secrets.list(&Default::default()).await.unwrap();

    // A part relabelled away takes its rules with it; a write to the
    // aggregate's own rules is undone.
    roles
        .patch(
            "part-b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": null}})),
        )
        .await
        .unwrap();
    until("the aggregate loses the part", || async {
        (rules_of("aggregate").await == json!([read_cms])).then_some(())
    })
    .await;
    eventually("the aggregate no longer grants it", || async {
        ann_secrets.list(&Default::default()).await.is_err()
    })
    .await;
    roles
        .patch(
            "aggregate",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            ),
        )
        .await
        .unwrap();
    until("the aggregate's own rules are put back", || async {
        (rules_of("aggregate").await == json!([read_cms])).then_some(())
    })
    .await;
}
