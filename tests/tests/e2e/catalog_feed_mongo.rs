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

/// A delta subscriber's view of the list.
struct View {
    client: FeedClient,
    offers: BTreeMap<String, Value>,
}

impl View {
    fn connect(c: &Catalog, query: &str) -> View {
        let mut v = View {
            client: FeedClient::connect(c.port, query).unwrap(),
            offers: BTreeMap::new(),
        };
        let m = v.client.expect("snapshot", PATIENCE).unwrap();
        v.apply(&m);
        v
    }

    fn apply(&mut self, m: &Value) {
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
