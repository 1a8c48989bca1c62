//! The contract change stream, `GET /contract-changes` (issue 44), against
//! the real catalog binary on both stores: a provider's and a consumer's streams carry their own
//! contract's purchase, state report and end as lines, and nothing of
//! another party's contracts — not through a resume naming the sequence
//! of another party's change either; a resume after a catalog restart
//! gets exactly the changes it missed, each once; a sequence ahead of the
//! store gets a snapshot saying why; a second stream beyond the
//! identity's limit is 429; bad tokens 401, a bad `since` 400. On
//! MongoDB, a change written through one catalog process reaches a stream
//! on another, and a resume across a restart of the database gets exactly
//! what was missed.
//!
//! A stream has sent everything of its party up to `seq` once a heartbeat
//! carries `seq` (what a heartbeat promises), so "nothing else came" is
//! checked without waiting for a while. The heartbeat is the catalog's
//! `--contract-stream-heartbeat`.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use e2e::buying::{self, admin, consumer, delete, publish, put};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::contracts::buy;
use serde_json::{json, Value};

e2e::catalog_tests!(
    parties_see_their_own_contracts_and_nothing_else,
    a_resume_after_a_restart_gets_exactly_the_missed_changes,
    limits_and_bad_requests,
);

/// MongoDB only: several catalog processes on one database.
#[test]
fn a_change_through_one_catalog_reaches_a_stream_on_another_and_survives_a_database_restart() {
    a_change_through_one_catalog_reaches_a_stream_on_another(Backend::Mongo)
}

const FLAGS: &[&str] = &["--contract-stream-heartbeat", "200ms"];

/// One stream's lines, read as they come.
struct Stream {
    lines: BufReader<reqwest::blocking::Response>,
}

impl Stream {
    /// The next line; None when the stream ended.
    fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.lines.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("a JSON line")),
        }
    }

    /// The lines before a heartbeat at `seq` or later (by which everything
    /// of the party up to `seq` was sent), heartbeats left out.
    fn until(&mut self, seq: u64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let line = self.next().expect("the stream is open");
            if line["type"] == "heartbeat" {
                if line["seq"].as_u64().unwrap() >= seq {
                    return out;
                }
            } else {
                out.push(line);
            }
        }
    }

    /// Change lines until `done` says the ones read are enough.
    fn changes_until(&mut self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        while !done(&out) {
            let line = self.next().expect("the stream is open");
            if line["type"] == "change" {
                out.push(line);
            }
        }
        out
    }
}

/// `GET /contract-changes?query` as `token`: the stream, or the error
/// answer's status and body.
fn follow(c: &Catalog, token: Option<&str>, query: &str) -> Result<Stream, (u16, Value)> {
    // The streams of these tests last seconds; a stuck one fails the test.
    let client = e2e::http::blocking_client(Duration::from_secs(120));
    let mut req = client.get(c.url(&format!("/contract-changes?{query}")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().expect("GET /contract-changes");
    let status = r.status().as_u16();
    if status != 200 {
        let body: Value = r.json().unwrap_or(Value::Null);
        return Err((status, body));
    }
    assert_eq!(
        r.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/x-ndjson")
    );
    Ok(Stream {
        lines: BufReader::new(r),
    })
}

fn opened(c: &Catalog, token: &str, query: &str) -> Stream {
    follow(c, Some(token), query).unwrap_or_else(|(s, b)| panic!("{s}: {b}"))
}

fn purchase(c: &Catalog, token: &str, offer: &str) -> String {
    let r = buy(c, token, offer, "small", &json!({}));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json["id"].as_str().unwrap().to_string()
}

fn report(c: &Catalog, token: &str, id: &str, state: &str) {
    let r = put(
        c,
        &format!("/contracts/{id}/state"),
        &json!({ "state": state }),
        Some(token),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

fn end(c: &Catalog, token: &str, id: &str) {
    let r = delete(c, &format!("/purchases/{id}"), Some(token));
    assert_eq!(r.status, 200, "{}", r.text);
}

fn seq(line: &Value) -> u64 {
    line["seq"].as_u64().unwrap()
}

fn ids(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| l["contract"]["id"].as_str().unwrap())
        .collect()
}

fn ended(lines: &[Value], id: &str) -> bool {
    lines
        .iter()
        .any(|l| l["contract"]["id"] == id && l["contract"]["active"] == false)
}

fn parties_see_their_own_contracts_and_nothing_else(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, FLAGS);
    let shop = publish(&c, 1, "shop");
    let mart = publish(&c, 2, "mart");
    let root = admin(&c);
    let alice = consumer(&c, &root, "alice");
    let bob = consumer(&c, &root, "bob");

    let mut streams: Vec<Stream> = [&alice, &shop, &bob, &mart, &root]
        .iter()
        .map(|t| opened(&c, t, "active=true"))
        .collect();
    for s in &mut streams {
        let first = s.next().unwrap();
        assert_eq!(first["type"], "snapshot", "{first}");
        assert_eq!(first["contracts"], json!([]));
    }
    let a = purchase(&c, &alice, "shop");
    report(&c, &alice, &a, "ready");
    end(&c, &alice, &a);
    let b = purchase(&c, &bob, "mart");

    // The administrator sees every write, in sequence order.
    let all = streams[4].changes_until(|l| ended(l, &a) && ids(l).contains(&b.as_str()));
    let head = seq(all.last().unwrap());
    assert!(all.windows(2).all(|w| seq(&w[0]) < seq(&w[1])));
    assert!(all
        .iter()
        .all(|l| l["contract"].get("networkPolicy").is_none()));

    let [alice_s, shop_s, bob_s, mart_s, _] = &mut streams[..] else {
        unreachable!()
    };
    for (who, s, id) in [("alice", alice_s, &a), ("provider 1", shop_s, &a)] {
        let lines = s.until(head);
        assert!(
            lines
                .iter()
                .all(|l| l["type"] == "change" && l["contract"]["id"] == *id),
            "{who} saw another's contract: {lines:?}"
        );
        assert!(lines.windows(2).all(|w| seq(&w[0]) < seq(&w[1])));
        let first = &lines[0]["contract"];
        assert_eq!(
            (&first["active"], &first["state"]),
            (&json!(true), &json!("pending"))
        );
        assert!(
            lines.iter().any(|l| l["contract"]["state"] == "ready"),
            "{who}"
        );
        let last = &lines.last().unwrap()["contract"];
        assert_eq!(
            (&last["active"], &last["ended"]),
            (&json!(false), &json!("cancelled"))
        );
        assert!(lines
            .iter()
            .all(|l| l["contract"].get("credentials").is_none()));
    }
    for (who, s) in [("bob", bob_s), ("provider 2", mart_s)] {
        let lines = s.until(head);
        assert_eq!(ids(&lines), [b.as_str()], "{who}");
    }
}

fn a_resume_after_a_restart_gets_exactly_the_missed_changes(backend: Backend) {
    let env = Env::new(backend);
    let mut c = buying::start(&env, FLAGS);
    publish(&c, 1, "shop");
    let root = admin(&c);
    let alice = consumer(&c, &root, "alice");
    let bob = consumer(&c, &root, "bob");

    let mut s = opened(&c, &alice, "");
    s.next().unwrap();
    let a = purchase(&c, &alice, "shop");
    let got = s.changes_until(|l| !l.is_empty());
    assert_eq!(ids(&got), [a.as_str()]);
    let since = seq(&got[0]);
    drop(s);

    // Missed while away: a report on `a`, a second purchase, a contract of
    // bob's — then the catalog restarts.
    report(&c, &alice, &a, "peered");
    let a2 = purchase(&c, &alice, "shop");
    let b = purchase(&c, &bob, "shop");
    let mut r = opened(&c, &root, &format!("since={since}"));
    assert_eq!(r.next().unwrap(), json!({"type": "resumed", "seq": since}));
    let missed = r.changes_until(|l| ids(l).contains(&b.as_str()));
    let head = seq(missed.last().unwrap());
    let bobs_seq = seq(missed.iter().find(|l| l["contract"]["id"] == b).unwrap());
    drop(r);
    c.child.terminate(Duration::from_secs(15)).unwrap();
    let c = buying::start(&env, FLAGS);

    let mut s = opened(&c, &alice, &format!("since={since}"));
    assert_eq!(s.next().unwrap(), json!({"type": "resumed", "seq": since}));
    let lines = s.until(head);
    // Exactly what alice missed, each once, as it now is.
    assert_eq!(ids(&lines), [a.as_str(), a2.as_str()]);
    assert_eq!(lines[0]["contract"]["state"], "peered");
    for l in &lines {
        let id = l["contract"]["id"].as_str().unwrap();
        let now = buying::get(&c, &format!("/contracts/{id}"), Some(&alice));
        assert_eq!(now.json["state"], l["contract"]["state"]);
    }
    // And what happens next, live.
    end(&c, &alice, &a2);
    let live = s.changes_until(|l| !l.is_empty());
    assert_eq!(ids(&live), [a2.as_str()]);
    assert!(seq(&live[0]) > head);
    let head = seq(&live[0]);

    // A resume naming the sequence of bob's change brings alice nothing of
    // bob's, and bob nothing of alice's.
    let mut s = opened(&c, &alice, &format!("since={}", bobs_seq - 1));
    s.next().unwrap();
    assert_eq!(ids(&s.until(head)), [a2.as_str()]);
    let mut s = opened(&c, &bob, &format!("since={}", since - 1));
    s.next().unwrap();
    assert_eq!(ids(&s.until(head)), [b.as_str()]);

    // A sequence this store never reached: a snapshot that says why.
    let mut s = opened(&c, &alice, &format!("since={}", head + 1_000));
    let snap = s.next().unwrap();
    assert_eq!(snap["type"], "snapshot");
    assert_eq!(seq(&snap), head);
    assert!(snap["reason"].as_str().unwrap().contains("ahead"), "{snap}");
    let mut listed: Vec<&str> = snap["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    listed.sort();
    let mut want = vec![a.as_str(), a2.as_str()];
    want.sort();
    assert_eq!(listed, want);
}

fn limits_and_bad_requests(backend: Backend) {
    let env = Env::new(backend);
    let mut flags = FLAGS.to_vec();
    flags.extend(["--contract-stream-per-identity", "1"]);
    let c = buying::start(&env, &flags);
    let root = admin(&c);
    let alice = consumer(&c, &root, "alice");
    let first = opened(&c, &alice, "");
    let (status, body) = follow(&c, Some(&alice), "").err().unwrap();
    assert_eq!(status, 429, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("--contract-stream-per-identity"),
        "{body}"
    );
    // Another identity has its own allowance; a closed stream frees one.
    opened(&c, &root, "");
    drop(first);
    e2e::contracts::wait_for("alice's stream place freed", || {
        follow(&c, Some(&alice), "").ok()
    });

    assert_eq!(follow(&c, None, "").err().unwrap().0, 401);
    assert_eq!(follow(&c, Some("nope"), "").err().unwrap().0, 401);
    for (query, field) in [
        ("since=later", "since"),
        ("active=1", "active"),
        ("x=1", "x"),
    ] {
        let (status, body) = follow(&c, Some(&root), query).err().unwrap();
        assert_eq!(
            (status, &body["field"]),
            (400, &json!(field)),
            "{query}: {body}"
        );
    }
}

fn a_change_through_one_catalog_reaches_a_stream_on_another(backend: Backend) {
    let mut env = Env::new(backend);
    let one = buying::start(&env, FLAGS);
    let two = buying::start(&env, FLAGS);
    publish(&one, 1, "shop");
    let root = admin(&one);
    let alice = consumer(&one, &root, "alice");

    // Bought through one, seen on the other's stream.
    let mut s = opened(&two, &alice, "");
    assert_eq!(s.next().unwrap()["type"], "snapshot");
    let a = purchase(&one, &alice, "shop");
    let got = s.changes_until(|l| !l.is_empty());
    assert_eq!(ids(&got), [a.as_str()]);
    let since = seq(&got[0]);
    drop(s);

    // Missed while the database restarts: a report through one catalog,
    // a second purchase through the other.
    drop(one);
    drop(two);
    let mongo = env.mongo.as_mut().unwrap();
    mongo.stop();
    mongo.restart().unwrap();
    let one = buying::start(&env, FLAGS);
    let two = buying::start(&env, FLAGS);
    report(&one, &alice, &a, "peered");
    let a2 = purchase(&two, &alice, "shop");
    let head = seq(opened(&one, &root, &format!("since={since}"))
        .changes_until(|l| ids(l).contains(&a2.as_str()))
        .last()
        .unwrap());

    // Resumed on either process: exactly the two changes, once each.
    for c in [&one, &two] {
        let mut r = opened(c, &alice, &format!("since={since}"));
        assert_eq!(r.next().unwrap(), json!({"type": "resumed", "seq": since}));
        let lines = r.until(head);
        assert_eq!(ids(&lines), [a.as_str(), a2.as_str()]);
        assert_eq!(lines[0]["contract"]["state"], "peered");
    }
}
