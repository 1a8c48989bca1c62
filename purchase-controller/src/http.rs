//! The controller's HTTP port (`--http-listen`): `/healthz` (200 while the
//! process runs), `/readyz` (200 once the Purchase cache is filled, else
//! 503) and `/metrics` (see [`crate::metrics`]). Connections are guarded
//! ([`edge::conn`], HTTP/1 limits): capped in number, overall and per peer,
//! a request line within 5 s, closed after 30 s without a byte.

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use edge::conn::{GuardedListener, Limits};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

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

pub fn router(metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(|State(m): State<Metrics>| async move {
                if m.reached_api() {
                    (StatusCode::OK, "ok\n")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: the Kubernetes API has not answered yet\n",
                    )
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(m): State<Metrics>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.render(),
                )
                    .into_response()
            }),
        )
        .with_state(metrics)
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
        axum::serve(GuardedListener::new(listener, Limits::http1()), app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    })
}
