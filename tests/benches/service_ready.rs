//! From a service provisioning request to a bound service, phase by phase,
//! on the test world of `service_controller` (issue 32): the real catalog,
//! `service-controller` and `purchase-controller` on both clusters, two
//! HTTPS test API servers with the model of Liqo v1.2 (authentication,
//! offloading, reflection). Per iteration, a fresh world: a first
//! instance (`Remote`: the provider peers towards the customer first),
//! then a second one over the same peering (`Local`, already peered), each
//! then bound. The phases, as the thesis' Table 7.1 splits them (issue 45):
//!
//! - **peering**: the platform's provisioning request → Liqo offloaded the
//!   instance namespace to the customer (its `NamespaceOffloading` at the
//!   provider names the remote namespace): bought, peered, offloaded;
//! - **creation**: → `last_operation` `succeeded` (the objects rendered,
//!   applied and reported);
//! - **binding**: the bind request → the binding's `last_operation`
//!   `succeeded` (the provider made the credentials and reported them);
//!   and, beside it, → the credentials Secret copied into the customer's
//!   application namespace by its purchase-controller.
//!
//! Each phase's end is sampled every [`SAMPLE`] (the catalog over HTTP, the
//! API servers in process), so figures carry up to that much on top. Prints
//! each phase's median, min and max and the API calls each test API server
//! answered during the provisioning, for docs/services.md.
//!
//! The figures say what this world costs, not what real clusters cost (the
//! thesis' 10.54 s / 4.42 s / 0.00016 s for a first instance): no network,
//! no etcd, the model of Liqo instead of Liqo; the controllers run at their
//! shipped defaults (contracts on the catalog's stream, Purchases watched).
//!
//! `cargo bench --profile dev -p e2e --bench service_ready` after
//! `cargo build --workspace --bins`; `BENCH_ITERATIONS=N` (default 3).

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

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use purchase_controller_support::{CONSUMER_ID, OFFLOADINGS, SECRETS};
use serde_json::json;
use service_controller::{ServiceWorld, NAMESPACES};

/// How often a phase's end is looked for.
const SAMPLE: Duration = Duration::from_millis(5);

/// The customer's application namespace the bindings' Secrets go to.
const APP: &str = "app";

/// One instance's figures.
struct Run {
    peering: Duration,
    creation: Duration,
    binding: Duration,
    copied: Duration,
    /// API calls on the provider's and the customer's API servers during
    /// the provisioning.
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
        // The customer's namespace for the credentials, opted in for this
        // provider's bindings (as the e2e test does).
        sw.world.remote.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APP,
                   "labels": {"broker.liqo-broker.io/accept-bindings": "true"},
                   "annotations": {"broker.liqo-broker.io/accept-bindings-from": CONSUMER_ID}}}),
        );
        let a = run(&sw, "first", &sw.remote.clone());
        let b = run(&sw, "second", &sw.local.clone());
        for (what, r) in [("first", &a), ("already peered", &b)] {
            eprintln!(
                "iteration {i}, {what}: peering {:.3} s, creation {:.3} s, binding {:.3} s (Secret copied {:.3} s)",
                r.peering.as_secs_f64(),
                r.creation.as_secs_f64(),
                r.binding.as_secs_f64(),
                r.copied.as_secs_f64()
            );
        }
        first.push(a);
        second.push(b);
    }
    println!("\n| instance | peering | creation | binding | Secret copied | provisioning API calls (provider's cluster, customer's) |");
    println!("|---|---:|---:|---:|---:|---|");
    report("first (`Remote`, no peering yet)", &first);
    report("second (`Local`, already peered)", &second);
    println!(
        "\n{} runs each; median (min–max) in seconds; sampled every {} ms.",
        first.len(),
        SAMPLE.as_millis()
    );
}

/// Ask `probe` every [`SAMPLE`] until it returns true; when it did.
fn until(what: &str, mut probe: impl FnMut() -> bool) -> Instant {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        if probe() {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not after {:?}",
            e2e::EVENTUALLY
        );
        std::thread::sleep(SAMPLE);
    }
}

/// The namespaces whose NamespaceOffloading names its remote namespace.
fn offloaded(sw: &ServiceWorld) -> BTreeSet<String> {
    sw.world
        .consumer
        .kube
        .objects(OFFLOADINGS)
        .iter()
        .filter(|o| o["status"]["remoteNamespaceName"].is_string())
        .filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_string))
        .collect()
}

/// The state of an operation as `last_operation` answers it.
fn state(r: &e2e::catalog::Resp) -> Option<String> {
    let state = r.json["state"].as_str()?.to_string();
    assert_ne!(state, "failed", "{}", r.text);
    Some(state)
}

/// Provision `instance` of OSB plan `plan`, then bind it; each phase timed.
fn run(sw: &ServiceWorld, instance: &str, plan: &str) -> Run {
    let servers = [&*sw.world.consumer.kube, &*sw.world.remote];
    let marks = servers.map(|kube| kube.audit().len());
    let before = offloaded(sw);
    let p = &sw.platform;

    let start = Instant::now();
    let answer = sw.provision(instance, plan, json!({}));
    assert_eq!(answer.status, 202, "{}", answer.text);
    let op = answer.json["operation"].as_str().map(str::to_string);
    let peered = until("the instance namespace offloaded", || {
        offloaded(sw).difference(&before).next().is_some()
    });
    let created = until("provisioning succeeded", || {
        state(&p.last_operation(instance, &sw.sid, plan, op.as_deref())).as_deref()
            == Some("succeeded")
    });
    let [provider, customer] = [0, 1].map(|i| servers[i].audit().len() - marks[i]);

    let secret = format!("{instance}-creds");
    let bind = json!({"service_id": sw.sid, "plan_id": plan,
        "parameters": {"namespace": APP, "secretName": secret}});
    let asked = Instant::now();
    let r = p.send(
        reqwest::Method::PUT,
        &format!("/v2/service_instances/{instance}/service_bindings/{instance}-b?accepts_incomplete=true"),
        Some(&bind),
        Some("2.17"),
    );
    assert!(r.status == 202 || r.status == 201, "{}", r.text);
    let bound = until("the binding succeeded", || {
        let r = p.binding_last_operation(instance, &format!("{instance}-b"));
        // A synchronous binding (201) has no operation to poll: bound.
        r.status == 200 && state(&r).as_deref() == Some("succeeded")
    });
    let copied = until("the credentials Secret copied", || {
        sw.world.remote.get(SECRETS, Some(APP), &secret).is_some()
    });
    Run {
        peering: peered - start,
        creation: created.saturating_duration_since(peered),
        binding: bound - asked,
        copied: copied - asked,
        provider,
        customer,
    }
}

fn report(what: &str, runs: &[Run]) {
    if runs.is_empty() {
        return;
    }
    let phase = |f: fn(&Run) -> Duration| {
        let mut all: Vec<Duration> = runs.iter().map(f).collect();
        all.sort();
        format!(
            "{:.3} ({:.3}–{:.3})",
            all[all.len() / 2].as_secs_f64(),
            all[0].as_secs_f64(),
            all[all.len() - 1].as_secs_f64()
        )
    };
    let n = runs.len() as f64;
    let mean = |f: fn(&Run) -> usize| runs.iter().map(f).sum::<usize>() as f64 / n;
    println!(
        "| {what} | {} | {} | {} | {} | {:.1}, {:.1} |",
        phase(|r| r.peering),
        phase(|r| r.creation),
        phase(|r| r.binding),
        phase(|r| r.copied),
        mean(|r| r.provider),
        mean(|r| r.customer),
    );
}
