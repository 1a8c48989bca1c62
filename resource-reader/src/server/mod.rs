//! Serves any [`ResourceReader`] over gRPC in the wire shape of a Liqo
//! release, with gRPC health checking and server reflection (so `grpcurl`
//! works without the proto files).
//!
//! Every new `Subscribe` immediately gets an "all clusters" notification,
//! then one per change; a controller that half-closes and re-subscribes
//! (Liqo v0.6+ does, 100 ms after any stream error) just gets a new stream.
//! Shape A (Liqo v0.5) answers transient failures from the last known
//! answers and ends subscriptions with an error, never cleanly (see
//! `shape_a`).
//!
//! Limits ([`ServerOptions`]): connections in total and per peer, a deadline
//! for a new connection's HTTP/2 preface (so connections that send nothing
//! cannot hold the slots), concurrent streams per connection, request size.

mod adapter;
mod shape_a;
mod shape_b;
mod shape_c;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edge::conn::{GuardedListener, Limits};
use liqo_proto::{shape_a as a, shape_b as b, shape_c as c, SERVICE_NAME};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tracing::Instrument;

use crate::reader::ResourceReader;
pub use crate::wire::LiqoApi;
use adapter::{Adapter, LastKnown};

/// How to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The wire shape.
    pub api: LiqoApi,
    /// Shape C only: the `pool_name` of the single pool answered.
    pub pool_name: String,
    /// Shape C only: the `pool_prefix` of the single pool answered.
    pub pool_prefix: String,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// Connections open at once from one IP address; more are closed at once.
    pub max_connections_per_peer: usize,
    /// How long a new connection has to send the HTTP/2 client preface
    /// before it is closed.
    pub handshake_timeout: Duration,
    /// Shape A only: how long a read waits for a reader that cannot answer
    /// yet (not synced, upstream away) and was never answered for that
    /// originator, before the error is answered.
    pub first_sync_timeout: Duration,
    /// Concurrent HTTP/2 streams (calls) per connection.
    pub max_concurrent_streams: u32,
    /// Largest request accepted, in bytes (requests are a cluster ID).
    pub max_request_size: usize,
}

impl ServerOptions {
    pub fn new(api: LiqoApi) -> Self {
        Self {
            api,
            pool_name: String::new(),
            pool_prefix: String::new(),
            max_connections: 256,
            max_connections_per_peer: 32,
            handshake_timeout: Duration::from_secs(5),
            first_sync_timeout: Duration::from_secs(10),
            max_concurrent_streams: 128,
            max_request_size: 64 * 1024,
        }
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self::new(LiqoApi::default())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Bind `addr` and serve `reader` until `shutdown` completes, then stop
/// accepting, end open subscriptions and wait for in-flight calls.
pub async fn serve(
    reader: Arc<dyn ResourceReader>,
    addr: SocketAddr,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    edge::announce::listening(None, "http", listener.local_addr().unwrap_or(addr));
    serve_listener(reader, listener, options, shutdown).await
}

/// As [`serve`], on a listener bound by the caller (bind port 0 to let the
/// system pick a free port, then read it from the listener).
pub async fn serve_listener(
    reader: Arc<dyn ResourceReader>,
    listener: TcpListener,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (_always, serving) = watch::channel(true);
    serve_listener_reporting(reader, listener, options, serving, shutdown).await
}

/// As [`serve_listener`], with the gRPC health of the ResourceReader
/// service following `serving` (true: `SERVING`, false: `NOT_SERVING`), for
/// readers that can be up yet have nothing to answer with, like an
/// aggregator whose upstreams are all down. The overall server status
/// (service `""`) stays `SERVING` while the process runs, so a liveness
/// probe does not restart a process that is waiting for its upstreams.
pub async fn serve_listener_reporting(
    reader: Arc<dyn ResourceReader>,
    listener: TcpListener,
    options: ServerOptions,
    mut serving: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let stop = CancellationToken::new();
    let adapter = Adapter {
        reader,
        stop: stop.clone(),
        last_known: (options.api == LiqoApi::V05)
            .then(|| Arc::new(LastKnown::new(options.first_sync_timeout))),
    };

    let (health, health_service) = tonic_health::server::health_reporter();
    let status_of = |up: bool| {
        if up {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    // The first status is set before serving, so no health check can find
    // the service unknown; the task follows the changes.
    let first = *serving.borrow_and_update();
    health
        .set_service_status(SERVICE_NAME, status_of(first))
        .await;
    let mirror = {
        let health = health.clone();
        async move {
            // Ends when the sender is gone: the last status stands.
            while serving.changed().await.is_ok() {
                let up = *serving.borrow_and_update();
                health.set_service_status(SERVICE_NAME, status_of(up)).await;
                tracing::debug!(serving = up, "health status");
            }
        }
    };
    let mirror = tokio::spawn(mirror.instrument(tracing::info_span!("health")));
    let fds = options.api.file_descriptor_set();
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(fds)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(fds)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    let max = options.max_request_size;
    let mut server = Server::builder()
        .max_concurrent_streams(options.max_concurrent_streams)
        // Find dead controllers whose subscription would otherwise linger.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .trace_fn(|request| tracing::info_span!("grpc", path = %request.uri().path()));
    let router = match options.api {
        LiqoApi::V05 => server.add_service(
            a::resource_reader_server::ResourceReaderServer::new(shape_a::ShapeA(adapter))
                .max_decoding_message_size(max),
        ),
        LiqoApi::V06 => server.add_service(
            b::resource_reader_server::ResourceReaderServer::new(shape_b::ShapeB(adapter))
                .max_decoding_message_size(max),
        ),
        LiqoApi::V09 => server.add_service(
            c::resource_reader_server::ResourceReaderServer::new(shape_c::ShapeC {
                adapter,
                pool_name: options.pool_name.clone(),
                pool_prefix: options.pool_prefix.clone(),
            })
            .max_decoding_message_size(max),
        ),
    }
    .add_service(health_service)
    .add_service(reflection_v1)
    .add_service(reflection_v1alpha);

    let local = listener.local_addr().ok();
    tracing::info!(addr = ?local, api = %options.api, "serving ResourceReader");
    let incoming = GuardedListener::new(
        listener,
        Limits {
            max_connections: options.max_connections,
            max_per_peer: options.max_connections_per_peer,
            handshake_timeout: options.handshake_timeout,
            ..Limits::http2()
        },
    )
    .into_stream();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: ending subscriptions");
        mirror.abort();
        health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        stop.cancel();
    };
    router
        .serve_with_incoming_shutdown(incoming, signal)
        .await?;
    Ok(())
}
