//! The Open Service Broker API v2.17, so existing platforms can browse and
//! buy: offers are services, plans are plans, provisioning a plan is a
//! purchase, binding releases the provider's peering credentials.
//!
//! | route | handler |
//! |---|---|
//! | `GET /v2/catalog` | [`catalog::get`] |
//! | `PUT/GET/DELETE /v2/service_instances/{id}` | [`instances`] |
//! | `PATCH /v2/service_instances/{id}` | [`update::update`] |
//! | `GET /v2/service_instances/{id}/last_operation` | [`instances::last_operation`] |
//! | `PUT/GET/DELETE /v2/service_instances/{id}/service_bindings/{bid}` | [`bindings`] |
//! | `GET .../service_bindings/{bid}/last_operation` | [`bindings::last_operation`] |
//! | `PUT /provider/contracts/{id}/service` (the selling provider) | [`provider_report::put`] |
//! | `GET /provider/contracts/{id}/customer-peering` (the selling provider) | [`customer_peering::get`] |
//! | `GET /provider/contracts/{id}/bindings`, `PUT .../bindings/{bid}` (the selling provider) | [`provider_bindings`] |
//!
//! Every request needs `X-Broker-API-Version` (2.14 or later; missing or
//! older: 412, malformed: 400) and platform credentials ([`guard`]). An
//! `X-Broker-API-Originating-Identity` header, when sent, must be well
//! formed (400 otherwise) and is logged with the request, so an operator
//! can tell which platform user provisioned or bound what.

pub mod bindings;
pub mod catalog;
pub mod config;
pub mod customer_peering;
pub mod error;
pub mod guard;
pub mod ids;
pub mod instances;
pub mod listing;
pub mod maintenance;
pub mod model;
pub mod openapi;
pub mod provider_bindings;
pub mod provider_report;
pub mod request;
pub mod responses;
pub mod sealed;
pub mod service_bindings;
pub mod sold;
pub mod store;
pub mod update;

use std::sync::Arc;

use actix_web::{web, HttpRequest, ResponseError, Route};

use crate::buying::Buying;

pub use config::{AsyncMode, OsbConfig};
pub use error::OsbError;
pub use store::{InstancesOf, OsbStore};

/// What the OSB handlers share (`web::Data<Osb>`): instances and bindings,
/// the buying service every provision goes through, and the settings.
#[derive(Clone)]
pub struct Osb {
    pub store: Arc<dyn OsbStore>,
    pub buying: Buying,
    pub settings: OsbSettings,
    /// Limits failed basic-auth attempts per client address (the limiter
    /// of `POST /authenticate`).
    pub limiter: Arc<crate::http::RateLimiter>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
}

/// Shortest platform password accepted.
pub const MIN_PASSWORD: usize = 16;

/// The basic-auth platform account: its name and the SHA-256 of the name
/// (the password's digest sits beside it in [`OsbSettings::basic`]).
#[derive(Clone)]
pub struct BasicUser {
    pub name: String,
    pub digest: [u8; 32],
}

/// OSB settings, from [`OsbConfig`].
#[derive(Clone)]
pub struct OsbSettings {
    /// The platform account and its password's digest.
    pub basic: Option<(BasicUser, [u8; 32])>,
    pub async_mode: AsyncMode,
    pub currency: String,
    pub cost_unit: String,
    /// Added before every background operation (`--osb-async-delay`).
    pub async_delay: std::time::Duration,
}

impl OsbSettings {
    /// The settings of `c`; the currency and cost unit not given follow
    /// the catalog's `pricing`.
    pub fn from_config(
        c: &OsbConfig,
        pricing: &catalog_client::wire::Pricing,
    ) -> anyhow::Result<Self> {
        let digest = crate::providers::admin::digest;
        let basic = match (&c.osb_username, &c.osb_password) {
            (Some(user), Some(pass)) => {
                if user.is_empty() || user.contains(':') {
                    anyhow::bail!("--osb-username must be non-empty and contain no `:`");
                }
                if pass.len() < MIN_PASSWORD {
                    anyhow::bail!("--osb-password must be at least {MIN_PASSWORD} bytes");
                }
                Some((
                    BasicUser {
                        name: user.clone(),
                        digest: digest(user.as_bytes()),
                    },
                    digest(pass.as_bytes()),
                ))
            }
            _ => None,
        };
        Ok(OsbSettings {
            basic,
            async_mode: c.osb_async,
            currency: c
                .osb_currency
                .clone()
                .unwrap_or_else(|| pricing.currency.to_ascii_lowercase()),
            cost_unit: c
                .osb_cost_unit
                .clone()
                .unwrap_or_else(|| osb_cost_unit(pricing.per).to_string()),
            async_delay: c.osb_async_delay,
        })
    }
}

/// The OSB cost unit (`metadata.costs[].unit`) of a cost period.
pub fn osb_cost_unit(per: catalog_client::wire::CostPeriod) -> &'static str {
    match per {
        catalog_client::wire::CostPeriod::Hour => "HOURLY",
        catalog_client::wire::CostPeriod::Month => "MONTHLY",
    }
}

/// The `default_service` of an OSB resource that answers only `allow`:
/// 405 in the OSB error shape, with the `Allow` header.
pub fn method_not_allowed(allow: &'static str) -> Route {
    web::to(move |req: HttpRequest| async move {
        let error = OsbError::new(
            actix_web::http::StatusCode::METHOD_NOT_ALLOWED,
            None,
            format!("{} is not allowed on {}", req.method(), req.path()),
        );
        crate::http::with_allow(error.error_response(), allow)
    })
}

/// Register the `/v2` routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    let resource = |path: &str, allow: &'static str| {
        web::resource(path).default_service(method_not_allowed(allow))
    };
    cfg.service(resource("/v2/catalog", "GET").route(web::get().to(catalog::get)))
        .service(
            resource("/v2/service_instances/{id}", "PUT, PATCH, GET, DELETE")
                .route(web::put().to(instances::provision))
                .route(web::patch().to(update::update))
                .route(web::get().to(instances::fetch))
                .route(web::delete().to(instances::deprovision)),
        )
        .service(
            resource("/v2/service_instances/{id}/last_operation", "GET")
                .route(web::get().to(instances::last_operation)),
        )
        .service(
            resource(
                "/v2/service_instances/{id}/service_bindings/{bid}",
                "PUT, GET, DELETE",
            )
            .route(web::put().to(bindings::bind))
            .route(web::get().to(bindings::fetch))
            .route(web::delete().to(bindings::unbind)),
        )
        .service(
            resource(
                "/v2/service_instances/{id}/service_bindings/{bid}/last_operation",
                "GET",
            )
            .route(web::get().to(bindings::last_operation)),
        );
}
