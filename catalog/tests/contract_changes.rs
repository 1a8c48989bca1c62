//! `GET /contract-changes` in process, on the embedded store (issue 44):
//! each party's stream carries its own contracts' writes and nothing of
//! anyone else's; a resume from a sequence gets exactly the party's
//! changes after it (another party's sequence brings nothing of theirs);
//! a sequence ahead of the store gets a snapshot with a reason; the
//! identity's stream limit answers 429; authentication is `GET
//! /contracts`'; the stream ends when its token expires; and the store's
//! sequence survives a reopen, old records reading sequence 0.
//!
//! A test knows a party has been sent everything up to a sequence when a
//! heartbeat carries it (a heartbeat's `seq` promises exactly that), so
//! "nothing else arrived" is checked without waiting for a while.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::test;
use catalog::auth::Role;
use catalog::backends::EmbeddedStore;
use catalog::buying::contracts::model::{report_step, Report};
use catalog::buying::model::{Channel, ContractTerms, Reservation, ReservationState, Transition};
use catalog::buying::store::{Party, ReservationStore};
use catalog::offers::Cost;
use catalog::providers::ProviderAccount;
use catalog::server::{self, Features};
use catalog::Config;
use clap::Parser;
use quantity::ResourceList;
use serde_json::Value;

/// The heartbeat of the tests' catalogs: every wait below is a few of them.
const HEARTBEAT: Duration = Duration::from_millis(200);
/// Longest wait for a line: many heartbeats.
const WAIT: Duration = Duration::from_secs(20);

fn config(dir: &std::path::Path, extra: &[&str]) -> Config {
    let mut args = vec![
        "catalog".to_string(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--contract-stream-heartbeat".into(),
        format!("{}ms", HEARTBEAT.as_millis()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Config::parse_from(args)
}

fn contract(id: &str, consumer: &str, provider: &str) -> Reservation {
    let now = catalog::store::now();
    Reservation {
        id: id.into(),
        consumer: consumer.into(),
        offer_id: "o1".into(),
        plan_id: "p".into(),
        cluster_id: provider.into(),
        cost: Cost::ZERO,
        state: ReservationState::Purchased,
        channel: Channel::Rest,
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        purchased_at: Some(now),
        ended_at: None,
        contract: Some(ContractTerms::new(
            None,
            format!("{provider} name"),
            ResourceList::from_strings([("cpu", "2")]).unwrap(),
            "liqo-broker".into(),
            vec![],
            now,
        )),
        reserved_plan: None,
        bought_by: None,
    }
}

fn reservation(id: &str, consumer: &str, provider: &str) -> Reservation {
    Reservation {
        state: ReservationState::Reserved,
        purchased_at: None,
        contract: None,
        ..contract(id, consumer, provider)
    }
}

/// A catalog built in process, its app, and tokens.
struct World {
    features: Features,
}

impl World {
    async fn new(dir: &std::path::Path, extra: &[&str]) -> Self {
        let features = server::build(&config(dir, extra)).await.unwrap();
        World { features }
    }

    fn store(&self) -> &Arc<dyn ReservationStore> {
        &self.features.buying.store
    }

    fn token(&self, subject: &str, roles: Vec<Role>) -> String {
        self.features
            .verifier
            .tokens
            .issue(subject, subject, roles)
            .unwrap()
            .token
    }

    async fn provider(&self, id: &str) -> String {
        let store = &self.features.providers.store;
        store
            .claim_provider(ProviderAccount {
                generation: 0,
                cluster_id: id.into(),
                cluster_name: format!("{id} name"),
                auth_url: "https://x.example".into(),
                secret_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"
                    .into(),
                created_at: catalog::store::now(),
            })
            .await
            .unwrap();
        self.token(id, vec![Role::Provider])
    }

    async fn buy(&self, id: &str, consumer: &str, provider: &str) -> u64 {
        self.store()
            .reserve(contract(id, consumer, provider), catalog::store::now())
            .await
            .unwrap();
        self.store().contract_head().await.unwrap()
    }

    async fn report(&self, id: &str, state: &str) -> u64 {
        let report = Report::new(state, None, None).unwrap();
        let now = catalog::store::now();
        self.store()
            .update(id, Arc::new(move |r| report_step(r, &report, now)))
            .await
            .unwrap();
        self.store().contract_head().await.unwrap()
    }

    async fn end(&self, id: &str) -> u64 {
        self.store()
            .transition(id, Transition::Cancel, catalog::store::now())
            .await
            .unwrap();
        self.store().contract_head().await.unwrap()
    }
}

/// A stream's lines, read as they come.
struct Lines {
    body: BoxBody,
    buf: Vec<u8>,
}

impl Lines {
    /// The next line; None when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let chunk = tokio::time::timeout(
                WAIT,
                std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_next(cx)),
            )
            .await
            .expect("a line within many heartbeats");
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c.unwrap()),
                None => return None,
            }
        }
    }

    /// Lines up to a heartbeat at `seq` or later (which promises everything
    /// of the party up to `seq` was sent): the others, in order.
    async fn until(&mut self, seq: u64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let line = self.next().await.expect("the stream is open");
            if line["type"] == "heartbeat" && line["seq"].as_u64().unwrap() >= seq {
                return out;
            }
            if line["type"] != "heartbeat" {
                out.push(line);
            }
        }
    }
}

/// `GET /contract-changes?<query>` as `token`: the status, and the lines
/// (200) or the error body.
async fn follow(
    app: &impl actix_web::dev::Service<
        actix_http::Request,
        Response = actix_web::dev::ServiceResponse<impl MessageBody + 'static>,
        Error = actix_web::Error,
    >,
    token: Option<&str>,
    query: &str,
) -> (u16, Result<Lines, Value>) {
    let mut req = test::TestRequest::get().uri(&format!("/contract-changes?{query}"));
    if let Some(t) = token {
        req = req.insert_header(("Authorization", format!("Bearer {t}")));
    }
    let resp = test::call_service(app, req.to_request()).await;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = test::read_body(resp).await;
        return (status, Err(serde_json::from_slice(&body).unwrap()));
    }
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "application/x-ndjson"
    );
    let body = resp.into_body().boxed();
    (
        200,
        Ok(Lines {
            body,
            buf: Vec::new(),
        }),
    )
}

fn ids(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap().to_string(),
                l["contract"]["id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn change(id: &str) -> (String, String) {
    ("change".into(), id.into())
}

#[actix_web::test]
async fn each_party_sees_its_own_contracts_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::new(dir.path(), &[]).await;
    let app = test::init_service(server::app(w.features.clone())).await;
    let p1 = w.provider("p1").await;
    let p2 = w.provider("p2").await;
    let alice = w.token("alice", vec![Role::Consumer]);
    let bob = w.token("bob", vec![Role::Consumer]);
    let root = w.token("root", vec![Role::Admin]);
    w.buy("old", "alice", "p1").await;

    let (_, a) = follow(&app, Some(&alice), "").await;
    let mut a = a.unwrap();
    let snap = a.next().await.unwrap();
    assert_eq!(snap["type"], "snapshot", "{snap}");
    assert_eq!(snap["contracts"].as_array().unwrap().len(), 1);
    assert_eq!(snap["contracts"][0]["id"], "old");
    assert!(snap.get("reason").is_none());
    let mut pr1 = follow(&app, Some(&p1), "").await.1.unwrap();
    let mut pr2 = follow(&app, Some(&p2), "").await.1.unwrap();
    let mut b = follow(&app, Some(&bob), "").await.1.unwrap();
    let mut admin = follow(&app, Some(&root), "").await.1.unwrap();
    for s in [&mut pr1, &mut pr2, &mut b, &mut admin] {
        assert_eq!(s.next().await.unwrap()["type"], "snapshot");
    }
    assert_eq!(
        follow(&app, Some(&p2), "")
            .await
            .1
            .unwrap()
            .next()
            .await
            .unwrap()["contracts"],
        serde_json::json!([])
    );

    // alice buys from p1 (a purchase), reports, ends; bob buys from p2; a
    // reservation of alice's is no contract.
    w.buy("c1", "alice", "p1").await;
    w.store()
        .reserve(reservation("r1", "alice", "p1"), catalog::store::now())
        .await
        .unwrap();
    w.buy("c2", "bob", "p2").await;
    w.report("c1", "ready").await;
    let head = w.end("c1").await;

    let mine = a.until(head).await;
    assert_eq!(ids(&mine), [change("c1"), change("c1"), change("c1")]);
    assert_eq!(mine[1]["contract"]["state"], "ready");
    assert_eq!(mine[2]["contract"]["active"], false);
    assert!(mine
        .iter()
        .all(|l| l["contract"].get("credentials").is_none()));
    let seqs: Vec<u64> = mine.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(
        ids(&pr1.until(head).await),
        [change("c1"), change("c1"), change("c1")]
    );
    assert_eq!(ids(&b.until(head).await), [change("c2")]);
    assert_eq!(ids(&pr2.until(head).await), [change("c2")]);
    let all = admin.until(head).await;
    assert_eq!(
        ids(&all),
        [change("c1"), change("c2"), change("c1"), change("c1")]
    );
}

#[actix_web::test]
async fn a_resume_gets_exactly_the_partys_changes_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::new(dir.path(), &[]).await;
    let app = test::init_service(server::app(w.features.clone())).await;
    let p1 = w.provider("p1").await;
    let alice = w.token("alice", vec![Role::Consumer]);
    let s1 = w.buy("c1", "alice", "p1").await;
    let theirs = w.buy("c2", "bob", "p2").await;
    let s3 = w.report("c1", "peered").await;
    let head = w.report("c2", "ready").await;

    let mut a = follow(&app, Some(&alice), &format!("since={s1}"))
        .await
        .1
        .unwrap();
    assert_eq!(
        a.next().await.unwrap(),
        serde_json::json!({"type":"resumed","seq":s1})
    );
    let lines = a.until(head).await;
    assert_eq!(ids(&lines), [change("c1")]);
    assert_eq!(lines[0]["seq"], s3);
    // A sequence of another party's change brings nothing of theirs.
    let mut p = follow(&app, Some(&p1), &format!("since={}", theirs - 1))
        .await
        .1
        .unwrap();
    assert_eq!(p.next().await.unwrap()["type"], "resumed");
    assert_eq!(ids(&p.until(head).await), [change("c1")]);
    // From 0: everything of alice's, once.
    let mut z = follow(&app, Some(&alice), "since=0").await.1.unwrap();
    z.next().await.unwrap();
    assert_eq!(ids(&z.until(head).await), [change("c1")]);
    // Up to date: nothing but heartbeats.
    let mut up = follow(&app, Some(&alice), &format!("since={head}"))
        .await
        .1
        .unwrap();
    up.next().await.unwrap();
    assert!(up.until(head).await.is_empty());

    // Ahead of the store: a snapshot that says why.
    let (_, ahead) = follow(&app, Some(&alice), &format!("since={}", head + 100)).await;
    let snap = ahead.unwrap().next().await.unwrap();
    assert_eq!(snap["type"], "snapshot");
    assert_eq!(snap["seq"], head);
    assert!(snap["reason"].as_str().unwrap().contains("ahead"), "{snap}");
    assert_eq!(snap["contracts"][0]["id"], "c1");
}

#[actix_web::test]
async fn limits_queries_and_authentication_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::new(dir.path(), &["--contract-stream-per-identity", "2"]).await;
    let app = test::init_service(server::app(w.features.clone())).await;
    let alice = w.token("alice", vec![Role::Consumer]);
    let _one = follow(&app, Some(&alice), "").await.1.unwrap();
    let two = follow(&app, Some(&alice), "").await.1.unwrap();
    let (status, err) = follow(&app, Some(&alice), "").await;
    assert_eq!(status, 429);
    let err = err.err().unwrap();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("--contract-stream-per-identity"),
        "{err}"
    );
    // Another identity is not limited by alice's.
    let bob = w.token("bob", vec![Role::Consumer]);
    assert_eq!(follow(&app, Some(&bob), "").await.0, 200);
    // A closed stream frees its place.
    drop(two);
    assert_eq!(follow(&app, Some(&alice), "").await.0, 200);

    assert_eq!(follow(&app, None, "").await.0, 401);
    assert_eq!(follow(&app, Some("not-a-token"), "").await.0, 401);
    let nobody = w.token("nobody", vec![]);
    assert_eq!(follow(&app, Some(&nobody), "").await.0, 403);
    for (query, field) in [
        ("since=x", "since"),
        ("since=-3", "since"),
        ("active=maybe", "active"),
        ("state=ready", "state"),
    ] {
        let (status, err) = follow(&app, Some(&bob), query).await;
        assert_eq!(status, 400, "{query}");
        assert_eq!(err.err().unwrap()["field"], field, "{query}");
    }
    // A provider whose account the store lost: 401, as for GET /contracts.
    let ghost = w.token("ghost", vec![Role::Provider]);
    assert_eq!(follow(&app, Some(&ghost), "").await.0, 401);
}

#[actix_web::test]
async fn a_stream_ends_when_its_token_expires() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::new(dir.path(), &["--token-ttl", "2s"]).await;
    let app = test::init_service(server::app(w.features.clone())).await;
    let alice = w.token("alice", vec![Role::Consumer]);
    let mut a = follow(&app, Some(&alice), "").await.1.unwrap();
    let mut lines = 0;
    while a.next().await.is_some() {
        lines += 1;
    }
    // The snapshot, heartbeats, then the end.
    assert!(lines >= 2, "{lines}");
}

/// The fan-out reads the store once per batch of changes, however many
/// streams follow.
#[actix_web::test]
async fn one_read_per_change_whatever_the_streams() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::new(dir.path(), &["--contract-stream-per-identity", "50"]).await;
    let app = test::init_service(server::app(w.features.clone())).await;
    let alice = w.token("alice", vec![Role::Consumer]);
    let mut streams = Vec::new();
    for _ in 0..20 {
        let mut s = follow(&app, Some(&alice), "").await.1.unwrap();
        s.next().await.unwrap();
        streams.push(s);
    }
    let reads = |w: &World| {
        let text = w.features.metrics.render();
        text.lines()
            .find_map(|l| l.strip_prefix("catalog_contract_stream_store_reads_total "))
            .map(|v| v.trim().parse::<f64>().unwrap())
            .unwrap()
    };
    let before = reads(&w);
    let head = w.buy("c1", "alice", "p1").await;
    for s in &mut streams {
        assert_eq!(ids(&s.until(head).await), [change("c1")]);
    }
    assert_eq!(reads(&w) - before, 1.0);
}

/// The sequence is kept with the records: it survives a reopen, each
/// write takes the next one, a rewrite moves the record's index entries;
/// a record written before sequences were kept reads 0 and is indexed.
#[tokio::test(flavor = "multi_thread")]
async fn the_sequence_survives_a_reopen_and_old_records_read_zero() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert_eq!(store.contract_head().await.unwrap(), 0);
        let mut writes = store.contract_writes();
        store
            .reserve(contract("c1", "alice", "p1"), catalog::store::now())
            .await
            .unwrap();
        store
            .reserve(contract("c2", "bob", "p2"), catalog::store::now())
            .await
            .unwrap();
        store
            .transition("c1", Transition::Cancel, catalog::store::now())
            .await
            .unwrap();
        assert_eq!(store.contract_head().await.unwrap(), 3);
        assert!(writes.has_changed().unwrap());
        assert_eq!(*writes.borrow_and_update(), 3);
    }
    // A record as written before sequences were kept.
    {
        let db =
            redb::Database::create(dir.path().join(catalog::backends::embedded::DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let t: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("reservations");
            let old = r#"{"id":"old","consumer":"alice","offerID":"o","planID":"p","clusterID":"p1","cost":"0.05","state":"reserved","channel":"rest","createdAt":"2026-11-02T10:00:00Z","expiresAt":"2999-01-01T00:00:00Z"}"#;
            txn.open_table(t)
                .unwrap()
                .insert("old", old.as_bytes())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(store.contract_head().await.unwrap(), 3);
    let alice = Party::Of {
        consumer: Some("alice".into()),
        provider: None,
    };
    let seqs = |v: Vec<catalog::buying::store::Sequenced>| {
        v.into_iter()
            .map(|s| (s.record.id, s.seq))
            .collect::<Vec<_>>()
    };
    // c1 was rewritten at 3: its entry at 1 is gone.
    assert_eq!(
        seqs(store.changed_since(&alice, 0, 10).await.unwrap()),
        [("c1".to_string(), 3)]
    );
    assert_eq!(
        seqs(store.changed_since(&Party::All, 0, 10).await.unwrap()),
        [("c2".to_string(), 2), ("c1".to_string(), 3)]
    );
    assert_eq!(
        seqs(store.changed_since(&Party::All, 2, 10).await.unwrap()),
        [("c1".to_string(), 3)]
    );
    assert_eq!(
        seqs(store.changed_since(&Party::All, 0, 1).await.unwrap()),
        [("c2".to_string(), 2)]
    );
    let p2 = Party::Of {
        consumer: None,
        provider: Some("p2".into()),
    };
    assert_eq!(
        seqs(store.changed_since(&p2, 0, 10).await.unwrap()),
        [("c2".to_string(), 2)]
    );
    // The old record is listed and, once written, takes the next sequence.
    assert_eq!(
        store.get_reservation("old").await.unwrap().unwrap().id,
        "old"
    );
    store
        .transition("old", Transition::Release, catalog::store::now())
        .await
        .unwrap();
    assert_eq!(store.contract_head().await.unwrap(), 4);
    assert_eq!(
        seqs(store.changed_since(&alice, 3, 10).await.unwrap()),
        [("old".to_string(), 4)]
    );
    // Reading party (consumer and provider at once): each record once.
    let both = Party::Of {
        consumer: Some("alice".into()),
        provider: Some("p1".into()),
    };
    assert_eq!(
        seqs(store.changed_since(&both, 0, 10).await.unwrap()),
        [("c1".to_string(), 3), ("old".to_string(), 4)]
    );
}
