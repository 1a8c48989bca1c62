//! Reconcile latency: chain change → status written, for 1,000 slices.
//!
//! The test API server (Liqo v1.2.0 CRDs) holds 100 consumers with 10
//! authenticated slices of class `bench` each, every slice asking `cpu: 1`.
//! The controller runs in this process (`fit`, `--on-shrink follow`, no
//! leader election) over a memory source. Each round flips the chain's
//! answer between `cpu: 5` and `cpu: 10`, which flips 5 slices of every
//! consumer (500 slices) between Denied and Accepted. A watch on the slices
//! notes when each flipped slice's new status arrives; its latency is that
//! time minus the moment the chain changed. Reported: p50, p99 and max over
//! every flipped slice of every round, and the time for a whole round.
//!
//! `cargo bench -p slice-controller --bench reconcile_latency`
//! (`ROUNDS=N` to change the number of rounds, default 6).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_core::liqo::RESOURCES_CONDITION;
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config};
use kube_test_server::KubeApiServer;
use quantity::ResourceList;
use resource_reader::MemorySource;
use resource_reader::ResourceReader;
use serde_json::json;
use slice_controller::model::{ConditionStatus, ResourceSlice};
use tokio_util::sync::CancellationToken;

const CONSUMERS: usize = 100;
const PER_CONSUMER: usize = 10;
const CLASS: &str = "bench";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn cpu(n: &str) -> ResourceList {
    ResourceList::from_strings([("cpu", n)]).unwrap_or_default()
}

fn status_of(slice: &ResourceSlice) -> Option<ConditionStatus> {
    slice.condition(RESOURCES_CONDITION).and_then(|c| c.status)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() -> Result<()> {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(6);
    let kube = KubeApiServer::start().await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    for c in 0..CONSUMERS {
        let consumer = format!("consumer-{c:03}");
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
    eprintln!(
        "{} slices created in {:?}",
        CONSUMERS * PER_CONSUMER,
        started.elapsed()
    );

    // As the tests' own user (in system:masters): a client without
    // credentials is `system:anonymous`, whom the server refuses.
    let mut config = Config::new(kube.url().parse()?);
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    let client = Client::try_from(config)?;
    let source = Arc::new(MemorySource::new(cpu("5")));
    let reader: Arc<dyn ResourceReader> = source.clone();
    let args = {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            controller: slice_controller::config::ControllerArgs,
        }
        Cli::try_parse_from([
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
        ])?
        .controller
    };
    let shutdown = CancellationToken::new();
    let controller = tokio::spawn({
        let (client, shutdown) = (client.clone(), shutdown.clone());
        async move { slice_controller::config::run(client, reader, &args, shutdown).await }
    });

    // Follow every slice's Resources status as written.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch = tokio::spawn({
        let api: Api<ResourceSlice> = Api::all(client.clone());
        async move {
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(slice)) = events.next().await {
                let _ = tx.send((Instant::now(), slice.key(), status_of(&slice)));
            }
        }
    });

    let mut current: HashMap<String, Option<ConditionStatus>> = HashMap::new();
    let total = CONSUMERS * PER_CONSUMER;
    let settle = |current: &HashMap<String, Option<ConditionStatus>>, accepted: usize| {
        let a = current
            .values()
            .filter(|s| **s == Some(ConditionStatus::Accepted))
            .count();
        let d = current
            .values()
            .filter(|s| **s == Some(ConditionStatus::Denied))
            .count();
        a == accepted && a + d == total
    };
    // Initial decisions: 5 of 10 accepted per consumer.
    let first = Instant::now();
    while !settle(&current, total / 2) {
        let Some((_, key, status)) = rx.recv().await else {
            break;
        };
        current.insert(key, status);
    }
    eprintln!(
        "initial decisions of {total} slices in {:?}",
        first.elapsed()
    );

    let mut latencies = Vec::new();
    let mut round_times = Vec::new();
    for round in 0..rounds {
        let grow = round % 2 == 0;
        let expect_accepted = if grow { total } else { total / 2 };
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Ok((_, key, status)) = rx.try_recv() {
            current.insert(key, status);
        }
        let changed = Instant::now();
        source.set(cpu(if grow { "10" } else { "5" }));
        let mut flipped = 0;
        while !settle(&current, expect_accepted) {
            let Some((at, key, status)) = rx.recv().await else {
                break;
            };
            if current.get(&key) != Some(&status) {
                latencies.push(at.duration_since(changed));
                flipped += 1;
            }
            current.insert(key, status);
        }
        round_times.push(changed.elapsed());
        eprintln!(
            "round {round}: {flipped} slices flipped in {:?}",
            changed.elapsed()
        );
    }
    latencies.sort();
    round_times.sort();
    println!(
        "reconcile latency, chain change -> status written ({} slices, {} consumers, {} flips over {rounds} rounds): \
         p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; whole round (500 slices) median {:.1} ms",
        total,
        CONSUMERS,
        latencies.len(),
        percentile(&latencies, 50.0).as_secs_f64() * 1000.0,
        percentile(&latencies, 99.0).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        percentile(&round_times, 50.0).as_secs_f64() * 1000.0,
    );
    shutdown.cancel();
    let _ = controller.await;
    watch.abort();
    Ok(())
}
