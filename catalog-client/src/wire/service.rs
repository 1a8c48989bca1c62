//! A provider's report of a service's state for one of its contracts
//! (`PUT /provider/contracts/{id}/service`): the body the catalog server
//! reads (`catalog/src/osb/provider_report.rs`) and the provider-side
//! controller sends.

use serde::{Deserialize, Serialize};

/// Where the provider is with the service bought by a contract, spelled as
/// OSB `last_operation` spells its states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ServiceState {
    /// Still being set up (or removed).
    #[serde(rename = "in progress")]
    InProgress,
    /// Set up (or, while deprovisioning, removed).
    #[serde(rename = "succeeded")]
    Succeeded,
    /// It could not be done; `description` says why.
    #[serde(rename = "failed")]
    Failed,
}

/// The body of `PUT /provider/contracts/{id}/service`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceReport {
    pub state: ServiceState,
    /// What a platform polling `last_operation` reads (at most 1024 bytes,
    /// no control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 1024,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*$",
            nullable = false
        )
    )]
    pub description: Option<String>,
}
