//! Upstreams that die, freeze and come back, under each policy: what reads
//! answer meanwhile, and how `/status`, `/metrics` and notifications show it.

use crate::aggregator_support;

use std::time::Duration;

use aggregator_support::{metric, Aggregator, Monitor};
use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::EVENTUALLY;
use tonic_health::pb::health_check_response::ServingStatus::{self, NotServing, Serving};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

const A: &str = "cpu: \"1\"\nmemory: 1Gi\n";
const B: &str = "cpu: 500m\nmemory: 512Mi\n";

fn signal(pid: u32, sig: &str) -> Result<()> {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill {sig} {pid} failed");
    Ok(())
}

#[tokio::test]
async fn omit_policy_leaves_out_a_killed_or_frozen_upstream_and_takes_it_back() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", A)?;
    let mut b = Monitor::start(dir.path(), "b", B)?;
    let agg = Aggregator::start([
        "--upstream",
        &a.flag(),
        "--upstream",
        &b.flag(),
        "--policy",
        "omit",
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    let both = resources(&[("cpu", "1500m"), ("memory", "1536Mi")]);
    let only_a = resources(&[("cpu", "1"), ("memory", "1Gi")]);
    client.read_until("x", EVENTUALLY, |r| r == &both).await?;
    let mut sub = client.subscribe().await?;
    sub.drain(Duration::from_millis(300)).await;

    // Killed: left out at once, reported down, and downstream told to re-read.
    b.kill();
    assert_eq!(sub.next_within(EVENTUALLY).await?, "");
    client.read_until("x", EVENTUALLY, |r| r == &only_a).await?;
    let entry = agg.wait_upstream("b", false, EVENTUALLY).await?;
    assert!(
        entry["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{entry}"
    );
    assert_eq!(entry["last_known_in_use"], false, "{entry}");
    let status = agg.status().await?;
    assert_eq!(status["policy"], "omit");
    assert_eq!(
        (status["up"].as_u64(), status["down"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );
    let m = agg.metrics().await?;
    let up = |id: &str, port: u16| {
        format!("aggregator_upstream_up{{cluster_id=\"{id}\",address=\"127.0.0.1:{port}\"}}")
    };
    assert_eq!(metric(&m, &up("b", b.port)), Some(0.0), "{m}");
    assert_eq!(metric(&m, &up("a", a.port)), Some(1.0), "{m}");
    assert!(
        metric(
            &m,
            "aggregator_upstream_answers_total{cluster_id=\"b\",outcome=\"omitted\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );

    // Back: counted again, reported up, and downstream told.
    b.restart()?;
    assert_eq!(sub.next_within(EVENTUALLY).await?, "");
    client.read_until("x", EVENTUALLY, |r| r == &both).await?;
    agg.wait_upstream("b", true, EVENTUALLY).await?;
    assert_eq!(metric(&agg.metrics().await?, &up("b", b.port)), Some(1.0));

    // Frozen (SIGSTOP): connected but silent, so reads time out (the
    // default --upstream-timeout, 1 s) and leave it out. A read that also
    // finds `a` late on a loaded machine leaves `a` out too: read again.
    let pid = b.pid();
    signal(pid, "-STOP")?;
    let frozen = client.read_until("x", EVENTUALLY, |r| r == &only_a).await;
    signal(pid, "-CONT")?;
    frozen?;
    let m = agg.metrics().await?;
    assert!(
        metric(
            &m,
            "aggregator_upstream_read_errors_total{cluster_id=\"b\",reason=\"timeout\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );
    client.read_until("x", EVENTUALLY, |r| r == &both).await?;
    Ok(())
}

/// The `--max-age` of the last-known test: the reads that must still get
/// b's held answer come within it of b going down, and its expiry is
/// awaited within it of the subscription (which starts after b went down).
/// Long enough that a loaded machine's pauses between those steps fit.
const MAX_AGE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn last_known_policy_holds_a_killed_upstream_for_max_age_only() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", A)?;
    let mut b = Monitor::start(dir.path(), "b", B)?;
    let agg = Aggregator::start([
        "--upstream",
        &a.flag(),
        "--upstream",
        &b.flag(),
        "--policy",
        "last-known",
        "--max-age",
        &format!("{}s", MAX_AGE.as_secs()),
        "--liqo-api",
        "v0.6",
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::B).await?;
    let both = resources(&[("cpu", "1500m"), ("memory", "1536Mi")]);
    let only_a = resources(&[("cpu", "1"), ("memory", "1Gi")]);
    client.read_until("x", EVENTUALLY, |r| r == &both).await?;

    b.kill();
    let entry = agg.wait_upstream("b", false, EVENTUALLY).await?;
    assert_eq!(entry["last_known_in_use"], true, "{entry}");
    // Within max age, x still gets b's last answer for x…
    assert_eq!(client.read("x").await?, both);
    // …but a cluster b never answered gets nothing from it.
    assert_eq!(client.read("y").await?, only_a);
    let m = agg.metrics().await?;
    assert!(
        metric(
            &m,
            "aggregator_upstream_answers_total{cluster_id=\"b\",outcome=\"last_known\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );

    // When the held answer expires, downstream is told, and b is left out.
    let mut sub = client.subscribe().await?;
    sub.drain(Duration::from_millis(300)).await;
    assert_eq!(sub.next_within(MAX_AGE).await?, "");
    assert_eq!(client.read("x").await?, only_a);
    assert_eq!(agg.upstream_status("b").await?["last_known_in_use"], false);

    b.restart()?;
    client.read_until("x", EVENTUALLY, |r| r == &both).await?;
    agg.wait_upstream("b", true, EVENTUALLY).await?;
    Ok(())
}

/// Downstream shape B (Liqo v0.6+, which keeps the offer and retries on an
/// error); shape A answers the last known sum instead, see
/// `aggregator_hardening`.
#[tokio::test]
async fn every_upstream_down_is_unavailable_not_an_empty_offer() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut a = Monitor::start(dir.path(), "a", A)?;
    let agg = Aggregator::start([
        "--upstream",
        &a.flag(),
        "--policy",
        "omit",
        "--liqo-api",
        "v0.6",
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::B).await?;
    client
        .read_until("x", EVENTUALLY, |r| !r.is_empty())
        .await?;
    health_becomes(&client, "resource_reader", Serving).await?;
    a.kill();
    agg.wait_upstream("a", false, EVENTUALLY).await?;
    let err = client.read("x").await.expect_err("nobody can answer");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    // The one cluster with nothing to ask gets an empty offer, not an error.
    assert_eq!(client.read("a").await?, resources(&[]));
    // gRPC health tells a readiness probe; the process itself stays live.
    health_becomes(&client, "resource_reader", NotServing).await?;
    health_becomes(&client, "", Serving).await?;
    a.restart()?;
    health_becomes(&client, "resource_reader", Serving).await?;
    Ok(())
}

/// Poll gRPC health of `service` until it reports `want` ([`EVENTUALLY`] at
/// most).
async fn health_becomes(client: &ReaderClient, service: &str, want: ServingStatus) -> Result<()> {
    let mut health = HealthClient::new(client.channel());
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let got = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await?
            .into_inner()
            .status();
        if got == want {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "health of {service:?} stayed {got:?}, expected {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
