//! Notifications through the real `aggregator`: an immediate "all" for a
//! new subscriber, one notification per upstream change (a burst across
//! upstreams coalesced into one), then the new sum on read.

use crate::aggregator_support;

use std::time::Duration;

use aggregator_support::{metric, Aggregator, Monitor};
use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};

/// The aggregator's coalescing window in this test: far longer than two
/// monitors take to notice files written one after the other.
const WINDOW: Duration = Duration::from_secs(2);
/// How long a notification may take before the test calls it lost (the
/// window bounds how long the aggregator holds one back, not how long a
/// loaded machine takes to deliver it).
const DEADLINE: Duration = e2e::EVENTUALLY;

#[tokio::test]
async fn upstream_changes_reach_downstream_subscribers_coalesced() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", "cpu: \"1\"\n")?;
    let b = Monitor::start(dir.path(), "b", "cpu: \"2\"\n")?;
    let agg = Aggregator::start([
        "--upstream",
        &a.flag(),
        "--upstream",
        &b.flag(),
        "--liqo-api",
        "v0.6",
        "--coalesce",
        "2s",
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::B).await?;
    client
        .read_until("x", e2e::EVENTUALLY, |r| r == &resources(&[("cpu", "3")]))
        .await?;

    // A new subscriber hears "every cluster" at once (an empty cluster ID).
    let mut sub = client.subscribe().await?;
    assert_eq!(sub.next_within(DEADLINE).await?, "");
    // Let any connect-time notification come and go (setup, not a proof).
    sub.drain(WINDOW + Duration::from_secs(1)).await;

    // One upstream changes: one notification, then the new sum.
    a.set("cpu: \"4\"\n")?;
    assert_eq!(sub.next_within(DEADLINE).await?, "");
    assert_eq!(client.read("x").await?, resources(&[("cpu", "6")]));

    // Both change at once: a single notification covers both.
    sub.drain(WINDOW + Duration::from_secs(1)).await;
    let before = metric(&agg.metrics().await?, "aggregator_notifications_total").unwrap_or(0.0);
    a.set("cpu: \"10\"\n")?;
    b.set("cpu: \"20\"\nmemory: 1Gi\n")?;
    assert_eq!(sub.next_within(DEADLINE).await?, "");
    assert_eq!(
        client.read("x").await?,
        resources(&[("cpu", "30"), ("memory", "1Gi")])
    );
    // No second one for the burst within a window (on a live stream)...
    sub.expect_silence(WINDOW + Duration::from_secs(1))
        .await
        .map_err(|e| anyhow::anyhow!("the burst was not coalesced: {e}"))?;
    // ...and the stream was listening: a later change is notified, and the
    // two changes cost exactly two notifications.
    a.set("cpu: \"11\"\n")?;
    assert_eq!(sub.next_within(DEADLINE).await?, "");
    // (Counted just after it is sent: wait for the count to catch up.)
    let deadline = std::time::Instant::now() + DEADLINE;
    let after = loop {
        let after = metric(&agg.metrics().await?, "aggregator_notifications_total").unwrap_or(0.0);
        if after - before >= 2.0 || std::time::Instant::now() > deadline {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        after - before,
        2.0,
        "one downstream notification for the burst, one for the later change"
    );
    Ok(())
}

#[tokio::test]
async fn every_subscriber_is_notified_in_shape_a() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", "memory: 1Gi\n")?;
    let agg = Aggregator::start(["--upstream", &a.flag(), "--coalesce", "50ms"])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    client
        .read_until("x", e2e::EVENTUALLY, |r| !r.is_empty())
        .await?;
    let mut first = client.subscribe().await?;
    let mut second = client.subscribe().await?;
    first.next_within(DEADLINE).await?;
    second.next_within(DEADLINE).await?;
    first.drain(Duration::from_millis(300)).await;
    second.drain(Duration::from_millis(300)).await;

    a.set("memory: 2Gi\n")?;
    first.next_within(DEADLINE).await?;
    second.next_within(DEADLINE).await?;
    assert_eq!(client.read("x").await?, resources(&[("memory", "2Gi")]));
    Ok(())
}
