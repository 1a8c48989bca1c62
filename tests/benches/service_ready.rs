//! From a service provisioning request to `last_operation` `succeeded`, on
//! the test world of `service_controller` (issue 32): the real catalog,
//! `service-controller` and `purchase-controller` on both clusters, two
//! HTTPS test API servers with the model of Liqo v1.2 (authentication,
//! offloading, reflection). Per iteration, a fresh world: a first
//! instance (`Remote`: the provider peers towards the customer first),
//! then a second one over the same peering (`Local`, already peered).
//! Prints the wall times (median, min, max) and the API calls each test
//! API server answered meanwhile, for docs/benchmarks.md.
//!
//! The figures say what this world costs, not what real clusters cost (the
//! thesis' 10.5 s first purchase, 4-6 s already peered, ~4.4 s to create
//! the service): no network, no etcd, the model of Liqo instead of Liqo,
//! and the controllers' poll intervals of the tests (200 ms).
//!
//! `cargo bench --profile dev -p e2e --bench service_ready` after
//! `cargo build --bins -p service-controller -p purchase-controller -p catalog`;
//! `BENCH_ITERATIONS=N` (default 3).

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

// The world is the end-to-end tests' own, compiled in here unchanged.
#[allow(dead_code)]
#[path = "../tests/e2e/liqo_stand_in.rs"]
mod liqo_stand_in;
#[allow(dead_code)]
#[path = "../tests/e2e/liqo_support.rs"]
mod liqo_support;
#[allow(dead_code)]
#[path = "../tests/e2e/purchase_controller_support.rs"]
mod purchase_controller_support;
#[allow(dead_code)]
#[path = "../tests/e2e/service_controller.rs"]
mod service_controller;

use std::time::{Duration, Instant};

use e2e::osb_client::Outcome;
use serde_json::json;
use service_controller::ServiceWorld;

/// One provisioning's figures: wall time, calls on the provider's and the
/// customer's API servers.
struct Run {
    wall: Duration,
    provider: usize,
    customer: usize,
}

fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for i in 0..iterations {
        let sw = ServiceWorld::open();
        let a = provision(&sw, "first", &sw.remote.clone());
        let b = provision(&sw, "second", &sw.local.clone());
        eprintln!(
            "iteration {i}: first {:.3} s; already peered {:.3} s",
            a.wall.as_secs_f64(),
            b.wall.as_secs_f64()
        );
        first.push(a);
        second.push(b);
    }
    report("first instance (Remote, no peering yet)", &mut first);
    report("second instance (Local, already peered)", &mut second);
}

fn provision(sw: &ServiceWorld, instance: &str, plan: &str) -> Run {
    let servers = [&*sw.world.consumer.kube, &*sw.world.remote];
    let marks = servers.map(|kube| kube.audit().len());
    let start = Instant::now();
    let answer = sw.provision(instance, plan, json!({}));
    match sw.settle(instance, plan, &answer) {
        Outcome::Succeeded(_) => {}
        other => panic!("{instance}: {other:?}"),
    }
    let wall = start.elapsed();
    let [provider, customer] = [0, 1].map(|i| servers[i].audit().len() - marks[i]);
    Run {
        wall,
        provider,
        customer,
    }
}

fn report(what: &str, runs: &mut [Run]) {
    if runs.is_empty() {
        return;
    }
    runs.sort_by_key(|r| r.wall);
    let n = runs.len();
    let mean = |f: fn(&Run) -> usize| runs.iter().map(f).sum::<usize>() as f64 / n as f64;
    println!(
        "\n### {what}\n\n{n} runs: median {:.3} s, min {:.3} s, max {:.3} s; mean API calls: provider's cluster {:.1}, customer's {:.1}\n",
        runs[n / 2].wall.as_secs_f64(),
        runs[0].wall.as_secs_f64(),
        runs[n - 1].wall.as_secs_f64(),
        mean(|r| r.provider),
        mean(|r| r.customer),
    );
}
