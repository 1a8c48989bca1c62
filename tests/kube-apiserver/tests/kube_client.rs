//! The server driven by kube-rs as a real controller drives a cluster:
//! discovery, `Api<DynamicObject>` over the Liqo CRDs (create, get, list,
//! replace, replace_status, patch_status with merge and apply), 409 on a
//! stale resourceVersion, 422 on schema violations, the finalizer flow,
//! `kube::runtime::watcher`, a typed Lease round trip, and a kubeconfig
//! written for child processes.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Client, Config, Discovery};
use kube_test_server::{Fault, KubeApiServer};
use serde_json::json;

/// A client as the tests' own user (`kube_test_server::ADMIN`).
async fn client(kube: &KubeApiServer) -> Client {
    let mut config = Config::new(kube.url().parse().unwrap());
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    Client::try_from(config).unwrap()
}

fn slice_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("authentication.liqo.io", "v1beta1", "ResourceSlice");
    ApiResource::from_gvk_with_plural(&gvk, "resourceslices")
}

fn slice(name: &str, cpu: serde_json::Value) -> DynamicObject {
    let mut object = DynamicObject::new(name, &slice_resource());
    object.data = json!({"spec": {"class": "default", "providerClusterID": "provider",
                                  "resources": {"cpu": cpu, "memory": "4Gi"}}});
    object
}

fn api_error(error: kube::Error) -> (u16, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.reason.clone()),
        other => panic!("not an API error: {other:?}"),
    }
}

#[tokio::test]
async fn discovery_finds_builtins_and_liqo_crds() {
    let kube = KubeApiServer::start().await.unwrap();
    let discovery = Discovery::new(client(&kube).await).run().await.unwrap();
    let slices = GroupVersionKind::gvk("authentication.liqo.io", "v1beta1", "ResourceSlice");
    let (resource, caps) = discovery
        .resolve_gvk(&slices)
        .expect("ResourceSlice discovered");
    assert_eq!(resource.plural, "resourceslices");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let fc = GroupVersionKind::gvk("core.liqo.io", "v1beta1", "ForeignCluster");
    let (_, caps) = discovery
        .resolve_gvk(&fc)
        .expect("ForeignCluster discovered");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    let lease = GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease");
    assert!(discovery.resolve_gvk(&lease).is_some());
    let nodes = GroupVersionKind::gvk("", "v1", "Node");
    assert!(discovery.resolve_gvk(&nodes).is_some());
    let version = client(&kube).await.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

#[tokio::test]
async fn resource_slices_through_a_dynamic_api() {
    let kube = KubeApiServer::start().await.unwrap();
    let client = client(&kube).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &slice_resource());
    let pp = PostParams::default();

    let created = api.create(&pp, &slice("s1", json!("2"))).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let got = api.get("s1").await.unwrap();
    assert_eq!(got.data["spec"]["resources"]["cpu"], "2");
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // Schema violations are refused with 422, field by field.
    let e = api
        .create(&pp, &slice("bad", json!("two cores")))
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (422, "Invalid".into()));
    let e = api
        .create(&pp, &slice("Bad_Name", json!("1")))
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (422, "Invalid".into()));
    let wrong_enum =
        json!({"status": {"conditions": [{"type": "Authentication", "status": "Maybe"}]}});
    let e = api
        .patch_status("s1", &PatchParams::default(), &Patch::Merge(&wrong_enum))
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (422, "Invalid".into()));

    // Status through the subresource only; spec writes bump generation.
    let mut with_status = got.clone();
    with_status.data["status"] = json!({"resources": {"cpu": "2"}, "conditions": [
        {"type": "Resources", "status": "Accepted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let updated = api.replace_status("s1", &pp, &with_status).await.unwrap();
    assert_eq!(updated.data["status"]["resources"]["cpu"], "2");
    assert_eq!(updated.metadata.generation, Some(1));
    let mut spec_change = updated.clone();
    spec_change.data["spec"]["resources"]["cpu"] = json!("3");
    spec_change.data["status"] = json!({});
    let replaced = api.replace("s1", &pp, &spec_change).await.unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_eq!(
        replaced.data["status"]["resources"]["cpu"], "2",
        "status ignored on the main resource"
    );

    // A stale resourceVersion: 409, as client-go's and kube-rs's retry loops expect.
    let e = api.replace("s1", &pp, &spec_change).await.unwrap_err();
    assert_eq!(api_error(e), (409, "Conflict".into()));

    // Server-side apply of status, as kube-rs controllers write it.
    let applied = json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "status": {"conditions": [{"type": "Authentication", "status": "Accepted"}]}});
    let ssa = PatchParams::apply("broker").force();
    let after = api
        .patch_status("s1", &ssa, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(
        after.data["status"]["conditions"][0]["type"],
        "Authentication"
    );
    assert_eq!(
        after.data["status"]["resources"]["cpu"], "2",
        "other fields kept"
    );
    assert_eq!(after.data["spec"]["resources"]["cpu"], "3");
    let other = json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "status": {"conditions": [{"type": "Resources", "status": "Denied"}]}});
    let e = api
        .patch_status("s1", &PatchParams::apply("intruder"), &Patch::Apply(&other))
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (409, "Conflict".into()));
    // Apply creates, too.
    let mut fresh = serde_json::to_value(slice("s2", json!(4))).unwrap();
    fresh["metadata"]["namespace"] = json!("default");
    let made = api
        .patch("s2", &PatchParams::apply("broker"), &Patch::Apply(&fresh))
        .await
        .unwrap();
    assert_eq!(made.data["spec"]["resources"]["cpu"], 4);

    // Injected faults reach the client as API errors; kube-rs retries a
    // 503 by itself.
    kube.inject(Fault::new(503).verb("get"));
    api.get("s1").await.unwrap();
    assert!(kube.audit().iter().any(|r| r.code == 503));
    kube.inject(Fault::new(500).verb("get"));
    let e = api.get("s1").await.unwrap_err();
    assert_eq!(api_error(e), (500, "InternalError".into()));

    // What RBAC would have to allow.
    let rbac = kube.rbac_requests();
    for (verb, sub) in [
        ("create", None),
        ("get", None),
        ("list", None),
        ("update", None),
        ("update", Some("status")),
        ("patch", Some("status")),
        ("patch", None),
    ] {
        assert!(
            rbac.iter().any(|r| r.verb == verb
                && r.api_group == "authentication.liqo.io"
                && r.resource == "resourceslices"
                && r.subresource.as_deref() == sub
                && r.namespace.as_deref() == Some("default")),
            "{verb} {sub:?} missing from {rbac:?}"
        );
    }
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let kube = KubeApiServer::start().await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client(&kube).await, "default", &slice_resource());
    let mut object = slice("s1", json!("1"));
    object.metadata.finalizers = Some(vec!["liqo.io/broker".into()]);
    api.create(&PostParams::default(), &object).await.unwrap();
    let deleted = api.delete("s1", &DeleteParams::default()).await.unwrap();
    let marked = deleted.left().expect("the object, still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(api
        .get("s1")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    let remove = json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "liqo.io/broker"},
                        {"op": "remove", "path": "/metadata/finalizers/0"}]);
    let patch: json_patch::Patch = serde_json::from_value(remove).unwrap();
    api.patch("s1", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    let e = api.get("s1").await.unwrap_err();
    assert_eq!(api_error(e), (404, "NotFound".into()));
}

#[tokio::test]
async fn a_watcher_follows_a_crd() {
    let kube = KubeApiServer::start().await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client(&kube).await, "default", &slice_resource());
    api.create(&PostParams::default(), &slice("before", json!("1")))
        .await
        .unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    let writer = api.clone();
    let mut wrote = false;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .map(Result::unwrap)
    {
        match event {
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                seen.push(o.metadata.name.unwrap())
            }
            watcher::Event::InitDone if !wrote => {
                wrote = true;
                writer
                    .create(&PostParams::default(), &slice("after", json!("2")))
                    .await
                    .unwrap();
            }
            watcher::Event::Delete(o) => {
                seen.push(format!("-{}", o.metadata.name.unwrap()));
                break;
            }
            _ => {}
        }
        if seen.last().map(String::as_str) == Some("after") {
            writer
                .delete("before", &DeleteParams::default())
                .await
                .unwrap();
        }
    }
    assert_eq!(seen, ["before", "after", "-before"]);
    assert!(kube.watches(("authentication.liqo.io", "resourceslices")) >= 1);
}

#[tokio::test]
async fn leases_namespaces_and_pods_round_trip_typed() {
    let kube = KubeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "broker-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let renewed = leases
        .replace("broker-leader", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_eq!(renewed.spec.unwrap().holder_identity.as_deref(), Some("b"));
    // The loser of a leader race: a stale resourceVersion.
    let e = leases
        .replace("broker-leader", &PostParams::default(), &created)
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (409, "Conflict".into()));

    // Namespaces must exist for what is created in them.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "tenant-a");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    )
    .unwrap();
    let e = pods.create(&PostParams::default(), &pod).await.unwrap_err();
    assert_eq!(api_error(e), (404, "NotFound".into()));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tenant-a"}})).unwrap();
    let ns = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let e = pods.create(&PostParams::default(), &pod).await.unwrap_err();
    assert_eq!(api_error(e), (409, "AlreadyExists".into()));
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()) && names.contains(&"tenant-a".to_string()));
}

#[tokio::test]
async fn a_kubeconfig_as_a_service_account_names_it_in_the_audit_log() {
    // A ServiceAccount no shipped manifest has: this server's audit file is
    // written under KUBE_TEST_AUDIT_DIR too, and deploy-check holds only the
    // shipped ServiceAccounts' calls against their RBAC.
    const USER: &str = "system:serviceaccount:kube-test:audit-probe";
    let kube = KubeApiServer::start().await.unwrap();
    // RBAC is enforced for users with credentials: it may read Leases in
    // kube-system.
    kube.load_rbac(&[
        serde_json::json!({"kind": "Role", "metadata": {"name": "probe", "namespace": "kube-system"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}),
        serde_json::json!({"kind": "RoleBinding", "metadata": {"name": "probe", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "probe"},
            "subjects": [{"kind": "ServiceAccount", "name": "audit-probe", "namespace": "kube-test"}]}),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&path, USER).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    assert!(leases.get_opt("nothing").await.unwrap().is_none());

    // An unknown token is refused, as a real server refuses it: 401, not
    // a fallback to anonymous.
    let mut config = Config::new(kube.url().parse().unwrap());
    config.auth_info.token = Some("not-a-token".to_string().into());
    let stranger: Api<Lease> = Api::namespaced(Client::try_from(config).unwrap(), "kube-system");
    match stranger.get_opt("nothing").await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }

    let audit = kube.audit();
    let lease_get = |user: Option<&str>| {
        audit.iter().any(|r| {
            r.user.as_deref() == user
                && r.resource.as_ref().is_some_and(|a| {
                    (a.verb.as_str(), a.resource.as_str(), a.namespace.as_deref())
                        == ("get", "leases", Some("kube-system"))
                })
        })
    };
    assert!(lease_get(Some(USER)) && lease_get(None));
    assert!(audit
        .iter()
        .filter(|r| r.user.is_none())
        .all(|r| r.code == 401));

    // The file deploy-check reads: one JSON object a line, resource
    // requests only.
    let audit_dir = dir.path().join("audit");
    kube.write_audit(&audit_dir).unwrap();
    let file = std::fs::read_dir(&audit_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let text = std::fs::read_to_string(file.path()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|l| l["user"] == USER
        && l["verb"] == "get"
        && l["apiGroup"] == "coordination.k8s.io"
        && l["resource"] == "leases"
        && l["namespace"] == "kube-system"
        && l["name"] == "nothing"
        && l["code"] == 404));
    assert!(lines
        .iter()
        .any(|l| l["user"].is_null() && l["code"] == 401));
}
