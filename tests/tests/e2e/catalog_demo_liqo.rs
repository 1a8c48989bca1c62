//! `catalog --demo` stamps its offers with the Liqo generations the demo
//! provider peers with (v0: it has an auth URL), as every provider's
//! offers are stamped, so `?liqo=v0` finds them (issue 29, a low item).

use e2e::catalog::{Backend, Env};
use serde_json::json;

#[test]
fn demo_offers_carry_the_demo_providers_liqo() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--demo"]);
    // The demo is seeded once the port is bound: ready when it is.
    c.wait_for_status("/readyz", 200, e2e::EVENTUALLY).unwrap();
    let all = c.all_offers();
    let offers = all.as_array().expect("a list");
    assert!(offers.len() >= 3, "{all}");
    for o in offers {
        assert_eq!(o["liqo"], json!(["v0"]), "{o}");
    }
    let mut ids: Vec<String> = offers
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut v0 = c.list_ids("?liqo=v0");
    v0.sort();
    assert_eq!(v0, ids);
    assert!(c.list_ids("?liqo=v1").is_empty());
}
