//! OSB error answers: `{"error": "<CamelCase>"?, "description": "..."}` with
//! the status codes the v2.17 spec assigns.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::buying::BuyError;
use crate::http::ApiError;
use crate::store::StoreError;

/// An OSB error response. Internal details are logged, never sent.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {description}")]
pub struct OsbError {
    pub status: StatusCode,
    pub code: Option<&'static str>,
    pub description: String,
    /// `Retry-After` seconds, for 429 and 503 (1 if unset).
    pub retry_after: Option<u64>,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    description: &'a str,
}

impl OsbError {
    pub fn new(
        status: StatusCode,
        code: Option<&'static str>,
        description: impl Into<String>,
    ) -> Self {
        OsbError {
            status,
            code,
            description: description.into(),
            retry_after: None,
        }
    }

    /// 429 with `Retry-After: retry_after` seconds.
    pub fn too_many_requests(description: impl Into<String>, retry_after: u64) -> Self {
        OsbError {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, None, description)
        }
    }

    pub fn bad_request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, None, description)
    }

    pub fn not_found(description: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, None, description)
    }

    pub fn gone(description: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, None, description)
    }

    pub fn conflict(description: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, None, description)
    }

    pub fn forbidden(description: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, None, description)
    }

    pub fn async_required() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("AsyncRequired"),
            "This service plan requires client support for asynchronous service operations.",
        )
    }

    /// 422 without an OSB error code: a change this broker cannot make.
    pub fn unprocessable(description: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, None, description)
    }

    pub fn concurrency(description: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("ConcurrencyError"),
            description,
        )
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        let detail = detail.into();
        tracing::error!(%detail, "OSB internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "internal error; see the catalog's logs",
        )
    }
}

impl ResponseError for OsbError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.status);
        match self.status {
            StatusCode::UNAUTHORIZED => {
                resp.insert_header((header::WWW_AUTHENTICATE, "Basic realm=\"osb\", Bearer"));
            }
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
                let secs = self.retry_after.unwrap_or(1).to_string();
                resp.insert_header((header::RETRY_AFTER, secs));
            }
            _ => {}
        }
        resp.json(Body {
            error: self.code,
            description: &self.description,
        })
    }
}

impl From<ApiError> for OsbError {
    fn from(e: ApiError) -> Self {
        let status = e.status_code();
        match e {
            ApiError::Internal(detail) => OsbError::internal(detail),
            other => OsbError::new(status, None, other.body().message),
        }
    }
}

impl From<StoreError> for OsbError {
    fn from(e: StoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<BuyError> for OsbError {
    fn from(e: BuyError) -> Self {
        match e {
            BuyError::Api(api) => api.into(),
            BuyError::Gone(message) => {
                OsbError::new(StatusCode::UNPROCESSABLE_ENTITY, None, message)
            }
        }
    }
}
