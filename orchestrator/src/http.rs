//! The orchestrator's HTTP port (`--http-listen`): `/healthz` (200 while
//! the process runs), `/readyz` (200 once the Kubernetes API has answered —
//! as leader, once the caches are filled; as standby, once the Lease could
//! be read — else 503; the body says `leader` or `standby`) and `/metrics` (see
//! [`crate::metrics`]).
//!
//! Its connections are guarded ([`edge::conn`]): at most 64 at once, 8 per
//! IP address, a request line within 5 s, closed after 30 s without a byte,
//! so clients that connect and send nothing cannot starve the probes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use edge::conn::{GuardedConn, GuardedListener, Limits};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// The port's connection limits.
fn limits() -> Limits {
    Limits {
        max_connections: 64,
        max_per_peer: 8,
        handshake_timeout: Duration::from_secs(5),
        idle_timeout: Some(Duration::from_secs(30)),
        ..Limits::http1()
    }
}

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
    tracing::info!(addr = %bound, "serving /healthz, /readyz and /metrics");
    let app = router(metrics);
    Ok(async move {
        axum::serve(Guarded(GuardedListener::new(listener, limits())), app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    })
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
