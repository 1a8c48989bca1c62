//! The contract REST endpoints:
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /contracts[?active=][&state=]` | consumer (own), provider (sold by its cluster), admin (all) | never credentials; `ETag`, `If-None-Match` → 304 |
//! | `GET /contracts/{id}` | its consumer (with credentials while active), its provider, admin | one contract |
//! | `PUT /contracts/{id}/state` | its consumer | `{state, reason?, consumerClusterID?}` → 200 |
//! | `POST /contracts/{id}/extend` | its consumer | `{durationSeconds?}` (`{}`: the defaults) → 200, same id, later `expiresAt` |
//! | `PUT /provider/contracts/{id}/peering` | its provider | `{kubeconfig}` → 200, the contract's own peering user |

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::model::{Contract, ContractFilter, Report};
use super::service::{self, viewer};
use crate::auth::Caller;
use crate::buying::error::BuyError;
use crate::buying::model::ContractState;
use crate::buying::Buying;
use crate::http::{parse_object, read_json_body, ErrorBody};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    active: Option<String>,
    #[serde(default)]
    state: Option<String>,
}

fn filter(req: &HttpRequest) -> Result<ContractFilter, BuyError> {
    let q: ListQuery = serde_urlencoded::from_str(req.query_string()).map_err(|e| {
        // serde names an unknown parameter in backquotes: name it.
        let msg = e.to_string();
        let field = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.starts_with("unknown field"))
            .unwrap_or("query")
            .to_string();
        BuyError::bad_request(field, msg)
    })?;
    let active = match q.active.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => return Err(BuyError::bad_request("active", "must be true or false")),
    };
    let state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(ContractState::parse(s).ok_or_else(|| {
            BuyError::bad_request("state", "must be pending, peered, granted, ready or failed")
        })?),
    };
    Ok(ContractFilter { active, state })
}

/// A strong validator of a listing: the SHA-256 of its JSON, quoted.
fn etag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether `If-None-Match` names `tag` (or `*`).
fn not_modified(req: &HttpRequest, tag: &str) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

/// The contracts the caller may see, without credentials.
///
/// A consumer sees its own, a provider those sold by its cluster, an
/// admin all. The answer carries an `ETag`; asking again with it in
/// `If-None-Match` answers 304 while nothing changed (providers' controllers
/// poll this).
#[utoipa::path(
    get, path = "/contracts", tag = "buying", operation_id = "listContracts",
    params(
        ("active" = Option<bool>, Query, description = "Only active (`true`) or ended (`false`) contracts"),
        ("state" = Option<ContractState>, Query, description = "Only contracts in this state"),
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` of an earlier answer: 304 if still current"),
    ),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)", "provider (sold by its cluster)", "admin"]))),
    responses(
        (status = 200, description = "Contracts, newest first", body = Vec<Contract>,
            headers(("ETag" = String, description = "Validator of this answer"))),
        (status = 304, description = "Not modified since the `ETag` given in `If-None-Match`",
            headers(("ETag" = String, description = "The current validator"))),
        (status = 400, description = "A bad or unknown query parameter, named in `field`", body = ErrorBody),
        (status = 403, description = "Not a consumer, provider or admin", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn list(
    state: web::Data<Buying>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let filter = filter(&req)?;
    let contracts = service::list(&state, &who, &filter).await?;
    let body = serde_json::to_vec(&contracts).map_err(|e| BuyError::internal(e.to_string()))?;
    let tag = etag(&body);
    if not_modified(&req, &tag) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, tag))
            .finish());
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, tag))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .content_type("application/json")
        .body(body))
}

/// One contract: with `credentials` for its consumer while it is active;
/// without for its provider and admins; 404 for anyone else.
#[utoipa::path(
    get, path = "/contracts/{id}", tag = "buying", operation_id = "getContract",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own, with credentials)", "provider (sold by its cluster)", "admin"]))),
    responses(
        (status = 200, description = "The contract", body = Contract),
        (status = 403, description = "Not a consumer, provider or admin", body = ErrorBody),
        (status = 404, description = "No such contract, or not the caller's", body = ErrorBody),
        (status = 409, description = "The provider's credentials are not on file", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let c = service::get(&state, &id, &who).await?;
    let mut answer = HttpResponse::Ok();
    if c.credentials.is_some() {
        answer.insert_header((header::CACHE_CONTROL, "no-store"));
    }
    Ok(answer.json(c))
}

/// `PUT /contracts/{id}/state` body, as read: `state` is checked by
/// [`Report::new`] with the same message whatever the value. (Its schema
/// is `StateReport` of the shared request schemas.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    state: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(rename = "consumerClusterID", default)]
    consumer_cluster_id: Option<String>,
}

/// Report where the consumer side is with a contract. Any state may follow
/// any other while the contract is active.
#[utoipa::path(
    put, path = "/contracts/{id}/state", tag = "buying", operation_id = "reportContractState",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body = crate::http::schemas::StateReport,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)"]))),
    responses(
        (status = 200, description = "The contract as now stored, without credentials", body = Contract),
        (status = 400, description = "Invalid body; `field` names the bad field (nothing changed)", body = ErrorBody),
        (status = 403, description = "The contract's provider or an admin (only its consumer reports)", body = ErrorBody),
        (status = 404, description = "No such contract, or not the caller's", body = ErrorBody),
        (status = 409, description = "The contract ended, or `consumerClusterID` differs from the one set", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put_state(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let raw: RawReport = parse_object(&body)?;
    let report = Report::new(&raw.state, raw.reason, raw.consumer_cluster_id)?;
    Ok(HttpResponse::Ok().json(service::report(&state, &id, &who, report).await?))
}

/// `PUT /provider/contracts/{id}/peering` body (the client's
/// `AttachCredentials`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachRequest {
    /// The peering user's kubeconfig (YAML text, at most 32 KiB) made for
    /// this contract's consumer cluster (`liqoctl generate peering-user
    /// --consumer-cluster-id <consumerClusterID>`), held to the same rules
    /// as `PUT /provider/peering`'s `v1.kubeconfig`; the consumer receives
    /// a re-serialised copy, never the text sent.
    #[schema(max_length = 32768)]
    pub kubeconfig: String,
}

/// Attach a peering user's kubeconfig to one of the calling provider's
/// contracts (Liqo v1): a Liqo peering user serves exactly one consumer
/// cluster, so each contract gets its own. Sealed at rest; released only
/// to the contract's consumer, while the contract is active, in
/// `GET /contracts/{id}`. Attaching again replaces it.
#[utoipa::path(
    put, path = "/provider/contracts/{id}/peering", tag = "buying", operation_id = "attachContractPeering",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body = AttachRequest,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "Attached: the contract (`peeringState.state` is `credentialsReady`), without credentials", body = Contract),
        (status = 400, description = "Invalid body; `field` names the bad field (nothing changed)", body = ErrorBody),
        (status = 403, description = "Not a provider, or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such contract, or not sold by the caller's cluster", body = ErrorBody),
        (status = 409, description = "The contract ended, was bought without Liqo v1, or names no consumer cluster ID", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn attach_peering(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    caller.require(crate::auth::Role::Provider)?;
    let who = viewer(&caller)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let asked: AttachRequest = parse_object(&body)?;
    Ok(HttpResponse::Ok().json(service::attach(&state, &id, &who, &asked.kubeconfig).await?))
}

/// `POST /contracts/{id}/extend` body (the client's `ExtendRequest`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"durationSeconds": 86400}))]
pub struct ExtendBody {
    /// Seconds added to the contract's end. Default: renewed to end a
    /// whole `--contract-duration` from now. The new end is at most that
    /// far from now.
    #[serde(
        rename = "durationSeconds",
        default,
        deserialize_with = "crate::http::optional_whole"
    )]
    #[schema(minimum = 1, maximum = 2592000)]
    pub duration_seconds: Option<u64>,
}

/// Extend a contract before it ends: same id, same peering and grant, a
/// later `expiresAt` — on its own terms, only while the plan still offers
/// them (409 naming what the provider changed otherwise).
#[utoipa::path(
    post, path = "/contracts/{id}/extend", tag = "buying", operation_id = "extendContract",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body(content = ExtendBody, description = "`{}` for the defaults"),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)"]))),
    responses(
        (status = 200, description = "Extended: the contract as now stored, without credentials", body = Contract),
        (status = 400, description = "Invalid body; `field` names the bad field (nothing changed)", body = ErrorBody),
        (status = 403, description = "The contract's provider or an admin (only its consumer extends), or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such contract, or not the caller's", body = ErrorBody),
        (status = 409, description = "The contract ended, or the provider changed or removed its plan since it was bought (the message names each change)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn extend(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let asked: ExtendBody = parse_object(&body)?;
    Ok(HttpResponse::Ok().json(service::extend(&state, &id, &who, asked.duration_seconds).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    /// The client's request bodies read field for field as the server's
    /// (`deny_unknown_fields`), so a field renamed on either side fails.
    #[test]
    fn the_clients_attach_and_extend_bodies_read_field_for_field() {
        use catalog_client::wire::{AttachCredentials, ExtendRequest};

        let AttachRequest { kubeconfig } = serde_json::from_value(
            serde_json::to_value(AttachCredentials {
                kubeconfig: "k".into(),
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(kubeconfig, "k");
        let ExtendBody { duration_seconds } = serde_json::from_value(
            serde_json::to_value(ExtendRequest {
                duration_seconds: Some(60),
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(duration_seconds, Some(60));
    }

    /// `RawReport` stays the server's own type (it reads `state` as text,
    /// to answer any unknown value alike); a client's `StateReport` with
    /// every field set must read back whole, so a field renamed on either
    /// side fails here (`deny_unknown_fields`).
    #[test]
    fn the_clients_state_report_reads_field_for_field() {
        use catalog_client::wire::{ContractState, StateReport};

        let sent = StateReport {
            state: ContractState::Failed,
            reason: Some("no route".into()),
            consumer_cluster_id: Some("c1".into()),
        };
        let RawReport {
            state,
            reason,
            consumer_cluster_id,
        } = serde_json::from_value(serde_json::to_value(&sent).unwrap()).unwrap();
        assert_eq!(state, sent.state.as_str());
        assert_eq!(
            (reason, consumer_cluster_id),
            (sent.reason, sent.consumer_cluster_id)
        );
    }

    #[test]
    fn if_none_match_forms() {
        let tag = etag(b"[]");
        assert_ne!(tag, etag(b"[1]"));
        for v in [
            tag.clone(),
            format!("W/{tag}"),
            format!("\"x\", {tag}"),
            "*".into(),
        ] {
            let req = TestRequest::default()
                .insert_header((header::IF_NONE_MATCH, v.as_str()))
                .to_http_request();
            assert!(not_modified(&req, &tag), "{v}");
        }
        let req = TestRequest::default()
            .insert_header((header::IF_NONE_MATCH, "\"other\""))
            .to_http_request();
        assert!(!not_modified(&req, &tag));
    }

    #[test]
    fn filters_name_the_bad_parameter() {
        let f =
            |q: &str| filter(&TestRequest::with_uri(&format!("/contracts?{q}")).to_http_request());
        assert_eq!(
            f("active=true&state=ready").unwrap(),
            ContractFilter {
                active: Some(true),
                state: Some(ContractState::Ready)
            }
        );
        for (q, field) in [
            ("active=yes", "active"),
            ("state=done", "state"),
            ("colour=red", "colour"),
        ] {
            match f(q) {
                Err(BuyError::Api(crate::http::ApiError::BadRequest(e))) => {
                    assert_eq!(e.field, field, "{q}")
                }
                other => panic!("{q}: {other:?}"),
            }
        }
    }
}
