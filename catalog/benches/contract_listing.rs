//! What one provider's contract listing costs the store as the catalog
//! grows: `list_sold` (what `GET /provider/contracts` reads on every poll
//! of every provider's controllers) for one provider holding one record,
//! with 200, 1,000 and 10,000 records of other providers beside it, on the
//! embedded store and on the MongoDB store (a SecantusDB server the bench
//! starts on loopback). A listing that costs in proportion to the whole
//! catalog grows with it; one scoped to the caller stays flat (issue 44).
//!
//! Run: `cargo bench -p catalog --bench contract_listing`
//! (`BENCH_READS` changes the reads timed per size, default 2000).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bench_support::percentile;
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::buying::model::{new_id, Channel, Reservation, ReservationState};
use catalog::buying::ReservationStore;
use catalog::offers::Cost;

const SIZES: [usize; 3] = [200, 1_000, 10_000];

fn record(i: usize) -> Reservation {
    let now = catalog::store::now();
    Reservation {
        id: new_id().expect("random id"),
        consumer: format!("consumer-{i}"),
        offer_id: "bench".into(),
        plan_id: "plan".into(),
        cluster_id: format!("provider-{i}"),
        cost: Cost::ZERO,
        state: ReservationState::Reserved,
        channel: Channel::Rest,
        // Far enough ahead that nothing expires while the bench runs.
        created_at: now,
        expires_at: now + chrono::Duration::hours(6),
        purchased_at: None,
        ended_at: None,
        contract: None,
        reserved_plan: None,
        bought_by: None,
    }
}

/// Grow `store` to each size in turn, then time `reads` listings of one
/// provider's records.
async fn run(name: &str, store: Arc<dyn ReservationStore>, reads: usize) -> anyhow::Result<()> {
    let mut held = 0;
    for size in SIZES {
        // Eight writers: the embedded store commits each reservation to disk.
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut i = held + w;
                    while i < size {
                        store
                            .reserve(record(i), catalog::store::now())
                            .await
                            .unwrap_or_else(|e| panic!("reserve {i}: {e}"));
                        i += 8;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await?;
        }
        held = size;
        let mut latencies = Vec::with_capacity(reads);
        let started = Instant::now();
        for r in 0..reads {
            // A different provider each read, each holding one record.
            let provider = format!("provider-{}", (r * 7919) % size);
            let t = Instant::now();
            let sold = store.list_sold(&provider).await?;
            latencies.push(t.elapsed());
            anyhow::ensure!(sold.len() == 1, "{provider} holds {} records", sold.len());
        }
        let elapsed = started.elapsed();
        latencies.sort();
        println!(
            "{name:<9} {size:>6} records: {:>8.1} µs mean, p50 {:>8.1} µs, p99 {:>8.1} µs per listing",
            elapsed.as_secs_f64() * 1e6 / reads as f64,
            percentile(&latencies, 0.50).unwrap_or_default().as_secs_f64() * 1e6,
            percentile(&latencies, 0.99).unwrap_or_default().as_secs_f64() * 1e6,
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let reads = std::env::var("BENCH_READS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let dir = tempfile::tempdir()?;
        let embedded: Arc<dyn ReservationStore> = Arc::new(EmbeddedStore::open(dir.path())?);
        run("embedded", embedded, reads).await?;

        let server = e2e::mongo::MongoServer::start()?;
        let mongo: Arc<dyn ReservationStore> = Arc::new(
            MongoStore::connect(&MongoConfig {
                uri: server.uri(),
                database: "bench".into(),
                timeout: Duration::from_secs(10),
            })
            .await?,
        );
        run("mongodb", mongo, reads).await?;
        Ok(())
    })
}
