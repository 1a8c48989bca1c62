//! Lists and writes served from memory: a process reads its own writes at
//! once (both stores), and with MongoDB what another process writes — an
//! offer, a disabling, a re-enabling — reaches this one's memory through the
//! change streams (waited for, never timed: speed is the benches' job).

use e2e::buying::{self, admin, put};
use e2e::catalog::{provider, simple_offer, Backend, Catalog, Env};
use e2e::catalog_tests;
use e2e::contracts::wait_for;
use serde_json::{json, Value};

catalog_tests!(a_process_lists_its_own_writes_at_once);

fn ids(c: &Catalog, query: &str) -> Vec<(String, u64)> {
    let r = c.get(&format!("/offers{query}"));
    assert_eq!(r.status, 200, "{}", r.text);
    e2e::catalog::id_versions(&r.json)
}

fn offer(tag: &str, offer_type: &str) -> Value {
    simple_offer(tag, offer_type, "1", json!({"cpu": "1"}))
}

/// Write, then list at once, many times over: every answer already holds
/// the write (new offers, replacements, deletions; filtered lists too).
fn a_process_lists_its_own_writes_at_once(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let token = c.login(&provider(1));
    for i in 0..25u64 {
        let id = format!("own-{}", i % 5);
        let kind = ["compute", "gpu"][(i % 2) as usize];
        let written = c.put_offer(&id, &offer(&format!("v{i}"), kind), &token);
        let version = written["version"].as_u64().unwrap();
        assert!(
            ids(&c, "").contains(&(id.clone(), version)),
            "write {i}: {id} v{version} not listed at once"
        );
        let filtered = ids(&c, &format!("?type={kind}&provider=cluster-1"));
        assert!(filtered.contains(&(id.clone(), version)), "write {i}");
        let other = if kind == "gpu" { "compute" } else { "gpu" };
        assert!(
            !ids(&c, &format!("?type={other}"))
                .iter()
                .any(|(x, _)| *x == id),
            "write {i}: {id} still listed with its old type"
        );
        assert_eq!(c.get(&format!("/offer/{id}")).json["version"], version);
        if i % 3 == 2 {
            assert_eq!(c.delete(&format!("/offer/{id}"), Some(&token)).status, 204);
            assert!(
                !ids(&c, "").iter().any(|(x, _)| *x == id),
                "write {i}: {id} deleted but still listed"
            );
            c.get(&format!("/offer/{id}")).expect_error(404);
        }
    }
}

/// Two processes on one MongoDB database: an offer written through one is
/// listed by the other, and a disabling (and its lifting) through one is
/// honoured by the other, once the change arrives; the writer's own process
/// honours it at once.
#[test]
fn changes_reach_the_other_process() {
    let env = Env::new(Backend::Mongo);
    let a = buying::start(&env, &[]);
    let b = buying::start(&env, &[]);
    let token = a.login(&provider(1));
    let admin = admin(&a);

    let written = a.put_offer("far", &offer("far", "compute"), &token);
    let version = written["version"].as_u64().unwrap();
    wait_for("B to list A's offer", || {
        ids(&b, "?type=compute")
            .contains(&("far".to_string(), version))
            .then_some(())
    });
    // B's memory knows the offer's version: its write follows A's.
    let replaced = b.put_offer("far", &offer("far2", "compute"), &token);
    assert_eq!(replaced["version"].as_u64(), Some(version + 1));
    let mut stale = offer("stale", "compute");
    stale["version"] = json!(version);
    a.post("/offer/far", &stale, Some(&token)).expect_error(409);

    let disable = |disabled: bool| {
        let r = put(
            &a,
            "/admin/providers/cluster-1",
            &json!({ "disabled": disabled }),
            Some(&admin),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    };
    disable(true);
    // At once where it was written...
    assert!(a
        .post("/offer/far", &offer("x", "compute"), Some(&token))
        .expect_error(403)
        .contains("disabled"));
    // ...and on the other process once the change arrives.
    wait_for("B to refuse a disabled provider", || {
        (b.post("/offer/far", &offer("y", "compute"), Some(&token))
            .status
            == 403)
            .then_some(())
    });
    disable(false);
    assert_eq!(
        a.post("/offer/far", &offer("z", "compute"), Some(&token))
            .status,
        200
    );
    wait_for("B to accept the provider again", || {
        (b.post("/offer/far", &offer("w", "compute"), Some(&token))
            .status
            == 200)
            .then_some(())
    });
}
