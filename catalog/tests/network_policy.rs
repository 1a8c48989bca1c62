//! A buyer's network policy carried on its contract, against the real
//! catalog binary on both stores: the contract's consumer sets it (each
//! change the next revision, the same policy again changing nothing),
//! replaces and removes it; nobody else can (404 for another buyer, 403
//! for the provider); a policy or report the wire checks refuse is 400
//! naming the field, nothing stored; an ended contract's policy no longer
//! changes (409); the provider reports what it did, which the buyer reads
//! (a report of a revision that never was: 409); the provider's listing
//! carries the policy and its ETag follows it; and the policy survives a
//! restart.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::buying::{self, admin, consumer, delete, get, publish, put};
use e2e::catalog::{Backend, Catalog, Env, Resp};
use e2e::catalog_tests;
use e2e::contracts::buy;
use serde_json::{json, Value};

catalog_tests!(
    the_buyer_sets_replaces_and_removes_its_policy,
    the_provider_reports_and_the_buyer_reads_it,
    an_ended_contracts_policy_no_longer_changes,
    the_policy_survives_a_restart,
);

fn policy(namespace: &str, port: u16) -> Value {
    json!({"policies": [{
        "name": "shop/backend",
        "namespace": namespace,
        "podSelector": {"matchLabels": {"app": "backend"}},
        "ingress": [{
            "peers": [
                {"podSelector": {"matchLabels": {"app": "frontend"}}},
                {"ipBlock": {"cidr": "10.0.0.7/32"}}
            ],
            "ports": [{"port": port}, {"protocol": "TCP", "port": "http"}]
        }]
    }]})
}

fn path(id: &str) -> String {
    format!("/contracts/{id}/network-policy")
}

fn status_path(id: &str) -> String {
    format!("/provider/contracts/{id}/network-policy/status")
}

/// A catalog with provider 1 selling `shop`, consumers alice and bob, and
/// a contract alice bought: (catalog, seller, alice, bob, admin, id).
fn bought(env: &Env) -> (Catalog, String, String, String, String, String) {
    let c = buying::start(env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let r = buy(&c, &alice, "shop", "small", &json!({}));
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().unwrap().to_string();
    (c, seller, alice, bob, admin, id)
}

/// `GET /contracts?active=true` as `token`, with `If-None-Match: tag`.
fn listing(c: &Catalog, token: &str, tag: Option<&str>) -> Resp {
    let mut req = buying::client()
        .get(c.url("/contracts?active=true"))
        .bearer_auth(token);
    if let Some(tag) = tag {
        req = req.header("If-None-Match", tag);
    }
    c.send(req).unwrap()
}

/// The contract `id` in a listing.
fn listed<'a>(r: &'a Resp, id: &str) -> &'a Value {
    r.json
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {}", r.text))
}

/// The `networkPolicy` of contract `id` as `token` reads it.
fn read(c: &Catalog, token: &str, id: &str) -> Value {
    let r = get(c, &format!("/contracts/{id}"), Some(token));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json["networkPolicy"].clone()
}

fn the_buyer_sets_replaces_and_removes_its_policy(backend: Backend) {
    let env = Env::new(backend);
    let (c, seller, alice, bob, admin, id) = bought(&env);
    let first = listing(&c, &seller, None);
    assert!(listed(&first, &id).get("networkPolicy").is_none());
    let tag0 = first.header("etag").unwrap().to_string();

    // Set: revision 1, as sent.
    let r = put(&c, &path(&id), &policy("shop-alice", 8080), Some(&alice));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["revision"], 1, "{}", r.text);
    assert_eq!(r.json["policy"], policy("shop-alice", 8080));
    assert!(r.json["updatedAt"].is_string(), "{}", r.text);
    assert!(r.json.get("report").is_none(), "{}", r.text);
    let one = r.json.clone();
    assert_eq!(read(&c, &alice, &id), one);
    // The provider's listing carries it, and its ETag moved.
    let r = listing(&c, &seller, Some(&tag0));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(listed(&r, &id)["networkPolicy"], one);
    let tag1 = r.header("etag").unwrap().to_string();
    assert_ne!(tag0, tag1);
    assert_eq!(listing(&c, &seller, Some(&tag1)).status, 304);
    assert_eq!(read(&c, &seller, &id), one);
    // An admin looking on does not read it.
    let r = get(&c, &format!("/contracts/{id}"), Some(&admin));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json.get("networkPolicy").is_none(), "{}", r.text);

    // Replaced: revision 2; the same again keeps 2.
    let r = put(&c, &path(&id), &policy("shop-alice", 9090), Some(&alice));
    assert_eq!(
        (r.status, &r.json["revision"]),
        (200, &json!(2)),
        "{}",
        r.text
    );
    let two = r.json.clone();
    let r = put(&c, &path(&id), &policy("shop-alice", 9090), Some(&alice));
    assert_eq!((r.status, &r.json), (200, &two), "{}", r.text);
    assert_eq!(read(&c, &alice, &id), two);
    let r = listing(&c, &seller, Some(&tag1));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(listed(&r, &id)["networkPolicy"], two);
    let tag2 = r.header("etag").unwrap().to_string();
    assert_eq!(listing(&c, &seller, Some(&tag2)).status, 304);

    // Another buyer: no such contract, nothing changed.
    put(&c, &path(&id), &policy("shop-bob", 1), Some(&bob)).expect_error(404);
    delete(&c, &path(&id), Some(&bob)).expect_error(404);
    // The provider does not set it; the buyer does not report.
    put(&c, &path(&id), &policy("shop-x", 1), Some(&seller)).expect_error(403);
    delete(&c, &path(&id), Some(&seller)).expect_error(403);
    put(&c, &status_path(&id), &json!({"revision": 2}), Some(&alice)).expect_error(403);
    assert_eq!(read(&c, &alice, &id), two);

    // Bad input: 400 naming the field, nothing stored.
    for (body, field) in [
        (policy("Shop", 1), "policies[0].namespace"),
        (json!({"policies": [], "colour": "red"}), "colour"),
        (
            json!({"policies": [{"name": "a", "namespace": "b", "podSelector": {}, "colour": 1}]}),
            "policies[0].colour",
        ),
        (json!([]), "body"),
    ] {
        let r = put(&c, &path(&id), &body, Some(&alice));
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{body}: {}", r.text);
    }
    // Within 256 KiB: a large policy is taken; beyond, 413.
    let peers: Vec<Value> = (0..150)
        .map(|i| json!({"ipBlock": {"cidr": format!("10.1.{i}.0/24")}}))
        .collect();
    let large = json!({"policies": (0..32).map(|i| json!({
        "name": format!("p{i}"), "namespace": "shop-alice", "podSelector": {},
        "ingress": [{"peers": peers}]
    })).collect::<Vec<_>>()});
    let size = serde_json::to_vec(&large).unwrap().len();
    assert!((64 * 1024..256 * 1024).contains(&size), "{size}");
    let r = put(&c, &path(&id), &large, Some(&alice));
    assert_eq!(
        (r.status, &r.json["revision"]),
        (200, &json!(3)),
        "{}",
        r.text.get(..300).unwrap_or_default()
    );
    let huge = format!(r#"{{"policies": [], "pad": "{}"}}"#, "x".repeat(256 * 1024));
    let r = c
        .send(
            buying::client()
                .put(c.url(&path(&id)))
                .bearer_auth(&alice)
                .header("content-type", "application/json")
                .body(huge),
        )
        .unwrap();
    r.expect_error(413);
    assert_eq!(read(&c, &alice, &id)["revision"], 3);

    // Removed: 204, gone from the contract and the listing; again: 204.
    assert_eq!(delete(&c, &path(&id), Some(&alice)).status, 204);
    assert!(read(&c, &alice, &id).is_null());
    let r = listing(&c, &seller, None);
    assert!(listed(&r, &id).get("networkPolicy").is_none(), "{}", r.text);
    assert_ne!(r.header("etag").unwrap(), tag2);
    assert_eq!(delete(&c, &path(&id), Some(&alice)).status, 204);
    // Set again: the next revision, never one the provider already saw.
    let r = put(&c, &path(&id), &policy("shop-alice", 8080), Some(&alice));
    assert_eq!(
        (r.status, &r.json["revision"]),
        (200, &json!(4)),
        "{}",
        r.text
    );
}

fn the_provider_reports_and_the_buyer_reads_it(backend: Backend) {
    let env = Env::new(backend);
    let (c, seller, alice, _bob, _admin, id) = bought(&env);
    let other_seller = publish(&c, 2, "shop-2");

    // No policy yet: nothing to report on.
    put(
        &c,
        &status_path(&id),
        &json!({"revision": 1}),
        Some(&seller),
    )
    .expect_error(409);
    assert_eq!(
        put(&c, &path(&id), &policy("shop-alice", 8080), Some(&alice)).status,
        200
    );
    let tag = listing(&c, &seller, None)
        .header("etag")
        .unwrap()
        .to_string();
    let report = json!({
        "revision": 1,
        "applied": [{"name": "shop/backend", "networkPolicies": ["shop-alice/backend-0"]}],
        "refused": []
    });
    // Only the provider that sold it.
    put(&c, &status_path(&id), &report, Some(&other_seller)).expect_error(404);
    // A revision that never was.
    let r = put(
        &c,
        &status_path(&id),
        &json!({"revision": 2}),
        Some(&seller),
    );
    let message = r.expect_error(409);
    assert!(message.contains("revision 1"), "{message}");
    // Bad reports: 400 naming the field.
    for (body, field) in [
        (
            json!({"revision": 1, "refused": [{"name": "x", "reason": "bad\u{7}"}]}),
            "refused[0].reason",
        ),
        (json!({"revision": 1, "colour": 1}), "colour"),
        (json!({"applied": []}), "revision"),
    ] {
        let r = put(&c, &status_path(&id), &body, Some(&seller));
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{body}: {}", r.text);
    }
    assert!(read(&c, &alice, &id).get("report").is_none());

    let r = put(&c, &status_path(&id), &report, Some(&seller));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["report"], report);
    let seen = read(&c, &alice, &id);
    assert_eq!(
        (seen["revision"].clone(), seen["report"].clone()),
        (json!(1), report.clone())
    );
    // The provider's listing moved too.
    let r = listing(&c, &seller, Some(&tag));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(listed(&r, &id)["networkPolicy"]["report"], report);

    // A new revision keeps the last report until the provider renders it;
    // a late report of revision 1 after one of 2 is ignored.
    let r = put(&c, &path(&id), &policy("shop-alice", 9090), Some(&alice));
    assert_eq!(
        (&r.json["revision"], &r.json["report"]),
        (&json!(2), &report),
        "{}",
        r.text
    );
    let report2 = json!({
        "revision": 2, "applied": [],
        "refused": [{"name": "shop/backend", "reason": "namespace shop-alice is not this buyer's"}]
    });
    assert_eq!(
        put(&c, &status_path(&id), &report2, Some(&seller)).status,
        200
    );
    let r = put(&c, &status_path(&id), &report, Some(&seller));
    assert_eq!((r.status, &r.json["report"]), (200, &report2), "{}", r.text);
    assert_eq!(read(&c, &alice, &id)["report"], report2);
}

fn an_ended_contracts_policy_no_longer_changes(backend: Backend) {
    let env = Env::new(backend);
    let (c, seller, alice, _bob, _admin, id) = bought(&env);
    assert_eq!(
        put(&c, &path(&id), &policy("shop-alice", 8080), Some(&alice)).status,
        200
    );
    assert_eq!(
        delete(&c, &format!("/purchases/{id}"), Some(&alice)).status,
        200
    );
    put(&c, &path(&id), &policy("shop-alice", 9090), Some(&alice)).expect_error(409);
    delete(&c, &path(&id), Some(&alice)).expect_error(409);
    put(
        &c,
        &status_path(&id),
        &json!({"revision": 1}),
        Some(&seller),
    )
    .expect_error(409);
    let kept = read(&c, &alice, &id);
    assert_eq!((&kept["revision"], kept.get("report")), (&json!(1), None));

    // A contract without a policy: removing none is done, setting one is not.
    let r = buy(&c, &alice, "shop", "small", &json!({}));
    let other = r.json["id"].as_str().unwrap().to_string();
    assert_eq!(
        delete(&c, &format!("/purchases/{other}"), Some(&alice)).status,
        200
    );
    assert_eq!(delete(&c, &path(&other), Some(&alice)).status, 204);
    put(&c, &path(&other), &policy("shop-alice", 1), Some(&alice)).expect_error(409);
    assert!(read(&c, &alice, &other).is_null());
}

fn the_policy_survives_a_restart(backend: Backend) {
    let env = Env::new(backend);
    let (mut c, seller, alice, _bob, _admin, id) = bought(&env);
    assert_eq!(
        put(&c, &path(&id), &policy("shop-alice", 8080), Some(&alice)).status,
        200
    );
    let report = json!({"revision": 1, "applied": [{"name": "shop/backend", "networkPolicies": ["shop-alice/np"]}], "refused": []});
    assert_eq!(
        put(&c, &status_path(&id), &report, Some(&seller)).status,
        200
    );
    let before = read(&c, &alice, &id);
    assert_eq!(before["report"], report);

    let status = c
        .child
        .terminate(std::time::Duration::from_secs(15))
        .unwrap();
    assert!(status.success(), "SIGTERM exit status {status}");
    let c = buying::start(&env, &[]);
    // Tokens stay valid across the restart (the signing key is kept).
    assert_eq!(read(&c, &alice, &id), before);
    assert_eq!(read(&c, &seller, &id), before);
    // Its revisions keep counting.
    let r = put(&c, &path(&id), &policy("shop-alice", 9090), Some(&alice));
    assert_eq!(
        (r.status, &r.json["revision"]),
        (200, &json!(2)),
        "{}",
        r.text
    );
}
