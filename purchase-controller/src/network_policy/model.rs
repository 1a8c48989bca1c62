//! The `MultiClusterNetworkPolicy` kind (`broker.liqo-broker.io/v1alpha1`,
//! namespaced, short name `mcnp`, status subresource): the thesis'
//! requirement format (service, cluster and domain labels, §5.2) over the
//! pods of one namespace of this consumer, wherever Liqo runs them. The
//! CRD is generated from these types ([`crd`]); `tests/crd.rs` fails when
//! `deploy/kubernetes/purchase-controller/mcnp-crd.yaml` means something
//! else.

use std::collections::BTreeMap;

use controller_core::crd as schema;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use controller_core::crd::Condition;

pub const KIND: &str = "MultiClusterNetworkPolicy";
pub const PLURAL: &str = "multiclusternetworkpolicies";

/// What the policy asks: the pods it applies to and, per direction, the
/// peers and ports it admits.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema,
)]
#[kube(
    group = "broker.liqo-broker.io",
    version = "v1alpha1",
    kind = "MultiClusterNetworkPolicy",
    plural = "multiclusternetworkpolicies",
    shortname = "mcnp",
    namespaced,
    status = "MultiClusterNetworkPolicyStatus",
    doc = "A network policy over the pods of this namespace wherever Liqo runs them: refined into NetworkPolicies on this (the consumer's) cluster and, through the catalog, on the providers the namespace is offloaded to.",
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("x-kubernetes-validations" = [
        {"rule": DIRECTION_RULE, "message": DIRECTION_MESSAGE}
    ]),
    transform = schema::plain
)]
pub struct MultiClusterNetworkPolicySpec {
    /// The pods of this namespace the policy applies to (wherever they run).
    pub endpoint_selector: LabelSelector,
    /// Absent: ingress is not restricted. Present, even empty: only what the rules admit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub ingress: Option<Vec<IngressRule>>,
    /// Absent: egress is not restricted. Present, even empty: only what the rules admit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub egress: Option<Vec<EgressRule>>,
}

const DIRECTION_RULE: &str = "has(self.ingress) || has(self.egress)";
const DIRECTION_MESSAGE: &str =
    "set ingress, egress or both: a policy with neither restricts nothing";

/// A label selector, as Kubernetes' (`matchLabels` AND every requirement;
/// empty: every pod).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub match_expressions: Vec<Requirement>,
}

/// `key operator values`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct Requirement {
    #[schemars(length(min = 1, max = 317))]
    pub key: String,
    #[schemars(extend("enum" = ["In", "NotIn", "Exists", "DoesNotExist"]))]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub values: Vec<String>,
}

/// Traffic admitted into the selected pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct IngressRule {
    /// Empty or absent: any peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub from: Vec<Peer>,
    /// Empty or absent: any port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub ports: Vec<Port>,
}

/// Traffic admitted out of the selected pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct EgressRule {
    /// Empty or absent: any peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub to: Vec<Peer>,
    /// Empty or absent: any port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub ports: Vec<Port>,
}

/// One peer: `service` (with optional `cluster` and `domain`, the thesis'
/// labels) or `cidr` (with optional `except`), never both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("x-kubernetes-validations" = [
        {"rule": PEER_RULE, "message": PEER_MESSAGE}
    ]),
    transform = schema::plain
)]
pub struct Peer {
    /// The name of a Service of this namespace (its pods, wherever they run), or "*" (every pod of this buyer; needs cluster and domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub service: Option<String>,
    /// A cluster ID (this consumer's or a provider's it holds an active contract with), or "*" (every cluster of the domain; needs domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub cluster: Option<String>,
    /// The domain: this consumer and its providers (the controller's --network-policy-domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub domain: Option<String>,
    /// An IPv4 CIDR, as this cluster's pods see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 9, max = 18))]
    pub cidr: Option<String>,
    /// With cidr: CIDRs inside it that are not admitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub except: Vec<String>,
}

const PEER_RULE: &str = "has(self.service) != has(self.cidr) && (has(self.cidr) || !has(self.except)) && (!has(self.cidr) || (!has(self.cluster) && !has(self.domain)))";
const PEER_MESSAGE: &str =
    "a peer is either service (with optional cluster and domain) or cidr (with optional except)";

/// A port as NetworkPolicy has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct Port {
    /// TCP (when absent), UDP or SCTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["TCP", "UDP", "SCTP"]))]
    pub protocol: Option<String>,
    /// A port number or a container port's name (absent: every port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int_or_string")]
    pub port: Option<IntOrString>,
    /// With a numeric port: the last port of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1, "maximum" = 65535))]
    pub end_port: Option<i32>,
}

fn int_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-int-or-string": true})
}

impl IngressRule {
    pub fn peers(&self) -> &[Peer] {
        &self.from
    }
}

impl EgressRule {
    pub fn peers(&self) -> &[Peer] {
        &self.to
    }
}

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct MultiClusterNetworkPolicyStatus {
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
    /// Per cluster (this consumer first, then each provider): what is in force there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["cluster"]
    ))]
    pub clusters: Vec<ClusterState>,
}

/// The policy on one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ClusterState {
    pub cluster: String,
    /// Applied, Pending (sent, not reported yet), Refused, NotRendered (nothing sent there).
    #[schemars(extend("enum" = ["Applied", "Pending", "Refused", "NotRendered"]))]
    pub state: String,
    /// `namespace/name` of the NetworkPolicies that hold it there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_policies: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The CRD, as `deploy/kubernetes/purchase-controller/mcnp-crd.yaml`
/// holds it ([`crate::model::crd`] says why it is tidied).
pub fn crd() -> CustomResourceDefinition {
    schema::tidy(<MultiClusterNetworkPolicy as kube::CustomResourceExt>::crd())
}

impl MultiClusterNetworkPolicy {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }
}
