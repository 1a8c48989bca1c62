//! The consumer's nonce signer, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/noncesigner-controller/noncesigner_controller.go`
//! (NS below): a Secret labelled `liqo.io/signed-nonce` in a provider's
//! tenant namespace, holding the provider's nonce (what `liqoctl` copies
//! there, `authentication/forge/signednonce.go:25-49`), gets the nonce's
//! Ed25519 signature by this cluster's key in `signedNonce`.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;

use crate::cluster_keys::{self, LIQO_NAMESPACE};
use crate::consts::{
    self, NONCE_FIELD, REMOTE_CLUSTER_ID, SIGNED_NONCE_FIELD, SIGNED_NONCE_SECRET,
};
use crate::events::{self, NORMAL, WARNING};
use crate::identity::{Rule, ALL};
use crate::runner::{self, Key};
use crate::{tenant_namespace, Error};

/// RBAC of this controller (NS:66-67), plus the Events it records and the
/// tenant namespaces it looks up (`tenantnamespace.Manager`).
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["namespaces"], &["get", "list", "watch"]),
    Rule::new(&[""], &["events"], &["create", "patch"]),
];

/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:108`).
const COMPONENT: &str = "signed-nonce-controller";

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    // NS:144-158: Secrets with the signed-nonce label.
    let secrets: Api<DynamicObject> = Api::all_with(client.clone(), &consts::secrets());
    let own = runner::keys(runner::touched(secrets, SIGNED_NONCE_SECRET), |s| {
        Some(Key::of(&s))
    });
    let client = &client;
    runner::run("nonce-signer", vec![own], |key| reconcile(client, key)).await;
}

/// NS:70-142.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::secrets());
    let Some(obj) = dynamic.get_opt(&key.name).await? else {
        return Ok(());
    };
    let mut secret = secrets.get(&key.name).await?;
    // NS:81-87.
    let Some(cluster) = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REMOTE_CLUSTER_ID))
        .filter(|c| !c.is_empty())
        .cloned()
    else {
        events::record(
            client,
            &obj,
            COMPONENT,
            WARNING,
            "MissingRemoteClusterID",
            "RemoteClusterID not found in secret",
        )
        .await;
        return Ok(());
    };
    // NS:89-102: only in the provider's tenant namespace.
    let Some(tenant_ns) = tenant_namespace::get(client, &cluster).await? else {
        events::record(
            client,
            &obj,
            COMPONENT,
            WARNING,
            "TenantNamespaceNotFound",
            "Unable to get tenant namespace",
        )
        .await;
        return Err(Error::Waiting(format!("the tenant namespace of {cluster}")));
    };
    if key.namespace != tenant_ns {
        events::record(
            client,
            &obj,
            COMPONENT,
            WARNING,
            "WrongNamespace",
            "Secret not in tenant namespace",
        )
        .await;
        return Ok(());
    }
    // NS:104-123: this cluster's key signs the nonce as stored.
    let keys = cluster_keys::get(client.clone(), LIQO_NAMESPACE).await?;
    let data = secret.data.get_or_insert_with(Default::default);
    let nonce = match data.get(NONCE_FIELD) {
        Some(n) if !n.0.is_empty() => n.0.clone(),
        Some(_) => return Err(Error::Authentication("empty nonce found".into())),
        None => return Err(Error::Authentication("nonce not found".into())),
    };
    let signature = cluster_keys::sign_nonce(&keys.private_pem, &nonce)?;
    // NS:125-130.
    if data
        .get(SIGNED_NONCE_FIELD)
        .is_some_and(|s| s.0 == signature)
    {
        return Ok(());
    }
    data.insert(SIGNED_NONCE_FIELD.to_string(), ByteString(signature));
    secrets
        .replace(&key.name, &PostParams::default(), &secret)
        .await?;
    events::record(
        client,
        &obj,
        COMPONENT,
        NORMAL,
        "NonceSigned",
        "Nonce signed",
    )
    .await;
    Ok(())
}
