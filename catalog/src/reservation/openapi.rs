//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by [`crate::api::openapi::document`]. (The Open Service Broker
//! routes are in [`crate::osb::openapi`].)

use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

use super::{admin, capacity, http, model};
use crate::api::ErrorBody;

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
    pub peering: Option<model::PeeringCredentials>,
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
        admin::login,
        admin::consumer_token,
        admin::providers,
        admin::set_provider,
    ),
    components(schemas(
        model::Reservation,
        model::ReservationState,
        model::Channel,
        model::Contract,
        model::PeeringCredentials,
        PurchaseView,
        http::ReserveRequest,
        capacity::Capacity,
        capacity::CapRequest,
        admin::AdminLogin,
        admin::ConsumerTokenRequest,
        admin::AdminProvider,
        admin::ProviderUpdate,
        ErrorBody,
    ))
)]
pub struct BuyingDoc;
