//! Adding and removing upstreams without a restart: the config file is
//! re-read when it changes and on SIGHUP; a broken file changes nothing.

use crate::aggregator_support;

use std::path::Path;
use std::time::{Duration, Instant};

use aggregator_support::{metric, Aggregator, Monitor};
use anyhow::{bail, Result};
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::EVENTUALLY;

/// Replace the file by rename, as editors and ConfigMap mounts do.
fn write_config(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn reloads(agg: &Aggregator, result: &str) -> Result<f64> {
    let series = format!("aggregator_config_reloads_total{{result=\"{result}\"}}");
    Ok(metric(&agg.metrics().await?, &series).unwrap_or(0.0))
}

async fn wait_reloads(agg: &Aggregator, result: &str, at_least: f64) -> Result<f64> {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let n = reloads(agg, result).await?;
        if n >= at_least {
            return Ok(n);
        }
        if Instant::now() > deadline {
            bail!("{result} reloads stayed at {n}, expected at least {at_least}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn upstreams_come_and_go_with_the_config_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", "cpu: \"1\"\n")?;
    let b = Monitor::start(dir.path(), "b", "cpu: \"2\"\n")?;
    let c = Monitor::start(dir.path(), "c", "cpu: \"4\"\n")?;
    let config = dir.path().join("aggregator.toml");
    let head = "[policy]\nmode = \"omit\"\n\n";
    write_config(&config, &format!("{head}{}{}", a.toml(), b.toml()))?;
    let agg = Aggregator::start([std::ffi::OsStr::new("--config"), config.as_os_str()])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    client
        .read_until("x", EVENTUALLY, |r| r == &resources(&[("cpu", "3")]))
        .await?;
    let mut sub = client.subscribe().await?;
    sub.drain(Duration::from_millis(300)).await;

    // Add c, drop b: no restart, and downstream is told.
    write_config(&config, &format!("{head}{}{}", a.toml(), c.toml()))?;
    sub.next_within(EVENTUALLY).await?;
    client
        .read_until("x", EVENTUALLY, |r| r == &resources(&[("cpu", "5")]))
        .await?;
    let ids: Vec<String> = agg.status().await?["upstreams"]
        .as_array()
        .map(|u| {
            u.iter()
                .filter_map(|e| e["cluster_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, ["a", "c"]);
    // The removed upstream's series are gone from /metrics.
    let m = agg.metrics().await?;
    assert!(!m.contains("cluster_id=\"b\""), "{m}");
    assert!(m.contains("cluster_id=\"c\""), "{m}");

    // A broken file is reported and changes nothing.
    let errors = reloads(&agg, "error").await?;
    write_config(
        &config,
        &format!(
            "{head}{}[[upstream]]\ncluster_id = \"b\"\nadress = \"oops\"\n",
            a.toml()
        ),
    )?;
    wait_reloads(&agg, "error", errors + 1.0).await?;
    assert_eq!(client.read("x").await?, resources(&[("cpu", "5")]));

    // Fixed again, and b back.
    write_config(
        &config,
        &format!("{head}{}{}{}", a.toml(), b.toml(), c.toml()),
    )?;
    client
        .read_until("x", EVENTUALLY, |r| r == &resources(&[("cpu", "7")]))
        .await?;
    Ok(())
}

#[tokio::test]
async fn sighup_reloads_the_config() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = Monitor::start(dir.path(), "a", "cpu: \"1\"\n")?;
    let config = dir.path().join("aggregator.toml");
    write_config(&config, &a.toml())?;
    let agg = Aggregator::start([std::ffi::OsStr::new("--config"), config.as_os_str()])?;
    let client = ReaderClient::connect(agg.port, Shape::A).await?;
    client
        .read_until("x", EVENTUALLY, |r| !r.is_empty())
        .await?;

    // The file is untouched, so only SIGHUP can cause this reload.
    let before = reloads(&agg, "ok").await?;
    agg.sighup()?;
    wait_reloads(&agg, "ok", before + 1.0).await?;
    assert_eq!(client.read("x").await?, resources(&[("cpu", "1")]));
    Ok(())
}
