//! The service-controller's writes held to its own namespace and the
//! instance namespaces it makes (issue 41; the hostile review of
//! 2026-12-01, "Observations from reading the code": its shipped
//! ClusterRole grants cluster-wide patch/delete on Secrets and ConfigMaps,
//! and F4/F11 run with that identity).
//!
//! RBAC cannot name "the namespaces this controller made", so the
//! ClusterRole stays cluster-wide and the ValidatingAdmissionPolicy
//! `deploy/kubernetes/service-controller` ships does the holding. Both are
//! loaded into a test API server as rendered from `deploy/`
//! (`e2e::rbac::load_shipped`, `e2e::rbac::load_shipped_admission`), and
//! the requests are made with the controller's ServiceAccount token, with
//! the verbs it uses (server-side apply, delete).
//!
//! Without the policy loaded (commit 4d9a1b6's shipping), the first write
//! to `kube-system` is accepted — the test checks that first, so it shows
//! the gap it closes — and every refusal below fails.

use std::path::Path;

use anyhow::{bail, ensure, Result};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

/// The ServiceAccount `deploy/kubernetes/service-controller` runs as.
const USER: &str = "system:serviceaccount:liqo:service-controller";
/// The policy and its binding, as `deploy/` names them.
const POLICY: &str = "liqo-broker-service-controller-writes";
const NAMESPACES: (&str, &str) = ("", "namespaces");
const SECRETS: (&str, &str) = ("", "secrets");
/// The label the controller puts on each instance namespace
/// (`service-controller/src/template.rs` MANAGED_BY/MANAGER).
const MANAGED: (&str, &str) = ("app.kubernetes.io/managed-by", "service-controller");

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural)
}

fn object(kind: &str, name: &str, namespace: Option<&str>, labels: Value) -> Result<DynamicObject> {
    let mut metadata = json!({"name": name, "labels": labels});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    let mut object = json!({"apiVersion": "v1", "kind": kind, "metadata": metadata});
    if kind != "Namespace" {
        object["data"] = json!({"k": "dg=="});
    }
    Ok(serde_json::from_value(object)?)
}

/// What the controller does with everything it writes: server-side apply.
async fn apply(
    client: &Client,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
    name: &str,
    labels: Value,
) -> Result<DynamicObject, kube::Error> {
    let ar = resource(kind, plural);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let body = object(kind, name, namespace, labels).expect("a valid object");
    api.patch(
        name,
        &PatchParams::apply("service-controller").force(),
        &Patch::Apply(&body),
    )
    .await
}

async fn delete(
    client: &Client,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), kube::Error> {
    let ar = resource(kind, plural);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.delete(name, &DeleteParams::default()).await.map(|_| ())
}

async fn client_from(path: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The policy's refusal: 403 `Forbidden` (its `reason`), in the policy
/// dispatcher's words, ending with `message`.
fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    what: &str,
    message: &str,
) -> Result<()> {
    let status = match result {
        Err(kube::Error::Api(status)) => status,
        other => bail!("{what}: expected the policy's refusal, got {other:?}"),
    };
    ensure!(
        (status.code, status.reason.as_str()) == (403, "Forbidden"),
        "{what}: {status:?}"
    );
    let denied = format!(
        "ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}"
    );
    ensure!(
        status.message.ends_with(&denied),
        "{what}: {}",
        status.message
    );
    Ok(())
}

fn elsewhere(plural: &str, namespace: &str) -> String {
    format!("service-controller writes {plural} only in its own namespace (liqo) and in the instance namespaces it made, not in namespace {namespace}")
}

fn not_its_namespace(name: &str) -> String {
    format!("service-controller writes only the namespaces it makes for instances (svc-<contract>, labelled app.kubernetes.io/managed-by=service-controller), not {name}")
}

/// Hostile review 2026-12-01 (observations: service-controller's
/// cluster-wide Secret/ConfigMap writes; F4/F11). As the controller's
/// ServiceAccount under the shipped RBAC and admission policy: it may make
/// its instance namespace and write and delete ConfigMaps and Secrets there
/// and in its own namespace; a write or delete in `kube-system`, in another
/// team's namespace, or in a namespace named like an instance's that it
/// did not make, is refused, and so are a Namespace `kube-evil`, taking
/// over that look-alike namespace, and deleting a team's namespace.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_controller_writes_only_its_own_and_its_instance_namespaces() -> Result<()> {
    let kube = KubeApiServer::start_without_crds().await?;
    e2e::rbac::load_shipped(&kube)?;
    for (name, labels) in [
        ("liqo", json!({})),
        ("kube-system", json!({})),
        ("team-a", json!({})),
        // A team's namespace that happens to look like an instance's.
        ("svc-payments", json!({})),
    ] {
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "labels": labels}}),
        );
    }
    kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "bootstrap", "namespace": "kube-system"},
               "data": {"token": "c2VjcmV0"}}),
    );
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&path, USER)?;
    let sc = client_from(&path).await?;

    // RBAC alone (the old shipping) lets it write anywhere.
    apply(
        &sc,
        "ConfigMap",
        "configmaps",
        Some("kube-system"),
        "probe",
        json!({}),
    )
    .await
    .map_err(|e| anyhow::anyhow!("RBAC alone should let this through: {e}"))?;
    kube.delete_object(("", "configmaps"), Some("kube-system"), "probe")?;

    e2e::rbac::load_shipped_admission(&kube)?;
    let managed = json!({MANAGED.0: MANAGED.1});

    // Its own work goes through.
    apply(
        &sc,
        "Namespace",
        "namespaces",
        None,
        "svc-c-1",
        managed.clone(),
    )
    .await?;
    apply(
        &sc,
        "ConfigMap",
        "configmaps",
        Some("svc-c-1"),
        "settings",
        managed.clone(),
    )
    .await?;
    apply(
        &sc,
        "Secret",
        "secrets",
        Some("svc-c-1"),
        "service-secrets",
        managed.clone(),
    )
    .await?;
    delete(&sc, "ConfigMap", "configmaps", Some("svc-c-1"), "settings").await?;
    apply(
        &sc,
        "Secret",
        "secrets",
        Some("liqo"),
        "service-c-1-peering",
        json!({}),
    )
    .await?;
    delete(
        &sc,
        "Secret",
        "secrets",
        Some("liqo"),
        "service-c-1-peering",
    )
    .await?;

    // Anywhere else it is refused.
    for namespace in ["kube-system", "team-a", "svc-payments"] {
        assert_refused(
            apply(
                &sc,
                "ConfigMap",
                "configmaps",
                Some(namespace),
                "settings",
                json!({}),
            )
            .await,
            &format!("a ConfigMap in {namespace}"),
            &elsewhere("configmaps", namespace),
        )?;
        assert_refused(
            apply(
                &sc,
                "Secret",
                "secrets",
                Some(namespace),
                "service-secrets",
                json!({}),
            )
            .await,
            &format!("a Secret in {namespace}"),
            &elsewhere("secrets", namespace),
        )?;
    }
    assert_refused(
        delete(&sc, "Secret", "secrets", Some("kube-system"), "bootstrap").await,
        "deleting kube-system's Secret",
        &elsewhere("secrets", "kube-system"),
    )?;
    ensure!(kube
        .get(SECRETS, Some("kube-system"), "bootstrap")
        .is_some());

    // Namespaces: only the shape it makes, only ones it labelled.
    assert_refused(
        apply(
            &sc,
            "Namespace",
            "namespaces",
            None,
            "kube-evil",
            managed.clone(),
        )
        .await,
        "Namespace kube-evil",
        &not_its_namespace("kube-evil"),
    )?;
    assert_refused(
        apply(
            &sc,
            "Namespace",
            "namespaces",
            None,
            "svc-payments",
            managed.clone(),
        )
        .await,
        "labelling the look-alike svc-payments",
        &not_its_namespace("svc-payments"),
    )?;
    for namespace in ["team-a", "svc-payments"] {
        assert_refused(
            delete(&sc, "Namespace", "namespaces", None, namespace).await,
            &format!("deleting {namespace}"),
            &not_its_namespace(namespace),
        )?;
    }
    ensure!(kube.get(NAMESPACES, None, "kube-evil").is_none());
    ensure!(kube
        .get(NAMESPACES, None, "svc-payments")
        .is_some_and(|n| n["metadata"]["labels"][MANAGED.0].is_null()));

    // And it removes its own instance namespace.
    delete(&sc, "Namespace", "namespaces", None, "svc-c-1").await?;
    Ok(())
}
