//! The object lifecycle of a real API server and kube-controller-manager,
//! driven by kube-rs: DELETE marks an object held by finalizers and bumps
//! its generation, honouring preconditions; the garbage collector deletes
//! dependents whose owners are gone (background), before their owner
//! (foreground) or not at all (orphan), and leaves a cluster-scoped
//! dependent of a namespaced owner alone with a Warning Event; a deleted
//! namespace terminates — creates into it refused, its content deleted,
//! its conditions saying what remains — then disappears.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube_test_server::KubeApiServer;
use serde_json::json;

mod kube_rs;
use kube_rs::{admin, eventually, status, until};

fn owner_ref(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().unwrap(),
        uid: owner.metadata.uid.clone().unwrap(),
        block_owner_deletion: Some(block),
        controller: None,
    }
}

async fn config_map(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &cm).await.unwrap()
}

async fn secret(
    api: &Api<Secret>,
    name: &str,
    owners: Vec<OwnerReference>,
    finalizers: &[&str],
) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.owner_references = Some(owners);
    if !finalizers.is_empty() {
        s.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    api.create(&PostParams::default(), &s).await.unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap().is_none()
}

fn slices() -> ApiResource {
    let gvk = GroupVersionKind::gvk("authentication.liqo.io", "v1beta1", "ResourceSlice");
    ApiResource::from_gvk_with_plural(&gvk, "resourceslices")
}

/// `BeforeDelete`/`markAsDeleting`: the first DELETE of an object held by
/// a finalizer bumps its generation (once); preconditions that do not
/// hold are a 409 Conflict in the real words.
#[tokio::test]
async fn deletion_bumps_generation_once_and_checks_preconditions() {
    let kube = KubeApiServer::start().await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(admin(&kube).await, "default", &slices());
    let mut object = DynamicObject::new("s1", &slices());
    object.data = json!({"spec": {"class": "default", "providerClusterID": "p",
                                  "resources": {"cpu": "1"}}});
    object.metadata.finalizers = Some(vec!["liqo.io/broker".into()]);
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let uid = created.metadata.uid.clone().unwrap();
    let e = api.delete("s1", &wrong_uid).await.unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 409, "reason": "Conflict",
               "message": format!("Operation cannot be fulfilled on resourceslices.authentication.liqo.io \"s1\": \
                  the UID in the precondition (not-the-uid) does not match the UID in record ({uid}). \
                  The object might have been deleted and then recreated"),
               "details": {"name": "s1", "group": "authentication.liqo.io", "kind": "resourceslices"}})
    );
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    let e = status(api.delete("s1", &stale).await.unwrap_err());
    assert_eq!(
        (e["code"].clone(), e["reason"].clone()),
        (json!(409), json!("Conflict"))
    );

    let marked = api
        .delete("s1", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("held by its finalizer");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.generation, Some(2));
    let again = api
        .delete("s1", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.metadata.generation, Some(2), "bumped only once");
    assert_eq!(api.get("s1").await.unwrap().metadata.generation, Some(2));
}

/// Background propagation (the default): once the owner is gone, a
/// dependent whose owners are all gone — or whose reference names another
/// uid — is deleted; one with another living owner only loses the
/// reference.
#[tokio::test]
async fn the_garbage_collector_deletes_dependents_of_a_gone_owner() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(c, "default");
    let owner = config_map(&cms, "owner").await;
    let other = config_map(&cms, "other").await;
    secret(&secrets, "only", vec![owner_ref(&owner, false)], &[]).await;
    secret(
        &secrets,
        "shared",
        vec![owner_ref(&owner, false), owner_ref(&other, false)],
        &[],
    )
    .await;
    let mut stale = owner_ref(&other, false);
    stale.uid = "a-uid-nobody-has".into();
    secret(&secrets, "stale", vec![stale], &[]).await;

    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually("the only dependent is collected", || gone(&secrets, "only")).await;
    eventually("the stale reference's dependent is collected", || {
        gone(&secrets, "stale")
    })
    .await;
    eventually("the shared dependent loses the gone owner", || async {
        let s = secrets.get("shared").await.unwrap();
        let refs = s.metadata.owner_references.unwrap_or_default();
        refs.len() == 1 && refs[0].name == "other"
    })
    .await;
}

/// `propagationPolicy: Foreground`: the owner is kept with the
/// `foregroundDeletion` finalizer until no dependent blocks it; its
/// dependents are deleted first.
#[tokio::test]
async fn foreground_deletion_deletes_blocking_dependents_first() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(c, "default");
    let owner = config_map(&cms, "owner").await;
    secret(
        &secrets,
        "held",
        vec![owner_ref(&owner, true)],
        &["test.io/hold"],
    )
    .await;

    let marked = cms
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .expect("kept while its dependents go");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    eventually("the dependent is being deleted", || async {
        secrets
            .get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        cms.get_opt("owner").await.unwrap().is_some(),
        "the owner waits for its blocking dependent"
    );
    let release = json!({"metadata": {"finalizers": null}});
    secrets
        .patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    eventually("the owner goes after its dependent", || gone(&cms, "owner")).await;
    assert!(gone(&secrets, "held").await);
}

/// `propagationPolicy: Orphan`: the owner is kept with the `orphan`
/// finalizer while its dependents lose their reference to it, then goes;
/// the dependents stay.
#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(c, "default");
    let owner = config_map(&cms, "owner").await;
    secret(&secrets, "kept", vec![owner_ref(&owner, true)], &[]).await;
    let orphan = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    let marked = cms
        .delete("owner", &orphan)
        .await
        .unwrap()
        .left()
        .expect("kept while its dependents are orphaned");
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));
    eventually("the owner goes", || gone(&cms, "owner")).await;
    let kept = secrets.get("kept").await.unwrap();
    assert_eq!(kept.metadata.owner_references.unwrap_or_default(), vec![]);

    // A deletecollection passes its options to each delete.
    let second = config_map(&cms, "second").await;
    secret(&secrets, "kept-too", vec![owner_ref(&second, false)], &[]).await;
    let listed = cms
        .delete_collection(
            &orphan,
            &ListParams::default().fields("metadata.name=second"),
        )
        .await
        .unwrap()
        .left()
        .expect("the objects, as marked");
    assert_eq!(
        listed.items[0].metadata.finalizers,
        Some(vec!["orphan".to_string()])
    );
    eventually("the second owner goes", || gone(&cms, "second")).await;
    let kept = secrets.get("kept-too").await.unwrap();
    assert_eq!(kept.metadata.owner_references.unwrap_or_default(), vec![]);
}

/// A cluster-scoped dependent of a namespaced owner is invalid: the
/// collector reports it with a Warning Event and never collects it.
#[tokio::test]
async fn a_cluster_scoped_dependent_of_a_namespaced_owner_is_reported_not_collected() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "default");
    let roles: Api<ClusterRole> = Api::all(c.clone());
    let events: Api<Event> = Api::namespaced(c, "default");
    let owner = config_map(&cms, "owner").await;
    let mut role = ClusterRole::default();
    role.metadata.name = Some("invalid-dependent".into());
    role.metadata.owner_references = Some(vec![owner_ref(&owner, false)]);
    let role = roles.create(&PostParams::default(), &role).await.unwrap();
    secret(&secrets, "valid", vec![owner_ref(&owner, false)], &[]).await;

    let uid = owner.metadata.uid.clone().unwrap();
    let reported = until("the invalid reference is reported", || async {
        let items = events
            .list(&ListParams::default().fields("reason=OwnerRefInvalidNamespace"))
            .await
            .unwrap()
            .items;
        (!items.is_empty()).then_some(items)
    })
    .await;
    let event = &reported[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.message.as_deref(),
        Some(format!("ownerRef [v1/ConfigMap, namespace: , name: owner, uid: {uid}] does not exist in namespace \"\"").as_str())
    );
    assert_eq!(event.involved_object.kind.as_deref(), Some("ClusterRole"));
    assert_eq!(event.involved_object.uid, role.metadata.uid);

    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually("the valid dependent is collected", || {
        gone(&secrets, "valid")
    })
    .await;
    assert!(
        roles.get_opt("invalid-dependent").await.unwrap().is_some(),
        "a cluster-scoped dependent of a namespaced owner is never collected"
    );
}

/// Namespace termination: DELETE marks the namespace `Terminating`
/// (keeping `spec.finalizers: [kubernetes]`); creates into it are a 403
/// with the `NamespaceTerminating` cause and a namespace of the same name
/// is a 409; the namespace controller deletes the content, reports what
/// finalizers hold in the conditions, and once all is gone finalizes the
/// namespace, which disappears. `default` may not be deleted.
#[tokio::test]
async fn a_deleted_namespace_terminates_then_disappears() {
    let kube = KubeApiServer::start().await.unwrap();
    let c = admin(&kube).await;
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("doomed".into());
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().finalizers,
        Some(vec!["kubernetes".to_string()])
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "doomed");
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "doomed");
    config_map(&cms, "plain").await;
    secret(&secrets, "held", vec![], &["test.io/hold"]).await;

    let marked = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a namespace terminates first");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.status.as_ref().unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert_eq!(
        marked.spec.unwrap().finalizers,
        Some(vec!["kubernetes".to_string()])
    );

    let mut late = ConfigMap::default();
    late.metadata.name = Some("late".into());
    let e = cms.create(&PostParams::default(), &late).await.unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 403, "reason": "Forbidden",
               "message": "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
               "details": {"name": "late", "kind": "configmaps", "causes": [
                   {"reason": "NamespaceTerminating", "message": "namespace doomed is being terminated",
                    "field": "metadata.namespace"}]}})
    );
    let e = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 409, "reason": "AlreadyExists",
               "message": "namespaces \"doomed\" already exists",
               "details": {"name": "doomed", "kind": "namespaces"}})
    );

    eventually("the content without finalizers is deleted", || {
        gone(&cms, "plain")
    })
    .await;
    let conditions = |n: &Namespace| -> Vec<(String, String, String, String)> {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                (
                    c.type_,
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
            .collect()
    };
    let seen = until("the conditions say what remains", || async {
        let seen = conditions(&namespaces.get("doomed").await.unwrap());
        (seen.len() == 5).then_some(seen)
    })
    .await;
    let row = |t: &str, s: &str, r: &str, m: &str| (t.into(), s.into(), r.into(), m.into());
    assert_eq!(
        seen,
        vec![
            row(
                "NamespaceDeletionDiscoveryFailure",
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered"
            ),
            row(
                "NamespaceDeletionGroupVersionParsingFailure",
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed"
            ),
            row(
                "NamespaceDeletionContentFailure",
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization"
            ),
            row(
                "NamespaceContentRemaining",
                "True",
                "SomeResourcesRemain",
                "Some resources are remaining: secrets. has 1 resource instances"
            ),
            row(
                "NamespaceFinalizersRemaining",
                "True",
                "SomeFinalizerRemain",
                "Some finalizers are remaining: test.io/hold in 1 resource instances"
            ),
        ]
    );
    assert!(namespaces.get_opt("doomed").await.unwrap().is_some());

    let release = json!({"metadata": {"finalizers": null}});
    secrets
        .patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    eventually("the namespace disappears", || gone(&namespaces, "doomed")).await;

    // A finalizer of someone else's in `spec.finalizers` holds the
    // namespace after the controller's own is gone, until that someone
    // finalizes it through `/finalize`.
    let mut waiting = Namespace::default();
    waiting.metadata.name = Some("waiting".into());
    waiting.spec = Some(k8s_openapi::api::core::v1::NamespaceSpec {
        finalizers: Some(vec!["example.com/wait".into()]),
    });
    let created = namespaces
        .create(&PostParams::default(), &waiting)
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().finalizers,
        Some(vec![
            "example.com/wait".to_string(),
            "kubernetes".to_string()
        ])
    );
    namespaces
        .delete("waiting", &DeleteParams::default())
        .await
        .unwrap();
    let held = until("the controller's finalizer is taken out", || async {
        let n = namespaces.get("waiting").await.unwrap();
        let finalizers = n.spec.clone().unwrap_or_default().finalizers;
        (finalizers == Some(vec!["example.com/wait".to_string()])).then_some(n)
    })
    .await;
    let mut finalized = held.clone();
    finalized.spec = Some(k8s_openapi::api::core::v1::NamespaceSpec {
        finalizers: Some(vec![]),
    });
    namespaces
        .replace_subresource("finalize", "waiting", &PostParams::default(), &finalized)
        .await
        .unwrap();
    assert!(gone(&namespaces, "waiting").await, "finalized, it is gone");

    let e = namespaces
        .delete("default", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(
        status(e),
        json!({"status": "Failure", "code": 403, "reason": "Forbidden",
               "message": "namespaces \"default\" is forbidden: this namespace may not be deleted",
               "details": {"name": "default", "kind": "namespaces"}})
    );
}
