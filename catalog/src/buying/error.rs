//! Errors of the buying endpoints: the catalog's JSON error shape
//! ([`ApiError`]), plus `410 Gone` for a reservation that expired.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use super::store::{ReserveError, TransitionError};
use crate::http::{ApiError, ErrorBody, FieldError};
use crate::store::StoreError;

/// See the module docs.
#[derive(Debug, thiserror::Error)]
pub enum BuyError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The reservation expired before it was purchased.
    #[error("{0}")]
    Gone(String),
}

impl BuyError {
    pub fn not_found(what: impl Into<String>) -> Self {
        BuyError::Api(ApiError::NotFound(what.into()))
    }

    pub fn conflict(what: impl Into<String>) -> Self {
        BuyError::Api(ApiError::Conflict(what.into()))
    }

    pub fn forbidden(what: impl Into<String>) -> Self {
        BuyError::Api(ApiError::Forbidden(what.into()))
    }

    pub fn internal(what: impl Into<String>) -> Self {
        BuyError::Api(ApiError::Internal(what.into()))
    }

    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        BuyError::Api(ApiError::bad_request(field, message))
    }
}

impl From<StoreError> for BuyError {
    fn from(e: StoreError) -> Self {
        BuyError::Api(e.into())
    }
}

impl From<FieldError> for BuyError {
    fn from(e: FieldError) -> Self {
        BuyError::Api(e.into())
    }
}

impl From<ReserveError> for BuyError {
    fn from(e: ReserveError) -> Self {
        match e {
            ReserveError::SoldOut { .. } => BuyError::conflict(e.to_string()),
            ReserveError::Store(s) => s.into(),
        }
    }
}

impl From<TransitionError> for BuyError {
    fn from(e: TransitionError) -> Self {
        match e {
            TransitionError::NotFound => BuyError::not_found("no such reservation"),
            TransitionError::WrongState(r) => {
                BuyError::conflict(format!("reservation {} is {}", r.id, r.state.as_str()))
            }
            TransitionError::Store(s) => s.into(),
        }
    }
}

impl ResponseError for BuyError {
    fn status_code(&self) -> StatusCode {
        match self {
            BuyError::Api(e) => e.status_code(),
            BuyError::Gone(_) => StatusCode::GONE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            BuyError::Api(e) => e.error_response(),
            BuyError::Gone(message) => HttpResponse::Gone().json(ErrorBody {
                error: "gone".into(),
                message: message.clone(),
                field: None,
            }),
        }
    }
}
