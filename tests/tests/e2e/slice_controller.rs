//! The real `resource-monitor --liqo-api v1 --class gold` against the test
//! API server (Liqo v1.2.0 CRDs), over a static source (cpu 8, memory 16Gi,
//! pods 220, nvidia.com/gpu 2) → quota 50% → filter denying `nvidia.com/*`:
//! each consumer is offered cpu 4, memory 8Gi, pods 110.
//!
//! What is decided and what is left alone: other classes and unauthenticated
//! slices untouched; accept and deny under each grant policy with the exact
//! condition; `Authentication` and `authParams` kept byte for byte; a static
//! source change re-evaluating within 2 s; cordoned and drained Tenants.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::slice_controller_support::*;

const INVENTORY: [(&str, &str); 4] = [
    ("cpu", "8"),
    ("memory", "16Gi"),
    ("pods", "220"),
    ("nvidia.com/gpu", "2"),
];

fn is(status: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |c| c["status"] == status
}

#[tokio::test]
async fn other_classes_and_unauthenticated_slices_are_left_untouched() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    let silver = p.slice("c1", "silver-1", "silver", &[("cpu", "1")], true);
    let waiting = p.slice("c1", "gold-waiting", CLASS, &[("cpu", "1")], false);
    let mut local = p.slice("c1", "gold-local", CLASS, &[("cpu", "1")], true);
    // A slice of the class that Liqo did not replicate here (no labels).
    local["metadata"]["labels"] = json!({});
    let local = p.kube.apply(SLICES, local);
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);

    let (_controller, _) = p.controller(&[])?;
    p.wait_condition("c1", "gold-1", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(p.get_slice("c1", "gold-waiting")?, waiting);

    // Once Liqo accepts its authentication, the waiting slice is decided.
    let mut authenticated = waiting.clone();
    authenticated["status"] =
        json!({"conditions": [auth_condition()], "authParams": auth_params()});
    p.kube.apply(SLICES, authenticated);
    p.wait_condition("c1", "gold-waiting", SETTLE, is("Accepted"))
        .await?;
    // The marker: every slice was seen at start, long before this change,
    // so a (wrong) write to the others would be on record by now. Exactly
    // two status writes: gold-1's and gold-waiting's once authenticated
    // (one before would make three).
    assert_eq!(p.get_slice("c1", "silver-1")?, silver);
    assert_eq!(p.get_slice("c1", "gold-local")?, local);
    assert_eq!(
        p.status_writes(),
        2,
        "only gold-1 and, once authenticated, gold-waiting were written"
    );
    Ok(())
}

#[tokio::test]
async fn fit_accepts_and_denies_with_the_exact_condition_keeping_liqos_fields() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice(
        "c1",
        "gold-a",
        CLASS,
        &[("cpu", "3"), ("memory", "4096Mi")],
        true,
    );
    p.slice(
        "c1",
        "gold-b",
        CLASS,
        &[("cpu", "2"), ("nvidia.com/gpu", "1")],
        true,
    );

    let (_controller, port) = p.controller(&["--grant-policy", "fit"])?;
    let a = p
        .wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(a["reason"], "ResourcesGranted");
    assert_eq!(
        a["message"],
        "granted as requested: cpu 3, memory 4Gi; with the class's defaults for a usable node: pods 110"
    );
    let b = p
        .wait_condition("c1", "gold-b", SETTLE, is("Denied"))
        .await?;
    assert_eq!(b["reason"], "InsufficientResources");
    assert_eq!(
        b["message"],
        "does not fit: cpu: requested 2, remaining 1 (offered 4, held by other accepted slices 3), short by 1; \
         nvidia.com/gpu: requested 1, remaining 0 (offered 0, held by other accepted slices 0), short by 1"
    );

    let a = p.get_slice("c1", "gold-a")?;
    assert_eq!(
        a["status"]["resources"],
        json!({"cpu": "3", "memory": "4Gi", "pods": "110"})
    );
    let b = p.get_slice("c1", "gold-b")?;
    assert!(
        b["status"].get("resources").is_none(),
        "a denial grants nothing: {b}"
    );

    // Liqo's fields, byte for byte.
    for slice in [&a, &b] {
        assert_eq!(
            slice["status"]["authParams"].to_string(),
            auth_params().to_string()
        );
        assert_eq!(
            slice["status"]["conditions"][0].to_string(),
            auth_condition().to_string()
        );
        assert_eq!(
            slice["status"]["conditions"].as_array().map(Vec::len),
            Some(2)
        );
    }

    // The decisions are counted, and recorded as Events.
    let (code, metrics) = http_get(port, "/metrics").await?;
    assert_eq!(code, 200);
    assert!(
        metrics.contains("slice_controller_slices{decision=\"accepted\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("slice_controller_slices{decision=\"denied\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("slice_controller_decisions_total{reason=\"InsufficientResources\"} 1"),
        "{metrics}"
    );
    let deadline = Instant::now() + SETTLE;
    loop {
        let events = p.kube.objects(("events.k8s.io", "events"));
        let reasons: Vec<String> = events
            .iter()
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        if reasons.contains(&"ResourcesGranted".to_string())
            && reasons.contains(&"InsufficientResources".to_string())
        {
            let denial = events
                .iter()
                .find(|e| e["reason"] == "InsufficientResources")
                .cloned()
                .unwrap_or_default();
            assert_eq!(denial["type"], "Warning");
            assert_eq!(denial["regarding"]["name"], "gold-b");
            break;
        }
        assert!(Instant::now() < deadline, "events: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::test]
async fn clamp_grants_what_remains() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "3")], true);
    p.slice(
        "c1",
        "gold-b",
        CLASS,
        &[("cpu", "2"), ("memory", "1Gi")],
        true,
    );
    let (_controller, _) = p.controller(&["--grant-policy", "clamp"])?;
    let a = p
        .wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(a["reason"], "ResourcesGranted");
    let b = p
        .wait_condition("c1", "gold-b", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(b["reason"], "ResourcesClamped");
    assert_eq!(
        b["message"],
        "granted less than requested: cpu 1 (requested 2, remaining 1), memory 1Gi; with the class's defaults for a usable node: pods 110"
    );
    assert_eq!(
        p.get_slice("c1", "gold-b")?["status"]["resources"],
        json!({"cpu": "1", "memory": "1Gi", "pods": "110"})
    );
    Ok(())
}

#[tokio::test]
async fn offer_grants_what_the_chain_offers() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "1")], true);
    let (_controller, _) = p.controller(&["--grant-policy", "offer"])?;
    let a = p
        .wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(a["reason"], "ResourcesOffered");
    assert_eq!(
        a["message"],
        "granted what is offered: cpu 4, memory 8Gi, pods 110"
    );
    assert_eq!(
        p.get_slice("c1", "gold-a")?["status"]["resources"],
        json!({"cpu": "4", "memory": "8Gi", "pods": "110"})
    );
    Ok(())
}

#[tokio::test]
async fn a_static_source_change_reevaluates_the_slices() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.tenant("c2", "Active");
    p.slice("c1", "gold-big", CLASS, &[("cpu", "6")], true);
    p.slice("c2", "gold-small", CLASS, &[("cpu", "1")], true);
    let (_controller, _) = p.controller(&[])?;
    let denied = p
        .wait_condition("c1", "gold-big", SETTLE, is("Denied"))
        .await?;
    assert_eq!(
        denied["message"],
        "does not fit: cpu: requested 6, remaining 4 (offered 4, held by other accepted slices 0), short by 2"
    );
    p.wait_condition("c2", "gold-small", SETTLE, is("Accepted"))
        .await?;
    let small = p.get_slice("c2", "gold-small")?;

    // Timestamps have whole seconds: let one pass so the transition shows.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // How fast is a benchmark's question; a test waits for the condition.
    p.write_inventory(&[("cpu", "16"), ("memory", "16Gi"), ("pods", "220")])?;
    let accepted = p
        .wait_condition("c1", "gold-big", SETTLE, is("Accepted"))
        .await?;
    // A transition: the time moved.
    assert_ne!(accepted["lastTransitionTime"], denied["lastTransitionTime"]);
    // The other consumer's accepted slice had nothing to change. The
    // marker: a slice created now is decided after the re-evaluation the
    // inventory change queued; by then a (wrong) rewrite of gold-small
    // would be on record. Status writes: gold-big denied, gold-small
    // accepted, gold-big accepted, the marker accepted.
    p.slice("c2", "gold-marker", CLASS, &[("cpu", "1")], true);
    p.wait_condition("c2", "gold-marker", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(p.get_slice("c2", "gold-small")?, small);
    assert_eq!(p.status_writes(), 4, "gold-small was written again");
    Ok(())
}

#[tokio::test]
async fn cordoned_and_drained_tenants_are_denied() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.tenant("c2", "Cordoned");
    p.slice("c1", "gold-kept", CLASS, &[("cpu", "1")], true);
    p.slice("c2", "gold-new", CLASS, &[("cpu", "1")], true);
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("controller.log");
    let (_controller, _) = p
        .controller_spawn("250ms", &[])
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    let denied = p
        .wait_condition("c2", "gold-new", SETTLE, is("Denied"))
        .await?;
    assert_eq!(denied["reason"], "TenantCordoned");
    assert_eq!(
        denied["message"],
        "tenant c2 is cordoned: no new resources are granted"
    );
    p.wait_condition("c1", "gold-kept", SETTLE, is("Accepted"))
        .await?;

    // Cordoning c1 keeps its grant and denies a new slice.
    let cordoned = p.tenant("c1", "Cordoned");
    // Tenants and slices arrive on separate watches: a slice created in the
    // same instant as the cordon may be decided before the controller sees
    // it (and then keeps its grant, as a cordon keeps grants). The new
    // slice comes once the controller has decided on the cordoned Tenant.
    let version = cordoned["metadata"]["resourceVersion"]
        .as_str()
        .context("the Tenant's resourceVersion")?;
    let seen = format!("tenant_version={version}\n");
    let text = tokio::task::spawn_blocking(move || e2e::wait_for_log(&log, &seen, SETTLE)).await?;
    assert!(text.contains("deciding the consumer's slices"));
    p.slice("c1", "gold-more", CLASS, &[("cpu", "1")], true);
    p.wait_condition("c1", "gold-more", SETTLE, is("Denied"))
        .await?;
    assert_eq!(
        p.resources_condition("c1", "gold-kept")
            .map(|c| c["status"].clone()),
        Some(json!("Accepted"))
    );

    // Draining it takes the grant away: revoked (every key 0, cordoned),
    // as Liqo ignores a denial after acceptance; the slice never granted
    // is denied.
    p.tenant("c1", "Drained");
    let drained = p
        .wait_condition("c1", "gold-kept", SETTLE, |c| {
            c["reason"] == "ResourcesRevoked"
        })
        .await?;
    assert_eq!(drained["status"], "Accepted");
    assert_eq!(
        drained["message"],
        "revoked: every resource is 0 and the slice is cordoned (tenant c1 is drained: no resources are granted)"
    );
    let kept = p.get_slice("c1", "gold-kept")?;
    assert_eq!(
        kept["status"]["resources"],
        json!({"cpu": "0", "memory": "0", "pods": "0"})
    );
    assert_eq!(kept["metadata"]["annotations"]["liqo.io/cordon"], "true");
    let more = p
        .wait_condition("c1", "gold-more", SETTLE, |c| {
            c["reason"] == "TenantDrained"
        })
        .await?;
    assert_eq!(more["status"], "Denied");
    Ok(())
}

#[tokio::test]
async fn a_shrink_keeps_accepted_and_every_key_at_its_lower_value() -> Result<()> {
    let p = Provider::start(&[
        ("cpu", "8"),
        ("memory", "16Gi"),
        ("pods", "220"),
        ("ephemeral-storage", "100Gi"),
    ])
    .await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "1")], true);
    let (_controller, _) = p.controller(&["--grant-policy", "offer", "--on-shrink", "follow"])?;
    p.wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    assert_eq!(
        p.get_slice("c1", "gold-a")?["status"]["resources"],
        json!({"cpu": "4", "ephemeral-storage": "50Gi", "memory": "8Gi", "pods": "110"})
    );
    // The provider gives less cpu and stops offering ephemeral storage:
    // the grant shrinks in place, still Accepted, and keeps the key at 0
    // (Liqo's virtual kubelet never removes a key from the node, and a
    // Quota without it would not bound it).
    p.write_inventory(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "220")])?;
    let shrunk = p
        .wait_condition("c1", "gold-a", SETTLE, |c| {
            c["message"] == "granted what is offered: cpu 2, memory 8Gi, pods 110"
        })
        .await?;
    assert_eq!(shrunk["status"], "Accepted");
    let slice = p.get_slice("c1", "gold-a")?;
    assert_eq!(
        slice["status"]["resources"],
        json!({"cpu": "2", "ephemeral-storage": "0", "memory": "8Gi", "pods": "110"})
    );
    assert!(slice["metadata"]["annotations"]["liqo.io/cordon"].is_null());
    Ok(())
}

#[tokio::test]
async fn the_configured_classes_and_node_labels_appear_in_the_grant() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "1")], true);
    p.slice("c1", "gold-big", CLASS, &[("cpu", "100")], true);
    let (_controller, _) = p.controller(&[
        "--storage-classes",
        "standard:default,fast-ssd",
        "--ingress-classes",
        "nginx:default",
        "--load-balancer-classes",
        "metallb",
        "--node-labels",
        "topology.kubernetes.io/region=eu-west,broker.liqo-broker.io/provider=provider-1",
        "--node-selector",
        "pool=sold",
    ])?;
    p.wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    let status = p.get_slice("c1", "gold-a")?["status"].clone();
    // As Liqo's CRD spells them (storageClassName, ingressClassName,
    // loadBalancerClassName; `default` only when true).
    assert_eq!(
        status["storageClasses"],
        json!([{"storageClassName": "standard", "default": true}, {"storageClassName": "fast-ssd"}])
    );
    assert_eq!(
        status["ingressClasses"],
        json!([{"ingressClassName": "nginx", "default": true}])
    );
    assert_eq!(
        status["loadBalancerClasses"],
        json!([{"loadBalancerClassName": "metallb"}])
    );
    assert_eq!(
        status["nodeLabels"],
        json!({"topology.kubernetes.io/region": "eu-west", "broker.liqo-broker.io/provider": "provider-1"})
    );
    assert_eq!(status["nodeSelector"], json!({"pool": "sold"}));
    // A denied slice gets none of them.
    p.wait_condition("c1", "gold-big", SETTLE, is("Denied"))
        .await?;
    assert!(p.get_slice("c1", "gold-big")?["status"]
        .get("storageClasses")
        .is_none());
    Ok(())
}

#[tokio::test]
async fn runs_beside_the_grpc_server_for_a_provider_moving_to_v1() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-a", CLASS, &[("cpu", "2")], true);
    // `--liqo-api v0.6` serves gRPC; `--class` adds the controller.
    let (_both, bound) =
        p.controller_announced("250ms", &["--liqo-api", "v0.6", "--listen", "127.0.0.1:0"])?;
    let grpc = bound.port(None);
    p.wait_condition("c1", "gold-a", SETTLE, is("Accepted"))
        .await?;
    let client = e2e::grpc::ReaderClient::connect(grpc, e2e::grpc::Shape::B).await?;
    assert_eq!(
        client.read("c1").await?,
        e2e::grpc::resources(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
    );
    Ok(())
}

/// The same decision again for a slice (a changed request that still does
/// not fit) extends its Event's series instead of adding an Event, as
/// kube's Recorder does: a PATCH of the Event, which the shipped RBAC
/// grants (`events: patch`) and this test exercises.
#[tokio::test]
async fn a_repeated_decision_extends_the_events_series() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-big", CLASS, &[("cpu", "6")], true);
    let (_controller, _) = p.controller(&[])?;
    p.wait_condition("c1", "gold-big", SETTLE, is("Denied"))
        .await?;
    // Still more than the 4 CPUs offered: denied again, same reason. The
    // consumer changes its request in place (as Liqo's controller updates
    // a slice: generation moves, status stays), not by re-creating it.
    let before = p
        .kube
        .get(SLICES, Some(&tenant_namespace("c1")), "gold-big")
        .expect("the slice");
    let changed = p
        .kube
        .merge_patch(
            SLICES,
            Some(&tenant_namespace("c1")),
            "gold-big",
            json!({"spec": {"resources": {"cpu": "5"}}}),
            false,
        )
        .expect("the request changed");
    assert_eq!(
        changed["metadata"]["uid"], before["metadata"]["uid"],
        "the same object"
    );
    assert!(
        changed["metadata"]["generation"].as_i64() > before["metadata"]["generation"].as_i64(),
        "a spec change moves the generation: {changed:#}"
    );
    assert_eq!(changed["status"], before["status"], "and keeps the status");
    p.wait_condition("c1", "gold-big", SETTLE, |c| {
        c["status"] == "Denied"
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("requested 5"))
    })
    .await?;
    let deadline = Instant::now() + SETTLE;
    loop {
        let events = p.kube.objects(("events.k8s.io", "events"));
        let denials: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["reason"] == "InsufficientResources")
            .collect();
        if denials.len() == 1 && denials[0]["series"]["count"] == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "events: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let patched = p.kube.audit().iter().any(|r| {
        r.code == 200
            && r.resource
                .as_ref()
                .is_some_and(|a| a.verb == "patch" && a.resource == "events")
    });
    assert!(patched, "the series was not written with a PATCH");
    Ok(())
}
