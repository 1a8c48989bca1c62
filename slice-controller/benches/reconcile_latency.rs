//! Reconcile latency and the controller's memory, chain change → status
//! written, at several sizes (default 100, 300 and 1,000 slices: the test
//! API server's cost grows as the square of its objects, docs/benchmarks.md).
//!
//! For each size N, a fresh test API server (Liqo v1.2.0 CRDs) holds N/10
//! consumers with 10 authenticated slices of class `bench` each, every
//! slice asking `cpu: 1`. The controller runs in this process (`fit`,
//! `--on-shrink follow`, no leader election) over a memory source, on a
//! runtime of its own (two workers), so that its heap can be told apart
//! (support/controller_heap.rs). Each round flips the chain's answer
//! between `cpu: 5` and `cpu: 10`, which flips 5 slices of every consumer
//! (N/2 slices): growing grants the ones refused, shrinking revokes 5
//! granted ones (under `follow` a revoked slice stays `Accepted` with every
//! resource at 0 and cordoned, two writes: status and annotation). A watch
//! on the slices notes when each flipped slice reaches its new state; its
//! latency is that time minus the moment the chain changed. Reported per size: p50, p99 and max
//! over every flipped slice of every round, a whole round's time (median
//! and worst), the first decision of all N slices, and the controller's
//! heap (bytes its runtime allocated and still holds after the rounds, and
//! its peak) beside the whole process's RSS (which includes the API
//! server).
//!
//! `cargo bench -p slice-controller --bench reconcile_latency`
//! (`SIZES=100,300,1000` the slice counts, multiples of 10; `ROUNDS=N`
//! rounds per size, default 4; `CONCURRENCY=N` the controller's
//! `--concurrency`; `BENCH_LOG=DIRECTIVES` logs the controller and the
//! API server to stderr).

#[path = "support/controller_heap.rs"]
mod controller_heap;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_support::requests::{self, summary};
use bench_support::units::{mib, ms};
use bench_support::{measure, percentile};
use controller_core::liqo::{CORDON_ANNOTATION, NOT_CORDONED_VALUES, RESOURCES_CONDITION};
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config, ResourceExt};
use kube_test_server::{AuditRecord, KubeApiServer};
use quantity::ResourceList;
use resource_reader::MemorySource;
use resource_reader::ResourceReader;
use serde_json::json;
use slice_controller::config::ControllerArgs;
use slice_controller::model::{ConditionStatus, ResourceSlice};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static HEAP: controller_heap::Tagged = controller_heap::Tagged;

const PER_CONSUMER: usize = 10;
/// Who the controller is to the API server (RBAC off: the bench measures
/// the work, not the permissions), so that its requests can be counted.
const CONTROLLER_USER: &str = "bench:slice-controller";
/// The name of the controller's threads (its CPU time is theirs).
const CONTROLLER_THREAD: &str = "slice-ctl";
const CLASS: &str = "bench";
/// A round or the first decision that sees no status for this long has
/// stalled: the bench stops rather than hang.
const STALL: Duration = Duration::from_secs(120);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn cpu(n: &str) -> ResourceList {
    ResourceList::from_strings([("cpu", n)]).unwrap_or_default()
}

/// A slice's decision as the consumer sees it. Under `--on-shrink follow`
/// with `fit`, a slice that no longer fits is revoked, not denied: it stays
/// `Accepted` with every resource at 0 and cordoned (`liqo.io/cordon`), and
/// a later grant lifts the cordon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decided {
    Granted,
    Refused,
}

/// `None` while undecided, or between the two writes of a revocation or
/// of its lifting (status and annotation).
fn decided(slice: &ResourceSlice) -> Option<Decided> {
    let status = slice.condition(RESOURCES_CONDITION)?.status?;
    let cordoned = slice
        .annotations()
        .get(CORDON_ANNOTATION)
        .is_some_and(|v| !NOT_CORDONED_VALUES.contains(&v.as_str()));
    let zero = slice
        .status
        .as_ref()
        .and_then(|s| s["resources"]["cpu"].as_str())
        .is_none_or(|cpu| {
            cpu.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<f64>()
                .is_ok_and(|n| n == 0.0)
        });
    match (status, cordoned, zero) {
        (ConditionStatus::Denied, _, _) => Some(Decided::Refused),
        (ConditionStatus::Accepted, false, false) => Some(Decided::Granted),
        (ConditionStatus::Accepted, true, true) => Some(Decided::Refused),
        _ => None,
    }
}

/// The `p` percentile (a fraction) of `sorted`, zero when empty.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    percentile(sorted, p).unwrap_or_default()
}

/// CPU seconds so far of the controller's threads and of this whole
/// process (the API server, the controller, the bench's watch).
fn cpu_seconds() -> Result<(f64, f64)> {
    Ok((
        measure::cpu_of_threads(CONTROLLER_THREAD)?.as_secs_f64(),
        measure::cpu_of(std::process::id())?.as_secs_f64(),
    ))
}

/// As the tests' own user (in system:masters): a client without
/// credentials is `system:anonymous`, whom the server refuses.
fn client_of(url: &str, token: &str) -> Result<Client> {
    let mut config = Config::new(url.parse()?);
    config.auth_info.token = Some(token.to_string().into());
    Ok(Client::try_from(config)?)
}

fn controller_args() -> Result<ControllerArgs> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        controller: ControllerArgs,
    }
    // `CONCURRENCY=N`: the controller's `--concurrency` (consumers at
    // once), its default otherwise.
    let concurrency = std::env::var("CONCURRENCY").ok();
    let concurrency = concurrency
        .iter()
        .flat_map(|n| ["--concurrency", n.as_str()]);
    Ok(Cli::try_parse_from(
        [
            "bench",
            "--class",
            CLASS,
            "--grant-policy",
            "fit",
            "--on-shrink",
            "follow",
            "--leader-elect",
            "false",
            "--http-listen",
            "127.0.0.1:0",
        ]
        .into_iter()
        .chain(concurrency),
    )?
    .controller)
}

/// The controller on a runtime of its own, whose threads' allocations are
/// the controller's; the runtime (and what its tasks hold) is gone when
/// the thread ends.
fn start_controller(
    url: String,
    token: String,
    reader: Arc<dyn ResourceReader>,
    args: ControllerArgs,
    shutdown: CancellationToken,
) -> std::io::Result<std::thread::JoinHandle<std::result::Result<(), String>>> {
    std::thread::Builder::new()
        .name(CONTROLLER_THREAD.to_string())
        .spawn(move || {
            controller_heap::enter_controller();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(CONTROLLER_THREAD)
                .enable_all()
                .on_thread_start(controller_heap::enter_controller)
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let client = client_of(&url, &token).map_err(|e| e.to_string())?;
                slice_controller::config::run(client, reader, &args, shutdown)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
}

/// Every slice's last status seen, with the counts kept as they change:
/// checking "settled" after each event costs nothing at 10,000 slices.
#[derive(Default)]
struct Statuses {
    of: HashMap<String, Option<Decided>>,
    granted: usize,
    refused: usize,
}

impl Statuses {
    fn count(&mut self, status: Option<Decided>, up: bool) {
        let n = match status {
            Some(Decided::Granted) => &mut self.granted,
            Some(Decided::Refused) => &mut self.refused,
            None => return,
        };
        if up {
            *n += 1;
        } else {
            *n -= 1;
        }
    }

    /// Note `key`'s status; whether it changed.
    fn set(&mut self, key: String, status: Option<Decided>) -> bool {
        match self.of.insert(key, status) {
            Some(before) if before == status => false,
            before => {
                if let Some(before) = before {
                    self.count(before, false);
                }
                self.count(status, true);
                true
            }
        }
    }

    /// All `total` decided, `granted` of them granted.
    fn settled(&self, total: usize, granted: usize) -> bool {
        self.granted == granted && self.granted + self.refused == total
    }
}

/// The controller's requests among `records`, as (`verb resource`,
/// count), most first.
fn requests_by_kind(records: &[AuditRecord]) -> Vec<(String, usize)> {
    requests::by_kind(AuditRecord::kinds_of(records, CONTROLLER_USER))
}

/// What one size measured.
struct Figures {
    slices: usize,
    initial: Duration,
    rounds: Vec<Duration>,
    latencies: Vec<Duration>,
    /// The controller's API requests in each round.
    requests: Vec<Vec<(String, usize)>>,
    /// CPU seconds of each round: the controller's threads, the whole
    /// process (API server, controller, the bench's watch).
    cpu_rounds: Vec<(f64, f64)>,
    initial_cpu: (f64, f64),
    /// Controller heap after the rounds, its peak, and what was left once
    /// its runtime ended (bytes).
    heap_live: usize,
    heap_peak: usize,
    heap_left: usize,
    /// The whole process's VmRSS after the rounds (API server included).
    process_rss: u64,
}

impl Figures {
    /// Mean CPU seconds of a round: the controller's, the whole process's.
    fn cpu_per_round(&self) -> (f64, f64) {
        let n = self.cpu_rounds.len().max(1) as f64;
        let (c, p) = self
            .cpu_rounds
            .iter()
            .fold((0.0, 0.0), |(c, p), (dc, dp)| (c + dc, p + dp));
        (c / n, p / n)
    }
}

async fn one_size(total: usize, rounds: usize) -> Result<Figures> {
    let consumers = total / PER_CONSUMER;
    let kube = KubeApiServer::start().await.map_err(|e| e.to_string())?;
    kube.set_rbac(false);
    let started = Instant::now();
    for c in 0..consumers {
        let consumer = format!("consumer-{c:05}");
        let namespace = format!("liqo-tenant-{consumer}");
        kube.apply(
            ("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        );
        kube.apply(
            ("authentication.liqo.io", "tenants"),
            json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
                   "metadata": {"name": consumer, "namespace": namespace, "labels": {"liqo.io/remote-cluster-id": consumer}},
                   "spec": {"clusterID": consumer, "tenantCondition": "Active"}}),
        );
        for s in 0..PER_CONSUMER {
            kube.apply(
                ("authentication.liqo.io", "resourceslices"),
                json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                       "metadata": {"name": format!("slice-{s:02}"), "namespace": namespace,
                                    "labels": {"liqo.io/replicated": "true", "liqo.io/originID": consumer}},
                       "spec": {"class": CLASS, "consumerClusterID": consumer, "resources": {"cpu": "1"}},
                       "status": {"conditions": [{"type": "Authentication", "status": "Accepted",
                           "reason": "ResourceSliceAuthenticationAccepted", "message": "ResourceSlice authentication accepted",
                           "lastTransitionTime": "2026-11-20T08:00:00Z"}],
                           "authParams": {"ca": "Q0E=", "signedCRT": "Q1JU", "apiServer": "https://p:6443"}}}),
            );
        }
    }
    let created = started.elapsed();
    eprintln!("[{total}] {total} slices, {consumers} consumers created in {created:?}");

    let client = client_of(&kube.url(), kube.admin_token())?;
    let source = Arc::new(MemorySource::new(cpu("5")));
    let shutdown = CancellationToken::new();
    let heap_before = controller_heap::live();
    controller_heap::reset_peak();
    let controller = start_controller(
        kube.url(),
        kube.token_for(CONTROLLER_USER),
        source.clone(),
        controller_args()?,
        shutdown.clone(),
    )?;

    // Follow every slice's Resources status as written.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch = tokio::spawn({
        let api: Api<ResourceSlice> = Api::all(client.clone());
        async move {
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(slice)) = events.next().await {
                let _ = tx.send((Instant::now(), slice.key(), decided(&slice)));
            }
        }
    });

    let mut current = Statuses::default();
    // Initial decisions: 5 of 10 accepted per consumer.
    let cpu_before = cpu_seconds()?;
    let first = Instant::now();
    // Progress every 10 s: where a slow first decision spends its time
    // (decided slices against CPU spent) shows in the timeline.
    let mut progress = tokio::time::interval(Duration::from_secs(10));
    progress.tick().await;
    let mut last_event = Instant::now();
    while !current.settled(total, total / 2) {
        let next = tokio::select! {
            next = rx.recv() => next,
            _ = progress.tick() => {
                if last_event.elapsed() > STALL {
                    return Err(format!("[{total}] the first decision stalled").into());
                }
                // Only a timeline: a process out of file descriptors (the
                // controller's connections, before `--concurrency`) says
                // so here and carries on.
                let cpu = match cpu_seconds() {
                    Ok(now) => format!(
                        "controller {:.2} s, whole process {:.2} s",
                        now.0 - cpu_before.0,
                        now.1 - cpu_before.1
                    ),
                    Err(e) => format!("unreadable ({e})"),
                };
                eprintln!(
                    "[{total}] first decision, {:.0?}: {} granted, {} refused of {total}; CPU: {cpu}",
                    first.elapsed(), current.granted, current.refused,
                );
                continue;
            }
        };
        let Some((_, key, status)) = next else {
            return Err("the watch ended".into());
        };
        last_event = Instant::now();
        current.set(key, status);
    }
    let initial = first.elapsed();
    let cpu_after = cpu_seconds()?;
    let initial_cpu = (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1);
    eprintln!(
        "[{total}] initial decisions of {total} slices in {initial:?}; CPU: controller {:.2} s, whole process {:.2} s",
        initial_cpu.0, initial_cpu.1
    );

    let mut latencies = Vec::new();
    let mut round_times = Vec::new();
    let mut requests = Vec::new();
    let mut cpu_rounds = Vec::new();
    for round in 0..rounds {
        let grow = round.is_multiple_of(2);
        let expect_accepted = if grow { total } else { total / 2 };
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Ok((_, key, status)) = rx.try_recv() {
            current.set(key, status);
        }
        let mark = kube.audit().len();
        let (controller_before, process_before) = cpu_seconds()?;
        let changed = Instant::now();
        source.set(cpu(if grow { "10" } else { "5" }));
        let mut flipped = 0;
        while !current.settled(total, expect_accepted) {
            let Ok(Some((at, key, status))) = tokio::time::timeout(STALL, rx.recv()).await else {
                return Err(format!(
                    "[{total}] round {round} stalled: {} granted and {} refused of {total}, {expect_accepted} granted awaited",
                    current.granted, current.refused
                )
                .into());
            };
            if current.set(key, status) {
                latencies.push(at.duration_since(changed));
                flipped += 1;
            }
        }
        let took = changed.elapsed();
        round_times.push(took);
        let (controller_after, process_after) = cpu_seconds()?;
        let ctl_cpu = controller_after - controller_before;
        let all_cpu = process_after - process_before;
        cpu_rounds.push((ctl_cpu, all_cpu));
        let made = requests_by_kind(&kube.audit()[mark..]);
        eprintln!(
            "[{total}] round {round}: {flipped} slices flipped in {took:?}; CPU: controller {ctl_cpu:.2} s, whole process {all_cpu:.2} s; the controller's API requests: {}",
            summary(&made)
        );
        requests.push(made);
    }
    let heap_live = controller_heap::live().saturating_sub(heap_before);
    let heap_peak = controller_heap::peak().saturating_sub(heap_before);
    let process_rss = measure::rss_kib(std::process::id())? * 1024;
    shutdown.cancel();
    let ended = tokio::task::spawn_blocking(move || controller.join()).await?;
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("the controller failed: {e}").into()),
        Err(_) => return Err("the controller's thread panicked".into()),
    }
    let heap_left = controller_heap::live().saturating_sub(heap_before);
    watch.abort();
    drop(kube);
    latencies.sort();
    round_times.sort();
    Ok(Figures {
        slices: total,
        initial,
        rounds: round_times,
        latencies,
        requests,
        cpu_rounds,
        initial_cpu,
        heap_live,
        heap_peak,
        heap_left,
        process_rss,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    // `BENCH_LOG=info,slice_controller=debug` (tracing directives): the
    // controller's and the API server's logs on stderr, timestamped.
    if let Ok(level) = std::env::var("BENCH_LOG") {
        edge::log::init(edge::log::LogFormat::Text, &level);
    }
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let sizes: Vec<usize> = std::env::var("SIZES")
        .unwrap_or_else(|_| "100,300,1000".to_string())
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("SIZES: a comma-separated list of slice counts: {e}"))?;
    if let Some(bad) = sizes
        .iter()
        .find(|n| **n == 0 || !n.is_multiple_of(PER_CONSUMER))
    {
        return Err(format!("SIZES: {bad} is not a positive multiple of {PER_CONSUMER}").into());
    }
    let mut all = Vec::new();
    for &total in &sizes {
        let f = one_size(total, rounds).await?;
        let (ctl_cpu, all_cpu) = f.cpu_per_round();
        println!(
            "reconcile latency, chain change -> status written ({} slices, {} consumers, {} flips over {rounds} rounds): \
             p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; whole round ({} slices) median {:.1} ms, worst {:.1} ms; \
             CPU per round: controller {:.2} s, whole process {:.2} s; \
             first decision of all {:.0} ms (CPU: controller {:.2} s, whole process {:.2} s); \
             controller heap {:.1} MiB after the rounds, peak {:.1} MiB, {:.2} MiB left after stop; \
             process RSS {:.0} MiB; the controller's API requests in the last round: {}",
            f.slices,
            f.slices / PER_CONSUMER,
            f.latencies.len(),
            ms(pct(&f.latencies, 0.50)),
            ms(pct(&f.latencies, 0.99)),
            ms(f.latencies.last().copied().unwrap_or_default()),
            f.slices / 2,
            ms(pct(&f.rounds, 0.50)),
            ms(f.rounds.last().copied().unwrap_or_default()),
            ctl_cpu,
            all_cpu,
            ms(f.initial),
            f.initial_cpu.0,
            f.initial_cpu.1,
            mib(f.heap_live as u64),
            mib(f.heap_peak as u64),
            mib(f.heap_left as u64),
            mib(f.process_rss),
            f.requests
                .last()
                .map(|r| summary(r.as_slice()))
                .unwrap_or_default(),
        );
        all.push(f);
    }
    println!();
    println!("| slices | first decision | round median | round worst | controller CPU per round | whole process CPU per round | controller heap after | peak | per slice (peak) | process RSS |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &all {
        let (ctl_cpu, all_cpu) = f.cpu_per_round();
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} s | {:.2} s | {:.1} MiB | {:.1} MiB | {:.1} KiB | {:.0} MiB |",
            f.slices,
            ms(f.initial),
            ms(pct(&f.rounds, 0.50)),
            ms(f.rounds.last().copied().unwrap_or_default()),
            ctl_cpu,
            all_cpu,
            mib(f.heap_live as u64),
            mib(f.heap_peak as u64),
            f.heap_peak as f64 / 1024.0 / f.slices as f64,
            mib(f.process_rss),
        );
    }
    Ok(())
}
