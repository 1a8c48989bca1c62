//! The `aggregator` against clients and upstreams that misbehave (issue 13):
//! idle connections on the gRPC and the metrics port, an upstream answering
//! negative quantities, and Liqo v0.5's habit of withdrawing the offer on
//! any failed read.

use crate::aggregator_support;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregator_support::{Aggregator, Monitor};
use anyhow::{Context, Result};
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::process::{open_idle_connections, still_open_at};
use resource_monitor::server::{self, LiqoApi, ServerOptions};
use resource_monitor::source::MemorySource;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Where the idle connections come from: another loopback address than the
/// well-behaved clients', as an attacker would be another host.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// A gRPC read, a gRPC health check and `GET /healthz` answered within
/// `within`, each on a fresh connection.
async fn answers_within(agg: &Aggregator, within: Duration) -> Result<()> {
    tokio::time::timeout(within, async {
        let client = ReaderClient::connect(agg.port, Shape::A).await?;
        let answer = client.read("peer-1").await?;
        anyhow::ensure!(!answer.is_empty(), "empty answer");
        let status = HealthClient::new(client.channel())
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?
            .into_inner()
            .status;
        anyhow::ensure!(status == 1, "health {status} is not SERVING");
        let body = agg.get("/healthz").await?;
        anyhow::ensure!(body.trim() == "ok", "/healthz answered {body:?}");
        Ok(())
    })
    .await
    .with_context(|| format!("no answers within {within:?}"))?
}

/// Finding 1 (high): 256 connections that send nothing used to make every
/// ReadResources fail with DEADLINE_EXCEEDED, and 64 starved the metrics
/// port (liveness probes failed). Now each port limits connections per peer
/// and closes connections that send nothing within `--handshake-timeout`.
#[tokio::test]
async fn idle_connections_cannot_lock_out_reads_or_probes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", "cpu: 2\n")?;
    let agg = Aggregator::start(["--upstream", &a.flag(), "--handshake-timeout", "2s"])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    client
        .read_until("peer-1", e2e::EVENTUALLY, |r| !r.is_empty())
        .await?;
    answers_within(&agg, Duration::from_secs(5)).await?;

    let opened = Instant::now();
    let grpc_idle = open_idle_connections(agg.port, 300, ATTACKER).await?;
    let http_idle = open_idle_connections(agg.metrics_port, 100, ATTACKER).await?;
    answers_within(&agg, Duration::from_secs(5)).await?;
    answers_within(&agg, Duration::from_secs(5)).await?;

    let deadline = opened + Duration::from_secs(2 + 3);
    let left = still_open_at(grpc_idle, deadline).await;
    assert_eq!(left, 0, "{left} idle gRPC connections still open");
    let left = still_open_at(http_idle, deadline).await;
    assert_eq!(left, 0, "{left} idle HTTP connections still open");
    answers_within(&agg, Duration::from_secs(5)).await?;
    Ok(())
}

/// Finding 3 (low): an upstream answering `cpu: -100` was summed with
/// another's `cpu: 2` into `-98`. Negative upstream quantities are ignored
/// now (counted as zero), with a warning naming the upstream and resource.
#[tokio::test]
async fn negative_upstream_quantities_are_ignored() -> Result<()> {
    // An upstream that answers a negative quantity: not a resource-monitor
    // (which refuses them), but any server of the protocol could.
    let hostile = MemorySource::new(
        quantity::ResourceList::from_strings([("cpu", "-100"), ("memory", "1Gi")])
            .map_err(|(name, e)| anyhow::anyhow!("{name}: {e}"))?,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hostile_port = listener.local_addr()?.port();
    let serving = tokio::spawn(server::serve_listener(
        Arc::new(hostile),
        listener,
        ServerOptions::new(LiqoApi::V05),
        std::future::pending(),
    ));

    let dir = tempfile::tempdir()?;
    let b = Monitor::start(dir.path(), "b", "cpu: 2\n")?;
    let agg = Aggregator::start([
        "--upstream",
        &format!("a=127.0.0.1:{hostile_port}"),
        "--upstream",
        &b.flag(),
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    let want = resources(&[("cpu", "2"), ("memory", "1Gi")]);
    let answer = client
        .read_until("x", e2e::EVENTUALLY, |r| r.len() == 2)
        .await?;
    assert_eq!(answer, want);
    serving.abort();
    Ok(())
}

/// Finding 5: downstream shape A (Liqo v0.5 withdraws the offer on any
/// failed read): with every upstream down, a cluster that was answered
/// before gets the last known sum, not UNAVAILABLE. (Shapes B and C still
/// answer UNAVAILABLE; see `aggregator_upstreams`.)
#[tokio::test]
async fn shape_a_serves_the_last_known_sum_when_every_upstream_is_down() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut a = Monitor::start(dir.path(), "a", "cpu: 2\nmemory: 1Gi\n")?;
    let agg = Aggregator::start(["--upstream", &a.flag(), "--policy", "omit"])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    let want = resources(&[("cpu", "2"), ("memory", "1Gi")]);
    client
        .read_until("x", e2e::EVENTUALLY, |r| r == &want)
        .await?;
    a.kill();
    agg.wait_upstream("a", false, e2e::EVENTUALLY).await?;
    for _ in 0..3 {
        assert_eq!(client.read("x").await?, want);
    }
    Ok(())
}
