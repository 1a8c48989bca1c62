//! The slice controller (`resource-monitor --liqo-api v1`) over HTTPS
//! against an API server that fails its ResourceSlice watch: 429 (with
//! `Retry-After`), 503 and 500 answers, and streams and connections cut
//! mid-response. A slice created while the watch is down is decided once
//! it is back, the controller never exits, and slices decided before keep
//! their condition.

use std::time::Duration;

use anyhow::Result;
use kube_test_server::{Fault, KubeApiServer};

use crate::slice_controller_support::*;

const INVENTORY: [(&str, &str); 3] = [("cpu", "8"), ("memory", "16Gi"), ("pods", "220")];

/// Three faults with the watcher's backoff (0.8 s, 1.6 s, 3.2 s, each up
/// to twice that with jitter), then the decision: eventually.
const RECOVERED: Duration = e2e::EVENTUALLY;

async fn decides_through(faults: Vec<Fault>, cut: fn(&KubeApiServer)) -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    assert!(p.kube.url().starts_with("https://"));
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "1")], true);
    let (mut controller, _) = p.controller(&[])?;
    let accepted = |c: &serde_json::Value| c["status"] == "Accepted";
    p.wait_condition("c1", "gold-a", SETTLE, accepted).await?;

    let n = faults.len();
    for fault in faults {
        p.kube
            .inject(fault.verb("watch").resource("resourceslices"));
    }
    cut(&p.kube);
    let deadline = std::time::Instant::now() + SETTLE;
    while p.kube.faults_fired() == 0 {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the controller did not watch again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Created while the slice watch is down.
    p.slice("c1", "gold-b", CLASS, &[("cpu", "1")], true);
    let b = p
        .wait_condition("c1", "gold-b", RECOVERED, accepted)
        .await?;
    assert_eq!(b["reason"], "ResourcesGranted");
    assert_eq!(p.kube.faults_fired(), n);
    assert!(controller.try_wait()?.is_none(), "the controller exited");
    assert!(accepted(&p.resources_condition("c1", "gold-a").unwrap()));
    Ok(())
}

#[tokio::test]
async fn slice_controller_decides_through_429_503_and_500() -> Result<()> {
    decides_through(
        vec![
            Fault::new(429),
            Fault::new(503).retry_after(1),
            Fault::new(500),
        ],
        KubeApiServer::end_watches,
    )
    .await
}

#[tokio::test]
async fn slice_controller_decides_through_connection_resets() -> Result<()> {
    decides_through(
        vec![Fault::reset(), Fault::reset()],
        KubeApiServer::reset_watches,
    )
    .await
}
