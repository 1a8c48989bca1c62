//! The contract REST endpoints:
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /contracts[?active=][&state=]` | consumer (own), provider (sold by its cluster), admin (all) | never credentials; `ETag`, `If-None-Match` → 304 |
//! | `GET /contracts/{id}` | its consumer (with credentials while active), its provider, admin | one contract |
//! | `PUT /contracts/{id}/state` | its consumer | `{state, reason?, consumerClusterID?}` → 200 |
//! | `POST /contracts/{id}/extend` | its consumer | `{durationSeconds?}` (`{}`: the defaults) → 200, same id, later `expiresAt` |
//! | `PUT /provider/contracts/{id}/peering` | its provider | `{kubeconfig}` → 200, the contract's own peering user |
//! | `PUT /contracts/{id}/network-policy` | its consumer | a `TenantPolicy` → 200, the stored `ContractNetworkPolicy` |
//! | `DELETE /contracts/{id}/network-policy` | its consumer | → 204 |
//! | `PUT /provider/contracts/{id}/network-policy/status` | its provider | a `TenantPolicyReport` → 200, the stored `ContractNetworkPolicy` |

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::model::{Contract, ContractFilter, Report};
use super::network_policy::{self, ContractNetworkPolicy, TenantPolicy, TenantPolicyReport};
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

/// A query string that does not read: 400 naming the unknown parameter
/// (serde names it in backquotes), else the query as a whole.
pub(crate) fn query_error(e: serde_urlencoded::de::Error) -> BuyError {
    let msg = e.to_string();
    let field = msg
        .split('`')
        .nth(1)
        .filter(|_| msg.starts_with("unknown field"))
        .unwrap_or("query")
        .to_string();
    BuyError::bad_request(field, msg)
}

/// The `active` parameter: `true`, `false` or absent (400 otherwise).
pub(crate) fn active_param(active: Option<&str>) -> Result<Option<bool>, BuyError> {
    match active {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(BuyError::bad_request("active", "must be true or false")),
    }
}

fn filter(req: &HttpRequest) -> Result<ContractFilter, BuyError> {
    let q: ListQuery = serde_urlencoded::from_str(req.query_string()).map_err(query_error)?;
    let active = active_param(q.active.as_deref())?;
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

/// Set the buyer's network policy for its pods on the contract's provider
/// (what the document means: `catalog_client::wire::tenant_policy`). The
/// provider reads it on the contract (`networkPolicy`, in `GET /contracts`
/// and `GET /contracts/{id}`), renders it within its default isolation and
/// reports what it did (`PUT /provider/contracts/{id}/network-policy/status`).
/// Each change is the next `revision`; the policy already stored changes
/// nothing (a retry answers it as stored).
#[utoipa::path(
    put, path = "/contracts/{id}/network-policy", tag = "buying", operation_id = "putContractNetworkPolicy",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body(content = TenantPolicy, description = "The policies, at most 256 KiB of JSON; unknown fields are refused"),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)"]))),
    responses(
        (status = 200, description = "Stored: the policy with its revision (one more than the last; unchanged for the policy already stored) and the provider's last report, if any", body = ContractNetworkPolicy),
        (status = 400, description = "Invalid body; `field` names the bad field (e.g. `policies[0].namespace`; nothing changed)", body = ErrorBody),
        (status = 403, description = "The contract's provider or an admin (only its consumer sets it)", body = ErrorBody),
        (status = 404, description = "No such contract, or not the caller's", body = ErrorBody),
        (status = 409, description = "The contract ended", body = ErrorBody),
        (status = 413, description = "The body is larger than 256 KiB", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put_network_policy(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let body = read_json_body(&req, payload, network_policy::MAX_BODY_BYTES).await?;
    // Whose contract it is, and whether it lives, is answered before the
    // body's check (404 for a contract that is not the caller's, whatever
    // it sent).
    let r = service::network_policy_contract(&state, &id, &who).await?;
    let policy: TenantPolicy = parse_whole(&body)?;
    policy
        .check()
        .map_err(|e| BuyError::bad_request(e.field, e.message))?;
    Ok(HttpResponse::Ok().json(service::set_network_policy(&state, r, policy).await?))
}

/// Remove the buyer's network policy: the provider goes back to its
/// default isolation. None set is done already.
#[utoipa::path(
    delete, path = "/contracts/{id}/network-policy", tag = "buying", operation_id = "deleteContractNetworkPolicy",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)"]))),
    responses(
        (status = 204, description = "Removed, or there was none"),
        (status = 403, description = "The contract's provider or an admin (only its consumer removes it)", body = ErrorBody),
        (status = 404, description = "No such contract, or not the caller's", body = ErrorBody),
        (status = 409, description = "The contract ended (its policy no longer changes)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn delete_network_policy(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    service::remove_network_policy(&state, &id, &who).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Report what the provider did with a revision of the contract's network
/// policy: the policies applied (with the NetworkPolicies holding them)
/// and those refused, and why. The buyer reads it on the contract
/// (`networkPolicy.report`). A report older than the stored report's is
/// ignored (200, nothing changed).
#[utoipa::path(
    put, path = "/provider/contracts/{id}/network-policy/status", tag = "buying", operation_id = "reportContractNetworkPolicy",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body(content = TenantPolicyReport, description = "The report, at most 256 KiB of JSON; unknown fields are refused"),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "Recorded (or ignored, as older than the stored report): the policy as now stored", body = ContractNetworkPolicy),
        (status = 400, description = "Invalid body; `field` names the bad field (nothing changed)", body = ErrorBody),
        (status = 403, description = "Not a provider, or the provider is disabled", body = ErrorBody),
        (status = 404, description = "No such contract, or not sold by the caller's cluster", body = ErrorBody),
        (status = 409, description = "The contract ended, has no network policy, or is at an earlier revision than the report names", body = ErrorBody),
        (status = 413, description = "The body is larger than 256 KiB", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn report_network_policy(
    state: web::Data<Buying>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, BuyError> {
    caller.require(crate::auth::Role::Provider)?;
    let who = viewer(&caller)?;
    let body = read_json_body(&req, payload, network_policy::MAX_BODY_BYTES).await?;
    let r = service::reporting_provider_contract(&state, &id, &who).await?;
    let report: TenantPolicyReport = parse_whole(&body)?;
    report
        .check()
        .map_err(|e| BuyError::bad_request(e.field, e.message))?;
    Ok(HttpResponse::Ok().json(service::report_network_policy(&state, r, report).await?))
}

/// [`parse_object`], with every whole number written as a decimal (`2.0`)
/// read as the integer it is: JSON has one number type, and JSON Schema's
/// `integer` admits both spellings (generated clients may send either),
/// while the wire types read integers (`revision`, ports).
fn parse_whole<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, BuyError> {
    fn whole(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Number(n) if !(n.is_u64() || n.is_i64()) => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0) {
                    if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                        *v = serde_json::Value::from(f as u64);
                    } else if (-9_223_372_036_854_775_808.0..0.0).contains(&f) {
                        *v = serde_json::Value::from(f as i64);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(whole),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(whole),
            _ => {}
        }
    }
    // Malformed JSON is named by `parse_object` as it always is.
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Ok(parse_object(body)?);
    };
    whole(&mut value);
    let normalised = serde_json::to_vec(&value).map_err(|e| BuyError::internal(e.to_string()))?;
    Ok(parse_object(&normalised)?)
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
