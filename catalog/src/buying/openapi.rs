//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by the top-level `openapi` module. (The Open Service Broker
//! routes are described by the `osb` feature's own `openapi` module.)

use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

use super::{capacity, contract, contracts_http, http, model};
use crate::http::ErrorBody;

/// What `GET /purchases/{id}` answers: the purchase record, plus `peering`
/// (the provider's credentials) for its buyer while it is `purchased`; an
/// admin, or the buyer of a cancelled purchase, gets the record alone.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseView {
    #[serde(flatten)]
    pub purchase: model::Reservation,
    /// Present only for the buyer, while the purchase is `purchased`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub peering: Option<crate::providers::PeeringCredentials>,
}

#[derive(OpenApi)]
#[openapi(
    paths(
        http::create,
        http::list,
        http::get,
        http::release,
        http::purchase,
        http::list_purchases,
        http::get_purchase,
        http::cancel,
        capacity::get,
        capacity::put,
        contracts_http::list,
        contracts_http::get,
        contracts_http::put_state,
    ),
    components(schemas(
        model::Reservation,
        model::ReservationState,
        model::Channel,
        model::PurchaseWithPeering,
        PurchaseView,
        http::ReserveRequest,
        http::PurchaseRequest,
        http::PurchaseAnswer,
        contract::Contract,
        contract::ContractTerms,
        contract::ContractState,
        contract::Ended,
        contract::ContractCredentials,
        contract::V1Credentials,
        crate::http::schemas::StateReport,
        capacity::Capacity,
        capacity::CapRequest,
        ErrorBody,
    ))
)]
pub struct BuyingDoc;
