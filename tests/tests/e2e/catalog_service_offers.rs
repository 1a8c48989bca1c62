//! Service offers (issue 32) against the real catalog, on both stores, as
//! a provider publishes them and a platform calls the Open Service Broker:
//! a malformed schema refused on publish, naming it; `kind=` and
//! `hosting=` filters; `/v2/catalog` with the plans' `schemas`;
//! provisioning only asynchronously, parameters checked against the plan's
//! schema (400 naming the field, nothing recorded); `last_operation`
//! `in progress` until the provider reports the service's state for the
//! contract; binding parameters checked; deprovisioning 202, then 410 once
//! the provider reports the service gone. With issue 32's service side:
//! the customer's peering kubeconfig required in `context.peering` (400
//! naming it, nothing recorded), read only by the selling provider (410
//! once deprovisioning); PATCH parameters checked against the update
//! schema; bindings asynchronous — `accepts_incomplete`, `namespace` and
//! `secretName` required, the provider lists the pending binding, reports
//! its credentials (required on success), the platform polls and fetches
//! them, unbinds (202) and gets 410 once the provider removed it. Refusals
//! change nothing. The provider also registers a Liqo v1 peering for its
//! capacity: a service is still bought with no consumer cluster ID.

use e2e::buying::{self, get, put};
use e2e::catalog::{provider, Backend, Env};
use e2e::catalog_tests;
use e2e::contracts::kubeconfig;
use e2e::osb_client::{plan_of, service_of, Auth, Platform};
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
                    "service_instance": {
                        "create": { "parameters": schema("size") },
                        "update": { "parameters": schema("size") },
                    },
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
    // The provider also sells capacity over Liqo v1, whose contracts must
    // name the consumer's cluster: a service's contract, whose peering goes
    // the other way (with the customer's kubeconfig), names none.
    let r = e2e::contracts::register_v1(&c, &token, Some(json!({})), None);
    assert_eq!(r.status, 200, "{}", r.text);
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
    let service = service_of(&catalog, "db").clone();
    assert!(service["tags"]
        .as_array()
        .unwrap()
        .contains(&json!("service")));
    let plan = plan_of(&service, "remote").clone();
    assert_eq!(plan["metadata"]["hosting"], "Remote");
    assert_eq!(
        plan["schemas"]["service_binding"]["create"]["parameters"],
        schema("database")
    );
    let (sid, pid) = (
        service["id"].as_str().unwrap().to_string(),
        plan["id"].as_str().unwrap().to_string(),
    );

    // The customer's peering user, made for the service provider.
    let customer = kubeconfig("https://customer.example:6443");
    let provision = |parameters: Value, context: Value, accepts: bool| {
        let body = json!({ "service_id": sid, "plan_id": pid, "organization_guid": "org",
            "space_guid": "space", "parameters": parameters, "context": context });
        p.send(
            Method::PUT,
            &format!("/v2/service_instances/svc?accepts_incomplete={accepts}"),
            Some(&body),
            Some("2.17"),
        )
    };
    let with_peering = json!({ "platform": "kubernetes", "peering": { "kubeconfig": customer } });

    // Only asynchronously; bad parameters named, nothing recorded.
    let r = provision(json!({ "size": 2 }), with_peering.clone(), false);
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("AsyncRequired")),
        "{}",
        r.text
    );
    let described = |r: &e2e::catalog::Resp| {
        r.json["description"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let r = provision(json!({ "size": "big" }), with_peering.clone(), true);
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(described(&r).starts_with("parameters.size:"), "{}", r.text);
    // The customer's kubeconfig: required, and held to the one check.
    for context in [
        json!({ "platform": "kubernetes" }),
        json!({ "peering": { "kubeconfig": "apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    exec: {command: sh}\n" } }),
    ] {
        let r = provision(json!({ "size": 2 }), context, true);
        assert_eq!(r.status, 400, "{}", r.text);
        assert!(
            described(&r).starts_with("context.peering.kubeconfig:"),
            "{}",
            r.text
        );
    }
    assert_eq!(p.last_operation("svc", &sid, &pid, None).status, 410);

    let r = provision(json!({ "size": 2 }), with_peering.clone(), true);
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

    // Only the selling provider reads the customer's kubeconfig; no
    // other read shows it.
    let peering_path = format!("/provider/contracts/{contract}/customer-peering");
    let other = c.login(&provider(2));
    assert_eq!(get(&c, &peering_path, Some(&other)).status, 404);
    let r = get(&c, &peering_path, Some(&token));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["kubeconfig"], customer.as_str());
    assert_eq!(r.json["parameters"], json!({ "size": 2 }), "{}", r.text);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let key = "client-key-data: ";
    let secret = customer[customer.find(key).unwrap() + key.len()..]
        .lines()
        .next()
        .unwrap()
        .to_string();
    for shown in [
        get(&c, "/contracts", Some(&token)).text,
        get(&c, &format!("/contracts/{contract}"), Some(&token)).text,
    ] {
        assert!(!shown.contains(&secret), "the customer's key in {shown}");
    }

    // Only the selling provider reports; then last_operation tells it.
    let report_path = format!("/provider/contracts/{contract}/service");
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
    assert!(!p.fetch_instance("svc").text.contains(&secret));

    // An update's parameters are checked against the update schema.
    let r = p.update(
        "svc",
        &json!({ "service_id": sid, "parameters": { "size": "big" } }),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(described(&r).starts_with("parameters.size:"), "{}", r.text);

    service_binding(&c, &p, &token, &other, &contract, &sid, &pid);

    // Deprovisioning: asynchronous only; 202, then gone once reported.
    let r = p.deprovision("svc", &sid, &pid, false);
    assert_eq!(r.json["error"], "AsyncRequired", "{}", r.text);
    let r = p.deprovision("svc", &sid, &pid, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().unwrap().to_string();
    let r = p.last_operation("svc", &sid, &pid, Some(&op));
    assert_eq!(r.json["state"], "in progress", "{}", r.text);
    let r = get(&c, &peering_path, Some(&token));
    assert_eq!(r.status, 410, "{}", r.text);
    // A report that does not answer the removal (a late "set up") settles
    // nothing; the removal's own report does.
    let late = json!({ "state": "succeeded" });
    assert_eq!(put(&c, &report_path, &late, Some(&token)).status, 409);
    let r = p.last_operation("svc", &sid, &pid, Some(&op));
    assert_eq!(r.json["state"], "in progress", "{}", r.text);
    let gone = json!({ "state": "succeeded", "removal": true });
    assert_eq!(put(&c, &report_path, &gone, Some(&token)).status, 200);
    assert_eq!(p.last_operation("svc", &sid, &pid, Some(&op)).status, 410);
    assert_eq!(put(&c, &report_path, &gone, Some(&token)).status, 404);
}

/// A service binding as a platform and the provider go through it: bind
/// (asynchronous, parameters checked, refusals leave nothing pending), the
/// provider lists it and reports its credentials, the platform polls and
/// fetches them, then unbinds until 410.
fn service_binding(
    c: &e2e::catalog::Catalog,
    p: &Platform,
    token: &str,
    other: &str,
    contract: &str,
    sid: &str,
    pid: &str,
) {
    let bind = |binding: &str, parameters: Value, accepts: bool| {
        let body = json!({ "service_id": sid, "plan_id": pid,
            "bind_resource": { "app_guid": "app" }, "parameters": parameters });
        p.send(
            Method::PUT,
            &format!(
                "/v2/service_instances/svc/service_bindings/{binding}?accepts_incomplete={accepts}"
            ),
            Some(&body),
            Some("2.17"),
        )
    };
    let binding_path = "/v2/service_instances/svc/service_bindings/b1";
    let last_operation = |op: &str| {
        p.send(
            Method::GET,
            &format!("{binding_path}/last_operation?operation={op}"),
            None,
            Some("2.17"),
        )
    };
    let unbind = |accepts: bool| {
        p.send(
            Method::DELETE,
            &format!("{binding_path}?service_id={sid}&plan_id={pid}&accepts_incomplete={accepts}"),
            None,
            Some("2.17"),
        )
    };
    let pending_path = format!("/provider/contracts/{contract}/bindings");
    let pending = || {
        let r = get(c, &pending_path, Some(token));
        assert_eq!(r.status, 200, "{}", r.text);
        r.json
    };
    let target = json!({ "database": "shop", "namespace": "app", "secretName": "shop-db" });

    // Refusals, each naming what is wrong; nothing is left pending.
    let r = bind("b1", target.clone(), false);
    assert_eq!(r.json["error"], "AsyncRequired", "{}", r.text);
    for (parameters, field) in [
        (
            json!({ "database": 7, "namespace": "app", "secretName": "s" }),
            "parameters.database:",
        ),
        (
            json!({ "database": "shop", "secretName": "s" }),
            "parameters.namespace:",
        ),
        (
            json!({ "database": "shop", "namespace": "app", "secretName": "Bad_Name" }),
            "parameters.secretName:",
        ),
    ] {
        let r = bind("b1", parameters, true);
        assert_eq!(r.status, 400, "{}", r.text);
        let described = r.json["description"].as_str().unwrap_or_default();
        assert!(described.starts_with(field), "{field}: {}", r.text);
    }
    assert_eq!(pending(), json!([]));
    assert_eq!(p.fetch_binding("svc", "b1").status, 404);
    assert_eq!(last_operation("x").status, 410);
    // What tells the provider's controller, on its contract change stream,
    // that a binding waits: the contract's `bindingsChangedAt` (issue 44).
    let stamped = || {
        let r = get(c, &format!("/contracts/{contract}"), Some(token));
        assert_eq!(r.status, 200, "{}", r.text);
        r.json["bindingsChangedAt"].as_str().map(str::to_string)
    };
    assert_eq!(stamped(), None, "refused requests stamp nothing");

    // Bound: 202, the same again; the provider sees it pending.
    let r = bind("b1", target.clone(), true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().unwrap().to_string();
    let bound_at = stamped().expect("a bind request stamps the contract");
    assert_eq!(
        bind("b1", target.clone(), true).json["operation"],
        op.as_str()
    );
    let mut other_target = target.clone();
    other_target["secretName"] = json!("other");
    assert_eq!(bind("b1", other_target, true).status, 409);
    assert_eq!(last_operation(&op).json["state"], "in progress");
    assert_eq!(p.fetch_binding("svc", "b1").status, 404);
    assert_eq!(get(c, &pending_path, Some(other)).status, 404);
    assert_eq!(
        pending(),
        json!([{ "bindingID": "b1", "state": "creating", "parameters": target }])
    );
    // S1-79 (issue 41): no deprovisioning while a binding is being created
    // (OSB v2.17 "Blocking Operations": 422 ConcurrencyError); nothing
    // changes, and the binding goes on below.
    let r = p.send(
        Method::DELETE,
        &format!(
            "/v2/service_instances/svc?service_id={sid}&plan_id={pid}&accepts_incomplete=true"
        ),
        None,
        Some("2.17"),
    );
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("ConcurrencyError")),
        "{}",
        r.text
    );
    assert_eq!(last_operation(&op).json["state"], "in progress");

    // The provider's report: credentials required on success.
    let report_path = format!("{pending_path}/b1");
    let r = put(
        c,
        &report_path,
        &json!({ "state": "succeeded" }),
        Some(token),
    );
    assert_eq!(
        (r.status, r.json["field"].as_str()),
        (400, Some("credentials")),
        "{}",
        r.text
    );
    assert_eq!(last_operation(&op).json["state"], "in progress");
    let credentials = json!({ "host": "mysql.svc-ns", "password": "s3cret-pw" });
    let done =
        json!({ "state": "succeeded", "description": "Secret made", "credentials": credentials });
    assert_eq!(put(c, &report_path, &done, Some(other)).status, 404);
    let r = put(c, &report_path, &done, Some(token));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(put(c, &report_path, &done, Some(token)).status, 409);
    let r = last_operation(&op);
    assert_eq!(
        (r.json["state"].as_str(), r.json["description"].as_str()),
        (Some("succeeded"), Some("Secret made"))
    );
    let r = p.fetch_binding("svc", "b1");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["credentials"], credentials);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let r = bind("b1", target.clone(), true);
    assert_eq!(
        (r.status, &r.json["credentials"]),
        (200, &credentials),
        "{}",
        r.text
    );
    assert_eq!(pending(), json!([]));
    assert!(!get(c, "/contracts", Some(token)).text.contains("s3cret-pw"));

    // Unbinding: asynchronous only; 410 once the provider removed it.
    assert_eq!(unbind(false).json["error"], "AsyncRequired");
    let r = unbind(true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().unwrap().to_string();
    let unbound_at = stamped().expect("an unbind request stamps the contract");
    let at = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap();
    // Dozens of requests (store writes among them) lie between the two.
    assert!(
        at(&unbound_at) > at(&bound_at),
        "{unbound_at} not after {bound_at}"
    );
    assert_eq!(unbind(true).json["operation"], op.as_str());
    assert_eq!(pending()[0]["state"], "deleting");
    assert_eq!(last_operation(&op).json["state"], "in progress");
    let r = put(
        c,
        &report_path,
        &json!({ "state": "succeeded" }),
        Some(token),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(last_operation(&op).status, 410);
    assert_eq!(unbind(true).status, 410);
    assert_eq!(pending(), json!([]));
}

/// Poll `f` until it has an answer (at most [`e2e::EVENTUALLY`]).
fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
