//! The operator's HTTP port of a controller or server: `/healthz` (200
//! while the process runs), `/readyz` and `/metrics` (OpenMetrics text),
//! written once for every binary.
//!
//! What a binary adds is what only it knows: when it is ready and its
//! metrics ([`Probes`], usually a prometheus-client registry rendered by
//! [`openmetrics`], answered in the format the scraper asks for:
//! [`crate::metrics::exposition`]), and any route of its own (merged into [`router`]'s
//! `Router`). [`bind`] binds the port at once (a bad or taken address fails
//! at start), announces it ([`crate::announce`]) and serves it through a
//! [`GuardedListener`] with the given [`Limits`], so clients that connect
//! and send nothing cannot starve the probes. A controller, which has no
//! route of its own, serves its port with [`spawn`] and, once the shutdown
//! it passed has completed, waits for it with [`join`].

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
/// The status a [`Probes::readiness`] answers with.
pub use axum::http::StatusCode;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::conn::{GuardedListener, Limits};

/// A registry's OpenMetrics text, and the `Content-Type` it is answered
/// with (Prometheus asks for it), where the controllers have always taken
/// them.
pub use crate::metrics::{openmetrics, OPENMETRICS};

/// What a binary's probe port reports.
pub trait Probes: Clone + Send + Sync + 'static {
    /// `/readyz`: the status (200 or 503) and a one-line body.
    fn readiness(&self) -> (StatusCode, String);
    /// `/metrics`: the OpenMetrics text (a scraper that does not ask for
    /// OpenMetrics gets it in the text format).
    fn render(&self) -> String;
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

/// `/healthz`, `/readyz` and `/metrics` over `probes`.
pub fn router<P: Probes>(probes: P) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/readyz",
            get(|State(p): State<P>| async move { p.readiness() }),
        )
        .route(
            "/metrics",
            get(|State(p): State<P>, headers: HeaderMap| async move {
                metrics(&headers, p.render())
            }),
        )
        .layer(axum::middleware::from_fn(in_span))
        .with_state(probes)
}

/// Run each request in a span naming it (an axum middleware).
pub async fn in_span(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let span =
        tracing::info_span!("http", method = %request.method(), path = %request.uri().path());
    next.run(request).instrument(span).await
}

/// `/healthz`: 200 while the process runs.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// A `/metrics` answer to a request with `headers`: `openmetrics` (a
/// registry's rendering) in the format its `Accept` header asks for.
pub fn metrics(headers: &HeaderMap, openmetrics: String) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = crate::metrics::exposition(openmetrics, accept);
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body)
}

/// How long [`join`] waits for the port's connections to close.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Bind `addr` now, as [`bind`] does, and serve [`router`]`(probes)` with
/// the HTTP/1 limits on a task of its own until `shutdown` completes.
pub async fn spawn<P: Probes>(
    addr: SocketAddr,
    role: Option<&str>,
    probes: P,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<JoinHandle<Result<(), HttpError>>, HttpError> {
    let (_, server) = bind(addr, role, Limits::http1(), router(probes), shutdown).await?;
    Ok(tokio::spawn(server))
}

/// Wait for a port [`spawn`]ed with a shutdown that has completed: its
/// outcome, or nothing after [`CLOSE_GRACE`], because a scraper holding a
/// connection open must not keep a stopping process alive.
pub async fn join(server: JoinHandle<Result<(), HttpError>>) -> Result<(), HttpError> {
    match tokio::time::timeout(CLOSE_GRACE, server).await {
        Ok(Ok(served)) => served,
        Ok(Err(error)) => {
            tracing::warn!(%error, "the HTTP task failed");
            Ok(())
        }
        Err(_) => {
            tracing::warn!("HTTP connections still open after 2s; closing");
            Ok(())
        }
    }
}

/// Bind `addr` now (a bad or taken address fails at start), announce it
/// on stdout as `<program>[ <role>] listening on http://ADDR`, and return
/// the bound address and the server, which serves `app` with `limits`
/// until `shutdown` completes.
pub async fn bind(
    addr: SocketAddr,
    role: Option<&str>,
    limits: Limits,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, impl Future<Output = Result<(), HttpError>>), HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    crate::announce::listening(role, "http", bound);
    tracing::info!(addr = %bound, "serving the HTTP port");
    Ok((bound, async move {
        axum::serve(GuardedListener::new(listener, limits), app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(HttpError::Serve)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Fake(Arc<AtomicBool>);

    impl Probes for Fake {
        fn readiness(&self) -> (StatusCode, String) {
            if self.0.load(Ordering::SeqCst) {
                (StatusCode::OK, "ok\n".into())
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into())
            }
        }
        fn render(&self) -> String {
            "# HELP up Up.\n# TYPE up counter\nup_total 1\n# EOF\n".into()
        }
    }

    /// One request over a plain TCP connection: the raw answer.
    async fn get_raw(addr: SocketAddr, path: &str) -> String {
        get_raw_with(addr, path, "").await
    }

    /// The same, with `headers` (each line ending in CRLF).
    async fn get_raw_with(addr: SocketAddr, path: &str, headers: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_the_three_routes_on_the_bound_port() {
        let fake = Fake::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr, server) = bind(
            "127.0.0.1:0".parse().unwrap(),
            None,
            Limits::http1(),
            router(fake.clone()),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        let server = tokio::spawn(server);
        assert!(get_raw(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        let not_ready = get_raw(addr, "/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        fake.0.store(true, Ordering::SeqCst);
        let ready = get_raw(addr, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
        // Prometheus asks for OpenMetrics; curl and promtool get the text
        // format.
        let prometheus =
            "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n";
        let metrics = get_raw_with(addr, "/metrics", prometheus).await;
        assert!(metrics.contains(OPENMETRICS), "{metrics}");
        assert!(metrics.ends_with("up_total 1\n# EOF\n"), "{metrics}");
        let metrics = get_raw(addr, "/metrics").await;
        assert!(metrics.contains(crate::metrics::TEXT_FORMAT), "{metrics}");
        assert!(
            metrics.ends_with("# TYPE up_total counter\nup_total 1\n"),
            "{metrics}"
        );
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }

    #[test]
    fn openmetrics_renders_a_registry() {
        let mut registry = prometheus_client::registry::Registry::with_prefix("x");
        let up = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        registry.register("up", "Up", up.clone());
        up.set(1);
        let text = openmetrics(&registry);
        assert!(text.contains("\nx_up 1\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[tokio::test]
    async fn a_spawned_port_is_joined_after_its_shutdown() {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = spawn(
            "127.0.0.1:0".parse().unwrap(),
            None,
            Fake::default(),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        let _ = stop.send(());
        join(server).await.unwrap();
    }

    #[tokio::test]
    async fn a_taken_address_fails_at_bind() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind(
            addr,
            None,
            Limits::http1(),
            router(Fake::default()),
            async {},
        )
        .await
        .err()
        .expect("a taken address is refused");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
