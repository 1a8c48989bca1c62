//! The `contracts` grant policy end to end: the real catalog (embedded
//! store), the real `resource-monitor --liqo-api v1 --grant-policy
//! contracts` authenticating to the catalog as the provider and to the test
//! API server as its ServiceAccount, and consumers buying in the catalog.
//!
//! The chain offers each consumer cpu 4, memory 8Gi, pods 110 (see
//! `slice_controller.rs`); plan `small` is cpu 2, memory 4Gi (no pods).
//! With `--on-shrink follow`: a slice is granted what its consumer's
//! contracts allow (clamped), plus the class's defaults for cpu, memory and
//! pods where no contract sells them; a second contract adds to the grant;
//! a cancellation shrinks it in place; the end of the last contract (by
//! cancellation or expiry) revokes it as Liqo honours it — `Accepted`,
//! every key at 0, the replica cordoned (`liqo.io/cordon`) — and a new
//! contract lifts the cordon; a consumer that never had a contract is
//! denied; slices the previous release left `Denied/NoContract` are revoked
//! (or granted) on start; and with the catalog gone the controller goes on
//! deciding from the last contracts it read.

use std::time::Duration;

use anyhow::Result;
use e2e::catalog::provider;
use serde_json::{json, Value};

use crate::slice_controller_support::*;

const INVENTORY: [(&str, &str); 4] = [
    ("cpu", "8"),
    ("memory", "16Gi"),
    ("pods", "220"),
    ("nvidia.com/gpu", "2"),
];

fn start(p: &Provider, shop: &Shop) -> Result<(e2e::Child, u16)> {
    let flags = shop.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    p.controller(&flags)
}

/// A `Resources` condition with this status and reason.
fn verdict(status: &'static str, reason: &'static str) -> impl Fn(&Value) -> bool {
    move |c| c["status"] == status && c["reason"] == reason
}

/// Wait, within [`SETTLE`], until `slice`'s `Resources` condition has
/// this status and reason. That condition.
async fn wait_verdict(
    p: &Provider,
    consumer: &str,
    slice: &str,
    status: &'static str,
    reason: &'static str,
) -> Result<Value> {
    p.wait_condition(consumer, slice, SETTLE, verdict(status, reason))
        .await
}

/// Wait until `slice` is `Accepted` / `ResourcesClamped`; its message and
/// grant are then as given.
async fn wait_clamped(
    p: &Provider,
    consumer: &str,
    slice: &str,
    message: &str,
    grant: Value,
) -> Result<()> {
    let c = wait_verdict(p, consumer, slice, "Accepted", "ResourcesClamped").await?;
    assert_eq!(c["message"], message);
    assert_eq!(grant_of(p, consumer, slice)?, grant);
    Ok(())
}

/// A grant of `cpu` with plan `small`'s memory and the class's default
/// pods (no contract sells pods).
fn small_plan_grant(cpu: &str) -> Value {
    json!({"cpu": cpu, "memory": "4Gi", "pods": "110"})
}

fn grant_of(p: &Provider, consumer: &str, slice: &str) -> Result<Value> {
    Ok(p.get_slice(consumer, slice)?["status"]["resources"].clone())
}

/// Wait until `slice` is revoked as Liqo honours it: `Accepted` /
/// `ResourcesRevoked`, cpu, memory and pods at 0, cordoned. Its condition.
async fn wait_revoked(
    p: &Provider,
    consumer: &str,
    slice: &str,
    within: Duration,
) -> Result<Value> {
    let revoked = p
        .wait_condition(
            consumer,
            slice,
            within,
            verdict("Accepted", "ResourcesRevoked"),
        )
        .await?;
    assert_eq!(
        grant_of(p, consumer, slice)?,
        json!({"cpu": "0", "memory": "0", "pods": "0"})
    );
    assert_eq!(cordon_of(p, consumer, slice)?, json!("true"));
    Ok(revoked)
}

/// The replica's `liqo.io/cordon` annotation (`null` when absent).
fn cordon_of(p: &Provider, consumer: &str, slice: &str) -> Result<Value> {
    Ok(p.get_slice(consumer, slice)?["metadata"]["annotations"]["liqo.io/cordon"].clone())
}

/// Wait until `slice`'s `status.resources` is `want` (and its condition
/// `Accepted`); a grant is never cordoned (a new one lifts our cordon).
async fn wait_grant(p: &Provider, consumer: &str, slice: &str, want: Value) -> Result<()> {
    let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
    loop {
        let accepted = p
            .resources_condition(consumer, slice)
            .is_some_and(|c| c["status"] == "Accepted");
        if accepted && grant_of(p, consumer, slice)? == want {
            assert_eq!(
                cordon_of(p, consumer, slice)?,
                Value::Null,
                "{slice}: cordoned"
            );
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{slice}: never granted {want}; slice is {}",
            p.get_slice(consumer, slice)?
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn contracts_grant_add_and_end() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    let shop = shop(p.dir.path());
    p.tenant("c1", "Active");
    p.tenant("c2", "Active");
    let first = shop.buy("c1", json!({}));

    // Asks more cpu than one contract holds, and pods, which no contract
    // sells: cpu clamped to the contract, pods from the class's defaults
    // (at most what it asked).
    p.slice(
        "c1",
        "gold-1",
        CLASS,
        &[("cpu", "3"), ("memory", "4Gi"), ("pods", "10")],
        true,
    );
    // A consumer without a contract gets nothing.
    p.slice("c2", "gold-1", CLASS, &[("cpu", "1")], true);
    let (_controller, port) = start(&p, &shop)?;
    // c1's gold-1 granted cpu as given, memory 4Gi and pods 10.
    let gold_1_grants = |cpu: &str| {
        let want = json!({"cpu": cpu, "memory": "4Gi", "pods": "10"});
        wait_grant(&p, "c1", "gold-1", want)
    };

    wait_clamped(
        &p,
        "c1",
        "gold-1",
        "granted less than requested: cpu 2 (requested 3, remaining 2), memory 4Gi; with the class's defaults for a usable node: pods 10",
        json!({"cpu": "2", "memory": "4Gi", "pods": "10"}),
    )
    .await?;
    let denied = wait_verdict(&p, "c2", "gold-1", "Denied", "NoActiveContract").await?;
    assert_eq!(
        denied["message"],
        "consumer c2 has no active contract with this provider: nothing is granted"
    );
    assert!(p.get_slice("c2", "gold-1")?["status"]
        .get("resources")
        .is_none());

    // A second contract adds to the grant, with no slice event: the
    // controller follows the catalog.
    let second = shop.buy("c1", json!({}));
    gold_1_grants("3").await?;

    // Cancelling one shrinks it in place (--on-shrink follow): still
    // Accepted, every key there...
    shop.cancel(&second);
    gold_1_grants("2").await?;
    // ... cancelling the last revokes it: Accepted (Liqo's quota creator
    // and virtual-node creator ignore a denial), every key at 0, pods
    // included, and the replica cordoned.
    shop.cancel(&first);
    let revoked = wait_revoked(&p, "c1", "gold-1", SETTLE).await?;
    assert_eq!(
        revoked["message"],
        "revoked: every resource is 0 and the slice is cordoned (consumer c1 has no active contract with this provider: nothing is granted)"
    );

    // A new contract grants again and lifts the cordon.
    let third = shop.buy("c1", json!({}));
    gold_1_grants("2").await?;
    shop.cancel(&third);
    wait_revoked(&p, "c1", "gold-1", SETTLE).await?;

    let (status, metrics) = http_get(port, "/metrics").await?;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("slice_controller_catalog_reachable 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("slice_controller_contracts 0"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_contract_grants_nothing() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    let shop = shop(p.dir.path());
    p.tenant("c1", "Active");
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);
    let (_controller, _) = start(&p, &shop)?;
    // No contract yet: denied.
    wait_verdict(&p, "c1", "gold-1", "Denied", "NoActiveContract").await?;
    // A contract of 15 s: granted while it lasts, revoked when it ends.
    let lasts = Duration::from_secs(15);
    shop.buy("c1", json!({"durationSeconds": lasts.as_secs()}));
    wait_grant(&p, "c1", "gold-1", small_plan_grant("1")).await?;
    wait_revoked(&p, "c1", "gold-1", lasts + e2e::EVENTUALLY).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_contracts_stand_while_the_catalog_is_unreachable() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    let mut shop = shop(p.dir.path());
    p.tenant("c1", "Active");
    p.tenant("c2", "Active");
    shop.buy("c1", json!({}));
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);
    let (_controller, port) = start(&p, &shop)?;
    wait_grant(&p, "c1", "gold-1", small_plan_grant("1")).await?;
    assert_eq!(
        http_get(port, "/readyz").await?,
        (200, "ok: leader\n".into())
    );

    blocking(|| shop.catalog.child.kill());
    // The outage is noticed...
    let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
    loop {
        let (_, metrics) = http_get(port, "/metrics").await?;
        if metrics.contains("slice_controller_catalog_reachable 0") {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "outage not noticed: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = http_get(port, "/readyz").await?;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("deciding from the last known contracts"),
        "{body}"
    );

    // ... and new slices are decided from the last contracts read: c1's
    // contract still allows cpu 2 (1 left), c2 still has none.
    p.slice("c1", "gold-2", CLASS, &[("cpu", "2")], true);
    p.slice("c2", "gold-1", CLASS, &[("cpu", "1")], true);
    wait_verdict(&p, "c1", "gold-2", "Accepted", "ResourcesClamped").await?;
    assert_eq!(grant_of(&p, "c1", "gold-2")?, small_plan_grant("1"));
    wait_verdict(&p, "c2", "gold-1", "Denied", "NoActiveContract").await?;
    assert_eq!(grant_of(&p, "c1", "gold-1")?, small_plan_grant("1"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_without_cpu_memory_or_pods_still_yields_a_usable_grant() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    let shop = shop(p.dir.path());
    // A GPU-only plan, as a provider may publish it.
    blocking(|| {
        let token = shop.catalog.login(&provider(1));
        shop.catalog.put_offer(
            "gpus",
            &json!({"name": "GPUs", "type": "compute", "description": "GPUs by the unit.",
                    "plans": {"gpu": {"name": "gpu", "cost": "3",
                                      "resources": {"nvidia.com/gpu": "1"}}}}),
            &token,
        );
    });
    p.tenant("c1", "Active");
    shop.buy_plan("gpus", "gpu", "c1", json!({}));
    // The consumer asks what it bought, as purchase-controller does.
    p.slice("c1", "gold-gpu", CLASS, &[("nvidia.com/gpu", "1")], true);
    let (_controller, _) = start(&p, &shop)?;
    // cpu > 0 and memory > 0 (a Ready virtual node) and pods (a schedulable
    // one), from the class's defaults within the chain's offer; the GPU is
    // what the chain allows (its filter denies nvidia.com/*).
    wait_clamped(
        &p,
        "c1",
        "gold-gpu",
        "granted less than requested: nvidia.com/gpu 0 (requested 1, remaining 0); with the class's defaults for a usable node: cpu 4, memory 8Gi, pods 110",
        json!({"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "0", "pods": "110"}),
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn slices_the_previous_release_left_denied_are_brought_to_the_revocation_on_start(
) -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    let shop = shop(p.dir.path());
    p.tenant("c1", "Active");
    p.tenant("c2", "Active");
    shop.buy("c2", json!({}));
    // What the previous release left when a consumer's last contract had
    // ended: Denied/NoContract, status.resources dropped (Liqo's Quota
    // and virtual node still at the old grant).
    for consumer in ["c1", "c2"] {
        let mut slice = p.slice(
            consumer,
            "gold-old",
            CLASS,
            &[("cpu", "2"), ("memory", "4Gi")],
            true,
        );
        slice["status"]["conditions"] = json!([auth_condition(),
            {"type": "Resources", "status": "Denied", "reason": "NoContract",
             "message": format!("consumer {consumer} has no active contract with this provider: nothing is granted"),
             "lastTransitionTime": AUTH_TIME}]);
        p.kube.replace(SLICES, slice, true)?;
    }
    let (_controller, _) = start(&p, &shop)?;
    // Without a contract: revoked, every key at 0, cordoned.
    wait_revoked(&p, "c1", "gold-old", SETTLE).await?;
    // With one again: granted, not cordoned.
    wait_grant(&p, "c2", "gold-old", small_plan_grant("2")).await?;
    Ok(())
}
