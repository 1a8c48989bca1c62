//! A reservation's terms hold (issue 29, finding 5), against the real
//! catalog binary on both stores: a purchase gets the plan exactly as it
//! was reserved, or — when the provider changed its cost or resources
//! meanwhile — a 409 naming each change, with nothing bought; a repost
//! with the same terms (spelled otherwise, renamed) is bought as reserved.

use e2e::buying::{self, admin, consumer, delete, get, post, reserve};
use e2e::catalog::Env;
use e2e::catalog_tests;
use serde_json::{json, Value};

catalog_tests!(reservation_terms_hold);

fn offer(cost: &str, cpu: &str, name: &str) -> Value {
    json!({ "name": "Compute", "type": "compute",
        "plans": { "s": { "name": name, "cost": cost, "resources": { "cpu": cpu, "memory": "8Gi" } } } })
}

#[track_caller]
fn reserved(c: &e2e::catalog::Catalog, token: &str) -> String {
    let r = reserve(c, token, "shop", "s", None);
    assert_eq!(r.status, 201, "reserve: {}", r.text);
    r.json["id"].as_str().expect("id").to_string()
}

fn purchase(c: &e2e::catalog::Catalog, token: &str, id: &str) -> e2e::catalog::Resp {
    post(
        c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(token),
    )
}

/// A 201 purchase whose contract has `cost` and `cpu` together.
#[track_caller]
fn assert_bought(bought: e2e::catalog::Resp, cost: &str, cpu: &str) {
    assert_eq!(bought.status, 201, "{}", bought.text);
    assert_eq!(
        (&bought.json["cost"], &bought.json["resources"]["cpu"]),
        (&json!(cost), &json!(cpu)),
        "{}",
        bought.text
    );
}

fn reservation_terms_hold(backend: e2e::catalog::Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = c.login(&e2e::catalog::provider(1));
    c.put_offer("shop", &offer("1", "4", "small"), &seller);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    // The provider reposts `s` at cost 100 with 1 CPU after alice reserved
    // it at cost 1 with 4: nothing is bought, and she is told what changed.
    let first = reserved(&c, &alice);
    c.put_offer("shop", &offer("100", "1", "small"), &seller);
    let message = purchase(&c, &alice, &first).expect_error(409);
    assert!(
        message.contains("plan s of offer shop changed since it was reserved")
            && message.contains("cost 1.0 → 100.0")
            && message.contains("cpu 4 → 1"),
        "{message}"
    );
    assert!(
        !message.contains("memory"),
        "memory did not change: {message}"
    );
    let still = get(&c, &format!("/reservations/{first}"), Some(&alice));
    assert_eq!(still.json["state"], "reserved", "{}", still.text);
    assert_eq!(get(&c, "/contracts", Some(&alice)).json, json!([]));

    // Released and reserved again: the new terms are bought, together.
    assert_eq!(
        delete(&c, &format!("/reservations/{first}"), Some(&alice)).status,
        200
    );
    let again = reserved(&c, &alice);
    assert_bought(purchase(&c, &alice, &again), "100.0", "1");

    // A repost with the same terms (another plan name, 4 CPU written as
    // 4000m) changes no term: bought as reserved.
    c.put_offer("shop", &offer("1", "4", "small"), &seller);
    let third = reserved(&c, &alice);
    c.put_offer("shop", &offer("1.0", "4000m", "renamed"), &seller);
    assert_bought(purchase(&c, &alice, &third), "1.0", "4");
}
