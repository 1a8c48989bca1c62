//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by [`crate::api::openapi::document`]. (The Open Service Broker
//! routes follow the OSB specification and are not described here.)

use utoipa::OpenApi;

use super::{admin, capacity, http, model};
use crate::api::ErrorBody;

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
