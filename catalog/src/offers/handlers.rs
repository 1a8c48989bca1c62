//! `GET /offers`, `GET|POST|DELETE /offer/{id}`.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};

use super::{Offer, OfferFilter, OfferInput, OfferSpec, Offers, ProviderRef};
use crate::auth::{Caller, Role};
use crate::http::{read_json_body, validate_id, ApiError, ErrorBody};
use crate::store::StoreError;

/// The `GET /offers` filters as OpenAPI parameters (also taken by
/// `/subscribe`). Parsing is [`OfferFilter::from_pairs`]: the resource in
/// `min.<resource>` is open-ended, which a typed query struct cannot say.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct FilterParams {
    /// Exact offer type (at most 256 bytes).
    #[param(rename = "type", max_length = 256)]
    offer_type: Option<String>,
    /// What the offer sells: `capacity` or `service`.
    #[param(value_type = Option<crate::offers::OfferKind>)]
    kind: Option<String>,
    /// Some plan has this hosting policy (`Local`, `Remote` or
    /// `LocalAndRemote`), and meets the other plan conditions too.
    #[param(value_type = Option<crate::offers::HostingPolicy>)]
    hosting: Option<String>,
    /// Owner's cluster ID or cluster name (at most 256 bytes).
    #[param(max_length = 256)]
    provider: Option<String>,
    /// Some plan costs at most this (a non-negative decimal).
    #[param(rename = "maxCost", value_type = Option<crate::http::schemas::Decimal>)]
    max_cost: Option<String>,
    /// `min.<resource>=<quantity>`, one query parameter per resource: some
    /// plan provides at least this Kubernetes quantity of `<resource>`, e.g.
    /// `min.memory=4Gi&min.cpu=2`. Described as one form-exploded object
    /// whose property names are the query parameter names.
    #[param(rename = "min", style = Form, explode, value_type = Option<crate::http::schemas::MinResources>)]
    min_resource: Option<String>,
    /// The owner peers with this Liqo generation (`v0` or `v1`).
    #[param(value_type = Option<crate::providers::LiqoGeneration>)]
    liqo: Option<String>,
    /// The owner last reported this Liqo enforcement level (`off`, `none`,
    /// `soft`, `hard` or `unknown`); offers of owners that never reported
    /// one do not match.
    #[param(value_type = Option<crate::providers::EnforcementLevel>)]
    enforcement: Option<String>,
    /// The owner last reported this tenant-isolation level (`enforced`,
    /// `unverified`, `failed` or `off`); offers of owners that never
    /// reported one do not match.
    #[param(value_type = Option<crate::providers::IsolationLevel>)]
    isolation: Option<String>,
    /// `label.<key>=<value>`, one query parameter per label: the offer
    /// carries the provider label `<key>` with exactly `<value>`; several
    /// must all hold, e.g. `label.region=eu-west-1&label.compliance=gdpr`.
    #[param(rename = "label", style = Form, explode, value_type = Option<crate::http::schemas::LabelFilters>)]
    label: Option<String>,
}

/// Largest page `GET /offers?limit=` serves.
pub const MAX_PAGE: usize = 1000;

/// Paging of `GET /offers` (not taken by `/subscribe`).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct PageParams {
    /// At most this many offers (1-1000). Without it, every matching offer.
    /// A full page carries `Link: <...>; rel="next"`.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// Only offers whose id sorts after this one (the last id of the
    /// previous page).
    #[param(value_type = Option<crate::http::schemas::Id>)]
    after: Option<String>,
}

/// `limit` and `after`, taken out of the query pairs.
struct Page {
    limit: Option<usize>,
    after: Option<String>,
}

impl Page {
    fn take(pairs: &mut Vec<(String, String)>) -> Result<Page, ApiError> {
        let mut page = Page {
            limit: None,
            after: None,
        };
        let mut rest = Vec::with_capacity(pairs.len());
        for (k, v) in pairs.drain(..) {
            match k.as_str() {
                "limit" if page.limit.is_none() => {
                    let n = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_PAGE).contains(n))
                        .ok_or_else(|| {
                            ApiError::bad_request(
                                "limit",
                                format!("must be a whole number from 1 to {MAX_PAGE}"),
                            )
                        })?;
                    page.limit = Some(n);
                }
                "after" if page.after.is_none() => {
                    validate_id("after", &v)?;
                    page.after = Some(v);
                }
                "limit" | "after" => {
                    return Err(ApiError::bad_request(k, "given more than once"));
                }
                _ => rest.push((k, v)),
            }
        }
        *pairs = rest;
        Ok(page)
    }
}

/// List offers, optionally filtered and paged.
///
/// Plan-level filters (`maxCost`, `min.<resource>`) must hold for one and the
/// same plan. Unknown parameters are refused.
///
/// The answer carries an `ETag` (it changes whenever the list does);
/// `If-None-Match` with it is answered 304 without a body. The body is sent
/// compressed (`Content-Encoding: br` or `gzip`) when the client accepts it.
#[utoipa::path(
    get, path = "/offers", tag = "offers", operation_id = "listOffers",
    params(
        FilterParams, PageParams,
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` from an earlier answer: 304 if the list has not changed since"),
    ),
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "Matching offers, ordered by id", body = Vec<Offer>,
            headers(
                ("Link" = String, description = "`</offers?...&after=<last id>&limit=<n>>; rel=\"next\"`: the next page, sent when `limit` is given and the page is full"),
                ("ETag" = String, description = "Identifies this list: send it back in `If-None-Match` to get 304 while the list is unchanged"),
                ("Content-Encoding" = String, description = "`br` or `gzip` when the client's `Accept-Encoding` takes it (bodies of 512 bytes and more)"),
            )),
        (status = 304, description = "Not modified: the list still has the `ETag` given in `If-None-Match`",
            headers(("ETag" = String, description = "The list's current ETag (the one matched)"))),
        (status = 400, description = "A bad filter, named in `field`", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn list(state: web::Data<Offers>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let mut pairs: Vec<(String, String)> = serde_urlencoded::from_str(req.query_string())
        .map_err(|e| ApiError::bad_request("query", format!("malformed query string: {e}")))?;
    let page = Page::take(&mut pairs)?;
    let filter = OfferFilter::from_pairs(pairs.iter().map(|(k, v)| (k, v)))?;
    // Without `limit`, the whole (rest of the) list, as the thesis has it.
    let offers = state
        .store
        .list_offers_page(
            &filter,
            page.after.as_deref(),
            page.limit.unwrap_or(usize::MAX),
        )
        .await?;
    let mut response = HttpResponse::Ok();
    let full_page = page.limit.filter(|limit| offers.len() == *limit);
    if let (Some(limit), Some(last)) = (full_page, offers.last()) {
        // Same filters, continue after the last id. A last page that happens
        // to be full leads to one empty page: cheaper than counting.
        pairs.push(("after".into(), last.id.clone()));
        pairs.push(("limit".into(), limit.to_string()));
        let query = serde_urlencoded::to_string(&pairs)
            .map_err(|e| ApiError::Internal(format!("encoding the next-page link: {e}")))?;
        response.insert_header((header::LINK, format!("</offers?{query}>; rel=\"next\"")));
    }
    let offers: Vec<Offer> = offers.into_iter().map(|o| state.serve(o)).collect();
    let body = serde_json::to_vec(&offers)
        .map_err(|e| ApiError::Internal(format!("encoding the offer list: {e}")))?;
    super::list_body::respond(req.headers(), response, body)
        .map_err(|e| ApiError::Internal(format!("compressing the offer list: {e}")))
}

/// One offer.
#[utoipa::path(
    get, path = "/offer/{id}", tag = "offers", operation_id = "getOffer",
    params(("id" = crate::http::schemas::Id, Path, description = "Offer id", example = "demo-general")),
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "The offer", body = Offer),
        (status = 404, description = "No such offer", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(
    state: web::Data<Offers>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    match state.store.get_offer(&id).await? {
        Some(offer) => Ok(HttpResponse::Ok().json(state.serve(offer))),
        None => Err(ApiError::NotFound(format!("no offer {id}"))),
    }
}

/// Create (201) or replace (200) the caller's offer `{id}`.
///
/// The body is the thesis's offer JSON; plans may name themselves `name` or
/// `planName` (output always uses `name`). Read-only fields echoed from a
/// `GET` are accepted: `id`/`clusterID` must match, `version` makes the write
/// conditional (409 if the offer has changed since).
///
/// Providers only; a provider disabled by an administrator gets 403.
#[utoipa::path(
    post, path = "/offer/{id}", tag = "offers", operation_id = "putOffer",
    params(("id" = crate::http::schemas::Id, Path, description = "Offer id: 1-128 of A-Z a-z 0-9 . _ ~ -")),
    request_body = OfferInput,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider"]))),
    responses(
        (status = 201, description = "Created", body = Offer,
            headers(("Location" = String, description = "`/offer/{id}`")),
            links(
                ("GetOffer" = (operation_id = "getOffer", parameters(("id" = "$request.path.id")))),
                ("DeleteOffer" = (operation_id = "deleteOffer", parameters(("id" = "$request.path.id")))),
            )),
        (status = 200, description = "Replaced", body = Offer,
            links(
                ("GetOffer" = (operation_id = "getOffer", parameters(("id" = "$request.path.id")))),
                ("DeleteOffer" = (operation_id = "deleteOffer", parameters(("id" = "$request.path.id")))),
            )),
        crate::http::InvalidBody,
        (status = 403, description = "Not a provider, the offer belongs to another provider, or the provider is disabled", body = ErrorBody),
        (status = 409, description = "`version` given and stale", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Offers>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Provider)?;
    let id = id.into_inner();
    validate_id("id", &id)?;
    // A provider an administrator disabled may still withdraw its offers
    // (DELETE) but not publish new capacity.
    if state
        .providers
        .disabled_providers()
        .await?
        .contains_key(&caller.cluster_id)
    {
        return Err(ApiError::Forbidden(format!(
            "provider {} is disabled by an administrator; it may delete its offers but not publish",
            caller.cluster_id
        )));
    }
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let spec = OfferSpec::from_json(&body)?;
    if spec.id.as_ref().is_some_and(|b| *b != id) {
        return Err(ApiError::bad_request(
            "id",
            format!("does not match the offer id in the path ({id})"),
        ));
    }
    if spec
        .cluster_id
        .as_ref()
        .is_some_and(|c| *c != caller.cluster_id)
    {
        return Err(ApiError::bad_request(
            "clusterID",
            "does not match the authenticated provider",
        ));
    }
    let expected = spec.version;
    let stamp = crate::providers::peering::stamp_of(&*state.providers, &caller.cluster_id).await?;
    let owner = ProviderRef {
        cluster_id: caller.cluster_id.clone(),
        cluster_name: caller.cluster_name.clone(),
        stamp,
    };
    let outcome = state
        .store
        .put_offer(
            spec.into_draft(id, owner).written_by(writer(&req)),
            expected,
        )
        .await?;
    tracing::info!(offer = %outcome.offer.id, version = outcome.offer.version, created = outcome.created, "offer stored");
    if outcome.created {
        Ok(HttpResponse::Created()
            .insert_header((header::LOCATION, format!("/offer/{}", outcome.offer.id)))
            .json(state.serve(outcome.offer)))
    } else {
        Ok(HttpResponse::Ok().json(state.serve(outcome.offer)))
    }
}

/// Who sends a write: the provider agent or the provider (see [`Writer`]).
fn writer(req: &HttpRequest) -> super::Writer {
    let ua = req.headers().get(header::USER_AGENT);
    super::stamps::writer_from_user_agent(ua.and_then(|v| v.to_str().ok()))
}

/// Delete the caller's offer `{id}`.
#[utoipa::path(
    delete, path = "/offer/{id}", tag = "offers", operation_id = "deleteOffer",
    params(("id" = crate::http::schemas::Id, Path, description = "Offer id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider"]))),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "Not a provider, or the offer belongs to another provider", body = ErrorBody),
        (status = 404, description = "No such offer", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn delete(
    state: web::Data<Offers>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Provider)?;
    match state.store.delete_offer(&id, &caller.cluster_id).await {
        Ok(_) => {
            tracing::info!(offer = %id, "offer deleted");
            Ok(HttpResponse::NoContent().finish())
        }
        Err(StoreError::NotFound) => Err(ApiError::NotFound(format!("no offer {id}"))),
        Err(e) => Err(e.into()),
    }
}
