//! The authenticated caller of a request, from `Authorization: Bearer <JWT>`:
//! a catalog token, or (when configured) an external OIDC issuer's token
//! verified by [`super::oidc`].

use futures::future::LocalBoxFuture;

use actix_web::{dev::Payload, http::header, web, FromRequest, HttpRequest};

use std::sync::Arc;

use async_trait::async_trait;

use super::oidc::OidcVerifier;
use super::{Role, TokenService};
use crate::http::ApiError;

/// Where a provider token's generation is checked: the current credential
/// generation of a cluster ID (`None` if no such provider). The providers
/// feature implements it over its store; `auth` needs nothing else of it.
#[async_trait]
pub trait Generations: Send + Sync + 'static {
    async fn current_generation(&self, cluster_id: &str) -> Result<Option<u64>, ApiError>;
}

/// What the [`Caller`] extractor needs, as `web::Data<Verifier>` on the
/// app: the catalog's own token service, the external OIDC issuer (if
/// configured) and the providers' credential generations.
#[derive(Clone)]
pub struct Verifier {
    pub tokens: Arc<TokenService>,
    pub oidc: Option<Arc<OidcVerifier>>,
    pub generations: Arc<dyn Generations>,
}

/// A caller whose token verified. Extracting it answers 401 when the header
/// is missing or the token invalid or expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Cluster ID (the token's `sub`).
    pub cluster_id: String,
    /// Cluster name at authentication time.
    pub cluster_name: String,
    pub roles: Vec<Role>,
    /// When the token stops being valid (its `exp`, Unix seconds): a
    /// long-lived answer made for it (the contract change stream) ends then.
    pub expires_at: i64,
}

impl Caller {
    /// 403 unless the caller holds `role`.
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.roles.contains(&role) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(
                format!("this needs the {role:?} role").to_lowercase(),
            ))
        }
    }

    async fn from_headers(req: &HttpRequest) -> Result<Self, ApiError> {
        let state = req.app_data::<web::Data<Verifier>>().ok_or_else(|| {
            ApiError::Internal("the token verifier is missing from the app".into())
        })?;
        let value = req
            .headers()
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthorized("missing Authorization: Bearer token".into()))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(|| {
                ApiError::Unauthorized("Authorization must be `Bearer <token>`".into())
            })?;
        let claims = match state.tokens.verify_current(token).await {
            Ok(claims) => claims,
            // Not one of the catalog's own: maybe the external issuer's.
            Err(e) => match &state.oidc {
                Some(oidc) => return oidc.caller(token).await,
                None => {
                    tracing::debug!(error = %e, "token refused");
                    return Err(ApiError::Unauthorized("invalid or expired token".into()));
                }
            },
        };
        if claims.roles.contains(&Role::Provider) {
            // One lookup per provider request: rotating credentials must
            // retire the tokens issued before, not wait for them to expire.
            let current = state.generations.current_generation(&claims.sub).await?;
            match current {
                Some(gen) if gen == claims.gen => {}
                Some(_) => {
                    return Err(ApiError::Unauthorized(
                        "this token was issued before the provider's credentials were rotated; authenticate again"
                            .into(),
                    ))
                }
                // No account: the database lost it (wiped or restored), or
                // it never reached this one; nothing was rotated.
                None => {
                    return Err(ApiError::Unauthorized(format!(
                        "this token's provider `{}` is not registered on this catalog (its store no longer holds the account); authenticate again to register",
                        claims.sub
                    )))
                }
            }
        }
        Ok(Caller {
            cluster_id: claims.sub,
            cluster_name: claims.name,
            roles: claims.roles,
            expires_at: claims.exp,
        })
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        // Async because an OIDC token may need the issuer's keys fetched.
        let req = req.clone();
        Box::pin(async move { Caller::from_headers(&req).await })
    }
}
