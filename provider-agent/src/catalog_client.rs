//! The catalog's provider REST API, as the agent uses it: authenticate with
//! the provider's peering credentials, keep the bearer token fresh, read an
//! offer, write it back.
//!
//! Every failure is sorted into what the agent should do about it
//! ([`CatalogError::is_fatal`]): retry later (the catalog is down, busy or
//! restarting), try again at once (a version conflict), or stop (the
//! credentials are refused, the offer is someone else's).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument;

use crate::config::Credentials;

/// Largest answer read from the catalog; an offer is a few KiB at most.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// A token is renewed once this share of its lifetime has passed.
const RENEW_AFTER_SHARE: f64 = 0.8;
/// A token that looks expired on arrival (the catalog's clock is ahead of
/// ours) is used this long anyway: the catalog checks expiry by its own
/// clock, and a 401 would make us renew it sooner.
const SKEWED_TOKEN_USE: Duration = Duration::from_secs(30);
/// Long-lived tokens are renewed at least this often.
const MAX_TOKEN_USE: Duration = Duration::from_secs(24 * 3600);

/// What went wrong talking to the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// `POST /authenticate` answered 401: the cluster ID is registered with
    /// other credentials.
    #[error("the catalog refused the credentials of cluster {cluster_id}: {message}")]
    BadCredentials { cluster_id: String, message: String },
    /// `POST /authenticate` answered 400: a field of the credentials file is
    /// not acceptable to the catalog.
    #[error("the catalog rejected the credentials file: {0}")]
    InvalidCredentials(String),
    /// 403: the offer belongs to another provider.
    #[error("the catalog refused the write: {0}")]
    Forbidden(String),
    /// 409: the offer changed since it was read.
    #[error("the offer changed while it was being updated: {0}")]
    Conflict(String),
    /// 400, 413, 415: the catalog refused the offer we sent.
    #[error("the catalog rejected the offer (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// 401 on a write even with a token issued a moment before (a catalog
    /// whose signing key changes under us); worth retrying later.
    #[error("the catalog refused a token it had just issued: {0}")]
    TokenRefused(String),
    /// Unreachable, timed out, 5xx, 429, or an answer we cannot use: worth
    /// retrying later.
    #[error("{0}")]
    Unavailable(String),
}

impl CatalogError {
    /// Errors that retrying cannot fix: the agent must stop.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            CatalogError::BadCredentials { .. }
                | CatalogError::InvalidCredentials(_)
                | CatalogError::Forbidden(_)
        )
    }
}

/// The result of a successful write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// 201 (the offer did not exist) rather than 200.
    pub created: bool,
    /// The offer's version after the write.
    pub version: u64,
}

/// `{"token", "expiresAt"}` from `POST /authenticate`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Issued {
    token: String,
    expires_at: DateTime<Utc>,
}

/// The catalog's error body (only the part we show).
#[derive(Deserialize)]
struct ErrorBody {
    message: String,
}

struct Token {
    bearer: String,
    renew_at: Instant,
}

/// A client of one catalog, authenticated as one provider.
pub struct CatalogClient {
    http: reqwest::Client,
    base: Url,
    credentials: Credentials,
    /// Where `credentials` came from: re-read when the catalog refuses
    /// them, since an operator who rotated them (`POST
    /// /authenticate/rotate`) updates the file, not the running agent.
    credentials_file: Option<PathBuf>,
    token: Option<Token>,
}

impl std::fmt::Debug for CatalogClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogClient")
            .field("base", &self.base.as_str())
            .field("cluster_id", &self.credentials.cluster_id)
            .field("authenticated", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

impl CatalogClient {
    /// A client of the catalog at `base` (nothing is contacted yet).
    /// `timeout` bounds each request.
    pub fn new(
        base: Url,
        credentials: Credentials,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        // reqwest's rustls backend needs a process-wide crypto provider; an
        // error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .timeout(timeout)
            .user_agent(concat!("provider-agent/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut base = base;
        // Url::join replaces the last segment of a base without a trailing
        // slash: "http://host/broker" + "offer/x" would lose "broker".
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        Ok(Self {
            http,
            base,
            credentials,
            credentials_file: None,
            token: None,
        })
    }

    /// Re-read `path` when the catalog refuses the credentials, and carry
    /// on with the new ones if they changed.
    pub fn with_credentials_file(mut self, path: PathBuf) -> Self {
        self.credentials_file = Some(path);
        self
    }

    /// The cluster this client authenticates as.
    pub fn cluster_id(&self) -> &str {
        &self.credentials.cluster_id
    }

    fn url(&self, path: &str) -> Result<Url, CatalogError> {
        self.base
            .join(path)
            .map_err(|e| CatalogError::Unavailable(format!("cannot build the URL for {path}: {e}")))
    }

    /// Exchange the credentials for a fresh token. Refused, and the
    /// credentials file now says something else: once more with those.
    pub async fn authenticate(&mut self) -> Result<(), CatalogError> {
        let refused = match self.authenticate_once().await {
            Err(e @ CatalogError::BadCredentials { .. }) => e,
            other => return other,
        };
        let Some(path) = &self.credentials_file else {
            return Err(refused);
        };
        match Credentials::load(path) {
            Ok(fresh) if fresh != self.credentials => {
                tracing::info!(path = %path.display(), "the catalog refused the credentials and the file has changed; authenticating with the file's");
                self.credentials = fresh;
                self.authenticate_once().await
            }
            Ok(_) => Err(refused),
            Err(e) => {
                tracing::warn!(error = %e, "cannot re-read the credentials file");
                Err(refused)
            }
        }
    }

    async fn authenticate_once(&mut self) -> Result<(), CatalogError> {
        let url = self.url("authenticate")?;
        let request = self.http.post(url).json(&self.credentials);
        let span = tracing::info_span!("authenticate", cluster_id = %self.credentials.cluster_id);
        let (status, body) = send(request).instrument(span).await?;
        match status {
            StatusCode::OK => {
                let issued: Issued = serde_json::from_slice(&body).map_err(|e| {
                    CatalogError::Unavailable(format!(
                        "the catalog answered /authenticate with an unusable body: {e}"
                    ))
                })?;
                let renew_in = renew_after(issued.expires_at - Utc::now());
                tracing::info!(expires_at = %issued.expires_at, renew_in = ?renew_in, "authenticated to the catalog");
                let now = Instant::now();
                self.token = Some(Token {
                    bearer: issued.token,
                    renew_at: now.checked_add(renew_in).unwrap_or(now + MAX_TOKEN_USE),
                });
                Ok(())
            }
            StatusCode::UNAUTHORIZED => Err(CatalogError::BadCredentials {
                cluster_id: self.credentials.cluster_id.clone(),
                message: error_message(&body),
            }),
            StatusCode::BAD_REQUEST => Err(CatalogError::InvalidCredentials(error_message(&body))),
            other => Err(unexpected("POST /authenticate", other, &body)),
        }
    }

    /// Authenticate unless the current token is still comfortably valid.
    pub async fn ensure_token(&mut self) -> Result<(), CatalogError> {
        let fresh = self
            .token
            .as_ref()
            .is_some_and(|t| Instant::now() < t.renew_at);
        if !fresh {
            if self.token.is_some() {
                tracing::debug!("renewing the catalog token before it expires");
            }
            self.authenticate().await?;
        }
        Ok(())
    }

    /// `GET /offer/{id}`: the offer's JSON, or `None` if there is none.
    pub async fn get_offer(&self, id: &str) -> Result<Option<Value>, CatalogError> {
        let url = self.url(&format!("offer/{id}"))?;
        let span = tracing::debug_span!("get_offer", offer = id);
        let (status, body) = send(self.http.get(url)).instrument(span).await?;
        match status {
            StatusCode::OK => {
                let offer: Value = serde_json::from_slice(&body).map_err(|e| {
                    CatalogError::Unavailable(format!(
                        "GET /offer/{id} answered with invalid JSON: {e}"
                    ))
                })?;
                if !offer.is_object() {
                    return Err(CatalogError::Unavailable(format!(
                        "GET /offer/{id} answered with something other than an offer"
                    )));
                }
                Ok(Some(offer))
            }
            StatusCode::NOT_FOUND => Ok(None),
            other => Err(unexpected(&format!("GET /offer/{id}"), other, &body)),
        }
    }

    /// `POST /offer/{id}`: create or replace the offer. A token the catalog
    /// no longer accepts (401) is replaced once and the write retried.
    pub async fn put_offer(&mut self, id: &str, offer: &Value) -> Result<Written, CatalogError> {
        self.ensure_token().await?;
        let span = tracing::info_span!("put_offer", offer = id);
        async {
            match self.try_put(id, offer).await {
                Err(CatalogError::TokenRefused(reason)) => {
                    tracing::info!(%reason, "the catalog refused our token; authenticating again");
                    self.token = None;
                    self.authenticate().await?;
                    self.try_put(id, offer).await
                }
                other => other,
            }
        }
        .instrument(span)
        .await
    }

    async fn try_put(&self, id: &str, offer: &Value) -> Result<Written, CatalogError> {
        let url = self.url(&format!("offer/{id}"))?;
        let bearer = self
            .token
            .as_ref()
            .map(|t| t.bearer.as_str())
            .unwrap_or_default();
        let (status, body) = send(self.http.post(url).bearer_auth(bearer).json(offer)).await?;
        match status {
            StatusCode::OK | StatusCode::CREATED => {
                #[derive(Deserialize)]
                struct Stored {
                    version: u64,
                }
                let stored: Stored = serde_json::from_slice(&body).map_err(|e| {
                    CatalogError::Unavailable(format!(
                        "POST /offer/{id} succeeded but answered an unusable body: {e}"
                    ))
                })?;
                Ok(Written {
                    created: status == StatusCode::CREATED,
                    version: stored.version,
                })
            }
            StatusCode::UNAUTHORIZED => Err(CatalogError::TokenRefused(error_message(&body))),
            StatusCode::FORBIDDEN => Err(CatalogError::Forbidden(format!(
                "offer {id}: {}",
                error_message(&body)
            ))),
            StatusCode::CONFLICT => Err(CatalogError::Conflict(error_message(&body))),
            StatusCode::BAD_REQUEST
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNSUPPORTED_MEDIA_TYPE
            | StatusCode::UNPROCESSABLE_ENTITY => Err(CatalogError::Rejected {
                status: status.as_u16(),
                message: error_message(&body),
            }),
            other => Err(unexpected(&format!("POST /offer/{id}"), other, &body)),
        }
    }
}

/// How long to use a token that expires in `remaining` (by our clock).
fn renew_after(remaining: chrono::TimeDelta) -> Duration {
    match remaining.to_std() {
        Ok(lifetime) if !lifetime.is_zero() => lifetime
            .mul_f64(RENEW_AFTER_SHARE)
            .clamp(Duration::from_millis(100), MAX_TOKEN_USE),
        _ => SKEWED_TOKEN_USE,
    }
}

/// Send a request; read at most [`MAX_RESPONSE_BYTES`] of the answer.
async fn send(request: reqwest::RequestBuilder) -> Result<(StatusCode, Vec<u8>), CatalogError> {
    let response = request.send().await.map_err(|e| transport(&e))?;
    let status = response.status();
    let body = read_limited(response, MAX_RESPONSE_BYTES).await?;
    Ok((status, body))
}

/// A transport failure, with its causes ("connection refused" is in a
/// source, not in reqwest's own message).
fn transport(error: &reqwest::Error) -> CatalogError {
    use std::error::Error as _;
    let mut text = if error.is_timeout() {
        "the catalog did not answer in time".to_string()
    } else if error.is_connect() {
        "cannot connect to the catalog".to_string()
    } else {
        "request to the catalog failed".to_string()
    };
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = source.and_then(|s| s.source());
    }
    CatalogError::Unavailable(text)
}

/// Any other status: worth retrying later, with what the catalog said.
fn unexpected(what: &str, status: StatusCode, body: &[u8]) -> CatalogError {
    CatalogError::Unavailable(format!(
        "{what} answered HTTP {}: {}",
        status.as_u16(),
        error_message(body)
    ))
}

/// The `message` of the catalog's error body, or a short excerpt of a body
/// of another shape (a proxy's error page).
fn error_message(body: &[u8]) -> String {
    if let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) {
        return parsed.message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(no details)".into();
    }
    let mut excerpt: String = text.chars().take(200).collect();
    if excerpt.len() < text.len() {
        excerpt.push('…');
    }
    excerpt
}

/// The whole body, refusing one larger than `limit` before buffering it.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, CatalogError> {
    let too_large =
        || CatalogError::Unavailable(format!("the catalog's answer is larger than {limit} bytes"));
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_before_they_expire() {
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(2)),
            Duration::from_millis(1600)
        );
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(-5)),
            SKEWED_TOKEN_USE
        );
        assert_eq!(renew_after(chrono::TimeDelta::days(3650)), MAX_TOKEN_USE);
    }

    #[test]
    fn error_messages_come_from_the_catalogs_body() {
        assert_eq!(
            error_message(br#"{"error":"forbidden","message":"not yours"}"#),
            "not yours"
        );
        assert_eq!(error_message(b""), "(no details)");
        let long = "x".repeat(500);
        assert_eq!(error_message(long.as_bytes()).chars().count(), 201);
    }

    #[test]
    fn only_refusals_are_fatal() {
        let bad = CatalogError::BadCredentials {
            cluster_id: "c".into(),
            message: "m".into(),
        };
        assert!(bad.is_fatal());
        assert!(CatalogError::Forbidden("m".into()).is_fatal());
        assert!(CatalogError::InvalidCredentials("m".into()).is_fatal());
        assert!(!CatalogError::Unavailable("m".into()).is_fatal());
        assert!(!CatalogError::Conflict("m".into()).is_fatal());
        assert!(!CatalogError::TokenRefused("m".into()).is_fatal());
        assert!(!CatalogError::Rejected {
            status: 400,
            message: "m".into()
        }
        .is_fatal());
    }
}
