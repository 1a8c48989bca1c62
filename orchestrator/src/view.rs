//! One namespace as the decision sees it — its consumer, demand and
//! current selection — built the same way by the controller (from its
//! caches) and by `explain` (from the API), and decided by the same call,
//! [`View::decide`].
//!
//! A namespace is a consumer's offloaded namespace when Liqo's NamespaceMap
//! controller created it: the label `liqo.io/remote-cluster-id` names the
//! consumer and the annotation `liqo.io/managed-by-namespace-map` names the
//! NamespaceMap (Liqo v1.2.0, `pkg/liqo-controller-manager/offloading/
//! namespacemap-controller/enforcement.go`). Tenant namespaces carry the
//! same label but not the annotation (and carry `liqo.io/tenant-namespace`),
//! so they are never placed.

use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::api::{Api, ListParams};
use kube::Client;

use controller_core::liqo::{
    MANAGED_BY_NAMESPACE_MAP_ANNOTATION, OFFLOADING_NAME, REMOTE_CLUSTER_ID_LABEL,
};

use crate::decision::{self, Decision, Pending, Prepared};
use crate::demand::{self, Demand, DemandError};
use crate::offers::Offers;
use crate::offloading::NamespaceOffloading;
use crate::policy::Policy;

/// Selects the candidate namespaces on the API server.
pub const NAMESPACE_SELECTOR: &str = REMOTE_CLUSTER_ID_LABEL;

/// The consumer whose offloaded namespace `ns` is, if it is one.
pub fn consumer_of(ns: &Namespace) -> Option<&str> {
    let managed = ns
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MANAGED_BY_NAMESPACE_MAP_ANNOTATION));
    let consumer = ns.metadata.labels.as_ref()?.get(REMOTE_CLUSTER_ID_LABEL)?;
    (managed && !consumer.is_empty()).then_some(consumer.as_str())
}

/// One namespace's inputs to the decision.
#[derive(Debug, Clone)]
pub struct View {
    pub namespace: String,
    pub consumer: String,
    pub demand: Demand,
    pub existing: Option<NamespaceOffloading>,
}

/// A namespace that cannot be decided.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("namespace {0} is not a namespace a consumer offloaded (no {REMOTE_CLUSTER_ID_LABEL} label with the {MANAGED_BY_NAMESPACE_MAP_ANNOTATION} annotation)")]
    NotOffloaded(String),
    #[error("namespace {namespace}: {source}")]
    Demand {
        namespace: String,
        source: DemandError,
    },
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl View {
    /// The view of `ns` holding `quotas` and `pods`, selected by `existing`.
    pub fn build(
        ns: &Namespace,
        quotas: &[&ResourceQuota],
        pods: &[&Pod],
        existing: Option<NamespaceOffloading>,
    ) -> Result<View, ViewError> {
        let namespace = ns.metadata.name.clone().unwrap_or_default();
        let consumer = consumer_of(ns)
            .ok_or_else(|| ViewError::NotOffloaded(namespace.clone()))?
            .to_string();
        let demand = demand::demand(quotas, pods).map_err(|source| ViewError::Demand {
            namespace: namespace.clone(),
            source,
        })?;
        Ok(View {
            namespace,
            consumer,
            demand,
            existing,
        })
    }

    /// Read namespace `name` and what is in it from the API server.
    pub async fn read(client: &Client, name: &str) -> Result<View, ViewError> {
        let ns = Api::<Namespace>::all(client.clone()).get(name).await?;
        let quotas = Api::<ResourceQuota>::namespaced(client.clone(), name)
            .list(&ListParams::default())
            .await?;
        let pods = Api::<Pod>::namespaced(client.clone(), name)
            .list(&ListParams::default())
            .await?;
        let existing = Api::<NamespaceOffloading>::namespaced(client.clone(), name)
            .get_opt(OFFLOADING_NAME)
            .await?;
        View::build(
            &ns,
            &quotas.items.iter().collect::<Vec<_>>(),
            &pods.items.iter().collect::<Vec<_>>(),
            existing,
        )
    }

    /// The providers selected now.
    pub fn current(&self) -> Vec<String> {
        self.existing
            .as_ref()
            .map(NamespaceOffloading::selected)
            .unwrap_or_default()
    }

    /// Decide this namespace under `policy` with the catalog's `offers`
    /// and `disabled` providers at `now`.
    pub fn decide(
        &self,
        policy: &Policy,
        offers: &Offers,
        disabled: &std::collections::BTreeSet<String>,
        now: jiff::Timestamp,
    ) -> Decision {
        self.with_input(policy, offers, disabled, now, decision::decide)
    }

    /// [`View::decide`] through `prepared`, made from the same `offers`
    /// and `disabled` (the controller's way: one per change of the offers
    /// for every namespace).
    pub fn decide_prepared(
        &self,
        policy: &Policy,
        prepared: &Prepared,
        offers: &Offers,
        disabled: &std::collections::BTreeSet<String>,
        now: jiff::Timestamp,
    ) -> Decision {
        self.with_input(policy, offers, disabled, now, |input| {
            prepared.decide(input)
        })
    }

    fn with_input(
        &self,
        policy: &Policy,
        offers: &Offers,
        disabled: &std::collections::BTreeSet<String>,
        now: jiff::Timestamp,
        decide: impl FnOnce(&decision::Input<'_>) -> Decision,
    ) -> Decision {
        let rules = policy.rules_for(&self.consumer);
        let current = self.current();
        let pending: Option<Pending> = self
            .existing
            .as_ref()
            .and_then(NamespaceOffloading::pending);
        decide(&decision::Input {
            consumer: &self.consumer,
            demand: &self.demand.resources,
            rules: &rules,
            hysteresis: policy.hysteresis,
            offers,
            disabled,
            current: &current,
            pending: pending.as_ref(),
            now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_namespaces_liqo_created_for_a_consumer() {
        let ns = |v| serde_json::from_value::<Namespace>(v).unwrap();
        let remote = ns(json!({"metadata": {"name": "app-c1",
            "labels": {"liqo.io/remote-cluster-id": "c1"},
            "annotations": {"liqo.io/managed-by-namespace-map": "liqo-tenant-c1/c1", "liqo.io/original-name": "app"}}}));
        assert_eq!(consumer_of(&remote), Some("c1"));
        let tenant = ns(json!({"metadata": {"name": "liqo-tenant-c1",
            "labels": {"liqo.io/remote-cluster-id": "c1", "liqo.io/tenant-namespace": "true"}}}));
        assert_eq!(consumer_of(&tenant), None);
        let plain = ns(json!({"metadata": {"name": "x"}}));
        assert_eq!(consumer_of(&plain), None);
    }
}
