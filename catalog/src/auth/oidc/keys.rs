//! The issuer's signing keys: discovery document → `jwks_uri` → JWKS, cached
//! by `kid`.
//!
//! A lookup that misses (or finds the cache older than its maximum age)
//! refetches, but at most once per refresh interval however many requests
//! miss at once: one fetch runs, the others wait for it and look again. A
//! refetch replaces the whole set, so a key the issuer retired stops
//! verifying as soon as the new set is in.
//!
//! The discovery document is read once and its `jwks_uri` kept: a refetch
//! triggered by an unknown `kid` reads only the JWKS. The document is read
//! again when the keys have grown older than their maximum age, or after a
//! fetch failed. Its `issuer` must be identical to the configured issuer
//! (OpenID Connect Discovery 1.0 §4.3: no trailing-slash or case folding).

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};

use super::OidcError;

/// Largest discovery document or JWKS accepted.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Largest `--oidc-ca-file` read: a system bundle of every public root is
/// about 200 KiB.
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;

#[derive(Clone)]
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct Cached {
    keys: Vec<Key>,
    fetched_at: Option<Instant>,
    /// The discovery document's `jwks_uri`, once read and checked.
    jwks_uri: Option<Url>,
}

/// See the module docs.
pub struct KeyCache {
    http: reqwest::Client,
    issuer: String,
    refresh_interval: Duration,
    max_age: Duration,
    cached: RwLock<Cached>,
    /// Held while fetching; holds when the last fetch started.
    fetching: Mutex<Option<Instant>>,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

/// https, or http to a loopback host (for tests and sidecar issuers).
fn check_url(what: &str, url: &Url) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" => match url.host() {
            Some(url::Host::Ipv4(ip)) if ip.is_loopback() => Ok(()),
            Some(url::Host::Ipv6(ip)) if ip.is_loopback() => Ok(()),
            Some(url::Host::Domain("localhost")) => Ok(()),
            _ => Err(format!(
                "{what} {url} must use https (http only on loopback)"
            )),
        },
        other => Err(format!("{what} {url}: unsupported scheme {other}")),
    }
}

/// The algorithm a JWK verifies, if it is one we accept.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        _ => return None,
    };
    let declared = match jwk.common.key_algorithm {
        None => return Some(by_type),
        Some(KeyAlgorithm::RS256) => Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => Algorithm::ES256,
        Some(_) => return None,
    };
    (declared == by_type).then_some(by_type)
}

impl KeyCache {
    pub fn new(
        issuer: &str,
        refresh_interval: Duration,
        max_age: Duration,
        timeout: Duration,
        ca_file: Option<&std::path::Path>,
    ) -> anyhow::Result<Self> {
        // Kept verbatim: tokens' `iss` and the discovery document's `issuer`
        // must equal it exactly (a trailing slash included).
        let issuer = issuer.to_string();
        let url =
            Url::parse(&issuer).map_err(|e| anyhow::anyhow!("--oidc-issuer {issuer}: {e}"))?;
        check_url("--oidc-issuer", &url).map_err(anyhow::Error::msg)?;
        // rustls needs a process-wide crypto provider; installing it twice
        // is harmless (the second attempt just reports the first).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(path) = ca_file {
            // Bounded like every file a flag names (F-12): `/dev/zero`, a
            // FIFO or a huge sparse file is refused at once.
            let pem = edge::config_file::read_bytes("--oidc-ca-file", path, MAX_CA_FILE_BYTES)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| anyhow::anyhow!("--oidc-ca-file {}: {e}", path.display()))?;
            if certs.is_empty() {
                anyhow::bail!(
                    "--oidc-ca-file {}: no PEM certificate in it",
                    path.display()
                );
            }
            for cert in certs {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http.build()?;
        Ok(KeyCache {
            http,
            issuer,
            refresh_interval,
            max_age,
            cached: RwLock::new(Cached::default()),
            fetching: Mutex::new(None),
        })
    }

    /// The issuer as tokens must name it.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    fn find(cached: &Cached, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let usable = cached.keys.iter().filter(|k| k.alg == alg);
        match kid {
            Some(kid) => usable
                .filter(|k| k.kid.as_deref() == Some(kid))
                .map(|k| k.key.clone())
                .next(),
            // No kid: only unambiguous when one key fits.
            None => {
                let fits: Vec<&Key> = usable.collect();
                (fits.len() == 1).then(|| fits[0].key.clone())
            }
        }
    }

    fn fresh(&self, cached: &Cached) -> bool {
        cached
            .fetched_at
            .is_some_and(|t| t.elapsed() < self.max_age)
    }

    /// The key for a token's `kid` and `alg`.
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, OidcError> {
        let asked_at = Instant::now();
        {
            let cached = self.cached.read().await;
            if self.fresh(&cached) {
                if let Some(k) = Self::find(&cached, kid, alg) {
                    return Ok(k);
                }
            }
        }
        self.refresh(asked_at).await?;
        let cached = self.cached.read().await;
        Self::find(&cached, kid, alg).ok_or_else(|| OidcError::UnknownKey(kid.map(str::to_string)))
    }

    /// Refetch unless another fetch started after `asked_at`, or one ran
    /// within the refresh interval and the cache is still fresh.
    async fn refresh(&self, asked_at: Instant) -> Result<(), OidcError> {
        let mut last = self.fetching.lock().await;
        if let Some(t) = *last {
            if t >= asked_at {
                return Ok(());
            }
            let fresh = self.fresh(&*self.cached.read().await);
            if fresh && t.elapsed() < self.refresh_interval {
                return Ok(());
            }
        }
        *last = Some(Instant::now());
        // The discovery document is read again only when the keys expired
        // (or none were ever fetched, or the last fetch failed).
        let known = {
            let cached = self.cached.read().await;
            self.fresh(&cached)
                .then(|| cached.jwks_uri.clone())
                .flatten()
        };
        let result = match known {
            Some(jwks_uri) => self.fetch_keys(&jwks_uri).await.map(|k| (k, jwks_uri)),
            None => self.fetch().await,
        };
        let (keys, jwks_uri) = match result {
            Ok(r) => r,
            Err(e) => {
                // Rediscover on the next attempt.
                self.cached.write().await.jwks_uri = None;
                return Err(e);
            }
        };
        tracing::info!(issuer = %self.issuer, keys = keys.len(), "OIDC signing keys fetched");
        *self.cached.write().await = Cached {
            keys,
            fetched_at: Some(Instant::now()),
            jwks_uri: Some(jwks_uri),
        };
        Ok(())
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &Url) -> Result<T, OidcError> {
        let fetch = |e: String| OidcError::Fetch(format!("{url}: {e}"));
        let mut resp = self
            .http
            .get(url.clone())
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| fetch(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(fetch(format!("status {}", resp.status())));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(fetch("document too large".into()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| fetch(e.to_string()))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(fetch("document too large".into()));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| fetch(e.to_string()))
    }

    /// Discovery document, then the JWKS it names.
    async fn fetch(&self) -> Result<(Vec<Key>, Url), OidcError> {
        // Discovery §4.1: a trailing slash is dropped before the suffix.
        let discovery_url = Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        ))
        .map_err(|e| OidcError::Fetch(e.to_string()))?;
        let discovery: Discovery = self.get_json(&discovery_url).await?;
        if discovery.issuer != self.issuer {
            return Err(OidcError::IssuerMismatch(format!(
                "the discovery document {discovery_url} names issuer {:?}, but --oidc-issuer is {:?}: \
                 they must be identical, trailing slash included (OpenID Connect Discovery 1.0 §4.3)",
                discovery.issuer, self.issuer
            )));
        }
        let jwks_url = Url::parse(&discovery.jwks_uri)
            .map_err(|e| OidcError::Fetch(format!("jwks_uri: {e}")))?;
        check_url("jwks_uri", &jwks_url).map_err(OidcError::Fetch)?;
        let keys = self.fetch_keys(&jwks_url).await?;
        Ok((keys, jwks_url))
    }

    /// The usable keys of the JWKS at `jwks_url`.
    async fn fetch_keys(&self, jwks_url: &Url) -> Result<Vec<Key>, OidcError> {
        let set: Value = self.get_json(jwks_url).await?;
        let entries = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| OidcError::Fetch("the JWKS has no `keys` array".into()))?;
        let mut keys = Vec::new();
        for entry in entries {
            // Keys we cannot use (other types, encryption keys) are skipped,
            // not fatal: issuers publish several kinds.
            let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
                continue;
            };
            if entry
                .get("use")
                .and_then(Value::as_str)
                .is_some_and(|u| u != "sig")
            {
                continue;
            }
            let Some(alg) = algorithm_of(&jwk) else {
                continue;
            };
            let Ok(key) = DecodingKey::from_jwk(&jwk) else {
                continue;
            };
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
            });
        }
        Ok(keys)
    }
}
