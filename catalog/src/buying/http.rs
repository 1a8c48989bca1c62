//! The buying REST endpoints:
//!
//! | route | who | what |
//! |---|---|---|
//! | `POST /reservations` | consumer | reserve `{offerID, planID, ttlSeconds?}` → 201 |
//! | `GET /reservations` | consumer, admin | own records (admin: all, `?consumer=`) |
//! | `GET /reservations/{id}` | owner, admin | one record |
//! | `DELETE /reservations/{id}` | owner, admin | release → 200 |
//! | `POST /reservations/{id}/purchase` | owner | the contract → 201 (410 if expired) |
//! | `GET /purchases` | consumer, admin | purchased and cancelled records |
//! | `GET /purchases/{id}` | owner (with credentials), admin (without) | one purchase |
//! | `DELETE /purchases/{id}` | owner, admin | cancel → 200 |

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::error::BuyError;
use super::model::{Channel, Contract, Reservation, ReservationState, Transition};
use super::service::{self, Buyer};
use super::Buying;
use crate::auth::Caller;
use crate::http::{parse_body, read_json_body, validate_id, ErrorBody};

/// `POST /reservations` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    /// The plan's key in the offer's `plans`.
    #[serde(rename = "planID")]
    pub plan_id: String,
    /// Hold the unit this long (default and maximum: the catalog's
    /// `--reservation-ttl`).
    #[serde(rename = "ttlSeconds", default)]
    pub ttl_seconds: Option<u64>,
}

/// Reserve one unit of a plan.
#[utoipa::path(
    post, path = "/reservations", tag = "buying",
    request_body = ReserveRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Reserved", body = Reservation),
        (status = 400, description = "Invalid body; `field` names the bad field", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "Not a consumer, or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such offer or plan", body = ErrorBody),
        (status = 409, description = "The plan is sold out (its cap is reached)", body = ErrorBody),
    )
)]
pub async fn create(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let r: ReserveRequest = parse_body(&body)?;
    validate_id("offerID", &r.offer_id)?;
    validate_id("planID", &r.plan_id)?;
    let ttl = service::lifetime(&state, r.ttl_seconds)?;
    let reservation = service::reserve(
        &state,
        &buyer.subject,
        &r.offer_id,
        &r.plan_id,
        ttl,
        Channel::Rest,
    )
    .await?;
    Ok(HttpResponse::Created()
        .insert_header((
            header::LOCATION,
            format!("/reservations/{}", reservation.id),
        ))
        .json(reservation))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only records in this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Admins only: one consumer's records.
    #[serde(default)]
    pub consumer: Option<String>,
}

fn query(req: &HttpRequest) -> Result<ListQuery, BuyError> {
    serde_urlencoded::from_str(req.query_string())
        .map_err(|e| BuyError::bad_request("query", e.to_string()))
}

async fn listed(
    state: &Buying,
    caller: &Caller,
    req: &HttpRequest,
    keep: impl Fn(&Reservation) -> bool,
) -> Result<Vec<Reservation>, BuyError> {
    let buyer = Buyer::from_caller(caller)?;
    let q = query(req)?;
    if q.consumer.is_some() && !buyer.admin {
        return Err(BuyError::forbidden(
            "consumer: only admins list other consumers' records",
        ));
    }
    let wanted = match &q.state {
        Some(s) => Some(ReservationState::parse(s).ok_or_else(|| {
            BuyError::bad_request(
                "state",
                "must be reserved, purchased, released, expired or cancelled",
            )
        })?),
        None => None,
    };
    Ok(service::list(state, &buyer, q.consumer.as_deref())
        .await?
        .into_iter()
        .filter(|r| wanted.is_none_or(|w| r.state == w) && keep(r))
        .collect())
}

/// The caller's reservations and purchases (admins: everyone's).
#[utoipa::path(
    get, path = "/reservations", tag = "buying",
    params(
        ("state" = Option<String>, Query, description = "reserved, purchased, released, expired or cancelled"),
        ("consumer" = Option<String>, Query, description = "Admins only: one consumer's records"),
    ),
    security(("bearer" = [])),
    responses((status = 200, body = Vec<Reservation>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody))
)]
pub async fn list(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, BuyError> {
    Ok(HttpResponse::Ok().json(listed(&state, &caller, &req, |_| true).await?))
}

/// One reservation (404 unless it is the caller's, or the caller is an admin).
#[utoipa::path(
    get, path = "/reservations/{id}", tag = "buying",
    params(("id" = String, Path)),
    security(("bearer" = [])),
    responses((status = 200, body = Reservation), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn get(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    Ok(HttpResponse::Ok().json(service::lookup(&state, &id, &buyer).await?))
}

/// Release a reservation before it expires.
#[utoipa::path(
    delete, path = "/reservations/{id}", tag = "buying",
    params(("id" = String, Path)),
    security(("bearer" = [])),
    responses((status = 200, description = "Released", body = Reservation), (status = 404, body = ErrorBody), (status = 409, description = "Not a live reservation", body = ErrorBody))
)]
pub async fn release(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    Ok(HttpResponse::Ok().json(service::end(&state, &id, &buyer, Transition::Release).await?))
}

/// Purchase a reservation: the contract, with the provider's peering
/// credentials (the only way they leave the catalog).
#[utoipa::path(
    post, path = "/reservations/{id}/purchase", tag = "buying",
    params(("id" = String, Path)),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Purchased", body = Contract),
        (status = 403, description = "The provider is disabled", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "Already purchased or released", body = ErrorBody),
        (status = 410, description = "The reservation expired", body = ErrorBody),
    )
)]
pub async fn purchase(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    // Only the buyer receives the credentials, so only the buyer purchases.
    let buyer = Buyer {
        admin: false,
        ..buyer
    };
    let contract = service::purchase(&state, &id, &buyer).await?;
    Ok(HttpResponse::Created()
        .insert_header((
            header::LOCATION,
            format!("/purchases/{}", contract.purchase.id),
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(contract))
}

fn is_purchase(r: &Reservation) -> bool {
    r.purchased_at.is_some()
}

/// The caller's purchases (admins: everyone's), without credentials.
#[utoipa::path(
    get, path = "/purchases", tag = "buying",
    security(("bearer" = [])),
    responses((status = 200, body = Vec<Reservation>), (status = 401, body = ErrorBody))
)]
pub async fn list_purchases(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, BuyError> {
    Ok(HttpResponse::Ok().json(listed(&state, &caller, &req, is_purchase).await?))
}

/// One purchase: the contract for its buyer, the record for admins.
#[utoipa::path(
    get, path = "/purchases/{id}", tag = "buying",
    params(("id" = String, Path)),
    security(("bearer" = [])),
    responses((status = 200, body = Contract), (status = 404, body = ErrorBody))
)]
pub async fn get_purchase(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    let r = service::lookup(&state, &id, &buyer).await?;
    if !is_purchase(&r) {
        return Err(BuyError::not_found(format!("no purchase {id}")));
    }
    if r.consumer != buyer.subject || r.state != ReservationState::Purchased {
        // Admins (and ended purchases) get the record without credentials.
        return Ok(HttpResponse::Ok().json(r));
    }
    let peering = service::credentials(&state, &r.cluster_id).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(super::model::Contract {
            purchase: r,
            peering,
        }))
}

/// Cancel a purchase, freeing its unit.
#[utoipa::path(
    delete, path = "/purchases/{id}", tag = "buying",
    params(("id" = String, Path)),
    security(("bearer" = [])),
    responses((status = 200, description = "Cancelled", body = Reservation), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody))
)]
pub async fn cancel(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    Ok(HttpResponse::Ok().json(service::end(&state, &id, &buyer, Transition::Cancel).await?))
}
