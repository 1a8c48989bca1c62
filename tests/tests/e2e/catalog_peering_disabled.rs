//! A provider an administrator disabled cannot change its peering
//! registration (issue 29, a low item): `PUT /provider/peering` answers
//! 403 saying the provider is disabled, and nothing changes — neither the
//! registration nor its offers (which a change of generations re-stamps).

use e2e::buying::{self, admin, get, publish, put};
use e2e::catalog::{Backend, Env};
use e2e::contracts::{kubeconfig, register_peering};
use serde_json::json;

#[test]
fn a_disabled_provider_cannot_change_its_peering() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let before = (
        get(&c, "/provider/peering", Some(&seller)).json,
        c.get("/offer/shop").json,
    );
    assert_eq!(before.0["liqo"], json!(["v0"]));

    let set_disabled = |disabled: bool| {
        let body = json!({ "disabled": disabled });
        let r = put(&c, "/admin/providers/cluster-1", &body, Some(&admin));
        assert_eq!(r.status, 200, "{}", r.text);
    };
    set_disabled(true);
    let message = register_peering(
        &c,
        &seller,
        Some(&kubeconfig("https://p1.example")),
        Some("other-class"),
    )
    .expect_error(403);
    assert!(message.contains("cluster-1 is disabled"), "{message}");
    let after = (
        get(&c, "/provider/peering", Some(&seller)).json,
        c.get("/offer/shop").json,
    );
    assert_eq!(after, before, "nothing changed");

    // Enabled again, the same registration goes through.
    set_disabled(false);
    let r = register_peering(&c, &seller, Some(&kubeconfig("https://p1.example")), None);
    assert_eq!(r.json["liqo"], json!(["v0", "v1"]), "{}", r.text);
}
