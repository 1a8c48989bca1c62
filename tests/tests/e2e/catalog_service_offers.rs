//! Service offers (issue 32) against the real catalog, on both stores, as
//! a provider publishes them and a platform calls the Open Service Broker:
//! a malformed schema refused on publish, naming it; `kind=` and
//! `hosting=` filters; `/v2/catalog` with the plans' `schemas`;
//! provisioning only asynchronously, parameters checked against the plan's
//! schema (400 naming the field, nothing recorded); `last_operation`
//! `in progress` until the provider reports the service's state for the
//! contract; binding parameters checked; deprovisioning 202, then 410 once
//! the provider reports the service gone.

use e2e::buying::{self, get, put};
use e2e::catalog::{provider, Backend, Env};
use e2e::catalog_tests;
use e2e::osb_client::{Auth, Platform};
use reqwest::Method;
use serde_json::{json, Value};

const USER: &str = "platform";
const PASSWORD: &str = "platform-password-0123";

catalog_tests!(service_offer_lifecycle);

fn schema(required: &str) -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {
            "size": { "type": "integer", "minimum": 1 },
            "database": { "type": "string" },
        },
        "required": [required],
    })
}

/// A MySQL-like service: a cheap `Local` plan and a dearer `Remote` one
/// whose provisioning needs `size` and binding needs `database`.
fn service_offer() -> Value {
    json!({ "name": "MySQL", "type": "database", "kind": "service",
        "plans": {
            "local": { "name": "local", "cost": "1", "hosting": "Local" },
            "remote": { "name": "remote", "cost": "3", "hosting": "Remote",
                "resources": { "cpu": "1", "memory": "1Gi" },
                "schemas": {
                    "service_instance": { "create": { "parameters": schema("size") } },
                    "service_binding": { "create": { "parameters": schema("database") } },
                } } } })
}

fn ids_of(listed: &Value) -> Vec<String> {
    let mut ids: Vec<String> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| o["id"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

fn service_offer_lifecycle(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &["--osb-username", USER, "--osb-password", PASSWORD]);
    let token = c.login(&provider(1));

    // A schema that is no JSON Schema is refused, named, and nothing stored.
    let mut bad = service_offer();
    bad["plans"]["remote"]["schemas"]["service_instance"]["create"]["parameters"]["properties"]
        ["size"]["type"] = json!("integr");
    let r = buying::post(&c, "/offer/db", &bad, Some(&token));
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(
        r.json["field"], "plans.remote.schemas.service_instance.create.parameters",
        "{}",
        r.text
    );
    assert_eq!(get(&c, "/offer/db", None).status, 404);
    let mut no_hosting = service_offer();
    no_hosting["plans"]["local"]
        .as_object_mut()
        .unwrap()
        .remove("hosting");
    let r = buying::post(&c, "/offer/db", &no_hosting, Some(&token));
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("plans.local.hosting")),
        "{}",
        r.text
    );

    c.put_offer("db", &service_offer(), &token);
    c.put_offer("shop", &buying::offer(), &token);
    let stored = get(&c, "/offer/db", None).json;
    assert_eq!(stored["kind"], "service");
    assert_eq!(
        stored["plans"]["remote"]["schemas"]["service_instance"]["create"]["parameters"],
        schema("size")
    );
    for (query, expected) in [
        ("kind=service", vec!["db"]),
        ("kind=capacity", vec!["shop"]),
        ("hosting=Remote", vec!["db"]),
        ("hosting=LocalAndRemote", vec![]),
        // The Remote plan costs 3: no plan is both.
        ("hosting=Remote&maxCost=2", vec![]),
        ("hosting=Local&maxCost=2", vec!["db"]),
    ] {
        let r = get(&c, &format!("/offers?{query}"), None);
        assert_eq!(r.status, 200, "{query}: {}", r.text);
        assert_eq!(ids_of(&r.json), expected, "{query}");
    }
    assert_eq!(
        get(&c, "/offers?hosting=remote", None).json["field"],
        "hosting"
    );

    // The OSB catalog: the plan's schemas as OSB v2.17 `schemas`.
    let p = Platform::new(&c.url(""), Auth::Basic(USER.into(), PASSWORD.into()));
    let catalog = p.catalog();
    let service = catalog["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metadata"]["offerID"] == "db")
        .expect("the service offer in /v2/catalog")
        .clone();
    assert!(service["tags"]
        .as_array()
        .unwrap()
        .contains(&json!("service")));
    let plan = service["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["planID"] == "remote")
        .unwrap()
        .clone();
    assert_eq!(plan["metadata"]["hosting"], "Remote");
    assert_eq!(
        plan["schemas"]["service_binding"]["create"]["parameters"],
        schema("database")
    );
    let (sid, pid) = (
        service["id"].as_str().unwrap().to_string(),
        plan["id"].as_str().unwrap().to_string(),
    );

    // Only asynchronously; bad parameters named, nothing recorded.
    let r = p.provision("svc", &sid, &pid, Some(json!({ "size": 2 })), false);
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("AsyncRequired")),
        "{}",
        r.text
    );
    let r = p.provision("svc", &sid, &pid, Some(json!({ "size": "big" })), true);
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.json["description"]
            .as_str()
            .unwrap()
            .starts_with("parameters.size:"),
        "{}",
        r.text
    );
    assert_eq!(p.last_operation("svc", &sid, &pid, None).status, 410);

    let r = p.provision("svc", &sid, &pid, Some(json!({ "size": 2 })), true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().unwrap().to_string();
    // Bought, then waiting for the provider: still in progress.
    poll(|| {
        let r = p.last_operation("svc", &sid, &pid, Some(&op));
        assert_eq!(r.json["state"], "in progress", "{}", r.text);
        let described = r.json["description"].as_str().unwrap_or_default();
        described.contains("waiting for the provider").then_some(())
    });
    let listed = get(&c, "/contracts", Some(&token)).json;
    let contract = listed
        .as_array()
        .and_then(|l| l.iter().find(|k| k["offerID"] == "db"))
        .map(|k| k["id"].as_str().unwrap().to_string())
        .expect("the provider sees the contract");

    // Only the selling provider reports; then last_operation tells it.
    let report_path = format!("/provider/contracts/{contract}/service");
    let other = c.login(&provider(2));
    let step = json!({ "state": "in progress", "description": "namespace offloaded" });
    assert_eq!(put(&c, &report_path, &step, Some(&other)).status, 404);
    let r = put(&c, &report_path, &step, Some(&token));
    assert_eq!(r.status, 200, "{}", r.text);
    let r = p.last_operation("svc", &sid, &pid, Some(&op));
    assert_eq!(
        (r.json["state"].as_str(), r.json["description"].as_str()),
        (Some("in progress"), Some("namespace offloaded"))
    );
    let r = put(&c, &report_path, &json!({ "state": "done" }), Some(&token));
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("state")),
        "{}",
        r.text
    );
    let done = json!({ "state": "succeeded", "description": "MySQL is running" });
    assert_eq!(put(&c, &report_path, &done, Some(&token)).status, 200);
    let r = p.last_operation("svc", &sid, &pid, Some(&op));
    assert_eq!(r.json["state"], "succeeded", "{}", r.text);
    assert_eq!(
        p.fetch_instance("svc").json["parameters"],
        json!({ "size": 2 })
    );
    assert_eq!(put(&c, &report_path, &done, Some(&token)).status, 409);

    // Binding parameters are checked against the binding schema.
    let bind = |binding: &str, parameters: Value| {
        let body = json!({ "service_id": sid, "plan_id": pid,
            "bind_resource": { "app_guid": "app" }, "parameters": parameters });
        p.send(
            Method::PUT,
            &format!("/v2/service_instances/svc/service_bindings/{binding}"),
            Some(&body),
            Some("2.17"),
        )
    };
    let r = bind("b1", json!({ "database": 7 }));
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.json["description"]
        .as_str()
        .unwrap()
        .starts_with("parameters.database:"));
    assert_eq!(p.fetch_binding("svc", "b1").status, 404);
    let r = bind("b1", json!({ "database": "shop" }));
    assert_eq!(r.status, 201, "{}", r.text);

    // Deprovisioning: asynchronous only; 202, then gone once reported.
    let r = p.deprovision("svc", &sid, &pid, false);
    assert_eq!(r.json["error"], "AsyncRequired", "{}", r.text);
    let r = p.deprovision("svc", &sid, &pid, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().unwrap().to_string();
    let r = p.last_operation("svc", &sid, &pid, Some(&op));
    assert_eq!(r.json["state"], "in progress", "{}", r.text);
    let gone = json!({ "state": "succeeded" });
    assert_eq!(put(&c, &report_path, &gone, Some(&token)).status, 200);
    assert_eq!(p.last_operation("svc", &sid, &pid, Some(&op)).status, 410);
    assert_eq!(put(&c, &report_path, &gone, Some(&token)).status, 404);
}

/// Poll `f` until it has an answer (at most 20 s).
fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
