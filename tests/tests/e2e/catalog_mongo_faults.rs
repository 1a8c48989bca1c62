//! Database faults under a MongoDB-backed catalog (SecantusDB, a separate
//! process): a database that hangs (SIGSTOP) is answered within
//! `--mongodb-timeout` — writes with "outcome unknown", never "too many
//! concurrent writes" — and `/readyz` within its own short deadline; a
//! database replaced by an empty one (its change-stream history gone)
//! makes the catalog drop its resume token and send its subscribers a
//! fresh snapshot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Catalog, Env, Resp};
use e2e::ws::{snapshot_ids, FeedClient};
use serde_json::json;

/// The `--mongodb-timeout` of the catalogs whose subject it is, in seconds:
/// the catalog's default (5s, `catalog/src/config.rs`), passed explicitly
/// ([`start_timed`]) so that the bounds below stay tied to it. A shorter
/// one would make the set-up — the login and writes before each fault —
/// depend on SecantusDB answering within it on a loaded machine.
const TIMEOUT_SECS: u64 = 5;
const TIMEOUT: Duration = Duration::from_secs(TIMEOUT_SECS);
/// Slack on top of a deadline: half a timeout, for the answer to travel on
/// a loaded machine once the catalog's timer fired. The failure this
/// guards against, a request held until the database thaws, is far beyond
/// it: each freeze lasts until the writers got several answers, each up to
/// a timeout.
const MARGIN: Duration = Duration::from_millis(TIMEOUT_SECS * 1000 / 2);
/// The `/readyz` ping's own deadline: min(1 s, `--mongodb-timeout`) (the
/// catalog's `PING_DEADLINE`). With [`MARGIN`] still well below one
/// [`TIMEOUT`], which a ping bounded only by `--mongodb-timeout` would take.
const PING: Duration = Duration::from_secs(1);
/// How soon a subscriber must get its fresh snapshot after the database
/// came back empty: the stream fails on reopening or on its next read, and
/// a fresh stream is opened within a few seconds (its retry back-off); the
/// rest is slack for a loaded machine.
const RESYNC: Duration = Duration::from_secs(30);
/// Waiting for something that must happen (recovery, a message).
const PATIENCE: Duration = e2e::EVENTUALLY;

/// One answered request: when it was sent, how long it took, what came back.
#[derive(Debug, Clone)]
struct Answer {
    id: String,
    sent: Instant,
    took: Duration,
    status: u16,
    message: String,
    version: Option<u64>,
}

/// Writers posting offers in a loop from their own threads, each recording
/// every answer, until stopped.
struct Writers {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Vec<Answer>>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Writers {
    /// `n` writers; writer `w` writes ids chosen by `id(w, k)` for its k-th
    /// write.
    fn start(c: &Catalog, token: &str, n: usize, id: fn(usize, usize) -> String) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..n)
            .map(|w| {
                let (stop, answers) = (stop.clone(), answers.clone());
                let (url, token) = (c.url(""), token.to_string());
                thread::spawn(move || {
                    // Far longer than any answer may take: a hung request
                    // shows up as a too-long `took`, not as a client error.
                    let http = e2e::http::blocking_client(Duration::from_secs(120));
                    let mut k = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let id = id(w, k);
                        k += 1;
                        let body = simple_offer(&id, "compute", "1", json!({"cpu": "1"}));
                        let sent = Instant::now();
                        let r = http
                            .post(format!("{url}/offer/{id}"))
                            .bearer_auth(&token)
                            .json(&body)
                            .send()
                            .unwrap();
                        let took = sent.elapsed();
                        let status = r.status().as_u16();
                        let v: serde_json::Value = r.json().unwrap_or_default();
                        answers.lock().unwrap().push(Answer {
                            id,
                            sent,
                            took,
                            status,
                            message: v["message"].as_str().unwrap_or_default().to_string(),
                            version: v["version"].as_u64(),
                        });
                    }
                })
            })
            .collect();
        Writers {
            stop,
            answers,
            threads,
        }
    }

    fn count(&self) -> usize {
        self.answers.lock().unwrap().len()
    }

    /// Wait until at least `n` answers are recorded.
    #[track_caller]
    fn wait_for(&self, n: usize, what: &str) {
        let deadline = Instant::now() + PATIENCE;
        while self.count() < n {
            assert!(Instant::now() < deadline, "writers never got {what}");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the writers (each finishes its current request): every answer.
    fn stop(self) -> Vec<Answer> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let answers = self.answers.lock().unwrap();
        answers.clone()
    }
}

/// [`TIMEOUT`] as the catalog's flag takes it and its 503s name it.
fn timeout_flag() -> String {
    format!("{TIMEOUT_SECS}s")
}

/// A catalog on `env` with `--mongodb-timeout` [`TIMEOUT`].
fn start_timed(env: &Env) -> Catalog {
    env.start_with(&["--mongodb-timeout", &timeout_flag()])
}

/// `req`, timed.
fn timed(req: impl FnOnce() -> Resp) -> (Resp, Duration) {
    let t = Instant::now();
    let r = req();
    (r, t.elapsed())
}

/// A write of offer `id` answered 503 because of the outage: it names the
/// database and the outage, never contention. If the write itself may have
/// been sent, it says the outcome is unknown and how to find out; if the
/// request failed before (checking the caller's token reads the store
/// too), it just says to retry.
#[track_caller]
fn assert_outage_answer(id: &str, message: &str) {
    assert!(
        message.contains(&format!(
            "the database (MongoDB) did not answer within {}",
            timeout_flag()
        )) || message.contains("the database (MongoDB) is unreachable"),
        "names the outage: {message}"
    );
    assert!(
        !message.contains("too many concurrent"),
        "an outage is not contention: {message}"
    );
    if message.contains("outcome unknown") {
        assert!(
            message.contains(&format!("(GET /offer/{id})")) && message.contains("`version`"),
            "says how to find out: {message}"
        );
    } else {
        assert!(message.ends_with("retry later"), "{message}");
    }
}

/// Whether a 503 says a write's outcome is unknown.
fn outcome_unknown(a: &Answer) -> bool {
    a.status == 503 && a.message.contains("outcome unknown")
}

/// Wait until a write through `c` succeeds again (the database answers).
fn wait_for_writes(c: &Catalog, token: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = c.post("/offer/probe", &thesis_offer(), Some(token));
        if r.status == 200 || r.status == 201 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "writes never succeeded again: {} {}",
            r.status,
            r.text
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn mongo_frozen_database_is_answered_within_the_timeout() {
    let env = Env::new(Backend::Mongo);
    let c = start_timed(&env);
    let token = c.login(&provider(1));
    c.put_offer("before", &thesis_offer(), &token);
    let mongo = env.mongo.as_ref().unwrap();

    // Writers on distinct ids, so nothing but the outage can fail them.
    let writers = Writers::start(&c, &token, 6, |w, k| format!("w{w}-{k}"));
    writers.wait_for(8, "their first answers");
    let frozen_at = Instant::now();
    mongo.freeze().unwrap();
    let thawed = scopeguard(mongo);

    // Every kind of request is answered while the database hangs.
    let (w, took) = timed(|| c.post("/offer/during", &thesis_offer(), Some(&token)));
    assert!(took < TIMEOUT + MARGIN, "write answered after {took:?}");
    assert_outage_answer("during", &w.expect_error(503));
    assert_eq!(w.header("retry-after"), Some("1"));

    let (r, took) = timed(|| c.get("/offers"));
    assert!(
        took < TIMEOUT + MARGIN,
        "GET /offers answered after {took:?}"
    );
    assert!(
        r.status == 200 || r.status == 503,
        "GET /offers: {} {}",
        r.status,
        r.text
    );
    if r.status == 503 {
        assert!(r.expect_error(503).contains("MongoDB"), "{}", r.text);
    }

    let (r, took) = timed(|| c.get("/readyz"));
    assert!(took < PING + MARGIN, "/readyz answered after {took:?}");
    r.expect_error(503);

    // Let the writers run into the freeze for a while (their answers are
    // timed by themselves), then stop them and thaw.
    let during = writers.count();
    writers.wait_for(during + 8, "answers during the freeze");
    let answers = writers.stop();
    drop(thawed);

    for a in &answers {
        assert!(
            a.took < TIMEOUT + MARGIN,
            "write {} answered after {:?}: {} {}",
            a.id,
            a.took,
            a.status,
            a.message
        );
        match a.status {
            200 | 201 => {}
            503 => assert_outage_answer(&a.id, &a.message),
            other => panic!("write {}: unexpected {other} {}", a.id, a.message),
        }
    }
    // Writes in flight when the freeze began were answered too (above,
    // within the bound) — and there were some: each writer loops without
    // pause, so at the freeze each had one on its way or just answered.
    let in_flight = answers
        .iter()
        .filter(|a| a.sent < frozen_at && a.sent + a.took > frozen_at)
        .count();
    assert!(in_flight >= 1, "no write was in flight at the freeze");
    // Some were past checking the token, their write sent: "outcome
    // unknown". (Each writer spends most of a request in the write, so
    // with six of them at least one is caught there.)
    assert!(
        answers.iter().any(outcome_unknown),
        "no write was answered \"outcome unknown\": {:?}",
        answers
            .iter()
            .filter(|a| a.status == 503)
            .collect::<Vec<_>>()
    );
    assert!(
        answers
            .iter()
            .any(|a| a.status == 503 && a.sent > frozen_at),
        "writes sent during the freeze were refused"
    );

    // After the thaw the database answers again, and every write answered
    // 2xx is there, at least at the version it was answered with.
    wait_for_writes(&c, &token);
    c.wait_for_status("/readyz", 200, PATIENCE).unwrap();
    for a in answers.iter().filter(|a| a.status / 100 == 2) {
        let r = c.get(&format!("/offer/{}", a.id));
        assert_eq!(
            r.status, 200,
            "acknowledged write {} lost: {}",
            a.id, r.text
        );
        assert!(
            r.json["version"].as_u64() >= a.version,
            "{}: {} older than the acknowledged {:?}",
            a.id,
            r.json["version"],
            a.version
        );
    }
}

#[test]
fn mongo_outage_is_not_reported_as_contention() {
    let env = Env::new(Backend::Mongo);
    let c = start_timed(&env);
    let token = c.login(&provider(1));
    let mongo = env.mongo.as_ref().unwrap();

    // Many writers on two offers: the backlog a freeze leaves behind is
    // what used to end in "too many concurrent writes".
    let writers = Writers::start(&c, &token, 6, |w, _| format!("hot{}", w % 3));
    writers.wait_for(16, "their first answers");
    mongo.freeze().unwrap();
    let thawed = scopeguard(mongo);
    // Two timeouts' worth of freeze: every writer's request hits the
    // deadline at least once.
    let at_freeze = writers.count();
    writers.wait_for(at_freeze + 16, "answers during the freeze");
    drop(thawed);
    // And through the recovery, until each offer was written again.
    let after = writers.count();
    writers.wait_for(after + 32, "answers after the thaw");
    let answers = writers.stop();

    let refused: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    assert!(!refused.is_empty(), "the freeze refused no write");
    for a in refused {
        assert_outage_answer(&a.id, &a.message);
    }
    assert!(
        answers.iter().rev().take(8).any(|a| a.status / 100 == 2),
        "writes never succeeded after the thaw"
    );
}

#[test]
fn mongo_change_stream_without_history_resyncs_subscribers() {
    let mut env = Env::new(Backend::Mongo);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("catalog.log");
    let c = env.start_with_logs(&[], &log);
    let token = c.login(&provider(1));
    for i in 0..5 {
        c.put_offer(&format!("old{i}"), &thesis_offer(), &token);
    }
    let mut feed = FeedClient::connect(c.port, "?mode=delta").unwrap();
    let first = feed.expect("snapshot", PATIENCE).unwrap();
    // The view follows the change stream, so the snapshot may predate the
    // last writes; they follow as upserts.
    let mut old: std::collections::BTreeSet<String> = snapshot_ids(&first).into_iter().collect();
    let deadline = Instant::now() + PATIENCE;
    while old.len() < 5 {
        let m = feed.next_by(deadline).unwrap();
        assert_eq!(m["type"], "upsert", "{m}");
        old.insert(m["offer"]["id"].as_str().unwrap().to_string());
    }

    // The database comes back empty: the catalog's resume token points
    // into a history the new server never had.
    env.mongo.as_mut().unwrap().restart_empty().unwrap();
    c.wait_for_status("/readyz", 200, PATIENCE).unwrap();
    // The signing key and the account went with the data: register again.
    let token = login_when_ready(&c);
    c.put_offer("new", &thesis_offer(), &token);

    // The subscriber is sent a fresh snapshot: the old offers are gone
    // (and the new one, if the snapshot was taken after it was written;
    // else it follows as an upsert).
    let deadline = Instant::now() + RESYNC;
    loop {
        let m = feed.next_by(deadline).unwrap_or_else(|e| {
            panic!(
                "no fresh snapshot reached the subscriber: {e}; catalog log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        if m["type"] == "snapshot" && !snapshot_ids(&m).iter().any(|id| id.starts_with("old")) {
            break;
        }
    }
    e2e::wait_for_log(&log, "resyncing", PATIENCE);
}

/// `POST /authenticate` until it succeeds (the database just came back).
fn login_when_ready(c: &Catalog) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = c.post("/authenticate", &provider(1), None);
        if r.status == 200 {
            return r.json["token"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "login never worked: {}", r.text);
        thread::sleep(Duration::from_millis(200));
    }
}

/// Thaws the database when dropped, so a failing assertion does not leave
/// it frozen for the rest of the test's teardown.
struct Thaw<'a>(&'a e2e::mongo::MongoServer);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        let _ = self.0.thaw();
    }
}

fn scopeguard(m: &e2e::mongo::MongoServer) -> Thaw<'_> {
    Thaw(m)
}
