//! Wiring: open the store, load the signing key, build the [`AppState`],
//! serve HTTP until SIGTERM/SIGINT, then finish in-flight requests.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use actix_http::error::PayloadError;
use actix_http::BoxedPayloadStream;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use actix_web::{middleware, web, App, HttpResponse, HttpServer};
use anyhow::Context;
use bytes::Bytes;
use futures::Stream;
use tokio_util::sync::CancellationToken;
use tracing::{info, Instrument};

use crate::auth::{key::KEY_FILE, SigningKey, TokenService, TokenSettings};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::ratelimit::RateLimiter;
use crate::state::{AppState, Limits};
use crate::store::{EmbeddedStore, MongoConfig, MongoStore, Store};

/// Open the configured store: MongoDB if a URI is given, else the embedded
/// one in the data directory.
pub async fn open_store(config: &Config) -> anyhow::Result<(Arc<dyn Store>, Option<MongoStore>)> {
    match &config.mongodb_uri {
        Some(uri) => {
            let mongo = MongoStore::connect(&MongoConfig {
                uri: uri.clone(),
                database: config.mongodb_database.clone(),
                timeout: config.mongodb_timeout,
            })
            .await
            .context("connecting to MongoDB")?;
            if !config.mongodb_tombstone_ttl.is_zero() {
                mongo.purge_tombstones_every(config.mongodb_tombstone_ttl);
            }
            info!(database = %config.mongodb_database, "using the MongoDB store");
            Ok((Arc::new(mongo.clone()), Some(mongo)))
        }
        None => {
            let store = EmbeddedStore::open(&config.data_dir).with_context(|| {
                format!(
                    "opening the embedded store in {}",
                    config.data_dir.display()
                )
            })?;
            info!(dir = %config.data_dir.display(), "using the embedded store");
            Ok((Arc::new(store), None))
        }
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

/// Everything the handlers share.
pub async fn build_state(config: &Config) -> anyhow::Result<AppState> {
    let (store, mongo) = open_store(config).await?;
    let key = signing_key(config, mongo.as_ref()).await?;
    let buying = crate::reservation::Buying::open(config, &key).await?;
    let oidc = crate::auth::oidc::OidcVerifier::from_config(&config.oidc)?.map(Arc::new);
    let tokens = TokenService::new(
        &key,
        TokenSettings {
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            ttl: config.token_ttl,
        },
    );
    let metrics = Arc::new(Metrics::new());
    let shutdown = CancellationToken::new();
    let feed = crate::feed::Feed::start(
        store.clone(),
        config.feed.clone(),
        metrics.feed.clone(),
        shutdown.clone(),
    )?;
    Ok(AppState {
        store,
        tokens: Arc::new(tokens),
        metrics,
        limits: Limits {
            max_body_bytes: config.max_body_bytes,
        },
        auth_limiter: Arc::new(RateLimiter::new(config.auth_rate_limit)),
        shutdown,
        feed,
        buying,
        oidc,
    })
}

/// The actix `App` for `state` (also used by in-process tests).
pub fn app(
    state: AppState,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(web::Data::new(state))
        .configure(crate::api::configure)
        .wrap(middleware::from_fn(body_deadline))
        .wrap(middleware::from_fn(crate::api::observe::observe))
}

/// `--request-body-timeout` as app data: how long a request's body may
/// take to arrive once its head has (zero: no limit). Without it (the
/// in-process tests' apps), bodies have no deadline.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// Hold every request body to the [`BodyTimeout`] deadline: reading past it
/// fails, and the request is answered 408 on a connection that is then
/// closed, so a client trickling a body cannot hold a connection (nor, with
/// many, every connection) for longer. WebSocket upgrades are left alone:
/// their "body" is the feed.
async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let limit = req
        .app_data::<BodyTimeout>()
        .map(|t| t.0)
        .filter(|t| !t.is_zero());
    let Some(limit) = limit.filter(|_| !req.headers().contains_key(header::UPGRADE)) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let payload = match req.take_payload() {
        Payload::None => return Ok(next.call(req).await?.map_into_boxed_body()),
        payload => payload,
    };
    let expired = Arc::new(AtomicBool::new(false));
    let deadline: BoxedPayloadStream = Box::pin(DeadlinePayload {
        inner: payload,
        timer: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
        done: false,
    });
    req.set_payload(Payload::from(deadline));
    // (The request must not be cloned before routing: actix then panics.)
    let res = next.call(req).await?;
    if !expired.load(Ordering::Relaxed) {
        return Ok(res.map_into_boxed_body());
    }
    let (http_req, _) = res.into_parts();
    tracing::info!(
        timeout = ?limit,
        "request body too slow: answered 408 and closed the connection"
    );
    let message = format!(
        "the request body did not arrive within {} (--request-body-timeout); send it faster",
        humantime_secs(limit)
    );
    let response = HttpResponse::RequestTimeout()
        .force_close()
        .json(crate::api::ErrorBody {
            error: "request_timeout".into(),
            message,
            field: None,
        });
    Ok(ServiceResponse::new(http_req, response))
}

/// `10s`, `1.5s`.
fn humantime_secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// A request body that fails with `TimedOut` once its deadline passes.
struct DeadlinePayload {
    inner: Payload,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
    done: bool,
}

impl Stream for DeadlinePayload {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            if item.is_none() {
                self.done = true;
            }
            return Poll::Ready(item);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            self.done = true;
            self.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        Poll::Pending
    }
}

/// Serve until SIGTERM or SIGINT; then stop accepting, let in-flight
/// requests finish (up to `--shutdown-timeout`) and return.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let state = build_state(&config).await?;
    if config.demo {
        crate::demo::seed(&state)
            .await
            .context("seeding the demo provider")?;
    }
    tokio::spawn(crate::api::observe::summarise_client_errors(
        state.shutdown.clone(),
    ));
    crate::reservation::sweeper::spawn(
        state.buying.store.clone(),
        state.buying.sweep_interval,
        state.shutdown.clone(),
    );
    let factory_state = state.clone();
    let body_timeout = BodyTimeout(config.request_body_timeout);
    let mut server = HttpServer::new(move || app(factory_state.clone()).app_data(body_timeout))
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
        println!("catalog listening on http://{addr}");
    }
    let server = server.run();
    let handle = server.handle();
    let shutdown = state.shutdown.clone();
    tokio::spawn(
        async move {
            wait_for_signal().await;
            info!("shutting down: finishing in-flight requests");
            shutdown.cancel();
            handle.stop(true).await;
        }
        .instrument(tracing::info_span!("signals")),
    );
    server.await.context("HTTP server")?;
    info!("catalog stopped");
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
