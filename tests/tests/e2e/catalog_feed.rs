//! The catalog's live feed (`GET /subscribe`, WebSocket) against the real
//! binary on the embedded store: the thesis behaviour (the full list on
//! connect and after every change, to every subscriber), reconnects, delta
//! mode, filters, a subscriber that stops reading, the connection limit,
//! keep-alive, and shutdown.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Catalog, Env};
use e2e::ws::{snapshot_ids, FeedClient, RawFeed, RawFrame};
use e2e::EVENTUALLY;
use serde_json::{json, Value};

// Every wait for a message, a close or a metric is `EVENTUALLY`, the time a
// subscriber may take to get a write too: the README's 1 s is a latency
// figure for a benchmark, not for a test sharing two cores with others, so
// the deadline is one only a lost message misses.

/// How long the catalog may take to close its subscribers and exit after
/// SIGTERM: a bound on shutdown, not a wait for something eventual.
const STOP: Duration = Duration::from_secs(10);

/// A metric's value from `GET /metrics` (first sample whose name and labels
/// start with `prefix`), 0 if absent.
fn metric(c: &Catalog, prefix: &str) -> f64 {
    let r = c.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.text);
    r.text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn wait_for_metric(c: &Catalog, prefix: &str, ok: impl Fn(f64) -> bool, timeout: Duration) -> f64 {
    let deadline = Instant::now() + timeout;
    loop {
        let v = metric(c, prefix);
        if ok(v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{prefix} stayed at {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn seq(m: &Value) -> u64 {
    m["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("message without a numeric seq: {m}"))
}

/// What the test wrote, as the API documents it comes back: the body sent,
/// with `planName` read as `name`, a missing description as `""`, the
/// quantities the tests write in Kubernetes' canonical form (`"1000m"` →
/// `"1"`), labels as written (`{}` if none), and the owner's `id`, `clusterID`,
/// `clusterName`, `version` and Liqo generations (`v0` for a provider that
/// registered an auth URL) added (`createdAt` and `updatedAt` are checked apart: only the server
/// knows them). Independent of the server's own `GET /offers`, so a feed
/// and a list that are wrong the same way are caught.
fn written(id: &str, body: &Value, owner: &Value, version: u64) -> Value {
    let canonical = |q: &str| match q {
        "1000m" => "1".to_string(),
        "2000m" => "2".to_string(),
        other => other.to_string(),
    };
    let mut plans = serde_json::Map::new();
    for (key, plan) in body["plans"].as_object().unwrap() {
        let mut p = serde_json::Map::new();
        let name = plan.get("name").or_else(|| plan.get("planName")).unwrap();
        p.insert("name".into(), name.clone());
        if let Some(plan_id) = plan.get("planID") {
            p.insert("planID".into(), plan_id.clone());
        }
        p.insert("cost".into(), plan["cost"].clone());
        let resources: serde_json::Map<String, Value> = plan["resources"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), json!(canonical(v.as_str().unwrap()))))
            .collect();
        p.insert("resources".into(), Value::Object(resources));
        plans.insert(key.clone(), Value::Object(p));
    }
    let mut offer = json!({
        "id": id,
        "name": body["name"],
        "type": body["type"],
        "description": body.get("description").cloned().unwrap_or(json!("")),
        "plans": plans,
        "clusterID": owner["clusterID"],
        "clusterName": owner["clusterName"],
        "liqo": if owner["authURL"].as_str().unwrap_or("").is_empty() { json!([]) } else { json!(["v0"]) },
        "version": version,
        // Server-set: the unit of the catalog's prices (its defaults,
        // --currency EUR --cost-period hour).
        "pricing": {"currency": "EUR", "per": "hour"},
    });
    // Labels are returned as written, `{}` when there are none.
    offer["labels"] = body.get("labels").cloned().unwrap_or(json!({}));
    offer
}

/// A listed offer without its server-made timestamps (which must be there).
#[track_caller]
fn without_timestamps(offer: &Value) -> Value {
    let mut o = offer.clone();
    for key in ["createdAt", "updatedAt"] {
        let t = o.as_object_mut().unwrap().remove(key);
        assert!(
            t.as_ref().is_some_and(Value::is_string),
            "{key} missing in {offer}"
        );
    }
    // Each plan's stamps (who last changed it, when): this test writes as the provider.
    if let Some(plans) = o["plans"].as_object_mut() {
        for plan in plans.values_mut() {
            let p = plan.as_object_mut().unwrap();
            assert!(
                p.remove("updatedAt").is_some_and(|t| t.is_string()),
                "plan updatedAt missing in {offer}"
            );
            assert_eq!(
                p.remove("updatedBy"),
                Some(json!("provider")),
                "plan updatedBy in {offer}"
            );
        }
    }
    o
}

/// The offers of a snapshot, by id order, compared with what was written.
#[track_caller]
fn assert_is_written(offers: &Value, expected: &BTreeMap<String, Value>, what: &str) {
    let got: Vec<Value> = offers
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not a list: {offers}"))
        .iter()
        .map(without_timestamps)
        .collect();
    let want: Vec<Value> = expected.values().cloned().collect();
    assert_eq!(got, want, "{what} is not what was written");
}

/// Every subscriber gets a snapshot equal to what was written within
/// [`EVENTUALLY`] of `since`, with a larger `seq` than its last one.
#[track_caller]
fn all_get_the_list(
    expected: &BTreeMap<String, Value>,
    subs: &mut [FeedClient],
    last_seq: &mut [u64],
    since: Instant,
) {
    for (i, s) in subs.iter_mut().enumerate() {
        let m = s
            .next_by(since + EVENTUALLY)
            .unwrap_or_else(|e| panic!("subscriber {i}: {e}"));
        assert_eq!(m["type"], "snapshot", "subscriber {i}: {m}");
        assert_is_written(&m["offers"], expected, &format!("subscriber {i}'s list"));
        assert!(
            seq(&m) > last_seq[i],
            "subscriber {i}: seq went from {} to {}",
            last_seq[i],
            seq(&m)
        );
        last_seq[i] = seq(&m);
    }
}

#[test]
fn the_full_list_on_connect_and_after_every_change_to_every_subscriber() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let owner = provider(1);
    let token = c.login(&owner);
    let mut expected = BTreeMap::new();
    c.put_offer("storage", &thesis_offer(), &token);
    expected.insert(
        "storage".to_string(),
        written("storage", &thesis_offer(), &owner, 1),
    );

    let mut subs: Vec<FeedClient> = (0..3)
        .map(|_| FeedClient::connect(c.port, "?mode=snapshot").unwrap())
        .collect();
    let mut last = vec![0; subs.len()];
    for (i, s) in subs.iter_mut().enumerate() {
        let m = s.expect("snapshot", EVENTUALLY).unwrap();
        assert_is_written(&m["offers"], &expected, "the first message");
        assert_eq!(m["offers"], c.all_offers(), "the feed and GET /offers");
        last[i] = seq(&m);
    }

    // Create.
    let gpu = simple_offer("GPU box", "gpu", "3.5", json!({"nvidia.com/gpu": "1"}));
    c.put_offer("gpu", &gpu, &token);
    expected.insert("gpu".to_string(), written("gpu", &gpu, &owner, 1));
    all_get_the_list(&expected, &mut subs, &mut last, Instant::now());
    // Replace.
    let mut cheaper = thesis_offer();
    cheaper["plans"]["basic"]["cost"] = json!("0.5");
    c.put_offer("storage", &cheaper, &token);
    expected.insert(
        "storage".to_string(),
        written("storage", &cheaper, &owner, 2),
    );
    all_get_the_list(&expected, &mut subs, &mut last, Instant::now());
    // Delete.
    assert_eq!(c.delete("/offer/storage", Some(&token)).status, 204);
    expected.remove("storage");
    let since = Instant::now();
    all_get_the_list(&expected, &mut subs, &mut last, since);
    assert_eq!(c.list_ids(""), ["gpu"]);

    // A refused write (another provider's offer) broadcasts nothing.
    let other = c.login(&provider(2));
    c.post("/offer/gpu", &thesis_offer(), Some(&other))
        .expect_error(403);
    c.put_offer("other", &thesis_offer(), &other);
    for s in &mut subs {
        assert_eq!(
            snapshot_ids(&s.expect("snapshot", EVENTUALLY).unwrap()),
            ["gpu", "other"]
        );
    }
    assert!(metric(&c, "catalog_feed_messages_sent_total") >= 15.0);
    assert_eq!(metric(&c, "catalog_feed_subscribers "), 3.0);
}

#[test]
fn a_reconnect_gets_the_full_list_again() {
    let env = Env::new(Backend::Embedded);
    let mut c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);

    let mut s = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    assert_eq!(
        snapshot_ids(&s.expect("snapshot", EVENTUALLY).unwrap()),
        ["a"]
    );
    s.close();

    // Changes while nobody listens.
    c.put_offer("b", &thesis_offer(), &token);
    c.put_offer("c", &thesis_offer(), &token);
    assert_eq!(c.delete("/offer/a", Some(&token)).status, 204);

    let mut s = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    let m = s.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(m["offers"], c.all_offers());
    assert_eq!(snapshot_ids(&m), ["b", "c"]);

    // Across a restart too: the server keeps no subscriber state.
    let before = c.all_offers();
    c.child.terminate(STOP).unwrap();
    let c = env.start();
    let mut s = FeedClient::connect(c.port, "?mode=delta").unwrap();
    assert_eq!(s.expect("snapshot", EVENTUALLY).unwrap()["offers"], before);
}

/// Apply feed messages to a local copy of the list, as a delta client does.
fn apply(view: &mut BTreeMap<String, Value>, m: &Value) {
    match m["type"].as_str() {
        Some("snapshot") => {
            view.clear();
            for o in m["offers"].as_array().unwrap() {
                view.insert(o["id"].as_str().unwrap().to_string(), o.clone());
            }
        }
        Some("upsert") => {
            view.insert(
                m["offer"]["id"].as_str().unwrap().to_string(),
                m["offer"].clone(),
            );
        }
        Some("delete") => {
            view.remove(m["id"].as_str().unwrap());
        }
        _ => panic!("unexpected message {m}"),
    }
}

fn as_list(view: &BTreeMap<String, Value>) -> Value {
    Value::Array(view.values().cloned().collect())
}

#[test]
fn delta_mode_the_default_sends_one_list_then_upserts_and_deletes() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);

    // The second asks for no mode: delta is the default.
    let mut deltas: Vec<FeedClient> = ["?mode=delta", ""]
        .iter()
        .map(|q| FeedClient::connect(c.port, q).unwrap())
        .collect();
    let mut thesis = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    let mut views = vec![BTreeMap::new(); deltas.len()];
    let mut seqs = vec![0; deltas.len()];
    for (i, d) in deltas.iter_mut().enumerate() {
        let m = d.expect("snapshot", EVENTUALLY).unwrap();
        seqs[i] = seq(&m);
        apply(&mut views[i], &m);
    }
    let thesis_seq = seq(&thesis.expect("snapshot", EVENTUALLY).unwrap());

    let created = c.put_offer(
        "b",
        &simple_offer("B", "compute", "1", json!({"cpu": "4"})),
        &token,
    );
    let t_create = Instant::now();
    let mut replacement = thesis_offer();
    replacement["description"] = json!("Now with more storage.");
    let replaced = c.put_offer("a", &replacement, &token);
    let t_replace = Instant::now();
    assert_eq!(c.delete("/offer/b", Some(&token)).status, 204);
    let t_delete = Instant::now();

    for (i, d) in deltas.iter_mut().enumerate() {
        let m = d.next_by(t_create + EVENTUALLY).unwrap();
        assert_eq!(
            m,
            json!({"type": "upsert", "seq": seqs[i] + 1, "offer": created})
        );
        apply(&mut views[i], &m);
        let m = d.next_by(t_replace + EVENTUALLY).unwrap();
        assert_eq!(
            m,
            json!({"type": "upsert", "seq": seqs[i] + 2, "offer": replaced})
        );
        apply(&mut views[i], &m);
        let m = d.next_by(t_delete + EVENTUALLY).unwrap();
        assert_eq!(m, json!({"type": "delete", "seq": seqs[i] + 3, "id": "b"}));
        apply(&mut views[i], &m);
        assert_eq!(
            as_list(&views[i]),
            c.all_offers(),
            "subscriber {i} rebuilt the list from deltas"
        );
        d.expect_silence(Duration::from_millis(200)).unwrap();
    }
    // The thesis-mode subscriber on the same server gets whole lists; a
    // list it has not taken yet is superseded by a newer one (documented),
    // so on a busy machine the three changes may arrive as fewer lists:
    // read until the list of the last change.
    loop {
        let m = thesis.next_by(t_delete + EVENTUALLY).unwrap();
        assert_eq!(m["type"], "snapshot", "{m}");
        if seq(&m) == thesis_seq + 3 {
            assert_eq!(m["offers"], c.all_offers());
            break;
        }
        assert!(seq(&m) < thesis_seq + 3, "{m}");
    }
    thesis.expect_silence(Duration::from_millis(200)).unwrap();
    // Nothing more was on its way: the next message each gets is the one
    // for a later write.
    let marker = c.put_offer("marker", &thesis_offer(), &token);
    let t_marker = Instant::now();
    for (i, d) in deltas.iter_mut().enumerate() {
        let m = d.next_by(t_marker + EVENTUALLY).unwrap();
        assert_eq!(
            m,
            json!({"type": "upsert", "seq": seqs[i] + 4, "offer": marker}),
            "subscriber {i}: an extra message before the marker's"
        );
    }
    let m = thesis.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(snapshot_ids(&m), ["a", "marker"], "{m}");
    assert_eq!(
        metric(&c, "catalog_feed_subscribers_by_mode{mode=\"delta\"}"),
        2.0
    );
}

#[test]
fn filters_apply_to_the_feed_as_to_the_list() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    let gpu = |mem: &str| {
        simple_offer(
            "GPU",
            "gpu",
            "3",
            json!({"nvidia.com/gpu": "1", "memory": mem}),
        )
    };
    let cpu = |mem: &str| simple_offer("CPU", "compute", "1", json!({"cpu": "8", "memory": mem}));
    c.put_offer("gpu", &gpu("8Gi"), &token);
    c.put_offer("cpu", &cpu("2Gi"), &token);

    let mut by_type = FeedClient::connect(c.port, "?mode=snapshot&type=gpu").unwrap();
    let mut by_memory = FeedClient::connect(c.port, "?mode=delta&min.memory=4Gi").unwrap();
    let m = by_type.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(m["offers"], c.get("/offers?type=gpu").json);
    let m = by_memory.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(m["offers"], c.get("/offers?min.memory=4Gi").json);
    assert_eq!(snapshot_ids(&m), ["gpu"]);
    let mut view = BTreeMap::new();
    apply(&mut view, &m);

    // A change outside both views sends nothing: the next message each gets
    // is the one for the later change that does touch its view.
    c.put_offer("cpu", &cpu("3Gi"), &token);
    // The CPU offer grows into the memory view (an upsert there only).
    let grown = c.put_offer("cpu", &cpu("16Gi"), &token);
    let m = by_memory.next_by(Instant::now() + EVENTUALLY).unwrap();
    assert_eq!(m["type"], "upsert");
    assert_eq!(m["offer"], grown);
    apply(&mut view, &m);
    // The GPU offer shrinks out of the memory view: a delete there; the type
    // view gets its new list.
    c.put_offer("gpu", &gpu("1Gi"), &token);
    let t = Instant::now();
    let m = by_memory.next_by(t + EVENTUALLY).unwrap();
    assert_eq!(m["type"], "delete");
    assert_eq!(m["id"], "gpu");
    apply(&mut view, &m);
    assert_eq!(as_list(&view), c.get("/offers?min.memory=4Gi").json);
    let m = by_type.next_by(t + EVENTUALLY).unwrap();
    assert_eq!(m["type"], "snapshot");
    assert_eq!(m["offers"], c.get("/offers?type=gpu").json);
    assert_eq!(
        m["offers"][0]["plans"]["only"]["resources"]["memory"],
        "1Gi"
    );
    by_type.expect_silence(Duration::from_millis(300)).unwrap();
    // Nothing more was on its way: the next message is a later change's.
    c.put_offer("gpu", &gpu("2Gi"), &token);
    let m = by_type.next_by(Instant::now() + EVENTUALLY).unwrap();
    assert_eq!(m["type"], "snapshot", "{m}");
    assert_eq!(
        m["offers"][0]["plans"]["only"]["resources"]["memory"], "2Gi",
        "an extra message before the marker's: {m}"
    );

    // Bad subscriptions are refused before the upgrade, naming the problem.
    for (query, field) in [
        ("?min.memory=lots", "min.memory"),
        ("?mode=fast", "mode"),
        ("?colour=red", "colour"),
    ] {
        let r = FeedClient::try_connect(c.port, query)
            .unwrap()
            .err()
            .unwrap_or_else(|| panic!("{query} accepted"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        let body: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["field"], field, "{query}: {}", r.body);
    }
    // A plain GET is not an upgrade.
    let r = c.get("/subscribe");
    assert!(r.expect_error(400).contains("WebSocket"), "{}", r.text);
}

#[test]
fn a_subscriber_that_stops_reading_is_disconnected_and_the_others_keep_up() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--feed-send-timeout", "2s"]);
    let token = c.login(&provider(1));
    // Big offers, so the lists quickly fill a non-reader's socket buffers.
    let big = |i: usize| {
        let mut o = thesis_offer();
        o["description"] = json!(format!("{i:04} {}", "x".repeat(8000)));
        o
    };
    for i in 0..20 {
        c.put_offer(&format!("big-{i:02}"), &big(i), &token);
    }
    // Two subscribers that stop reading after the first list: one will read
    // again later, one never will.
    let mut late = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    late.expect("snapshot", EVENTUALLY).unwrap();
    let never = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    let mut healthy = vec![
        FeedClient::connect(c.port, "?mode=snapshot").unwrap(),
        FeedClient::connect(c.port, "?mode=snapshot").unwrap(),
        FeedClient::connect(c.port, "?mode=delta").unwrap(),
    ];
    for h in &mut healthy {
        h.expect("snapshot", EVENTUALLY).unwrap();
    }

    // Keep publishing; the healthy subscribers get every change on time
    // while the two non-readers fall behind and are disconnected.
    let deadline = Instant::now() + EVENTUALLY;
    let mut updates = 0;
    while metric(&c, "catalog_feed_slow_disconnects_total") < 2.0 {
        assert!(
            Instant::now() < deadline,
            "the non-readers were never disconnected"
        );
        let i = updates % 20;
        let stored = c.put_offer(&format!("big-{i:02}"), &big(i + updates), &token);
        let t = Instant::now();
        for (n, h) in healthy.iter_mut().enumerate() {
            let m = h
                .next_by(t + EVENTUALLY)
                .unwrap_or_else(|e| panic!("healthy subscriber {n}, update {updates}: {e}"));
            match m["type"].as_str() {
                Some("snapshot") => assert!(m["offers"].as_array().unwrap().contains(&stored)),
                _ => assert_eq!(m["offer"], stored),
            }
        }
        updates += 1;
    }
    assert!(
        updates >= 5,
        "disconnected after only {updates} updates: not for being slow"
    );

    // The one that reads again drains what was sent and finds the close
    // frame: 1008, too slow.
    let (code, reason) = late.expect_close(EVENTUALLY).unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("too slow"), "{reason}");
    // The one that never reads is cut: only the healthy stay connected.
    wait_for_metric(&c, "catalog_feed_subscribers ", |v| v == 3.0, EVENTUALLY);
    assert!(metric(&c, "catalog_feed_closes_total{reason=\"cut\"}") >= 1.0);
    drop(never);

    // The healthy ones still get the next change on time; a reconnect gets
    // the full list.
    let stored = c.put_offer("big-00", &big(999), &token);
    let t = Instant::now();
    for h in &mut healthy {
        let m = h.next_by(t + EVENTUALLY).unwrap();
        assert!(m
            .to_string()
            .contains(stored["description"].as_str().unwrap()));
    }
    let mut again = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    assert_eq!(
        again.expect("snapshot", EVENTUALLY).unwrap()["offers"],
        c.all_offers()
    );
}

#[test]
fn the_connection_limit_answers_503() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--feed-max-subscribers", "2"]);
    let mut a = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    let _b = FeedClient::connect(c.port, "?mode=delta").unwrap();
    a.expect("snapshot", EVENTUALLY).unwrap();
    let refused = FeedClient::try_connect(c.port, "?mode=snapshot")
        .unwrap()
        .err()
        .expect("a third subscriber is refused");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.body.contains("maximum of 2 subscribers"),
        "{}",
        refused.body
    );
    assert_eq!(metric(&c, "catalog_feed_refused_total"), 1.0);

    a.close();
    wait_for_metric(&c, "catalog_feed_subscribers ", |v| v == 1.0, EVENTUALLY);
    let mut c3 = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    c3.expect("snapshot", EVENTUALLY).unwrap();
}

#[test]
fn pings_keep_subscribers_alive_and_silent_ones_are_closed() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--feed-ping-interval", "200ms", "--feed-idle-timeout", "1s"]);
    let token = c.login(&provider(1));

    // A client that never answers: snapshot, pings, then 1001.
    // Before the connection: the server's idle clock starts while it is
    // made, so only a start taken earlier bounds the close from below.
    let started = Instant::now();
    let mut mute = RawFeed::connect(c.port, "?mode=snapshot").unwrap();
    let first = mute.next_frame(EVENTUALLY).unwrap();
    assert_eq!(first.opcode, RawFrame::TEXT);
    let mut pings = 0;
    let close = loop {
        let f = mute.next_frame(EVENTUALLY).unwrap();
        match f.opcode {
            RawFrame::PING => pings += 1,
            RawFrame::CLOSE => break f,
            other => panic!("unexpected frame {other}"),
        }
    };
    assert!(pings >= 2, "only {pings} pings before the idle close");
    assert_eq!(close.close_code(), Some(1001));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "closed before the idle timeout"
    );

    // A client that answers (tungstenite pongs while reading) stays.
    let mut alive = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    alive.expect("snapshot", EVENTUALLY).unwrap();
    alive.expect_silence(Duration::from_millis(2500)).unwrap();
    c.put_offer("late", &thesis_offer(), &token);
    assert_eq!(
        snapshot_ids(&alive.expect("snapshot", EVENTUALLY).unwrap()),
        ["late"]
    );
    assert!(metric(&c, "catalog_feed_closes_total{reason=\"idle\"}") >= 1.0);
}

#[test]
fn client_frames_beyond_the_limit_are_refused() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let mut s = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    s.expect("snapshot", EVENTUALLY).unwrap();
    // Small messages are ignored; the feed stays open.
    s.send(tungstenite::Message::text("hello")).unwrap();
    s.expect_silence(Duration::from_millis(300)).unwrap();
    s.send(tungstenite::Message::text("x".repeat(10_000)))
        .unwrap();
    let (code, _) = s.expect_close(EVENTUALLY).unwrap();
    assert_eq!(code, 1009);
}

#[test]
fn shutdown_closes_every_subscriber_with_going_away() {
    let env = Env::new(Backend::Embedded);
    let mut c = env.start();
    let mut subs: Vec<FeedClient> = ["?mode=snapshot", "?mode=delta", "?type=gpu", ""]
        .iter()
        .map(|q| FeedClient::connect(c.port, q).unwrap())
        .collect();
    for s in &mut subs {
        s.expect("snapshot", EVENTUALLY).unwrap();
    }
    // One that never reads must not hold the shutdown up for long.
    let _stuck = FeedClient::connect(c.port, "?mode=snapshot").unwrap();
    let started = Instant::now();
    c.child.signal_term();
    for s in &mut subs {
        let (code, reason) = s.expect_close(STOP).unwrap();
        assert_eq!(code, 1001, "{reason}");
    }
    let status = c.child.wait(STOP).unwrap();
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        started.elapsed()
    );
}

#[test]
fn compressing_subscribers_get_the_same_messages_deflated() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    for i in 0..5 {
        c.put_offer(&format!("o{i}"), &thesis_offer(), &token);
    }
    // What browsers offer: accepted, with no context takeover either way
    // (each message compressed on its own, so one copy serves everyone).
    let mut zipped = RawFeed::connect_with(
        c.port,
        "?mode=delta",
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
    )
    .unwrap();
    let head = zipped.head.to_ascii_lowercase();
    assert!(
        head.contains(
            "sec-websocket-extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        ),
        "{head}"
    );
    let mut plain = FeedClient::connect(c.port, "?mode=delta").unwrap();

    let f = zipped.next_message(EVENTUALLY).unwrap();
    assert!(f.compressed, "the list should come compressed");
    assert!(
        f.payload.len() * 3 < f.message().unwrap().len(),
        "five similar offers compress well"
    );
    let list = f.json().unwrap();
    assert_eq!(list["offers"], c.all_offers());
    assert_eq!(list, plain.expect("snapshot", EVENTUALLY).unwrap());

    let created = c.put_offer(
        "new",
        &simple_offer("New", "compute", "1", json!({"cpu": "1"})),
        &token,
    );
    let f = zipped.next_message(EVENTUALLY).unwrap();
    assert!(f.compressed);
    let m = f.json().unwrap();
    assert_eq!(m["offer"], created);
    assert_eq!(m, plain.expect("upsert", EVENTUALLY).unwrap());

    // An offer the feed cannot honour (a smaller server window) is declined:
    // plain frames.
    let mut declined = RawFeed::connect_with(
        c.port,
        "",
        "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=9\r\n",
    )
    .unwrap();
    assert!(
        !declined
            .head
            .to_ascii_lowercase()
            .contains("permessage-deflate"),
        "{}",
        declined.head
    );
    let f = declined.next_message(EVENTUALLY).unwrap();
    assert!(!f.compressed);
    assert_eq!(f.json().unwrap()["offers"], c.all_offers());
}
