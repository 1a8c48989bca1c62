//! Contracts against the real catalog binary, on both stores: a provider
//! registering its Liqo (v1 kubeconfig sealed, never read back), a purchase
//! yielding a contract, who sees what (credentials for its consumer only),
//! `GET /contracts` with ETag/304, state reports, expiry freeing the unit,
//! cancellation, and bad input answered 400 naming the field with nothing
//! changed; the unit of costs (`pricing`, from `--currency` and
//! `--cost-period`) on every offer and contract served, and who bought a
//! contract (`boughtBy`) kept across a restart.

use e2e::buying::{self, admin, cap, consumer, delete, get, peering_token, publish, put};
use e2e::catalog::{provider, Backend, Env};
use e2e::catalog_tests;
use e2e::contracts::{buy, kubeconfig, register_peering, wait_for};
use e2e::osb_client::{check_catalog, Auth, Platform};
use e2e::ws::{snapshot_ids, FeedClient};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

catalog_tests!(
    provider_registers_its_liqo,
    who_sees_what,
    etag_and_not_modified,
    state_reports,
    expiry_and_cancellation,
    bad_purchases_change_nothing,
    offers_say_which_liqo,
    pricing_and_bought_by
);

const SERVER: &str = "https://provider-1.example:6443";

/// base64 of `-----BEGIN PRIVATE KEY-----`: the start of the kubeconfig's
/// embedded client key.
const PRIVATE_KEY_PEM: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t";

fn provider_registers_its_liqo(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    let r = get(&c, "/provider/peering", Some(&seller));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json,
        json!({"clusterID": "cluster-1", "liqo": ["v0"], "resourceSliceClass": "liqo-broker"})
    );
    let kc = kubeconfig(SERVER);
    let r = register_peering(&c, &seller, Some(&kc), Some("gold.example"));
    assert_eq!(r.status, 200, "{}", r.text);
    let want = json!({"clusterID": "cluster-1", "liqo": ["v0", "v1"], "resourceSliceClass": "gold.example", "singleConsumer": true});
    assert_eq!(r.json, want);
    let r = get(&c, "/provider/peering", Some(&seller));
    assert_eq!((r.status, &r.json), (200, &want), "{}", r.text);
    assert!(!r.text.contains(PRIVATE_KEY_PEM), "never the kubeconfig");

    // Bad input: 400 naming the field; what was registered stays.
    let plain_http = kubeconfig("http://provider-1.example");
    for (body, field) in [
        (json!({"v1": {"kubeconfig": plain_http}}), "v1.kubeconfig"),
        (json!({"v1": {"kubeconfig": "not: [yaml"}}), "v1.kubeconfig"),
        (
            json!({"v1": {"kubeconfig": "x".repeat(33 * 1024)}}),
            "v1.kubeconfig",
        ),
        (
            json!({"v1": null, "resourceSliceClass": "default"}),
            "resourceSliceClass",
        ),
        (
            json!({"v1": null, "resourceSliceClass": "Not_A_Class"}),
            "resourceSliceClass",
        ),
        (json!({"v1": {"kubeconfig": kc, "extra": 1}}), "v1.extra"),
    ] {
        let r = put(&c, "/provider/peering", &body, Some(&seller));
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{}", r.text);
        assert_eq!(get(&c, "/provider/peering", Some(&seller)).json, want);
    }
    // Only providers register.
    register_peering(&c, &alice, Some(&kc), None).expect_error(403);
    get(&c, "/provider/peering", None).expect_error(401);

    // Dropping v1 again.
    let r = register_peering(&c, &seller, None, None);
    assert_eq!(r.json["liqo"], json!(["v0"]), "{}", r.text);

    // A provider running only Liqo v1 authenticates with an empty authURL:
    // no v0 until it registers a kubeconfig, and its plans cannot be
    // bought before (nothing to hand over).
    let mut v1_only = provider(2);
    v1_only["authURL"] = json!("");
    let token2 = c.login(&v1_only);
    c.put_offer("shop-2", &buying::offer(), &token2);
    assert_eq!(
        get(&c, "/provider/peering", Some(&token2)).json["liqo"],
        json!([])
    );
    buying::reserve(&c, &alice, "shop-2", "small", None).expect_error(409);
    let registered = register_peering(&c, &token2, Some(&kubeconfig("https://p2.example")), None);
    assert_eq!(registered.status, 200, "{}", registered.text);
    let r = buy(
        &c,
        &alice,
        "shop-2",
        "small",
        &json!({"consumerClusterID": "alice-cluster"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["liqo"], json!(["v1"]));
    assert!(r.json["credentials"]["v0"].is_null(), "{}", r.text);
    assert!(r.json.get("peering").is_none(), "{}", r.text);
    assert!(
        !r.text.contains(&peering_token(2)),
        "a v1-only provider's secret is not a peering token"
    );
    assert_eq!(
        r.json["credentials"]["v1"]["kubeconfig"],
        kubeconfig("https://p2.example").as_str()
    );
}

fn who_sees_what(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let other_seller = publish(&c, 2, "shop-2");
    register_peering(&c, &seller, Some(&kubeconfig(SERVER)), None);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");

    let r = buy(
        &c,
        &alice,
        "shop",
        "small",
        &json!({"consumerClusterID": "alice-cluster"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().unwrap().to_string();
    assert_eq!(r.header("cache-control"), Some("no-store"));
    for (k, v) in [
        ("consumer", json!("alice")),
        ("consumerClusterID", json!("alice-cluster")),
        ("clusterID", json!("cluster-1")),
        ("clusterName", json!("provider 1")),
        ("offerID", json!("shop")),
        ("planID", json!("small")),
        ("resources", json!({"cpu": "2", "memory": "4Gi"})),
        ("cost", json!("1.5")),
        ("resourceSliceClass", json!("liqo-broker")),
        ("liqo", json!(["v0", "v1"])),
        ("active", json!(true)),
        ("state", json!("pending")),
        ("channel", json!("rest")),
    ] {
        assert_eq!(r.json[k], v, "{k}: {}", r.text);
    }
    for absent in ["ended", "endedAt", "reason"] {
        assert!(r.json.get(absent).is_none(), "{absent}: {}", r.text);
    }
    assert_eq!(
        r.json["credentials"]["v0"]["token"],
        peering_token(1).as_str()
    );
    assert_eq!(r.json["peering"]["token"], peering_token(1).as_str());
    assert_eq!(
        r.json["credentials"]["v1"]["kubeconfig"],
        kubeconfig(SERVER).as_str()
    );
    // 30 days by default.
    let days = (secs(&r.json["expiresAt"]) - secs(&r.json["purchasedAt"])) / 86400.0;
    assert!((days - 30.0).abs() < 0.001, "{}", r.text);

    // Later edits of the offer do not change the contract's resources.
    let mut edited = buying::offer();
    edited["plans"]["small"]["resources"]["cpu"] = json!("3");
    c.put_offer("shop", &edited, &seller);

    let listed_by = |token: &str| get(&c, "/contracts", Some(token));
    for token in [&alice, &seller, &admin] {
        let l = listed_by(token);
        assert_eq!(l.status, 200, "{}", l.text);
        assert_eq!(l.json.as_array().map(Vec::len), Some(1), "{}", l.text);
        assert_eq!(l.json[0]["id"], id.as_str());
        assert_eq!(l.json[0]["resources"]["cpu"], "2");
        assert!(l.json[0].get("credentials").is_none(), "{}", l.text);
        assert!(!l.text.contains(&peering_token(1)) && !l.text.contains(PRIVATE_KEY_PEM));
    }
    for token in [&bob, &other_seller] {
        assert_eq!(listed_by(token).json, json!([]));
    }

    let one = |token: &str| get(&c, &format!("/contracts/{id}"), Some(token));
    let mine = one(&alice);
    assert_eq!(mine.status, 200, "{}", mine.text);
    assert_eq!(mine.header("cache-control"), Some("no-store"));
    assert_eq!(
        mine.json["credentials"]["v1"]["kubeconfig"],
        kubeconfig(SERVER).as_str()
    );
    assert_eq!(
        mine.json["credentials"]["v0"]["authURL"],
        "https://provider-1.example:6443"
    );
    for token in [&seller, &admin] {
        let r = one(token);
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.json.get("credentials").is_none(), "{}", r.text);
        assert!(!r.text.contains(&peering_token(1)));
    }
    one(&bob).expect_error(404);
    one(&other_seller).expect_error(404);
    get(&c, &format!("/contracts/{id}"), None).expect_error(401);
    get(&c, "/contracts/no-such-contract", Some(&alice)).expect_error(404);
    // A reservation is not a contract.
    let held = buying::reserve(&c, &alice, "shop", "large", None);
    assert_eq!(held.status, 201, "{}", held.text);
    let held = held.json["id"].as_str().unwrap();
    get(&c, &format!("/contracts/{held}"), Some(&alice)).expect_error(404);
}

fn etag_and_not_modified(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    let first = get(&c, "/contracts?active=true", Some(&seller));
    assert_eq!(
        (first.status, &first.json),
        (200, &json!([])),
        "{}",
        first.text
    );
    let tag = first.header("etag").expect("ETag").to_string();
    let again = |tag: &str| {
        let req = buying::client()
            .request(Method::GET, c.url("/contracts?active=true"))
            .bearer_auth(&seller)
            .header("If-None-Match", tag);
        c.send(req).unwrap()
    };
    let r = again(&tag);
    assert_eq!((r.status, r.text.as_str()), (304, ""));
    assert_eq!(r.header("etag"), Some(tag.as_str()));

    let bought = buy(&c, &alice, "shop", "small", &json!({}));
    assert_eq!(bought.status, 201, "{}", bought.text);
    let id = bought.json["id"].as_str().unwrap().to_string();
    let r = again(&tag);
    assert_eq!(r.status, 200, "a new contract changes the list");
    assert_eq!(r.json[0]["id"], id.as_str());
    let tag2 = r.header("etag").unwrap().to_string();
    assert_ne!(tag, tag2);
    assert_eq!(again(&tag2).status, 304);
    // A state report changes it too.
    let s = put(
        &c,
        &format!("/contracts/{id}/state"),
        &json!({"state": "peered"}),
        Some(&alice),
    );
    assert_eq!(s.status, 200, "{}", s.text);
    let r = again(&tag2);
    assert_eq!((r.status, &r.json[0]["state"]), (200, &json!("peered")));
    // So does a cancellation (it leaves the active list).
    let tag3 = r.header("etag").unwrap().to_string();
    let cancelled = delete(&c, &format!("/purchases/{id}"), Some(&alice));
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    let r = again(&tag3);
    assert_eq!((r.status, r.json.clone()), (200, json!([])));
}

fn state_reports(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let bought = buy(&c, &alice, "shop", "small", &json!({}));
    assert_eq!(bought.status, 201, "{}", bought.text);
    assert!(bought.json.get("consumerClusterID").is_none());
    let id = bought.json["id"].as_str().unwrap().to_string();
    let path = format!("/contracts/{id}/state");
    let report = |body: serde_json::Value, token: &str| put(&c, &path, &body, Some(token));
    let current = || get(&c, &format!("/contracts/{id}"), Some(&seller)).json;

    let r = report(
        json!({"state": "peered", "consumerClusterID": "alice-1"}),
        &alice,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (&r.json["state"], &r.json["consumerClusterID"]),
        (&json!("peered"), &json!("alice-1"))
    );
    assert!(r.json.get("credentials").is_none(), "{}", r.text);
    let seen = current();
    assert_eq!(seen["state"], "peered", "the provider sees it");
    assert_eq!(seen["consumerClusterID"], "alice-1");

    // Bad reports: 400 naming the field, nothing changed.
    for (body, field) in [
        (json!({"state": "done"}), "state"),
        (json!({"state": "failed"}), "reason"),
        (json!({"state": "ready", "reason": ""}), "reason"),
        (
            json!({"state": "ready", "consumerClusterID": "a b"}),
            "consumerClusterID",
        ),
        (json!({"state": "ready", "colour": "red"}), "colour"),
        (json!({}), "state"),
    ] {
        let r = report(body.clone(), &alice);
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{body}: {}", r.text);
        assert_eq!(current(), seen, "{body} changed the contract");
    }
    // The consumer cluster is set once.
    report(
        json!({"state": "ready", "consumerClusterID": "alice-2"}),
        &alice,
    )
    .expect_error(409);
    assert_eq!(current(), seen);
    // Only its consumer reports.
    report(json!({"state": "ready"}), &seller).expect_error(403);
    report(json!({"state": "ready"}), &admin).expect_error(403);
    report(json!({"state": "ready"}), &bob).expect_error(404);
    assert_eq!(current(), seen);

    // Any state may follow any other; `failed` carries its reason.
    for state in ["granted", "ready", "pending"] {
        let r = report(json!({"state": state}), &alice);
        assert_eq!(r.json["state"], state, "{}", r.text);
    }
    let r = report(
        json!({"state": "failed", "reason": "the peering broke"}),
        &alice,
    );
    assert_eq!(
        (&r.json["state"], &r.json["reason"]),
        (&json!("failed"), &json!("the peering broke"))
    );
    let r = report(
        json!({"state": "ready", "consumerClusterID": "alice-1"}),
        &alice,
    );
    assert_eq!(
        r.status, 200,
        "the same cluster ID again is fine: {}",
        r.text
    );
    assert!(r.json.get("reason").is_none(), "{}", r.text);
    let filtered = get(&c, "/contracts?state=ready", Some(&seller));
    assert_eq!(filtered.status, 200, "{}", filtered.text);
    assert_eq!(filtered.json.as_array().map(Vec::len), Some(1));
    let failed = get(&c, "/contracts?state=failed", Some(&seller));
    assert_eq!(
        (failed.status, &failed.json),
        (200, &json!([])),
        "{}",
        failed.text
    );
    let r = get(&c, "/contracts?state=nope", Some(&seller));
    r.expect_error(400);
    assert_eq!(r.json["field"], "state");
    let r = get(&c, "/contracts?since=1", Some(&seller));
    r.expect_error(400);
    assert_eq!(r.json["field"], "since");

    // An ended contract's state no longer changes.
    let cancelled = delete(&c, &format!("/purchases/{id}"), Some(&alice));
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    report(json!({"state": "pending"}), &alice).expect_error(409);
    assert_eq!(current()["state"], "ready");
}

fn expiry_and_cancellation(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &["--contract-duration", "1h"]);
    let seller = publish(&c, 1, "shop");
    cap(&c, &seller, "shop", "small", Some(1));
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");

    let r = buy(&c, &alice, "shop", "small", &json!({"durationSeconds": 2}));
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().unwrap().to_string();
    let lasts = secs(&r.json["expiresAt"]) - secs(&r.json["purchasedAt"]);
    assert!((lasts - 2.0).abs() < 0.01, "{}", r.text);
    // The unit is held by the contract.
    buying::reserve(&c, &bob, "shop", "small", None).expect_error(409);

    // It expires: inactive, ended, the unit free again, no credentials.
    let ended = wait_for("the contract to expire", || {
        let l = get(&c, "/contracts?active=false", Some(&seller));
        (l.json.as_array().map(Vec::len) == Some(1)).then_some(l.json[0].clone())
    });
    assert_eq!(
        (&ended["id"], &ended["active"], &ended["ended"]),
        (&json!(id), &json!(false), &json!("expired"))
    );
    assert_eq!(ended["endedAt"], ended["expiresAt"]);
    let mine = get(&c, &format!("/contracts/{id}"), Some(&alice));
    assert!(mine.json.get("credentials").is_none(), "{}", mine.text);
    assert_eq!(
        get(&c, "/contracts?active=true", Some(&seller)).json,
        json!([])
    );
    let again = buying::reserve(&c, &bob, "shop", "small", None);
    assert_eq!(again.status, 201, "the unit is free: {}", again.text);
    buying::put(
        &c,
        &format!("/contracts/{id}/state"),
        &json!({"state": "ready"}),
        Some(&alice),
    )
    .expect_error(409);

    // Cancellation ends a contract at once and frees its unit.
    let bob_id = again.json["id"].as_str().unwrap().to_string();
    let r = buying::post(
        &c,
        &format!("/reservations/{bob_id}/purchase"),
        &json!({}),
        Some(&bob),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let hour = secs(&r.json["expiresAt"]) - secs(&r.json["purchasedAt"]);
    assert!(
        (hour - 3600.0).abs() < 0.01,
        "--contract-duration: {}",
        r.text
    );
    let cancelled = delete(&c, &format!("/purchases/{bob_id}"), Some(&bob));
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    let r = get(&c, &format!("/contracts/{bob_id}"), Some(&bob));
    assert_eq!(
        (r.status, &r.json["active"], &r.json["ended"]),
        (200, &json!(false), &json!("cancelled")),
        "{}",
        r.text
    );
    assert!(r.json["endedAt"].is_string() && r.json.get("credentials").is_none());
    assert_eq!(
        get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        0
    );
}

fn bad_purchases_change_nothing(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &["--contract-duration", "1h"]);
    publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let r = buying::reserve(&c, &alice, "shop", "small", None);
    let id = r.json["id"].as_str().unwrap().to_string();
    for (body, field) in [
        (json!({"durationSeconds": 0}), "durationSeconds"),
        (json!({"durationSeconds": 3601}), "durationSeconds"),
        (json!({"durationSeconds": "soon"}), "durationSeconds"),
        (
            json!({"consumerClusterID": "no spaces"}),
            "consumerClusterID",
        ),
        (json!({"consumerClusterID": ""}), "consumerClusterID"),
        (json!({"offer": "x"}), "offer"),
    ] {
        let r = buying::post(
            &c,
            &format!("/reservations/{id}/purchase"),
            &body,
            Some(&alice),
        );
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{body}: {}", r.text);
        let still = get(&c, &format!("/reservations/{id}"), Some(&alice));
        assert_eq!(
            (still.status, &still.json["state"]),
            (200, &json!("reserved")),
            "{body}: {}",
            still.text
        );
    }
    assert_eq!(get(&c, "/contracts", Some(&alice)).json, json!([]));
    // No body at all buys with the defaults.
    let req = buying::client()
        .post(c.url(&format!("/reservations/{id}/purchase")))
        .bearer_auth(&alice);
    let r = c.send(req).unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
}

fn offers_say_which_liqo(backend: Backend) {
    let env = Env::new(backend);
    let (user, password) = ("platform", "platform-password-0123");
    let c = buying::start(&env, &["--osb-username", user, "--osb-password", password]);
    let osb = Platform::new(&c.url(""), Auth::Basic(user.into(), password.into()));
    let service = || {
        let catalog = osb.catalog();
        check_catalog(&catalog).unwrap();
        catalog["services"][0].clone()
    };
    let seller = publish(&c, 1, "shop");
    let ids = |path: &str| {
        let r = get(&c, path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        r.json
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let offer = get(&c, "/offer/shop", None).json;
    assert_eq!(offer["liqo"], json!(["v0"]), "{offer}");
    assert_eq!(ids("/offers?liqo=v0"), ["shop"]);
    assert!(ids("/offers?liqo=v1").is_empty());
    assert!(ids("/offers?liqo=v0&type=storage").is_empty());
    assert_eq!(ids("/offers?liqo=v0&type=compute"), ["shop"]);
    let r = get(&c, "/offers?liqo=v2", None);
    r.expect_error(400);
    assert_eq!(r.json["field"], "liqo");

    let mut feed = FeedClient::connect(c.port, "?liqo=v1").unwrap();
    let first = feed.expect("snapshot", e2e::EVENTUALLY).unwrap();
    assert!(snapshot_ids(&first).is_empty(), "{first}");
    let svc = service();
    assert_eq!(svc["metadata"]["liqo"], json!(["v0"]), "{svc}");
    assert_eq!(svc["tags"], json!(["compute", "liqo-v0"]), "{svc}");

    // Registering a kubeconfig re-stamps the provider's offers: a new
    // version, announced on the feed.
    register_peering(&c, &seller, Some(&kubeconfig(SERVER)), None);
    let now = get(&c, "/offer/shop", None).json;
    assert_eq!(now["liqo"], json!(["v0", "v1"]), "{now}");
    assert_eq!(now["version"], offer["version"].as_u64().unwrap() + 1);
    assert_eq!(ids("/offers?liqo=v1"), ["shop"]);
    let svc = service();
    assert_eq!(svc["metadata"]["liqo"], json!(["v0", "v1"]), "{svc}");
    assert_eq!(
        svc["tags"],
        json!(["compute", "liqo-v0", "liqo-v1"]),
        "{svc}"
    );
    let up = feed.expect("upsert", e2e::EVENTUALLY).unwrap();
    assert_eq!(
        (&up["offer"]["id"], &up["offer"]["liqo"]),
        (&json!("shop"), &json!(["v0", "v1"])),
        "{up}"
    );
    // Registering the same again changes nothing.
    register_peering(&c, &seller, Some(&kubeconfig(SERVER)), None);
    assert_eq!(get(&c, "/offer/shop", None).json["version"], now["version"]);

    // An offer read back and written again (with its server-added fields)
    // is accepted, and stamped by the server, not the client.
    let mut echoed = now.clone();
    echoed["liqo"] = json!(["v0"]);
    let r = buying::post(&c, "/offer/shop", &echoed, Some(&seller));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["liqo"], json!(["v0", "v1"]));

    // Dropping v1: out of the filter again.
    register_peering(&c, &seller, None, None);
    assert!(ids("/offers?liqo=v1").is_empty());
    assert_eq!(ids("/offers?liqo=v0"), ["shop"]);
}

/// Offers and contracts carry the catalog's pricing, set by its flags and
/// never by a provider; `boughtBy` is checked (400 naming it, nothing
/// written), kept, served, and survives a restart — which also shows the
/// pricing is the running catalog's, not stored.
fn pricing_and_bought_by(backend: Backend) {
    let env = Env::new(backend);
    let flags = ["--currency", "USD", "--cost-period", "month"];
    let mut c = buying::start(&env, &flags);
    let usd_month = json!({"currency": "USD", "per": "month"});
    let mut feed = FeedClient::connect(c.port, "").unwrap();
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    let listed = get(&c, "/offers", None).json;
    assert_eq!(listed[0]["pricing"], usd_month, "{listed}");
    assert_eq!(get(&c, "/offer/shop", None).json["pricing"], usd_month);
    // A provider echoing (or inventing) `pricing` is ignored: the unit is
    // the catalog's.
    let mut echoed = buying::offer();
    echoed["pricing"] = json!({"currency": "XTS", "per": "hour"});
    let r = buying::post(&c, "/offer/other", &echoed, Some(&seller));
    assert_eq!(
        (r.status, &r.json["pricing"]),
        (201, &usd_month),
        "{}",
        r.text
    );
    // The feed: the list, then each change.
    let deadline = e2e::EVENTUALLY;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let m = feed.next(deadline).unwrap();
        let offers = match m["type"].as_str() {
            Some("snapshot") => m["offers"].as_array().unwrap().clone(),
            Some("upsert") => vec![m["offer"].clone()],
            _ => continue,
        };
        for o in offers {
            assert_eq!(o["pricing"], usd_month, "{m}");
            if !seen.contains(&o["id"]) {
                seen.push(o["id"].clone());
            }
        }
    }

    // Bad `boughtBy` on a reservation: 400 naming it, nothing reserved.
    let bad = [
        json!(""),
        json!("x".repeat(129)),
        json!("line\nbreak"),
        json!("clear\u{1b}[2J"),
        json!("reversed\u{202e}txt.exe"),
        json!(7),
    ];
    for by in &bad {
        let body = json!({"offerID": "shop", "planID": "small", "boughtBy": by});
        let r = buying::post(&c, "/reservations", &body, Some(&alice));
        r.expect_error(400);
        assert_eq!(r.json["field"], "boughtBy", "{by}: {}", r.text);
    }
    assert_eq!(get(&c, "/reservations", Some(&alice)).json, json!([]));
    // … and on a purchase: 400, the reservation still only reserved.
    let plain = buying::reserve(&c, &alice, "shop", "small", None);
    let plain_id = plain.json["id"].as_str().unwrap().to_string();
    assert!(plain.json.get("boughtBy").is_none(), "{}", plain.text);
    for by in &bad {
        let path = format!("/reservations/{plain_id}/purchase");
        let r = buying::post(&c, &path, &json!({"boughtBy": by}), Some(&alice));
        r.expect_error(400);
        assert_eq!(r.json["field"], "boughtBy", "{by}: {}", r.text);
        let still = get(&c, &format!("/reservations/{plain_id}"), Some(&alice)).json;
        assert_eq!(still["state"], "reserved", "{still}");
        assert!(still.get("boughtBy").is_none(), "{still}");
    }
    assert_eq!(get(&c, "/contracts", Some(&alice)).json, json!([]));

    // Said on the reservation: kept, and the contract carries it.
    let by = "market-autoscaler/team-a/web";
    let body = json!({"offerID": "shop", "planID": "small", "boughtBy": by});
    let r = buying::post(&c, "/reservations", &body, Some(&alice));
    assert_eq!(
        (r.status, &r.json["boughtBy"]),
        (201, &json!(by)),
        "{}",
        r.text
    );
    let first = r.json["id"].as_str().unwrap().to_string();
    let path = format!("/reservations/{first}/purchase");
    let r = buying::post(&c, &path, &json!({}), Some(&alice));
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        (&r.json["boughtBy"], &r.json["pricing"]),
        (&json!(by), &usd_month)
    );
    // Said on the purchase: replaces the reservation's silence.
    let path = format!("/reservations/{plain_id}/purchase");
    let r = buying::post(
        &c,
        &path,
        &json!({"boughtBy": "ops: Ünïcode ok"}),
        Some(&alice),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let contracts = |c: &e2e::catalog::Catalog, token: &str| {
        let r = get(c, "/contracts", Some(token));
        assert_eq!(r.status, 200, "{}", r.text);
        r.json
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["id"].as_str().unwrap().to_string(),
                    (k["boughtBy"].clone(), k["pricing"].clone()),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let want = |pricing: &serde_json::Value| {
        std::collections::BTreeMap::from([
            (first.clone(), (json!(by), pricing.clone())),
            (
                plain_id.clone(),
                (json!("ops: Ünïcode ok"), pricing.clone()),
            ),
        ])
    };
    assert_eq!(contracts(&c, &alice), want(&usd_month));
    // The selling provider sees who bought too.
    assert_eq!(contracts(&c, &seller), want(&usd_month));
    let one = get(&c, &format!("/contracts/{first}"), Some(&alice)).json;
    assert_eq!(
        (&one["boughtBy"], &one["pricing"]),
        (&json!(by), &usd_month)
    );

    // A restart keeps `boughtBy`; the pricing is the new process's.
    let status = c
        .child
        .terminate(Duration::from_secs(15))
        .expect("clean stop");
    assert!(status.success(), "SIGTERM exit status {status}");
    let c = buying::start(&env, &[]);
    let eur_hour = json!({"currency": "EUR", "per": "hour"});
    assert_eq!(contracts(&c, &alice), want(&eur_hour));
    assert_eq!(get(&c, "/offer/shop", None).json["pricing"], eur_hour);
}

/// A `--currency` that is not an ISO 4217 code stops the catalog at
/// start, naming the flag and what it takes, before it opens any store.
#[test]
fn a_bad_currency_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value) in [
        ("--currency", "eur"),
        ("--currency", "EURO"),
        ("--cost-period", "day"),
    ] {
        let out = std::process::Command::new(e2e::process::bin_path("catalog"))
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args([flag, value])
            .output()
            .expect("run catalog");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(value),
            "{flag} {value}: {stderr}"
        );
        assert!(
            stderr.contains("ISO 4217") || stderr.contains("hour or month"),
            "{flag} {value}: {stderr}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing written"
        );
    }
}

fn secs(v: &serde_json::Value) -> f64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    let t = chrono::DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    t.timestamp_millis() as f64 / 1000.0
}
