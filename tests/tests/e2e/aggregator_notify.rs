//! Notifications through the real `aggregator`: an immediate "all" for a
//! new subscriber, one notification per upstream change (a burst across
//! upstreams coalesced into one), then the new sum on read.

use crate::aggregator_support;

use std::time::Duration;

use aggregator_support::{metric, Aggregator, Monitor};
use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};

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
        "700ms",
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::B).await?;
    client
        .read_until("x", Duration::from_secs(10), |r| {
            r == &resources(&[("cpu", "3")])
        })
        .await?;

    // A new subscriber hears "every cluster" at once (an empty cluster ID).
    let mut sub = client.subscribe().await?;
    assert_eq!(sub.next_within(Duration::from_secs(2)).await?, "");
    sub.drain(Duration::from_millis(1000)).await;

    // One upstream changes: one notification, then the new sum.
    a.set("cpu: \"4\"\n")?;
    assert_eq!(sub.next_within(Duration::from_secs(3)).await?, "");
    assert_eq!(client.read("x").await?, resources(&[("cpu", "6")]));

    // Both change at once: a single notification covers both.
    sub.drain(Duration::from_millis(1000)).await;
    let before = metric(&agg.metrics().await?, "aggregator_notifications_total").unwrap_or(0.0);
    a.set("cpu: \"10\"\n")?;
    b.set("cpu: \"20\"\nmemory: 1Gi\n")?;
    assert_eq!(sub.next_within(Duration::from_secs(3)).await?, "");
    assert_eq!(
        client.read("x").await?,
        resources(&[("cpu", "30"), ("memory", "1Gi")])
    );
    assert!(
        sub.next_within(Duration::from_millis(1500)).await.is_err(),
        "the burst was not coalesced"
    );
    let after = metric(&agg.metrics().await?, "aggregator_notifications_total").unwrap_or(0.0);
    assert_eq!(
        after - before,
        1.0,
        "one downstream notification for the burst"
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
        .read_until("x", Duration::from_secs(10), |r| !r.is_empty())
        .await?;
    let mut first = client.subscribe().await?;
    let mut second = client.subscribe().await?;
    first.next_within(Duration::from_secs(2)).await?;
    second.next_within(Duration::from_secs(2)).await?;
    first.drain(Duration::from_millis(300)).await;
    second.drain(Duration::from_millis(300)).await;

    a.set("memory: 2Gi\n")?;
    first.next_within(Duration::from_secs(3)).await?;
    second.next_within(Duration::from_secs(3)).await?;
    assert_eq!(client.read("x").await?, resources(&[("memory", "2Gi")]));
    Ok(())
}
