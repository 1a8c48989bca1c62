//! Buying against the real catalog binary, on both stores: reserve →
//! purchase → peering credentials, expiry freeing the unit, the race for the
//! last units (exactly the cap succeeds), restarts, who sees what, bad input
//! changing nothing, and an admin disabling a provider.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use e2e::buying::{
    self, admin, call, cap, consumer, delete, get, peering_token, post, publish, put, reserve,
};
use e2e::catalog::{Backend, Env};
use e2e::catalog_tests;
use reqwest::Method;
use serde_json::json;

catalog_tests!(
    reserve_purchase_and_credentials,
    expiry_frees_the_unit,
    last_unit_race,
    survives_restart,
    bad_input_changes_nothing,
    admin_sees_all_and_disables_providers
);

fn reserve_purchase_and_credentials(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    c.put_offer("shop-2", &buying::offer(), &seller);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");

    let r = reserve(&c, &alice, "shop", "small", None);
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().expect("id").to_string();
    assert_eq!(
        r.header("location"),
        Some(format!("/reservations/{id}").as_str())
    );
    assert_eq!(r.json["state"], "reserved");
    assert_eq!(r.json["consumer"], "alice");
    assert_eq!(r.json["offerID"], "shop");
    assert_eq!(r.json["planID"], "small");
    assert_eq!(r.json["clusterID"], "cluster-1");
    assert_eq!(r.json["cost"], "1.5");
    let created = chrono_secs(&r.json["createdAt"]);
    let expires = chrono_secs(&r.json["expiresAt"]);
    assert!(
        (expires - created - 300.0).abs() < 1.0,
        "default TTL 5m: {}",
        r.text
    );
    assert!(
        !r.text.contains(&peering_token(1)),
        "no credentials before purchase"
    );

    // Only the owner (and admins) see it; others get 404, not 403.
    assert_eq!(
        get(&c, &format!("/reservations/{id}"), Some(&alice)).json["id"],
        id.as_str()
    );
    get(&c, &format!("/reservations/{id}"), Some(&bob)).expect_error(404);
    post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&bob),
    )
    .expect_error(404);
    assert_eq!(get(&c, "/reservations", Some(&bob)).json, json!([]));

    let r = post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&alice),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    // The purchase answers the contract: its state is the contract's.
    assert_eq!(r.json["state"], "pending", "{}", r.text);
    assert_eq!(r.json["active"], true, "{}", r.text);
    assert!(r.json["purchasedAt"].is_string());
    assert_eq!(
        r.json["peering"],
        json!({ "clusterID": "cluster-1", "clusterName": "provider 1",
                "authURL": "https://provider-1.example:6443", "token": peering_token(1) })
    );
    // Purchasing twice: 409, nothing changes.
    post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&alice),
    )
    .expect_error(409);
    // A purchase is not released, it is cancelled.
    delete(&c, &format!("/reservations/{id}"), Some(&alice)).expect_error(409);

    let p = get(&c, &format!("/purchases/{id}"), Some(&alice));
    assert_eq!(p.status, 200, "{}", p.text);
    assert_eq!(p.json["peering"]["token"], peering_token(1).as_str());
    let listed = get(&c, "/purchases", Some(&alice));
    assert_eq!(
        listed.json.as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.text
    );
    assert!(
        !listed.text.contains(&peering_token(1)),
        "lists never carry credentials"
    );
    get(&c, &format!("/purchases/{id}"), Some(&bob)).expect_error(404);

    // The credentials never leave through public reads.
    for path in ["/offers", "/offer/shop", "/offer/shop/plans/small/capacity"] {
        let r = get(&c, path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert!(
            !r.text.contains(&peering_token(1)),
            "{path} leaks the token"
        );
    }
    assert_eq!(
        get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        1
    );

    // Release an unpurchased reservation; cancel the purchase.
    let other = reserve(&c, &alice, "shop", "large", Some(60));
    assert_eq!(other.status, 201, "{}", other.text);
    let other_id = other.json["id"].as_str().unwrap().to_string();
    let r = delete(&c, &format!("/reservations/{other_id}"), Some(&alice));
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (200, Some("released")),
        "{}",
        r.text
    );
    post(
        &c,
        &format!("/reservations/{other_id}/purchase"),
        &json!({}),
        Some(&alice),
    )
    .expect_error(409);
    delete(&c, &format!("/purchases/{id}"), Some(&bob)).expect_error(404);
    let r = delete(&c, &format!("/purchases/{id}"), Some(&alice));
    assert_eq!(
        (r.status, r.json["state"].as_str()),
        (200, Some("cancelled")),
        "{}",
        r.text
    );
    assert_eq!(
        get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        0
    );
    // A cancelled purchase reads back without credentials.
    let p = get(&c, &format!("/purchases/{id}"), Some(&alice));
    assert_eq!(p.json["state"], "cancelled");
    assert!(!p.text.contains(&peering_token(1)));

    let states: Vec<String> = get(&c, "/reservations", Some(&alice))
        .json
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["state"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(states.len(), 2);

    // The buying routes are in the OpenAPI document beside the others.
    let api = get(&c, "/openapi.json", None);
    for path in [
        "/offers",
        "/reservations",
        "/reservations/{id}",
        "/reservations/{id}/purchase",
        "/purchases/{id}",
        "/offer/{id}/plans/{plan}/capacity",
        "/admin/providers/{clusterID}",
    ] {
        assert!(
            api.json["paths"][path].is_object(),
            "{path} missing from OpenAPI"
        );
    }
    assert!(
        api.json["paths"]["/reservations/{id}/purchase"]["post"]["responses"]["410"].is_object()
    );
    assert!(api.json["components"]["schemas"]["Contract"].is_object());
    assert!(
        states.contains(&"released".into()) && states.contains(&"cancelled".into()),
        "{states:?}"
    );
}

fn chrono_secs(v: &serde_json::Value) -> f64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    let t = chrono::DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    t.timestamp_millis() as f64 / 1000.0
}

fn expiry_frees_the_unit(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    cap(&c, &seller, "shop", "small", Some(1));
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");

    let r = reserve(&c, &alice, "shop", "small", Some(3));
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().unwrap().to_string();
    // The only unit is held: bob waits.
    assert!(reserve(&c, &bob, "shop", "small", None)
        .expect_error(409)
        .contains("sold out"));
    let capacity = get(&c, "/offer/shop/plans/small/capacity", None);
    assert_eq!(
        (
            capacity.json["maxPurchases"].as_u64(),
            capacity.json["active"].as_u64(),
            capacity.json["available"].as_u64()
        ),
        (Some(1), Some(1), Some(0)),
        "{}",
        capacity.text
    );

    // Wait until just past the deadline the catalog gave (3 s: room for the
    // checks above on a loaded machine).
    let deadline = chrono_secs(&r.json["expiresAt"]) + 0.3;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(deadline);
    std::thread::sleep(Duration::from_secs_f64((deadline - now).max(0.0)));
    // The unit is free once the deadline passed (the sweeper, a read or the
    // next reservation of the plan expires the record, whichever is first).
    assert_eq!(
        get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        0
    );
    let r = reserve(&c, &bob, "shop", "small", None);
    assert_eq!(r.status, 201, "{}", r.text);

    let r = get(&c, &format!("/reservations/{id}"), Some(&alice));
    assert_eq!(r.json["state"], "expired", "{}", r.text);
    assert_eq!(r.json["endedAt"], r.json["expiresAt"]);
    let r = post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&alice),
    );
    assert!(r.expect_error(410).contains("expired"), "{}", r.text);
    assert_eq!(r.json["error"], "gone");
}

fn last_unit_race(backend: Backend) {
    const CAP: u32 = 3;
    const CLIENTS: usize = 24;
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    cap(&c, &seller, "shop", "small", Some(CAP));
    let admin = admin(&c);
    let tokens: Vec<String> = (0..CLIENTS)
        .map(|i| consumer(&c, &admin, &format!("racer-{i}")))
        .collect();

    let barrier = Arc::new(Barrier::new(CLIENTS));
    let url = c.url("/reservations");
    let handles: Vec<_> = tokens
        .into_iter()
        .map(|token| {
            let (barrier, url) = (barrier.clone(), url.clone());
            std::thread::spawn(move || {
                let http = buying::client();
                barrier.wait();
                let r = http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({ "offerID": "shop", "planID": "small" }))
                    .send()
                    .expect("reserve");
                r.status().as_u16()
            })
        })
        .collect();
    let statuses: Vec<u16> = handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect();
    let won = statuses.iter().filter(|s| **s == 201).count();
    let lost = statuses.iter().filter(|s| **s == 409).count();
    assert_eq!(
        (won, lost),
        (CAP as usize, CLIENTS - CAP as usize),
        "{statuses:?}"
    );
    let all = get(&c, "/reservations", Some(&admin));
    assert_eq!(
        all.json.as_array().map(Vec::len),
        Some(CAP as usize),
        "{}",
        all.text
    );
    assert_eq!(
        get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        CAP
    );

    // Raising the cap lets exactly the new units go.
    cap(&c, &seller, "shop", "small", Some(CAP + 1));
    let late = consumer(&c, &admin, "late");
    assert_eq!(reserve(&c, &late, "shop", "small", None).status, 201);
    reserve(&c, &late, "shop", "small", None).expect_error(409);
    // Lifting it: no limit.
    cap(&c, &seller, "shop", "small", None);
    assert_eq!(reserve(&c, &late, "shop", "small", None).status, 201);
}

/// Two catalog processes on one MongoDB database, clients split between
/// them: still exactly the cap.
#[test]
fn two_processes_race_for_the_last_units() {
    const CAP: u32 = 2;
    const CLIENTS: usize = 16;
    let env = Env::new(Backend::Mongo);
    let a = buying::start(&env, &[]);
    let b = buying::start(&env, &[]);
    let seller = publish(&a, 1, "shop");
    cap(&a, &seller, "shop", "large", Some(CAP));
    let admin = admin(&a);
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let token = consumer(&a, &admin, &format!("racer-{i}"));
            let url = if i % 2 == 0 {
                a.url("/reservations")
            } else {
                b.url("/reservations")
            };
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let http = buying::client();
                barrier.wait();
                http.post(&url)
                    .bearer_auth(&token)
                    .json(&json!({ "offerID": "shop", "planID": "large" }))
                    .send()
                    .expect("reserve")
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let statuses: Vec<u16> = handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect();
    let won = statuses.iter().filter(|s| **s == 201).count();
    assert_eq!(won, CAP as usize, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 409),
        "{statuses:?}"
    );
    assert_eq!(
        get(&b, "/offer/shop/plans/large/capacity", None).json["active"],
        CAP
    );
}

fn survives_restart(backend: Backend) {
    let env = Env::new(backend);
    let mut c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    cap(&c, &seller, "shop", "small", Some(2));
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bought = reserve(&c, &alice, "shop", "small", None).json["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        post(
            &c,
            &format!("/reservations/{bought}/purchase"),
            &json!({}),
            Some(&alice)
        )
        .status,
        201
    );
    let held = reserve(&c, &alice, "shop", "small", None).json["id"]
        .as_str()
        .unwrap()
        .to_string();

    // A crash, not a clean stop.
    c.child.kill();
    let c = buying::start(&env, &[]);
    let p = get(&c, &format!("/purchases/{bought}"), Some(&alice));
    assert_eq!(p.status, 200, "{}", p.text);
    // The sealed peering token still opens after the restart.
    assert_eq!(p.json["peering"]["token"], peering_token(1).as_str());
    assert_eq!(
        get(&c, &format!("/reservations/{held}"), Some(&alice)).json["state"],
        "reserved"
    );
    // The cap and both holdings survived.
    reserve(&c, &alice, "shop", "small", None).expect_error(409);
    assert_eq!(
        post(
            &c,
            &format!("/reservations/{held}/purchase"),
            &json!({}),
            Some(&alice)
        )
        .status,
        201
    );
}

fn bad_input_changes_nothing(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let other_seller = publish(&c, 2, "other");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    let cases = [
        (json!({ "planID": "small" }), 400, Some("offerID")),
        (json!({ "offerID": "shop" }), 400, Some("planID")),
        (
            json!({ "offerID": "shop", "planID": "small", "extra": 1 }),
            400,
            Some("extra"),
        ),
        (
            json!({ "offerID": "shop", "planID": "small", "ttlSeconds": 0 }),
            400,
            Some("ttlSeconds"),
        ),
        (
            json!({ "offerID": "shop", "planID": "small", "ttlSeconds": 301 }),
            400,
            Some("ttlSeconds"),
        ),
        (
            json!({ "offerID": "shop", "planID": "small", "ttlSeconds": "soon" }),
            400,
            Some("ttlSeconds"),
        ),
        (
            json!({ "offerID": "bad id", "planID": "small" }),
            400,
            Some("offerID"),
        ),
        (json!({ "offerID": "nope", "planID": "small" }), 404, None),
        (json!({ "offerID": "shop", "planID": "huge" }), 404, None),
    ];
    for (body, status, field) in cases {
        let r = post(&c, "/reservations", &body, Some(&alice));
        r.expect_error(status);
        if let Some(f) = field {
            assert_eq!(r.json["field"], f, "{body}: {}", r.text);
        }
    }
    // Not JSON at all.
    let r = c.post_raw("/reservations", b"{oops".to_vec(), Some(&alice));
    assert_eq!(r.expect_error(400), r.json["message"].as_str().unwrap());
    // Who may reserve: not anonymous, not a provider, not a forged token.
    post(
        &c,
        "/reservations",
        &json!({ "offerID": "shop", "planID": "small" }),
        None,
    )
    .expect_error(401);
    post(
        &c,
        "/reservations",
        &json!({ "offerID": "shop", "planID": "small" }),
        Some(&seller),
    )
    .expect_error(403);
    post(
        &c,
        "/reservations",
        &json!({ "offerID": "shop", "planID": "small" }),
        Some("a.b.c"),
    )
    .expect_error(401);
    // Only admins mint consumer tokens, log in with the right secret.
    post(
        &c,
        "/consumer-tokens",
        &json!({ "subject": "mallory" }),
        Some(&alice),
    )
    .expect_error(403);
    post(
        &c,
        "/authenticate/admin",
        &json!({ "secret": "guess" }),
        None,
    )
    .expect_error(401);
    post(
        &c,
        "/consumer-tokens",
        &json!({ "subject": "" }),
        Some(&admin),
    )
    .expect_error(400);
    // Caps: only the owner, only sane values.
    put(
        &c,
        "/offer/shop/plans/small/capacity",
        &json!({ "maxPurchases": 1 }),
        Some(&other_seller),
    )
    .expect_error(403);
    put(
        &c,
        "/offer/shop/plans/small/capacity",
        &json!({ "maxPurchases": 1 }),
        Some(&alice),
    )
    .expect_error(403);
    let r = put(
        &c,
        "/offer/shop/plans/small/capacity",
        &json!({ "maxPurchases": -1 }),
        Some(&seller),
    );
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("maxPurchases")),
        "{}",
        r.text
    );
    put(
        &c,
        "/offer/shop/plans/nope/capacity",
        &json!({ "maxPurchases": 1 }),
        Some(&seller),
    )
    .expect_error(404);
    let r = put(
        &c,
        "/offer/shop/plans/small/capacity",
        &json!({}),
        Some(&seller),
    );
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("maxPurchases")),
        "{}",
        r.text
    );
    call(&c, Method::PATCH, "/reservations", None, Some(&alice)).expect_error(405);
    // A listing filter that is not a state.
    let r = get(&c, "/reservations?state=lost", Some(&alice));
    assert_eq!((r.status, r.json["field"].as_str()), (400, Some("state")));
    get(&c, "/reservations?consumer=bob", Some(&alice)).expect_error(403);

    // None of that changed anything.
    assert_eq!(get(&c, "/reservations", Some(&admin)).json, json!([]));
    let capacity = get(&c, "/offer/shop/plans/small/capacity", None);
    assert_eq!(
        capacity.json["maxPurchases"],
        serde_json::Value::Null,
        "{}",
        capacity.text
    );
}

fn admin_sees_all_and_disables_providers(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    c.put_offer("shop-2", &buying::offer(), &seller);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let a = reserve(&c, &alice, "shop", "small", None).json["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = reserve(&c, &bob, "shop", "large", None).json["id"]
        .as_str()
        .unwrap()
        .to_string();

    assert_eq!(
        get(&c, "/reservations", Some(&alice))
            .json
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(
        get(&c, "/reservations", Some(&admin))
            .json
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    let only_bob = get(&c, "/reservations?consumer=bob", Some(&admin));
    assert_eq!(only_bob.json[0]["id"], b.as_str(), "{}", only_bob.text);
    assert_eq!(
        get(&c, &format!("/reservations/{a}"), Some(&admin)).json["consumer"],
        "alice"
    );

    let providers = get(&c, "/admin/providers", Some(&admin));
    assert_eq!(
        providers.json[0]["clusterID"], "cluster-1",
        "{}",
        providers.text
    );
    assert_eq!(providers.json[0]["disabled"], false);
    assert!(!providers.text.contains(&peering_token(1)));
    get(&c, "/admin/providers", Some(&alice)).expect_error(403);
    put(
        &c,
        "/admin/providers/cluster-1",
        &json!({ "disabled": true }),
        Some(&alice),
    )
    .expect_error(403);
    put(
        &c,
        "/admin/providers/cluster-9",
        &json!({ "disabled": true }),
        Some(&admin),
    )
    .expect_error(404);

    let r = put(
        &c,
        "/admin/providers/cluster-1",
        &json!({ "disabled": true }),
        Some(&admin),
    );
    assert_eq!(
        (r.status, r.json["disabled"].as_bool()),
        (200, Some(true)),
        "{}",
        r.text
    );
    assert!(reserve(&c, &alice, "shop", "small", None)
        .expect_error(403)
        .contains("disabled"));
    post(
        &c,
        &format!("/reservations/{a}/purchase"),
        &json!({}),
        Some(&alice),
    )
    .expect_error(403);
    // Releasing stays possible.
    assert_eq!(
        delete(&c, &format!("/reservations/{b}"), Some(&bob)).status,
        200
    );
    // A disabled provider cannot publish, but may withdraw what it sells.
    assert!(post(&c, "/offer/shop", &buying::offer(), Some(&seller))
        .expect_error(403)
        .contains("disabled"));
    assert_eq!(delete(&c, "/offer/shop-2", Some(&seller)).status, 204);
    assert_eq!(get(&c, "/offer/shop-2", None).status, 404);

    // The flag survives a restart (each store loads it into memory when
    // it opens), and the provider's token still names its account.
    drop(c);
    let c = buying::start(&env, &[]);
    assert!(post(&c, "/offer/shop", &buying::offer(), Some(&seller))
        .expect_error(403)
        .contains("disabled"));
    let listed = get(&c, "/admin/providers", Some(&admin));
    assert_eq!(listed.json[0]["disabled"], true, "{}", listed.text);

    put(
        &c,
        "/admin/providers/cluster-1",
        &json!({ "disabled": false }),
        Some(&admin),
    );
    assert_eq!(
        post(&c, "/offer/shop", &buying::offer(), Some(&seller)).status,
        200
    );
    assert_eq!(
        post(
            &c,
            &format!("/reservations/{a}/purchase"),
            &json!({}),
            Some(&alice)
        )
        .status,
        201
    );
    // Admins see purchases but never the buyer's credentials.
    let p = get(&c, &format!("/purchases/{a}"), Some(&admin));
    assert_eq!(p.json["state"], "purchased", "{}", p.text);
    assert!(!p.text.contains(&peering_token(1)));
    // ... and may cancel any of them.
    assert_eq!(
        delete(&c, &format!("/purchases/{a}"), Some(&admin)).json["state"],
        "cancelled"
    );
}
