//! The operator's HTTP port (`--metrics-listen`): `/metrics` (Prometheus
//! text), `/status` (JSON: policy and every upstream up or down, why, and
//! for how long) and `/healthz`. Read-only, GET only.
//!
//! Its connections are guarded ([`edge::conn`]) so that clients which
//! connect and send nothing cannot starve the liveness probe: at most
//! [`MAX_CONNECTIONS`] at once, at most [`MAX_PER_PEER`] per IP address, a
//! request line within the handshake deadline, and closed after
//! [`IDLE_TIMEOUT`] without a byte.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use edge::conn::{GuardedConn, GuardedListener, Limits};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::sum::Aggregate;

/// Connections to the operator's port open at once; more wait to be
/// accepted. Scrapers and humans need few.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections to the operator's port from one IP address at once, at most
/// (a lower `--max-connections-per-peer` applies).
pub const MAX_PER_PEER: usize = 8;

/// A connection that sends nothing for this long is closed (HTTP/1 keeps
/// connections alive between requests).
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The operator port's connection limits, given the flags that also apply
/// to the gRPC port.
pub fn limits(max_per_peer: usize, handshake_timeout: std::time::Duration) -> Limits {
    Limits {
        max_connections: MAX_CONNECTIONS,
        max_per_peer: max_per_peer.min(MAX_PER_PEER),
        handshake_timeout,
        idle_timeout: Some(IDLE_TIMEOUT),
        ..Limits::http1()
    }
}

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
    limits: Limits,
    aggregate: Arc<Aggregate>,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<impl Future<Output = Result<(), HttpError>>, HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    edge::announce::listening(Some("metrics"), "http", bound);
    tracing::info!(addr = %bound, "serving /metrics, /status and /healthz");
    let app = router(aggregate, metrics);
    Ok(async move {
        let listener = Guarded(GuardedListener::new(listener, limits));
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

/// The guarded listener, as axum takes it.
struct Guarded(GuardedListener);

impl axum::serve::Listener for Guarded {
    type Io = GuardedConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedConn, SocketAddr) {
        self.0.accept().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}
