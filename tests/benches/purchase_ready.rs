//! From the catalog purchase of a contract to its VirtualNode Ready, with
//! the controllers' shipped defaults (contracts on the catalog's change
//! stream, polling only as the fallback; issue 44), on the test world
//! of `purchase_controller_ha` (issue 31): the real catalog,
//! `purchase-controller` (every flag at its default: `--auto-peer` and
//! `--networking` on), `peering-user-controller` and class controller
//! (`resource-monitor --liqo-api v1`), two HTTPS test API servers with the
//! model of Liqo v1.2, its authentication and networking modules. Per
//! iteration, a fresh world: the first Purchase (no peering yet), then a
//! second Purchase of the same provider (already peered). Prints the wall
//! times (median, min, max) and the API calls each test API server
//! answered meanwhile, by user, verb and resource, for docs/benchmarks.md.
//! The controller's own start (its watches, the Lease) is counted apart:
//! the sale waits until the controller has settled.
//!
//! The figures say what this world costs, not what real clusters cost: no
//! network, no etcd, no WireGuard, the model of Liqo instead of Liqo.
//!
//! `cargo bench --profile dev -p e2e --bench purchase_ready` after
//! `cargo build --workspace --bins`
//! (the binaries of the bench's own profile are started);
//! `BENCH_ITERATIONS=N` (default 5).

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

// The world is the end-to-end tests' own, compiled in here unchanged;
// what this bench does not use of it is dead code here only.
#[allow(dead_code)]
#[path = "../tests/e2e/liqo_stand_in.rs"]
mod liqo_stand_in;
#[allow(dead_code)]
#[path = "../tests/e2e/liqo_support.rs"]
mod liqo_support;
#[allow(dead_code)]
#[path = "../tests/e2e/purchase_controller_ha.rs"]
mod purchase_controller_ha;
#[allow(dead_code)]
#[path = "../tests/e2e/purchase_controller_support.rs"]
mod purchase_controller_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube_test_server::{AuditRecord, KubeApiServer};
use purchase_controller_ha::AutoPeerWorld;

/// Bounds each wait; measures nothing.
const BOUND: Duration = Duration::from_secs(30);
/// How often Ready is looked for (in process: not an API call).
const POLL: Duration = Duration::from_millis(5);

/// Calls counted by `(server, user, "verb group/resource[/sub]")`.
type Calls = BTreeMap<(&'static str, String, String), usize>;

/// One purchase's figures.
struct Run {
    wall: Duration,
    calls: Calls,
}

fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let mut start = Vec::new();
    for i in 0..iterations {
        let mut world = AutoPeerWorld::open();
        // The chart installs the MultiClusterNetworkPolicy CRD beside the
        // controller (charts/liqo-broker/templates/purchase-controller/
        // mcnp-crd.yaml): with it, the network-policy loop runs as shipped.
        world
            .consumer
            .kube
            .register_crd_file(
                &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../deploy/kubernetes/purchase-controller/mcnp-crd.yaml"),
            )
            .unwrap();
        world.start_consumer_liqo();
        let mark = world.consumer.kube.audit().len();
        let _controller = world
            .controller_shipped()
            .arg("--kubeconfig")
            .arg(&world.consumer.kubeconfig)
            .start_announced(1)
            .unwrap();
        settle(&world.consumer.kube);
        let mut calls = Calls::new();
        count("consumer", &world.consumer.kube, mark, &mut calls);
        calls.retain(|(_, user, _), _| user == CONTROLLER);
        start.push(Run {
            wall: Duration::ZERO,
            calls,
        });
        let a = purchase(&world, "first");
        let b = purchase(&world, "second");
        eprintln!(
            "iteration {i}: first {:.3} s, {} calls; already peered {:.3} s, {} calls",
            a.wall.as_secs_f64(),
            a.calls.values().sum::<usize>(),
            b.wall.as_secs_f64(),
            b.calls.values().sum::<usize>(),
        );
        first.push(a);
        second.push(b);
    }
    report(
        "the controller's start, before the sale (wall time not measured)",
        &start,
    );
    report("first purchase (no peering yet)", &first);
    report("second purchase, same provider (already peered)", &second);
}

/// The purchase-controller, as the consumer's API server names it.
const CONTROLLER: &str = "system:serviceaccount:liqo:purchase-controller";
/// How long the controller must make no call to be taken as started.
const QUIET: Duration = Duration::from_secs(1);

/// Wait until the purchase-controller has made no API call for [`QUIET`]:
/// its start (watches listing, the Lease taken, the network-policy loop's
/// first pass) is then over, and the calls counted from the sale on are
/// the purchase's (and whatever periodic calls fall in its window: the
/// Lease's renewals). Measures nothing.
fn settle(kube: &KubeApiServer) {
    let started = Instant::now();
    let calls = || {
        kube.audit()
            .iter()
            .filter(|r| r.user.as_deref() == Some(CONTROLLER))
            .count()
    };
    let (mut seen, mut since) = (calls(), Instant::now());
    while since.elapsed() < QUIET {
        assert!(started.elapsed() < BOUND, "the controller never settled");
        std::thread::sleep(POLL);
        let now = calls();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
    }
}

/// Buy a contract, then create Purchase `name` of it and wait for its
/// virtual node to be Ready; the wall time and the calls both servers
/// answered from the catalog purchase on (the provider's peering user
/// attached meanwhile, as its controller learns of the contract on the
/// stream, is in both).
fn purchase(world: &AutoPeerWorld, name: &str) -> Run {
    let servers = [
        ("consumer", &*world.consumer.kube),
        ("provider", &*world.provider.kube),
    ];
    let marks = servers.map(|(_, kube)| kube.audit().len());
    let start = Instant::now();
    // The Purchase right after the sale: its controller waits for the
    // peering credentials, woken by the contract stream when they come.
    let contract = world.market.buy(
        &world.alice,
        "small",
        serde_json::json!({"consumerClusterID": purchase_controller_support::CONSUMER_ID}),
    );
    let id = contract["id"].as_str().expect("contract id").to_string();
    world.purchase(name, &id);
    while !world.virtual_node_ready(&id) {
        assert!(start.elapsed() < BOUND, "{name}: no Ready virtual node");
        std::thread::sleep(POLL);
    }
    let wall = start.elapsed();
    let mut calls = Calls::new();
    for ((server, kube), mark) in servers.iter().zip(marks) {
        count(server, kube, mark, &mut calls);
    }
    Run { wall, calls }
}

/// Add the calls `kube` answered after the first `mark` to `calls`.
fn count(server: &'static str, kube: &KubeApiServer, mark: usize, calls: &mut Calls) {
    for record in kube.audit().into_iter().skip(mark) {
        let user = record.user.as_deref().map_or("(refused)".into(), who);
        *calls.entry((server, user, call(&record))).or_default() += 1;
    }
}

/// A user as the tables name it: a peering user's certificate CN ends in a
/// fresh random suffix per world, so it is cut off to add up across runs.
fn who(user: &str) -> String {
    match user.strip_prefix("liqo-peer-user-") {
        Some(rest) => match rest.rsplit_once('-') {
            Some((consumer, _)) => format!("liqo-peer-user-{consumer}-…"),
            None => user.to_string(),
        },
        None => user.to_string(),
    }
}

/// `verb group/resource[/subresource]`, or the method and path of a
/// non-resource request (discovery).
fn call(record: &AuditRecord) -> String {
    match &record.resource {
        Some(r) if r.api_group.is_empty() => format!("{} {}", r.verb, r.rbac_resource()),
        Some(r) => format!("{} {}/{}", r.verb, r.api_group, r.rbac_resource()),
        None => format!("{} {}", record.verb, record.path),
    }
}

/// Print the wall times and the mean calls per purchase as markdown.
fn report(what: &str, runs: &[Run]) {
    let mut walls: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64()).collect();
    walls.sort_by(f64::total_cmp);
    let n = walls.len();
    if n == 0 {
        return;
    }
    let median = if n % 2 == 1 {
        walls[n / 2]
    } else {
        (walls[n / 2 - 1] + walls[n / 2]) / 2.0
    };
    println!("\n### {what}\n");
    println!(
        "{n} runs: median {median:.3} s, min {:.3} s, max {:.3} s\n",
        walls[0],
        walls[n - 1]
    );
    let mut total = Calls::new();
    for run in runs {
        for (key, count) in &run.calls {
            *total.entry(key.clone()).or_default() += count;
        }
    }
    let per_server = |server: &str| -> usize {
        total
            .iter()
            .filter(|((s, _, _), _)| *s == server)
            .map(|(_, c)| c)
            .sum()
    };
    println!(
        "mean calls per purchase: consumer {:.1}, provider {:.1}\n",
        per_server("consumer") as f64 / n as f64,
        per_server("provider") as f64 / n as f64
    );
    let mut by_user = BTreeMap::<(&str, &str), usize>::new();
    for ((server, user, _), count) in &total {
        *by_user.entry((server, user)).or_default() += count;
    }
    println!("| server | user | calls, mean per purchase |");
    println!("|---|---|---:|");
    for ((server, user), count) in &by_user {
        println!("| {server} | `{user}` | {:.1} |", *count as f64 / n as f64);
    }
    println!();
    println!("| server | user | call | mean per purchase |");
    println!("|---|---|---|---:|");
    for ((server, user, call), count) in &total {
        println!(
            "| {server} | `{user}` | `{call}` | {:.1} |",
            *count as f64 / n as f64
        );
    }
}
