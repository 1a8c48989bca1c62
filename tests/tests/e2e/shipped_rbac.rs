//! Every controller runs under the RBAC `deploy/kubernetes` ships for it,
//! enforced by the test API server on each request: a permission taken
//! away is refused with the API server's 403 where the call is made, and
//! the controller says so in its log instead of writing anything.

use std::time::Instant;

use anyhow::{ensure, Result};
use serde_json::json;

use crate::purchase_controller_support as purchase;
use crate::slice_controller_support::*;

#[tokio::test]
async fn a_permission_taken_from_the_shipped_rbac_is_refused_where_the_call_is_made() -> Result<()>
{
    let p = Provider::start(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "220")]).await?;
    // The class controller decides a slice by replacing its status.
    e2e::rbac::load_shipped_without(
        &p.kube,
        "liqo-broker-slice-controller",
        "authentication.liqo.io",
        "resourceslices/status",
        "update",
    )?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);
    let log = p.dir.path().join("controller.log");
    let (_controller, _) = p
        .controller_spawn("250ms", &[])
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;

    // The write is refused, as the controller's user, with the real status.
    let deadline = Instant::now() + SETTLE;
    let refused = loop {
        let refused = p.kube.audit().into_iter().find(|r| {
            r.code == 403
                && r.resource.as_ref().is_some_and(|a| {
                    a.verb == "update" && a.rbac_resource() == "resourceslices/status"
                })
        });
        if let Some(r) = refused {
            break r;
        }
        ensure!(
            Instant::now() < deadline,
            "no refused status write within {SETTLE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    ensure!(
        refused.user.as_deref() == Some(CONTROLLER_USER),
        "{refused:?}"
    );
    // The controller's log names what was refused, in the server's words.
    let log_path = log.clone();
    let text = tokio::task::spawn_blocking(move || {
        e2e::wait_for_log(&log_path, "cannot update resource", SETTLE)
    })
    .await?;
    ensure!(
        text.contains("forbidden") && text.contains("resourceslices/status"),
        "{text}"
    );
    // Nothing was decided.
    ensure!(p.resources_condition("c1", "gold-1").is_none());
    Ok(())
}

/// The purchase-controller's clean-up as its shipped RBAC without `delete`
/// on Secrets: the Liqo v0.x token Secret it made cannot be deleted, and
/// rather than passing over the 403 it logs it and keeps the Purchase's
/// finalizer (retrying), so nothing is left behind unnoticed.
#[test]
fn a_clean_up_the_rbac_refuses_is_logged_and_keeps_the_finalizer() -> Result<()> {
    let rt = purchase::runtime();
    let market = purchase::Market::open(&[]);
    let alice = market.consumer("alice");
    let contract = market.buy(
        &alice,
        "small",
        json!({"consumerClusterID": purchase::CONSUMER_ID}),
    );
    let consumer = purchase::Consumer::start(&rt, "v0", &alice)?;
    e2e::rbac::load_shipped_without(
        &consumer.kube,
        "liqo-broker-purchase-controller",
        "",
        "secrets",
        "delete",
    )?;
    let log = consumer._dir.path().join("controller.log");
    let _controller = consumer
        .controller_spawn("v0")
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    consumer.purchase(
        "old",
        &market.url(),
        json!({"contractID": contract["id"], "namespaces": ["apps"]}),
    );
    consumer.wait_phase("old", "Peering")?;
    let token = format!("remote-token-{}", purchase::PROVIDER_ID);
    ensure!(consumer
        .kube
        .get(purchase::SECRETS, Some("liqo"), &token)
        .is_some());

    consumer
        .kube
        .delete_object(purchase::PURCHASES, Some(purchase::TEAM), "old")?;
    let text = e2e::wait_for_log(&log, "cannot delete resource", SETTLE);
    ensure!(
        text.contains("forbidden") && text.contains(&token),
        "the refused delete is not named:\n{text}"
    );
    // Refused, so not done: the Secret stays and so does the finalizer.
    let audit = consumer.kube.audit();
    ensure!(
        audit.iter().any(|r| r.code == 403
            && r.resource.as_ref().is_some_and(|a| a.verb == "delete"
                && a.resource == "secrets"
                && a.name.as_deref() == Some(token.as_str()))),
        "no refused delete of {token}"
    );
    ensure!(consumer
        .kube
        .get(purchase::SECRETS, Some("liqo"), &token)
        .is_some());
    let held = consumer.get_purchase("old");
    ensure!(
        held.as_ref().is_some_and(|p| p["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())),
        "the Purchase went without its clean-up: {held:?}"
    );
    Ok(())
}
