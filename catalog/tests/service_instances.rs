//! `GET /service-instances` and `GET /service-instances/{id}` (issue 45:
//! "my deployments" from the catalog, not a browser's storage), against
//! the real catalog binary on both stores. Two customers provision over
//! the Open Service Broker API with their own bearer tokens: each lists
//! its own instances only — never the other's, which is 404 by id too —
//! the selling provider lists those it sells, an admin all. The list
//! follows the records: a service instance `provisioning` until its
//! provider reports, then `ready`; a binding `creating`, then `bound`;
//! deprovisioning. Never the customer's kubeconfig nor a credential. An
//! instance whose provisioning failed before anything was bought (its plan
//! sold out) is listed too — it has no purchase to be found through — to
//! its owner and its provider, never to another customer.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use catalog_client::routes;
use catalog_client::wire::service_instance::ServiceInstance;
use e2e::buying::{self, admin, cap, consumer, get, publish, put};
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::catalog_tests;
use e2e::contracts::{kubeconfig, wait_for};
use e2e::osb_client::{plan_of, service_of, Auth, Outcome, Platform};
use reqwest::Method;
use serde_json::{json, Value};

catalog_tests!(
    each_customer_lists_its_own_instances,
    an_instance_failed_before_its_purchase_is_listed_to_its_owner_only
);

/// A service offer `db` with one `Local` plan.
fn service_offer() -> Value {
    json!({ "name": "MySQL", "type": "database", "kind": "service",
        "plans": { "local": { "name": "local", "cost": "1", "hosting": "Local" } } })
}

/// Provision service instance `id` of OSB plan `(service, plan)` as `p`,
/// with parameter `size` and the customer's peering `kubeconfig`; the raw
/// answer.
fn provision_service(
    p: &Platform,
    (service, plan): (&str, &str),
    id: &str,
    size: u32,
    kubeconfig: &str,
) -> e2e::catalog::Resp {
    let body = json!({ "service_id": service, "plan_id": plan, "organization_guid": "org",
        "space_guid": "space", "parameters": { "size": size },
        "context": { "platform": "kubernetes", "peering": { "kubeconfig": kubeconfig } } });
    p.send(
        Method::PUT,
        &format!("/v2/service_instances/{id}?accepts_incomplete=true"),
        Some(&body),
        Some("2.17"),
    )
}

/// `GET /service-instances` as `token`: the instances' ids, sorted. The
/// answer reads as `catalog-client`'s wire type, at the path it names.
fn listed_ids(c: &Catalog, token: &str) -> Vec<String> {
    let r = get(c, &format!("/{}", routes::SERVICE_INSTANCES), Some(token));
    assert_eq!(r.status, 200, "{}", r.text);
    let typed: Vec<ServiceInstance> = serde_json::from_value(r.json.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        r.json,
        "the wire type"
    );
    let mut ids: Vec<String> = typed.into_iter().map(|i| i.id).collect();
    ids.sort();
    ids
}

/// Instance `id` as `token` lists it, once listed.
fn listed(c: &Catalog, token: &str, id: &str) -> Option<Value> {
    get(c, "/service-instances", Some(token))
        .json
        .as_array()?
        .iter()
        .find(|i| i["id"] == id)
        .cloned()
}

fn each_customer_lists_its_own_instances(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = c.login(&provider(1));
    c.put_offer("db", &service_offer(), &seller);
    // Another provider's capacity offer, provisioned over OSB too.
    let other_seller = publish(&c, 2, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let as_alice = Platform::new(&c.url(""), Auth::Bearer(alice.clone()));
    let as_bob = Platform::new(&c.url(""), Auth::Bearer(bob.clone()));
    let catalog = as_alice.catalog();
    let db = service_of(&catalog, "db").clone();
    let (sid, pid) = (
        db["id"].as_str().unwrap(),
        plan_of(&db, "local")["id"].as_str().unwrap(),
    );
    let shop = service_of(&catalog, "shop").clone();
    let (shop_sid, shop_pid) = (
        shop["id"].as_str().unwrap(),
        plan_of(&shop, "small")["id"].as_str().unwrap(),
    );

    // Nothing yet, for anyone.
    assert_eq!(listed_ids(&c, &alice), Vec::<String>::new());

    let customer = kubeconfig("https://customer.example:6443");
    let provision = |p: &Platform, id: &str, size: u32| {
        let r = provision_service(p, (sid, pid), id, size, &customer);
        assert_eq!(r.status, 202, "{}", r.text);
    };
    provision(&as_alice, "alice-db", 2);
    provision(&as_bob, "bob-db", 5);
    let r = as_alice.provision("alice-shop", shop_sid, shop_pid, None, false);
    assert_eq!(r.status, 201, "{}", r.text);

    // Each service instance is listed once bought, waiting for its
    // provider; each customer sees its own only.
    let mine = wait_for("alice's service instance bought", || {
        listed(&c, &alice, "alice-db").filter(|i| i["contractID"].is_string())
    });
    wait_for("bob's service instance bought", || {
        listed(&c, &bob, "bob-db").filter(|i| i["contractID"].is_string())
    });
    assert_eq!(listed_ids(&c, &alice), ["alice-db", "alice-shop"]);
    assert_eq!(listed_ids(&c, &bob), ["bob-db"]);
    assert_eq!(
        (
            &mine["owner"],
            &mine["offerID"],
            &mine["planID"],
            &mine["kind"],
            &mine["clusterID"],
            &mine["state"],
            &mine["parameters"],
        ),
        (
            &json!("alice"),
            &json!("db"),
            &json!("local"),
            &json!("service"),
            &json!("cluster-1"),
            &json!("provisioning"),
            &json!({ "size": 2 }),
        ),
        "{mine}"
    );
    assert_eq!(mine["osb"], json!({ "serviceID": sid, "planID": pid }));
    assert_eq!(mine["lastOperation"]["type"], "provision");
    assert_eq!(mine["lastOperation"]["state"], "in progress");
    assert_eq!(mine["bindings"], json!([]));
    let contract = mine["contractID"].as_str().unwrap().to_string();
    let shop_instance = listed(&c, &alice, "alice-shop").unwrap();
    assert_eq!(
        (&shop_instance["kind"], &shop_instance["state"]),
        (&json!("capacity"), &json!("ready"))
    );

    // By id: the owner's; another customer's is 404, as for none.
    let r = get(&c, "/service-instances/alice-db", Some(&alice));
    assert_eq!(
        (r.status, &r.json["id"]),
        (200, &json!("alice-db")),
        "{}",
        r.text
    );
    get(&c, "/service-instances/bob-db", Some(&alice)).expect_error(404);
    assert_eq!(
        get(&c, "/service-instances/alice-db", Some(&bob)).status,
        404
    );
    assert_eq!(get(&c, "/service-instances/none", Some(&alice)).status, 404);

    // The seller lists what it sells, the other provider its own, the
    // admin everything.
    assert_eq!(listed_ids(&c, &seller), ["alice-db", "bob-db"]);
    assert_eq!(listed_ids(&c, &other_seller), ["alice-shop"]);
    assert_eq!(listed_ids(&c, &admin), ["alice-db", "alice-shop", "bob-db"]);
    assert_eq!(
        get(&c, "/service-instances/alice-shop", Some(&seller)).status,
        404
    );

    // A query parameter is refused, named.
    let r = get(&c, "/service-instances?owner=bob", Some(&alice));
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("owner")),
        "{}",
        r.text
    );

    // The provider reports: ready. A binding: creating, then bound.
    let report = format!("/provider/contracts/{contract}/service");
    let done = json!({ "state": "succeeded", "description": "ready in namespace svc-x" });
    assert_eq!(put(&c, &report, &done, Some(&seller)).status, 200);
    let ready = listed(&c, &alice, "alice-db").unwrap();
    assert_eq!(ready["state"], "ready", "{ready}");
    assert_eq!(
        ready["lastOperation"]["description"],
        "ready in namespace svc-x"
    );
    let bind = json!({ "service_id": sid, "plan_id": pid,
        "parameters": { "namespace": "app", "secretName": "db-creds" } });
    let r = as_alice.send(
        Method::PUT,
        "/v2/service_instances/alice-db/service_bindings/b1?accepts_incomplete=true",
        Some(&bind),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let b = &listed(&c, &alice, "alice-db").unwrap()["bindings"][0];
    assert_eq!(
        (&b["id"], &b["state"], &b["parameters"]),
        (
            &json!("b1"),
            &json!("creating"),
            &json!({ "namespace": "app", "secretName": "db-creds" })
        )
    );
    let credentials =
        json!({ "state": "succeeded", "credentials": { "password": "pw-only-alice-fetches" } });
    let r = put(
        &c,
        &format!("/provider/contracts/{contract}/bindings/b1"),
        &credentials,
        Some(&seller),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let bound = listed(&c, &alice, "alice-db").unwrap();
    assert_eq!(bound["bindings"][0]["state"], "bound", "{bound}");
    assert_eq!(
        get(&c, "/service-instances", Some(&bob))
            .json
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // What is never shown: the customer's kubeconfig, the credentials.
    let key = "client-key-data: ";
    let secret = customer[customer.find(key).unwrap() + key.len()..]
        .lines()
        .next()
        .unwrap()
        .to_string();
    for token in [&alice, &seller, &admin] {
        let shown = get(&c, "/service-instances", Some(token)).text;
        assert!(!shown.contains(&secret), "the customer's key in {shown}");
        assert!(
            !shown.contains("pw-only-alice-fetches"),
            "a credential in {shown}"
        );
    }

    // Deprovisioning shows as such until the provider removes it.
    let r = as_alice.send(
        Method::DELETE,
        &format!("/v2/service_instances/alice-db/service_bindings/b1?service_id={sid}&plan_id={pid}&accepts_incomplete=true"),
        None,
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let b = &listed(&c, &alice, "alice-db").unwrap()["bindings"][0];
    assert_eq!(b["state"], "deleting", "{b}");
    let gone = json!({ "state": "succeeded" });
    let r = put(
        &c,
        &format!("/provider/contracts/{contract}/bindings/b1"),
        &gone,
        Some(&seller),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = as_alice.send(
        Method::DELETE,
        &format!(
            "/v2/service_instances/alice-db?service_id={sid}&plan_id={pid}&accepts_incomplete=true"
        ),
        None,
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let going = listed(&c, &alice, "alice-db").unwrap();
    assert_eq!(
        (&going["state"], &going["bindings"]),
        (&json!("deprovisioning"), &json!([]))
    );
    let removed = json!({ "state": "succeeded", "description": "removed", "removal": true });
    assert_eq!(put(&c, &report, &removed, Some(&seller)).status, 200);
    assert_eq!(listed_ids(&c, &alice), ["alice-shop"]);
    assert_eq!(
        get(&c, "/service-instances/alice-db", Some(&alice)).status,
        404
    );
    assert_eq!(listed_ids(&c, &bob), ["bob-db"]);
}

/// The plan sold out (capped at 0 units): alice's provisioning fails in
/// the background before anything is bought, so the instance holds no
/// purchase. Listing through purchases never showed it; it is alice's
/// deployment all the same: listed to her (`failed`, no contract, the
/// reason as its last operation), to the provider selling the plan and to
/// the admin — never to bob, who lists nothing.
fn an_instance_failed_before_its_purchase_is_listed_to_its_owner_only(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = c.login(&provider(1));
    c.put_offer("db", &service_offer(), &seller);
    cap(&c, &seller, "db", "local", Some(0));
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let bob = consumer(&c, &admin, "bob");
    let as_alice = Platform::new(&c.url(""), Auth::Bearer(alice.clone()));
    let catalog = as_alice.catalog();
    let db = service_of(&catalog, "db").clone();
    let (sid, pid) = (
        db["id"].as_str().unwrap(),
        plan_of(&db, "local")["id"].as_str().unwrap(),
    );
    let customer = kubeconfig("https://customer.example:6443");
    let r = provision_service(&as_alice, (sid, pid), "sold-out", 1, &customer);
    assert_eq!(r.status, 202, "{}", r.text);
    let operation = r.json["operation"].as_str().map(str::to_string);
    match as_alice.wait("sold-out", sid, pid, operation.as_deref()) {
        Outcome::Failed(_) => {}
        other => panic!("provisioning a sold-out plan: {other:?}"),
    }

    assert_eq!(listed_ids(&c, &alice), ["sold-out"]);
    let failed = listed(&c, &alice, "sold-out").unwrap();
    assert_eq!(
        (&failed["state"], &failed["lastOperation"]["state"]),
        (&json!("failed"), &json!("failed")),
        "{failed}"
    );
    assert!(
        failed.get("contractID").is_none(),
        "nothing was bought: {failed}"
    );
    assert_eq!(listed_ids(&c, &bob), Vec::<String>::new());
    assert_eq!(
        get(&c, "/service-instances/sold-out", Some(&bob)).status,
        404
    );
    assert_eq!(listed_ids(&c, &seller), ["sold-out"]);
    assert_eq!(listed_ids(&c, &admin), ["sold-out"]);
}
