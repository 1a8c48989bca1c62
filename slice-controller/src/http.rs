//! The controller's HTTP port (`--controller-http-listen`):
//!
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 once the Kubernetes API has answered (as leader, once
//!   the slice cache is filled; as standby, once the Lease could be read)
//!   and, under the `contracts` policy, the catalog first listed the
//!   contracts; else 503. The body says `leader` or `standby`, and notes
//!   when the catalog cannot be reached (decisions then use the last known
//!   contracts);
//! - `/metrics`: Prometheus text (see [`crate::metrics`]).

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// The port could not be served.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// The routes, for serving and for tests.
pub fn router(metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(metrics)
}

async fn readyz(State(metrics): State<Metrics>) -> impl IntoResponse {
    let role = if metrics.is_leading() {
        "leader"
    } else {
        "standby"
    };
    let contracts = metrics.contracts_state();
    if metrics.reached_api() && contracts == crate::metrics::CONTRACTS_WAITING {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no contracts read from the catalog yet\n".to_string(),
        )
    } else if metrics.reached_api() && contracts == crate::metrics::CONTRACTS_STALE {
        (
            StatusCode::OK,
            format!("ok: {role}; the catalog cannot be reached: deciding from the last known contracts\n"),
        )
    } else if metrics.reached_api() {
        (StatusCode::OK, format!("ok: {role}\n"))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the Kubernetes API has not answered yet\n".to_string(),
        )
    }
}

async fn render_metrics(State(metrics): State<Metrics>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// Bind `addr` now (a bad address fails at start) and return the server,
/// which runs until `shutdown` completes.
pub async fn bind(
    addr: SocketAddr,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<impl Future<Output = Result<(), HttpError>>, HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    edge::announce::listening(Some("controller"), "http", bound);
    tracing::info!(addr = %bound, "serving /healthz, /readyz and /metrics");
    let app = router(metrics);
    Ok(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    })
}
