//! Store benchmark: offer writes per second and read latency (p50/p99) for
//! the embedded store and the MongoDB store (against a SecantusDB server the
//! bench starts on loopback). Each phase runs for a fixed time, so the whole
//! bench takes about half a minute.
//!
//! Run: `cargo bench -p catalog --bench store`
//! (`BENCH_PHASE_SECS` changes the length of each phase, default 3).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bench_support::percentile;
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::offers::{OfferFilter, OfferSpec, OfferStore as Store, ProviderRef};

fn offer_body(i: usize) -> String {
    format!(
        r#"{{"name": "Offer {i}", "type": "{}", "description": "bench offer",
            "plans": {{
              "small": {{"name": "small", "cost": "{}.25", "resources": {{"cpu": "2", "memory": "{}Gi", "storage": "100G"}}}},
              "large": {{"planName": "large", "cost": "{}.5", "resources": {{"cpu": "8", "memory": "{}Gi", "nvidia.com/gpu": "1"}}}}}}}}"#,
        ["compute", "storage", "gpu"][i % 3],
        i % 5,
        2 + i % 8,
        5 + i % 5,
        16 + i % 32
    )
}

fn draft(id: String, i: usize) -> catalog::offers::OfferDraft {
    let owner = ProviderRef {
        cluster_id: "bench-cluster".into(),
        cluster_name: "bench".into(),
        stamp: catalog::providers::OwnerStamp::default(),
    };
    OfferSpec::from_json(offer_body(i).as_bytes())
        .expect("valid bench offer")
        .into_draft(id, owner)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Writes of fresh offers by `tasks` concurrent writers for `phase`.
async fn write_rate(store: &Arc<dyn Store>, prefix: &str, tasks: usize, phase: Duration) -> f64 {
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let store = store.clone();
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let mut n = 0usize;
                while start.elapsed() < phase {
                    let id = format!("{prefix}-{t}-{n}");
                    store.put_offer(draft(id, n), None).await.expect("write");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.await.expect("writer task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// Latencies of `op` run back to back for `phase`.
async fn latencies<F, Fut>(phase: Duration, mut op: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    let mut out = Vec::new();
    let mut i = 0;
    while start.elapsed() < phase {
        let t = Instant::now();
        op(i).await;
        out.push(t.elapsed());
        i += 1;
    }
    out.sort_unstable();
    out
}

async fn bench(name: &str, store: Arc<dyn Store>, phase: Duration) {
    let seq = write_rate(&store, "seq", 1, phase).await;
    let par = write_rate(&store, "par", 8, phase).await;
    let count = store
        .list_offers(&OfferFilter::default())
        .await
        .expect("list")
        .len();
    let ids: Vec<String> = store
        .list_offers(&OfferFilter::default())
        .await
        .expect("list")
        .into_iter()
        .map(|o| o.id)
        .collect();

    let get = latencies(phase, |i| {
        let store = store.clone();
        let id = ids[(i * 7919) % ids.len()].clone();
        async move {
            store.get_offer(&id).await.expect("get").expect("present");
        }
    })
    .await;
    let filter =
        OfferFilter::from_pairs([("type", "gpu"), ("maxCost", "1.25"), ("min.memory", "8Gi")])
            .expect("filter");
    let matched = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let list = latencies(phase, |_| {
        let (store, filter, matched) = (store.clone(), filter.clone(), matched.clone());
        async move {
            let n = store.list_offers(&filter).await.expect("list").len();
            matched.store(n, std::sync::atomic::Ordering::Relaxed);
        }
    })
    .await;
    let matched = matched.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "| {name} | {seq:.0} | {par:.0} | {} / {} | {} / {} (of {count} offers, {matched} match) |",
        ms(percentile(&get, 0.5).unwrap_or_default()),
        ms(percentile(&get, 0.99).unwrap_or_default()),
        ms(percentile(&list, 0.5).unwrap_or_default()),
        ms(percentile(&list, 0.99).unwrap_or_default()),
    );
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // useful either: there is no filter to honour.
    let phase = Duration::from_secs(
        std::env::var("BENCH_PHASE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        println!("| store | writes/s, 1 writer | writes/s, 8 writers | get p50 / p99 | filtered list p50 / p99 |");
        println!("|---|---|---|---|---|");
        let dir = tempfile::tempdir()?;
        let embedded = EmbeddedStore::open(dir.path())?;
        bench("embedded (redb)", Arc::new(embedded), phase).await;

        let server = e2e::mongo::MongoServer::start()?;
        let mongo = MongoStore::connect(&MongoConfig {
            uri: server.uri(),
            database: "bench".into(),
            timeout: Duration::from_secs(10),
        })
        .await?;
        bench("MongoDB (SecantusDB)", Arc::new(mongo), phase).await;
        Ok(())
    })
}
