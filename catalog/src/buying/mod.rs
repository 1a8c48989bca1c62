//! Buying: consumers reserve a plan of an offer, then purchase the
//! reservation before it expires — getting a contract with the provider's
//! Liqo peering credentials — or release it. Providers may cap how many
//! concurrent reservations and purchases a plan accepts.
//!
//! - [`model`]: reservations, purchases, contracts, state transitions.
//! - [`service`]: the operations, shared by the REST API and the Open
//!   Service Broker API ([`crate::osb`]).
//! - [`http`], [`capacity`], [`admin`]: the REST endpoints.
//! - [`seal`]: providers' peering tokens encrypted at rest.
//! - [`sweeper`]: the background expiry of due reservations.
//! - [`config`] holds the flags.
//!
//! Storage is [`crate::store::reservations::ReservationStore`], embedded or
//! MongoDB like the offers.

pub mod admin;
pub mod capacity;
pub mod config;
pub mod error;
pub mod http;
pub mod model;
pub mod openapi;
pub mod seal;
pub mod service;
pub mod sweeper;

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use anyhow::Context;

pub use config::BuyingConfig;
pub use error::BuyError;
pub use service::Buying;

use crate::api::ApiError;
use crate::auth::SigningKey;
use crate::config::Config;
use crate::store::reservations::ReservationStore;
use crate::store::{EmbeddedReservationStore, MongoConfig, MongoReservationStore};

impl Buying {
    /// Open the reservation store beside the configured offer store, and
    /// load the sealing key and administrator secret.
    pub async fn open(config: &Config, signing_key: &SigningKey) -> anyhow::Result<Self> {
        let store: Arc<dyn ReservationStore> = match &config.mongodb_uri {
            Some(uri) => Arc::new(
                MongoReservationStore::connect(&MongoConfig {
                    uri: uri.clone(),
                    database: config.mongodb_database.clone(),
                    timeout: config.mongodb_timeout,
                })
                .await
                .context("connecting to MongoDB for reservations")?,
            ),
            None => Arc::new(
                EmbeddedReservationStore::open(&config.data_dir).with_context(|| {
                    format!(
                        "opening the reservation store in {}",
                        config.data_dir.display()
                    )
                })?,
            ),
        };
        let b = &config.buying;
        let sealer = match &b.peering_key_file {
            Some(path) => seal::Sealer::from_file(path)?,
            None => seal::Sealer::derive(signing_key.bytes())?,
        };
        let admin_secret = match (&b.admin_secret, &b.admin_secret_file) {
            (Some(s), _) => Some(s.as_bytes().to_vec()),
            (None, Some(path)) => {
                let mut bytes = std::fs::read(path)
                    .with_context(|| format!("reading the admin secret {}", path.display()))?;
                while bytes.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
                    bytes.pop();
                }
                Some(bytes)
            }
            (None, None) => None,
        };
        if let Some(s) = &admin_secret {
            if s.len() < admin::MIN_ADMIN_SECRET {
                anyhow::bail!(
                    "the administrator secret must be at least {} bytes",
                    admin::MIN_ADMIN_SECRET
                );
            }
        }
        Ok(Buying {
            store,
            sealer: Arc::new(sealer),
            ttl: b.reservation_ttl,
            sweep_interval: b.reservation_sweep_interval,
            admin_secret_digest: admin_secret.map(|s| admin::digest(&s)),
            osb: crate::osb::OsbSettings::from_config(&config.osb)?,
        })
    }
}

async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed(format!(
        "{} is not allowed on {}",
        req.method(),
        req.path()
    )))
}

/// Register the buying routes (see [`http`], [`capacity`], [`admin`]).
pub fn routes(cfg: &mut web::ServiceConfig) {
    let resource = |path: &str| web::resource(path).default_service(web::to(method_not_allowed));
    cfg.service(
        resource("/reservations")
            .route(web::post().to(http::create))
            .route(web::get().to(http::list)),
    )
    .service(
        resource("/reservations/{id}")
            .route(web::get().to(http::get))
            .route(web::delete().to(http::release)),
    )
    .service(resource("/reservations/{id}/purchase").route(web::post().to(http::purchase)))
    .service(resource("/purchases").route(web::get().to(http::list_purchases)))
    .service(
        resource("/purchases/{id}")
            .route(web::get().to(http::get_purchase))
            .route(web::delete().to(http::cancel)),
    )
    .service(
        resource("/offer/{id}/plans/{plan}/capacity")
            .route(web::get().to(capacity::get))
            .route(web::put().to(capacity::put)),
    )
    .service(resource("/authenticate/admin").route(web::post().to(admin::login)))
    .service(resource("/consumer-tokens").route(web::post().to(admin::consumer_token)))
    .service(resource("/admin/providers").route(web::get().to(admin::providers)))
    .service(resource("/admin/providers/{clusterID}").route(web::put().to(admin::set_provider)));
}
