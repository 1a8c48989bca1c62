//! The operator's HTTP port (`--metrics-listen`): `/metrics` (OpenMetrics
//! for Prometheus, the Prometheus text format for other clients), `/status` (JSON: policy and every upstream up or down, why, and
//! for how long) and `/healthz`. Read-only, GET only. Bound, announced
//! (role `metrics`) and served by [`edge::probe`].
//!
//! Its connections are guarded ([`edge::conn`]) so that clients which
//! connect and send nothing cannot starve the liveness probe: at most
//! [`MAX_CONNECTIONS`] at once, at most [`MAX_PER_PEER`] per IP address, a
//! request line within the handshake deadline, and closed after
//! [`IDLE_TIMEOUT`] without a byte.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use edge::conn::Limits;
pub use edge::probe::HttpError;

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

/// The router, for serving and for tests.
pub fn router(aggregate: Arc<Aggregate>, metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/status", get(status))
        .route("/healthz", get(edge::probe::healthz))
        .layer(axum::middleware::from_fn(edge::probe::in_span))
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
    let app = router(aggregate, metrics);
    let (_, server) = edge::probe::bind(addr, Some("metrics"), limits, app, shutdown).await?;
    Ok(server)
}

async fn render_metrics(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    edge::probe::metrics(&headers, state.metrics.render())
}

async fn status(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.aggregate.status())
}
