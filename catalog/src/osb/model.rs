//! Open Service Broker instances and bindings as the catalog stores them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What an asynchronous operation is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperationKind {
    Provision,
    Deprovision,
    /// Binding a service instance of a service offer (asynchronous).
    Bind,
    /// Unbinding one (asynchronous).
    Unbind,
    /// Updating a service instance's parameters or plan (asynchronous:
    /// its provider renders the objects again, [`super::update`]).
    Update,
}

/// `last_operation` states, spelled as the OSB spec spells them: the
/// states a provider reports for a service, declared once in
/// `catalog-client`.
pub use catalog_client::wire::service::ServiceState as OperationState;

use catalog_client::wire::PendingBindingState;

/// The last operation on an instance or a service binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// The `operation` handed to the platform in the 202 answer.
    pub id: String,
    pub kind: OperationKind,
    pub state: OperationState,
    pub description: String,
    pub started_at: DateTime<Utc>,
}

/// A service instance: a plan provisioned as a purchase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsbInstance {
    pub id: String,
    /// The caller that provisioned it (token `sub`, or `osb:<user>` for the
    /// broker's basic-auth platform account).
    pub owner: String,
    #[serde(rename = "serviceID")]
    pub service_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    pub plan_key: String,
    /// Digest of the attributes that make two provision requests identical.
    pub request_digest: String,
    /// The request's `parameters`, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
    /// The purchase this instance is, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// True once provisioning succeeded.
    pub provisioned: bool,
    /// Provisioned from a service offer: only asynchronously, and done
    /// when its provider reports the service's state
    /// (`PUT /provider/contracts/{id}/service`).
    #[serde(default)]
    pub service: bool,
    /// The selling provider's cluster ID (the one that may report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The running operation waits for the provider's report, not for a
    /// worker of this process, so it never goes stale.
    #[serde(default)]
    pub awaiting_provider: bool,
    /// The customer's peering kubeconfig (`context.peering.kubeconfig` of
    /// a service plan's provisioning), sealed ([`super::sealed`]): only
    /// the selling provider reads it, at
    /// `GET /provider/contracts/{id}/customer-peering`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_peering: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    /// Bumped by every write; writes are conditional on it.
    pub revision: u64,
    pub created_at: DateTime<Utc>,
    /// The contract the instance's objects on its provider's cluster are
    /// named after (its first), once a plan change bought another
    /// ([`super::update`]); None: `reservation_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_contract_id: Option<String>,
    /// What a running update replaces, put back if its provider fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<PendingUpdate>,
}

/// The instance as it was before the update under way: restored when the
/// provider reports the update `failed`; on `succeeded`, a replaced
/// contract is cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingUpdate {
    #[serde(rename = "planID")]
    pub plan_id: String,
    pub plan_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
    /// The contract a plan change replaces (None: parameters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_contract_id: Option<String>,
}

impl OsbInstance {
    /// The operation still running on the instance, if any: while it runs,
    /// other requests on the instance must wait (`ConcurrencyError`).
    pub fn running(&self) -> Option<&Operation> {
        self.operation
            .as_ref()
            .filter(|op| op.state == OperationState::InProgress)
    }
}

/// A request's `parameters` as stored (JSON text), so records need no
/// schema of their own for what platforms send.
pub fn stored_parameters(parameters: &Option<Value>) -> Option<String> {
    parameters.as_ref().map(Value::to_string)
}

/// Stored `parameters` as they are answered: `{}` when none were sent
/// (the spec's "no parameters"), and for text that no longer parses.
pub fn answered_parameters(stored: Option<&str>) -> Value {
    stored
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}))
}

/// A service binding: for a capacity offer, the release of the provider's
/// peering credentials to one application of the instance; for a service
/// offer, credentials its provider makes (asynchronously).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsbBinding {
    pub id: String,
    #[serde(rename = "instanceID")]
    pub instance_id: String,
    pub owner: String,
    pub request_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
    pub created_at: DateTime<Utc>,
    /// A binding of a service instance: made and removed by its provider
    /// (`GET/PUT /provider/contracts/{id}/bindings...`).
    #[serde(default)]
    pub service: bool,
    /// A service binding's last operation (bind or unbind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    /// The credentials its provider reported, as JSON text, sealed
    /// ([`super::sealed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// Bumped by every write; replacements are conditional on it.
    #[serde(default)]
    pub revision: u64,
}

impl OsbBinding {
    /// The operation still running on the binding, if any.
    pub fn running(&self) -> Option<&Operation> {
        self.operation
            .as_ref()
            .filter(|op| op.state == OperationState::InProgress)
    }

    /// What the provider still has to do for it: a running bind or
    /// unbind; None once settled.
    pub fn pending(&self) -> Option<PendingBindingState> {
        match self.running()?.kind {
            OperationKind::Bind => Some(PendingBindingState::Creating),
            OperationKind::Unbind => Some(PendingBindingState::Deleting),
            OperationKind::Provision | OperationKind::Deprovision | OperationKind::Update => None,
        }
    }
}
