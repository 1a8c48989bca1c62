//! The route table: every feature's handlers on their paths. API routes
//! take precedence over the web UI, which serves every other `GET`.
//!
//! | route | handler |
//! |---|---|
//! | `POST /authenticate`, `POST /authenticate/rotate` | [`providers::authenticate`] |
//! | `POST /authenticate/admin`, `POST /consumer-tokens`, `GET /admin/providers`, `PUT /admin/providers/{clusterID}` | [`providers::admin`] |
//! | `GET/PUT /provider/peering` | [`providers::peering`] |
//! | `PUT /provider/enforcement` | [`providers::enforcement`] |
//! | `PUT /provider/isolation` | [`providers::isolation`] |
//! | `GET /offers`, `GET/POST/DELETE /offer/{id}` | [`offers::handlers`] |
//! | `GET/PUT /offer/{id}/plans/{plan}/capacity` | [`buying::capacity`] |
//! | `/reservations...`, `/purchases...` | [`buying::http`] |
//! | `GET /contracts`, `GET /contracts/{id}`, `PUT /contracts/{id}/state`, `POST /contracts/{id}/extend`, `PUT /provider/contracts/{id}/peering`, `PUT/DELETE /contracts/{id}/network-policy`, `PUT /provider/contracts/{id}/network-policy/status` | [`buying::contracts_http`] |
//! | `GET /contract-changes` (NDJSON stream) | [`buying::changes::http`] |
//! | `PUT /provider/contracts/{id}/service` | [`osb::provider_report`] |
//! | `GET /provider/contracts/{id}/customer-peering` | [`osb::customer_peering`] |
//! | `GET /provider/contracts/{id}/bindings`, `PUT .../bindings/{bid}` | [`osb::provider_bindings`] |
//! | `GET /subscribe` (WebSocket) | [`feed::subscribe`] |
//! | `GET /service-instances`, `GET /service-instances/{id}` | [`osb::listing`] |
//! | `/v2/...` (Open Service Broker) | [`osb::routes`] |
//! | `GET /healthz`, `/readyz`, `/metrics` | [`ops`] |
//! | `GET /openapi.json` | [`openapi::openapi`] |
//!
//! A method a resource does not serve answers 405 with `Allow` (see
//! [`method_not_allowed`]). Each handler reads its own feature's state
//! (`web::Data<Offers>`, `web::Data<Buying>`, ...), which
//! the server registers on the app.

use actix_web::web;

use crate::buying::{
    capacity, changes::http as changes, contracts::http as contracts, http as buying,
};
use crate::http::method_not_allowed;
use crate::offers::handlers as offers;
use crate::providers::{admin, authenticate, enforcement, isolation, peering};
use crate::{feed, openapi, ops, osb, webui};

/// Register every route on an `App` (which must hold every feature's
/// state).
pub fn configure(cfg: &mut web::ServiceConfig) {
    let resource = |path: &str, allow: &'static str| {
        web::resource(path).default_service(method_not_allowed(allow))
    };
    cfg.service(
        resource("/authenticate", "POST").route(web::post().to(authenticate::authenticate)),
    )
    .service(resource("/authenticate/rotate", "POST").route(web::post().to(authenticate::rotate)))
    .service(resource("/offers", "GET").route(web::get().to(offers::list)))
    .service(
        resource("/offer/{id}", "GET, POST, DELETE")
            .route(web::get().to(offers::get))
            .route(web::post().to(offers::put))
            .route(web::delete().to(offers::delete)),
    )
    .service(resource("/subscribe", "GET").route(web::get().to(feed::subscribe)))
    .service(web::resource("/healthz").route(web::get().to(ops::healthz)))
    .service(web::resource("/readyz").route(web::get().to(ops::readyz)))
    .service(web::resource("/metrics").route(web::get().to(ops::metrics)))
    .service(web::resource("/openapi.json").route(web::get().to(openapi::openapi)))
    .service(
        resource("/reservations", "POST, GET")
            .route(web::post().to(buying::create))
            .route(web::get().to(buying::list)),
    )
    .service(
        resource("/reservations/{id}", "GET, DELETE")
            .route(web::get().to(buying::get))
            .route(web::delete().to(buying::release)),
    )
    .service(
        resource("/reservations/{id}/purchase", "POST").route(web::post().to(buying::purchase)),
    )
    .service(resource("/purchases", "GET").route(web::get().to(buying::list_purchases)))
    .service(
        resource("/purchases/{id}", "GET, DELETE")
            .route(web::get().to(buying::get_purchase))
            .route(web::delete().to(buying::cancel)),
    )
    .service(resource("/contracts", "GET").route(web::get().to(contracts::list)))
    .service(resource("/contracts/{id}", "GET").route(web::get().to(contracts::get)))
    .service(resource("/contract-changes", "GET").route(web::get().to(changes::follow)))
    .service(resource("/contracts/{id}/state", "PUT").route(web::put().to(contracts::put_state)))
    .service(resource("/contracts/{id}/extend", "POST").route(web::post().to(contracts::extend)))
    .service(
        resource("/provider/contracts/{id}/peering", "PUT")
            .route(web::put().to(contracts::attach_peering)),
    )
    .service(
        resource("/contracts/{id}/network-policy", "PUT, DELETE")
            .route(web::put().to(contracts::put_network_policy))
            .route(web::delete().to(contracts::delete_network_policy)),
    )
    .service(
        resource("/provider/contracts/{id}/network-policy/status", "PUT")
            .route(web::put().to(contracts::report_network_policy)),
    )
    .service(
        resource("/provider/contracts/{id}/service", "PUT")
            .route(web::put().to(osb::provider_report::put)),
    )
    .service(
        resource("/provider/contracts/{id}/customer-peering", "GET")
            .route(web::get().to(osb::customer_peering::get)),
    )
    .service(
        resource("/provider/contracts/{id}/bindings", "GET")
            .route(web::get().to(osb::provider_bindings::list)),
    )
    .service(
        resource("/provider/contracts/{id}/bindings/{binding_id}", "PUT")
            .route(web::put().to(osb::provider_bindings::put)),
    )
    .service(
        resource("/offer/{id}/plans/{plan}/capacity", "GET, PUT")
            .route(web::get().to(capacity::get))
            .route(web::put().to(capacity::put)),
    )
    .service(
        resource("/provider/peering", "GET, PUT")
            .route(web::get().to(peering::get))
            .route(web::put().to(peering::put)),
    )
    .service(resource("/provider/enforcement", "PUT").route(web::put().to(enforcement::put)))
    .service(resource("/provider/isolation", "PUT").route(web::put().to(isolation::put)))
    .service(resource("/authenticate/admin", "POST").route(web::post().to(admin::login)))
    .service(resource("/consumer-tokens", "POST").route(web::post().to(admin::consumer_token)))
    .service(resource("/admin/providers", "GET").route(web::get().to(admin::providers)))
    .service(
        resource("/admin/providers/{clusterID}", "PUT").route(web::put().to(admin::set_provider)),
    )
    .configure(osb::listing::routes)
    .configure(osb::routes)
    .default_service(web::to(webui::serve));
}
