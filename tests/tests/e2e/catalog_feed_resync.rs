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

/// How long a wait may see nothing of what it waits for: no write
/// acknowledged ([`wait_progressing`]), or the two catalogs' lists still
/// apart once the writes stopped. A stall, not a slow machine: the catalog
/// answers each write and each read, or refuses it, within its
/// `--mongodb-timeout` (seconds), and the test tries again.
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
/// The catalogs' `--feed-send-timeout`: a subscriber's waiting messages
/// make progress within it, or the feed closes the subscriber (1008). So
/// it also bounds how long a subscriber may take to be sent the final list
/// once both catalogs hold it.
const FEED_SEND_TIMEOUT: &str = "120s";

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
    FEED_SEND_TIMEOUT,
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
/// equals the wanted one: within `--feed-send-timeout` of being told (the
/// feed's own bound on messages waiting for a subscriber), however long
/// the steps before took.
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
            let patience = edge::duration::parse(FEED_SEND_TIMEOUT).expect("--feed-send-timeout");
            let mut deadline = None;
            loop {
                let want = stop.lock().unwrap().clone();
                if let Some(want) = want {
                    if want == log.view() {
                        return log;
                    }
                    let deadline = *deadline.get_or_insert_with(|| Instant::now() + patience);
                    assert!(
                        Instant::now() < deadline,
                        "{}: not sent the final list within --feed-send-timeout ({patience:?}) \
                         of both catalogs holding it; has {:?}, wants {want:?}",
                        log.name,
                        log.view(),
                    );
                }
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

/// Wait until `progress()` (a count that only grows) reaches `goal`, for
/// as long as it keeps growing: only [`PATIENCE`] without any progress
/// fails, so a slow machine is waited for and a stall is not.
fn wait_progressing(what: &str, goal: usize, mut progress: impl FnMut() -> usize) {
    let mut last = progress();
    let mut deadline = Instant::now() + PATIENCE;
    while last < goal {
        thread::sleep(Duration::from_millis(50));
        let now = progress();
        if now != last {
            last = now;
            deadline = Instant::now() + PATIENCE;
        }
        assert!(
            Instant::now() < deadline,
            "no progress for {PATIENCE:?} (at {last} of {goal}): {what}"
        );
    }
}

/// Every offer catalog `c` lists, or `None` while it answers 503: a read
/// that goes to the database (B's memory not trusted yet) is held by the
/// failpoint, and the catalog answers 503 when its `--mongodb-timeout`
/// runs out first — the catalog keeping its promise, not the order this
/// test is about.
fn listed(c: &Catalog) -> Option<Value> {
    let r = c.get("/offers");
    match r.status {
        200 => Some(r.json),
        503 => None,
        status => panic!("GET /offers: {status} {}", r.text),
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
    // Ten through each: a catalog past its ten adds nothing, so one that
    // stalls short of them stops the progress.
    let towards = |(from_a, from_b): (usize, usize)| {
        let (a, b) = acked();
        (a - from_a).min(10) + (b - from_b).min(10)
    };
    wait_progressing("writes through both catalogs", 20, || towards((0, 0)));

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
    let before = acked();
    // Well past B's resync (a few DELAYs): writes acknowledged through
    // both, B's at first each held by a delayed read.
    wait_progressing("writes after the restart", 20, || towards(before));

    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    // Each process has the other's last writes a moment later.
    let mut last = Value::Null;
    wait_until("both catalogs list the same offers", || {
        match (listed(&a), listed(&b)) {
            (Some(on_a), Some(on_b)) if on_a == on_b => {
                last = on_a;
                true
            }
            _ => false,
        }
    });
    let want = versions(&last);
    *done.lock().unwrap() = Some(want);
    for s in subscribers {
        let log = s.thread.join().unwrap();
        log.assert_monotonic();
    }
}
