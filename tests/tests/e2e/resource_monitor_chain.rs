//! Stages across processes: a `resource-monitor` whose source is another
//! ResourceReader over gRPC (`--source grpc:ADDR`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::{free_port, Spawn};
use resource_monitor::server::{self, LiqoApi, ServerOptions};
use resource_monitor::source::MemorySource;

fn list(entries: &[(&str, &str)]) -> quantity::ResourceList {
    quantity::ResourceList::from_strings(entries.iter().copied()).expect("valid quantities")
}

/// Two real processes: P1 serves a static file (shape A), P2 reads P1 over
/// gRPC, filters, and serves shape B. A change to P1's file reaches P2's
/// subscriber, and P2 then reads the new value through both.
#[tokio::test]
async fn notification_crosses_two_chained_processes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 4\nmemory: 8Gi\nnvidia.com/gpu: 2\n")?;
    let (_p1, bound) = Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--liqo-api", "v0.5", "--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let p1_port = bound.port(None);

    let chain = dir.path().join("chain.toml");
    std::fs::write(
        &chain,
        format!(
            "[server]\nliqo_api = \"v0.6\"\n\n\
             [source.grpc]\naddress = \"http://127.0.0.1:{p1_port}\"\n\n\
             [quota]\npercent = 50\n\n\
             [[filter.rules]]\nclusters = [\"gpu-peer\"]\nallow = [\"nvidia.com/*\"]\n\n\
             [[filter.rules]]\ndeny = [\"nvidia.com/*\"]\n"
        ),
    )?;
    let (_p2, bound) = Spawn::new("resource-monitor")
        .arg("--config")
        .arg(&chain)
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let p2_port = bound.port(None);
    let client = ReaderClient::connect(p2_port, Shape::B).await?;

    // Wait until P2 is subscribed to P1 (its reads fail until then).
    let first = client
        .read_until("gpu-peer", e2e::EVENTUALLY, |r| !r.is_empty())
        .await?;
    assert_eq!(
        first,
        resources(&[("cpu", "2"), ("memory", "4Gi"), ("nvidia.com/gpu", "1")])
    );
    assert_eq!(
        client.read("other").await?,
        resources(&[("cpu", "2"), ("memory", "4Gi")])
    );

    let mut subscription = client.subscribe().await?;
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    subscription.drain(Duration::from_millis(300)).await;

    std::fs::write(&file, "cpu: 16\nmemory: 8Gi\nnvidia.com/gpu: 2\n")?;
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    assert_eq!(
        client.read("gpu-peer").await?,
        resources(&[("cpu", "8"), ("memory", "4Gi"), ("nvidia.com/gpu", "1")])
    );
    Ok(())
}

/// RemoveCluster sent to the real binary reaches its upstream through the
/// quota and filter stages and the grpc source.
#[tokio::test]
async fn remove_cluster_reaches_the_upstream() -> Result<()> {
    let upstream = MemorySource::new(list(&[("cpu", "4")]));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_port = listener.local_addr()?.port();
    let serving = tokio::spawn(server::serve_listener(
        Arc::new(upstream.clone()),
        listener,
        ServerOptions::new(LiqoApi::V09),
        std::future::pending(),
    ));

    let dir = tempfile::tempdir()?;
    let chain = dir.path().join("chain.toml");
    std::fs::write(
        &chain,
        format!(
            "[source.grpc]\naddress = \"127.0.0.1:{upstream_port}\"\nliqo_api = \"v0.9\"\n\n\
             [quota]\npercent = 25\n\n[[filter.rules]]\ndeny = [\"memory\"]\n"
        ),
    )?;
    let (_p, bound) = Spawn::new("resource-monitor")
        .args(["--config".as_ref(), chain.as_os_str()])
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::A).await?;
    let answer = client
        .read_until("c1", e2e::EVENTUALLY, |r| !r.is_empty())
        .await?;
    assert_eq!(answer, resources(&[("cpu", "1")]));

    client.remove_cluster("peer-gone").await?;
    assert_eq!(upstream.removed(), vec!["peer-gone".to_string()]);

    // An upstream change is forwarded too (shape C cluster IDs → shape A).
    let mut subscription = client.subscribe().await?;
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    subscription.drain(Duration::from_millis(300)).await;
    upstream.set(list(&[("cpu", "8"), ("memory", "1Gi")]));
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    assert_eq!(client.read("c1").await?, resources(&[("cpu", "2")]));
    serving.abort();
    Ok(())
}

/// While the upstream is down, reads fail with UNAVAILABLE naming it; once
/// it comes up, the grpc source reconnects, notifies, and reads work.
#[tokio::test]
async fn upstream_down_then_up() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.json");
    std::fs::write(&file, r#"{"cpu": "3", "memory": "3Gi"}"#)?;
    // A known port, deliberately: p2 must be told where its upstream will
    // be before the upstream exists.
    let p1_port = free_port();
    let (_p2, bound) = Spawn::new("resource-monitor")
        .args(["--source", &format!("grpc:127.0.0.1:{p1_port}")])
        .args(["--liqo-api", "v0.9", "--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let p2_port = bound.port(None);
    let client = ReaderClient::connect(p2_port, Shape::C).await?;

    let status = client.read("c1").await.expect_err("no upstream yet");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains(&p1_port.to_string()),
        "{status:?}"
    );

    let mut subscription = client.subscribe().await?;
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");

    let mut p1 = Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--listen", &format!("127.0.0.1:{p1_port}")])
        .start_listening(p1_port)?;
    // Reconnection is announced to subscribers, and reads work again.
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    assert_eq!(
        client.read("c1").await?,
        resources(&[("cpu", "3"), ("memory", "3Gi")])
    );

    // Upstream crashes: reads fail again, quickly.
    p1.kill();
    let status = async {
        for _ in 0..100 {
            if let Err(status) = client.read("c1").await {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
    .await
    .expect("reads fail once the upstream is gone");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    Ok(())
}
