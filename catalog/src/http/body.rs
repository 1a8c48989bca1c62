//! Reading request bodies within the configured size limit.

use actix_web::http::header;
use actix_web::{web, HttpRequest};
use futures::StreamExt;

use super::ApiError;

/// The whole body of `req`, refusing (413) anything over `limit` bytes before
/// buffering it, and (415) a declared content type that is not JSON.
pub async fn read_json_body(
    req: &HttpRequest,
    mut payload: web::Payload,
    limit: usize,
) -> Result<web::Bytes, ApiError> {
    if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
        let essence = ct.split(';').next().unwrap_or_default().trim();
        if !(essence == "application/json" || essence.ends_with("+json")) {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type must be application/json, not {essence}"
            )));
        }
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request("body", format!("could not read the body: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}
