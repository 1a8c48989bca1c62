//! The consumer's side of a pass: what is read (the policies and the
//! objects a [`Snapshot`] is made of), the NetworkPolicies written (only
//! those labelled `app.kubernetes.io/managed-by=liqo-broker-network-policy`
//! are changed or deleted) and the statuses.

use std::collections::{BTreeMap, BTreeSet};

use controller_core::liqo::{CONFIGURATION, NAMESPACE_OFFLOADING};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::Value;

use super::model::{MultiClusterNetworkPolicy, MultiClusterNetworkPolicyStatus};
use super::refine::{MANAGED_BY, MANAGED_BY_LABEL};
use super::snapshot::{self, Snapshot};
use crate::model::Purchase;

/// What one pass reads on this cluster.
pub struct Observed {
    pub policies: Vec<MultiClusterNetworkPolicy>,
    /// The snapshot without `providers`, `consumer`, `domain` and
    /// `full_masquerade` (the caller's).
    pub snapshot: Snapshot,
    /// The providers of this cluster's Purchases (`status.providerClusterID`):
    /// the domain when the catalog cannot say.
    pub purchased_from: BTreeSet<String>,
}

fn values<K: serde::Serialize>(items: Vec<K>) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

/// Read everything a pass refines `policies` (from the policies' cache)
/// against.
pub async fn observe(
    client: &Client,
    policies: Vec<MultiClusterNetworkPolicy>,
) -> Result<Observed, kube::Error> {
    let lp = ListParams::default();
    let mut snap = Snapshot::default();
    if policies.is_empty() {
        // Nothing to refine: only what was rendered before is removed.
        return Ok(Observed {
            policies,
            snapshot: snap,
            purchased_from: BTreeSet::new(),
        });
    }
    snap.pods = Api::<Pod>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .filter_map(snapshot::pod)
        .collect();
    snap.services = Api::<Service>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .filter_map(snapshot::service)
        .collect();
    snap.virtual_nodes = Api::<Node>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .filter_map(snapshot::virtual_node)
        .collect();
    let offloadings =
        Api::<DynamicObject>::all_with(client.clone(), &NAMESPACE_OFFLOADING.api_resource())
            .list(&lp)
            .await?
            .items;
    snap.remote_namespaces = values(offloadings)
        .iter()
        .filter_map(snapshot::remote_namespace)
        .collect();
    let configurations =
        Api::<DynamicObject>::all_with(client.clone(), &CONFIGURATION.api_resource())
            .list(&lp)
            .await?
            .items;
    snap.networks = values(configurations)
        .iter()
        .filter_map(snapshot::networks)
        .collect();
    let purchased_from = Api::<Purchase>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| !p.is_deleting())
        .filter_map(|p| p.status.and_then(|s| s.provider_cluster_id))
        .collect();
    Ok(Observed {
        policies,
        snapshot: snap,
        purchased_from,
    })
}

/// `namespace/name`.
fn key(np: &NetworkPolicy) -> String {
    format!(
        "{}/{}",
        np.metadata.namespace.as_deref().unwrap_or_default(),
        np.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Bring this cluster's NetworkPolicies to `desired`: each created or
/// replaced when it differs, every other one of ours deleted. Per desired
/// policy (`namespace/name`), whether it is in place (`Err`: why not).
pub async fn apply(
    client: &Client,
    desired: &[NetworkPolicy],
) -> Result<BTreeMap<String, Result<(), String>>, kube::Error> {
    let ours = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let existing: BTreeMap<String, NetworkPolicy> = Api::<NetworkPolicy>::all(client.clone())
        .list(&ListParams::default().labels(&ours))
        .await?
        .items
        .into_iter()
        .map(|np| (key(&np), np))
        .collect();
    let mut results = BTreeMap::new();
    for np in desired {
        let at = key(np);
        let namespace = np.metadata.namespace.as_deref().unwrap_or_default();
        let name = np.metadata.name.as_deref().unwrap_or_default();
        let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
        let result = match existing.get(&at) {
            None => match api.create(&PostParams::default(), np).await {
                Ok(_) => {
                    tracing::info!(network_policy = %at, "NetworkPolicy created");
                    Ok(())
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Err(format!(
                    "a NetworkPolicy {at} exists that this controller did not make: left alone"
                )),
                Err(kube::Error::Api(e)) if (400..500).contains(&e.code) => Err(format!(
                    "the API server refused NetworkPolicy {at}: {}",
                    e.message
                )),
                Err(e) => return Err(e),
            },
            Some(current)
                if current.spec == np.spec
                    && current.metadata.labels == np.metadata.labels
                    && current.metadata.owner_references == np.metadata.owner_references =>
            {
                Ok(())
            }
            Some(current) => {
                let mut next = np.clone();
                next.metadata.resource_version = current.metadata.resource_version.clone();
                match api.replace(name, &PostParams::default(), &next).await {
                    Ok(_) => {
                        tracing::info!(network_policy = %at, "NetworkPolicy updated");
                        Ok(())
                    }
                    Err(kube::Error::Api(e)) if (400..500).contains(&e.code) && e.code != 409 => {
                        Err(format!(
                            "the API server refused NetworkPolicy {at}: {}",
                            e.message
                        ))
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        results.insert(at, result);
    }
    for (at, np) in &existing {
        if results.contains_key(at) {
            continue;
        }
        let api: Api<NetworkPolicy> = Api::namespaced(
            client.clone(),
            np.metadata.namespace.as_deref().unwrap_or_default(),
        );
        match api
            .delete(
                np.metadata.name.as_deref().unwrap_or_default(),
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(network_policy = %at, "NetworkPolicy deleted: its policy is gone or refused")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(results)
}

/// Write `status` when it differs from the policy's.
pub async fn write_status(
    client: &Client,
    policy: &MultiClusterNetworkPolicy,
    status: &MultiClusterNetworkPolicyStatus,
) -> Result<(), kube::Error> {
    if policy.status.as_ref() == Some(status) {
        return Ok(());
    }
    let api: Api<MultiClusterNetworkPolicy> = Api::namespaced(
        client.clone(),
        policy.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let mut patch = serde_json::json!({ "status": status });
    // A merge patch keeps what it does not name: an empty list goes as null.
    if patch["status"].get("clusters").is_none() {
        patch["status"]["clusters"] = Value::Null;
    }
    match api
        .patch_status(
            policy.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Deleted meanwhile.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
