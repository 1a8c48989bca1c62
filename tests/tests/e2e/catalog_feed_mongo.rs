//! The feed across machines: two catalog processes on one MongoDB-compatible
//! server (SecantusDB) deliver each other's changes to their subscribers,
//! through the database's change stream, and keep doing so after the
//! database restarts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Catalog, Env};
use e2e::ws::{snapshot_ids, FeedClient};
use serde_json::{json, Value};

/// How soon a change written through one process reaches another's
/// subscribers. Through a healthy change stream that is at once; the bound
/// allows for one stalled step of the receiving process's follower and its
/// recovery, each cut at the catalog's `--mongodb-timeout` (its default,
/// which these catalogs run with): applying the event, reopening the stream,
/// reloading the collection — three timeouts, and the follower's 200 ms
/// pause before reopening (`catalog/src/backends/mongo/follow.rs`). A bound
/// the product sets, not a guess at how fast a loaded machine (SecantusDB
/// is a Python server) is.
fn cross() -> Duration {
    3 * e2e::catalog::default_mongodb_timeout() + Duration::from_millis(200)
}
/// Waiting for something that must happen: recovery after the database
/// restarts, which by the product's own bounds may take about 20 s with
/// the default `--mongodb-timeout` (5s: the driver's heartbeat, the change
/// streams' reopening after a back-off of up to 5 s, their reload, each
/// within a timeout). Generous beyond that; only a recovery that never
/// comes fails it.
const PATIENCE: Duration = e2e::EVENTUALLY;

/// A delta subscriber's view of the list; every message it applies is
/// checked against the feed's promise that no offer's version goes down
/// (`catalog/src/store/sequence.rs`).
struct View {
    client: FeedClient,
    offers: BTreeMap<String, Value>,
    /// The highest version of each offer the subscriber was sent.
    versions: BTreeMap<String, u64>,
}

impl View {
    fn connect(c: &Catalog, query: &str) -> View {
        let mut v = View {
            client: FeedClient::connect(c.port, query).unwrap(),
            offers: BTreeMap::new(),
            versions: BTreeMap::new(),
        };
        let m = v.client.expect("snapshot", PATIENCE).unwrap();
        v.apply(&m);
        v
    }

    /// Record `offer`'s version, asserting it is not below one sent before.
    #[track_caller]
    fn never_older(&mut self, offer: &Value, m: &Value) {
        let id = offer["id"].as_str().unwrap().to_string();
        let v = offer["version"].as_u64().unwrap();
        let before = self.versions.insert(id.clone(), v).unwrap_or(0);
        assert!(
            v >= before,
            "{id} went back from version {before} to {v}: {m}"
        );
    }

    #[track_caller]
    fn apply(&mut self, m: &Value) {
        let sent: Vec<Value> = match m["type"].as_str() {
            Some("snapshot") => m["offers"].as_array().unwrap().clone(),
            Some("upsert") => vec![m["offer"].clone()],
            _ => Vec::new(),
        };
        for o in &sent {
            self.never_older(o, m);
        }
        match m["type"].as_str() {
            Some("snapshot") => {
                self.offers = m["offers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| (o["id"].as_str().unwrap().to_string(), o.clone()))
                    .collect();
            }
            Some("upsert") => {
                self.offers.insert(
                    m["offer"]["id"].as_str().unwrap().to_string(),
                    m["offer"].clone(),
                );
            }
            Some("delete") => {
                self.offers.remove(m["id"].as_str().unwrap());
            }
            _ => panic!("unexpected message {m}"),
        }
    }

    /// Each offer's version in the view.
    fn current_versions(&self) -> BTreeMap<String, u64> {
        e2e::catalog::id_versions(&self.list())
            .into_iter()
            .collect()
    }

    fn list(&self) -> Value {
        Value::Array(self.offers.values().cloned().collect())
    }

    /// Apply messages until the view holds `offer` exactly as given (an
    /// `upsert` normally; a `snapshot` if the store asked the feed to
    /// reload meanwhile, e.g. a change stream that opened late), within
    /// `timeout`.
    #[track_caller]
    fn converge_to_include(&mut self, offer: &Value, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let id = offer["id"].as_str().unwrap_or_default().to_string();
        while self.offers.get(&id) != Some(offer) {
            let m = self
                .client
                .next_by(deadline)
                .unwrap_or_else(|e| panic!("view {} never got {offer}: {e}", self.list()));
            assert!(
                matches!(m["type"].as_str(), Some("upsert" | "snapshot")),
                "only upserts (or a reload's snapshot) may come before {id}: {m}"
            );
            self.apply(&m);
        }
    }

    /// Apply messages until the view equals `want`, within `timeout`.
    #[track_caller]
    fn converge(&mut self, want: &Value, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.list() != *want {
            let m = self
                .client
                .next_by(deadline)
                .unwrap_or_else(|e| panic!("view {} never became {want}: {e}", self.list()));
            self.apply(&m);
        }
    }
}

#[test]
fn two_processes_deliver_each_others_changes() {
    let env = Env::new(Backend::Mongo);
    let a = env.start();
    let b = env.start();
    let token = a.login(&provider(1));
    a.put_offer("first", &thesis_offer(), &token);

    let mut on_a = View::connect(&a, "?mode=delta");
    let mut on_b = View::connect(&b, "?mode=delta");
    // A's write reaches B through the change stream: B's subscribers have
    // it at once or very soon after.
    on_b.converge(&a.all_offers(), cross());
    let mut thesis_on_b = FeedClient::connect(b.port, "?mode=snapshot").unwrap();
    let deadline = Instant::now() + cross();
    while snapshot_ids(&thesis_on_b.expect("snapshot", PATIENCE).unwrap()) != ["first"] {
        assert!(
            Instant::now() < deadline,
            "B's thesis list never had A's offer"
        );
    }

    // Written through A: B's subscribers get it.
    let created = a.put_offer(
        "gpu",
        &simple_offer("GPU", "gpu", "2", json!({"nvidia.com/gpu": "1"})),
        &token,
    );
    let t = Instant::now();
    on_b.converge_to_include(&created, cross());
    let m = thesis_on_b.next_by(t + cross()).unwrap();
    assert_eq!(snapshot_ids(&m), ["first", "gpu"]);

    // Replaced through B (B's own token works: shared key): A's get it.
    let token_b = b.login(&provider(1));
    let replaced = b.put_offer(
        "first",
        &simple_offer("First", "compute", "1", json!({"cpu": "2"})),
        &token_b,
    );
    // A's subscriber first gets A's own create, then B's replace.
    on_a.converge_to_include(&replaced, cross());

    // Deleted through A: both.
    assert_eq!(a.delete("/offer/gpu", Some(&token)).status, 204);
    let want = a.all_offers();
    on_a.converge(&want, cross());
    on_b.converge(&want, cross());
    // The thesis-mode subscriber got a whole list per change (the replace,
    // then the delete), the last one being the current list.
    let deadline = Instant::now() + cross();
    loop {
        let m = thesis_on_b.next_by(deadline).unwrap();
        assert_eq!(m["type"], "snapshot", "{m}");
        if m["offers"] == want {
            break;
        }
    }
}

#[test]
fn subscribers_catch_up_after_the_database_restarts() {
    let mut env = Env::new(Backend::Mongo);
    let a = env.start();
    let b = env.start();
    let token = a.login(&provider(1));
    a.put_offer("before", &thesis_offer(), &token);
    let mut on_a = View::connect(&a, "?mode=delta");
    on_a.converge(&a.all_offers(), cross());

    // The database goes away and comes back: the change streams break and
    // are reopened (resumed, or followed by a fresh list).
    let mongo = env.mongo.as_mut().unwrap();
    mongo.stop();
    mongo.restart().unwrap();
    b.wait_for_status("/readyz", 200, PATIENCE).unwrap();

    // A change written through B after the outage reaches A's subscriber.
    let token_b = b.login(&provider(1));
    b.put_offer("after", &thesis_offer(), &token_b);
    let want = b.all_offers();
    assert_eq!(want.as_array().unwrap().len(), 2);
    on_a.converge(&want, PATIENCE);
    // And a new subscriber on A sees the same.
    let mut fresh = FeedClient::connect(a.port, "?mode=snapshot").unwrap();
    assert_eq!(fresh.expect("snapshot", PATIENCE).unwrap()["offers"], want);
}

/// Shared offers both catalogs' writers would rewrite.
const SHARED: [&str; 3] = ["shared-0", "shared-1", "shared-2"];

/// `POST /offer/{id}` until it is acknowledged (the database just thawed:
/// answers may be 503 until the catalog sees it again, each within its
/// `--mongodb-timeout`); the stored offer.
fn put_acknowledged(c: &Catalog, id: &str, token: &str) -> Value {
    let body = simple_offer(id, "compute", "1", json!({"cpu": "1"}));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = c.post(&format!("/offer/{id}"), &body, Some(token));
        if r.status == 200 || r.status == 201 {
            return r.json;
        }
        assert!(
            r.status == 503 && Instant::now() < deadline,
            "POST /offer/{id}: {} {}",
            r.status,
            r.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 41, dbfault s2: after the database froze, the other catalog's
/// delta feed skipped intermediate versions of shared offers written just
/// after the thaw: its own change stream, recovering, delivered the older
/// versions ~2.5 s late, after newer copies (its own writes) had gone out,
/// and they were dropped as older. That is the feed's documented coalescing
/// (docs/feed.md, "Ordering"): a delta subscriber is sent each offer's
/// versions in increasing order, some possibly skipped, and always the
/// last. The lagging stream is made so by construction rather than by a
/// long freeze: the server holds each `getMore` of catalog B (its change
/// streams; B named by `appName`, an operator's setting) for [`LAG`]
/// (mongod's `failCommand` failpoint, `blockConnection`). Rounds of writes
/// to shared offers through A and B by turns: B publishes its own writes at
/// once, A's reach it late. B's delta subscriber never goes back on a
/// version and ends with every offer at its last acknowledged one.
#[test]
fn a_lagging_stream_delta_feed_ends_with_the_last_version() {
    const LAG: Duration = Duration::from_millis(300);
    const SLOWED: &str = "catalog-b";
    let mut env = Env::new(Backend::Mongo);
    let mongo = env.mongo.as_mut().unwrap();
    mongo.enable_test_commands();
    mongo.stop();
    mongo.restart().unwrap();
    let a = env.start();
    env.mongo.as_mut().unwrap().name_clients(Some(SLOWED));
    let b = env.start();
    env.mongo.as_mut().unwrap().name_clients(None);
    let token = a.login(&provider(1));
    for id in SHARED {
        put_acknowledged(&a, id, &token);
    }
    let token_b = b.login(&provider(1));
    let mut on_b = View::connect(&b, "?mode=delta");
    on_b.converge(&a.all_offers(), cross());

    env.mongo
        .as_ref()
        .unwrap()
        .fail_command(
            json!("alwaysOn"),
            json!({
                "failCommands": ["getMore"],
                "appName": SLOWED,
                "blockConnection": true,
                "blockTimeMS": LAG.as_millis() as u64,
            }),
        )
        .unwrap();
    let mut last = BTreeMap::new();
    for round in 0..4 {
        let (c, t) = if round % 2 == 0 {
            (&a, &token)
        } else {
            (&b, &token_b)
        };
        for id in SHARED {
            let stored = put_acknowledged(c, id, t);
            last.insert(id.to_string(), stored["version"].as_u64().unwrap());
        }
    }
    // The last acknowledged version of each offer reaches B's subscriber
    // (A's last writes by B's lagging change stream).
    let deadline = Instant::now() + PATIENCE;
    while on_b.current_versions() != last {
        let m = on_b.client.next_by(deadline).unwrap_or_else(|e| {
            panic!(
                "B's subscriber never had the last versions {last:?}: has {:?}: {e}",
                on_b.current_versions()
            )
        });
        on_b.apply(&m);
    }
}
