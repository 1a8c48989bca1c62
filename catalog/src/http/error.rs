//! The one error shape every endpoint answers with:
//! `{"error": "<code>", "message": "<what is wrong>", "field": "<path>"?}`.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};

use super::FieldError;

/// An error response. Internal details are logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(FieldError),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    #[error("request body is larger than the {limit}-byte limit")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("too many requests; retry later")]
    TooManyRequests,
    /// A limit of the caller's own was reached (429): the message says which.
    #[error("{0}")]
    TooMany(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

// The JSON body of every error: a wire type, declared once in
// `catalog-client` (with its schema).
pub use catalog_client::wire::error_body::ErrorBody;

/// Declares an error answer that several operations document alike, for
/// the `responses(...)` of their `#[utoipa::path]`:
/// `documented_error!(/// doc, Name, status, Body, "description");`.
macro_rules! documented_error {
    ($(#[$doc:meta])* $name:ident, $status:tt, $body:ty, $description:tt) => {
        $(#[$doc])*
        #[derive(utoipa::IntoResponses)]
        #[response(status = $status, description = $description)]
        // Never built: utoipa reads only the field's type, for the body's
        // schema.
        #[allow(dead_code)]
        pub struct $name($body);
    };
}
pub(crate) use documented_error;

documented_error!(
    /// The 503 of every REST operation that reads or writes the store: it
    /// answers [`ApiError::Unavailable`] when the store is unreachable.
    StoreUnreachable,
    503,
    ErrorBody,
    "Store unreachable"
);

documented_error!(
    /// The 400 of an operation whose body is parsed and checked field by
    /// field ([`ApiError::BadRequest`] names the field).
    InvalidBody,
    400,
    ErrorBody,
    "Invalid body; `field` names the bad field"
);

impl ApiError {
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::BadRequest(FieldError::new(field, message))
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::TooManyRequests | ApiError::TooMany(_) => "too_many_requests",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn body(&self) -> ErrorBody {
        let (message, field) = match self {
            ApiError::BadRequest(f) => (f.to_string(), Some(f.field.clone())),
            ApiError::Internal(_) => ("internal error; see the catalog's logs".to_string(), None),
            other => (other.to_string(), None),
        };
        ErrorBody {
            error: self.code().to_string(),
            message,
            field,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests | ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::Internal(detail) = self {
            tracing::error!(%detail, "internal error");
        }
        let mut resp = HttpResponse::build(self.status_code());
        match self {
            ApiError::Unauthorized(_) => {
                resp.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            ApiError::Unavailable(_) | ApiError::TooManyRequests | ApiError::TooMany(_) => {
                resp.insert_header((header::RETRY_AFTER, "1"));
            }
            _ => {}
        }
        resp.json(self.body())
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::BadRequest(e)
    }
}
