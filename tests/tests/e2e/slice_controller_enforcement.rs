//! The provider self-check end to end (`slice_controller::enforcement`),
//! where Liqo's settings cannot be read: the test API server serves no
//! `apps/v1` Deployments, so the controller's `get` of Liqo's webhook
//! Deployment is a 404, as for a missing one. With
//! `--if-enforcement-unknown refuse` a new slice is denied
//! `LiqoEnforcementUnknown` with a message saying why, nothing is granted,
//! the `slice_controller_liqo_enforcement` gauge says `unknown`, `/readyz`
//! stays 200 and says why no new grants are made, and both `get`s were
//! allowed by the Role `deploy/` ships (404, not 403). Given the catalog
//! (under the default `fit` policy), the controller reports the level
//! there, and the provider's offer carries it (`enforcement: unknown`).

use anyhow::{bail, Result};

use crate::slice_controller_support::{
    blocking, http_get, shop, Provider, CLASS, CONTROLLER_USER, SETTLE,
};

const CONSUMER: &str = "c1";

#[tokio::test(flavor = "multi_thread")]
async fn slice_controller_holds_new_grants_while_liqo_enforcement_is_unknown() -> Result<()> {
    let p = Provider::start(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "100")]).await?;
    p.tenant(CONSUMER, "Active");
    p.slice(CONSUMER, "gold-1", CLASS, &[("cpu", "2")], true);
    let dir = tempfile::tempdir()?;
    let shop = shop(dir.path());
    let url = shop.catalog.url("");
    let credentials = shop.credentials.display().to_string();
    let (_controller, port) = p.controller(&[
        "--if-enforcement-unknown",
        "refuse",
        "--catalog-url",
        &url,
        "--catalog-credentials-file",
        &credentials,
    ])?;

    let denied = p
        .wait_condition(CONSUMER, "gold-1", SETTLE, |c| c["status"] == "Denied")
        .await?;
    assert_eq!(denied["reason"], "LiqoEnforcementUnknown", "{denied}");
    let why = "Liqo's resource enforcement on this provider cannot be read (Deployment liqo/liqo-webhook not found): capacity sold as enforced is not granted until it is";
    assert_eq!(denied["message"], why);
    assert!(
        p.get_slice(CONSUMER, "gold-1")?["status"]["resources"].is_null(),
        "nothing granted"
    );

    let (_, metrics) = http_get(port, "/metrics").await?;
    for line in [
        "slice_controller_liqo_enforcement{level=\"unknown\"} 1",
        "slice_controller_liqo_enforcement{level=\"none\"} 0",
        "slice_controller_liqo_enforcement{level=\"off\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    assert_eq!(
        http_get(port, "/readyz").await?,
        (200, format!("ok: leader; no new grants: {why}\n"))
    );

    // Read by name, allowed by the shipped Role (a 404 here, not a 403).
    let reads: Vec<(String, u16)> = p
        .kube
        .audit()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(CONTROLLER_USER))
        .filter_map(|r| {
            let a = r.resource?;
            (a.resource == "deployments").then(|| (a.name.unwrap_or_default(), r.code))
        })
        .collect();
    for name in ["liqo-webhook", "liqo-controller-manager"] {
        assert!(
            reads.contains(&(name.to_string(), 404)),
            "no allowed get of {name}: {reads:?}"
        );
    }
    assert!(reads.iter().all(|(_, code)| *code == 404), "{reads:?}");

    // The level reached the catalog: the provider's offer shows it.
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let offer = blocking(|| shop.catalog.get("/offer/shop").json);
        if offer["enforcement"] == "unknown" {
            break;
        }
        if std::time::Instant::now() > deadline {
            bail!("the offer never showed the provider's enforcement level: {offer}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}
