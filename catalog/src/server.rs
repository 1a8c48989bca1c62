//! Wiring: open the backend once, load the signing key, build each
//! feature's state, serve HTTP until SIGTERM/SIGINT, then finish in-flight
//! requests.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use actix_web::{middleware, web, App, HttpServer};
use anyhow::Context;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{info, Instrument};

use crate::auth::oidc::OidcVerifier;
use crate::auth::{key::KEY_FILE, SigningKey, TokenService, TokenSettings, Verifier};
use crate::backends::{Backend, BackendConfig, MongoConfig, MongoStore};
use crate::buying::changes::ContractChanges;
use crate::buying::Buying;
use crate::config::Config;
use crate::feed::Feed;
use crate::http::RateLimiter;
use crate::metrics::Metrics;
use crate::offers::Offers;
use crate::ops::Ops;
use crate::osb::{Osb, OsbSettings};
use crate::providers::{AccountGenerations, Providers};

/// Which backend `config` asks for.
pub fn backend_config(config: &Config) -> BackendConfig {
    BackendConfig {
        data_dir: config.data_dir.clone(),
        mongo: config.mongodb_uri.as_ref().map(|uri| MongoConfig {
            uri: uri.clone(),
            database: config.mongodb_database.clone(),
            timeout: config.mongodb_timeout,
        }),
        tombstone_ttl: config.mongodb_tombstone_ttl,
    }
}

/// The signing key: flag/env file, env value, the database's shared key
/// (MongoDB), or the one generated in the data directory.
pub async fn signing_key(
    config: &Config,
    mongo: Option<&MongoStore>,
) -> anyhow::Result<SigningKey> {
    if let Some(path) = &config.jwt_key_file {
        return Ok(SigningKey::from_file(path)?);
    }
    if let Some(k) = &config.jwt_key {
        return SigningKey::from_bytes(k.as_bytes().to_vec())
            .context("--jwt-key / CATALOG_JWT_KEY");
    }
    if let Some(m) = mongo {
        let candidate = SigningKey::generate()?;
        let shared = m
            .shared_signing_key(candidate.bytes())
            .await
            .context("loading the shared signing key")?;
        return Ok(SigningKey::from_bytes(shared)?);
    }
    Ok(SigningKey::load_or_generate(
        &config.data_dir.join(KEY_FILE),
    )?)
}

/// Whether the signing key is the database's shared one (none configured):
/// then it can change under a running process, which follows it.
fn key_is_shared(config: &Config) -> bool {
    config.jwt_key_file.is_none() && config.jwt_key.is_none()
}

/// Every feature's state, each handed to the handlers as its own
/// `web::Data`.
#[derive(Clone)]
pub struct Features {
    pub verifier: Verifier,
    pub providers: Providers,
    pub offers: Offers,
    pub buying: Buying,
    pub osb: Osb,
    pub feed: Feed,
    /// The contract change stream's fan-out (`GET /contract-changes`).
    pub contract_changes: ContractChanges,
    pub ops: Ops,
    pub metrics: Arc<Metrics>,
    /// Cancelled when the server starts shutting down, so long-lived
    /// connections (WebSockets) can close and let shutdown finish.
    pub shutdown: CancellationToken,
}

/// Open the backend and build every feature on it.
pub async fn build(config: &Config) -> anyhow::Result<Features> {
    let backend = Backend::open(&backend_config(config)).await?;
    let key = signing_key(config, backend.mongo.as_ref()).await?;
    let mut tokens = TokenService::new(
        &key,
        TokenSettings {
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            ttl: config.token_ttl,
        },
    );
    if let Some(m) = backend.mongo.as_ref().filter(|_| key_is_shared(config)) {
        tokens = tokens.with_source(Arc::new(m.clone()));
    }
    let tokens = Arc::new(tokens);
    let max_body_bytes = config.max_body_bytes;
    let mut providers = Providers::new(
        &config.providers,
        key.bytes(),
        backend.providers.clone(),
        tokens.clone(),
        Arc::new(RateLimiter::new(config.auth_rate_limit)),
        max_body_bytes,
    )?;
    providers.on_stamp = Some(Arc::new(crate::offers::liqo::Restamper(
        backend.offers.clone(),
    )));
    let verifier = Verifier {
        tokens,
        oidc: OidcVerifier::from_config(&config.oidc)?.map(Arc::new),
        generations: Arc::new(AccountGenerations(backend.providers.clone())),
    };
    let offers = Offers {
        store: backend.offers.clone(),
        providers: backend.providers.clone(),
        max_body_bytes,
        pricing: config.pricing(),
    };
    let buying = Buying {
        store: backend.reservations.clone(),
        offers: backend.offers.clone(),
        providers: providers.clone(),
        ttl: config.buying.reservation_ttl,
        contract_duration: config.buying.contract_duration,
        ending_soon: config.buying.contract_ending_soon,
        sweep_interval: config.buying.reservation_sweep_interval,
        max_body_bytes,
        pricing: config.pricing(),
    };
    let osb = Osb {
        store: backend.osb.clone(),
        buying: buying.clone(),
        settings: OsbSettings::from_config(&config.osb, &config.pricing())?,
        // Guessing the platform password is limited like guessing a
        // provider's secret: one budget per client address.
        limiter: providers.limiter.clone(),
        max_body_bytes,
    };
    let metrics = Arc::new(Metrics::new());
    let shutdown = CancellationToken::new();
    let feed = Feed::start(
        backend.offers.clone(),
        config.feed.clone(),
        metrics.feed.clone(),
        config.pricing(),
        shutdown.clone(),
    )?;
    config
        .contract_stream
        .validate()
        .map_err(anyhow::Error::msg)?;
    let contract_changes = ContractChanges::start(
        buying.clone(),
        &config.contract_stream,
        metrics.contract_stream.clone(),
        shutdown.clone(),
    )
    .await;
    // The offer and provider gauges, counted on changes and on a timer,
    // never by a scrape.
    tokio::spawn(
        crate::metrics::follow_counts(
            metrics.clone(),
            backend.offers.clone(),
            backend.providers.clone(),
            crate::metrics::RECOUNT_EVERY,
            crate::metrics::RECOUNT_GAP,
            shutdown.clone(),
        )
        .instrument(tracing::info_span!("metrics_counts")),
    );
    let ops = Ops {
        health: backend.health.clone(),
        metrics: metrics.clone(),
        starting: Arc::new(std::sync::atomic::AtomicBool::new(config.demo)),
    };
    Ok(Features {
        verifier,
        providers,
        offers,
        buying,
        osb,
        feed,
        contract_changes,
        ops,
        metrics,
        shutdown,
    })
}

/// The actix `App` for `features`, /metrics included (also used by
/// in-process tests).
pub fn app(
    features: Features,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    api_app(features, true)
}

/// The API's `App`; without `metrics_on_api` (--metrics-listen given),
/// `/metrics` answers 404 here: it is served on the metrics port only.
pub fn api_app(
    features: Features,
    metrics_on_api: bool,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let mut app = App::new();
    if !metrics_on_api {
        // Registered before the route table, so it matches first: the
        // route table's own /metrics (and the web UI, serving every other
        // GET) never see the path.
        app = app.service(web::resource("/metrics").to(metrics_elsewhere));
    }
    app.app_data(web::Data::new(features.verifier))
        .app_data(web::Data::new(features.providers))
        .app_data(web::Data::new(features.offers))
        .app_data(web::Data::new(features.buying))
        .app_data(web::Data::new(features.osb))
        .app_data(web::Data::new(features.feed))
        .app_data(web::Data::new(features.contract_changes))
        .app_data(web::Data::new(features.ops))
        .app_data(web::Data::new(features.metrics.http.clone()))
        .configure(crate::routes::configure)
        .wrap(middleware::from_fn(crate::http::deadline::body_deadline))
        .wrap(middleware::from_fn(crate::store::deadline::per_request))
        .wrap(middleware::from_fn(crate::http::observe::observe))
}

/// `/metrics` on the API port when --metrics-listen moved it away.
async fn metrics_elsewhere() -> Result<actix_web::HttpResponse, crate::http::ApiError> {
    Err(crate::http::ApiError::NotFound(
        "/metrics is served on the catalog's metrics port (--metrics-listen), not on the API port"
            .to_string(),
    ))
}

/// The server of `/metrics` alone on `addr` (--metrics-listen): bound
/// and announced (role `metrics`), not yet running. The API port's
/// connection limits and request deadlines apply; one worker, as a scrape
/// is one request a few times a minute.
fn metrics_server(
    config: &Config,
    ops: Ops,
    addr: std::net::SocketAddr,
) -> anyhow::Result<actix_web::dev::Server> {
    let body_timeout = crate::http::deadline::BodyTimeout(config.request_body_timeout);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(ops.clone()))
            .app_data(body_timeout)
            .service(web::resource("/metrics").route(web::get().to(crate::ops::metrics)))
            .wrap(middleware::from_fn(crate::http::deadline::body_deadline))
    })
    .workers(1)
    .client_request_timeout(config.request_head_timeout)
    .keep_alive(config.keep_alive_timeout)
    .max_connections(config.max_connections)
    .shutdown_timeout(config.shutdown_timeout.as_secs().max(1))
    .disable_signals()
    .bind(addr)
    .with_context(|| format!("binding --metrics-listen {addr}"))?;
    for addr in server.addrs() {
        edge::announce::listening(Some("metrics"), "http", addr);
    }
    Ok(server.run())
}

/// Serve until SIGTERM or SIGINT; then stop accepting, let in-flight
/// requests finish (up to `--shutdown-timeout`) and return.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let features = build(&config).await?;
    tokio::spawn(
        features
            .verifier
            .tokens
            .clone()
            .follow(features.shutdown.clone())
            .instrument(tracing::info_span!("jwt_key_follow")),
    );
    crate::buying::sweeper::spawn(
        features.buying.store.clone(),
        features.buying.sweep_interval,
        features.shutdown.clone(),
    );
    tokio::spawn(crate::http::observe::summarise_client_errors(
        features.shutdown.clone(),
    ));
    let factory = features.clone();
    let body_timeout = crate::http::deadline::BodyTimeout(config.request_body_timeout);
    let metrics_on_api = config.metrics_listen.is_none();
    let mut server =
        HttpServer::new(move || api_app(factory.clone(), metrics_on_api).app_data(body_timeout))
            .on_connect(crate::feed::on_connect)
            .client_request_timeout(config.request_head_timeout)
            .keep_alive(config.keep_alive_timeout)
            .max_connections(config.max_connections)
            .shutdown_timeout(config.shutdown_timeout.as_secs().max(1))
            .disable_signals();
    if config.workers > 0 {
        server = server.workers(config.workers);
    }
    let server = server
        .bind(config.listen)
        .with_context(|| format!("binding {}", config.listen))?;
    for addr in server.addrs() {
        edge::announce::listening(None, "http", addr);
    }
    // Announced after the API port, which the announcement's readers take
    // as the first (main) one.
    let metrics = config
        .metrics_listen
        .map(|addr| metrics_server(&config, features.ops.clone(), addr))
        .transpose()?;
    let metrics_handle = metrics.as_ref().map(|m| m.handle());
    let metrics_stopper = metrics_handle.clone();
    let server = server.run();
    let handle = server.handle();
    let stopper = server.handle();
    let shutdown = features.shutdown.clone();
    tokio::spawn(
        async move {
            // Logging never panics now (`edge::log::Stderr`), but should
            // anything in the wait for the signal or its log lines panic,
            // the shutdown it was waiting for still happens (U-09: a panic
            // here once made SIGTERM ignored).
            let signalled = AssertUnwindSafe(async {
                edge::signal::shutdown().await;
                info!("shutting down: finishing in-flight requests");
            })
            .catch_unwind()
            .await;
            if signalled.is_err() {
                tracing::error!("the signal task panicked: shutting down");
            }
            shutdown.cancel();
            if let Some(metrics) = metrics_handle {
                // Scrapes go on while in-flight API requests finish.
                tokio::join!(handle.stop(true), metrics.stop(true));
            } else {
                handle.stop(true).await;
            }
        }
        .instrument(tracing::info_span!("signals")),
    );
    // The demo is seeded once the port is bound, so the address is
    // printed (and the catalog answers, `/readyz` 503) at once: hashing
    // the demo provider's secret alone takes a while. A seeding that fails
    // stops the server, as it stopped the start before.
    let seeding = async {
        if !config.demo {
            return Ok(());
        }
        let seeded = crate::demo::seed(&features.providers, &*features.offers.store)
            .await
            .context("seeding the demo provider");
        match &seeded {
            Ok(()) => features
                .ops
                .starting
                .store(false, std::sync::atomic::Ordering::Release),
            Err(_) => {
                features.shutdown.cancel();
                stopper.stop(false).await;
                if let Some(metrics) = &metrics_stopper {
                    metrics.stop(false).await;
                }
            }
        }
        seeded
    };
    let metrics_served = async {
        match metrics {
            Some(metrics) => metrics.await,
            None => Ok(()),
        }
    };
    let (served, seeded, metrics_served) = tokio::join!(server, seeding, metrics_served);
    seeded?;
    served.context("HTTP server")?;
    metrics_served.context("metrics HTTP server")?;
    info!("catalog stopped");
    Ok(())
}
