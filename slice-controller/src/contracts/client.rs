//! The catalog, as the `contracts` policy reads it: authenticate as the
//! provider (`POST /authenticate` with the credentials file) and list its
//! active contracts with a conditional `GET /contracts?active=true`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{ETAG, IF_NONE_MATCH};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

use super::book::ContractDoc;

/// Largest contract listing read (a few hundred bytes per contract).
const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;
/// A token is renewed this long before the catalog says it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The credentials file cannot be used (fatal at start).
    #[error("credentials file {path}: {message}")]
    Credentials { path: PathBuf, message: String },
    /// `POST /authenticate` refused the credentials.
    #[error("the catalog refused the credentials of cluster {cluster_id}: {message}")]
    Refused { cluster_id: String, message: String },
    /// Unreachable, timed out, or an answer that cannot be used.
    #[error("{0}")]
    Unavailable(String),
}

/// The provider's catalog credentials: `{clusterID, clusterName, authURL,
/// token}` (what `POST /authenticate` takes). `Debug` hides the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Read `path`: JSON, readable by its owner only (refused if group or
    /// others may read it), with a non-empty cluster ID and token.
    pub fn load(path: &Path) -> Result<Self, ClientError> {
        let bad = |message: String| ClientError::Credentials {
            path: path.to_path_buf(),
            message,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(bad(format!(
                    "is readable by group or others (mode {mode:o}); it holds a secret: chmod 600"
                )));
            }
        }
        let _ = meta;
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        // serde_json's messages name a line and column, never the text.
        let creds: Credentials = serde_json::from_str(&text).map_err(|e| {
            bad(format!(
                "not the expected JSON {{clusterID, clusterName, authURL, token}}: {e}"
            ))
        })?;
        for (field, value) in [("clusterID", &creds.cluster_id), ("token", &creds.token)] {
            if value.trim().is_empty() {
                return Err(bad(format!("{field} is empty")));
            }
        }
        Ok(creds)
    }
}

/// What one listing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// 304: the `ETag` given is still current.
    NotModified,
    /// The contracts, and the `ETag` to ask with next time.
    Contracts {
        etag: Option<String>,
        contracts: Vec<ContractDoc>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Issued {
    token: String,
    expires_at: jiff::Timestamp,
}

struct Bearer {
    token: String,
    renew_at: jiff::Timestamp,
}

/// A client of one catalog, authenticated as one provider.
pub struct CatalogClient {
    http: reqwest::Client,
    base: Url,
    credentials: Credentials,
    bearer: Option<Bearer>,
}

impl std::fmt::Debug for CatalogClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogClient")
            .field("base", &self.base.as_str())
            .field("cluster_id", &self.credentials.cluster_id)
            .finish_non_exhaustive()
    }
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Unavailable(format!("{what}: {e}"))
}

impl CatalogClient {
    /// A client of the catalog at `base`; each request is bounded by
    /// `timeout`. Nothing is contacted yet.
    pub fn new(
        base: Url,
        credentials: Credentials,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        // reqwest's rustls backend needs a process-wide crypto provider; an
        // error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .timeout(timeout)
            .user_agent(concat!("slice-controller/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| unavailable("building the HTTP client", e))?;
        let mut base = base;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        Ok(Self {
            http,
            base,
            credentials,
            bearer: None,
        })
    }

    /// The provider this client authenticates as.
    pub fn cluster_id(&self) -> &str {
        &self.credentials.cluster_id
    }

    fn url(&self, path: &str) -> Result<Url, ClientError> {
        self.base.join(path).map_err(|e| unavailable(path, e))
    }

    /// A bearer token, fresh from `POST /authenticate` when none is held
    /// or it is about to expire.
    async fn token(&mut self) -> Result<String, ClientError> {
        if let Some(b) = &self.bearer {
            if jiff::Timestamp::now() < b.renew_at {
                return Ok(b.token.clone());
            }
        }
        let resp = self
            .http
            .post(self.url("authenticate")?)
            .json(&self.credentials)
            .send()
            .await
            .map_err(|e| unavailable("POST /authenticate", e))?;
        let status = resp.status();
        let body = resp
            .bytes()
            .await
            .map_err(|e| unavailable("POST /authenticate", e))?;
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::BAD_REQUEST {
            return Err(ClientError::Refused {
                cluster_id: self.credentials.cluster_id.clone(),
                message: message(&body),
            });
        }
        if !status.is_success() {
            return Err(ClientError::Unavailable(format!(
                "POST /authenticate answered {status}: {}",
                message(&body)
            )));
        }
        let issued: Issued = serde_json::from_slice(&body)
            .map_err(|e| unavailable("POST /authenticate answered", e))?;
        let renew_at = issued
            .expires_at
            .checked_sub(jiff::SignedDuration::try_from(RENEW_BEFORE).unwrap_or_default())
            .unwrap_or(issued.expires_at);
        self.bearer = Some(Bearer {
            token: issued.token.clone(),
            renew_at,
        });
        Ok(issued.token)
    }

    /// `GET /contracts?active=true`, conditional on `etag`. A 401 (the
    /// token expired or the credentials were rotated) authenticates again
    /// once.
    pub async fn active_contracts(&mut self, etag: Option<&str>) -> Result<Listing, ClientError> {
        let url = self.url("contracts?active=true")?;
        for attempt in 0..2 {
            let token = self.token().await?;
            let mut req = self.http.get(url.clone()).bearer_auth(token);
            if let Some(etag) = etag {
                req = req.header(IF_NONE_MATCH, etag);
            }
            let mut resp = req
                .send()
                .await
                .map_err(|e| unavailable("GET /contracts", e))?;
            let status = resp.status();
            if status == StatusCode::NOT_MODIFIED {
                return Ok(Listing::NotModified);
            }
            if status == StatusCode::UNAUTHORIZED && attempt == 0 {
                self.bearer = None;
                continue;
            }
            let tag = resp
                .headers()
                .get(ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut body = Vec::new();
            while let Some(chunk) = resp
                .chunk()
                .await
                .map_err(|e| unavailable("GET /contracts", e))?
            {
                if body.len() + chunk.len() > MAX_LISTING_BYTES {
                    return Err(ClientError::Unavailable(format!(
                        "GET /contracts answered more than {MAX_LISTING_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                return Err(ClientError::Unavailable(format!(
                    "GET /contracts answered {status}: {}",
                    message(&body)
                )));
            }
            let contracts: Vec<ContractDoc> = serde_json::from_slice(&body)
                .map_err(|e| unavailable("GET /contracts answered", e))?;
            return Ok(Listing::Contracts {
                etag: tag,
                contracts,
            });
        }
        Err(ClientError::Unavailable(
            "GET /contracts refused a token issued a moment before".into(),
        ))
    }
}

/// The catalog's error message, or the start of the body.
fn message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        message: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.message,
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("creds.json");
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        path
    }

    #[test]
    fn credentials_files_are_private_and_complete() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"clusterID":"p1","clusterName":"P","authURL":"","token":"s3cret"}"#;
        let creds = Credentials::load(&write(dir.path(), good, 0o600)).unwrap();
        assert_eq!(creds.cluster_id, "p1");
        assert!(!format!("{creds:?}").contains("s3cret"));
        #[cfg(unix)]
        {
            let e = Credentials::load(&write(dir.path(), good, 0o640)).unwrap_err();
            assert!(e.to_string().contains("chmod 600"), "{e}");
        }
        let e = Credentials::load(&write(dir.path(), r#"{"clusterID":"p1"}"#, 0o600)).unwrap_err();
        assert!(e.to_string().contains("clusterName"), "{e}");
        let empty = r#"{"clusterID":"p1","clusterName":"P","authURL":"","token":" "}"#;
        let e = Credentials::load(&write(dir.path(), empty, 0o600)).unwrap_err();
        assert!(e.to_string().contains("token is empty"), "{e}");
        let leaky = r#"{"clusterID":"p1","clusterName":"P","authURL":"","token":"s3cret","x":1}"#;
        let e = Credentials::load(&write(dir.path(), leaky, 0o600)).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
