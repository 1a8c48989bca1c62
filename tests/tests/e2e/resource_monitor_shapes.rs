//! The real `resource-monitor` binary, static source + quota, served in each
//! of Liqo's three wire shapes: read values, the immediate notification on
//! subscribe, a notification after a change to the file followed by the new
//! value on read, none for a file that became invalid, and RemoveCluster.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::Spawn;

/// How long a change may take to reach a subscriber before the test calls
/// it lost. The README promises 1 s; that is a latency figure for a
/// benchmark, not for a test sharing two cores with others, so the deadline
/// is one only a lost notification misses.
const CHANGE_DEADLINE: Duration = e2e::EVENTUALLY;

/// Replace the file the way editors and ConfigMap mounts do: write a new
/// file, rename it over the old one.
fn replace_file(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn exercise(shape: Shape) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 4\nmemory: 8Gi\nnvidia.com/gpu: 1\n")?;
    let (_server, bound) = Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--quota-percent", "50", "--liqo-api", shape.liqo_api()])
        .args(["--listen", "127.0.0.1:0"])
        .args(["--pool-name", "pool-x", "--pool-prefix", "px"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, shape).await?;

    // Read: half of the file, in canonical quantity strings.
    let expected = resources(&[("cpu", "2"), ("memory", "4Gi"), ("nvidia.com/gpu", "500m")]);
    assert_eq!(client.read("cluster-1").await?, expected, "{shape:?}");
    if shape == Shape::C {
        let pools = client.read_pools("cluster-1").await?;
        assert_eq!(pools.len(), 1);
        assert_eq!(
            (pools[0].name.as_str(), pools[0].prefix.as_str()),
            ("pool-x", "px")
        );
    }

    // Subscribe: an "all clusters" notification comes at once.
    let mut subscription = client.subscribe().await?;
    assert_eq!(
        subscription.next_within(CHANGE_DEADLINE).await?,
        "",
        "{shape:?}"
    );

    // A change to the file (replaced by rename): notified, then read.
    replace_file(&file, "cpu: 8\nmemory: 8Gi\nnvidia.com/gpu: 1\n")?;
    assert_eq!(
        subscription.next_within(CHANGE_DEADLINE).await?,
        "",
        "{shape:?}"
    );
    let expected = resources(&[("cpu", "4"), ("memory", "4Gi"), ("nvidia.com/gpu", "500m")]);
    assert_eq!(client.read("cluster-1").await?, expected, "{shape:?}");

    // A change written in place is noticed too.
    std::fs::write(&file, "cpu: 8\nmemory: 16Gi\n")?;
    assert_eq!(
        subscription.next_within(CHANGE_DEADLINE).await?,
        "",
        "{shape:?}"
    );
    assert_eq!(
        client.read("cluster-1").await?,
        resources(&[("cpu", "4"), ("memory", "8Gi")])
    );

    // A file that becomes invalid changes nothing (and notifies nothing):
    // the stream stays open and silent, and the next notification is the
    // one for the next valid file.
    std::fs::write(&file, "cpu: lots\n")?;
    subscription
        .expect_silence(Duration::from_millis(1500))
        .await?;
    assert_eq!(
        client.read("cluster-1").await?,
        resources(&[("cpu", "4"), ("memory", "8Gi")])
    );
    std::fs::write(&file, "cpu: 10\nmemory: 16Gi\n")?;
    assert_eq!(
        subscription.next_within(CHANGE_DEADLINE).await?,
        "",
        "{shape:?}"
    );
    assert_eq!(
        client.read("cluster-1").await?,
        resources(&[("cpu", "5"), ("memory", "8Gi")])
    );

    // RemoveCluster is accepted, and the server goes on answering.
    client.remove_cluster("cluster-1").await?;
    assert_eq!(
        client.read("cluster-2").await?,
        resources(&[("cpu", "5"), ("memory", "8Gi")])
    );

    // A second subscriber (Liqo re-subscribes after errors) gets its own
    // immediate notification; the first one stays open.
    let mut second = client.subscribe().await?;
    assert_eq!(second.next_within(CHANGE_DEADLINE).await?, "");
    replace_file(&file, "cpu: 2\n")?;
    assert_eq!(subscription.next_within(CHANGE_DEADLINE).await?, "");
    assert_eq!(second.next_within(CHANGE_DEADLINE).await?, "");
    assert_eq!(client.read("cluster-1").await?, resources(&[("cpu", "1")]));
    Ok(())
}

#[tokio::test]
async fn shape_a_read_subscribe_change_remove() -> Result<()> {
    exercise(Shape::A).await
}

#[tokio::test]
async fn shape_b_read_subscribe_change_remove() -> Result<()> {
    exercise(Shape::B).await
}

#[tokio::test]
async fn shape_c_read_subscribe_change_remove() -> Result<()> {
    exercise(Shape::C).await
}
