//! A provider running only Liqo v1 (no auth URL) that has not registered a
//! kubeconfig cannot sell; a consumer reserving its plan is told the fix
//! is `PUT /provider/peering`, not to "authenticate again" (which would
//! not help; issue 29, a low item).

use e2e::buying::{self, admin, consumer, reserve};
use e2e::catalog::{provider, Backend, Env};
use e2e::contracts::{kubeconfig, register_peering};
use serde_json::json;

#[test]
fn a_v1_only_provider_without_kubeconfig_is_told_to_register_one() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    let mut v1_only = provider(2);
    v1_only["authURL"] = json!("");
    let seller = c.login(&v1_only);
    c.put_offer("shop", &buying::offer(), &seller);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    let message = reserve(&c, &alice, "shop", "small", None).expect_error(409);
    assert!(message.contains("PUT /provider/peering"), "{message}");
    assert!(!message.contains("authenticate"), "{message}");

    // The fix it names is the fix.
    register_peering(&c, &seller, Some(&kubeconfig("https://p2.example")), None);
    assert_eq!(reserve(&c, &alice, "shop", "small", None).status, 201);
}
