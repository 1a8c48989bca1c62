//! The operator's HTTP port (`--metrics-listen`): `/metrics` (Prometheus
//! text), `/status` (JSON: policy and every upstream up or down, why, and
//! for how long) and `/healthz`. Read-only, GET only; at most
//! [`MAX_CONNECTIONS`] connections at once.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use resource_monitor::server::LimitedConn;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::sum::Aggregate;

/// Connections to the operator's port open at once; more wait to be
/// accepted. Scrapers and humans need few.
pub const MAX_CONNECTIONS: usize = 64;

#[derive(Clone)]
struct AppState {
    aggregate: Arc<Aggregate>,
    metrics: Metrics,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {addr} for metrics: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("metrics server failed: {0}")]
    Serve(std::io::Error),
}

/// The router, for serving and for tests.
pub fn router(aggregate: Arc<Aggregate>, metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/status", get(status))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(axum::middleware::from_fn(in_span))
        .with_state(AppState { aggregate, metrics })
}

/// Bind `addr` now (so a bad address fails at start) and return the
/// server future, which runs until `shutdown` completes.
pub async fn bind(
    addr: SocketAddr,
    aggregate: Arc<Aggregate>,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<impl Future<Output = Result<(), HttpError>>, HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    tracing::info!(%addr, "serving /metrics, /status and /healthz");
    let app = router(aggregate, metrics);
    Ok(async move {
        let listener = Limited {
            listener,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        };
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    })
}

/// Run each request in a span naming it.
async fn in_span(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let span =
        tracing::info_span!("http", method = %request.method(), path = %request.uri().path());
    next.run(request).instrument(span).await
}

async fn render_metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn status(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.aggregate.status())
}

/// A listener that holds one of a fixed number of slots per open connection.
struct Limited {
    listener: TcpListener,
    slots: Arc<Semaphore>,
}

impl axum::serve::Listener for Limited {
    type Io = LimitedConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LimitedConn, SocketAddr) {
        let slot = self.slots.clone().acquire_owned().await;
        loop {
            match self.listener.accept().await {
                Ok((io, addr)) => {
                    // The semaphore is never closed, so the slot is always there.
                    if let Ok(slot) = slot {
                        return (LimitedConn::new(io, slot), addr);
                    }
                    drop(io);
                    return std::future::pending().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics port: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}
