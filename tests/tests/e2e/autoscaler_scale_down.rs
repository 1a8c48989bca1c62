//! The market autoscaler giving capacity back and keeping what is still
//! wanted (issue 42, "Done when" 7), on the world of
//! [`crate::autoscaler_support`], with `scaleDown.policy:
//! WhenEmptyOrUnderutilized` and a catalog whose contracts last 30 s:
//!
//! - an underutilised node whose pods fit on another bought node is given
//!   back: cordoned, its pods evicted through `pods/eviction`, its contract
//!   cancelled;
//! - a PodDisruptionBudget refuses one of those evictions (429): the node
//!   stays cordoned and the drain is retried until the budget allows it;
//! - a pod annotated `karpenter.sh/do-not-disrupt: "true"` keeps its
//!   underutilised node, and its contract, past `unneededTime`;
//! - a contract still in use is extended before its 30 s run out.

use std::time::Duration;

use serde_json::{json, Value};

use crate::autoscaler_support::*;
use crate::purchase_controller_support::wait_until;

/// The catalog's contract length here: short enough that a contract in
/// use must be extended while the test runs.
const CONTRACT_SECONDS: u64 = 30;

/// The entry of node `node` in the MarketAutoscaler's `status.nodes`.
fn node_status(mas: &Value, node: &str) -> Value {
    mas["status"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["node"] == node)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn underused_capacity_is_given_back_past_a_pdb_and_kept_for_do_not_disrupt_and_extended_in_use() {
    let contract_duration = format!("{CONTRACT_SECONDS}s");
    let world = World::open_with(&["--contract-duration", &contract_duration]);
    world.create_autoscaler(json!({
        "scaleDown": {"policy": "WhenEmptyOrUnderutilized"},
        "terms": {"onExpiry": "Extend"},
    }));
    // B for web (10 × 600m fill its 6 cpu), then A for `keep` (B is full).
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);
    let (_autoscaler, _) = world.start_autoscaler();
    let b = world.wait_contract("B's contract", |c| c["offerID"] == B.0);
    let b_node = node_of(&b);
    world.wait_running("web", 10, |n| n == b_node);
    world.deployment(
        "keep",
        1,
        "500m",
        json!({"karpenter.sh/do-not-disrupt": "true"}),
    );
    let a = world.wait_contract("A's contract", |c| c["offerID"] == A.0);
    let a_node = node_of(&a);
    world.wait_running("keep", 1, |n| n == a_node);

    // Two of web's pods must stay available: one may be evicted at a time.
    world.kube().apply(
        PDBS,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web", "namespace": APPS},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    // web down to 2: B at 20 %, its pods fit on A (3.5 cpu free).
    world.scale("web", 2);

    // The drain: the first eviction passes, the second is refused by the
    // budget; the node stays cordoned so the evicted pod comes back on A.
    let refused = e2e::contracts::wait_for("an eviction refused", || {
        world
            .events("ScaleDownFailed")
            .into_iter()
            .find(|e| e["regarding"]["name"] == b_node.as_str())
    });
    let note = refused["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("refused") && note.contains("stays cordoned"),
        "{refused:#}"
    );
    // Then it is given back once the budget allows the second eviction.
    let b_id = b["id"].as_str().unwrap().to_string();
    let cancelled = e2e::contracts::wait_for("B's contract cancelled", || {
        let c = world.contract(&b_id);
        (c["ended"] == "cancelled").then_some(c)
    });
    wait_until("B's node gone", || !world.virtual_nodes().contains(&b_node));
    let running = world.wait_running("web", 2, |n| n == a_node);
    assert_eq!(running.len(), 2, "{cancelled:#}");
    assert!(
        world
            .events("ScaleDown")
            .iter()
            .any(|e| e["regarding"]["name"] == b_node.as_str()),
        "no ScaleDown Event on B's node"
    );

    // A, underutilised, is kept: its do-not-disrupt pod would have to move.
    world.scale("web", 0);
    let kept = world.wait_autoscaler("A kept for do-not-disrupt", |m| {
        node_status(m, &a_node)["reason"]
            .as_str()
            .is_some_and(|r| r.contains("karpenter.sh/do-not-disrupt"))
    });
    assert_eq!(node_status(&kept, &a_node)["state"], "Kept", "{kept:#}");
    // Past unneededTime (2 s) and delayAfterPurchase (5 s, long past), with rounds
    // every --scan-interval (1 s): still held.
    std::thread::sleep(Duration::from_secs(6));
    let a_id = a["id"].as_str().unwrap().to_string();
    let held = world.contract(&a_id);
    assert_eq!(held["active"], true, "A given back: {held:#}");

    // Still in use past half its term: extended, and then past its first
    // end.
    let extended = e2e::contracts::wait_for("A extended", || {
        let c = world.contract(&a_id);
        (!c["extendedAt"].is_null()).then_some(c)
    });
    let first_end = seconds(&a["expiresAt"]);
    assert!(
        seconds(&extended["expiresAt"]) > first_end,
        "{extended:#} (bought: {a:#})"
    );
    assert!(
        !world.events("ContractExtended").is_empty(),
        "no ContractExtended Event"
    );
    wait_until("A past its first end", || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        now > first_end + 1.0
    });
    assert_eq!(
        world.contract(&a_id)["active"],
        true,
        "A expired while in use"
    );

    // The annotation was all that held it: its pod gone, A goes too.
    world.delete_deployment("keep");
    e2e::contracts::wait_for("A's contract cancelled", || {
        let c = world.contract(&a_id);
        (c["ended"] == "cancelled").then_some(())
    });
    world.wait_autoscaler("spend 0", |m| {
        crate::autoscaler_scale_up::money(&m["status"]["spendPerHour"]) == "0"
    });
}
