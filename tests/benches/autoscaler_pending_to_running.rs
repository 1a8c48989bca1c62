//! A pod's wait from Pending to Running when the market autoscaler has to
//! act, on the world of the autoscaler's end-to-end tests
//! (`tests/tests/e2e/autoscaler_support.rs`, issue 42): the real catalog,
//! `market-autoscaler`, `purchase-controller --auto-peer`,
//! `peering-user-controller` and class controller, two HTTPS test API
//! servers with the model of Liqo v1.2 (offloading, scheduler, virtual
//! kubelet, the provider's kubelet) and the test API server's Deployment
//! and ReplicaSet controllers.
//!
//! Per iteration, a fresh world and a MarketAutoscaler (scan 1 s, batch
//! 100 ms idle / 1 s max, as the tests run it), then:
//! - **first purchase** (no peering yet): a Deployment of one pod
//!   (600m) is created; timed until a pod of it is Running on the
//!   virtual node of the contract the autoscaler bought (the pod waits,
//!   the autoscaler batches, decides, makes the Purchase; the
//!   purchase-controller buys, peers, asks for the slice; Liqo makes the
//!   virtual node; the autoscaler recreates the waiting pod through its
//!   owner; the scheduler binds it; the virtual kubelet reflects it; the
//!   provider's kubelet runs it; its status comes back);
//! - **room on a bought node**: the Deployment scaled to two; timed until
//!   the second pod is Running (the new pod is made through Liqo's
//!   webhook, so the scheduler binds it to the bought node at once:
//!   nothing is bought, the autoscaler has nothing to do).
//!
//! Prints the wall times (median, min, max) for docs/benchmarks.md.
//!
//! `cargo bench --profile dev -p e2e --bench autoscaler_pending_to_running`
//! after `cargo build --workspace --bins --locked` (the binaries of the
//! bench's own profile are started); `BENCH_ITERATIONS=N` (default 5).

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

// The world is the end-to-end tests' own, compiled in here unchanged;
// what this bench does not use of it is dead code here only.
#[allow(dead_code)]
#[path = "../tests/e2e/autoscaler_support.rs"]
mod autoscaler_support;
#[allow(dead_code)]
#[path = "../tests/e2e/liqo_support.rs"]
mod liqo_support;
#[allow(dead_code)]
#[path = "../tests/e2e/purchase_controller_ha.rs"]
mod purchase_controller_ha;
#[allow(dead_code)]
#[path = "../tests/e2e/purchase_controller_support.rs"]
mod purchase_controller_support;

use std::time::{Duration, Instant};

use autoscaler_support::{node_of, World};
use serde_json::json;

/// Bounds each wait; measures nothing.
const BOUND: Duration = Duration::from_secs(60);
/// How often the pods are looked at (in process: not an API call).
const POLL: Duration = Duration::from_millis(5);

fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let (mut first, mut room) = (Vec::new(), Vec::new());
    for i in 0..iterations {
        let world = World::open();
        world.create_autoscaler(json!({}));
        let (_autoscaler, _port) = world.start_autoscaler();
        let start = Instant::now();
        world.deployment("web", 1, "600m", json!({}));
        let a = running(&world, 1, start);
        // The node is the bought contract's.
        let contracts = world.contracts();
        assert_eq!(contracts.len(), 1, "{contracts:#?}");
        let node = node_of(&contracts[0]);
        assert!(world
            .pods("web")
            .iter()
            .all(|p| p["spec"]["nodeName"] == node.as_str()));
        let start = Instant::now();
        world.scale("web", 2);
        let b = running(&world, 2, start);
        assert_eq!(world.contracts().len(), 1, "bought for a pod that had room");
        eprintln!(
            "iteration {i}: first purchase {:.3} s; room on a bought node {:.3} s",
            a.as_secs_f64(),
            b.as_secs_f64()
        );
        first.push(a);
        room.push(b);
    }
    report(
        "pod Pending → Running, first purchase (new peering)",
        &mut first,
    );
    report("pod Pending → Running, room on a bought node", &mut room);
}

/// Wait until `n` pods of the Deployment are Running; the time since `start`.
fn running(world: &World, n: usize, start: Instant) -> Duration {
    loop {
        let pods = world.pods("web");
        let up = pods
            .iter()
            .filter(|p| {
                p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
            })
            .count();
        if up == n {
            return start.elapsed();
        }
        assert!(start.elapsed() < BOUND, "{n} pods not Running: {pods:#?}");
        std::thread::sleep(POLL);
    }
}

/// Print the wall times as markdown.
fn report(what: &str, walls: &mut [Duration]) {
    walls.sort();
    let n = walls.len();
    if n == 0 {
        return;
    }
    let secs = |d: Duration| d.as_secs_f64();
    let median = if n % 2 == 1 {
        secs(walls[n / 2])
    } else {
        (secs(walls[n / 2 - 1]) + secs(walls[n / 2])) / 2.0
    };
    println!(
        "| {what} | {median:.3} s ({:.3}–{:.3} s) | {n} |",
        secs(walls[0]),
        secs(walls[n - 1])
    );
}
