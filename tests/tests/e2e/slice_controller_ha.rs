//! The ResourceSlice class controller under concurrency and restarts: a
//! status write that meets a concurrent write by Liqo (409) is redone on top
//! of it; a restart writes nothing when nothing changed; two replicas elect
//! one leader on the Lease and the standby takes over when the leader dies;
//! every request the controller makes is allowed by the Role its README
//! documents.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::purchase_controller_ha::{bound_as, writes_by};
use crate::slice_controller_support::*;

/// The standby replica's own ServiceAccount, beside the shipped one
/// ([`CONTROLLER_USER`]).
const STANDBY_SA: (&str, &str) = ("liqo", "slice-controller-standby");

const INVENTORY: [(&str, &str); 3] = [("cpu", "8"), ("memory", "16Gi"), ("pods", "220")];

fn is(status: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |c| c["status"] == status
}

#[tokio::test]
async fn a_concurrent_conflicting_status_write_is_survived() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "6")], true);
    let (_controller, _) = p.controller(&[])?;
    p.wait_condition("c1", "gold-a", SETTLE, is("Denied"))
        .await?;

    // The controller stops seeing changes; Liqo renews the certificate
    // (a status write the controller's cache does not know about).
    p.kube.hold_watches(true);
    p.kube.end_watches();
    // Its new slice watch is held: from now on it sees no change.
    let deadline = Instant::now() + SETTLE;
    while p.kube.waiting_watches(SLICES) == 0 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the controller never watched again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut renewed = p.get_slice("c1", "gold-a")?;
    renewed["status"]["authParams"]["signedCRT"] = json!("UkVORVdFRC1DRVJU");
    p.kube
        .replace(SLICES, renewed.clone(), true)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;

    // The chain grows: the controller writes at the version it cached, gets
    // 409, re-reads and writes on top of Liqo's write.
    p.write_inventory(&[("cpu", "16"), ("memory", "16Gi"), ("pods", "220")])?;
    let accepted = p
        .wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    p.kube.hold_watches(false);
    assert_eq!(accepted["reason"], "ResourcesGranted");
    let after = p.get_slice("c1", "gold-a")?;
    assert_eq!(
        after["status"]["authParams"]["signedCRT"],
        "UkVORVdFRC1DRVJU"
    );
    assert_eq!(
        after["status"]["conditions"][0].to_string(),
        auth_condition().to_string()
    );
    let conflicts = p
        .kube
        .audit()
        .iter()
        .filter(|r| {
            r.code == 409
                && r.resource
                    .as_ref()
                    .is_some_and(|a| a.subresource.as_deref() == Some("status"))
        })
        .count();
    assert!(conflicts >= 1, "the write should have met a 409");
    Ok(())
}

// Multi-threaded: the API server runs in this process and must keep
// answering (the Lease release) while the test blocks in `terminate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_writes_nothing_when_nothing_changed() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "3")], true);
    p.slice("c1", "gold-b", CLASS, &[("cpu", "3")], true);
    let (mut first, _) = p.controller(&[])?;
    p.wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    p.wait_condition("c1", "gold-b", SETTLE, is("Denied"))
        .await?;
    first.terminate(Duration::from_secs(5))?;
    // A clean stop releases the Lease, so the next replica need not wait.
    assert_eq!(lease_holder(&p.kube), None);
    let writes = p.status_writes();
    let before = (p.get_slice("c1", "gold-a")?, p.get_slice("c1", "gold-b")?);

    let (_second, port) = p.controller(&[])?;
    // Wait until the new process has reconciled the consumer.
    let deadline = Instant::now() + SETTLE;
    loop {
        let (_, metrics) = http_get(port, "/metrics").await?;
        if metrics.contains("slice_controller_slices{decision=\"accepted\"} 1")
            && metrics.contains("slice_controller_slices{decision=\"denied\"} 1")
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("the restarted controller did not reconcile: {metrics}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The marker: a slice created now is decided after the restart's
    // reconciles of the others; by then any (wrong) rewrite is on record,
    // so the marker's is the one new status write.
    p.slice("c1", "gold-marker", CLASS, &[("cpu", "100")], true);
    p.wait_condition("c1", "gold-marker", SETTLE, is("Denied"))
        .await?;
    assert_eq!(p.status_writes(), writes + 1, "a restart wrote a status");
    assert_eq!(
        (p.get_slice("c1", "gold-a")?, p.get_slice("c1", "gold-b")?),
        before
    );

    // Every request made is allowed by the documented Role.
    let allowed: BTreeSet<(&str, &str, &str)> = [
        ("authentication.liqo.io", "resourceslices", "get"),
        ("authentication.liqo.io", "resourceslices", "list"),
        ("authentication.liqo.io", "resourceslices", "watch"),
        ("authentication.liqo.io", "resourceslices", "patch"),
        ("authentication.liqo.io", "tenants", "list"),
        ("authentication.liqo.io", "tenants", "watch"),
        ("authentication.liqo.io", "resourceslices/status", "update"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "list"),
        ("coordination.k8s.io", "leases", "watch"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        // Liqo's enforcement settings (the provider self-check).
        ("apps", "deployments", "get"),
    ]
    .into_iter()
    .collect();
    for record in p.kube.audit() {
        if let Some(a) = &record.resource {
            let key = (a.api_group.as_str(), a.rbac_resource(), a.verb.as_str());
            assert!(
                allowed.contains(&(key.0, key.1.as_str(), key.2)),
                "not in the documented Role: {record:?}"
            );
        }
    }
    Ok(())
}

/// The failover test's Lease: the shipped defaults' proportions (15 s,
/// 10 s, 2 s), shortened. A standby's lateness on a loaded machine is
/// absolute (a watch event, two GETs, a timer's wake-up: 30–120 ms seen
/// with the load average at 8 on 2 cores), while the slack the promise
/// below leaves grows with `--lease-retry`: 2 s keeps it far above that
/// lateness, at the cost of a 6 s failover.
const FAILOVER_LEASE: LeaseTimes = LeaseTimes {
    duration: Duration::from_secs(6),
    renew_deadline: Duration::from_secs(4),
    retry: Duration::from_secs(2),
};

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over_within_the_lease() -> Result<()> {
    let lease = FAILOVER_LEASE;
    // The promise (controller-core's `lease` module): a standby takes a
    // Lease not renewed for `--lease-duration` since it first saw the last
    // renewal; it sees the renewal at once through its watch on the Lease,
    // or at worst `--lease-retry` later by the poll that backs the watch
    // up. So the Lease changes hands within duration + retry of the dead
    // leader's last renewal; one more retry is the slack for the machine's
    // own lateness, so that only a standby late by a whole retry period
    // fails.
    let promised = lease.duration + lease.retry;
    let bound = promised + lease.retry;
    let mut p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);
    let (a, port_a) = p.controller_leased(lease, &["--lease-identity", "replica-a"])?;
    let deadline = Instant::now() + SETTLE;
    while lease_holder(&p.kube).as_deref() != Some("replica-a") {
        anyhow::ensure!(Instant::now() < deadline, "replica-a never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The standby as a ServiceAccount of its own with the shipped one's
    // permissions, so that the request log tells its calls apart.
    let shipped_kubeconfig = p.kubeconfig.clone();
    p.kubeconfig = p.dir.path().join("standby.kubeconfig");
    let standby_user = bound_as(&p.kube, CONTROLLER_USER, STANDBY_SA, &p.kubeconfig);
    let started = p.controller_leased(lease, &["--lease-identity", "replica-b"]);
    p.kubeconfig = shipped_kubeconfig;
    let (b, port_b) = started?;
    p.wait_condition("c1", "gold-1", SETTLE, is("Accepted"))
        .await?;

    // One leader, one standby, both ready.
    let deadline = Instant::now() + SETTLE;
    let (ready_a, ready_b) = loop {
        let ra = http_get(port_a, "/readyz").await?;
        let rb = http_get(port_b, "/readyz").await?;
        if ra.0 == 200 && rb.0 == 200 {
            break (ra.1, rb.1);
        }
        if Instant::now() > deadline {
            bail!("not ready: {ra:?} {rb:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let holder = lease_holder(&p.kube).unwrap_or_default();
    let (mut leader, standby, standby_id) = match holder.as_str() {
        "replica-a" => (a, b, "replica-b"),
        "replica-b" => (b, a, "replica-a"),
        other => bail!("unexpected holder {other:?}"),
    };
    let roles: BTreeSet<String> = [ready_a.trim().to_string(), ready_b.trim().to_string()].into();
    assert_eq!(
        roles,
        BTreeSet::from(["ok: leader".to_string(), "ok: standby".to_string()])
    );

    // Everything the standby asked so far: reads only (it watches the
    // Lease), not one write while it stands by.
    let standing_by = p.kube.audit();
    anyhow::ensure!(
        standing_by
            .iter()
            .any(|r| r.user.as_deref() == Some(standby_user.as_str())),
        "the standby made no request as {standby_user}"
    );
    anyhow::ensure!(standby_id == "replica-b", "replica-a lost the Lease");
    assert_eq!(
        writes_by(&standing_by, &standby_user),
        Vec::<String>::new(),
        "the standby wrote"
    );

    // The leader dies without releasing the Lease.
    leader.kill();
    let died = Instant::now();
    let last_renewal = lease_renewed(&p.kube).context("the Lease has no renewTime")?;
    p.slice("c1", "gold-2", CLASS, &[("cpu", "1")], true);
    // The last renewal came before the kill, so a takeover within `bound`
    // of it is seen within `bound` of the kill; the holder is checked
    // before the clock, so a late look at a timely takeover still passes.
    loop {
        if lease_holder(&p.kube).as_deref() == Some(standby_id) {
            break;
        }
        if died.elapsed() > bound {
            bail!(
                "no failover within {bound:?} of the kill (--lease-duration + 2 × --lease-retry)"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took_over = died.elapsed();
    // Both bounds from the Lease's own timestamps (microseconds, written by
    // the replicas), not from this test's polling: the new holder's
    // `acquireTime` against the dead leader's last `renewTime`.
    let lease_object = p
        .kube
        .get(
            LEASES,
            Some(CONTROLLER_NAMESPACE),
            &format!("slice-controller-{CLASS}"),
        )
        .context("the Lease is gone")?;
    let acquired = lease_object["spec"]["acquireTime"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(SystemTime::from)
        .with_context(|| format!("the new holder wrote no acquireTime: {lease_object}"))?;
    let waited = acquired.duration_since(last_renewal).with_context(|| {
        format!("the standby took the Lease before the leader's last renewal: {lease_object}")
    })?;
    p.wait_condition("c1", "gold-2", SETTLE, is("Accepted"))
        .await?;
    let decided = died.elapsed();
    eprintln!(
        "failover: lease acquired {waited:?} after the last renewal (seen {took_over:?} after the kill; \
         promised within {promised:?}, allowed {bound:?}); new slice decided {decided:?} after the kill"
    );
    // Not before the Lease expired (a standby that takes a live Lease makes
    // two leaders): no load makes a standby early ...
    assert!(
        waited >= lease.duration,
        "took the Lease {waited:?} after its last renewal, before its {:?} ran out",
        lease.duration
    );
    // ... and within the promise, give or take the slack.
    assert!(
        waited <= bound,
        "took over {waited:?} after the last renewal: more than --lease-duration + \
         --lease-retry ({promised:?}) and another --lease-retry of slack"
    );
    // Now the leader, the standby writes: the new slice's status.
    let leading = writes_by(&p.kube.audit(), &standby_user);
    assert!(
        leading
            .iter()
            .any(|w| w.contains("/resourceslices/gold-2/status")),
        "{leading:#?}"
    );
    drop(standby);
    Ok(())
}

/// The controller's HTTP port is guarded (`edge::probe`, HTTP/1 limits):
/// 100 connections from one address that send nothing neither starve
/// `/healthz` and `/readyz` nor stay open past the 5 s request-line
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_starve_the_probes() -> Result<()> {
    use e2e::process::{open_idle_connections, still_open_at};
    let p = Provider::start(&INVENTORY).await?;
    let (_controller, port) = p.controller(&[])?;
    let opened = Instant::now();
    let idle = open_idle_connections(port, 100, std::net::Ipv4Addr::new(127, 0, 0, 2)).await?;
    // Another address is answered at once (the idle peer holds at most 8).
    let (status, body) = http_get(port, "/healthz").await?;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let deadline = Instant::now() + SETTLE;
    while http_get(port, "/readyz").await?.0 != 200 {
        anyhow::ensure!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Closed by the deadline (the wait ends as soon as they are); 15 s only
    // bounds a real failure.
    let left = still_open_at(idle, opened + Duration::from_secs(15)).await;
    assert_eq!(left, 0, "{left} idle connections outlived the deadline");
    Ok(())
}
