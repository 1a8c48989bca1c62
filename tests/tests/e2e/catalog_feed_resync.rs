//! The feed never goes backwards across a resync (issue 29, finding 7): two
//! catalog processes on one MongoDB-compatible server (SecantusDB), both
//! written to, four subscribers (delta and snapshot mode on each process),
//! and the database killed (SIGKILL) and restarted on the same storage.
//! Every subscriber must never be sent an offer at a version older than one
//! it was already sent, and never a snapshot that lacks an offer it already
//! had (the test never deletes, so a missing offer can only be an older
//! list).
//!
//! The race, and how this test drives it every time rather than by luck.
//! After the restart each of a catalog's change streams starts afresh:
//! reopen, load its collection into memory, go on with its events. Before
//! the fix, the providers' stream asked the feed to resync as soon as its
//! small collection was loaded; offers were still loading, so the feed read
//! its list from the database — newer than the offers' load, which had
//! started earlier. Then the offers' stream asked too, and the feed took the
//! list from memory: that older load, its stream's newer events not applied
//! yet. Unaided, the two reads fall milliseconds apart and a write must land
//! between them (about a dozen runs of an earlier version of this test never
//! saw it). Here catalog B names its connections (`appName` in its
//! connection string, an operator's setting) and the restarted server delays
//! each of B's `find` and `getMore` commands by [`DELAY`] (mongod's own
//! `failCommand` failpoint, `blockConnection`), so every step is a [`DELAY`]
//! apart: the offers' load (a `find`, then a `getMore`: more than a first
//! batch of offers) ends a [`DELAY`] after the providers' (one `find`); the
//! feed's database read (a `find`) sees a [`DELAY`] of catalog A's writes
//! more than the offers' load; and the offers' stream brings them only with
//! its next `getMore`, another [`DELAY`] later. B is paused (SIGSTOP) from
//! before the kill until the failpoint is armed, so it meets the restarted
//! server all at once: its streams resume by themselves and all break
//! together when it sees the new server process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use e2e::catalog::{provider, simple_offer, Backend, Catalog, Env};
use e2e::ws::{Event, FeedClient};
use serde_json::{json, Value};

/// Waiting for something that must happen (a message, recovery).
const PATIENCE: Duration = Duration::from_secs(60);
/// Offers every writer rewrites in turn, so both processes raise the same
/// offers' versions.
const SHARED: [&str; 3] = ["shared-0", "shared-1", "shared-2"];
/// Offers written before the fault: more than a `find`'s first batch (101
/// documents), so loading them takes a `getMore` as well.
const SEEDED: usize = 120;
/// How long the restarted server holds each of catalog B's `find` and
/// `getMore` commands: many of catalog A's writes long.
const DELAY: Duration = Duration::from_millis(500);
/// Catalog B's `appName`, which the failpoint is scoped to.
const SLOWED: &str = "catalog-b";
/// The catalogs' feed flags. The writers post as fast as the catalogs
/// answer, and on a loaded 2-core machine a subscriber thread can fall more
/// than the default 64 messages behind, or B (paused across the restart)
/// can find a queue unmoved for the default 10 s (or no pong for 60 s): the
/// feed then closes it (1008, 1001), which is the feed doing its job, not the
/// order this test is about. Room enough that only a real stall closes a subscriber.
const FEED_FLAGS: [&str; 6] = [
    "--feed-queue",
    "60000",
    "--feed-send-timeout",
    "120s",
    "--feed-idle-timeout",
    "300s",
];

/// What one subscriber was sent, message by message.
struct Log {
    name: String,
    messages: Vec<Value>,
}

impl Log {
    /// Check the rule on every message, in order: per offer, the version
    /// never goes down; a snapshot holds every offer already sent.
    fn assert_monotonic(&self) {
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for (i, m) in self.messages.iter().enumerate() {
            let offers: Vec<&Value> = match m["type"].as_str() {
                Some("snapshot") => m["offers"].as_array().unwrap().iter().collect(),
                Some("upsert") => vec![&m["offer"]],
                other => panic!("{}: unexpected message {other:?}: {m}", self.name),
            };
            let mut listed = Vec::new();
            for o in offers {
                let id = o["id"].as_str().unwrap().to_string();
                let v = o["version"].as_u64().unwrap();
                if let Some(&before) = seen.get(&id) {
                    assert!(
                        v >= before,
                        "{}: message {i} (seq {}) sent {id} at version {v} after version {before}",
                        self.name,
                        m["seq"]
                    );
                }
                seen.insert(id.clone(), v);
                listed.push(id);
            }
            if m["type"] == "snapshot" {
                let missing: Vec<&String> = seen.keys().filter(|id| !listed.contains(id)).collect();
                assert!(
                    missing.is_empty(),
                    "{}: message {i} (seq {}) is a snapshot older than what was sent before: it lacks {missing:?}",
                    self.name,
                    m["seq"]
                );
            }
        }
    }

    /// The offers this subscriber holds once every message is applied.
    fn view(&self) -> BTreeMap<String, u64> {
        let mut view = BTreeMap::new();
        for m in &self.messages {
            match m["type"].as_str() {
                Some("snapshot") => {
                    view = versions(&m["offers"]);
                }
                Some("upsert") => {
                    let o = &m["offer"];
                    view.insert(
                        o["id"].as_str().unwrap().to_string(),
                        o["version"].as_u64().unwrap(),
                    );
                }
                _ => {}
            }
        }
        view
    }
}

/// Each offer's version, by id, in an array of offers.
fn versions(offers: &Value) -> BTreeMap<String, u64> {
    e2e::catalog::id_versions(offers).into_iter().collect()
}

/// A subscriber reading in its own thread until told to stop and its view
/// equals the wanted one.
struct Subscriber {
    thread: thread::JoinHandle<Log>,
}

impl Subscriber {
    fn start(
        c: &Catalog,
        query: &str,
        stop: Arc<std::sync::Mutex<Option<BTreeMap<String, u64>>>>,
    ) -> Self {
        let name = format!("port {} {query}", c.port);
        let mut client = FeedClient::connect(c.port, query).unwrap();
        let thread = thread::spawn(move || {
            let mut log = Log {
                name,
                messages: Vec::new(),
            };
            let deadline = Instant::now() + PATIENCE * 2;
            loop {
                let want = stop.lock().unwrap().clone();
                if want.is_some_and(|w| w == log.view()) {
                    return log;
                }
                assert!(
                    Instant::now() < deadline,
                    "{}: never reached the final list; has {:?}, wants {:?}",
                    log.name,
                    log.view(),
                    stop.lock().unwrap()
                );
                match client
                    .poll_event(Instant::now() + Duration::from_millis(200))
                    .unwrap()
                {
                    Some(Event::Json(m)) => log.messages.push(m),
                    Some(Event::Closed(code, reason)) => {
                        panic!("{}: the feed closed ({code} {reason})", log.name)
                    }
                    None => {}
                }
            }
        });
        Subscriber { thread }
    }
}

/// A writer posting offers through one catalog until stopped: by turns a
/// shared offer (replaced by both writers) and a new one of its own. Each
/// acknowledged write counts in `acknowledged`.
fn writer(
    c: &Catalog,
    token: String,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicUsize>,
) -> thread::JoinHandle<()> {
    let url = c.url("");
    thread::spawn(move || {
        let http = e2e::http::blocking_client(Duration::from_secs(30));
        let mut k = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let id = if k.is_multiple_of(2) {
                SHARED[(k / 2) % SHARED.len()].to_string()
            } else {
                format!("{prefix}-{k}")
            };
            k += 1;
            let body = simple_offer(&id, "compute", "1", json!({"cpu": "1"}));
            let ok = http
                .post(format!("{url}/offer/{id}"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .is_ok_and(|r| r.status().is_success());
            if ok {
                acknowledged.fetch_add(1, Ordering::Relaxed);
            } else {
                // The database is away: do not hammer the catalog meanwhile.
                thread::sleep(Duration::from_millis(50));
            }
        }
    })
}

/// Wait until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Send signal `name` (`STOP`, `CONT`, `KILL`) to process `pid`.
fn signal(pid: u32, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

#[test]
fn mongo_feed_is_monotonic_across_a_database_restart() {
    let mut env = Env::new(Backend::Mongo);
    env.mongo.as_mut().unwrap().enable_test_commands();
    let a = env.start_with(&FEED_FLAGS);
    env.mongo.as_mut().unwrap().name_clients(Some(SLOWED));
    let b = env.start_with(&FEED_FLAGS);
    env.mongo.as_mut().unwrap().name_clients(None);
    let token_a = a.login(&provider(1));
    let token_b = b.login(&provider(1));
    for id in SHARED {
        a.put_offer(
            id,
            &simple_offer(id, "compute", "1", json!({"cpu": "1"})),
            &token_a,
        );
    }
    thread::scope(|s| {
        for t in 0..4 {
            let (a, token) = (&a, &token_a);
            s.spawn(move || {
                for k in (t..SEEDED).step_by(4) {
                    a.put_offer(
                        &format!("seed-{k:03}"),
                        &e2e::catalog::thesis_offer(),
                        token,
                    );
                }
            });
        }
    });

    let done = Arc::new(std::sync::Mutex::new(None));
    let subscribers: Vec<Subscriber> = [
        (&a, "?mode=delta"),
        (&a, "?mode=snapshot"),
        (&b, "?mode=delta"),
        (&b, "?mode=snapshot"),
    ]
    .into_iter()
    .map(|(c, q)| Subscriber::start(c, q, done.clone()))
    .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let (acked_a, acked_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let writers = [
        writer(&a, token_a.clone(), "a", stop.clone(), acked_a.clone()),
        writer(&b, token_b.clone(), "b", stop.clone(), acked_b.clone()),
        writer(&a, token_a.clone(), "c", stop.clone(), acked_a.clone()),
        writer(&b, token_b.clone(), "d", stop.clone(), acked_b.clone()),
    ];
    let acked = || {
        (
            acked_a.load(Ordering::Relaxed),
            acked_b.load(Ordering::Relaxed),
        )
    };
    wait_until("writes through both catalogs", || {
        let (a, b) = acked();
        a >= 10 && b >= 10
    });

    // B pauses; the database dies (SIGKILL: no clean shutdown) and comes
    // back on the same storage while A keeps writing, with B's commands
    // delayed; then B goes on.
    signal(b.child.pid(), "STOP");
    let mongo = env.mongo.as_mut().unwrap();
    signal(mongo.pid().unwrap(), "KILL");
    mongo.stop();
    mongo.restart().unwrap();
    mongo
        .fail_command(
            json!("alwaysOn"),
            json!({
                "failCommands": ["find", "getMore"],
                "appName": SLOWED,
                "blockConnection": true,
                "blockTimeMS": DELAY.as_millis() as u64,
            }),
        )
        .unwrap();
    signal(b.child.pid(), "CONT");
    let (before_a, before_b) = acked();
    // Well past B's resync (a few DELAYs): writes acknowledged through
    // both, B's at first each held by a delayed read.
    wait_until("writes after the restart", || {
        let (a, b) = acked();
        a >= before_a + 10 && b >= before_b + 10
    });

    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    // Each process has the other's last writes a moment later.
    let mut last = Value::Null;
    wait_until("both catalogs list the same offers", || {
        last = a.all_offers();
        last == b.all_offers()
    });
    let want = versions(&last);
    *done.lock().unwrap() = Some(want);
    for s in subscribers {
        let log = s.thread.join().unwrap();
        log.assert_monotonic();
    }
}
