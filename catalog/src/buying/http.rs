//! The buying REST endpoints:
//!
//! | route | who | what |
//! |---|---|---|
//! | `POST /reservations` | consumer | reserve `{offerID, planID, ttlSeconds?, boughtBy?}` → 201 |
//! | `GET /reservations` | consumer, admin | own records (admin: all, `?consumer=`) |
//! | `GET /reservations/{id}` | owner, admin | one record |
//! | `DELETE /reservations/{id}` | owner, admin | release → 200 |
//! | `POST /reservations/{id}/purchase` | owner | `{consumerClusterID?, durationSeconds?, boughtBy?}` (the cluster ID required from a Liqo v1 provider) → the contract on the terms reserved, with credentials → 201 (409 if the plan changed since, 410 if expired) |
//! | `GET /purchases` | consumer, admin | purchased and cancelled records |
//! | `GET /purchases/{id}` | owner (with credentials), admin (without) | one purchase |
//! | `DELETE /purchases/{id}` | owner, admin | cancel → 200 |

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::contracts::model::{self as contract, Contract, Order};
use super::error::BuyError;
use super::model::{Channel, PurchaseWithPeering, Reservation, ReservationState, Transition};
use super::service::{self, Buyer};
use super::Buying;
use crate::auth::Caller;
use crate::http::{parse_body, read_json_body, validate_id, ErrorBody};

/// `POST /reservations` body. (The example names a plan of the `--demo`
/// catalog.)
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"offerID": "demo-general", "planID": "small", "ttlSeconds": 120}))]
pub struct ReserveRequest {
    #[serde(rename = "offerID")]
    #[schema(value_type = crate::http::schemas::Id)]
    pub offer_id: String,
    /// The plan's key in the offer's `plans`.
    #[serde(rename = "planID")]
    #[schema(value_type = crate::http::schemas::Id)]
    pub plan_id: String,
    /// Hold the unit this long, in seconds (default and maximum: the
    /// catalog's `--reservation-ttl`, 300 unless configured otherwise).
    #[serde(
        rename = "ttlSeconds",
        default,
        deserialize_with = "crate::http::optional_whole"
    )]
    #[schema(minimum = 1, maximum = 300)]
    pub ttl_seconds: Option<u64>,
    /// Who buys, kept with the record and served on its contract
    /// (`boughtBy`), e.g. `market-autoscaler/team-a/web`: 1 to 128
    /// characters without control or bidirectional formatting characters.
    #[serde(rename = "boughtBy", default)]
    #[schema(value_type = Option<crate::http::schemas::BoughtBy>)]
    pub bought_by: Option<String>,
}

/// Reserve one unit of a plan.
#[utoipa::path(
    post, path = "/reservations", tag = "buying", operation_id = "createReservation",
    request_body = ReserveRequest,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer", "admin"]))),
    responses(
        (status = 201, description = "Reserved", body = Reservation,
            headers(("Location" = String, description = "`/reservations/{id}`")),
            links(
                ("GetReservation" = (operation_id = "getReservation", parameters(("id" = "$response.body#/id")))),
                ("PurchaseReservation" = (operation_id = "purchaseReservation", parameters(("id" = "$response.body#/id")))),
                ("ReleaseReservation" = (operation_id = "releaseReservation", parameters(("id" = "$response.body#/id")))),
            )),
        crate::http::InvalidBody,
        (status = 403, description = "Not a consumer or admin, or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such offer or plan", body = ErrorBody),
        (status = 409, description = "The plan is sold out (its cap is reached)", body = ErrorBody),
        crate::http::StoreUnreachable,
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
    if let Some(by) = &r.bought_by {
        super::contracts::model::check_bought_by(by)?;
    }
    let ttl = service::lifetime(&state, r.ttl_seconds)?;
    let reservation = service::reserve(
        &state,
        &buyer.subject,
        &r.offer_id,
        &r.plan_id,
        ttl,
        Channel::Rest,
        r.bought_by,
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
    // A consumer naming itself asks for what it gets anyway.
    if q.consumer.as_deref().is_some_and(|c| c != buyer.subject) && !buyer.admin {
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
    get, path = "/reservations", tag = "buying", operation_id = "listReservations",
    params(
        ("state" = Option<ReservationState>, Query, description = "Only records in this state"),
        ("consumer" = Option<String>, Query, description = "Admins only (403 for others): one consumer's records"),
    ),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer", "admin"]))),
    responses(
        (status = 200, description = "The caller's records (admins: everyone's)", body = Vec<Reservation>),
        (status = 400, description = "A bad or unknown query parameter, named in `field`", body = ErrorBody),
        (status = 403, description = "Not a consumer or admin, or `consumer` given by a non-admin", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
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
    get, path = "/reservations/{id}", tag = "buying", operation_id = "getReservation",
    params(("id" = String, Path, description = "Reservation id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own records)", "admin"]))),
    responses(
        (status = 200, description = "The record, in whatever state it is now", body = Reservation),
        (status = 403, description = "Not a consumer or admin", body = ErrorBody),
        (status = 404, description = "No such record, or another consumer's", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
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
///
/// The record is kept (state `released`), so `GET /reservations/{id}` still
/// answers it afterwards.
#[utoipa::path(
    delete, path = "/reservations/{id}", tag = "buying", operation_id = "releaseReservation",
    params(("id" = String, Path, description = "Reservation id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own records)", "admin"]))),
    responses(
        (status = 200, description = "Released", body = Reservation),
        (status = 403, description = "Not a consumer or admin", body = ErrorBody),
        (status = 404, description = "No such record, or another consumer's", body = ErrorBody),
        (status = 409, description = "Not a live reservation (purchased or ended)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn release(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    Ok(HttpResponse::Ok().json(service::end(&state, &id, &buyer, Transition::Release).await?))
}

/// `POST /reservations/{id}/purchase` body (optional: no body, `null` or
/// `{}` buys with the defaults).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"consumerClusterID": "consumer-1", "durationSeconds": 3600}))]
pub struct PurchaseRequest {
    /// The consumer's Liqo cluster ID; never changed once set. Required
    /// when the provider peers with Liqo v1 (a peering user serves exactly
    /// one consumer cluster), then a DNS-1123 label as Liqo v1 requires
    /// (lower-case letters, digits and hyphens, at most 63); otherwise it
    /// may also be reported later with `PUT /contracts/{id}/state`.
    #[serde(rename = "consumerClusterID", default)]
    #[schema(value_type = Option<crate::http::schemas::Id>)]
    pub consumer_cluster_id: Option<String>,
    /// How long the contract lasts, in seconds (default and maximum: the
    /// catalog's `--contract-duration`, 30 days unless configured otherwise).
    #[serde(
        rename = "durationSeconds",
        default,
        deserialize_with = "crate::http::optional_whole"
    )]
    #[schema(minimum = 1, maximum = 2592000)]
    pub duration_seconds: Option<u64>,
    /// Who buys (as on `POST /reservations`); replaces what the
    /// reservation said.
    #[serde(rename = "boughtBy", default)]
    #[schema(value_type = Option<crate::http::schemas::BoughtBy>)]
    pub bought_by: Option<String>,
}

/// What a purchase answers: the contract with its credentials, plus the
/// purchase fields older clients read (`channel`, `createdAt`) and
/// `peering` (the v0 credentials, when the provider peers with Liqo v0).
/// Where the names meet, the contract's meaning wins: `state` is the
/// contract's (`pending`), `expiresAt` its expiry.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseAnswer {
    #[serde(flatten)]
    pub contract: Contract,
    pub channel: Channel,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub peering: Option<crate::providers::PeeringCredentials>,
}

/// Purchase a reservation: the contract, with the provider's peering
/// credentials (the only way they leave the catalog).
///
/// Only the consumer that reserved purchases (an admin's token purchases
/// only the admin's own reservations). The contract lasts
/// `durationSeconds` (default and maximum `--contract-duration`), then
/// expires and frees its unit.
///
/// The contract gets the plan's terms (cost and resources) exactly as they
/// were reserved. If the provider changed them since, nothing is bought:
/// 409 names each change (`cost 1.0 → 100.0, cpu 4 → 1`), and the buyer
/// may release the reservation and reserve the new terms. Buying the old
/// terms anyway would hold the provider to what it no longer offers;
/// buying today's plan at the reserved price would give the buyer less
/// than it reserved, without a word.
#[utoipa::path(
    post, path = "/reservations/{id}/purchase", tag = "buying", operation_id = "purchaseReservation",
    params(("id" = String, Path, description = "Reservation id")),
    request_body(content = Option<PurchaseRequest>, description = "Optional"),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own records)", "admin (own records)"]))),
    responses(
        (status = 201, description = "Purchased: the contract, with the provider's peering credentials", body = PurchaseAnswer,
            headers(
                ("Location" = String, description = "`/purchases/{id}`"),
                ("Cache-Control" = String, description = "`no-store`"),
            ),
            links(
                ("GetPurchase" = (operation_id = "getPurchase", parameters(("id" = "$response.body#/id")))),
                ("CancelPurchase" = (operation_id = "cancelPurchase", parameters(("id" = "$response.body#/id")))),
                ("GetContract" = (operation_id = "getContract", parameters(("id" = "$response.body#/id")))),
                ("ReportContractState" = (operation_id = "reportContractState", parameters(("id" = "$response.body#/id")))),
            )),
        (status = 400, description = "Invalid body; `field` names the bad field, e.g. a missing `consumerClusterID` for a Liqo v1 provider (nothing bought)", body = ErrorBody),
        (status = 403, description = "Not a consumer or admin, or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such reservation, or another consumer's", body = ErrorBody),
        (status = 409, description = "Already purchased or released, the `consumerClusterID` is held with this Liqo v1 provider by another consumer (a live contract or a purchase under way; taken over once those end), the provider's peering credentials are not on file, or the provider changed the plan's cost or resources since it was reserved (the message names each change; nothing is bought)", body = ErrorBody),
        (status = 410, description = "The reservation expired", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn purchase(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    // Only the buyer receives the credentials, so only the buyer purchases.
    let buyer = Buyer {
        admin: false,
        ..buyer
    };
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    // No body, or `null`: the defaults.
    let text = body.trim_ascii();
    let asked: PurchaseRequest = if text.is_empty() || text == b"null" {
        PurchaseRequest::default()
    } else {
        crate::http::parse_object(&body)?
    };
    if let Some(cid) = &asked.consumer_cluster_id {
        contract::check_cluster_id(cid)?;
    }
    if let Some(by) = &asked.bought_by {
        contract::check_bought_by(by)?;
    }
    contract::lifetime(state.contract_duration, asked.duration_seconds)?;
    let order = Order {
        consumer_cluster_id: asked.consumer_cluster_id,
        duration_seconds: asked.duration_seconds,
    };
    let r = service::lookup(&state, &id, &buyer).await?;
    let now = crate::store::now();
    let terms = super::contracts::service::terms(
        &state,
        &r,
        &order,
        super::contracts::service::Peers::ConsumerWithProvider,
        now,
    )
    .await?;
    // Checked first: a purchase with nothing to hand over, now or once the
    // provider attaches it, does not happen.
    super::contracts::service::ensure_sellable(&state, &r.cluster_id).await?;
    // Before the purchase is written: the ID is the buyer's, or nothing is
    // bought (issue 41 F2).
    let claimed = super::contracts::service::claim_cluster_id(&state, &r, &terms.0, now).await?;
    let bought = match service::purchase(&state, &id, &buyer, Some(terms), asked.bought_by).await {
        Ok(bought) => bought,
        Err(e) => {
            if let Some(cid) = &claimed {
                super::contracts::service::unclaim(&state, &r, cid).await;
            }
            return Err(e);
        }
    };
    let credentials = super::contracts::service::credentials(&state, &bought).await?;
    let mut c = super::contracts::service::view(&state, &bought, now)
        .ok_or_else(|| BuyError::internal("a purchase without its contract"))?;
    super::contracts::service::promised_only_what_is_released(&mut c, &credentials);
    let peering = credentials.v0.clone();
    c.credentials = Some(credentials);
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/purchases/{}", bought.id)))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(PurchaseAnswer {
            contract: c,
            channel: bought.channel,
            created_at: bought.created_at,
            peering,
        }))
}

fn is_purchase(r: &Reservation) -> bool {
    r.purchased_at.is_some()
}

/// The caller's purchases (admins: everyone's), without credentials.
#[utoipa::path(
    get, path = "/purchases", tag = "buying", operation_id = "listPurchases",
    params(
        ("state" = Option<ReservationState>, Query, description = "Only records in this state (`purchased` or `cancelled` ever match)"),
        ("consumer" = Option<String>, Query, description = "Admins only (403 for others): one consumer's records"),
    ),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer", "admin"]))),
    responses(
        (status = 200, description = "Records that were purchased (now `purchased` or `cancelled`)", body = Vec<Reservation>),
        (status = 400, description = "A bad or unknown query parameter, named in `field`", body = ErrorBody),
        (status = 403, description = "Not a consumer or admin, or `consumer` given by a non-admin", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn list_purchases(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, BuyError> {
    Ok(HttpResponse::Ok().json(listed(&state, &caller, &req, is_purchase).await?))
}

/// One purchase: for its buyer while it is `purchased`, the contract with
/// the provider's peering credentials; otherwise (an admin's view, or a
/// cancelled purchase) the record without `peering`.
#[utoipa::path(
    get, path = "/purchases/{id}", tag = "buying", operation_id = "getPurchase",
    params(("id" = String, Path, description = "Purchase (reservation) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own records, with credentials)", "admin (without credentials)"]))),
    responses(
        (status = 200, description = "The purchase; `peering` only for its buyer while purchased", body = PurchaseView),
        (status = 403, description = "Not a consumer or admin", body = ErrorBody),
        (status = 404, description = "No such purchase, or another consumer's", body = ErrorBody),
        (status = 409, description = "The provider's peering credentials are not on file (it must authenticate again)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
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
    let Some(peering) = state.providers.v0_credentials(&r.cluster_id).await? else {
        // A provider without Liqo v0: its credentials are in GET /contracts/{id}.
        return Ok(HttpResponse::Ok().json(r));
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(PurchaseWithPeering {
            purchase: r,
            peering,
        }))
}

/// Cancel a purchase, freeing its unit.
///
/// The record is kept (state `cancelled`), so `GET /purchases/{id}` still
/// answers it afterwards.
#[utoipa::path(
    delete, path = "/purchases/{id}", tag = "buying", operation_id = "cancelPurchase",
    params(("id" = String, Path, description = "Purchase (reservation) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own records)", "admin"]))),
    responses(
        (status = 200, description = "Cancelled", body = Reservation),
        (status = 403, description = "Not a consumer or admin", body = ErrorBody),
        (status = 404, description = "No such record, or another consumer's", body = ErrorBody),
        (status = 409, description = "Not a live purchase (not purchased, or already cancelled)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn cancel(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let buyer = Buyer::from_caller(&caller)?;
    Ok(HttpResponse::Ok().json(service::end(&state, &id, &buyer, Transition::Cancel).await?))
}

/// What `GET /purchases/{id}` answers: the purchase record, plus `peering`
/// (the provider's credentials) for its buyer while it is `purchased`; an
/// admin, or the buyer of a cancelled purchase, gets the record alone.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseView {
    #[serde(flatten)]
    pub purchase: Reservation,
    /// Present only for the buyer, while the purchase is `purchased`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub peering: Option<crate::providers::PeeringCredentials>,
}

// The request bodies stay the server's own types (they read numbers with
// `optional_whole` and document server-side id schemas); these tests hold
// them to the clients' `catalog_client::wire` types field for field.
#[cfg(test)]
mod tests {
    use catalog_client::wire;

    use super::*;

    /// What a client sends with every field set reads back whole: a field
    /// renamed on either side is an unknown field here (`deny_unknown_fields`)
    /// or a value lost.
    #[test]
    fn the_clients_request_bodies_read_field_for_field() {
        let sent = wire::ReserveRequest {
            offer_id: "o".into(),
            plan_id: "p".into(),
            ttl_seconds: Some(60),
            bought_by: Some("market-autoscaler/a/b".into()),
        };
        let ReserveRequest {
            offer_id,
            plan_id,
            ttl_seconds,
            bought_by,
        } = serde_json::from_value(serde_json::to_value(&sent).unwrap()).unwrap();
        assert_eq!(
            (offer_id, plan_id, ttl_seconds, bought_by),
            (
                sent.offer_id,
                sent.plan_id,
                sent.ttl_seconds,
                sent.bought_by
            )
        );

        let sent = wire::PurchaseRequest {
            consumer_cluster_id: Some("c1".into()),
            duration_seconds: Some(3600),
            bought_by: Some("someone".into()),
        };
        let PurchaseRequest {
            consumer_cluster_id,
            duration_seconds,
            bought_by,
        } = serde_json::from_value(serde_json::to_value(&sent).unwrap()).unwrap();
        assert_eq!(
            (consumer_cluster_id, duration_seconds, bought_by),
            (
                sent.consumer_cluster_id,
                sent.duration_seconds,
                sent.bought_by
            )
        );
        let defaults: PurchaseRequest =
            serde_json::from_value(serde_json::to_value(wire::PurchaseRequest::default()).unwrap())
                .unwrap();
        assert_eq!(
            (defaults.consumer_cluster_id, defaults.duration_seconds),
            (None, None)
        );
    }
}
