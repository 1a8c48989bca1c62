//! Identities from an external OpenID Connect issuer, accepted beside the
//! catalog's own tokens.
//!
//! Configured by the issuer URL (`--oidc-issuer`) and the audience tokens
//! must carry (`--oidc-audience`). The issuer's discovery document and JWKS
//! are fetched on first use and cached ([`keys`]); a token signed with a key
//! the cache does not know triggers a JWKS refetch (at most one per
//! `--oidc-refresh-interval`), so rotated keys are picked up and retired
//! ones dropped; both are fetched again once older than
//! `--oidc-keys-max-age`. The issuer is compared as a string, exactly
//! (OpenID Connect Discovery 1.0 §4.3 and Core §3.1.3.7): the discovery
//! document's `issuer` and every token's `iss` must equal `--oidc-issuer`
//! character for character, a trailing slash included; only the discovery
//! URL is built without the trailing slash (Discovery §4.1). A private CA
//! for the issuer's https endpoints is trusted with `--oidc-ca-file`. Only
//! RS256 and ES256 are accepted; `iss`, `aud`, `exp` (and
//! `nbf` if present) are checked with 30 s leeway. Roles come from a
//! configurable claim ([`roles`]).
//!
//! An OIDC identity is its `sub`: it owns reservations and purchases as a
//! consumer, offers as a provider (as if it were a cluster ID), exactly like
//! the `sub` of the catalog's own tokens. The issuer is trusted to keep
//! subjects distinct from the cluster IDs providers register.

mod config;
mod keys;
mod roles;

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;

pub use config::OidcConfig;
pub use keys::KeyCache;
pub use roles::RoleMapping;

use super::{Caller, Role};
use crate::http::ApiError;

/// Leeway on `exp`/`nbf` for clock skew.
const LEEWAY_SECS: u64 = 30;
const MAX_CLAIM_LEN: usize = 256;

/// Why an OIDC token was refused (all 401; details go to the debug log).
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("malformed token: {0}")]
    Malformed(String),
    #[error("algorithm {0:?} is not accepted (RS256 and ES256 only)")]
    Algorithm(Algorithm),
    #[error("no signing key {0:?} in the issuer's JWKS")]
    UnknownKey(Option<String>),
    #[error("the issuer's keys cannot be fetched: {0}")]
    Fetch(String),
    /// The discovery document names another issuer: a configuration error
    /// (or an impostor), never retried faster than a fetch failure.
    #[error("{0}")]
    IssuerMismatch(String),
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("claim {0} is missing or malformed")]
    Claim(&'static str),
}

/// A verified OIDC identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub subject: String,
    pub name: String,
    pub roles: Vec<Role>,
    /// The token's `exp` (Unix seconds).
    pub expires_at: i64,
}

/// Verifies an issuer's tokens.
pub struct OidcVerifier {
    issuer: String,
    audience: String,
    /// The web UI's public client (`--oidc-client-id`), if any.
    client_id: Option<String>,
    mapping: RoleMapping,
    keys: KeyCache,
}

impl std::fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl OidcVerifier {
    /// The verifier `config` asks for, or None without `--oidc-issuer`.
    pub fn from_config(config: &OidcConfig) -> anyhow::Result<Option<Self>> {
        let Some(issuer) = &config.oidc_issuer else {
            return Ok(None);
        };
        let Some(audience) = config.oidc_audience.clone().filter(|a| !a.is_empty()) else {
            anyhow::bail!(
                "--oidc-issuer needs --oidc-audience (the audience this catalog's tokens carry)"
            );
        };
        let mapping = RoleMapping::new(&config.oidc_roles_claim, &config.oidc_role_map)?;
        let keys = KeyCache::new(
            issuer,
            config.oidc_refresh_interval,
            config.oidc_keys_max_age,
            config.oidc_timeout.max(Duration::from_millis(100)),
            config.oidc_ca_file.as_deref(),
        )?;
        tracing::info!(issuer = %issuer, audience = %audience, "accepting OpenID Connect tokens");
        Ok(Some(OidcVerifier {
            issuer: keys.issuer().to_string(),
            audience,
            client_id: config.oidc_client_id.clone().filter(|c| !c.is_empty()),
            mapping,
            keys,
        }))
    }

    /// The issuer and the web UI's client ID, when the UI may sign users
    /// in here (`--oidc-client-id` set).
    pub fn browser_client(&self) -> Option<(&str, &str)> {
        self.client_id
            .as_deref()
            .map(|client| (self.issuer.as_str(), client))
    }

    /// Verify `token` and read its identity.
    pub async fn verify(&self, token: &str) -> Result<Identity, OidcError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| OidcError::Malformed(e.to_string()))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(OidcError::Algorithm(header.alg));
        }
        let key = self.keys.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)?.claims;
        let text = |v: &Value| {
            v.as_str()
                .filter(|s| {
                    !s.is_empty() && s.len() <= MAX_CLAIM_LEN && !s.chars().any(char::is_control)
                })
                .map(str::to_string)
        };
        let subject = claims
            .get("sub")
            .and_then(text)
            .ok_or(OidcError::Claim("sub"))?;
        let name = ["name", "preferred_username", "email"]
            .iter()
            .find_map(|c| claims.get(*c).and_then(text))
            .unwrap_or_else(|| subject.clone());
        // Required and checked by the validation above.
        let expires_at = claims
            .get("exp")
            .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
            .ok_or(OidcError::Claim("exp"))?;
        Ok(Identity {
            subject,
            name,
            roles: self.mapping.roles(&claims),
            expires_at,
        })
    }

    /// [`OidcVerifier::verify`] as a request's [`Caller`].
    pub async fn caller(&self, token: &str) -> Result<Caller, ApiError> {
        match self.verify(token).await {
            Ok(id) => Ok(Caller {
                cluster_id: id.subject,
                cluster_name: id.name,
                roles: id.roles,
                expires_at: id.expires_at,
            }),
            Err(OidcError::IssuerMismatch(e)) => {
                tracing::error!(error = %e, "OIDC issuer misconfigured: no OIDC token can be verified");
                Err(ApiError::Unavailable(
                    "the identity provider's keys cannot be fetched right now".into(),
                ))
            }
            Err(OidcError::Fetch(e)) => {
                tracing::warn!(error = %e, "OIDC keys unavailable");
                Err(ApiError::Unavailable(
                    "the identity provider's keys cannot be fetched right now".into(),
                ))
            }
            Err(e) => {
                tracing::debug!(error = %e, "OIDC token refused");
                Err(ApiError::Unauthorized("invalid or expired token".into()))
            }
        }
    }
}
