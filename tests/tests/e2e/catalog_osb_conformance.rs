//! Open Service Broker API v2.17 rules a platform may rely on, each sent
//! to the real catalog as the spec words it: the provision fields that are
//! REQUIRED, and `maintenance_info` on provision and update.

use e2e::buying::{self, publish};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::osb_client::{plan_of, service_of, Auth, Platform};
use reqwest::Method;
use serde_json::{json, Value};

const USER: &str = "platform";
const PASSWORD: &str = "platform-password-0123";

fn start(env: &Env) -> (Catalog, Platform, String, String) {
    let c = buying::start(env, &["--osb-username", USER, "--osb-password", PASSWORD]);
    publish(&c, 1, "shop");
    let p = Platform::new(&c.url(""), Auth::Basic(USER.into(), PASSWORD.into()));
    let catalog = p.catalog();
    let service = service_of(&catalog, "shop");
    let plan = plan_of(service, "small");
    let (sid, pid) = (
        service["id"].as_str().unwrap().to_string(),
        plan["id"].as_str().unwrap().to_string(),
    );
    (c, p, sid, pid)
}

fn put_instance(p: &Platform, id: &str, body: &Value) -> e2e::catalog::Resp {
    p.send(
        Method::PUT,
        &format!("/v2/service_instances/{id}"),
        Some(body),
        Some("2.17"),
    )
}

#[test]
fn provision_requires_organization_and_space_guids() {
    let env = Env::new(Backend::Embedded);
    let (_c, p, sid, pid) = start(&env);
    for (body, field) in [
        (
            json!({ "service_id": sid, "plan_id": pid, "space_guid": "space" }),
            "organization_guid",
        ),
        (
            json!({ "service_id": sid, "plan_id": pid, "organization_guid": "org" }),
            "space_guid",
        ),
        (
            json!({ "service_id": sid, "plan_id": pid, "organization_guid": "org", "space_guid": "" }),
            "space_guid",
        ),
        (
            json!({ "service_id": sid, "plan_id": pid, "organization_guid": "", "space_guid": "space" }),
            "organization_guid",
        ),
    ] {
        let r = put_instance(&p, "no-guids", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        let description = r.json["description"].as_str().unwrap_or_default();
        assert!(
            description.starts_with(field),
            "the description names {field}: {description}"
        );
        assert_eq!(p.fetch_instance("no-guids").status, 404, "nothing created");
    }
    let r = put_instance(
        &p,
        "with-guids",
        &json!({ "service_id": sid, "plan_id": pid, "organization_guid": "org", "space_guid": "space" }),
    );
    assert_eq!(r.status, 201, "{}", r.text);
}

#[test]
fn provision_with_maintenance_info_the_plan_does_not_declare_conflicts() {
    let env = Env::new(Backend::Embedded);
    let (_c, p, sid, pid) = start(&env);
    let body = |info: Value| {
        json!({ "service_id": sid, "plan_id": pid, "organization_guid": "org",
                "space_guid": "space", "maintenance_info": info })
    };
    // The catalog declares no maintenance_info: any version conflicts.
    for info in [
        json!({ "version": "1.0.0" }),
        json!({ "version": "2.1.0-beta.1", "description": "a newer one" }),
    ] {
        let r = put_instance(&p, "maint", &body(info.clone()));
        assert_eq!(r.status, 422, "{info}: {}", r.text);
        assert_eq!(
            r.json["error"].as_str(),
            Some("MaintenanceInfoConflict"),
            "{}",
            r.text
        );
        assert_eq!(p.fetch_instance("maint").status, 404, "nothing created");
    }
    // A malformed maintenance_info is a bad request.
    for info in [json!({}), json!("1.0.0"), json!({ "version": 2 })] {
        let r = put_instance(&p, "maint", &body(info.clone()));
        assert_eq!(r.status, 400, "{info}: {}", r.text);
        assert!(r.text.contains("maintenance_info"), "{}", r.text);
    }
    assert_eq!(p.fetch_instance("maint").status, 404, "nothing created");
}

#[test]
fn update_with_an_empty_maintenance_info_is_a_bad_request() {
    let env = Env::new(Backend::Embedded);
    let (_c, p, sid, pid) = start(&env);
    let r = p.provision("inst", &sid, &pid, None, false);
    assert_eq!(r.status, 201, "{}", r.text);
    let r = p.update(
        "inst",
        &json!({ "service_id": sid, "maintenance_info": {} }),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("maintenance_info.version"), "{}", r.text);
    let r = p.update(
        "inst",
        &json!({ "service_id": sid, "maintenance_info": { "version": "2.0.0" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json["error"].as_str(), Some("MaintenanceInfoConflict"));
    let r = p.fetch_instance("inst");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["plan_id"].as_str(), Some(pid.as_str()));
}
