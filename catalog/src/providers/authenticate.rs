//! `POST /authenticate`: a provider presents its Liqo peering credentials
//! and gets a catalog JWT. The first call claims the cluster ID; later calls
//! must present the same credentials.
//!
//! `POST /authenticate/rotate`: a provider whose Liqo token (or auth URL)
//! changed presents the current credentials and the new ones. Tokens issued
//! before the rotation stop working at once.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::{IdentityKind, ProviderAccount, Providers};
use crate::auth::{secret, IssuedToken, PoolError, Role};
use crate::http::{
    documented_error, parse_json, read_json_body, validate_id, ApiError, ErrorBody, FieldError,
};
use crate::store::StoreError;

const MAX_FIELD_LEN: usize = 256;
const MAX_URL_LEN: usize = 2048;
const MAX_TOKEN_LEN: usize = 4096;

/// A provider's Liqo peering credentials. Every field is required; text
/// fields must not be blank nor hold control characters, and their length
/// limits count UTF-8 bytes.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// The Liqo cluster ID: 1-128 of `A-Z a-z 0-9 . _ ~ -`.
    #[serde(rename = "clusterID")]
    #[schema(required = true, value_type = crate::http::schemas::Id)]
    pub cluster_id: Option<String>,
    /// At most 256 bytes.
    #[serde(rename = "clusterName")]
    #[schema(required = true, value_type = crate::http::schemas::Name)]
    pub cluster_name: Option<String>,
    /// An `http://` or `https://` URL of at most 2048 bytes, or `""` for a
    /// provider that runs only Liqo v1 (it then offers no v0 peering).
    #[serde(rename = "authURL")]
    #[schema(required = true, value_type = crate::http::schemas::AuthUrl)]
    pub auth_url: Option<String>,
    /// The provider's secret (at most 4096 bytes); stored only as an argon2 hash.
    #[schema(required = true, value_type = crate::http::schemas::Secret)]
    pub token: Option<String>,
}

struct Checked {
    cluster_id: String,
    cluster_name: String,
    auth_url: String,
    token: String,
}

fn required(field: &str, v: Option<String>, max: usize) -> Result<String, FieldError> {
    let v = v.ok_or_else(|| FieldError::new(field, "is required"))?;
    if v.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if v.len() > max {
        return Err(FieldError::new(
            field,
            format!("must be at most {max} bytes"),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(v)
}

fn checked_auth_url(field: &str, v: Option<String>) -> Result<String, FieldError> {
    // "": a provider that runs only Liqo v1 (no v0 peering to offer).
    if v.as_deref() == Some("") {
        return Ok(String::new());
    }
    let url = required(field, v, MAX_URL_LEN)?;
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(FieldError::new(field, "must be an http:// or https:// URL"));
    }
    Ok(url)
}

impl Credentials {
    fn check(self) -> Result<Checked, FieldError> {
        let cluster_id = required("clusterID", self.cluster_id, MAX_FIELD_LEN)?;
        validate_id("clusterID", &cluster_id)?;
        let cluster_name = required("clusterName", self.cluster_name, MAX_FIELD_LEN)?;
        let auth_url = checked_auth_url("authURL", self.auth_url)?;
        let token = required("token", self.token, MAX_TOKEN_LEN)?;
        Ok(Checked {
            cluster_id,
            cluster_name,
            auth_url,
            token,
        })
    }
}

/// Exchange peering credentials for a bearer token.
///
/// The first call for a cluster ID registers the provider; later calls must
/// present the same credentials. Rate-limited per client address.
#[utoipa::path(
    post, path = "/authenticate", tag = "auth", operation_id = "authenticateProvider",
    request_body = Credentials,
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "A provider token", body = IssuedToken),
        crate::http::InvalidBody,
        (status = 401, description = "The cluster ID is claimed with other credentials", body = ErrorBody),
        (status = 409, description = "The cluster ID is a consumer's subject (one namespace of identities); nothing registered", body = ErrorBody),
        TooManyAttempts,
        StoreOrVerifiersBusy,
    )
)]
pub async fn authenticate(
    state: web::Data<Providers>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = credentials_body(&state, &req, payload).await?;
    let creds: Credentials = parse_json(&body)?;
    let c = creds.check()?;
    tracing::Span::current().record("cluster_id", c.cluster_id.as_str());

    let account = match state.store.get_provider(&c.cluster_id).await? {
        Some(existing) => existing,
        None => {
            // One namespace of identities: a consumer's subject is not free.
            state
                .claim_identity(&c.cluster_id, IdentityKind::Provider)
                .await?;
            let hash = hashed(&state, &c.token).await?;
            let fresh = ProviderAccount {
                generation: 0,
                cluster_id: c.cluster_id.clone(),
                cluster_name: c.cluster_name.clone(),
                auth_url: c.auth_url.clone(),
                secret_hash: hash,
                created_at: crate::store::now(),
            };
            let (holder, claimed) = state.store.claim_provider(fresh).await?;
            if claimed {
                tracing::info!(cluster_id = %c.cluster_id, "provider registered");
                state
                    .remember_peering_token(&holder.cluster_id, &c.token)
                    .await;
                return issue(&state, &holder);
            }
            // Lost a race to another first call: check against the winner.
            holder
        }
    };
    let Some(account) = verified(&state, Some(account), &c).await? else {
        tracing::warn!(cluster_id = %c.cluster_id, "authentication refused: credentials differ from the registered ones");
        return Err(ApiError::Unauthorized(
            "these credentials do not match the ones registered for this cluster ID".into(),
        ));
    };
    // Purchases hand the real token to buyers: keep a sealed copy.
    state
        .remember_peering_token(&account.cluster_id, &c.token)
        .await;
    issue(&state, &account)
}

documented_error!(
    /// The 429 of [`credentials_body`]'s rate limit, for the routes that
    /// call it.
    TooManyAttempts,
    429,
    ErrorBody,
    "Too many attempts from this address; retry after `Retry-After`"
);

documented_error!(
    /// The 503 of the routes that read an account and verify or hash its
    /// secret on the bounded secret pool ([`verified`], [`hashed`]).
    StoreOrVerifiersBusy,
    503,
    ErrorBody,
    "Store unreachable, or too many authentications waiting for a verifying thread; retry after `Retry-After`"
);

/// The body of a request that presents a secret, after the per-address
/// rate limit that keeps secrets from being guessed (429 beyond it).
pub(crate) async fn credentials_body(
    state: &Providers,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<web::Bytes, ApiError> {
    if let Some(peer) = req.peer_addr() {
        if !state.limiter.allow(peer.ip()) {
            return Err(ApiError::TooManyRequests);
        }
    }
    read_json_body(req, payload, state.max_body_bytes).await
}

/// Current credentials plus what replaces them. All but `newAuthURL` are
/// required, with the limits of [`Credentials`]; something must change
/// (`newToken` differs from `token`, or `newAuthURL` from `authURL`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rotation {
    #[serde(rename = "clusterID")]
    #[schema(required = true, value_type = crate::http::schemas::Id)]
    pub cluster_id: Option<String>,
    #[serde(rename = "clusterName")]
    #[schema(required = true, value_type = crate::http::schemas::Name)]
    pub cluster_name: Option<String>,
    #[serde(rename = "authURL")]
    #[schema(required = true, value_type = crate::http::schemas::AuthUrl)]
    pub auth_url: Option<String>,
    /// The current secret.
    #[schema(required = true, value_type = crate::http::schemas::Secret)]
    pub token: Option<String>,
    /// The secret from now on (may equal `token` when only the URL moves).
    #[serde(rename = "newToken")]
    #[schema(required = true, value_type = crate::http::schemas::Secret)]
    pub new_token: Option<String>,
    /// The auth URL from now on; unchanged if absent or null.
    #[serde(rename = "newAuthURL")]
    #[schema(value_type = Option<crate::http::schemas::AuthUrl>)]
    pub new_auth_url: Option<String>,
}

/// Replace a provider's secret (and optionally its auth URL), proving the
/// current credentials. Answers a fresh token; every token issued before is
/// refused from then on.
#[utoipa::path(
    post, path = "/authenticate/rotate", tag = "auth", operation_id = "rotateProviderCredentials",
    request_body = Rotation,
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "Rotated; a token for the new credentials", body = IssuedToken),
        (status = 400, description = "Invalid body, or nothing to rotate; `field` names the bad field", body = ErrorBody),
        (status = 401, description = "The current credentials are wrong (nothing changed)", body = ErrorBody),
        (status = 409, description = "Rotated concurrently by another request (nothing changed)", body = ErrorBody),
        TooManyAttempts,
        StoreOrVerifiersBusy,
    )
)]
pub async fn rotate(
    state: web::Data<Providers>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = credentials_body(&state, &req, payload).await?;
    let r: Rotation = parse_json(&body)?;
    let new_token = required("newToken", r.new_token, MAX_TOKEN_LEN)?;
    let new_auth_url = r
        .new_auth_url
        .map(|u| checked_auth_url("newAuthURL", Some(u)))
        .transpose()?;
    let c = Credentials {
        cluster_id: r.cluster_id,
        cluster_name: r.cluster_name,
        auth_url: r.auth_url,
        token: r.token,
    }
    .check()?;
    tracing::Span::current().record("cluster_id", c.cluster_id.as_str());
    let new_auth_url = new_auth_url.unwrap_or_else(|| c.auth_url.clone());
    if new_token == c.token && new_auth_url == c.auth_url {
        return Err(ApiError::bad_request(
            "newToken",
            "nothing to rotate: newToken equals token and newAuthURL is absent or unchanged",
        ));
    }

    let account = state.store.get_provider(&c.cluster_id).await?;
    let Some(account) = verified(&state, account, &c).await? else {
        tracing::warn!(cluster_id = %c.cluster_id, "rotation refused: current credentials do not match");
        return Err(ApiError::Unauthorized(
            "the current credentials do not match the ones registered for this cluster ID".into(),
        ));
    };
    let hash = hashed(&state, &new_token).await?;
    let rotated = ProviderAccount {
        auth_url: new_auth_url,
        secret_hash: hash,
        generation: account.generation + 1,
        ..account.clone()
    };
    match state
        .store
        .rotate_provider(&account.secret_hash, rotated.clone())
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            return Err(ApiError::Conflict(
                "the credentials were rotated by another request meanwhile; nothing changed".into(),
            ))
        }
        Err(StoreError::NotFound) => {
            return Err(ApiError::Unauthorized(
                "the current credentials do not match the ones registered for this cluster ID"
                    .into(),
            ))
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(cluster_id = %rotated.cluster_id, generation = rotated.generation, "provider credentials rotated; earlier tokens retired");
    // An auth URL set or cleared changes whether it peers with Liqo v0.
    if account.auth_url.is_empty() != rotated.auth_url.is_empty() {
        let after = state.stamp(&rotated.cluster_id).await?;
        let mut before = after.clone();
        if account.auth_url.is_empty() {
            before.liqo.retain(|g| *g != super::LiqoGeneration::V0);
        } else {
            before.liqo.insert(0, super::LiqoGeneration::V0);
        }
        state
            .stamp_changed(&rotated.cluster_id, &before, &after)
            .await;
    }
    state
        .remember_peering_token(&rotated.cluster_id, &new_token)
        .await;
    issue(&state, &rotated)
}

/// The argon2 hash of a provider secret, computed on the secret pool (it
/// takes tens of milliseconds by design); 503 when the pool is saturated.
async fn hashed(state: &Providers, plain: &str) -> Result<String, ApiError> {
    let plain = plain.to_string();
    state
        .secrets
        .run(move || secret::hash(&plain))
        .await
        .map_err(pool_error)?
        .map_err(ApiError::Internal)
}

/// `account` if it exists and `c` are its credentials. The argon2
/// verification runs on the secret pool; 503 when it is saturated.
async fn verified(
    state: &Providers,
    account: Option<ProviderAccount>,
    c: &Checked,
) -> Result<Option<ProviderAccount>, ApiError> {
    let Some(account) = account else {
        return Ok(None);
    };
    let (token, hash) = (c.token.clone(), account.secret_hash.clone());
    let secret_ok = state
        .secrets
        .run(move || secret::verify(&token, &hash))
        .await
        .map_err(pool_error)?;
    let same =
        secret_ok && account.cluster_name == c.cluster_name && account.auth_url == c.auth_url;
    Ok(same.then_some(account))
}

fn pool_error(e: PoolError) -> ApiError {
    match e {
        PoolError::Busy => {
            tracing::warn!("authentication refused: every argon2 thread busy and the queue full");
            ApiError::Unavailable(e.to_string())
        }
        PoolError::Stopped => ApiError::Unavailable(e.to_string()),
    }
}

fn issue(state: &Providers, account: &ProviderAccount) -> Result<HttpResponse, ApiError> {
    token_answer(
        state,
        &account.cluster_id,
        &account.cluster_name,
        vec![Role::Provider],
        account.generation,
    )
}

/// A fresh token for `subject`, answered as every token this feature hands
/// out: uncacheable, since it is a credential. `generation` is a provider
/// account's credential generation (0 for identities without an account).
pub(crate) fn token_answer(
    state: &Providers,
    subject: &str,
    name: &str,
    roles: Vec<Role>,
    generation: u64,
) -> Result<HttpResponse, ApiError> {
    let issued = state
        .tokens
        .issue_generation(subject, name, roles, generation)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .json(issued))
}
