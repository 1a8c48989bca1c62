//! The Open Service Broker API v2.17, driven by an independent platform
//! client (`e2e::osb_client`) against the real catalog: the catalog
//! mapping, synchronous and asynchronous provision → bind → unbind →
//! deprovision, `last_operation`, a failed asynchronous provisioning, and the
//! version-header, authentication and validation errors.

use e2e::buying::{self, admin, cap, consumer, peering_token, publish, reserve};
use e2e::catalog::{Backend, Env};
use e2e::catalog_tests;
use e2e::osb_client::{check_catalog, plan_of, service_of, Auth, Outcome, Platform};
use reqwest::Method;
use serde_json::{json, Value};

const USER: &str = "platform";
const PASSWORD: &str = "platform-password-0123";

fn osb_flags(extra: &[&'static str]) -> Vec<&'static str> {
    let mut f = vec!["--osb-username", USER, "--osb-password", PASSWORD];
    f.extend_from_slice(extra);
    f
}

fn platform(c: &e2e::catalog::Catalog) -> Platform {
    Platform::new(&c.url(""), Auth::Basic(USER.into(), PASSWORD.into()))
}

/// The service and plan ids of offer `offer_id`'s plan `plan_key`.
fn ids(catalog: &Value, offer_id: &str, plan_key: &str) -> (String, String) {
    let service = service_of(catalog, offer_id);
    let plan = plan_of(service, plan_key);
    (
        service["id"].as_str().unwrap().into(),
        plan["id"].as_str().unwrap().into(),
    )
}

catalog_tests!(sync_flow, async_flow, concurrent_operations);

/// Requests that would change an instance while an operation on it runs
/// answer 422 `ConcurrencyError` and change nothing; the operation then
/// finishes as if they had never come.
fn concurrent_operations(backend: Backend) {
    let env = Env::new(backend);
    // Hold each background operation long enough to send requests into it
    // even on a loaded machine; that they did land inside it is checked.
    let c = buying::start(&env, &osb_flags(&["--osb-async-delay", "10s"]));
    publish(&c, 1, "shop");
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "small");
    let concurrency = |r: &e2e::catalog::Resp, what: &str| {
        assert_eq!(
            (r.status, r.json["error"].as_str()),
            (422, Some("ConcurrencyError")),
            "{what}: {}",
            r.text
        );
    };

    let r = p.provision("inst-c", &sid, &pid, None, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().expect("operation").to_string();
    let polled = p.last_operation("inst-c", &sid, &pid, Some(&op));
    assert_eq!(polled.json["state"], "in progress", "{}", polled.text);
    concurrency(
        &p.provision("inst-c", &sid, &pid, None, false),
        "provision again without accepts_incomplete",
    );
    concurrency(
        &p.deprovision("inst-c", &sid, &pid, false),
        "deprovision while provisioning",
    );
    concurrency(
        &p.deprovision("inst-c", &sid, &pid, true),
        "asynchronous deprovision while provisioning",
    );
    let polled = p.last_operation("inst-c", &sid, &pid, Some(&op));
    assert_eq!(
        polled.json["state"], "in progress",
        "the requests above did not all land inside the operation: {}",
        polled.text
    );
    assert!(matches!(
        p.wait("inst-c", &sid, &pid, Some(&op)),
        Outcome::Succeeded(_)
    ));
    assert_eq!(p.fetch_instance("inst-c").status, 200);

    let r = p.deprovision("inst-c", &sid, &pid, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().expect("operation").to_string();
    concurrency(
        &p.provision("inst-c", &sid, &pid, None, true),
        "provision while deprovisioning",
    );
    concurrency(
        &p.deprovision("inst-c", &sid, &pid, false),
        "deprovision again without accepts_incomplete",
    );
    let polled = p.last_operation("inst-c", &sid, &pid, Some(&op));
    assert_eq!(
        polled.json["state"], "in progress",
        "the requests above did not all land inside the operation: {}",
        polled.text
    );
    assert_eq!(p.wait("inst-c", &sid, &pid, Some(&op)), Outcome::Gone);
    // Gone for good, and the unit is free again.
    assert_eq!(p.fetch_instance("inst-c").status, 404);
    let r = p.provision("inst-d", &sid, &pid, None, false);
    assert_eq!(r.status, 201, "{}", r.text);
}

#[test]
fn catalog_maps_offers_to_services() {
    let env = Env::new(Backend::Embedded);
    let mut c = buying::start(
        &env,
        &osb_flags(&["--osb-currency", "eur", "--osb-cost-unit", "MONTHLY"]),
    );
    publish(&c, 1, "shop");
    let free = c.login(&e2e::catalog::provider(2));
    c.put_offer(
        "free_tier",
        &json!({ "name": "Free tier", "type": "compute",
                 "plans": { "tiny_one": { "name": "tiny", "cost": "0", "resources": { "cpu": "100m" } } } }),
        &free,
    );
    let p = platform(&c);
    let catalog = p.catalog();
    let services = catalog["services"].as_array().expect("services");
    assert_eq!(services.len(), 2, "{catalog}");
    let shop = service_of(&catalog, "shop");
    assert_eq!(shop["name"], "shop");
    assert_eq!(shop["description"], "Spare cluster capacity.");
    // The offer's type, then the Liqo generations its provider peers with
    // (it registered an auth URL: v0).
    assert_eq!(shop["tags"], json!(["compute", "liqo-v0"]));
    assert_eq!(shop["metadata"]["liqo"], json!(["v0"]));
    assert_eq!(shop["bindable"], true);
    assert_eq!(shop["metadata"]["displayName"], "Compute for rent");
    assert_eq!(shop["metadata"]["clusterID"], "cluster-1");
    let small = shop["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "small")
        .expect("small");
    assert_eq!(small["free"], false);
    assert_eq!(
        small["metadata"]["costs"],
        json!([{ "amount": { "eur": 1.5 }, "unit": "MONTHLY" }])
    );
    assert_eq!(
        small["metadata"]["resources"],
        json!({ "cpu": "2", "memory": "4Gi" })
    );
    let free_tier = service_of(&catalog, "free_tier");
    // CLI-friendly names; zero cost is free.
    assert_eq!(free_tier["name"], "free-tier");
    assert_eq!(free_tier["plans"][0]["name"], "tiny-one");
    assert_eq!(free_tier["plans"][0]["free"], true);
    assert!(!catalog.to_string().contains(&peering_token(1)));

    // Ids are stable across queries and restarts.
    let (sid, pid) = ids(&catalog, "shop", "small");
    c.child.kill();
    let c = buying::start(&env, &osb_flags(&[]));
    assert_eq!(ids(&platform(&c).catalog(), "shop", "small"), (sid, pid));

    // A disabled provider's offers leave the catalog.
    let admin = admin(&c);
    buying::put(
        &c,
        "/admin/providers/cluster-2",
        &json!({ "disabled": true }),
        Some(&admin),
    );
    let catalog = platform(&c).catalog();
    assert_eq!(catalog["services"].as_array().map(Vec::len), Some(1));
    check_catalog(&catalog).expect("still a valid catalog");
}

fn sync_flow(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &osb_flags(&[]));
    publish(&c, 1, "shop");
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "small");
    let (_, other_pid) = ids(&p.catalog(), "shop", "large");
    let params = json!({ "purpose": "e2e" });

    let r = p.provision("inst-1", &sid, &pid, Some(params.clone()), false);
    assert_eq!((r.status, &r.json), (201, &json!({})), "{}", r.text);
    // The same again: 200; different attributes: 409.
    assert_eq!(
        p.provision("inst-1", &sid, &pid, Some(params.clone()), false)
            .status,
        200
    );
    assert_eq!(
        p.provision("inst-1", &sid, &other_pid, Some(params.clone()), false)
            .status,
        409
    );
    assert_eq!(
        p.provision(
            "inst-1",
            &sid,
            &pid,
            Some(json!({ "purpose": "else" })),
            false
        )
        .status,
        409
    );

    let r = p.fetch_instance("inst-1");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json["service_id"].as_str(), r.json["plan_id"].as_str()),
        (Some(sid.as_str()), Some(pid.as_str()))
    );
    assert_eq!(r.json["parameters"], params);
    assert_eq!(p.fetch_instance("nope").status, 404);

    // Updates: the current values (and a new context) change nothing and
    // answer 200 {}; a new plan, new parameters or maintenance_info are
    // refused with 422, and the instance stays as it was.
    for same in [
        json!({ "service_id": sid }),
        json!({ "service_id": sid, "plan_id": pid, "parameters": params,
                "context": { "platform": "kubernetes", "namespace": "renamed" },
                "previous_values": { "plan_id": pid } }),
    ] {
        let r = p.update("inst-1", &same);
        assert_eq!((r.status, &r.json), (200, &json!({})), "{same}: {}", r.text);
    }
    for (change, code) in [
        (json!({ "service_id": sid, "plan_id": other_pid }), None),
        (
            json!({ "service_id": sid, "parameters": { "purpose": "else" } }),
            None,
        ),
        (
            json!({ "service_id": sid, "maintenance_info": { "version": "2.0.0" } }),
            Some("MaintenanceInfoConflict"),
        ),
    ] {
        let r = p.update("inst-1", &change);
        assert_eq!(r.status, 422, "{change}: {}", r.text);
        assert_eq!(r.json["error"].as_str(), code, "{change}: {}", r.text);
    }
    assert_eq!(p.update("inst-1", &json!({ "plan_id": pid })).status, 400);
    assert_eq!(
        p.update("inst-1", &json!({ "service_id": "other" })).status,
        400
    );
    assert_eq!(p.update("nope", &json!({ "service_id": sid })).status, 404);
    let r = p.fetch_instance("inst-1");
    assert_eq!(r.json["plan_id"].as_str(), Some(pid.as_str()));
    assert_eq!(r.json["parameters"], params);

    // The instance is a purchase, owned by the platform account.
    let admin = admin(&c);
    let purchases = buying::get(&c, "/purchases?consumer=osb:platform", Some(&admin));
    assert_eq!(
        purchases.json.as_array().map(Vec::len),
        Some(1),
        "{}",
        purchases.text
    );
    assert_eq!(purchases.json[0]["channel"], "osb");
    assert_eq!(purchases.json[0]["state"], "purchased");

    let r = p.bind("inst-1", "bind-1", &sid, &pid, "app-1");
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json["credentials"],
        json!({ "clusterID": "cluster-1", "clusterName": "provider 1",
                "authURL": "https://provider-1.example:6443", "token": peering_token(1) })
    );
    // An identical re-bind: 200 with the same credentials (OSB: "MUST
    // return the same credentials" for an identical binding).
    let first = r.json["credentials"].clone();
    let again = p.bind("inst-1", "bind-1", &sid, &pid, "app-1");
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        again.json["credentials"], first,
        "an identical re-bind answered other credentials: {}",
        again.text
    );
    assert_eq!(p.bind("inst-1", "bind-1", &sid, &pid, "app-2").status, 409);
    let r = p.fetch_binding("inst-1", "bind-1");
    assert_eq!(
        (r.status, r.json["credentials"]["token"].as_str()),
        (200, Some(peering_token(1).as_str()))
    );
    assert_eq!(
        p.binding_last_operation("inst-1", "bind-1").json["state"],
        "succeeded"
    );
    assert_eq!(p.fetch_binding("inst-1", "other").status, 404);
    assert_eq!(p.bind("nope", "bind-x", &sid, &pid, "app-1").status, 404);

    let r = p.unbind("inst-1", "bind-1", &sid, &pid);
    assert_eq!((r.status, &r.json), (200, &json!({})), "{}", r.text);
    assert_eq!(p.unbind("inst-1", "bind-1", &sid, &pid).status, 410);
    assert_eq!(p.binding_last_operation("inst-1", "bind-1").status, 410);

    let r = p.deprovision("inst-1", &sid, &pid, false);
    assert_eq!((r.status, &r.json), (200, &json!({})), "{}", r.text);
    assert_eq!(p.deprovision("inst-1", &sid, &pid, false).status, 410);
    assert_eq!(p.fetch_instance("inst-1").status, 404);
    // The purchase was cancelled: its unit is free again.
    let purchases = buying::get(&c, "/purchases?consumer=osb:platform", Some(&admin));
    assert_eq!(
        purchases.json[0]["state"], "cancelled",
        "{}",
        purchases.text
    );
    assert_eq!(
        buying::get(&c, "/offer/shop/plans/small/capacity", None).json["active"],
        0
    );
}

fn async_flow(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &osb_flags(&[]));
    publish(&c, 1, "shop");
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "large");

    let r = p.provision("inst-a", &sid, &pid, None, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().expect("operation").to_string();
    // A re-sent PUT while in progress answers 202 with the same operation,
    // or 200 once done; never 201.
    let again = p.provision("inst-a", &sid, &pid, None, true);
    assert!(
        (again.status == 202 && again.json["operation"] == op.as_str()) || again.status == 200,
        "{} {}",
        again.status,
        again.text
    );
    assert!(matches!(
        p.wait("inst-a", &sid, &pid, Some(&op)),
        Outcome::Succeeded(_)
    ));
    assert_eq!(p.fetch_instance("inst-a").status, 200);
    // Polling with an operation that is not this instance's: 400.
    assert_eq!(
        p.last_operation("inst-a", &sid, &pid, Some("bogus")).status,
        400
    );

    let r = p.bind("inst-a", "bind-a", &sid, &pid, "app");
    assert_eq!(
        r.json["credentials"]["token"],
        peering_token(1).as_str(),
        "{}",
        r.text
    );

    let r = p.deprovision("inst-a", &sid, &pid, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().expect("operation").to_string();
    // Deleted asynchronously: last_operation ends in 410 Gone (success).
    assert_eq!(p.wait("inst-a", &sid, &pid, Some(&op)), Outcome::Gone);
    assert_eq!(p.fetch_instance("inst-a").status, 404);
    assert_eq!(p.fetch_binding("inst-a", "bind-a").status, 404);
    assert_eq!(
        buying::get(&c, "/offer/shop/plans/large/capacity", None).json["active"],
        0
    );
}

#[test]
fn failed_async_provisioning_is_reported() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &osb_flags(&[]));
    let seller = publish(&c, 1, "shop");
    cap(&c, &seller, "shop", "small", Some(1));
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    assert_eq!(reserve(&c, &alice, "shop", "small", None).status, 201);
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "small");

    // Synchronously: refused at once, nothing recorded.
    let r = p.provision("sold-out", &sid, &pid, None, false);
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("PlanUnavailable")),
        "{}",
        r.text
    );
    assert!(
        r.json["description"]
            .as_str()
            .unwrap_or_default()
            .contains("sold out"),
        "{}",
        r.text
    );
    assert_eq!(p.deprovision("sold-out", &sid, &pid, false).status, 410);

    // Asynchronously: accepted, then reported failed.
    let r = p.provision("sold-out", &sid, &pid, None, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match p.wait("sold-out", &sid, &pid, op.as_deref()) {
        Outcome::Failed(Some(d)) => assert!(d.contains("sold out"), "{d}"),
        other => panic!("expected a failed operation, got {other:?}"),
    }
    assert_eq!(p.fetch_instance("sold-out").status, 404);
    // Orphan mitigation: the platform deletes it.
    assert_eq!(p.deprovision("sold-out", &sid, &pid, false).status, 200);
    assert_eq!(p.last_operation("sold-out", &sid, &pid, None).status, 410);
}

#[test]
fn version_auth_and_validation_errors() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &osb_flags(&[]));
    publish(&c, 1, "shop");
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "small");

    // X-Broker-API-Version: missing or too old 412, malformed 400.
    assert_eq!(p.send(Method::GET, "/v2/catalog", None, None).status, 412);
    for old in ["1.0", "2.13", "3.0"] {
        assert_eq!(
            p.send(Method::GET, "/v2/catalog", None, Some(old)).status,
            412,
            "{old}"
        );
    }
    for bad in ["two", "2", "2.x", ""] {
        assert_eq!(
            p.send(Method::GET, "/v2/catalog", None, Some(bad)).status,
            400,
            "{bad:?}"
        );
    }
    assert_eq!(
        p.send(Method::GET, "/v2/catalog", None, Some("2.14"))
            .status,
        200
    );
    // A bad version on a write changes nothing.
    let body = json!({ "service_id": sid, "plan_id": pid,
                       "organization_guid": "org-guid", "space_guid": "space-guid" });
    assert_eq!(
        p.send(Method::PUT, "/v2/service_instances/v", Some(&body), None)
            .status,
        412
    );
    assert_eq!(p.fetch_instance("v").status, 404);

    // Authentication: 401 without or with wrong credentials.
    for auth in [
        Auth::None,
        Auth::Basic(USER.into(), "wrong-password-000".into()),
        Auth::Basic("other".into(), PASSWORD.into()),
        Auth::Bearer("x.y.z".into()),
    ] {
        let q = Platform::new(&c.url(""), auth);
        let r = q.send(Method::GET, "/v2/catalog", None, Some("2.17"));
        assert_eq!(r.status, 401, "{}", r.text);
        assert_eq!(q.provision("v", &sid, &pid, None, false).status, 401);
    }
    // Bearer tokens work too: consumers own their instances, providers may not buy.
    let admin = admin(&c);
    let alice = Platform::new(&c.url(""), Auth::Bearer(consumer(&c, &admin, "alice")));
    assert_eq!(
        alice.provision("alice-1", &sid, &pid, None, false).status,
        201
    );
    assert_eq!(
        p.fetch_instance("alice-1").status,
        404,
        "another owner's instance"
    );
    assert_eq!(p.provision("alice-1", &sid, &pid, None, false).status, 409);
    assert_eq!(p.deprovision("alice-1", &sid, &pid, false).status, 403);
    let seller = Platform::new(
        &c.url(""),
        Auth::Bearer(c.login(&e2e::catalog::provider(1))),
    );
    assert_eq!(
        seller.provision("seller-1", &sid, &pid, None, false).status,
        403
    );

    // Validation: 400 naming the field, nothing created.
    let guids = |mut v: serde_json::Value| {
        v["organization_guid"] = json!("org-guid");
        v["space_guid"] = json!("space-guid");
        v
    };
    for (body, field) in [
        (guids(json!({ "plan_id": pid })), "service_id"),
        (guids(json!({ "service_id": sid })), "plan_id"),
        (
            guids(json!({ "service_id": "nope", "plan_id": pid })),
            "service_id",
        ),
        (
            guids(json!({ "service_id": sid, "plan_id": "nope" })),
            "plan_id",
        ),
        (
            guids(json!({ "service_id": sid, "plan_id": pid, "parameters": [1] })),
            "parameters",
        ),
        (
            json!({ "service_id": sid, "plan_id": pid, "organization_guid": "", "space_guid": "s" }),
            "organization_guid",
        ),
    ] {
        let r = p.send(
            Method::PUT,
            "/v2/service_instances/bad",
            Some(&body),
            Some("2.17"),
        );
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(
            r.json["description"]
                .as_str()
                .unwrap_or_default()
                .starts_with(field),
            "{}",
            r.text
        );
    }
    let r = p.send(
        Method::PUT,
        "/v2/service_instances/bad?accepts_incomplete=maybe",
        Some(&body),
        Some("2.17"),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(p.fetch_instance("bad").status, 404);
    // A malformed X-Broker-API-Originating-Identity: 400, nothing created.
    let good = json!({ "service_id": sid, "plan_id": pid,
                       "organization_guid": "org-guid", "space_guid": "space-guid" });
    for identity in [
        "kubernetes",
        "kubernetes not-base64!",
        "kubernetes bm90IGpzb24=",
        "kubernetes WzFd",
        "kube rnetes e30=",
    ] {
        let mut odd = platform(&c);
        odd.identity = Some(identity.into());
        let r = odd.provision("bad", &sid, &pid, None, false);
        assert_eq!(r.status, 400, "{identity}: {}", r.text);
        assert!(r.text.contains("Originating-Identity"), "{}", r.text);
    }
    assert_eq!(p.fetch_instance("bad").status, 404);
    let mut anonymous = platform(&c);
    anonymous.identity = None;
    let r = anonymous.send(
        Method::PUT,
        "/v2/service_instances/anon",
        Some(&good),
        Some("2.17"),
    );
    assert_eq!(r.status, 201, "the header is optional: {}", r.text);
    // Deprovision and unbind need service_id and plan_id.
    assert_eq!(
        p.send(
            Method::DELETE,
            "/v2/service_instances/alice-1",
            None,
            Some("2.17")
        )
        .status,
        400
    );
    assert_eq!(
        p.send(
            Method::DELETE,
            "/v2/service_instances/x/service_bindings/y?service_id=a",
            None,
            Some("2.17")
        )
        .status,
        400
    );
    // Unknown methods keep the OSB error shape.
    assert_eq!(
        p.send(Method::PATCH, "/v2/catalog", None, Some("2.17"))
            .status,
        405
    );
}

#[test]
fn async_required_mode() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &osb_flags(&["--osb-async", "required"]));
    publish(&c, 1, "shop");
    let p = platform(&c);
    let (sid, pid) = ids(&p.catalog(), "shop", "small");
    let r = p.provision("i", &sid, &pid, None, false);
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("AsyncRequired")),
        "{}",
        r.text
    );
    assert_eq!(p.fetch_instance("i").status, 404, "nothing created");
    let r = p.provision("i", &sid, &pid, None, true);
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    assert!(matches!(
        p.wait("i", &sid, &pid, op.as_deref()),
        Outcome::Succeeded(_)
    ));
    let r = p.deprovision("i", &sid, &pid, false);
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (422, Some("AsyncRequired")),
        "{}",
        r.text
    );
    assert_eq!(p.fetch_instance("i").status, 200, "still there");
}
