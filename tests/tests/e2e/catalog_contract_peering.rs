//! Per-contract Liqo v1 peering credentials and contracts that continue
//! (issue 31), against the real catalog binary on both stores: a v1
//! purchase names the consumer's cluster ID (400 naming the field
//! otherwise); a provider serving v1 with a peering user per contract
//! attaches a kubeconfig to each of its own contracts (404 for another
//! provider's, 409 once ended, 400 for a kubeconfig the one check
//! refuses), released only to that contract's consumer while it is
//! active, with the peering state the consumer follows; a shared v1
//! kubeconfig is refused unless the provider declares itself
//! single-consumer; a contract is extended before it ends (same id, same
//! credentials) and reads `endingSoon` within the configured lead time.

use e2e::buying::{self, admin, consumer, delete, get, post, publish, put};
use e2e::catalog::{Backend, Env};
use e2e::catalog_tests;
use e2e::contracts::{buy, kubeconfig, register_per_contract, register_v1};
use serde_json::{json, Value};

catalog_tests!(per_contract_credentials, contracts_continue);

/// The peering user made for alice's cluster, and for bob's.
fn alice_kubeconfig() -> String {
    kubeconfig("https://provider-1.example:6443/alice")
}
fn bob_kubeconfig() -> String {
    kubeconfig("https://provider-1.example:6443/bob")
}

fn attach(
    c: &e2e::catalog::Catalog,
    token: &str,
    id: &str,
    kubeconfig: &str,
) -> e2e::catalog::Resp {
    put(
        c,
        &format!("/provider/contracts/{id}/peering"),
        &json!({ "kubeconfig": kubeconfig }),
        Some(token),
    )
}

fn id_of(r: &Value) -> String {
    r["id"].as_str().expect("id").to_string()
}

fn per_contract_credentials(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let other_seller = publish(&c, 2, "shop-2");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");

    // A shared kubeconfig is refused, saying why; nothing is registered.
    let before = get(&c, "/provider/peering", Some(&seller)).json;
    for v1 in [
        json!({ "kubeconfig": alice_kubeconfig() }),
        json!({ "kubeconfig": alice_kubeconfig(), "singleConsumer": false }),
        json!({ "singleConsumer": true }),
    ] {
        let r = register_v1(&c, &seller, Some(v1.clone()), None);
        let message = r.expect_error(400);
        assert_eq!(r.json["field"], "v1.kubeconfig", "{v1}: {}", r.text);
        assert_eq!(get(&c, "/provider/peering", Some(&seller)).json, before);
        if v1.get("kubeconfig").is_some() {
            assert!(message.contains("one consumer cluster"), "{message}");
        }
    }
    // Liqo v1 with a peering user per contract.
    let r = register_per_contract(&c, &seller);
    assert_eq!(
        (r.status, &r.json),
        (
            200,
            &json!({"clusterID": "cluster-1", "liqo": ["v0", "v1"],
                    "resourceSliceClass": "liqo-broker", "singleConsumer": false})
        ),
        "{}",
        r.text
    );

    // A v1 purchase names the consumer's cluster, as Liqo spells it.
    let held = buying::reserve(&c, &alice, "shop", "small", None);
    let held = id_of(&held.json);
    for (body, says) in [
        (json!({}), "exactly one consumer cluster"),
        (json!({"consumerClusterID": "Alice_1"}), "DNS-1123 label"),
    ] {
        let r = post(
            &c,
            &format!("/reservations/{held}/purchase"),
            &body,
            Some(&alice),
        );
        let message = r.expect_error(400);
        assert_eq!(r.json["field"], "consumerClusterID", "{}", r.text);
        assert!(message.contains(says), "{message}");
        let still = get(&c, &format!("/reservations/{held}"), Some(&alice));
        assert_eq!(still.json["state"], "reserved", "nothing bought");
    }
    let r = post(
        &c,
        &format!("/reservations/{held}/purchase"),
        &json!({"consumerClusterID": "alice-1"}),
        Some(&alice),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let alices = id_of(&r.json);
    assert_eq!(r.json["consumerClusterID"], "alice-1");
    assert_eq!(
        r.json["peeringState"]["state"], "awaitingCredentials",
        "{}",
        r.text
    );
    assert!(r.json["credentials"]["v1"].is_null(), "{}", r.text);
    assert!(
        r.json["credentials"]["v0"]["token"].is_string(),
        "v0 as before"
    );
    let bobs = id_of(
        &buy(
            &c,
            &bob,
            "shop",
            "small",
            &json!({"consumerClusterID": "bob-1"}),
        )
        .json,
    );

    // The provider's controller: its active contracts, with the consumers'
    // cluster IDs and what still awaits credentials.
    let listed = get(&c, "/contracts?active=true", Some(&seller));
    let mut awaiting: Vec<(String, String)> = listed
        .json
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["peeringState"]["state"] == "awaitingCredentials")
        .map(|k| {
            (
                id_of(k),
                k["consumerClusterID"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    awaiting.sort();
    let mut want = vec![
        (alices.clone(), "alice-1".to_string()),
        (bobs.clone(), "bob-1".to_string()),
    ];
    want.sort();
    assert_eq!(awaiting, want, "{}", listed.text);

    // Attaching: only to its own contracts, only a kubeconfig the check
    // takes, only while active.
    attach(&c, &other_seller, &alices, &alice_kubeconfig()).expect_error(404);
    attach(&c, &alice, &alices, &alice_kubeconfig()).expect_error(403);
    let r = attach(
        &c,
        &seller,
        &alices,
        "apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    exec: {command: sh}\n",
    );
    r.expect_error(400);
    assert_eq!(r.json["field"], "kubeconfig", "{}", r.text);
    let r = put(
        &c,
        &format!("/provider/contracts/{alices}/peering"),
        &json!({"kubeconfig": alice_kubeconfig(), "extra": 1}),
        Some(&seller),
    );
    assert_eq!(
        (r.status, &r.json["field"]),
        (400, &json!("extra")),
        "{}",
        r.text
    );
    let mine = get(&c, &format!("/contracts/{alices}"), Some(&alice));
    assert_eq!(mine.json["peeringState"]["state"], "awaitingCredentials");
    assert!(mine.json["credentials"]["v1"].is_null(), "{}", mine.text);

    let r = attach(&c, &seller, &alices, &alice_kubeconfig());
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["peeringState"]["state"], "credentialsReady");
    assert!(r.json.get("credentials").is_none(), "{}", r.text);
    assert_eq!(attach(&c, &seller, &bobs, &bob_kubeconfig()).status, 200);

    // Each consumer gets its own, and only its own.
    let mine = get(&c, &format!("/contracts/{alices}"), Some(&alice));
    assert_eq!(
        mine.json["peeringState"]["state"], "credentialsReady",
        "{}",
        mine.text
    );
    assert!(
        mine.json["peeringState"]["attachedAt"].is_string(),
        "{}",
        mine.text
    );
    assert_eq!(
        mine.json["credentials"]["v1"]["kubeconfig"],
        alice_kubeconfig().as_str()
    );
    let bobs_view = get(&c, &format!("/contracts/{bobs}"), Some(&bob));
    assert_eq!(
        bobs_view.json["credentials"]["v1"]["kubeconfig"],
        bob_kubeconfig().as_str()
    );
    get(&c, &format!("/contracts/{alices}"), Some(&bob)).expect_error(404);
    // Nobody else reads it: not the provider, an admin, lists or records.
    for (path, token) in [
        (format!("/contracts/{alices}"), &seller),
        (format!("/contracts/{alices}"), &admin),
        ("/contracts".to_string(), &alice),
        (format!("/reservations/{alices}"), &alice),
        (format!("/purchases/{alices}"), &alice),
        ("/purchases".to_string(), &admin),
    ] {
        let r = get(&c, &path, Some(token));
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert!(!r.text.contains("/alice"), "{path}: {}", r.text);
        assert!(!r.text.contains("sealed"), "{path}: {}", r.text);
    }

    // Ended: no credentials, and none attached any more.
    assert_eq!(
        delete(&c, &format!("/purchases/{alices}"), Some(&alice)).status,
        200
    );
    let ended = get(&c, &format!("/contracts/{alices}"), Some(&alice));
    assert!(ended.json.get("credentials").is_none(), "{}", ended.text);
    let message = attach(&c, &seller, &alices, &alice_kubeconfig()).expect_error(409);
    assert!(message.contains("ended"), "{message}");

    // A v0-only provider's plans are bought as before, without a cluster.
    let r = buy(&c, &alice, "shop-2", "small", &json!({}));
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.json.get("peeringState").is_none(), "{}", r.text);
    attach(&c, &other_seller, &id_of(&r.json), &alice_kubeconfig()).expect_error(409);

    // Declared single-consumer: the one kubeconfig goes to the contracts
    // bought from then on, as before per-contract credentials.
    let r = register_v1(
        &c,
        &other_seller,
        Some(json!({"kubeconfig": alice_kubeconfig(), "singleConsumer": true})),
        None,
    );
    assert_eq!(r.json["singleConsumer"], true, "{}", r.text);
    let r = buy(
        &c,
        &alice,
        "shop-2",
        "small",
        &json!({"consumerClusterID": "alice-1"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json["peeringState"]["state"], "credentialsReady",
        "{}",
        r.text
    );
    assert_eq!(
        r.json["credentials"]["v1"]["kubeconfig"],
        alice_kubeconfig().as_str()
    );
}

fn contracts_continue(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(
        &env,
        &["--contract-duration", "1h", "--contract-ending-soon", "10m"],
    );
    let seller = publish(&c, 1, "shop");
    register_per_contract(&c, &seller);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let bought = buy(
        &c,
        &alice,
        "shop",
        "small",
        &json!({"consumerClusterID": "alice-1", "durationSeconds": 300}),
    );
    assert_eq!(bought.status, 201, "{}", bought.text);
    let id = id_of(&bought.json);
    assert_eq!(bought.json["endingSoon"], true, "5 min left, lead 10 min");
    assert_eq!(attach(&c, &seller, &id, &alice_kubeconfig()).status, 200);
    let extend =
        |body: Value, token: &str| post(&c, &format!("/contracts/{id}/extend"), &body, Some(token));

    // Only its consumer extends; bad lengths are named.
    extend(json!({"durationSeconds": 600}), &seller).expect_error(403);
    extend(json!({"durationSeconds": 600}), &bob).expect_error(404);
    for body in [
        json!({"durationSeconds": 0}),
        json!({"durationSeconds": 3600}),
        json!({"until": "later"}),
    ] {
        let r = extend(body.clone(), &alice);
        r.expect_error(400);
        let field = body.as_object().unwrap().keys().next().unwrap().clone();
        assert_eq!(r.json["field"], field.as_str(), "{body}: {}", r.text);
    }
    let unchanged = get(&c, &format!("/contracts/{id}"), Some(&alice)).json;
    assert_eq!(unchanged["expiresAt"], bought.json["expiresAt"]);

    // Extended: same id, later end, not ending soon, credentials kept.
    let r = extend(json!({"durationSeconds": 1200}), &alice);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["id"], id.as_str());
    let added = secs(&r.json["expiresAt"]) - secs(&bought.json["expiresAt"]);
    assert!((added - 1200.0).abs() < 0.01, "{}", r.text);
    assert_eq!(r.json["endingSoon"], false, "{}", r.text);
    assert!(r.json["extendedAt"].is_string(), "{}", r.text);
    let mine = get(&c, &format!("/contracts/{id}"), Some(&alice));
    assert_eq!(
        mine.json["credentials"]["v1"]["kubeconfig"],
        alice_kubeconfig().as_str()
    );
    assert_eq!(
        get(&c, "/contracts", Some(&alice))
            .json
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // No length: renewed to a whole contract duration from now.
    let r = extend(json!({}), &alice);
    assert_eq!(r.status, 200, "{}", r.text);
    let left = secs(&r.json["expiresAt"]) - chrono::Utc::now().timestamp() as f64;
    assert!((3590.0..=3601.0).contains(&left), "{}", r.text);

    // A plan the provider changed since: the contract runs to its end.
    let mut dearer = buying::offer();
    dearer["plans"]["small"]["cost"] = json!("2");
    c.put_offer("shop", &dearer, &seller);
    let message = extend(json!({"durationSeconds": 1}), &alice).expect_error(409);
    assert!(message.contains("cost 1.5 → 2.0"), "{message}");

    // Ended contracts do not continue.
    assert_eq!(
        delete(&c, &format!("/purchases/{id}"), Some(&alice)).status,
        200
    );
    c.put_offer("shop", &buying::offer(), &seller);
    let message = extend(json!({"durationSeconds": 1}), &alice).expect_error(409);
    assert!(message.contains("ended"), "{message}");
}

fn secs(v: &Value) -> f64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    let t = chrono::DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    t.timestamp_millis() as f64 / 1000.0
}
