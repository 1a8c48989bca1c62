//! The catalog's own JWTs: HS256 only (the algorithm is pinned on verify, so
//! `alg: none` or an RS/HS confusion is refused), with `iss`, `aud`, `exp`
//! and `sub` required and checked.
//!
//! With a [`KeySource`] (the MongoDB store's shared key, when none is
//! configured) the key is not fixed: every process on one database must
//! sign with the same one, and a database that was wiped or re-keyed by a
//! restarted process changes it. The service then re-reads the key when a
//! token fails verification with the cached one and at a fixed interval
//! ([`TokenService::follow`]), logs every change, and restores its own key
//! to a database that lost it, so processes never silently diverge.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use chrono::Utc;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::key::KeySource;
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

/// Fewest seconds between two re-reads of the key caused by tokens that
/// failed verification: a flood of bad tokens costs the database one read
/// per second, not one per request.
const MIN_REFRESH_GAP: Duration = Duration::from_secs(1);
/// How often [`TokenService::follow`] re-reads the shared key.
pub const KEY_FOLLOW_INTERVAL: Duration = Duration::from_secs(5);

/// One signing key, ready to sign and verify.
struct Keys {
    key: SigningKey,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl Keys {
    fn new(key: &SigningKey) -> Arc<Self> {
        Arc::new(Keys {
            key: key.clone(),
            encoding: EncodingKey::from_secret(key.bytes()),
            decoding: DecodingKey::from_secret(key.bytes()),
        })
    }
}

/// Issues and verifies catalog tokens with the current key (see the module
/// docs for a key that can change).
pub struct TokenService {
    keys: RwLock<Arc<Keys>>,
    validation: Validation,
    settings: TokenSettings,
    source: Option<Arc<dyn KeySource>>,
    /// When a token last caused a re-read; locked for the re-read (single
    /// flight).
    refreshed: tokio::sync::Mutex<Option<Instant>>,
}

impl TokenService {
    pub fn new(key: &SigningKey, settings: TokenSettings) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 30;
        TokenService {
            keys: RwLock::new(Keys::new(key)),
            validation,
            settings,
            source: None,
            refreshed: tokio::sync::Mutex::new(None),
        }
    }

    /// Follow the key that `source` holds (see the module docs).
    pub fn with_source(mut self, source: Arc<dyn KeySource>) -> Self {
        self.source = Some(source);
        self
    }

    /// A poisoned lock only means a panic elsewhere; the key stays usable.
    fn keys(&self) -> Arc<Keys> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The key tokens are signed with now.
    pub fn current_key(&self) -> SigningKey {
        self.keys().key.clone()
    }

    /// Re-read the shared key (no-op without a source); true if the key in
    /// use is now another one than `seen`, whoever changed it. `forced`
    /// skips the [`MIN_REFRESH_GAP`].
    async fn refresh(&self, seen: &Arc<Keys>, forced: bool) -> bool {
        let Some(source) = &self.source else {
            return false;
        };
        let mut last = self.refreshed.lock().await;
        let current = self.keys();
        if !Arc::ptr_eq(seen, &current) {
            // Another request re-read it while this one waited.
            return true;
        }
        if !forced {
            // Only re-reads caused by tokens count: a periodic one must not
            // make the next token from a re-keyed process wait a gap.
            if last.is_some_and(|t| t.elapsed() < MIN_REFRESH_GAP) {
                return false;
            }
            *last = Some(Instant::now());
        }
        let shared = match source.shared_key(current.key.bytes()).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, "could not re-read the shared JWT signing key; keeping the one in use");
                return false;
            }
        };
        if shared == current.key.bytes() {
            return false;
        }
        match SigningKey::from_bytes(shared) {
            Ok(key) => {
                tracing::warn!(
                    "the shared JWT signing key in the database changed (wiped, or re-keyed by another process); following it: tokens signed with the previous key are refused from now on"
                );
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Keys::new(&key);
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "the shared JWT signing key in the database is unusable; keeping the one in use");
                false
            }
        }
    }

    /// Re-read the shared key every [`KEY_FOLLOW_INTERVAL`] until
    /// `shutdown`, so a process that only issues tokens follows a change
    /// too, and a wiped database gets this process's key back before a
    /// restarted process stores a new one. Returns at once without a source.
    pub async fn follow(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        if self.source.is_none() {
            return;
        }
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(KEY_FOLLOW_INTERVAL) => {}
            }
            let seen = self.keys();
            self.refresh(&seen, true).await;
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
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.keys().encoding,
        )?;
        Ok(IssuedToken { token, expires_at })
    }

    /// Verify with the key in use, without consulting the source.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        Self::verify_with(&self.keys(), &self.validation, token)
    }

    fn verify_with(
        keys: &Keys,
        validation: &Validation,
        token: &str,
    ) -> Result<Claims, TokenError> {
        Ok(jsonwebtoken::decode::<Claims>(token, &keys.decoding, validation)?.claims)
    }

    /// Verify; a token whose signature does not match the cached key makes
    /// the service re-read the shared key first (another process may sign
    /// with a newer one), then try again if it changed.
    pub async fn verify_current(&self, token: &str) -> Result<Claims, TokenError> {
        let seen = self.keys();
        match Self::verify_with(&seen, &self.validation, token) {
            Err(TokenError::Invalid(e))
                if matches!(e.kind(), jsonwebtoken::errors::ErrorKind::InvalidSignature) =>
            {
                if self.refresh(&seen, false).await {
                    return self.verify(token);
                }
                Err(TokenError::Invalid(e))
            }
            other => other,
        }
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
