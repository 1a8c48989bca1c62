//! What a refinement looks at, read from the consumer's objects by pure
//! functions: pods (where they run, their address), Services' selectors,
//! Liqo's virtual nodes, the provider-side names of offloaded namespaces
//! and each provider's networks as this consumer configures them.

use std::collections::{BTreeMap, BTreeSet};

use controller_core::liqo::{
    NODE_TYPE_LABEL, REMOTE_CLUSTER_ID_LABEL, TENANT_NAMESPACE_PREFIX, VIRTUAL_NODE_TYPE,
};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use serde_json::Value;

/// Everything one pass refines against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// This consumer's cluster ID.
    pub consumer: String,
    /// The domain's name (`--network-policy-domain`).
    pub domain: String,
    /// The providers this consumer holds an active contract with.
    pub providers: BTreeSet<String>,
    /// Clusters where Liqo masquerades all traffic leaving them
    /// (`--full-masquerade-clusters`).
    pub full_masquerade: BTreeSet<String>,
    /// The cluster DNS every restricted egress also admits here (`None`:
    /// not added).
    pub dns: Option<Dns>,
    /// Running or pending pods, every namespace.
    pub pods: Vec<PodInfo>,
    /// `(namespace, name)` → the Service's selector (`None`: none, or empty).
    pub services: BTreeMap<ServiceKey, ServiceSelector>,
    /// Liqo virtual node → the provider it stands for.
    pub virtual_nodes: BTreeMap<String, String>,
    /// Offloaded namespace → its name on the providers
    /// (`NamespaceOffloading.status.remoteNamespaceName`).
    pub remote_namespaces: BTreeMap<String, String>,
    /// Provider → its networks, from the Configuration in its tenant
    /// namespace.
    pub networks: BTreeMap<String, Networks>,
}

/// This cluster's DNS pods (`--network-policy-dns-namespace`,
/// `--network-policy-dns-pod-labels`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dns {
    pub namespace: String,
    pub pod_labels: BTreeMap<String, String>,
}

/// A pod, as far as policies care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub node: Option<String>,
    /// `status.podIP`: for a pod on a virtual node, as Liqo reflects it
    /// here (the provider's address in this consumer's view).
    pub ip: Option<String>,
}

/// One provider's Liqo `Configuration` on this consumer (Liqo v1.2.0
/// `apis/networking/v1beta1/configuration_types.go:43-70`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks {
    /// `spec.local.cidr.pod`: this consumer's real pod CIDRs.
    pub consumer_pod: Vec<String>,
    /// `spec.local.cidr.external`: this consumer's real external CIDRs.
    pub consumer_external: Vec<String>,
    /// `status.remote.cidr.pod`: the provider's pods as this consumer sees them.
    pub provider_pod: Vec<String>,
    /// `status.remote.cidr.external`, likewise.
    pub provider_external: Vec<String>,
}

/// Where a pod runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// On this consumer.
    Local,
    /// On a provider's virtual node.
    Provider(String),
}

impl Snapshot {
    /// Where `pod` runs: the provider of its virtual node, else here;
    /// `None` while it is not scheduled.
    pub fn place(&self, pod: &PodInfo) -> Option<Place> {
        let node = pod.node.as_deref()?;
        Some(match self.virtual_nodes.get(node) {
            Some(provider) => Place::Provider(provider.clone()),
            None => Place::Local,
        })
    }

    /// The cluster ID of a place.
    pub fn cluster_of(&self, place: &Place) -> String {
        match place {
            Place::Local => self.consumer.clone(),
            Place::Provider(p) => p.clone(),
        }
    }

    /// The pods of `namespace`.
    pub fn pods_in<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = &'a PodInfo> + 'a {
        self.pods.iter().filter(move |p| p.namespace == namespace)
    }
}

/// A pod that is or will be running (finished ones hold no address).
pub fn pod(pod: &Pod) -> Option<PodInfo> {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    Some(PodInfo {
        namespace: pod.metadata.namespace.clone()?,
        name: pod.metadata.name.clone()?,
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ip: status
            .and_then(|s| s.pod_ip.clone())
            .filter(|ip| !ip.is_empty()),
    })
}

/// A Service's `(namespace, name)`.
pub type ServiceKey = (String, String);
/// A Service's selector (`None`: none, or empty).
pub type ServiceSelector = Option<BTreeMap<String, String>>;

/// A Service's `(namespace, name)` and selector.
pub fn service(service: &Service) -> Option<(ServiceKey, ServiceSelector)> {
    let key = (
        service.metadata.namespace.clone()?,
        service.metadata.name.clone()?,
    );
    let selector = service
        .spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .filter(|s| !s.is_empty());
    Some((key, selector))
}

/// A Liqo virtual node (`liqo.io/type=virtual-node`) and the provider it
/// stands for (`liqo.io/remote-cluster-id`).
pub fn virtual_node(node: &Node) -> Option<(String, String)> {
    let labels = node.metadata.labels.as_ref()?;
    if labels.get(NODE_TYPE_LABEL).map(String::as_str) != Some(VIRTUAL_NODE_TYPE) {
        return None;
    }
    let cluster = labels.get(REMOTE_CLUSTER_ID_LABEL)?.clone();
    Some((node.metadata.name.clone()?, cluster))
}

/// A NamespaceOffloading's namespace and `status.remoteNamespaceName`
/// (Liqo v1.2.0 `apis/offloading/v1beta1/namespaceoffloading_types.go:130-131`).
pub fn remote_namespace(offloading: &Value) -> Option<(String, String)> {
    let namespace = offloading["metadata"]["namespace"].as_str()?;
    let remote = offloading["status"]["remoteNamespaceName"].as_str()?;
    (!remote.is_empty()).then(|| (namespace.to_string(), remote.to_string()))
}

/// A Configuration in a tenant namespace (`liqo-tenant-*`), labelled with
/// the provider it configures: that provider and its networks. One
/// elsewhere is not Liqo's and is left out.
pub fn networks(configuration: &Value) -> Option<(String, Networks)> {
    let metadata = &configuration["metadata"];
    if !metadata["namespace"]
        .as_str()?
        .starts_with(TENANT_NAMESPACE_PREFIX)
    {
        return None;
    }
    let provider = metadata["labels"][REMOTE_CLUSTER_ID_LABEL].as_str()?;
    let cidrs = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect()
    };
    let spec = &configuration["spec"];
    let status = &configuration["status"];
    Some((
        provider.to_string(),
        Networks {
            consumer_pod: cidrs(&spec["local"]["cidr"]["pod"]),
            consumer_external: cidrs(&spec["local"]["cidr"]["external"]),
            provider_pod: cidrs(&status["remote"]["cidr"]["pod"]),
            provider_external: cidrs(&status["remote"]["cidr"]["external"]),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn liqo_objects_are_read_where_liqo_puts_them() {
        let conf = json!({
            "metadata": {"namespace": "liqo-tenant-p", "labels": {REMOTE_CLUSTER_ID_LABEL: "p"}},
            "spec": {"local": {"cidr": {"pod": ["10.0.0.0/16"], "external": ["10.70.0.0/16"]}},
                     "remote": {"cidr": {"pod": ["10.0.0.0/16"]}}},
            "status": {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}}
        });
        let (p, n) = networks(&conf).unwrap();
        assert_eq!(p, "p");
        assert_eq!(n.consumer_pod, ["10.0.0.0/16"]);
        assert_eq!(n.provider_pod, ["10.71.0.0/16"]);
        assert_eq!(n.provider_external, ["10.72.0.0/16"]);
        let mut elsewhere = conf.clone();
        elsewhere["metadata"]["namespace"] = json!("default");
        assert!(networks(&elsewhere).is_none());

        let nsoff = json!({"metadata": {"namespace": "shop"}, "status": {"remoteNamespaceName": "shop-c1"}});
        assert_eq!(
            remote_namespace(&nsoff),
            Some(("shop".into(), "shop-c1".into()))
        );
        assert!(remote_namespace(&json!({"metadata": {"namespace": "shop"}})).is_none());

        let node: Node = serde_json::from_value(json!({"metadata": {"name": "liqo-p",
            "labels": {NODE_TYPE_LABEL: VIRTUAL_NODE_TYPE, REMOTE_CLUSTER_ID_LABEL: "p"}}}))
        .unwrap();
        assert_eq!(virtual_node(&node), Some(("liqo-p".into(), "p".into())));
        let plain: Node = serde_json::from_value(json!({"metadata": {"name": "n1",
            "labels": {REMOTE_CLUSTER_ID_LABEL: "p"}}}))
        .unwrap();
        assert!(virtual_node(&plain).is_none());
    }
}
