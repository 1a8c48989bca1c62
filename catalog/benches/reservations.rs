//! Reservation benchmark: reserve → release cycles per second, alone on an
//! uncapped plan and with many tasks racing for a capped plan (where most
//! attempts are answered "sold out"), for the embedded store and the
//! MongoDB store (against a SecantusDB server the bench starts on
//! loopback), with p50/p99 latency of `reserve`.
//!
//! Run: `cargo bench -p catalog --bench reservations`
//! (`BENCH_PHASE_SECS` changes the length of each phase, default 3).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bench_support::percentile;
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::buying::model::{new_id, Channel, Reservation, ReservationState, Transition};
use catalog::buying::{ReservationStore, ReserveError};
use catalog::offers::Cost;

fn reservation(task: usize, plan: &str) -> Reservation {
    let now = catalog::store::now();
    Reservation {
        id: new_id().expect("random id"),
        consumer: format!("consumer-{task}"),
        offer_id: "bench".into(),
        plan_id: plan.into(),
        cluster_id: "bench-cluster".into(),
        cost: Cost::ZERO,
        state: ReservationState::Reserved,
        channel: Channel::Rest,
        created_at: now,
        expires_at: now + chrono::Duration::minutes(5),
        purchased_at: None,
        ended_at: None,
        contract: None,
        reserved_plan: None,
        bought_by: None,
    }
}

struct Phase {
    reserved: usize,
    sold_out: usize,
    latencies: Vec<Duration>,
    elapsed: Duration,
}

/// `tasks` tasks reserve `plan` and release each reservation at once, for
/// `phase`.
async fn cycles(
    store: &Arc<dyn ReservationStore>,
    plan: &str,
    tasks: usize,
    phase: Duration,
) -> Phase {
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let store = store.clone();
            let plan = plan.to_string();
            tokio::spawn(async move {
                let (mut reserved, mut sold_out, mut latencies) = (0, 0, Vec::new());
                while start.elapsed() < phase {
                    let r = reservation(t, &plan);
                    let id = r.id.clone();
                    let began = Instant::now();
                    let outcome = store.reserve(r, catalog::store::now()).await;
                    latencies.push(began.elapsed());
                    match outcome {
                        Ok(_) => {
                            reserved += 1;
                            store
                                .transition(&id, Transition::Release, catalog::store::now())
                                .await
                                .expect("release");
                        }
                        Err(ReserveError::SoldOut { .. }) => sold_out += 1,
                        Err(e) => panic!("reserve: {e}"),
                    }
                }
                (reserved, sold_out, latencies)
            })
        })
        .collect();
    let mut out = Phase {
        reserved: 0,
        sold_out: 0,
        latencies: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for h in handles {
        let (r, s, l) = h.await.expect("bench task");
        out.reserved += r;
        out.sold_out += s;
        out.latencies.extend(l);
    }
    out.elapsed = start.elapsed();
    out.latencies.sort();
    out
}

fn report(store: &str, what: &str, p: &Phase) {
    let secs = p.elapsed.as_secs_f64();
    println!(
        "{store:9} {what:34} {:>8.0} reserve+release/s {:>8.0} sold-out/s   reserve p50 {:.3} ms p99 {:.3} ms",
        p.reserved as f64 / secs,
        p.sold_out as f64 / secs,
        percentile(&p.latencies, 0.50).unwrap_or_default().as_secs_f64() * 1000.0,
        percentile(&p.latencies, 0.99).unwrap_or_default().as_secs_f64() * 1000.0,
    );
}

async fn run(name: &str, store: Arc<dyn ReservationStore>, phase: Duration) {
    store
        .set_plan_cap("bench", "capped", Some(4))
        .await
        .expect("cap");
    report(
        name,
        "1 task, uncapped plan",
        &cycles(&store, "open", 1, phase).await,
    );
    report(
        name,
        "16 tasks, uncapped plan",
        &cycles(&store, "open", 16, phase).await,
    );
    report(
        name,
        "16 tasks racing for a cap of 4",
        &cycles(&store, "capped", 16, phase).await,
    );
}

fn main() -> anyhow::Result<()> {
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
        let dir = tempfile::tempdir()?;
        let embedded: Arc<dyn ReservationStore> = Arc::new(EmbeddedStore::open(dir.path())?);
        run("embedded", embedded, phase).await;

        let server = e2e::mongo::MongoServer::start()?;
        let mongo: Arc<dyn ReservationStore> = Arc::new(
            MongoStore::connect(&MongoConfig {
                uri: server.uri(),
                database: "bench".into(),
                timeout: Duration::from_secs(10),
            })
            .await?,
        );
        run("mongodb", mongo, phase).await;
        Ok(())
    })
}
