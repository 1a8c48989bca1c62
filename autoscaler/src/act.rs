//! The autoscaler's effects on the cluster, each safe to repeat:
//!
//! - **buying**: a Purchase (purchase-controller reserves, buys, peers
//!   and offloads) named `<autoscaler>-<n>`, `n` = `status.purchasesMade`
//!   plus 1, written into the status (with the purchase in flight) *before*
//!   the Purchase is created, so a leader that dies between the two leaves
//!   a record the next one completes under the same name — a 409
//!   AlreadyExists then means "made already", never a second contract;
//! - **giving back**: each pod on the node evicted through `pods/eviction`
//!   (a 429 is a PodDisruptionBudget saying no: the node is kept), then
//!   the Purchase deleted — purchase-controller cancels the contract and
//!   unpeers;
//! - **pods recreated**: a waiting pod created before Liqo's pod webhook
//!   acted in its namespace is deleted at its UID for its owner to
//!   recreate it through the webhook ([`controller_core::pods::stale`]).
//!
//! The Purchases carry the label `broker.liqo-broker.io/market-autoscaler`
//! and no ownerReference: deleting a MarketAutoscaler leaves the contracts
//! it bought running (an Event names them), because a garbage-collected
//! Purchase would cancel paid capacity that pods may be running on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, EvictParams, PostParams, Preconditions};
use kube::core::ObjectMeta;
use purchase_controller::model::{Purchase, PurchaseSpec, SecretKeyRef};

use crate::model::{MarketAutoscaler, PURCHASE_LABEL};
use crate::observe::bought_by;

/// Kubernetes' longest object name.
const MAX_NAME: usize = 253;

/// The name of the autoscaler's `n`-th Purchase.
pub fn purchase_name(autoscaler: &str, n: u64) -> String {
    let suffix = format!("-{n}");
    let keep = MAX_NAME.saturating_sub(suffix.len());
    let base: String = autoscaler.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches(['-', '.']))
}

/// The Purchase buying `plan` of `offer` for `ma`, offloading its
/// namespaces.
pub fn purchase(ma: &MarketAutoscaler, name: &str, offer: &str, plan: &str) -> Purchase {
    let spec = &ma.spec;
    let mut labels = BTreeMap::new();
    labels.insert(
        PURCHASE_LABEL.to_string(),
        ma.metadata.name.clone().unwrap_or_default(),
    );
    let mut p = Purchase::new(
        name,
        PurchaseSpec {
            catalog_url: Some(spec.catalog_url.clone()),
            credentials_secret_ref: Some(SecretKeyRef {
                name: spec.credentials_secret_ref.name.clone(),
                key: spec.credentials_secret_ref.key.clone(),
            }),
            offer_id: Some(offer.to_string()),
            plan_id: Some(plan.to_string()),
            namespaces: spec.pods.namespaces.clone(),
            pod_offloading_strategy: "LocalAndRemote".to_string(),
            namespace_mapping_strategy: "DefaultName".to_string(),
            bought_by: Some(bought_by(ma)),
            ..PurchaseSpec::default()
        },
    );
    p.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: ma.metadata.namespace.clone(),
        labels: Some(labels),
        ..ObjectMeta::default()
    };
    p
}

/// Create `purchase`; `Ok(false)` when it exists already (made by an
/// earlier round or leader).
pub async fn create(api: &Api<Purchase>, purchase: &Purchase) -> Result<bool, kube::Error> {
    match api.create(&PostParams::default(), purchase).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Delete Purchase `name` (at `uid`, when known); gone already is fine.
pub async fn delete(
    api: &Api<Purchase>,
    name: &str,
    uid: Option<String>,
) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Delete pod `name` at `uid` (its owner recreates it); gone or replaced
/// already is fine.
pub async fn recreate_pod(api: &Api<Pod>, name: &str, uid: String) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// What an eviction came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Evicted (or gone already).
    Done,
    /// Refused: a PodDisruptionBudget allows no disruption now (429), or
    /// the API refused it otherwise (the message).
    Refused(String),
}

/// Evict pod `name` through `pods/eviction` (policy/v1).
pub async fn evict(api: &Api<Pod>, name: &str) -> Result<Eviction, kube::Error> {
    match api.evict(name, &EvictParams::default()).await {
        Ok(_) => Ok(Eviction::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Done),
        Err(kube::Error::Api(s)) if s.code == 429 || s.code == 403 || s.code == 409 => {
            Ok(Eviction::Refused(s.message.clone()))
        }
        Err(e) => Err(e),
    }
}

/// Why the catalog token cannot be read (for `CredentialsMissing`).
pub type TokenProblem = String;

/// The bearer token under `key` of Secret `name` in `namespace`.
pub async fn token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Result<String, TokenProblem>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(Err(format!("Secret {namespace}/{name} does not exist"))),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            return Ok(Err(format!(
                "Secret {namespace}/{name} cannot be read (403: {}); give the autoscaler's ServiceAccount get on secrets in {namespace}",
                s.message
            )))
        }
        Err(e) => return Err(e),
    };
    Ok(purchase_controller::catalog::bearer_token(&secret, key)
        .map_err(|problem| format!("Secret {namespace}/{name} {problem}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purchases_are_numbered_after_the_autoscaler_within_kubernetes_name_length() {
        assert_eq!(purchase_name("web", 1), "web-1");
        assert_eq!(purchase_name("web", 12), "web-12");
        let long = "a".repeat(253);
        let name = purchase_name(&long, 7);
        assert_eq!(name.len(), 253);
        assert!(name.ends_with("-7"));
        assert_ne!(purchase_name(&long, 7), purchase_name(&long, 8));
    }
}
