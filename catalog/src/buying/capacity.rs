//! Per-plan caps: `GET /offer/{id}/plans/{plan}/capacity` (public) shows a
//! plan's cap and what is in use; `PUT` (the owning provider) sets or lifts
//! the cap with `{"maxPurchases": n}` or `{"maxPurchases": null}`.
//!
//! A cap counts reservations that have not expired plus purchases not
//! cancelled. Lowering a cap never revokes existing holdings; new
//! reservations wait until enough of them end.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};

use super::error::BuyError;
use super::Buying;
use crate::auth::{Caller, Role};
use crate::http::{parse_body, read_json_body, ErrorBody};
use crate::offers::Offer;

/// Largest cap accepted.
pub const MAX_CAP: u32 = 1_000_000;

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    /// None: no cap.
    pub max_purchases: Option<u32>,
    /// Reservations not expired plus purchases not cancelled.
    pub active: u64,
    /// Units left (None without a cap).
    pub available: Option<u64>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CapRequest {
    /// Required; `null` lifts the cap (so a missing field never does).
    #[serde(rename = "maxPurchases", default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, required = true, minimum = 0, maximum = 1_000_000)]
    pub max_purchases: Option<Option<u32>>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<u32>>, D::Error> {
    crate::http::optional_whole::<D, u32>(d).map(Some)
}

async fn plan_of(state: &Buying, offer_id: &str, plan_id: &str) -> Result<Offer, BuyError> {
    let offer = state
        .offers
        .get_offer(offer_id)
        .await?
        .ok_or_else(|| BuyError::not_found(format!("no offer {offer_id}")))?;
    if !offer.plans.contains_key(plan_id) {
        return Err(BuyError::not_found(format!(
            "offer {offer_id} has no plan {plan_id}"
        )));
    }
    Ok(offer)
}

async fn capacity(state: &Buying, offer_id: &str, plan_id: &str) -> Result<Capacity, BuyError> {
    let usage = state
        .store
        .plan_usage(offer_id, plan_id, crate::store::now())
        .await?;
    Ok(Capacity {
        offer_id: offer_id.to_string(),
        plan_id: plan_id.to_string(),
        max_purchases: usage.cap,
        active: usage.active,
        available: usage.cap.map(|c| u64::from(c).saturating_sub(usage.active)),
    })
}

/// A plan's cap and use.
#[utoipa::path(
    get, path = "/offer/{id}/plans/{plan}/capacity", tag = "buying", operation_id = "getPlanCapacity",
    params(
        ("id" = crate::http::schemas::Id, Path, description = "Offer id", example = "demo-general"),
        ("plan" = crate::http::schemas::Id, Path, description = "Plan key in the offer's `plans`", example = "small"),
    ),
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "The plan's cap and use", body = Capacity),
        (status = 404, description = "No such offer or plan", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(
    state: web::Data<Buying>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, BuyError> {
    let (offer_id, plan_id) = path.into_inner();
    plan_of(&state, &offer_id, &plan_id).await?;
    Ok(HttpResponse::Ok().json(capacity(&state, &offer_id, &plan_id).await?))
}

/// Set (or, with null, lift) the cap of one of the caller's plans.
#[utoipa::path(
    put, path = "/offer/{id}/plans/{plan}/capacity", tag = "buying", operation_id = "putPlanCapacity",
    params(
        ("id" = crate::http::schemas::Id, Path, description = "Offer id"),
        ("plan" = crate::http::schemas::Id, Path, description = "Plan key in the offer's `plans`"),
    ),
    request_body = CapRequest,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (own offers)"]))),
    responses(
        (status = 200, description = "The cap is set; the plan's cap and use", body = Capacity),
        crate::http::InvalidBody,
        (status = 403, description = "Not a provider, or the offer belongs to another provider", body = ErrorBody),
        (status = 404, description = "No such offer or plan", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, BuyError> {
    caller.require(Role::Provider)?;
    let (offer_id, plan_id) = path.into_inner();
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let r: CapRequest = parse_body(&body)?;
    let Some(cap) = r.max_purchases else {
        return Err(BuyError::bad_request(
            "maxPurchases",
            "is required (null lifts the cap)",
        ));
    };
    if cap.is_some_and(|c| c > MAX_CAP) {
        return Err(BuyError::bad_request(
            "maxPurchases",
            format!("must be at most {MAX_CAP}"),
        ));
    }
    let offer = plan_of(&state, &offer_id, &plan_id).await?;
    if offer.cluster_id != caller.cluster_id {
        return Err(BuyError::forbidden(
            "this offer belongs to another provider",
        ));
    }
    state.store.set_plan_cap(&offer_id, &plan_id, cap).await?;
    tracing::info!(offer = %offer_id, plan = %plan_id, cap = ?cap, "plan cap set");
    Ok(HttpResponse::Ok().json(capacity(&state, &offer_id, &plan_id).await?))
}
