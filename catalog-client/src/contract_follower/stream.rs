//! Opening `GET /contract-changes` with the session's bearer token, and why
//! a stream could not be opened.

use std::time::Duration;

use reqwest::header::ACCEPT;
use reqwest::{Method, Response, StatusCode};

use crate::http::error_message;
use crate::routes;
use crate::session::Session;

/// The stream's own request timeout, in place of the client's overall one
/// (a stream lasts until the token expires; silence is watched by the
/// idle timeout instead). The connect timeout stays the client's.
const STREAM_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Most of a refusal's body read for its message.
const MAX_REFUSAL_BYTES: usize = 64 * 1024;

/// Why no stream was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub reason: String,
    /// The catalog refused the `since` asked for (400, 410 or 422 to a
    /// resume): the next attempt asks for a snapshot.
    pub bad_resume: bool,
}

impl Refusal {
    fn new(reason: String) -> Self {
        Self {
            reason,
            bad_resume: false,
        }
    }
}

/// The stream's route: only active contracts in a snapshot; resumed after
/// `since` when given.
pub(super) fn route(since: Option<u64>) -> String {
    match since {
        Some(since) => format!("{}?active=true&since={since}", routes::CONTRACT_CHANGES),
        None => format!("{}?active=true", routes::CONTRACT_CHANGES),
    }
}

/// Open the stream (its answer's headers within `wait`); a 401 to a token
/// the session can renew renews it and asks once more.
pub(super) async fn open(
    session: &mut Session,
    since: Option<u64>,
    wait: Duration,
) -> Result<Response, Refusal> {
    let route = route(since);
    session
        .ensure_token()
        .await
        .map_err(|e| Refusal::new(e.to_string()))?;
    let mut response = send(session, &route, wait).await?;
    if response.status() == StatusCode::UNAUTHORIZED && session.renews_token() {
        tracing::info!(
            "the catalog refused our token on the contract stream; authenticating again"
        );
        session.forget_token();
        session
            .ensure_token()
            .await
            .map_err(|e| Refusal::new(e.to_string()))?;
        response = send(session, &route, wait).await?;
    }
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let message = error_message(&read_some(response).await);
    let reason = match status {
        StatusCode::NOT_FOUND => format!(
            "the catalog has no contract stream (GET /{} answered HTTP 404: {message})",
            routes::CONTRACT_CHANGES
        ),
        _ => format!(
            "GET /{} answered HTTP {}: {message}",
            routes::CONTRACT_CHANGES,
            status.as_u16()
        ),
    };
    Err(Refusal {
        reason,
        bad_resume: since.is_some()
            && matches!(
                status,
                StatusCode::BAD_REQUEST | StatusCode::GONE | StatusCode::UNPROCESSABLE_ENTITY
            ),
    })
}

async fn send(session: &Session, route: &str, wait: Duration) -> Result<Response, Refusal> {
    let request = session
        .http()
        .request(Method::GET, route)
        .map_err(|e| Refusal::new(e.to_string()))?
        .bearer_auth(session.bearer().unwrap_or_default())
        .header(ACCEPT, "application/x-ndjson")
        .timeout(STREAM_LIFETIME);
    match tokio::time::timeout(wait, request.send()).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) => Err(Refusal::new(describe(&e))),
        Err(_) => Err(Refusal::new(format!(
            "the catalog did not answer GET /{} within {wait:?}",
            routes::CONTRACT_CHANGES
        ))),
    }
}

/// The start of a refusal's body, for its message.
async fn read_some(mut response: Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_REFUSAL_BYTES {
            body.truncate(MAX_REFUSAL_BYTES);
            break;
        }
    }
    body
}

/// A transport failure with its causes ("connection refused" is in a
/// source, not in reqwest's own message).
pub(super) fn describe(error: &reqwest::Error) -> String {
    let head = if error.is_connect() {
        "cannot connect to the catalog"
    } else {
        "the contract stream failed"
    };
    crate::http::with_causes(head.to_string(), error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_names_its_position() {
        assert_eq!(route(None), "contract-changes?active=true");
        assert_eq!(route(Some(42)), "contract-changes?active=true&since=42");
    }
}
