//! The catalog's own JWTs: HS256 only (the algorithm is pinned on verify, so
//! `alg: none` or an RS/HS confusion is refused), with `iss`, `aud`, `exp`
//! and `sub` required and checked.

use std::time::Duration;

use chrono::Utc;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::SigningKey;

/// What a token allows. Serialised lower-case in the `roles` claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A cluster operator: manages its own offers.
    Provider,
    /// A buyer: reserves and purchases plans, sees its own records.
    Consumer,
    /// An operator of the catalog: sees every record, disables providers.
    Admin,
}

/// The claims of a catalog token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    /// The provider's cluster ID.
    pub sub: String,
    /// The provider's cluster name when the token was issued.
    pub name: String,
    pub roles: Vec<Role>,
    pub iat: i64,
    pub exp: i64,
    /// Provider tokens: the account's credential generation when issued
    /// (see `providers::ProviderAccount::generation`). Absent means 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gen: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Issuer, audience and lifetime of issued tokens.
#[derive(Debug, Clone)]
pub struct TokenSettings {
    pub issuer: String,
    pub audience: String,
    pub ttl: Duration,
}

// The answer of `POST /authenticate`: a wire type, declared once in
// `catalog-client` (with its schema).
pub use catalog_client::wire::provider::IssuedToken;

/// Why a token was refused (all answer 401; the detail goes to logs only).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("token lifetime out of range")]
    Lifetime,
}

/// Issues and verifies catalog tokens with one key.
pub struct TokenService {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    settings: TokenSettings,
}

impl TokenService {
    pub fn new(key: &SigningKey, settings: TokenSettings) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 30;
        TokenService {
            encoding: EncodingKey::from_secret(key.bytes()),
            decoding: DecodingKey::from_secret(key.bytes()),
            validation,
            settings,
        }
    }

    pub fn settings(&self) -> &TokenSettings {
        &self.settings
    }

    /// A token for `subject` (cluster ID) named `name`, holding `roles`.
    pub fn issue(
        &self,
        subject: &str,
        name: &str,
        roles: Vec<Role>,
    ) -> Result<IssuedToken, TokenError> {
        self.issue_generation(subject, name, roles, 0)
    }

    /// As [`TokenService::issue`], stamped with a provider account's
    /// credential generation.
    pub fn issue_generation(
        &self,
        subject: &str,
        name: &str,
        roles: Vec<Role>,
        gen: u64,
    ) -> Result<IssuedToken, TokenError> {
        let now = Utc::now();
        let ttl =
            chrono::Duration::from_std(self.settings.ttl).map_err(|_| TokenError::Lifetime)?;
        let expires_at = now.checked_add_signed(ttl).ok_or(TokenError::Lifetime)?;
        let claims = Claims {
            iss: self.settings.issuer.clone(),
            aud: self.settings.audience.clone(),
            sub: subject.to_string(),
            name: name.to_string(),
            roles,
            iat: now.timestamp(),
            exp: expires_at.timestamp(),
            gen,
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?;
        Ok(IssuedToken { token, expires_at })
    }

    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        Ok(jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)?.claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(key: &[u8], issuer: &str, ttl: u64) -> TokenService {
        TokenService::new(
            &SigningKey::from_bytes(key.to_vec()).unwrap(),
            TokenSettings {
                issuer: issuer.into(),
                audience: "catalog".into(),
                ttl: Duration::from_secs(ttl),
            },
        )
    }

    #[test]
    fn round_trips_and_checks_key_issuer_and_algorithm() {
        let key = [7u8; 32];
        let s = service(&key, "me", 60);
        let t = s.issue("c1", "cluster one", vec![Role::Provider]).unwrap();
        let c = s.verify(&t.token).unwrap();
        assert_eq!(
            (c.sub.as_str(), c.roles.as_slice()),
            ("c1", &[Role::Provider][..])
        );

        assert!(
            service(&[8u8; 32], "me", 60).verify(&t.token).is_err(),
            "other key"
        );
        assert!(
            service(&key, "someone-else", 60).verify(&t.token).is_err(),
            "other issuer"
        );

        // Same key and claims, another HMAC algorithm: refused (pinned).
        let claims = s.verify(&t.token).unwrap();
        let hs512 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS512),
            &claims,
            &EncodingKey::from_secret(&key),
        )
        .unwrap();
        assert!(s.verify(&hs512).is_err());
    }

    #[test]
    fn expired_tokens_are_refused() {
        let key = [7u8; 32];
        let s = service(&key, "me", 60);
        let mut claims = s
            .verify(&s.issue("c1", "n", vec![Role::Provider]).unwrap().token)
            .unwrap();
        claims.exp = Utc::now().timestamp() - 120;
        let old = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&key),
        )
        .unwrap();
        assert!(s.verify(&old).is_err());
    }
}
