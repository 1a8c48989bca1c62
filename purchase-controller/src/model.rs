//! The `Purchase` kind (`broker.liqo-broker.io/v1alpha1`, namespaced, status
//! subresource): what the consumer asks for, and what the controller
//! reports. Its schema is `deploy/kubernetes/purchase-controller/crd.yaml`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "broker.liqo-broker.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "Purchase";
pub const PLURAL: &str = "purchases";

/// The finalizer that makes deletion wait for the clean-up.
pub const FINALIZER: &str = "broker.liqo-broker.io/purchase-cleanup";

/// A Purchase as the API server holds it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Purchase {
    #[serde(rename = "apiVersion", default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PurchaseSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PurchaseStatus>,
}

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

fn kind() -> String {
    KIND.to_string()
}

impl Resource for Purchase {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND)
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A reference to one key of a Secret in the Purchase's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SecretKeyRef {
    pub name: String,
    pub key: String,
}

/// What the consumer asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseSpec {
    #[serde(rename = "catalogURL")]
    pub catalog_url: String,
    pub credentials_secret_ref: SecretKeyRef,
    /// A contract bought already …
    #[serde(
        rename = "contractID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub contract_id: Option<String>,
    /// … or an offer and plan to reserve and buy.
    #[serde(rename = "offerID", default, skip_serializing_if = "Option::is_none")]
    pub offer_id: Option<String>,
    #[serde(rename = "planID", default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default = "default_pod_strategy")]
    pub pod_offloading_strategy: String,
    #[serde(default = "default_mapping_strategy")]
    pub namespace_mapping_strategy: String,
}

fn default_pod_strategy() -> String {
    "LocalAndRemote".to_string()
}

fn default_mapping_strategy() -> String {
    "DefaultName".to_string()
}

/// One condition, as `metav1.Condition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub observed_generation: i64,
}

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
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
