//! Services this provider sells with `Local` hosting (pure): their pods
//! run here, in the instance namespace, which only the customer may reach.
//!
//! The service-controller makes for each service contract an instance
//! namespace `svc-…`, labelled `app.kubernetes.io/managed-by=service-controller`
//! and annotated `broker.liqo-broker.io/contract-id` (both are needed here;
//! service-controller's `Cluster::namespace`, `instance::CONTRACT_ANNOTATION`,
//! `template::{MANAGED_BY, MANAGER}`), and a Purchase that peers
//! this provider *towards the customer* and offloads that namespace there
//! (docs/services.md, "Hosting"). It is a provider namespace (no consumer
//! label), so without more the tenant isolation leaves it open to every
//! consumer's ranges.
//!
//! Who the customer is, is read from Liqo rather than recomputed: the
//! namespace's `NamespaceOffloading` (named `offloading`, the only name
//! Liqo reconciles, `pkg/consts/namespace_mapping.go:30`) has, in
//! `status.remoteNamespacesConditions`, one entry per peered cluster, keyed
//! by the name of that cluster's NamespaceMap, which is its cluster ID
//! (`namespaceoffloading_types.go:140-142`,
//! `virtualnode-controller/namespacemap.go:58-61`,
//! `pkg/utils/foreigncluster/uniqueName.go:20-22`). Every peer gets an
//! entry; the clusters the namespace is offloaded to are those whose
//! `OffloadingRequired` condition is `True` (`namespaceoffloading-controller/status.go:106-133,161-176`).
//!
//! Each instance namespace gets one ingress policy,
//! `liqo-broker-service-instance`, admitting only: its own pods; the
//! customers' namespaces here and their ranges as this provider sees them
//! (the `status.remote.cidr` of their Configuration, as for a consumer);
//! Liqo's tenant namespaces (the gateways); the provider's
//! `--isolation-ingress-from` namespaces. Not offloaded anywhere (yet), it
//! admits no customer. As with protected namespaces, one that has ingress
//! policies of its own is left to them (ours beside would widen them), and
//! a protected one keeps its protection. A customer that is also a
//! consumer here gets egress to the instance namespace in its tenant
//! isolation ([`super::Tenant::services`]), so its offloaded pods can use
//! the service.

use std::collections::BTreeMap;

use controller_core::liqo::{OFFLOADING_NAME, TENANT_NAMESPACE_LABEL};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{Namespace, Ranges, Settings};

/// The service-controller's mark on what it makes (its
/// `template::{MANAGED_BY, MANAGER}`).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "service-controller";
/// The contract an instance namespace serves (service-controller's
/// `instance::CONTRACT_ANNOTATION`).
pub const CONTRACT_ANNOTATION: &str = "broker.liqo-broker.io/contract-id";

/// The policy in each instance namespace, and its role label's value.
pub const POLICY: &str = "liqo-broker-service-instance";
pub const ROLE: &str = "service";

/// `NamespaceOffloadingRequired` (`namespaceoffloading_types.go:76`).
const OFFLOADING_REQUIRED: &str = "OffloadingRequired";

/// A NamespaceOffloading as read: where it is, and the clusters it
/// offloads its namespace to ([`offloaded_to`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offloading {
    pub namespace: String,
    pub name: String,
    pub clusters: Vec<String>,
}

/// The clusters a NamespaceOffloading's `status` says its namespace is
/// offloaded to: the keys of `remoteNamespacesConditions` whose
/// `OffloadingRequired` condition is `True`.
pub fn offloaded_to(status: &Value) -> Vec<String> {
    status["remoteNamespacesConditions"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, conditions)| {
            conditions.as_array().into_iter().flatten().any(|c| {
                c["type"].as_str() == Some(OFFLOADING_REQUIRED)
                    && c["status"].as_str() == Some("True")
            })
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// Whether `ns` is a service's instance namespace: the service-controller's
/// label and contract annotation, and not a consumer's or Liqo's tenant
/// namespace.
pub fn is_instance(ns: &Namespace) -> bool {
    ns.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        && ns.contract.is_some()
        && super::consumer_of(&ns.labels).is_none()
        && !ns.labels.contains_key(TENANT_NAMESPACE_LABEL)
}

/// Per instance namespace, its customers (none when not offloaded).
pub fn instances<'a>(
    namespaces: &'a [Namespace],
    offloadings: &[Offloading],
) -> BTreeMap<&'a str, Vec<String>> {
    let mut out: BTreeMap<&str, Vec<String>> = namespaces
        .iter()
        .filter(|n| is_instance(n))
        .map(|n| (n.name.as_str(), Vec::new()))
        .collect();
    for o in offloadings.iter().filter(|o| o.name == OFFLOADING_NAME) {
        if let Some(customers) = out.get_mut(o.namespace.as_str()) {
            for c in &o.clusters {
                if !customers.contains(c) {
                    customers.push(c.clone());
                }
            }
            customers.sort();
        }
    }
    out
}

/// The ingress policy of instance namespace `namespace`, sold to
/// `customers` (`ranges`: each cluster's, as admitted here).
pub fn policy(
    namespace: &str,
    customers: &[String],
    ranges: &BTreeMap<String, Ranges>,
    settings: &Settings,
) -> NetworkPolicy {
    let own_pods = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector::default()),
        ..NetworkPolicyPeer::default()
    };
    let liqo_tenant_namespaces = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![super::requirement(TENANT_NAMESPACE_LABEL, "Exists")]),
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut from = vec![own_pods, liqo_tenant_namespaces];
    for c in customers {
        from.push(super::consumer_namespaces(c));
        if let Some(r) = ranges.get(c) {
            from.extend(r.all().map(|net| super::block(net, Vec::new())));
        }
    }
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: Some(from),
        ports: None,
    }];
    for labels in &settings.ingress_from {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(vec![super::namespaces_labelled(labels)]),
            ports: None,
        });
    }
    NetworkPolicy {
        metadata: super::meta(namespace, POLICY, ROLE),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            egress: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_clusters_the_namespace_is_offloaded_to_are_customers() {
        let status = json!({"offloadingPhase": "Ready", "remoteNamespacesConditions": {
            "alice": [{"type": "OffloadingRequired", "status": "True"},
                      {"type": "Ready", "status": "True"}],
            "bob": [{"type": "OffloadingRequired", "status": "False"}],
            "carol": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(offloaded_to(&status), ["alice"]);
        assert!(offloaded_to(&json!({})).is_empty());
        assert!(offloaded_to(&json!({"remoteNamespacesConditions": {"x": "y"}})).is_empty());
    }
}
