//! The transport: one HTTPS client (rustls with the ring provider), the
//! catalog's base URL, answers read up to a bound, and failures described
//! with their causes and the catalog's own error message.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode, Url};

use crate::error::Error;

/// Largest answer read by default; an offer or a contract is a few KiB.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// A catalog at one base URL. Cheap to clone: clones share connections.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    base: Url,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub etag: Option<String>,
    pub body: Vec<u8>,
}

impl Http {
    /// An HTTP client whose requests each take at most `timeout`, sending
    /// `user_agent` (the catalog tells the provider agent apart by it).
    pub fn client(timeout: Duration, user_agent: &str) -> Result<reqwest::Client, Error> {
        // reqwest's rustls backend needs a process-wide crypto provider; an
        // error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .timeout(timeout)
            .user_agent(user_agent)
            .build()
            .map_err(|e| Error::Unavailable(format!("cannot build an HTTP client: {e}")))
    }

    /// The catalog at `base`, through `client` (nothing is contacted yet).
    pub fn new(client: reqwest::Client, base: Url) -> Self {
        let mut base = base;
        // Url::join replaces the last segment of a base without a trailing
        // slash: "http://host/broker" + "offer/x" would lose "broker".
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        Self { client, base }
    }

    /// The catalog's base URL (with a trailing slash).
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// A request to `route` (a path relative to the base, see
    /// [`crate::routes`]).
    pub(crate) fn request(&self, method: Method, route: &str) -> Result<RequestBuilder, Error> {
        let url = self
            .base
            .join(route)
            .map_err(|e| Error::Unavailable(format!("cannot build the URL for {route}: {e}")))?;
        Ok(self.client.request(method, url))
    }

    /// Send `request`; read at most `limit` bytes of the answer.
    pub(crate) async fn send(
        &self,
        request: RequestBuilder,
        limit: usize,
    ) -> Result<Answer, Error> {
        let mut response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let too_large =
            || Error::Unavailable(format!("the catalog's answer is larger than {limit} bytes"));
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
        Ok(Answer { status, etag, body })
    }
}

impl Answer {
    /// The catalog's message for a failed request.
    pub fn message(&self) -> String {
        error_message(&self.body)
    }

    /// The body as `T`, or why it cannot be read.
    pub fn json<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, Error> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::Unavailable(format!("{what} answered with an unusable body: {e}")))
    }

    /// Any status the caller does not expect: worth retrying later.
    pub fn unexpected(&self, what: &str) -> Error {
        Error::Unavailable(format!(
            "{what} answered HTTP {}: {}",
            self.status.as_u16(),
            self.message()
        ))
    }

    /// A refusal retrying will not change.
    pub fn rejected(&self, what: &str) -> Error {
        Error::Rejected {
            what: what.to_string(),
            status: self.status.as_u16(),
            message: self.message(),
        }
    }
}

/// A transport failure, with its causes ("connection refused" is in a
/// source, not in reqwest's own message).
fn transport(error: &reqwest::Error) -> Error {
    let text = if error.is_timeout() {
        "the catalog did not answer in time".to_string()
    } else if error.is_connect() {
        "cannot connect to the catalog".to_string()
    } else {
        "request to the catalog failed".to_string()
    };
    Error::Unavailable(with_causes(text, error))
}

/// `text` followed by `error`'s causes that it does not already say
/// ("connection refused" is in a source, not in reqwest's own message).
pub(crate) fn with_causes(mut text: String, error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = source.and_then(|s| s.source());
    }
    text
}

/// The `message` (else `error`) of the catalog's error body, or a short
/// excerpt of a body of another shape (a proxy's error page).
pub fn error_message(body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(m) = json
            .get("message")
            .or_else(|| json.get("error"))
            .and_then(serde_json::Value::as_str)
        {
            return m.to_string();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_base_keeps_its_path() {
        let http = Http::new(
            Http::client(Duration::from_secs(5), "test").unwrap(),
            "http://h/broker".parse().unwrap(),
        );
        assert_eq!(http.base().as_str(), "http://h/broker/");
        let req = http
            .request(Method::GET, "offer/x")
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(req.url().as_str(), "http://h/broker/offer/x");
    }
}
