//! The consumer's nonce signer, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/noncesigner-controller/noncesigner_controller.go`
//! (NS below): a Secret labelled `liqo.io/signed-nonce` in a provider's
//! tenant namespace, holding the provider's nonce (what `liqoctl` copies
//! there, `authentication/forge/signednonce.go:25-49`), gets the nonce's
//! Ed25519 signature by this cluster's key in `signedNonce`.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::cluster_keys::{self, LIQO_NAMESPACE};
use crate::consts::{NONCE_FIELD, SIGNED_NONCE_FIELD, SIGNED_NONCE_SECRET};
use crate::events::{self, NORMAL};
use crate::identity::Rule;
use crate::runner::Key;
use crate::tenant_namespace;
use crate::Error;

/// RBAC of this controller (NS:66-67, with what the namespace manager and
/// the recorder need).
pub const RULES: &[Rule] = tenant_namespace::SECRET_CONTROLLER_RULES;

/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:108`).
const COMPONENT: &str = "signed-nonce-controller";

/// Run the controller on `client` until the task is dropped: the Secrets
/// with the signed-nonce label (NS:144-158).
pub async fn run(client: Client) {
    let run = |key| reconcile(&client, key);
    tenant_namespace::run_on_secrets(&client, "nonce-signer", SIGNED_NONCE_SECRET, run).await;
}

/// NS:70-142.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
    let Some(mut secret) = secrets.get_opt(&key.name).await? else {
        return Ok(());
    };
    // NS:81-102: only in the provider's tenant namespace.
    let no_peer = (
        "MissingRemoteClusterID",
        "RemoteClusterID not found in secret",
    );
    if !tenant_namespace::placed(client, &secret, COMPONENT, no_peer).await? {
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
        events::reference_to(&secret),
        COMPONENT,
        NORMAL,
        "NonceSigned",
        "Nonce signed",
    )
    .await;
    Ok(())
}
