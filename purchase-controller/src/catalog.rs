//! The catalog's contract wire, as the consumer uses it: reserve and buy a
//! plan, read a contract (with its credentials), report its state.
//!
//! Every failure is sorted into what the controller does about it: a
//! contract the catalog does not show this consumer ([`CatalogError::NotFound`]),
//! an ended contract ([`CatalogError::Ended`]), refused credentials, a
//! refused request, or an unreachable catalog (retried with backoff).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

/// Largest answer read from the catalog.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// v0.x peering credentials of a contract.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V0Credentials {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    pub token: String,
}

/// v1 peering credentials: a peering-user kubeconfig.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct V1Credentials {
    pub kubeconfig: String,
}

#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Credentials {
    #[serde(default)]
    pub v0: Option<V0Credentials>,
    #[serde(default)]
    pub v1: Option<V1Credentials>,
}

// Credentials never reach a log line, not even through `{:?}`.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("v0", &self.v0.as_ref().map(|_| "<redacted>"))
            .field("v1", &self.v1.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A contract as `GET /contracts/{id}` shows it to its consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contract {
    pub id: String,
    #[serde(rename = "consumerClusterID", default)]
    pub consumer_cluster_id: Option<String>,
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
    #[serde(default)]
    pub resource_slice_class: String,
    #[serde(default)]
    pub liqo: Vec<String>,
    #[serde(default)]
    pub expires_at: String,
    #[serde(default)]
    pub active: bool,
    #[serde(default)]
    pub ended: Option<String>,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub credentials: Option<Credentials>,
}

/// What went wrong talking to the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// 404: no such contract for this consumer (unknown, or someone else's).
    #[error(
        "the catalog has no contract {0} for this consumer (unknown, or bought by someone else)"
    )]
    NotFound(String),
    /// 409 on a state report: the contract has ended.
    #[error("the contract has ended: {0}")]
    Ended(String),
    /// 401/403: the bearer token is refused.
    #[error("the catalog refused the credentials (HTTP {status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// 400, 409, 410, 422 …: the request is refused; retrying will not help.
    #[error("the catalog refused {what} (HTTP {status}): {message}")]
    Refused {
        what: String,
        status: u16,
        message: String,
    },
    /// Unreachable, timed out, 5xx, 429, or an answer we cannot read.
    #[error("the catalog is unavailable: {0}")]
    Unavailable(String),
}

/// A client of one catalog with one consumer token.
#[derive(Clone)]
pub struct CatalogClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for CatalogClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A reservation the catalog made.
#[derive(Debug, Clone, Deserialize)]
pub struct Reservation {
    pub id: String,
}

impl CatalogClient {
    /// `timeout` bounds each request.
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    /// The HTTP client every catalog client shares.
    pub fn http(timeout: Duration) -> Result<reqwest::Client, CatalogError> {
        // reqwest's rustls backend needs a process-wide crypto provider; an
        // error means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .timeout(timeout)
            .build()
            .map_err(|e| CatalogError::Unavailable(format!("cannot build an HTTP client: {e}")))
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), CatalogError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CatalogError::Unavailable(describe(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CatalogError::Unavailable(describe(&e)))?;
        if bytes.len() > MAX_RESPONSE_BYTES {
            return Err(CatalogError::Unavailable(format!(
                "answer of {} bytes is too large",
                bytes.len()
            )));
        }
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(CatalogError::Unavailable(format!(
                "HTTP {status}: {}",
                message(&json)
            )));
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(CatalogError::Unauthorized {
                status: status.as_u16(),
                message: message(&json),
            });
        }
        Ok((status, json))
    }

    /// `GET /contracts/{id}`: the contract with its credentials.
    pub async fn contract(&self, id: &str) -> Result<Contract, CatalogError> {
        let (status, json) = self
            .call(Method::GET, &format!("/contracts/{}", encode(id)), None)
            .await?;
        match status {
            StatusCode::OK => serde_json::from_value(json)
                .map_err(|e| CatalogError::Unavailable(format!("unreadable contract: {e}"))),
            StatusCode::NOT_FOUND => Err(CatalogError::NotFound(id.to_string())),
            other => Err(refused("the contract read", other, &json)),
        }
    }

    /// `POST /reservations`: hold one unit of a plan.
    pub async fn reserve(&self, offer: &str, plan: &str) -> Result<Reservation, CatalogError> {
        let body = json!({"offerID": offer, "planID": plan});
        let (status, json) = self
            .call(Method::POST, "/reservations", Some(&body))
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::OK => serde_json::from_value(json)
                .map_err(|e| CatalogError::Unavailable(format!("unreadable reservation: {e}"))),
            other => Err(refused("the reservation", other, &json)),
        }
    }

    /// `POST /reservations/{id}/purchase` with our cluster ID.
    pub async fn purchase(&self, id: &str, consumer: &str) -> Result<(), CatalogError> {
        let body = json!({"consumerClusterID": consumer});
        let (status, json) = self
            .call(
                Method::POST,
                &format!("/reservations/{}/purchase", encode(id)),
                Some(&body),
            )
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(CatalogError::NotFound(id.to_string())),
            other => Err(refused("the purchase", other, &json)),
        }
    }

    /// `PUT /contracts/{id}/state`.
    pub async fn report(
        &self,
        id: &str,
        state: &str,
        reason: Option<&str>,
        consumer: Option<&str>,
    ) -> Result<(), CatalogError> {
        let mut body = json!({"state": state});
        if let Some(reason) = reason {
            body["reason"] = json!(reason);
        }
        if let Some(consumer) = consumer {
            body["consumerClusterID"] = json!(consumer);
        }
        let (status, json) = self
            .call(
                Method::PUT,
                &format!("/contracts/{}/state", encode(id)),
                Some(&body),
            )
            .await?;
        match status {
            StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(CatalogError::NotFound(id.to_string())),
            StatusCode::CONFLICT => Err(CatalogError::Ended(message(&json))),
            other => Err(refused("the state report", other, &json)),
        }
    }
}

fn refused(what: &str, status: StatusCode, json: &Value) -> CatalogError {
    CatalogError::Refused {
        what: what.to_string(),
        status: status.as_u16(),
        message: message(json),
    }
}

/// The catalog's `{"error", "message"}` as one line.
fn message(json: &Value) -> String {
    json.get("message")
        .or_else(|| json.get("error"))
        .and_then(Value::as_str)
        .unwrap_or("(no message)")
        .chars()
        .take(500)
        .collect()
}

fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_string()
    } else if error.is_connect() {
        "cannot connect".to_string()
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A path segment: ids are opaque, so anything but unreserved bytes is
/// percent-encoded.
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_percent_encoded_in_paths() {
        assert_eq!(encode("a-b_c.d~1"), "a-b_c.d~1");
        assert_eq!(encode("../x y"), "..%2Fx%20y");
    }

    #[test]
    fn a_contract_reads_with_optional_fields_absent_and_credentials_stay_out_of_debug() {
        let c: Contract = serde_json::from_value(json!({
            "id": "c1", "consumer": "alice", "clusterID": "p1", "clusterName": "prov",
            "offerID": "o", "planID": "small", "resources": {"cpu": "2", "memory": "4Gi"},
            "cost": "1.0", "resourceSliceClass": "liqo-broker", "liqo": ["v0", "v1"],
            "purchasedAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-01-31T00:00:00Z",
            "active": true, "state": "pending", "stateChangedAt": "2026-01-01T00:00:00Z",
            "credentials": {"v1": {"kubeconfig": "secret-kubeconfig"}}
        }))
        .unwrap();
        assert_eq!(c.cluster_id, "p1");
        assert_eq!(c.resources["memory"], "4Gi");
        assert_eq!(c.consumer_cluster_id, None);
        assert!(!format!("{c:?}").contains("secret-kubeconfig"));
    }
}
