//! The provider's nonce creator, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/noncecreator-controller/noncecreator_controller.go`
//! (NC below): a Secret labelled `liqo.io/nonce` (what `liqoctl` makes in
//! the consumer's tenant namespace, `authentication/forge/nonce.go:25-54`)
//! gets a fresh random nonce once, the challenge the consumer must sign
//! with its cluster key to get a Tenant accepted.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;

use crate::consts::{self, NONCE_FIELD, NONCE_SECRET, REMOTE_CLUSTER_ID};
use crate::events::{self, NORMAL, WARNING};
use crate::identity::{Rule, ALL};
use crate::runner::{self, Key};
use crate::{cluster_keys, tenant_namespace, Error};

/// RBAC of this controller (NC:61-62), plus the Events it records and the
/// tenant namespaces it looks up (`tenantnamespace.Manager`).
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["namespaces"], &["get", "list", "watch"]),
    Rule::new(&[""], &["events"], &["create", "patch"]),
];

/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:99`).
const COMPONENT: &str = "nonce-controller";

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    // NC:139-154: Secrets with the nonce label.
    let secrets: Api<DynamicObject> = Api::all_with(client.clone(), &consts::secrets());
    let own = runner::keys(runner::touched(secrets, NONCE_SECRET), |s| {
        Some(Key::of(&s))
    });
    let client = &client;
    runner::run("nonce-creator", vec![own], |key| reconcile(client, key)).await;
}

/// NC:65-128.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::secrets());
    let Some(obj) = dynamic.get_opt(&key.name).await? else {
        return Ok(());
    };
    let mut secret = secrets.get(&key.name).await?;
    // NC:76-79: a nonce is made once and kept.
    if secret
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key(NONCE_FIELD))
    {
        return Ok(());
    }
    let warn = |reason: &'static str, message: &'static str| {
        events::record(client, &obj, COMPONENT, WARNING, reason, message)
    };
    // NC:81-92.
    let Some(cluster) = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REMOTE_CLUSTER_ID))
        .filter(|c| !c.is_empty())
        .cloned()
    else {
        warn("MissingClusterID", "ClusterID not found in secret").await;
        return Ok(());
    };
    // NC:94-105: only in the peer's tenant namespace.
    let Some(tenant_ns) = tenant_namespace::get(client, &cluster).await? else {
        warn("TenantNamespaceNotFound", "Unable to get tenant namespace").await;
        return Err(Error::Waiting(format!("the tenant namespace of {cluster}")));
    };
    if key.namespace != tenant_ns {
        warn("WrongNamespace", "Secret not in tenant namespace").await;
        return Ok(());
    }
    // NC:107-123. Liqo writes `stringData`, which the API server stores in
    // `data`; the model writes `data` itself.
    let nonce = cluster_keys::random_nonce()?;
    secret
        .data
        .get_or_insert_with(Default::default)
        .insert(NONCE_FIELD.to_string(), ByteString(nonce.into_bytes()));
    secrets
        .replace(&key.name, &PostParams::default(), &secret)
        .await?;
    events::record(
        client,
        &obj,
        COMPONENT,
        NORMAL,
        "NonceGenerated",
        "Nonce generated",
    )
    .await;
    Ok(())
}
