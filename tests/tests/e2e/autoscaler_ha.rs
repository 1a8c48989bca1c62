//! Two replicas of the market autoscaler, the leader killed at each step
//! of a purchase and of a give-back (issue 42, "Done when" 6), on the
//! world of [`crate::autoscaler_support`]: the first replica runs with
//! `MARKET_AUTOSCALER_FAILPOINT=<step>` and exits (status 3) right after
//! that step, the moment a leader could die in production; the second
//! takes the Lease over and finishes the job. Exactly one contract is
//! bought, and a contract given back is cancelled once.

use serde_json::json;

use crate::autoscaler_support::*;
use crate::purchase_controller_support::wait_until;

/// The failpoint variable and the exit status of a process stopped there
/// (`market_autoscaler::failpoint`).
const FAILPOINT: &str = "MARKET_AUTOSCALER_FAILPOINT";
const STOPPED_AT_FAILPOINT: i32 = 3;

/// Replica `r1`, armed at `step`, started alone and leading; then `r2`.
fn leader_armed_then_standby(world: &World, step: &str) -> (e2e::Child, e2e::Child) {
    let (armed, _) = world
        .replica("r1")
        .env(FAILPOINT, step)
        .start_announced(1)
        .expect("replica r1");
    wait_until("r1 leads", || world.leader().as_deref() == Some("r1"));
    let (standby, _) = world.replica("r2").start_announced(1).expect("replica r2");
    (armed, standby)
}

/// The leader killed right after `step` of a purchase: `r2` finishes it;
/// one Purchase, one contract, the pods running on its node.
fn killed_mid_purchase(step: &str) {
    let world = World::open();
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);
    world.create_autoscaler(json!({}));
    let (mut armed, _standby) = leader_armed_then_standby(&world, step);

    let stopped = exit_of(&mut armed);
    assert_eq!(
        stopped.code(),
        Some(STOPPED_AT_FAILPOINT),
        "r1 did not stop at {step}"
    );
    wait_until("r2 leads", || world.leader().as_deref() == Some("r2"));

    let contract = world.wait_contract("B's contract", |c| c["offerID"] == B.0);
    let node = node_of(&contract);
    world.wait_running("web", 10, |n| n == node);
    let settled = world.wait_autoscaler("nothing in flight", |m| {
        m["status"]["inFlight"].as_array().is_none_or(Vec::is_empty)
    });
    assert_eq!(
        world.bought(),
        [(B.0.to_string(), B.1.to_string(), true)],
        "exactly one contract"
    );
    assert_eq!(
        world.purchases().keys().collect::<Vec<_>>(),
        [&format!("{NAME}-1")],
        "one Purchase, the one r1 named"
    );
    assert_eq!(settled["status"]["purchasesMade"], 1, "{settled:#}");
}

#[test]
fn a_leader_killed_after_recording_a_purchase_leaves_it_to_the_next_which_buys_once() {
    killed_mid_purchase("after-status-write");
}

#[test]
fn a_leader_killed_after_creating_a_purchase_leaves_it_to_the_next_which_buys_once() {
    killed_mid_purchase("after-purchase-create");
}

#[test]
fn a_leader_killed_once_its_purchase_is_ready_leaves_one_contract() {
    killed_mid_purchase("after-ready");
}

#[test]
fn a_leader_killed_while_giving_back_leaves_the_cancellation_to_the_next() {
    let world = World::open();
    world.deployment("web", 10, "600m", json!({}));
    world.wait_unschedulable("web", 10);
    world.create_autoscaler(json!({}));
    let (mut armed, _standby) = leader_armed_then_standby(&world, "before-cancel");
    let contract = world.wait_contract("B's contract", |c| c["offerID"] == B.0);
    let node = node_of(&contract);
    world.wait_running("web", 10, |n| n == node);
    assert_eq!(world.leader().as_deref(), Some("r1"), "r1 bought");

    // Idle: r1 gives the node back and stops before cancelling.
    world.delete_deployment("web");
    let stopped = exit_of(&mut armed);
    assert_eq!(
        stopped.code(),
        Some(STOPPED_AT_FAILPOINT),
        "r1 did not stop before cancelling"
    );
    let id = contract["id"].as_str().unwrap().to_string();
    assert_eq!(
        world.contract(&id)["active"],
        true,
        "cancelled before the failpoint"
    );

    // r2 cancels it, once, and the Purchase goes.
    wait_until("r2 leads", || world.leader().as_deref() == Some("r2"));
    let ended = e2e::contracts::wait_for("the contract cancelled", || {
        let c = world.contract(&id);
        (c["ended"] == "cancelled").then_some(c)
    });
    wait_until("the Purchase deleted", || world.purchases().is_empty());
    wait_until("the virtual node gone", || {
        !world.virtual_nodes().contains(&node)
    });
    assert_eq!(
        world.bought(),
        [(B.0.to_string(), B.1.to_string(), false)],
        "{ended:#}"
    );
}
