//! The autoscaler's effects on the cluster, each safe to repeat:
//!
//! - **buying**: a Purchase (purchase-controller reserves, buys, peers
//!   and offloads) named `<autoscaler>-<n>`, `n` = `status.purchasesMade`
//!   plus 1, written into the status (with the purchase in flight) *before*
//!   the Purchase is created, so a leader that dies between the two leaves
//!   a record the next one completes under the same name — a 409
//!   AlreadyExists then means "made already", never a second contract;
//! - **giving back**: the node cordoned ([`CORDONED_BY`]), each pod on it
//!   evicted through `pods/eviction` (a 429 is a PodDisruptionBudget
//!   saying no: the node is uncordoned and kept), then the contract
//!   cancelled and the Purchase deleted — purchase-controller unpeers;
//! - **pods recreated**: a waiting pod created before Liqo's pod webhook
//!   acted in its namespace is deleted at its UID for its owner to
//!   recreate it through the webhook ([`controller_core::pods::stale`]).
//!
//! The Purchases carry the label `broker.liqo-broker.io/market-autoscaler`
//! and no ownerReference: deleting a MarketAutoscaler leaves the contracts
//! it bought running (an Event names them), because a garbage-collected
//! Purchase would cancel paid capacity that pods may be running on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
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
/// namespaces, for `term` (`terms.duration`; whole seconds, rounded up)
/// or, unset, the catalog's contract duration.
pub fn purchase(
    ma: &MarketAutoscaler,
    name: &str,
    (offer, plan): (&str, &str),
    term: Option<std::time::Duration>,
) -> Purchase {
    let spec = &ma.spec;
    let duration_seconds = term.map(whole_seconds);
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
            duration_seconds,
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

/// A contract length as the catalog takes it: whole seconds, rounded up,
/// at least one.
pub fn whole_seconds(term: std::time::Duration) -> u64 {
    let whole = term.as_secs();
    let whole = if term.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    whole.max(1)
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

/// Delete Purchase `name` (at `uid`, when known); gone already is fine:
/// `Ok(false)` (a round on a store that had not seen an earlier round's
/// deletion yet must not count it again).
pub async fn delete(
    api: &Api<Purchase>,
    name: &str,
    uid: Option<String>,
) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
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

/// The annotation on a node the autoscaler cordoned to give it back: the
/// MarketAutoscaler's `<namespace>/<name>`. Only a node carrying it is
/// ever uncordoned by the autoscaler.
pub const CORDONED_BY: &str = "broker.liqo-broker.io/cordoned-by-market-autoscaler";

/// When the autoscaler cordoned the node (RFC 3339): its drain is given
/// up `--max-drain-time` after.
pub const DRAIN_BEGAN: &str = "broker.liqo-broker.io/drain-began";

/// Cordon node `name` for `by` at `now` (`spec.unschedulable`, the
/// annotations [`CORDONED_BY`] and [`DRAIN_BEGAN`]), as Liqo's VirtualNode
/// deletion cordons before it drains (`virtualnode-controller/cordon.go`).
pub async fn cordon(
    api: &Api<Node>,
    name: &str,
    by: &str,
    now: jiff::Timestamp,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({
        "metadata": {"annotations": {CORDONED_BY: by, DRAIN_BEGAN: now.to_string()}},
        "spec": {"unschedulable": true},
    });
    merge_node(api, name, &patch).await
}

/// Uncordon node `name`, which the autoscaler cordoned.
pub async fn uncordon(api: &Api<Node>, name: &str) -> Result<(), kube::Error> {
    let patch = serde_json::json!({
        "metadata": {"annotations": {CORDONED_BY: null, DRAIN_BEGAN: null}},
        "spec": {"unschedulable": null},
    });
    merge_node(api, name, &patch).await
}

/// Merge `patch` into node `name`; a node gone already is fine.
async fn merge_node(
    api: &Api<Node>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
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

    #[test]
    fn the_term_is_asked_for_in_whole_seconds_rounded_up() {
        let ma = MarketAutoscaler::new("mas", serde_json::from_value(serde_json::json!({
            "catalogURL": "http://catalog", "credentialsSecretRef": {"name": "t", "key": "token"},
            "pods": {"namespaces": ["apps"]}, "limits": {"currency": "EUR"}
        })).expect("a spec"));
        let asked = |term| {
            purchase(&ma, "mas-1", ("o", "p"), term)
                .spec
                .duration_seconds
        };
        assert_eq!(asked(None), None);
        assert_eq!(
            asked(Some(std::time::Duration::from_secs(3600))),
            Some(3600)
        );
        assert_eq!(asked(Some(std::time::Duration::from_millis(1500))), Some(2));
        assert_eq!(asked(Some(std::time::Duration::from_millis(1))), Some(1));
    }
}
