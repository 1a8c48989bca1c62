//! The market autoscaler when the market lets it down (issue 42, "Done
//! when" 4, 5 and the last part of 7), on the world of
//! [`crate::autoscaler_support`]:
//!
//! - the offer it chose is withdrawn after its Purchase is made and before
//!   purchase-controller reserves it: the Purchase fails, is deleted, the
//!   offer backed off, and the next best set is bought;
//! - a Purchase that never becomes Ready (its provider never attaches a
//!   peering user) is given up at `--purchase-deadline`: its contract
//!   cancelled, its offer backed off, the next best bought;
//! - with the catalog down nothing is bought, the MarketAutoscaler and
//!   `/readyz` say why.

use serde_json::{json, Value};

use crate::autoscaler_scale_up::{money, rejected};
use crate::autoscaler_support::*;
use crate::purchase_controller_support::wait_until;

/// The backoff entry of `offer` in the MarketAutoscaler's status.
fn backoff(mas: &Value, offer: &str) -> Option<Value> {
    mas["status"]["backoff"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["offerID"] == offer)
        .cloned()
}

#[test]
fn an_offer_withdrawn_before_its_purchase_goes_through_is_given_up_and_the_next_best_bought() {
    let mut world = World::open();
    // purchase-controller stopped: the Purchase waits to be reserved.
    world.purchase_controller.take();
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);
    world.create_autoscaler(json!({}));
    let (_autoscaler, port) = world.start_autoscaler();

    // The decision: B, the cheapest set; its Purchase made (and nothing
    // else: the pods wait for the room it brings).
    let first = e2e::contracts::wait_for("B's Purchase", || world.purchases().into_values().next());
    assert_eq!(first["spec"]["offerID"], B.0, "{first:#}");
    wait_until("TriggeredScaleUp on the pods", || {
        !world.events("TriggeredScaleUp").is_empty()
    });

    // B withdrawn before the Purchase reached the catalog.
    world.withdraw(B);
    world.purchase_controller = Some(start_purchase_controller(&world.base));

    // The Purchase failed, was deleted and B backed off; the next best,
    // A twice (4.00 per hour), bought instead, and the pods run there.
    let backed_off = world.wait_autoscaler("B backed off", |m| backoff(m, B.0).is_some());
    assert_eq!(
        backoff(&backed_off, B.0).unwrap()["failures"],
        1,
        "{backed_off:#}"
    );
    let offers_bought = || {
        world
            .purchases()
            .values()
            .map(|p| {
                p["spec"]["offerID"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    wait_until("A's two Purchases", || offers_bought() == [A.0, A.0]);
    assert!(
        !world
            .purchases()
            .contains_key(first["metadata"]["name"].as_str().unwrap()),
        "the failed Purchase is kept: {:#?}",
        world.purchases()
    );
    assert!(
        !world.events("PurchaseFailed").is_empty(),
        "no PurchaseFailed Event"
    );
    let nodes: Vec<String> = (0..2)
        .map(|i| {
            node_of(&e2e::contracts::wait_for("A's contracts", || {
                let c = world.contracts();
                (c.len() == 2).then(|| c[i].clone())
            }))
        })
        .collect();
    let running = world.wait_running("web", 10, |n| nodes.iter().any(|b| b == n));
    assert_eq!(running.len(), 10);
    assert_eq!(
        world.bought(),
        vec![(A.0.to_string(), A.1.to_string(), true); 2],
        "only A bought, twice; B never became a contract"
    );
    let bought =
        world.wait_autoscaler("4 per hour", |m| money(&m["status"]["spendPerHour"]) == "4");
    assert!(
        rejected(&bought["status"]["lastDecision"], B.0).is_none(),
        "B, withdrawn, is still weighed: {bought:#}"
    );

    // The catalog goes down: the autoscaler says so and buys nothing for
    // pods that wait from then on.
    world.base.market.catalog.child.kill();
    let down = world.wait_autoscaler("CatalogUnreachable", |m| {
        let ready = condition(m, "Ready");
        ready["status"] == "False" && ready["reason"] == "CatalogUnreachable"
    });
    let purchases_before = world.purchases().len();
    wait_until("/readyz says the catalog is unreachable", || {
        let (status, body) = world.http_get(port, "/readyz");
        status == 503 && body.contains("CatalogUnreachable")
    });
    // 2 cpu each: no bought node has 2 cpu free (10 × 0.6 on 2 × 4).
    world.deployment("more", 4, "2", json!({}));
    world.wait_unschedulable("more", 4);
    // Rounds run every --scan-interval (1 s) and a batch closes within
    // --batch-max (1 s): five scans see the waiting pods.
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(
        world.purchases().len(),
        purchases_before,
        "bought with the catalog down: {:#?}",
        world.purchases()
    );
    let still = world.wait_autoscaler("still unreachable", |_| true);
    assert_eq!(
        condition(&still, "Ready")["reason"],
        "CatalogUnreachable",
        "{still:#} (was {down:#})"
    );
    assert_eq!(
        still["status"]["lastDecision"], down["status"]["lastDecision"],
        "a decision made with the catalog down"
    );
}

#[test]
fn a_purchase_never_ready_is_cancelled_at_its_deadline_and_its_offer_backed_off() {
    let world = World::open();
    // E, 6 cpu for 3.00, is the cheapest: its provider never peers.
    publish_unready(&world);
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);
    world.create_autoscaler(json!({}));
    const DEADLINE: u64 = 20;
    let (_autoscaler, _) = world
        .autoscaler_with_deadline(&format!("{DEADLINE}s"))
        .start_announced(1)
        .expect("market-autoscaler");

    // E, the cheapest, bought first.
    let first = e2e::contracts::wait_for("a Purchase", || world.purchases().into_values().next());
    assert_eq!(first["spec"]["offerID"], E.0, "{first:#}");
    let e_contract = world.wait_contract("E's contract", |c| c["offerID"] == E.0);
    let e_purchase = e2e::contracts::wait_for("E's Purchase", || {
        world
            .purchases()
            .into_values()
            .find(|p| p["spec"]["offerID"] == E.0)
    });

    // Not Ready within the deadline: given up.
    let given_up = e2e::contracts::wait_for("E's contract cancelled", || {
        let c = world.contract(e_contract["id"].as_str().unwrap());
        (c["ended"] == "cancelled").then_some(c)
    });
    let held_for =
        seconds(&given_up["endedAt"]) - seconds(&e_purchase["metadata"]["creationTimestamp"]);
    assert!(
        held_for >= DEADLINE as f64 - 1.0,
        "cancelled {held_for} s after the Purchase, before the {DEADLINE} s deadline"
    );
    let events = world.events("PurchaseFailed");
    assert!(
        events.iter().any(|e| e["note"]
            .as_str()
            .unwrap_or_default()
            .contains("not Ready within")),
        "{events:#?}"
    );

    // B, the next best, bought and used; E backed off and named so.
    let backed_off = world.wait_autoscaler("E backed off and named so", |m| {
        backoff(m, E.0).is_some()
            && rejected(&m["status"]["lastDecision"], E.0)
                .is_some_and(|why| why.to_lowercase().contains("back"))
    });
    assert_eq!(
        backoff(&backed_off, E.0).unwrap()["failures"],
        1,
        "{backed_off:#}"
    );
    let b = world.wait_contract("B's contract", |c| c["offerID"] == B.0);
    let node = node_of(&b);
    world.wait_running("web", 10, |n| n == node);
    wait_until("E's Purchase deleted", || {
        !world
            .purchases()
            .contains_key(e_purchase["metadata"]["name"].as_str().unwrap())
    });
    assert_eq!(
        world.bought(),
        [
            (E.0.to_string(), E.1.to_string(), false),
            (B.0.to_string(), B.1.to_string(), true)
        ]
    );
}
