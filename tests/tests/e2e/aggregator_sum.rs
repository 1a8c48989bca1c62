//! The real `aggregator` over real `resource-monitor` upstreams (static
//! files): per-resource sums with mixed units, in configured order, without
//! the originator's own upstream, honouring what each upstream lets the
//! originator see, served in each of Liqo's three wire shapes.

use crate::aggregator_support;

use aggregator_support::{Aggregator, Monitor};
use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};

const A: &str = "cpu: 1500m\nmemory: 1Gi\nstorage: 2G\n";
const B: &str = "cpu: \"2\"\nmemory: 512Mi\nstorage: 1Gi\n";
/// Only cluster `gold` may see GPUs, by upstream c's own filter stage.
const C: &str = "cpu: 250m\nnvidia.com/gpu: \"2\"\n";
const C_FILTER: &str = "[[filter.rules]]\nclusters = [\"gold\"]\nallow = [\"nvidia.com/*\"]\n\n\
                        [[filter.rules]]\ndeny = [\"nvidia.com/*\"]\n";

/// Fields drop in order: the processes stop before their files go.
struct Pool {
    a: Monitor,
    b: Monitor,
    c: Monitor,
    _dir: tempfile::TempDir,
}

fn upstreams() -> Result<Pool> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", A)?;
    let b = Monitor::start(dir.path(), "b", B)?;
    let c = Monitor::start_with_chain(dir.path(), "c", C, C_FILTER)?;
    Ok(Pool { a, b, c, _dir: dir })
}

#[tokio::test]
async fn sums_mixed_units_and_never_offers_a_cluster_its_own_resources() -> Result<()> {
    let pool = upstreams()?;
    let agg = Aggregator::start([
        "--upstream",
        &pool.a.flag(),
        "--upstream",
        &pool.b.flag(),
        "--upstream",
        &pool.c.flag(),
    ])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;

    // 1500m + 2 + 250m, 1Gi + 512Mi, 2G + 1Gi: totals print in the format of
    // the first upstream offering the resource, as Kubernetes prints them.
    let everyone = resources(&[
        ("cpu", "3750m"),
        ("memory", "1536Mi"),
        ("storage", "3073741824"),
    ]);
    let first = client
        .read_until("x", e2e::EVENTUALLY, |r| r == &everyone)
        .await?;
    assert_eq!(first, everyone);

    // What an upstream lets X see is decided by that upstream, for X.
    let mut gold = everyone.clone();
    gold.insert("nvidia.com/gpu".into(), "2".into());
    assert_eq!(client.read("gold").await?, gold);

    // An upstream never counts toward its own cluster's answer.
    assert_eq!(
        client.read("a").await?,
        resources(&[("cpu", "2250m"), ("memory", "512Mi"), ("storage", "1Gi")])
    );
    assert_eq!(
        client.read("b").await?,
        resources(&[("cpu", "1750m"), ("memory", "1Gi"), ("storage", "2G")])
    );
    assert_eq!(
        client.read("c").await?,
        resources(&[
            ("cpu", "3500m"),
            ("memory", "1536Mi"),
            ("storage", "3073741824")
        ])
    );

    // The read latency is recorded per upstream and overall.
    let metrics = agg.metrics().await?;
    for id in ["a", "b", "c"] {
        let series =
            format!("aggregator_upstream_read_duration_seconds_count{{cluster_id=\"{id}\"}}");
        assert!(
            aggregator_support::metric(&metrics, &series).unwrap_or(0.0) >= 4.0,
            "{series}:\n{metrics}"
        );
    }
    assert!(
        aggregator_support::metric(&metrics, "aggregator_read_duration_seconds_count")
            .unwrap_or(0.0)
            >= 5.0
    );
    Ok(())
}

#[tokio::test]
async fn totals_take_the_format_of_the_first_upstream_in_configured_order() -> Result<()> {
    let pool = upstreams()?;
    // b before a this time.
    let agg = Aggregator::start(["--upstream", &pool.b.flag(), "--upstream", &pool.a.flag()])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    let expected = resources(&[
        ("cpu", "3500m"),
        ("memory", "1536Mi"),
        ("storage", "3001701Ki"),
    ]);
    let got = client
        .read_until("x", e2e::EVENTUALLY, |r| r == &expected)
        .await?;
    assert_eq!(got, expected);
    Ok(())
}

#[tokio::test]
async fn serves_all_three_wire_shapes() -> Result<()> {
    let pool = upstreams()?;
    let everyone = resources(&[
        ("cpu", "3750m"),
        ("memory", "1536Mi"),
        ("storage", "3073741824"),
    ]);
    for shape in Shape::ALL {
        let agg = Aggregator::start([
            "--upstream",
            &pool.a.flag(),
            "--upstream",
            &pool.b.flag(),
            "--upstream",
            &pool.c.flag(),
            "--liqo-api",
            shape.liqo_api(),
            "--pool-name",
            "pooled",
            "--pool-prefix",
            "pl",
        ])?;
        let client = ReaderClient::connect(agg.port, shape).await?;
        let got = client
            .read_until("x", e2e::EVENTUALLY, |r| r == &everyone)
            .await;
        assert_eq!(got?, everyone, "{shape:?}");
        assert_eq!(
            client.read("a").await?,
            resources(&[("cpu", "2250m"), ("memory", "512Mi"), ("storage", "1Gi")]),
            "{shape:?}"
        );
        if shape == Shape::C {
            let pools = client.read_pools("x").await?;
            assert_eq!(pools.len(), 1);
            assert_eq!(
                (pools[0].name.as_str(), pools[0].prefix.as_str()),
                ("pooled", "pl")
            );
        }
        // A new subscriber hears "all clusters" at once.
        let mut sub = client.subscribe().await?;
        assert_eq!(sub.next_within(e2e::EVENTUALLY).await?, "", "{shape:?}");
        // gRPC health: the aggregator serves.
        let health = tonic_health::pb::health_client::HealthClient::new(client.channel())
            .check(tonic_health::pb::HealthCheckRequest {
                service: "resource_reader".into(),
            })
            .await?
            .into_inner();
        assert_eq!(
            health.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving
        );
        // RemoveCluster is accepted (and forwarded to every upstream).
        client.remove_cluster("gone").await?;
    }
    Ok(())
}
