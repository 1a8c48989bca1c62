//! The `Purchase` kind (`broker.liqo-broker.io/v1alpha1`, namespaced, status
//! subresource): what the consumer asks for, and what the controller
//! reports. The CRD is generated from these types ([`crd`]);
//! `tests/crd.rs` fails when `deploy/kubernetes/purchase-controller/crd.yaml`
//! means something else.

use std::collections::BTreeMap;

use controller_core::crd as schema;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "broker.liqo-broker.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "Purchase";
pub const PLURAL: &str = "purchases";

/// The finalizer that makes deletion wait for the clean-up.
pub const FINALIZER: &str = "broker.liqo-broker.io/purchase-cleanup";

/// A reference to one key of a Secret in the Purchase's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[schemars(transform = schema::plain)]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// What the consumer asks for; the `Purchase` kind (namespaced, with a
/// status subresource) is generated around it.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema,
)]
#[kube(
    group = "broker.liqo-broker.io",
    version = "v1alpha1",
    kind = "Purchase",
    plural = "purchases",
    namespaced,
    status = "PurchaseStatus",
    doc = "A catalog contract to set up on this (the consumer's) cluster.",
    // As raw JSON: the `printcolumn(name = …)` form repeats keys, which
    // clippy's duplicated_attributes refuses.
    printcolumn = r#"{"name": "Contract", "type": "string", "jsonPath": ".status.contractID"}"#,
    printcolumn = r#"{"name": "Provider", "type": "string", "jsonPath": ".status.providerClusterID"}"#,
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "One of: contractID, or offerID and planID (the controller then reserves and buys) — both with catalogURL and credentialsSecretRef — or peeringCredentialsSecretRef (no catalog: peer with the cluster of that peering user).",
    extend(
        "oneOf" = [{"required": ["contractID"]}, {"required": ["offerID", "planID"]}, {"required": ["peeringCredentialsSecretRef"]}],
        "x-kubernetes-validations" = [
            {"rule": SOURCE_RULE, "message": SOURCE_MESSAGE},
            {"rule": CATALOG_RULE, "message": CATALOG_MESSAGE}
        ]
    ),
    transform = schema::plain
)]
pub struct PurchaseSpec {
    /// The catalog's base URL (with contractID or offerID and planID).
    #[serde(
        rename = "catalogURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = r"^https?://[^\s]+$"), length(max = 2048))]
    pub catalog_url: Option<String>,
    /// The Secret (in this namespace) and key holding the consumer's catalog bearer token (with contractID or offerID and planID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretKeyRef>,
    /// The Secret (in this namespace) and key holding the kubeconfig of a Liqo peering user on the remote cluster (`liqoctl generate peering-user`): peer with that cluster directly, without a catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peering_credentials_secret_ref: Option<SecretKeyRef>,
    /// With peeringCredentialsSecretRef: what the ResourceSlice asks for (a Kubernetes ResourceList).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "schema::resource_list")]
    pub resources: BTreeMap<String, IntOrString>,
    /// With peeringCredentialsSecretRef: the ResourceSlice's class (absent: Liqo's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub resource_slice_class: Option<String>,
    // A contract bought already …
    #[serde(
        rename = "contractID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 256))]
    pub contract_id: Option<String>,
    // … or an offer and plan to reserve and buy.
    #[serde(rename = "offerID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub offer_id: Option<String>,
    #[serde(rename = "planID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub plan_id: Option<String>,
    /// With offerID and planID: who buys, sent to the catalog when the controller reserves and buys, and shown on the contract (`boughtBy`), e.g. `market-autoscaler/<namespace>/<name>`. 1-128 characters without control or bidirectional formatting characters.
    // The catalog's own check (`check_bought_by`), so a Purchase the API
    // server admits is never refused by the catalog for it.
    #[serde(rename = "boughtBy", default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 128),
        regex(
            pattern = r"^[^\x00-\x1f\x7f-\x9f\x{061C}\x{200E}\x{200F}\x{202A}-\x{202E}\x{2066}-\x{2069}]+$"
        )
    )]
    pub bought_by: Option<String>,
    /// With offerID and planID: how long the contract runs, in seconds, sent to the catalog when the controller buys (`durationSeconds`); unset, the catalog's `--contract-duration`. The catalog refuses a length longer than that, and the Purchase then fails naming it.
    #[serde(
        rename = "durationSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("minimum" = 1))]
    pub duration_seconds: Option<u64>,
    /// Namespaces to offload to the provider (each gets the NamespaceOffloading "offloading").
    #[serde(default)]
    #[schemars(
        length(max = 256),
        inner(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub namespaces: Vec<String>,
    #[serde(default = "default_pod_strategy")]
    #[schemars(extend("enum" = ["Local", "Remote", "LocalAndRemote"], "x-default" = "LocalAndRemote"))]
    pub pod_offloading_strategy: String,
    #[serde(default = "default_mapping_strategy")]
    #[schemars(extend("enum" = ["EnforceSameName", "DefaultName"], "x-default" = "DefaultName"))]
    pub namespace_mapping_strategy: String,
    /// Liqo v1 automatic peering: set up Liqo's networking with the provider (true) or not (false: offloading works, but no pod-to-pod or service traffic between the clusters). Absent: the controller's --networking. The Purchase that makes the peering decides; later Purchases of the provider use it as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<bool>,
}

/// Exactly one source (the schema's `oneOf` lets `offerID` alone through
/// beside `peeringCredentialsSecretRef`).
const SOURCE_RULE: &str = "(has(self.contractID) ? 1 : 0) + (has(self.offerID) || has(self.planID) ? 1 : 0) + (has(self.peeringCredentialsSecretRef) ? 1 : 0) == 1";
const SOURCE_MESSAGE: &str =
    "set exactly one of contractID, offerID and planID, peeringCredentialsSecretRef";
/// A catalog source needs the catalog; a direct one has none.
const CATALOG_RULE: &str = "has(self.peeringCredentialsSecretRef) ? !has(self.catalogURL) && !has(self.credentialsSecretRef) : has(self.catalogURL) && has(self.credentialsSecretRef)";
const CATALOG_MESSAGE: &str = "contractID or offerID and planID need catalogURL and credentialsSecretRef; peeringCredentialsSecretRef takes neither";

fn default_pod_strategy() -> String {
    "LocalAndRemote".to_string()
}

fn default_mapping_strategy() -> String {
    "DefaultName".to_string()
}

/// The Purchase CRD, as `deploy/kubernetes/purchase-controller/crd.yaml`
/// holds it: kube's derived CRD, with the kind's own schema given the
/// [`schema::plain`] treatment its fields get (kube-derive accepts no
/// `schemars` attribute for the struct it generates): no `title`, and an
/// absent status is absent, never `null`.
pub fn crd() -> CustomResourceDefinition {
    schema::tidy(<Purchase as kube::CustomResourceExt>::crd())
}

/// One condition, as `metav1.Condition`.
pub use controller_core::crd::Condition;

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct PurchaseStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default)]
    pub observed_generation: i64,
    /// The contract this Purchase follows (recorded before buying, so a
    /// restart never buys twice).
    #[serde(
        rename = "contractID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub contract_id: Option<String>,
    #[serde(
        rename = "providerClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_cluster_id: Option<String>,
    /// The contract's resources and class, as last read from the catalog
    /// (the controller keeps working from them while the catalog is down).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_slice_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What the provider granted (Liqo v1: the ResourceSlice's status).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub granted: BTreeMap<String, String>,
    /// Liqo v1 without a peering: the command the operator runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peering_command: Option<String>,
    /// The Secret (in this namespace) holding the contract's kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret: Option<String>,
    /// Namespaces whose NamespaceOffloading this Purchase is an owner of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloaded_namespaces: Vec<String>,
    /// The state last reported to the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_state: Option<String>,
    #[serde(default)]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
}

impl PurchaseStatus {
    /// `self` as a JSON merge patch over `before`: fields that are gone are
    /// sent as `null`, which is how a merge patch removes them.
    pub fn merge_patch_over(
        &self,
        before: &PurchaseStatus,
    ) -> Result<serde_json::Value, serde_json::Error> {
        use serde_json::Value;
        let mut patch = serde_json::to_value(self)?;
        if let (Value::Object(old), Value::Object(new)) =
            (serde_json::to_value(before)?, &mut patch)
        {
            for key in old.keys() {
                if !new.contains_key(key) {
                    new.insert(key.clone(), Value::Null);
                }
            }
        }
        Ok(patch)
    }
}

impl Purchase {
    /// `namespace/name`, the owner mark written on what it creates.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    pub fn status(&self) -> PurchaseStatus {
        self.status.clone().unwrap_or_default()
    }

    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    pub fn has_finalizer(&self) -> bool {
        self.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_go_are_sent_as_null() {
        let before = PurchaseStatus {
            peering_command: Some("liqoctl peer".into()),
            phase: "Peering".into(),
            ..PurchaseStatus::default()
        };
        let after = PurchaseStatus {
            phase: "Ready".into(),
            ..PurchaseStatus::default()
        };
        let patch = after.merge_patch_over(&before).unwrap();
        assert_eq!(patch["peeringCommand"], serde_json::Value::Null);
        assert!(patch.as_object().unwrap().contains_key("peeringCommand"));
        assert_eq!(patch["phase"], "Ready");
    }
}
