//! Wiring: start the upstream clients, the summing reader, the operator's
//! HTTP port and the reloader, then serve the pooled reader over gRPC with
//! `resource-reader`'s server (any of Liqo's three wire shapes, with
//! health checking and reflection) until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use resource_reader::client::ClientError;
use resource_reader::server::{self, ServeError, ServerOptions};
use tokio::sync::watch;
use tracing::Instrument;

use crate::config::{Cli, ConfigError, Settings};
use crate::http::{self, HttpError};
use crate::metrics::Metrics;
use crate::reload;
use crate::sum::Aggregate;

/// How long startup waits for the upstreams to be reachable before serving
/// anyway (those that are not are handled by the policy meanwhile).
const STARTUP_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Upstream(#[from] ClientError),
    #[error("the metrics port: {0}")]
    Http(#[from] HttpError),
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Run the aggregator described by `cli` until `shutdown` completes.
pub async fn run(
    cli: Cli,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let settings = Settings::resolve(&cli)?;
    let metrics = Metrics::new();
    let aggregate = Arc::new(Aggregate::start(
        &settings.dynamic,
        settings.coalesce,
        metrics.clone(),
    )?);
    tracing::info!(
        upstreams = ?aggregate.upstream_ids(),
        policy = %settings.dynamic.policy,
        upstream_timeout = ?settings.dynamic.upstream_timeout,
        liqo_api = %settings.liqo_api,
        "starting"
    );
    if settings.dynamic.upstreams.is_empty() {
        tracing::warn!(
            "no upstreams configured: every read answers an empty offer until some are added"
        );
    }

    // One shutdown signal, shared by the gRPC server and the HTTP port.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    // Bind both ports first, so a taken port fails at once. Calls that
    // arrive while the upstreams connect wait in the accept backlog.
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: settings.listen,
            source,
        })?;
    edge::announce::listening(
        None,
        "http",
        listener.local_addr().unwrap_or(settings.listen),
    );
    let http = match settings.metrics_listen {
        Some(addr) => {
            let limits = http::limits(
                settings.max_connections_per_peer,
                settings.handshake_timeout,
            );
            let server =
                http::bind(addr, limits, aggregate.clone(), metrics.clone(), stopped()).await?;
            Some(tokio::spawn(server.instrument(tracing::info_span!("http"))))
        }
        None => None,
    };

    let reloader = reload::Reloader::start(
        cli.clone(),
        settings.clone(),
        aggregate.clone(),
        metrics.clone(),
    );

    let unreachable = aggregate.wait_connected(STARTUP_GRACE).await;
    if !unreachable.is_empty() {
        tracing::warn!(
            ?unreachable,
            "some upstreams are not reachable yet; serving anyway"
        );
    }

    let reloader = tokio::spawn(reloader.run().instrument(tracing::info_span!("reloader")));

    let options = ServerOptions {
        pool_name: settings.pool_name.clone(),
        pool_prefix: settings.pool_prefix.clone(),
        max_connections: settings.max_connections,
        max_connections_per_peer: settings.max_connections_per_peer,
        handshake_timeout: settings.handshake_timeout,
        first_sync_timeout: settings.first_sync_timeout,
        ..ServerOptions::new(settings.liqo_api)
    };
    let (serving_tx, serving) = watch::channel(aggregate.any_up());
    let health = tokio::spawn(
        report_health(aggregate.clone(), serving_tx).instrument(tracing::info_span!("health")),
    );
    let grpc =
        server::serve_listener_reporting(aggregate.clone(), listener, options, serving, stopped());
    tokio::pin!(grpc);
    let served = tokio::select! {
        served = &mut grpc => served,
        () = shutdown => {
            tracing::info!("shutting down");
            let _ = stop_tx.send(true);
            grpc.await
        }
    };
    let _ = stop_tx.send(true);
    reloader.abort();
    health.abort();
    if let Some(http) = http {
        match http.await {
            Ok(result) => result?,
            Err(error) => tracing::error!(%error, "metrics server task failed"),
        }
    }
    served?;
    Ok(())
}

/// How often gRPC health is brought in line with the upstreams' state.
const HEALTH_EVERY: Duration = Duration::from_millis(250);

/// Keep the ResourceReader service's gRPC health `SERVING` while at least
/// one upstream is up, `NOT_SERVING` while none is (every read would answer
/// an empty offer), so a readiness probe or a load balancer can tell.
async fn report_health(aggregate: Arc<Aggregate>, serving: watch::Sender<bool>) {
    let mut tick = tokio::time::interval(HEALTH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let up = aggregate.any_up();
        serving.send_if_modified(|was| {
            if *was == up {
                return false;
            }
            if up {
                tracing::info!("an upstream is up: gRPC health SERVING");
            } else {
                tracing::warn!("no upstream is up: gRPC health NOT_SERVING");
            }
            *was = up;
            true
        });
    }
}
