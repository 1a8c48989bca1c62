//! The orchestrator's HTTP port (`--http-listen`): `/healthz` (200 while
//! the process runs), `/readyz` (200 once the Kubernetes API has answered —
//! as leader, once the caches are filled; as standby, once the Lease could
//! be read — else 503; the body says `leader` or `standby`) and `/metrics` (see
//! [`crate::metrics`]). Connections are served by axum with a one-minute
//! limit per request.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Longest a scrape may take.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

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
    match (metrics.reached_api(), metrics.is_leading()) {
        (true, true) => (StatusCode::OK, "ok: leader\n"),
        (true, false) => (StatusCode::OK, "ok: standby\n"),
        (false, _) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the Kubernetes API has not answered yet\n",
        ),
    }
}

async fn render_metrics(State(metrics): State<Metrics>) -> impl IntoResponse {
    let body = tokio::time::timeout(REQUEST_DEADLINE, async { metrics.render() })
        .await
        .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
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
    tracing::info!(addr = %bound, "serving /healthz, /readyz and /metrics");
    let app = router(metrics);
    Ok(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    })
}
