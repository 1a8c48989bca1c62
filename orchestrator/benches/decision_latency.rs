//! Decision latency and the orchestrator's memory: an offer change in the
//! catalog → the NamespaceOffloadings written, at several sizes (default
//! 30 providers × 300 namespaces, 100 × 1,000 and 200 × 2,000: the test API
//! server's cost grows as the square of its objects, docs/benchmarks.md).
//!
//! The real catalog binary (`CATALOG_BIN`, default `target/release/catalog`,
//! else `target/debug/catalog`) runs on the embedded store; for a size of N
//! namespaces, N/10 providers each publish one offer, provider `i` costing
//! `10 + i` (one catalog for every size: a larger size adds providers). For
//! each size a fresh test API server (Liqo v1.2.0 CRDs) runs in this
//! process with N namespaces offloaded by N/100 consumers, and the real
//! `orchestrator` binary of this build runs as a child process at its
//! shipped defaults (default policy: any provider, one per namespace; no
//! leader election), following the catalog's feed. All N namespaces first
//! go to the cheapest provider. Each round, that provider withdraws its
//! offer (`DELETE /offer/{id}`): every namespace moves to the next
//! cheapest. A kube-rs watch on the NamespaceOffloadings notes when each
//! namespace's new selection arrives; its latency is that moment minus the
//! moment the `DELETE` was sent (so it includes the catalog's write and
//! feed, N decisions, the `PUT`s and Events through the API server, and
//! the watch event back). Reported per size: p50, p99 and max over every
//! namespace of every round, a whole round (median, worst), the first
//! placement, and the orchestrator process's memory from
//! `/proc/<pid>/status` (VmRSS after the rounds, VmHWM its peak).
//!
//! `cargo bench -p orchestrator --bench decision_latency`
//! (`SIZES=300,1000,2000` the namespace counts, multiples of 100;
//! `ROUNDS=N` rounds per size, default 3).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bench_support::bins::workspace_bin;
use bench_support::requests::{self, summary};
use bench_support::units::{mib, ms};
use bench_support::{measure, percentile};
use catalog_client::wire::PeeringCredentials;
use catalog_client::{Http, Login, Session};
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config, ResourceExt};
use kube_test_server::{AuditRecord, KubeApiServer};
use orchestrator::offloading::NamespaceOffloading;
use serde_json::json;

/// Namespaces per provider, and per consumer.
const PER_PROVIDER: usize = 10;
const PER_CONSUMER: usize = 100;
/// Who the orchestrator is to the API server (RBAC off: the bench measures
/// the work, not the permissions), so that its requests can be counted.
const CONTROLLER_USER: &str = "bench:orchestrator";
/// A round or the first placement that sees no selection for this long
/// has stalled: the bench stops rather than hang.
const STALL: Duration = Duration::from_secs(120);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The `p` percentile (a fraction) of `sorted`, zero when empty.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    percentile(sorted, p).unwrap_or_default()
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    Ok(measure::cpu_of(pid)?.as_secs_f64())
}

fn provider(i: usize) -> String {
    format!("provider-{i:04}")
}

fn offer_id(i: usize) -> String {
    format!("offer-{i:04}")
}

/// A child process killed when dropped.
struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every namespace's last selection seen, with how many are on each single
/// provider kept as they change: checking "all moved" after each event
/// costs nothing at 10,000 namespaces.
#[derive(Default)]
struct Selections {
    of: HashMap<String, Vec<String>>,
    on: HashMap<String, usize>,
}

impl Selections {
    fn only(selection: &[String]) -> Option<&String> {
        match selection {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Note `namespace`'s selection.
    fn set(&mut self, namespace: String, selection: Vec<String>) {
        if let Some(p) = Self::only(&selection) {
            *self.on.entry(p.clone()).or_default() += 1;
        }
        if let Some(before) = self.of.insert(namespace, selection) {
            if let Some(n) = Self::only(&before).and_then(|p| self.on.get_mut(p)) {
                *n -= 1;
            }
        }
    }

    fn all_on(&self, total: usize, provider: &str) -> bool {
        self.of.len() == total && self.on.get(provider).copied() == Some(total)
    }
}

/// A provider's session: logged in and its offer published.
async fn publish(http: Http, i: usize) -> Result<Session> {
    let credentials = PeeringCredentials {
        cluster_id: provider(i),
        cluster_name: provider(i),
        auth_url: format!("https://{}.example:6443", provider(i)),
        token: format!("secret-of-{}", provider(i)),
    };
    let mut session = Session::new(
        http,
        Login::Provider {
            credentials,
            file: None,
        },
    );
    put_offer(&mut session, i).await?;
    Ok(session)
}

async fn put_offer(session: &mut Session, i: usize) -> Result<()> {
    let offer = json!({"name": format!("offer {i}"), "type": "compute",
                      "labels": {"region": if i.is_multiple_of(2) { "eu" } else { "us" }},
                      "plans": {"std": {"name": "std", "cost": format!("{}", 10 + i),
                                        "resources": {"cpu": "4", "memory": "8Gi"}}}});
    session.put_offer(&offer_id(i), &offer).await?;
    Ok(())
}

/// The controller's requests among `records`, as (`verb resource`,
/// count), most first.
fn requests_by_kind(records: &[AuditRecord]) -> Vec<(String, usize)> {
    requests::by_kind(AuditRecord::kinds_of(records, CONTROLLER_USER))
}

/// What one size measured.
struct Figures {
    namespaces: usize,
    providers: usize,
    initial: Duration,
    rounds: Vec<Duration>,
    latencies: Vec<Duration>,
    /// The orchestrator's API requests in each round.
    requests: Vec<Vec<(String, usize)>>,
    /// CPU seconds of each round: the orchestrator, this process (the API
    /// server and the bench's watch), the catalog.
    cpu_rounds: Vec<[f64; 3]>,
    /// The orchestrator's VmRSS once placed, after the rounds, and VmHWM.
    rss_placed: u64,
    rss_after: u64,
    hwm: u64,
}

impl Figures {
    /// Mean CPU seconds of a round: orchestrator, API server, catalog.
    fn cpu_per_round(&self) -> [f64; 3] {
        let n = self.cpu_rounds.len().max(1) as f64;
        let mut sum = [0.0; 3];
        for r in &self.cpu_rounds {
            for (s, x) in sum.iter_mut().zip(r) {
                *s += x;
            }
        }
        sum.map(|s| s / n)
    }
}

async fn one_size(
    catalog_pid: u32,
    base: &str,
    sessions: &mut [Session],
    total: usize,
    rounds: usize,
) -> Result<Figures> {
    let providers = total / PER_PROVIDER;
    let consumers = total / PER_CONSUMER;
    // The broker cluster.
    let kube = KubeApiServer::start().await.map_err(|e| e.to_string())?;
    kube.set_rbac(false);
    let started = Instant::now();
    for n in 0..total {
        let consumer = format!("consumer-{}", n % consumers);
        kube.apply(
            ("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("app-{n:05}"),
                "labels": {"liqo.io/remote-cluster-id": consumer},
                "annotations": {"liqo.io/managed-by-namespace-map": format!("liqo-tenant-{consumer}/{consumer}"),
                                "liqo.io/original-name": format!("app-{n:05}")}}}),
        );
    }
    eprintln!(
        "[{total}] {total} namespaces of {consumers} consumers created in {:?}",
        started.elapsed()
    );
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)
        .map_err(|e| e.to_string())?;

    // The orchestrator, at its shipped defaults but for the Lease (one
    // replica) and the probe port (any free one).
    let orchestrator = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args(["--catalog", base, "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--leader-elect", "false", "--http-listen", "127.0.0.1:0"])
            .args(["--instance", "bench"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let pid = orchestrator.0.id();

    let mut config = Config::new(kube.url().parse()?);
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    let client = Client::try_from(config)?;
    // Every namespace's selection as written.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch = tokio::spawn({
        let api: Api<NamespaceOffloading> = Api::all(client.clone());
        async move {
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(o)) = events.next().await {
                let ns = o.namespace().unwrap_or_default();
                let _ = tx.send((Instant::now(), ns, o.selected()));
            }
        }
    });

    let mut current = Selections::default();
    let first = Instant::now();
    while !current.all_on(total, &provider(0)) {
        let Some((_, ns, sel)) = tokio::time::timeout(STALL, rx.recv()).await? else {
            return Err("the watch ended".into());
        };
        current.set(ns, sel);
    }
    let initial = first.elapsed();
    eprintln!("[{total}] initial placement of {total} namespaces in {initial:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_placed = measure::rss_kib(pid)? * 1024;

    let mut latencies = Vec::new();
    let mut round_times = Vec::new();
    let mut requests = Vec::new();
    let mut cpu_rounds = Vec::new();
    for (round, session) in sessions
        .iter_mut()
        .enumerate()
        .take(rounds.min(providers - 1))
    {
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Ok((_, ns, sel)) = rx.try_recv() {
            current.set(ns, sel);
        }
        let next = provider(round + 1);
        let mark = kube.audit().len();
        let me = std::process::id();
        let cpu_before = [
            cpu_seconds(pid)?,
            cpu_seconds(me)?,
            cpu_seconds(catalog_pid)?,
        ];
        let changed = Instant::now();
        session.delete_offer(&offer_id(round)).await?;
        let mut moved = 0;
        while !current.all_on(total, &next) {
            let Some((at, ns, sel)) = tokio::time::timeout(STALL, rx.recv()).await? else {
                return Err("the watch ended".into());
            };
            if current.of.get(&ns) != Some(&sel) {
                latencies.push(at.duration_since(changed));
                moved += 1;
            }
            current.set(ns, sel);
        }
        let took = changed.elapsed();
        round_times.push(took);
        let spent = [
            cpu_seconds(pid)? - cpu_before[0],
            cpu_seconds(me)? - cpu_before[1],
            cpu_seconds(catalog_pid)? - cpu_before[2],
        ];
        cpu_rounds.push(spent);
        let made = requests_by_kind(&kube.audit()[mark..]);
        eprintln!(
            "[{total}] round {round}: {moved} namespaces moved to {next} in {took:?}; CPU: orchestrator {:.2} s, API server (bench process) {:.2} s, catalog {:.2} s; the orchestrator's API requests: {}",
            spent[0], spent[1], spent[2],
            summary(&made)
        );
        requests.push(made);
    }
    let (hwm, rss_after) = (
        measure::peak_rss_kib(pid)? * 1024,
        measure::rss_kib(pid)? * 1024,
    );
    drop(orchestrator);
    watch.abort();
    drop(kube);
    // The withdrawn offers back, for the next size.
    for (i, session) in sessions.iter_mut().enumerate().take(round_times.len()) {
        put_offer(session, i).await?;
    }
    latencies.sort();
    round_times.sort();
    Ok(Figures {
        namespaces: total,
        providers,
        initial,
        rounds: round_times,
        latencies,
        requests,
        cpu_rounds,
        rss_placed,
        rss_after,
        hwm,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let sizes: Vec<usize> = std::env::var("SIZES")
        .unwrap_or_else(|_| "300,1000,2000".to_string())
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("SIZES: a comma-separated list of namespace counts: {e}"))?;
    if let Some(bad) = sizes
        .iter()
        .find(|n| **n < 2 * PER_CONSUMER || !n.is_multiple_of(PER_CONSUMER))
    {
        return Err(format!(
            "SIZES: {bad} is not a multiple of {PER_CONSUMER} of at least {}",
            2 * PER_CONSUMER
        )
        .into());
    }

    // The catalog.
    let data = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let bin = workspace_bin("catalog");
    eprintln!("catalog: {}", bin.display());
    let catalog = Killed(
        std::process::Command::new(&bin)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data.path())
            .args(["--auth-rate-limit", "100000"])
            .env("RUST_LOG", "warn")
            .spawn()?,
    );
    let catalog_pid = catalog.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = Http::new(
        Http::client(Duration::from_secs(30), "orchestrator-bench")?,
        base.parse()?,
    );
    let up = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if up.elapsed() > Duration::from_secs(30) {
            return Err("the catalog did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut sessions: Vec<Session> = Vec::new();
    let mut all = Vec::new();
    for &total in &sizes {
        // Providers this size adds: logged in (argon2 on the catalog's
        // side) and published a few at a time.
        let providers = total / PER_PROVIDER;
        if sessions.len() < providers {
            let started = Instant::now();
            let mut added: Vec<(usize, Session)> = futures::stream::iter(sessions.len()..providers)
                .map(|i| {
                    let http = http.clone();
                    async move { publish(http, i).await.map(|s| (i, s)) }
                })
                .buffer_unordered(8)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_>>()?;
            added.sort_by_key(|(i, _)| *i);
            sessions.extend(added.into_iter().map(|(_, s)| s));
            eprintln!(
                "[{total}] {providers} providers published ({:?} for the new ones)",
                started.elapsed()
            );
        }
        let f = one_size(
            catalog_pid,
            &base,
            &mut sessions[..providers],
            total,
            rounds,
        )
        .await?;
        println!(
            "decision latency, offer withdrawn -> NamespaceOffloading written ({} namespaces, {} providers, {} moves over {} rounds): \
             p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; whole round median {:.1} ms, worst {:.1} ms; first placement {:.0} ms; \
             CPU per round: orchestrator {:.2} s, API server {:.2} s, catalog {:.2} s; \
             orchestrator RSS {:.1} MiB placed, {:.1} MiB after the rounds, peak (VmHWM) {:.1} MiB; \
             its API requests in the last round: {}",
            f.namespaces,
            f.providers,
            f.latencies.len(),
            f.rounds.len(),
            ms(pct(&f.latencies, 0.50)),
            ms(pct(&f.latencies, 0.99)),
            ms(f.latencies.last().copied().unwrap_or_default()),
            ms(pct(&f.rounds, 0.50)),
            ms(f.rounds.last().copied().unwrap_or_default()),
            ms(f.initial),
            f.cpu_per_round()[0],
            f.cpu_per_round()[1],
            f.cpu_per_round()[2],
            mib(f.rss_placed),
            mib(f.rss_after),
            mib(f.hwm),
            f.requests.last().map(|r| summary(r.as_slice())).unwrap_or_default(),
        );
        all.push(f);
    }
    println!();
    println!("| providers × namespaces | first placement | round median | round worst | p50 | p99 | orchestrator CPU per round | API server CPU per round | RSS placed | RSS after rounds | VmHWM |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &all {
        println!(
            "| {} × {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} s | {:.2} s | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            f.providers,
            f.namespaces,
            ms(f.initial),
            ms(pct(&f.rounds, 0.50)),
            ms(f.rounds.last().copied().unwrap_or_default()),
            ms(pct(&f.latencies, 0.50)),
            ms(pct(&f.latencies, 0.99)),
            f.cpu_per_round()[0],
            f.cpu_per_round()[1],
            mib(f.rss_placed),
            mib(f.rss_after),
            mib(f.hwm),
        );
    }
    Ok(())
}
