//! The HTTP API: routes, handlers, the error shape, request observation.
//!
//! Route table (see [`configure`]); API routes take precedence over the web
//! UI, which serves every other `GET`:
//!
//! | route | handler |
//! |---|---|
//! | `POST /authenticate` | [`authenticate::authenticate`] |
//! | `POST /authenticate/rotate` | [`authenticate::rotate`] |
//! | `GET /offers` | [`offers::list`] |
//! | `GET/POST/DELETE /offer/{id}` | [`offers::get`], [`offers::put`], [`offers::delete`] |
//! | `GET /subscribe` (WebSocket) | [`crate::feed::subscribe`] |
//! | reservations, purchases, plan caps, admin | [`crate::reservation::routes`] |
//! | `/v2/...` (Open Service Broker) | [`crate::osb::routes`] |
//! | `GET /healthz`, `/readyz`, `/metrics`, `/openapi.json` | [`ops`] |

pub mod authenticate;
mod body;
mod error;
pub mod observe;
pub mod offers;
pub mod openapi;
pub mod ops;

use actix_web::{web, HttpRequest, HttpResponse};

pub use body::read_json_body;
pub use error::{ApiError, ErrorBody};

/// Register every route on an `App` (which must hold `web::Data<AppState>`).
/// New modules (the `/subscribe` feed, reservations) add their routes here,
/// before the web UI's catch-all.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/authenticate")
            .route(web::post().to(authenticate::authenticate))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/authenticate/rotate")
            .route(web::post().to(authenticate::rotate))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/offers")
            .route(web::get().to(offers::list))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/offer/{id}")
            .route(web::get().to(offers::get))
            .route(web::post().to(offers::put))
            .route(web::delete().to(offers::delete))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/subscribe")
            .route(web::get().to(crate::feed::subscribe))
            .default_service(web::to(method_not_allowed)),
    )
    .service(web::resource("/healthz").route(web::get().to(ops::healthz)))
    .service(web::resource("/readyz").route(web::get().to(ops::readyz)))
    .service(web::resource("/metrics").route(web::get().to(ops::metrics)))
    .service(web::resource("/openapi.json").route(web::get().to(ops::openapi)))
    .configure(crate::reservation::routes)
    .configure(crate::osb::routes)
    .default_service(web::to(crate::webui::serve));
}

async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed(format!(
        "{} is not allowed on {}",
        req.method(),
        req.path()
    )))
}
