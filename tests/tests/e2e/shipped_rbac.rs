//! Every controller runs under the RBAC `deploy/kubernetes` ships for it,
//! enforced by the test API server on each request: a permission taken
//! away is refused with the API server's 403 where the call is made, and
//! the controller says so in its log instead of writing anything.

use std::time::Instant;

use anyhow::{ensure, Result};

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
