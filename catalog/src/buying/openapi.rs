//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by the top-level `openapi` module. (The Open Service Broker
//! routes follow the OSB specification and are not described here.)

use utoipa::OpenApi;

use super::{capacity, http, model};
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
    ),
    components(schemas(
        model::Reservation,
        model::ReservationState,
        model::Channel,
        model::Contract,
        http::ReserveRequest,
        capacity::Capacity,
        capacity::CapRequest,
        ErrorBody,
    ))
)]
pub struct BuyingDoc;
