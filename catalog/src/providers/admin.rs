//! Administration and consumer identities without OpenID Connect.
//!
//! - `POST /authenticate/admin` `{"secret"}`: the configured administrator
//!   secret for an admin token (rate-limited like `/authenticate`).
//! - `POST /consumer-tokens` `{"subject", "name"?}` (admin): a consumer
//!   token for `subject`, for catalogs whose consumers have no OIDC issuer;
//!   409 for a reserved subject (`admin`, `osb:…`) or a provider's cluster ID.
//! - `GET /admin/providers` (admin): every provider, with `disabled`.
//! - `PUT /admin/providers/{clusterID}` `{"disabled": bool}` (admin).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::authenticate::{credentials_body, token_answer};
use super::{IdentityKind, Providers};
use crate::auth::{Caller, IssuedToken, Role};
use crate::http::{parse_body, read_json_body, ApiError, ErrorBody};

/// Shortest administrator secret accepted.
pub const MIN_ADMIN_SECRET: usize = 16;
/// The `sub` of admin tokens issued for the administrator secret.
pub const ADMIN_SUBJECT: &str = "admin";
const MAX_SUBJECT_LEN: usize = 256;

/// SHA-256 of a secret, for constant-time comparison.
pub fn digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

// The body of `POST /authenticate/admin` and the items of `GET
// /admin/providers` are wire types, declared once in `catalog-client` (with
// their schemas), so a renamed field fails the server's build and the
// clients' alike.
pub use catalog_client::wire::provider::{AdminLogin, AdminProvider};

/// Exchange the administrator secret for an admin token.
#[utoipa::path(
    post, path = "/authenticate/admin", tag = "admin", operation_id = "authenticateAdmin",
    request_body = AdminLogin,
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "An admin token", body = IssuedToken),
        crate::http::InvalidBody,
        (status = 401, description = "Wrong administrator secret", body = ErrorBody),
        (status = 404, description = "No administrator secret configured", body = ErrorBody),
        super::authenticate::TooManyAttempts,
    )
)]
pub async fn login(
    state: web::Data<Providers>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = credentials_body(&state, &req, payload).await?;
    let Some(expected) = state.admin_secret_digest else {
        return Err(ApiError::NotFound(
            "no administrator secret is configured on this catalog".into(),
        ));
    };
    let login: AdminLogin = parse_body(&body)?;
    if !bool::from(digest(login.secret.as_bytes()).ct_eq(&expected)) {
        tracing::warn!("admin authentication refused");
        return Err(ApiError::Unauthorized("wrong administrator secret".into()));
    }
    let answer = token_answer(&state, ADMIN_SUBJECT, "administrator", vec![Role::Admin], 0)?;
    tracing::info!("admin token issued");
    Ok(answer)
}

/// Whom a consumer token is for: `subject` becomes the token's `sub` (the
/// owner of the records it makes), `name` its display name (default:
/// `subject`). Both 1-256 bytes of printable, non-blank text.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumerTokenRequest {
    #[schema(value_type = crate::http::schemas::Name)]
    pub subject: String,
    #[serde(default)]
    #[schema(value_type = Option<crate::http::schemas::Name>)]
    pub name: Option<String>,
}

fn check_text(field: &str, v: &str) -> Result<(), ApiError> {
    if v.trim().is_empty() || v.len() > MAX_SUBJECT_LEN || v.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            field,
            format!("must be 1 to {MAX_SUBJECT_LEN} bytes of printable text"),
        ));
    }
    // A subject is an identity shown to people: one that looks like another
    // (padding, or text reordered by bidi controls) must not be issuable.
    if v.trim() != v {
        return Err(ApiError::bad_request(
            field,
            "must not begin or end with white space",
        ));
    }
    if let Some(c) = v.chars().find(|c| is_bidi_control(*c)) {
        return Err(ApiError::bad_request(
            field,
            format!(
                "must not contain the bidirectional control character U+{:04X}",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

/// Unicode's bidirectional formatting characters (marks, embeddings,
/// overrides, isolates), which reorder how the text around them displays.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Prefix of the owners of instances provisioned with the OSB basic-auth
/// platform account (`osb:<user>`).
const OSB_OWNER_PREFIX: &str = "osb:";

/// A token's subject is the identity that owns reservations, purchases and
/// OSB instances, and a provider's subject is its cluster ID: a consumer
/// token must not be minted for an identity that is already someone else's
/// (409, nothing issued).
async fn check_subject_free(state: &Providers, subject: &str) -> Result<(), ApiError> {
    if subject.eq_ignore_ascii_case(ADMIN_SUBJECT) {
        return Err(ApiError::Conflict(format!(
            "subject: `{subject}` is reserved for the administrator; choose another subject"
        )));
    }
    if subject.starts_with(OSB_OWNER_PREFIX) {
        return Err(ApiError::Conflict(format!(
            "subject: `{subject}` starts with `{OSB_OWNER_PREFIX}`, reserved for the Open Service Broker platform account; choose another subject"
        )));
    }
    state.claim_identity(subject, IdentityKind::Consumer).await
}

/// Issue a consumer token (admins).
#[utoipa::path(
    post, path = "/consumer-tokens", tag = "admin", operation_id = "issueConsumerToken",
    request_body = ConsumerTokenRequest,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["admin"]))),
    responses(
        (status = 200, description = "A consumer token", body = IssuedToken),
        crate::http::InvalidBody,
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 409, description = "The subject is reserved (`admin`, `osb:…`) or a provider's cluster ID; nothing issued", body = ErrorBody),
    )
)]
pub async fn consumer_token(
    state: web::Data<Providers>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Admin)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let r: ConsumerTokenRequest = parse_body(&body)?;
    check_text("subject", &r.subject)?;
    check_subject_free(&state, &r.subject).await?;
    let name = r.name.unwrap_or_else(|| r.subject.clone());
    check_text("name", &name)?;
    let answer = token_answer(&state, &r.subject, &name, vec![Role::Consumer], 0)?;
    tracing::info!(subject = %r.subject, "consumer token issued");
    Ok(answer)
}

/// Every provider, with whether it is disabled (admins).
#[utoipa::path(
    get, path = "/admin/providers", tag = "admin", operation_id = "listProviders",
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["admin"]))),
    responses(
        (status = 200, description = "Every provider", body = Vec<AdminProvider>),
        (status = 403, description = "Not an admin", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn providers(
    state: web::Data<Providers>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Admin)?;
    let disabled = state.store.disabled_providers().await?;
    let out: Vec<AdminProvider> = state
        .store
        .list_providers()
        .await?
        .into_iter()
        .map(|info| {
            let since = disabled.get(&info.cluster_id).copied();
            AdminProvider {
                info,
                disabled: since.is_some(),
                disabled_since: since,
            }
        })
        .collect();
    Ok(HttpResponse::Ok().json(out))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderUpdate {
    pub disabled: bool,
}

/// Disable or re-enable a provider (admins).
#[utoipa::path(
    put, path = "/admin/providers/{clusterID}", tag = "admin", operation_id = "setProviderStatus",
    params(("clusterID" = crate::http::schemas::Id, Path, description = "The provider's cluster ID")),
    request_body = ProviderUpdate,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["admin"]))),
    responses(
        (status = 200, description = "The provider, with its new status", body = AdminProvider),
        crate::http::InvalidBody,
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such provider", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn set_provider(
    state: web::Data<Providers>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
    cluster_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Admin)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let update: ProviderUpdate = parse_body(&body)?;
    let account = state
        .store
        .get_provider(&cluster_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no provider {cluster_id}")))?;
    state
        .store
        .set_provider_disabled(&account.cluster_id, update.disabled)
        .await?;
    tracing::warn!(cluster_id = %account.cluster_id, disabled = update.disabled, by = %caller.cluster_id, "provider status changed by an administrator");
    let since = state
        .store
        .disabled_providers()
        .await?
        .get(&account.cluster_id)
        .copied();
    Ok(HttpResponse::Ok().json(AdminProvider {
        info: account.info(),
        disabled: since.is_some(),
        disabled_since: since,
    }))
}
