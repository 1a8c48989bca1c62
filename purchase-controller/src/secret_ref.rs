//! The Secrets a Purchase's spec names (`credentialsSecretRef`,
//! `peeringCredentialsSecretRef`), read from the Purchase's namespace: a
//! missing Secret or an unreadable one is an [`Unusable`] the Purchase
//! reports, never an error retried blindly. What they hold is never put in
//! a message.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::Client;

use crate::decision::Unusable;
use crate::model::{Purchase, SecretKeyRef};

/// The Secret `reference` names in the Purchase's namespace, and
/// `namespace/name` to name it in messages; `what` Secret it is
/// (`credentials`), and `problem` the kind of [`Unusable`] a failure is.
pub async fn read(
    client: &Client,
    purchase: &Purchase,
    reference: &SecretKeyRef,
    what: &str,
    problem: fn(String) -> Unusable,
) -> Result<(Secret, String), Unusable> {
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let where_ = format!("{namespace}/{}", reference.name);
    match secrets.get_opt(&reference.name).await {
        Ok(Some(secret)) => Ok((secret, where_)),
        Ok(None) => Err(problem(format!("{what} Secret {where_} does not exist"))),
        Err(error) => Err(problem(format!(
            "cannot read {what} Secret {where_}: {error}"
        ))),
    }
}

/// The text under `key`, trimmed, if it is there and not empty.
pub fn text(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
        .filter(|t| !t.is_empty())
}
