//! The HTTP plumbing every feature's handlers stand on, and nothing about
//! any feature: the one error shape ([`ApiError`], [`ErrorBody`]), reading
//! request bodies within a size limit ([`read_json_body`]), strict input
//! parsing and the identifier grammar ([`input`]), per-request observation
//! ([`observe`]: a tracing span and the request metrics), the 405 answer
//! with its `Allow` header ([`method_not_allowed`]) and the per-client rate
//! limiter ([`ratelimit`]).
//!
//! It sits below every other module of the crate: it may import none of
//! them.

mod body;
pub mod deadline;
mod error;
pub mod input;
pub mod observe;
pub mod ratelimit;
pub mod schemas;

use actix_web::http::header::{HeaderValue, ALLOW};
use actix_web::{web, HttpRequest, HttpResponse, ResponseError, Route};

pub use body::read_json_body;
pub(crate) use error::documented_error;
pub use error::{ApiError, ErrorBody, InvalidBody, StoreUnreachable};
pub use input::{
    optional_whole, parse_body, parse_json, parse_object, validate_id, FieldError, MAX_ID_LEN,
};
pub use observe::HttpMetrics;
pub use ratelimit::RateLimiter;

/// Largest request body a feature accepts (413 beyond), from
/// `--max-body-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit(pub usize);

/// The `default_service` of a resource that answers only `allow` (e.g.
/// `"GET, POST"`): every other method gets 405 in the JSON error shape with
/// the `Allow` header RFC 9110 §15.5.6 requires.
pub fn method_not_allowed(allow: &'static str) -> Route {
    web::to(move |req: HttpRequest| async move {
        let error = ApiError::MethodNotAllowed(format!(
            "{} is not allowed on {}",
            req.method(),
            req.path()
        ));
        with_allow(error.error_response(), allow)
    })
}

/// `response` with `Allow: allow` added (for 405 answers in another error
/// shape, such as the Open Service Broker's).
pub fn with_allow(mut response: HttpResponse, allow: &'static str) -> HttpResponse {
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}
