//! `GET /contract-changes`: the caller's contract change stream.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};

use super::{query, stream, ContractChanges};
use crate::auth::Caller;
use crate::buying::contracts::service::viewer;
use crate::buying::error::BuyError;
use crate::http::ErrorBody;
use catalog_client::wire::contract_stream::ContractEvent;

/// Follow the caller's contracts: newline-delimited JSON, one
/// `ContractEvent` per line, for as long as the connection and the token
/// last.
///
/// Without `since`: a `snapshot` of the caller's contracts (`active`
/// filters it) at sequence `seq`, then a `change` line per write of one of
/// them. With `since` (the `seq` of the last line read): `resumed`, then
/// exactly the changes after it; a `since` ahead of the catalog (its store
/// was replaced) gets a `snapshot` with a `reason` instead. A `heartbeat`
/// every `--contract-stream-heartbeat` carries the position to resume
/// from. A consumer sees its own contracts, a provider those sold by its
/// cluster, an admin all; never credentials. The stream ends when the
/// token expires; reconnect with a fresh one and `since`.
#[utoipa::path(
    get, path = "/contract-changes", tag = "buying", operation_id = "followContracts",
    params(
        ("since" = Option<u64>, Query, minimum = 0, description = "Resume after this sequence (the `seq` of the last line read): `resumed`, then the changes after it"),
        ("active" = Option<bool>, Query, description = "Only active (`true`) or ended (`false`) contracts in the snapshot (changes carry every contract)"),
    ),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)", "provider (sold by its cluster)", "admin"]))),
    responses(
        (status = 200, description = "The stream: one JSON object per line (`snapshot` or `resumed` first, then `change` and `heartbeat`)",
            body = ContractEvent, content_type = "application/x-ndjson"),
        (status = 400, description = "A bad or unknown query parameter, named in `field`", body = ErrorBody),
        (status = 401, description = "Missing, invalid or expired token", body = ErrorBody),
        (status = 403, description = "Not a consumer, provider or admin", body = ErrorBody),
        (status = 429, description = "The identity holds its most streams (`--contract-stream-per-identity`)", body = ErrorBody),
        (status = 503, description = "The catalog holds its most streams, is shutting down, or its store is unreachable", body = ErrorBody),
    )
)]
pub async fn follow(
    changes: web::Data<ContractChanges>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let q = query::parse(req.query_string())?;
    let body = stream::open(&changes, who, q, caller.expires_at).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // Proxies must pass lines on as they come.
        .insert_header(("X-Accel-Buffering", "no"))
        .content_type("application/x-ndjson")
        .streaming(body))
}
