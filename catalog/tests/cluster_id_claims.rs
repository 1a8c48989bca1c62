//! A consumer cluster ID belongs to one consumer at a time per provider
//! (issue 41 F2, probes P-01 and P-02 of the hostile review of 2026-12-01):
//! both stores bind it to the first consumer that buys with it, refuse it
//! to another while the first holds a purchase under way or a live
//! contract naming it, let the first give back a claim whose purchase did
//! not happen, hand it over once every holding ended, and let exactly one
//! of many racing consumers have it.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::buying::model::{
    purchase_step, ContractTerms, Reservation, ReservationState, Transition,
};
use catalog::buying::store::ClaimError;
use catalog::buying::ReservationStore;
use catalog::providers::LiqoGeneration;
use records::reservation;

#[path = "support/records.rs"]
mod records;

/// Reserve `id` for `consumer` and claim `cluster_id` with `provider` for it.
async fn reserve_and_claim(
    store: &dyn ReservationStore,
    id: &str,
    consumer: &str,
    provider: &str,
    cluster_id: &str,
) -> Result<(), ClaimError> {
    let now = catalog::store::now();
    store
        .reserve(reservation(id, consumer, provider, now), now)
        .await
        .unwrap();
    store
        .claim_cluster_id(provider, cluster_id, consumer, id, now)
        .await
}

/// Purchase `id` as a contract naming `cluster_id`.
async fn purchase(store: &dyn ReservationStore, id: &str, cluster_id: &str) {
    let now = catalog::store::now();
    let terms = ContractTerms::new(
        Some(cluster_id.into()),
        "provider".into(),
        quantity::ResourceList::from_strings([("cpu", "1")]).unwrap(),
        "liqo-broker".into(),
        vec![LiqoGeneration::V1],
        now,
    );
    let decide = Arc::new(move |r: &Reservation| {
        purchase_step(r, &terms, chrono::Duration::seconds(600), now)
    });
    let bought = store.update(id, decide).await.unwrap();
    assert_eq!(bought.state, ReservationState::Purchased);
}

async fn check(store: Arc<dyn ReservationStore>) {
    let s = &*store;
    // P-01: Bob buys with cluster-b first; Alice naming it is refused.
    reserve_and_claim(s, "bob-1", "bob", "prov", "cluster-b")
        .await
        .unwrap();
    purchase(s, "bob-1", "cluster-b").await;
    assert_eq!(
        reserve_and_claim(s, "alice-1", "alice", "prov", "cluster-b").await,
        Err(ClaimError::Held)
    );
    // Bob buys again with his ID; a purchase of his that did not happen
    // gives its claim back, his contract still holds the ID.
    reserve_and_claim(s, "bob-2", "bob", "prov", "cluster-b")
        .await
        .unwrap();
    s.unclaim_cluster_id("prov", "cluster-b", "bob-2")
        .await
        .unwrap();
    assert_eq!(
        reserve_and_claim(s, "alice-2", "alice", "prov", "cluster-b").await,
        Err(ClaimError::Held)
    );
    // Per provider: another provider's peering users are its own.
    reserve_and_claim(s, "alice-3", "alice", "prov-2", "cluster-b")
        .await
        .unwrap();
    // P-02 / a cluster that changes hands: once Bob's contracts with the
    // provider ended, Alice takes the ID over, and Bob is the one refused.
    let now = catalog::store::now();
    s.transition("bob-1", Transition::Cancel, now)
        .await
        .unwrap();
    reserve_and_claim(s, "alice-4", "alice", "prov", "cluster-b")
        .await
        .unwrap();
    purchase(s, "alice-4", "cluster-b").await;
    assert_eq!(
        reserve_and_claim(s, "bob-3", "bob", "prov", "cluster-b").await,
        Err(ClaimError::Held)
    );
    // A purchase under way holds the ID until its reservation is due.
    reserve_and_claim(s, "carol-1", "carol", "prov", "cluster-c")
        .await
        .unwrap();
    assert_eq!(
        reserve_and_claim(s, "dave-1", "dave", "prov", "cluster-c").await,
        Err(ClaimError::Held)
    );
    // Racing consumers on a fresh ID: exactly one has it.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let who = format!("racer-{i}");
            reserve_and_claim(&*store, &format!("race-{i}"), &who, "prov", "cluster-r").await
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => won += 1,
            Err(ClaimError::Held) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_store_binds_a_cluster_id_to_one_consumer() {
    let dir = tempfile::tempdir().unwrap();
    check(Arc::new(EmbeddedStore::open(dir.path()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mongo_store_binds_a_cluster_id_to_one_consumer() {
    let server = e2e::mongo::MongoServer::start().unwrap();
    let config = MongoConfig {
        uri: server.uri(),
        database: "claims".into(),
        timeout: Duration::from_secs(10),
    };
    check(Arc::new(MongoStore::connect(&config).await.unwrap())).await;
}
