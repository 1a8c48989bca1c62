//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by the top-level `openapi` module. (The Open Service Broker
//! routes are described by the `osb` feature's own `openapi` module.)

use utoipa::OpenApi;

use super::{capacity, contracts, http, model};
use crate::http::ErrorBody;

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
        contracts::http::list,
        contracts::http::get,
        contracts::http::put_state,
        contracts::http::extend,
        contracts::http::attach_peering,
    ),
    components(schemas(
        model::Reservation,
        model::ReservationState,
        model::Channel,
        model::PurchaseWithPeering,
        http::PurchaseView,
        http::ReserveRequest,
        http::PurchaseRequest,
        http::PurchaseAnswer,
        contracts::model::Contract,
        model::ContractTerms,
        model::ContractState,
        contracts::model::Ended,
        contracts::model::ContractCredentials,
        contracts::model::V1Credentials,
        contracts::model::ContractPeering,
        contracts::peering::PeeringState,
        contracts::http::AttachRequest,
        contracts::http::ExtendBody,
        crate::http::schemas::StateReport,
        capacity::Capacity,
        capacity::CapRequest,
        ErrorBody,
    ))
)]
pub struct BuyingDoc;
