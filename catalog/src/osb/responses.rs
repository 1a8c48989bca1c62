//! The shapes of the `/v2` answers, parameters and common responses, as
//! the OpenAPI document describes them. The handlers build their answers
//! with `json!`, so these types exist for the document only: the handlers'
//! `#[utoipa::path]` attributes name them, and [`super::openapi`] lists
//! them.

#![allow(dead_code)]

use utoipa::ToSchema;

use crate::http::documented_error;
use crate::providers::PeeringCredentials;

/// Every `/v2` error: an OSB error code where the spec has one, and a
/// human-readable description.
#[derive(ToSchema)]
pub struct OsbErrorBody {
    /// `AsyncRequired`, `ConcurrencyError`, `MaintenanceInfoConflict`,
    /// `PlanUnavailable` or `PurchaseEnded`; absent for plain errors.
    #[schema(nullable = false)]
    pub error: Option<String>,
    pub description: String,
}

/// An empty JSON object, as the spec answers finished synchronous work.
#[derive(ToSchema)]
pub struct OsbEmpty {}

/// The answer to work started in the background (202).
#[derive(ToSchema)]
pub struct OsbAsyncOperation {
    /// Pass it back as `operation` to `last_operation`.
    pub operation: String,
}

/// `GET /v2/catalog`.
#[derive(ToSchema)]
pub struct OsbCatalog {
    pub services: Vec<OsbService>,
}

/// An offer as an OSB service.
#[derive(ToSchema)]
pub struct OsbService {
    /// Stable id derived from the offer id.
    pub id: String,
    /// The offer id, CLI-friendly (unique in the catalog).
    pub name: String,
    pub description: String,
    /// `[<offer type>]`.
    pub tags: Vec<String>,
    pub bindable: bool,
    pub instances_retrievable: bool,
    pub bindings_retrievable: bool,
    pub allow_context_updates: bool,
    pub plan_updateable: bool,
    /// `displayName`, `providerDisplayName`, `clusterID`, `offerID`.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub plans: Vec<OsbPlan>,
}

/// A plan of an offer as an OSB plan.
#[derive(ToSchema)]
pub struct OsbPlan {
    /// Stable id derived from the offer id and plan key.
    pub id: String,
    pub name: String,
    pub description: String,
    /// True when the plan costs nothing.
    pub free: bool,
    pub bindable: bool,
    pub plan_updateable: bool,
    /// `displayName`, `planID` (the plan key), `costs` (OSB pricing
    /// convention), `bullets`, `resources`; `hosting` on service plans.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// Service plans: the JSON Schemas of their parameters (OSB v2.17
    /// `schemas`), when the provider declared them.
    #[schema(nullable = false)]
    pub schemas: Option<catalog_client::wire::PlanSchemas>,
}

/// `GET /v2/service_instances/{instance_id}`.
#[derive(ToSchema)]
pub struct OsbInstanceView {
    pub service_id: String,
    pub plan_id: String,
    /// The `parameters` it was provisioned with (`{}` if none).
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
}

/// State of the last operation.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum OsbOperationState {
    #[schema(rename = "in progress")]
    InProgress,
    Succeeded,
    Failed,
}

/// `GET .../last_operation`.
#[derive(ToSchema)]
pub struct OsbLastOperation {
    pub state: OsbOperationState,
    #[schema(nullable = false)]
    pub description: Option<String>,
}

/// A binding: for a capacity offer, the provider's peering credentials
/// (`clusterID`, `clusterName`, `authURL`, `token`, as
/// `PeeringCredentials`); for a service offer, the credentials its
/// provider reported (an object of strings).
#[derive(ToSchema)]
pub struct OsbBindingCredentials {
    #[schema(value_type = Object)]
    pub credentials: PeeringCredentials,
}

/// `GET .../service_bindings/{binding_id}`.
#[derive(ToSchema)]
pub struct OsbBindingView {
    /// As in [`OsbBindingCredentials`].
    #[schema(value_type = Object)]
    pub credentials: PeeringCredentials,
    /// The `parameters` it was bound with (`{}` if none).
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
}

/// The path of every instance route.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OsbInstancePath {
    /// Service instance id (chosen by the platform)
    #[param(value_type = crate::http::schemas::OsbId)]
    pub instance_id: String,
}

/// The path of every binding route.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OsbBindingPath {
    /// Service instance id (chosen by the platform)
    #[param(value_type = crate::http::schemas::OsbId)]
    pub instance_id: String,
    /// Service binding id (chosen by the platform)
    #[param(value_type = crate::http::schemas::OsbId)]
    pub binding_id: String,
}

/// What every `/v2` operation can answer, whatever it does: the version
/// check of [`super::guard`] and an unreachable store.
#[derive(utoipa::IntoResponses)]
pub enum OsbCommonResponses {
    #[response(
        status = 412,
        description = "`X-Broker-API-Version` missing or older than 2.14"
    )]
    Version(OsbErrorBody),
    #[response(status = 503, description = "Store unreachable")]
    Store(OsbErrorBody),
}

documented_error!(
    /// The 400 of an operation whose body (if any) is not checked beyond
    /// its form; provisioning and binding say more.
    OsbMalformed,
    400,
    OsbErrorBody,
    "A malformed request: header, query, path or body (named in `description`)"
);

documented_error!(
    /// The 403 of [`super::guard`]'s role check, for operations that have
    /// no owner to check besides.
    OsbNoRole,
    403,
    OsbErrorBody,
    "A bearer token without the consumer or admin role"
);

/// The headers every `/v2` request carries.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct OsbHeaders {
    /// The OSB version the platform speaks: 2.14 or later in 2.x (missing
    /// or older: 412; malformed: 400). This broker implements 2.17. An
    /// optional `X-Broker-API-Originating-Identity: <platform> <base64 JSON
    /// object>` header is checked (400 if malformed) and logged.
    #[param(
        rename = "X-Broker-API-Version",
        pattern = r"^2\.(1[4-9]|[2-9][0-9]|[1-9][0-9]{2,8})$",
        example = "2.17"
    )]
    pub version: String,
}
