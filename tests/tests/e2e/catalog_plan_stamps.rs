//! Who last changed each plan, and when, on both stores: a write stamps
//! the plans whose content it changed with `updatedAt` (the write's time)
//! and `updatedBy` (`provider-agent` when the request carries the provider
//! agent's `User-Agent`, else `provider`); plans the write left as they were
//! keep their stamps, across restarts; a client echoing the stamps back
//! from a `GET` is accepted and changes none of them, and stamps a client
//! forges are ignored.

use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::catalog_tests;
use serde_json::{json, Value};

catalog_tests!(writes_stamp_only_the_plans_they_change);

const AGENT: &str = concat!("provider-agent/", "0.1.0");

fn offer(b_cpu: &str) -> Value {
    json!({ "name": "Stamped", "type": "compute", "plans": {
        "a": { "name": "plan-a", "cost": "1.0", "resources": { "cpu": "1", "memory": "2Gi" } },
        "b": { "name": "plan-b", "cost": "2", "resources": { "cpu": b_cpu } },
    } })
}

/// `POST /offer/stamped` with `user_agent`; the stored offer.
#[track_caller]
fn write(c: &Catalog, token: &str, body: &Value, user_agent: &str) -> Value {
    let http = e2e::http::blocking_client(std::time::Duration::from_secs(30));
    let r = c
        .send(
            http.post(c.url("/offer/stamped"))
                .bearer_auth(token)
                .header(reqwest::header::USER_AGENT, user_agent)
                .json(body),
        )
        .unwrap();
    assert!(
        r.status == 200 || r.status == 201,
        "{} {}",
        r.status,
        r.text
    );
    r.json
}

fn stamps(offer: &Value, plan: &str) -> (Value, Value) {
    let p = &offer["plans"][plan];
    (p["updatedAt"].clone(), p["updatedBy"].clone())
}

/// Wait until the catalog's clock (milliseconds) has moved past `t`, so the
/// next write's stamp differs from `t`.
fn past(t: &Value) {
    let t = chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    let now = || {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        i64::try_from(d.as_millis()).unwrap()
    };
    while now() <= t {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn writes_stamp_only_the_plans_they_change(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let token = c.login(&provider(1));

    // The provider (a browser, curl) publishes: every plan is new.
    let first = write(&c, &token, &offer("2"), "Mozilla/5.0 (X11; Linux x86_64)");
    let t1 = first["updatedAt"].clone();
    assert!(t1.is_string(), "{first}");
    assert_eq!(
        stamps(&first, "a"),
        (t1.clone(), json!("provider")),
        "{first}"
    );
    assert_eq!(
        stamps(&first, "b"),
        (t1.clone(), json!("provider")),
        "{first}"
    );

    // The agent rewrites the offer with plan b's resources changed (a is
    // written again as it was, in another spelling of the same values).
    past(&t1);
    let mut body = offer("4");
    body["plans"]["a"]["resources"]["cpu"] = json!("1000m");
    body["plans"]["a"]["cost"] = json!("1");
    let second = write(&c, &token, &body, AGENT);
    let t2 = second["updatedAt"].clone();
    assert_ne!(t1, t2);
    assert_eq!(
        stamps(&second, "a"),
        (t1.clone(), json!("provider")),
        "{second}"
    );
    assert_eq!(
        stamps(&second, "b"),
        (t2.clone(), json!("provider-agent")),
        "{second}"
    );
    // Every read says the same as the write's answer.
    assert_eq!(c.get("/offer/stamped").json["plans"], second["plans"]);
    let listed = c.get("/offers").json;
    let listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "stamped")
        .unwrap()
        .clone();
    assert_eq!(listed["plans"], second["plans"]);

    // A client echoing a GET back (stamps included) is accepted; nothing
    // changed, so no stamp moves, though the provider wrote it.
    past(&t2);
    let echoed = c.get("/offer/stamped").json;
    let third = write(&c, &token, &echoed, "curl/8.5.0");
    assert_eq!(third["version"], second["version"].as_u64().unwrap() + 1);
    assert_eq!(
        third["plans"], second["plans"],
        "an unchanged write moved a stamp"
    );

    // A plan renamed by the provider is a change; a new plan is stamped too.
    let mut body = offer("4");
    body["plans"]["a"]["name"] = json!("plan-a-renamed");
    body["plans"]["c"] = json!({ "name": "plan-c", "cost": "0", "resources": {} });
    let fourth = write(&c, &token, &body, "curl/8.5.0");
    let t4 = fourth["updatedAt"].clone();
    assert_eq!(
        stamps(&fourth, "a"),
        (t4.clone(), json!("provider")),
        "{fourth}"
    );
    assert_eq!(
        stamps(&fourth, "b"),
        (t2.clone(), json!("provider-agent")),
        "{fourth}"
    );
    assert_eq!(
        stamps(&fourth, "c"),
        (t4.clone(), json!("provider")),
        "{fourth}"
    );

    // The stamps are stored: a restarted catalog returns them.
    drop(c);
    let c = env.start();
    assert_eq!(c.get("/offer/stamped").json["plans"], fourth["plans"]);

    // Stamps a client sends are never believed: forged on plans it left as
    // they were, they change nothing; on a plan it changed, the write's own
    // time and writer replace them (a server that stored what it was sent
    // fails here).
    past(&t4);
    let mut forged = c.get("/offer/stamped").json;
    for plan in ["a", "b", "c"] {
        forged["plans"][plan]["updatedAt"] = json!("2001-01-01T00:00:00Z");
        forged["plans"][plan]["updatedBy"] = json!("provider-agent");
    }
    forged["updatedAt"] = json!("2001-01-01T00:00:00Z");
    forged["plans"]["c"]["cost"] = json!("5");
    let fifth = write(&c, &token, &forged, "curl/8.5.0");
    let t5 = fifth["updatedAt"].clone();
    assert_ne!(t5, json!("2001-01-01T00:00:00Z"), "{fifth}");
    assert_ne!(t5, t4, "{fifth}");
    assert_eq!(stamps(&fifth, "a"), stamps(&fourth, "a"), "{fifth}");
    assert_eq!(stamps(&fifth, "b"), stamps(&fourth, "b"), "{fifth}");
    assert_eq!(stamps(&fifth, "c"), (t5, json!("provider")), "{fifth}");

    // The OpenAPI document describes them as read-only plan fields.
    let doc = c.get("/openapi.json").json;
    let plan = &doc["components"]["schemas"]["Plan"]["properties"];
    assert_eq!(plan["updatedAt"]["readOnly"], json!(true), "{plan}");
    assert_eq!(plan["updatedBy"]["readOnly"], json!(true), "{plan}");
}
