//! The provider's nonce creator, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/noncecreator-controller/noncecreator_controller.go`
//! (NC below): a Secret labelled `liqo.io/nonce` (what `liqoctl` makes in
//! the consumer's tenant namespace, `authentication/forge/nonce.go:25-54`)
//! gets a fresh random nonce once, the challenge the consumer must sign
//! with its cluster key to get a Tenant accepted.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::consts::{NONCE_FIELD, NONCE_SECRET};
use crate::events::{self, NORMAL};
use crate::identity::Rule;
use crate::runner::Key;
use crate::tenant_namespace;
use crate::{cluster_keys, Error};

/// RBAC of this controller (NC:61-62, with what the namespace manager and
/// the recorder need).
pub const RULES: &[Rule] = tenant_namespace::SECRET_CONTROLLER_RULES;

/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:99`).
const COMPONENT: &str = "nonce-controller";

/// Run the controller on `client` until the task is dropped: the Secrets
/// with the nonce label (NC:139-154).
pub async fn run(client: Client) {
    let run = |key| reconcile(&client, key);
    tenant_namespace::run_on_secrets(&client, "nonce-creator", NONCE_SECRET, run).await;
}

/// NC:65-128.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
    let Some(mut secret) = secrets.get_opt(&key.name).await? else {
        return Ok(());
    };
    // NC:76-79: a nonce is made once and kept.
    if secret
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key(NONCE_FIELD))
    {
        return Ok(());
    }
    // NC:81-105: only in the peer's tenant namespace.
    let no_peer = ("MissingClusterID", "ClusterID not found in secret");
    if !tenant_namespace::placed(client, &secret, COMPONENT, no_peer).await? {
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
        events::reference_to(&secret),
        COMPONENT,
        NORMAL,
        "NonceGenerated",
        "Nonce generated",
    )
    .await;
    Ok(())
}
