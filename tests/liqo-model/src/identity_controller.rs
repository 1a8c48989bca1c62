//! The consumer's Identity controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/identity-controller/identity_controller.go`
//! (IC below) with `authentication/forge/kubeconfig.go` (KC): each Identity
//! becomes the Secret `kubeconfig-<identity>` beside it — a kubeconfig for
//! the peer's API server whose client certificate is the Identity's
//! `signedCRT` and whose key is this cluster's private key — labelled with
//! the peer and the identity type, and the Identity's status names it.
//!
//! Also the Identity `liqoctl` forges from a provider's Tenant
//! ([`forge`], `authentication/utils/identity.go:35-57`,
//! `authentication/forge/identity.go:25-72`).

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::cluster_keys::{self, LIQO_NAMESPACE};
use crate::consts::{
    self, CONTROL_PLANE, IDENTITY_TYPE, KUBECONFIG_FIELD, REMOTE_CLUSTER_ID,
    REMOTE_TENANT_NAMESPACE,
};
use crate::events::{self, NORMAL};
use crate::identity::{Rule, ALL};
use crate::runner::{self, Key};
use crate::Error;

/// RBAC of this controller (IC:59-61), plus the Events it records and
/// the owner's finalizers its Secrets' `blockOwnerDeletion` needs (granted
/// to the controller manager by other markers,
/// `deployments/liqo/files/liqo-controller-manager-ClusterRole.yaml:66-74`).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["authentication.liqo.io"],
        &["identities", "identities/status"],
        ALL,
    ),
    Rule::new(
        &["authentication.liqo.io"],
        &["identities/finalizers"],
        &["update"],
    ),
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["events"], &["create", "patch"]),
];

/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:127`).
const COMPONENT: &str = "identity-controller";

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    let identities: Api<DynamicObject> = Api::all_with(client.clone(), &consts::identities());
    let secrets: Api<DynamicObject> = Api::all_with(client.clone(), &consts::secrets());
    // IC:91-97: Identities, and the Secrets they control.
    let own = runner::keys(runner::touched(identities, ""), |i| Some(Key::of(&i)));
    let owned = runner::keys(runner::touched(secrets, IDENTITY_TYPE), |s| {
        let namespace = s.namespace().unwrap_or_default();
        s.owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "Identity")
            .map(|o| Key {
                namespace,
                name: o.name.clone(),
            })
    });
    let client = &client;
    runner::run("identity", vec![own, owned.boxed()], |key| {
        reconcile(client, key)
    })
    .await;
}

/// IC:64-89.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let identities: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::identities());
    let Some(identity) = identities.get_opt(&key.name).await? else {
        return Ok(());
    };
    let secret_name = ensure_kubeconfig_secret(client, &identity).await?;
    // IC:82-87.
    if identity.data["status"]["kubeconfigSecretRef"]["name"] != secret_name.as_str() {
        let mut updated = identity.clone();
        if !updated.data["status"].is_object() {
            updated.data["status"] = json!({});
        }
        updated.data["status"]["kubeconfigSecretRef"] = json!({"name": secret_name});
        identities
            .replace_status(&key.name, &PostParams::default(), &updated)
            .await?;
    }
    Ok(())
}

/// IC:99-131 with KC:27-86: the Secret `kubeconfig-<identity>`, made or
/// brought up to date; its name.
async fn ensure_kubeconfig_secret(
    client: &Client,
    identity: &DynamicObject,
) -> Result<String, Error> {
    let keys = cluster_keys::get(client.clone(), LIQO_NAMESPACE).await?;
    let namespace = identity.namespace().unwrap_or_default();
    let name = format!("kubeconfig-{}", identity.name_any());
    let spec = &identity.data["spec"];
    // IC:106-111: a control-plane kubeconfig defaults to the remote tenant
    // namespace.
    let default_ns = (spec["type"] == CONTROL_PLANE)
        .then(|| spec["namespace"].as_str())
        .flatten()
        .filter(|n| !n.is_empty());
    let kubeconfig = kubeconfig(&identity.name_any(), spec, &keys.private_pem, default_ns);
    let owner = json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
                       "name": identity.name_any(), "uid": identity.meta().uid,
                       "controller": true, "blockOwnerDeletion": true});
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &consts::secrets());
    let before = secrets.get_opt(&name).await?;
    runner::create_or_update(&secrets, &consts::secrets(), &namespace, &name, |secret| {
        use base64::Engine;
        let labels = secret.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(
            REMOTE_CLUSTER_ID.to_string(),
            spec["clusterID"].as_str().unwrap_or_default().to_string(),
        );
        labels.insert(
            IDENTITY_TYPE.to_string(),
            spec["type"].as_str().unwrap_or_default().to_string(),
        );
        if let Some(ns) = default_ns {
            secret
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(REMOTE_TENANT_NAMESPACE.to_string(), ns.to_string());
        }
        if !secret.data["data"].is_object() {
            secret.data["data"] = json!({});
        }
        secret.data["data"][KUBECONFIG_FIELD] =
            json!(base64::engine::general_purpose::STANDARD.encode(kubeconfig));
        if let Ok(owner) = serde_json::from_value(owner) {
            secret.metadata.owner_references = Some(vec![owner]);
        }
    })
    .await?;
    let after = secrets.get_opt(&name).await?;
    // IC:125-128.
    if let Some(secret) = after.filter(|a| {
        before.as_ref().map(|b| &b.metadata.resource_version) != Some(&a.metadata.resource_version)
    }) {
        events::record(
            client,
            events::reference_to_dynamic(&secret),
            COMPONENT,
            NORMAL,
            "KubeconfigEnsured",
            "Kubeconfig secret ensured",
        )
        .await;
    }
    Ok(name)
}

/// `pkg/utils/kubeconfig/kubeconfig.go:24-55` `GenerateKubeconfig`: the
/// peer's cluster (server, CA, proxy) named by its ID, the identity's
/// user with the signed certificate and this cluster's key, and one
/// context `default-context` in `namespace`. Liqo writes it as YAML; the
/// model writes the same document as JSON, which every YAML reader reads.
pub fn kubeconfig(user: &str, spec: &Value, private_pem: &str, namespace: Option<&str>) -> String {
    use base64::Engine;
    let params = &spec["authParams"];
    let cluster_name = spec["clusterID"].as_str().unwrap_or_default();
    let mut cluster = json!({"server": params["apiServer"].as_str().unwrap_or_default()});
    // `[]byte` fields are base64 in the Identity and in a kubeconfig alike.
    if let Some(ca) = params["ca"].as_str().filter(|c| !c.is_empty()) {
        cluster["certificate-authority-data"] = json!(ca);
    }
    if let Some(proxy) = params["proxyURL"].as_str().filter(|p| !p.is_empty()) {
        cluster["proxy-url"] = json!(proxy);
    }
    let mut context = json!({"cluster": cluster_name, "user": user});
    if let Some(ns) = namespace {
        context["namespace"] = json!(ns);
    }
    let mut auth = json!({"client-key-data":
        base64::engine::general_purpose::STANDARD.encode(private_pem)});
    if let Some(crt) = params["signedCRT"].as_str().filter(|c| !c.is_empty()) {
        auth["client-certificate-data"] = json!(crt);
    }
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "contexts": [{"name": "default-context", "context": context}],
        "current-context": "default-context",
        "users": [{"name": user, "user": auth}],
    })
    .to_string()
}

/// What `liqoctl` applies on the consumer from the provider's Tenant
/// (`authentication/utils/identity.go:35-57`, `forge/identity.go:25-72`):
/// the Identity `controlplane-<provider>` in the consumer's tenant
/// namespace, with the Tenant's AuthParams and the provider's tenant
/// namespace. A Tenant without both status fields is an error.
pub fn forge(tenant: &Value, provider_id: &str, consumer_tenant_ns: &str) -> Result<Value, Error> {
    let status = &tenant["status"];
    let tenant_ns = status["tenantNamespace"].as_str().unwrap_or_default();
    if status["authParams"].is_null() || tenant_ns.is_empty() {
        return Err(Error::Authentication(format!(
            "tenant {} does not have the required status fields",
            tenant["metadata"]["name"].as_str().unwrap_or_default()
        )));
    }
    Ok(json!({
        "apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
        "metadata": {"name": format!("controlplane-{provider_id}"),
                     "namespace": consumer_tenant_ns,
                     "labels": {REMOTE_CLUSTER_ID: provider_id}},
        "spec": {"clusterID": provider_id, "type": CONTROL_PLANE,
                 "authParams": status["authParams"], "namespace": tenant_ns},
    }))
}
