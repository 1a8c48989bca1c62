//! The caller's service instances as the catalog lists them
//! (`GET /service-instances`, `GET /service-instances/{id}`; the server
//! side is `catalog/src/osb/listing.rs`): what was provisioned over the
//! Open Service Broker API, read from the catalog's own instance and
//! binding records, so a customer finds its deployments from any browser
//! or tool, and an admin or the selling provider sees them too. Never the
//! customer's peering kubeconfig nor a binding's credentials.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::offer::OfferKind;
use super::service::ServiceState;

/// Where an instance stands, from its records: what a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Being provisioned (bought; a service waits for its provider).
    Provisioning,
    /// Provisioned; no operation running on it.
    Ready,
    /// Provisioned, an update running.
    Updating,
    /// Provisioning failed (`lastOperation.description` says why); the
    /// platform may retry or delete it.
    Failed,
    /// Being deprovisioned (a service waits for its provider to remove it).
    Deprovisioning,
}

/// What an operation on an instance or a binding does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum OperationType {
    Provision,
    Update,
    Deprovision,
    Bind,
    Unbind,
}

/// The last operation on an instance or a binding, as OSB's
/// `last_operation` answers it, with what it was and when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceOperation {
    /// The `operation` of the OSB 202 answer (what `last_operation?operation=` names).
    pub operation: String,
    #[serde(rename = "type")]
    pub kind: OperationType,
    pub state: ServiceState,
    pub description: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: DateTime<Utc>,
}

/// Where a binding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum BindingState {
    /// Asked for; a service's provider has not made the credentials yet.
    Creating,
    /// Made: the platform fetches the credentials over OSB.
    Bound,
    /// The provider could not make it (`lastOperation.description`).
    Failed,
    /// Being removed by its provider.
    Deleting,
}

/// One binding of a listed instance (never its credentials).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceBinding {
    /// The binding id the platform chose.
    pub id: String,
    pub state: BindingState,
    /// The bind request's `parameters` (`{}` when none): for a service,
    /// at least `namespace` and `secretName`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: serde_json::Value,
    /// A service binding's last bind or unbind (none for a capacity
    /// plan's binding, made at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub last_operation: Option<InstanceOperation>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: DateTime<Utc>,
}

/// The Open Service Broker ids of an instance's service and plan: what
/// the platform sends back on deprovisioning and binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OsbPlanIds {
    #[serde(rename = "serviceID")]
    pub service_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
}

/// One service instance (an element of `GET /service-instances`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceInstance {
    /// The instance id the platform chose.
    pub id: String,
    /// Who provisioned it: a bearer token's subject, or `osb:<user>` for
    /// the broker's basic-auth platform account.
    pub owner: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    /// The plan's key in the offer (as contracts name it).
    #[serde(rename = "planID")]
    pub plan_id: String,
    pub osb: OsbPlanIds,
    pub kind: OfferKind,
    /// The selling provider's cluster ID.
    #[serde(rename = "clusterID", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub cluster_id: Option<String>,
    /// The contract (purchase) this instance is, once bought.
    #[serde(
        rename = "contractID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub contract_id: Option<String>,
    /// The provisioning's (or last update's) `parameters`; `{}` when none.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: serde_json::Value,
    pub state: InstanceState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub last_operation: Option<InstanceOperation>,
    pub bindings: Vec<InstanceBinding>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: DateTime<Utc>,
}
