//! Decision latency: an offer change in the catalog → the
//! NamespaceOffloading written, for 1,000 namespaces over 100 providers.
//!
//! The real catalog binary (`CATALOG_BIN`, default `target/release/catalog`,
//! else `target/debug/catalog`) runs on the embedded store with 100
//! providers, each publishing one offer; provider `i` costs `10 + i`. The
//! test API server (Liqo v1.2.0 CRDs) runs in this process with 1,000
//! namespaces offloaded by 10 consumers; the orchestrator's controller runs
//! in this process too (default policy: any provider, one per namespace),
//! following the catalog's feed. All 1,000 namespaces first go to the
//! cheapest provider. Each round, that provider withdraws its offer
//! (`DELETE /offer/{id}`): every namespace moves to the next cheapest. A
//! kube-rs watch on the NamespaceOffloadings notes when each namespace's new
//! selection arrives; its latency is that moment minus the moment the
//! `DELETE` was sent (so it includes the catalog's write and feed, the
//! decision of 1,000 namespaces, the `PUT`s through the API server's
//! validation, and the watch event back). Reported: p50, p99 and max over
//! every namespace of every round, and the time for a whole round.
//!
//! `cargo bench -p orchestrator --bench decision_latency` (`ROUNDS=N`,
//! default 5).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog_client::wire::PeeringCredentials;
use catalog_client::{Http, Login, Session};
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config, ResourceExt};
use kube_test_server::KubeApiServer;
use orchestrator::controller::{self, Settings};
use orchestrator::feed::{self, Catalog};
use orchestrator::metrics::Metrics;
use orchestrator::offloading::NamespaceOffloading;
use orchestrator::policy::Policy;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PROVIDERS: usize = 100;
const NAMESPACES: usize = 1000;
const CONSUMERS: usize = 10;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn catalog_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CATALOG_BIN") {
        return bin.into();
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release/catalog");
    if release.exists() {
        release
    } else {
        target.join("debug/catalog")
    }
}

fn provider(i: usize) -> String {
    format!("provider-{i:03}")
}

/// A child process killed when dropped.
struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);

    // The catalog.
    let data = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let bin = catalog_bin();
    eprintln!("catalog: {}", bin.display());
    let _catalog = Killed(
        std::process::Command::new(&bin)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data.path())
            .args(["--auth-rate-limit", "100000"])
            .env("RUST_LOG", "warn")
            .spawn()?,
    );
    let base = format!("http://127.0.0.1:{port}");
    // Each provider publishes through its own catalog-client session.
    let client = Http::client(Duration::from_secs(10), "orchestrator-bench")?;
    let session = |i: usize| -> Result<Session> {
        let credentials = PeeringCredentials {
            cluster_id: provider(i),
            cluster_name: provider(i),
            auth_url: format!("https://{}.example:6443", provider(i)),
            token: format!("secret-of-{}", provider(i)),
        };
        Ok(Session::new(
            Http::new(client.clone(), base.parse()?),
            Login::Provider {
                credentials,
                file: None,
            },
        ))
    };
    let up = Instant::now();
    let mut first = session(0)?;
    while let Err(e) = first.authenticate().await {
        if up.elapsed() > Duration::from_secs(30) {
            return Err(format!("the catalog did not start: {e}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut sessions = vec![first];
    let started = Instant::now();
    for i in 0..PROVIDERS {
        if i > 0 {
            sessions.push(session(i)?);
        }
        let offer = json!({"name": format!("offer {i}"), "type": "compute",
                          "labels": {"region": if i % 2 == 0 { "eu" } else { "us" }},
                          "plans": {"std": {"name": "std", "cost": format!("{}", 10 + i),
                                            "resources": {"cpu": "4", "memory": "8Gi"}}}});
        sessions[i]
            .put_offer(&format!("offer-{i:03}"), &offer)
            .await?;
    }
    eprintln!("{PROVIDERS} providers published in {:?}", started.elapsed());

    // The broker cluster.
    let kube = KubeApiServer::start().await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    for n in 0..NAMESPACES {
        let consumer = format!("consumer-{}", n % CONSUMERS);
        kube.apply(
            ("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("app-{n:04}"),
                "labels": {"liqo.io/remote-cluster-id": consumer},
                "annotations": {"liqo.io/managed-by-namespace-map": format!("liqo-tenant-{consumer}/{consumer}"),
                                "liqo.io/original-name": format!("app-{n:04}")}}}),
        );
    }
    eprintln!("{NAMESPACES} namespaces created in {:?}", started.elapsed());

    // As the tests' own user (in system:masters): a client without
    // credentials is `system:anonymous`, whom the server refuses.
    let mut config = Config::new(kube.url().parse()?);
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    let client = Client::try_from(config)?;
    let metrics = Metrics::new();
    let stop_feed = CancellationToken::new();
    let (snapshot, feed_task) =
        feed::follow(Catalog::parse(&base)?, metrics.clone(), stop_feed.clone());
    let offers = snapshot.subscribe();
    let shutdown = CancellationToken::new();
    let settings = Settings {
        policy: Arc::new(Policy::default()),
        resync: Duration::from_secs(3600),
        retry: Duration::from_millis(200),
        reporter: kube::runtime::events::Reporter {
            controller: "bench".into(),
            instance: Some("bench".into()),
        },
    };
    let controller = tokio::spawn(controller::run(
        client.clone(),
        settings,
        offers,
        metrics,
        shutdown.clone(),
    ));

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

    let mut current: HashMap<String, Vec<String>> = HashMap::new();
    let all_on = |current: &HashMap<String, Vec<String>>, p: &str| {
        current.len() == NAMESPACES && current.values().all(|s| s.len() == 1 && s[0] == p)
    };
    let first = Instant::now();
    while !all_on(&current, &provider(0)) {
        let Some((_, ns, sel)) = rx.recv().await else {
            break;
        };
        current.insert(ns, sel);
    }
    eprintln!(
        "initial placement of {NAMESPACES} namespaces in {:?}",
        first.elapsed()
    );

    let mut latencies = Vec::new();
    let mut round_times = Vec::new();
    for (round, session) in sessions
        .iter_mut()
        .enumerate()
        .take(rounds.min(PROVIDERS - 1))
    {
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Ok((_, ns, sel)) = rx.try_recv() {
            current.insert(ns, sel);
        }
        let next = provider(round + 1);
        let changed = Instant::now();
        session.delete_offer(&format!("offer-{round:03}")).await?;
        let mut moved = 0;
        while !all_on(&current, &next) {
            let Some((at, ns, sel)) = rx.recv().await else {
                break;
            };
            if current.get(&ns) != Some(&sel) {
                latencies.push(at.duration_since(changed));
                moved += 1;
            }
            current.insert(ns, sel);
        }
        round_times.push(changed.elapsed());
        eprintln!(
            "round {round}: {moved} namespaces moved to {next} in {:?}",
            changed.elapsed()
        );
    }
    latencies.sort();
    round_times.sort();
    println!(
        "decision latency, offer withdrawn -> NamespaceOffloading written ({NAMESPACES} namespaces, {PROVIDERS} providers, {} moves over {} rounds): \
         p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; whole round ({NAMESPACES} namespaces) median {:.1} ms",
        latencies.len(),
        round_times.len(),
        percentile(&latencies, 50.0).as_secs_f64() * 1e3,
        percentile(&latencies, 99.0).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        percentile(&round_times, 50.0).as_secs_f64() * 1e3,
    );
    shutdown.cancel();
    stop_feed.cancel();
    let _ = controller.await;
    watch.abort();
    let _ = feed_task.await;
    Ok(())
}
