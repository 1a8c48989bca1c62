//! The market autoscaler buys the cheapest set of plans that fits the
//! waiting pods, within its budget, and gives the capacity back when the
//! workload goes (issue 42, "Done when" 1, 2 and 3, and `explain`'s half
//! of 7), on the world of [`crate::autoscaler_support`].
//!
//! Ten pods of a Deployment wait for 6 cpu in all. Offer A sells 4 cpu for
//! 2.00 EUR/hour — the cheapest per cpu, so a greedy first fit buys it
//! twice (4.00) — offer B 6 cpu for 3.50, the cheapest set; offer C sells
//! 8 cpu for 1.00 but in `region: us`, which the MarketAutoscaler's offer
//! selector excludes.

use serde_json::{json, Value};

use crate::autoscaler_support::*;
use crate::purchase_controller_support::wait_until;

/// A decimal string without trailing zeros ("3.50" → "3.5", "0.00" → "0"),
/// so figures compare as numbers without floats.
pub fn money(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    if !s.contains('.') {
        return s.to_string();
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// (offer, plan) of each entry of a decision's `bought`.
pub fn plans(decision: &Value) -> Vec<(String, String)> {
    decision["bought"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            (
                b["offerID"].as_str().unwrap_or_default().to_string(),
                b["planID"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Whether `text` names the money limit: the word, or the field.
fn names_budget(text: &str) -> bool {
    let text = text.to_lowercase();
    text.contains("budget") || text.contains("maxspendperhour")
}

/// The reason a decision's `rejected` gives for `offer`, if it names it.
pub fn rejected(decision: &Value, offer: &str) -> Option<String> {
    decision["rejected"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["offerID"] == offer)
        .map(|r| r["reason"].as_str().unwrap_or_default().to_string())
}

#[test]
fn buys_the_cheapest_set_within_budget_runs_the_pods_there_and_gives_it_back_when_idle() {
    let world = World::open();
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);

    // (2) A budget below the cheapest plan: nothing is bought, and the
    // decision says the budget is why.
    world.create_autoscaler(
        json!({"limits": {"maxSpendPerHour": "1.50"}, "terms": {"duration": "1h"}}),
    );
    let (mut autoscaler, _port) = world.start_autoscaler();
    let refused = world.wait_autoscaler("a decision", |m| {
        !m["status"]["lastDecision"]["at"].is_null()
    });
    let decision = &refused["status"]["lastDecision"];
    assert_eq!(plans(decision), [], "{refused:#}");
    for offer in [A.0, B.0] {
        let reason = rejected(decision, offer).unwrap_or_default();
        assert!(
            names_budget(&reason),
            "{offer}: {reason:?} does not name the budget: {refused:#}"
        );
    }
    assert!(world.purchases().is_empty(), "{:#?}", world.purchases());
    assert!(world.contracts().is_empty(), "{:#?}", world.contracts());
    // The pods are told, in the Cluster Autoscaler's words.
    let told = e2e::contracts::wait_for("NotTriggerScaleUp on the pods", || {
        let events = world.events("NotTriggerScaleUp");
        (!events.is_empty()).then_some(events)
    });
    assert!(
        told.iter()
            .all(|e| names_budget(e["note"].as_str().unwrap_or_default())),
        "{told:#?}"
    );

    // `explain` (read-only) with the budget raised, before the controller
    // acts on it: the cheapest set, B alone, with its price per hour.
    autoscaler.kill();
    world.patch_autoscaler(json!({"limits": {"maxSpendPerHour": "10"}}));
    let explained = world.explain()["decision"].clone();
    assert_eq!(
        plans(&explained),
        [(B.0.to_string(), B.1.to_string())],
        "{explained:#}"
    );

    // (1) The controller makes that decision: B bought, C never (its
    // label), nothing else.
    let (_autoscaler, _port) = world.start_autoscaler();
    // `lastScaleUp`, not `lastDecision`: the round after the purchase (its
    // pods still waiting, their room in flight) decides to buy nothing and
    // says so in `lastDecision`.
    let bought = world.wait_autoscaler("B bought", |m| {
        !plans(&m["status"]["lastScaleUp"]).is_empty()
    });
    let decision = &bought["status"]["lastScaleUp"];
    assert_eq!(plans(decision), plans(&explained), "{bought:#}");
    assert_eq!(
        money(&decision["bought"][0]["costPerHour"]),
        "3.5",
        "{bought:#}"
    );
    assert!(rejected(decision, C.0).is_some(), "C not named: {bought:#}");

    let contract =
        e2e::contracts::wait_for("B's contract", || world.contracts().into_iter().next());
    let node = node_of(&contract);
    let running = world.wait_running("web", 10, |n| n == node);
    assert_eq!(running.len(), 10);
    assert_eq!(
        world.bought(),
        [(B.0.to_string(), B.1.to_string(), true)],
        "exactly B bought"
    );
    assert_eq!(world.purchases().len(), 1, "{:#?}", world.purchases());
    // Bought for terms.duration (1 h), not the catalog's 30 days.
    let term = seconds(&contract["expiresAt"]) - seconds(&contract["purchasedAt"]);
    assert!((term - 3600.0).abs() < 1.0, "a {term} s term: {contract:#}");
    assert_eq!(
        contract["boughtBy"],
        format!("market-autoscaler/{HOME}/{NAME}"),
        "{contract:#}"
    );
    let held = world.wait_autoscaler("the contract held", |m| {
        money(&m["status"]["spendPerHour"]) == "3.5"
    });
    assert_eq!(held["status"]["currency"], "EUR", "{held:#}");

    // (3) The workload goes: after unneededTime (2 s) the contract is
    // cancelled, the virtual node goes, and nothing is spent any more.
    world.delete_deployment("web");
    let id = contract["id"].as_str().unwrap().to_string();
    e2e::contracts::wait_for("the contract cancelled", || {
        let (_, c) = world.base.market.contract(&world.base.alice, &id);
        (c["ended"] == "cancelled").then_some(())
    });
    wait_until("the virtual node gone", || {
        !world.virtual_nodes().contains(&node)
    });
    world.wait_autoscaler("spend 0", |m| money(&m["status"]["spendPerHour"]) == "0");
    // The Purchase goes once its teardown is over (Liqo removed the
    // ResourceSlice, as `liqoctl unpeer` waits for).
    wait_until("the Purchase gone", || world.purchases().is_empty());
    assert_eq!(world.bought(), [(B.0.to_string(), B.1.to_string(), false)]);
    assert!(!world.events("ScaleDown").is_empty(), "no ScaleDown Event");
}
