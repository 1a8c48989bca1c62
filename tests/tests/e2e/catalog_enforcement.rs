//! Each provider's Liqo enforcement level on its offers (issue 30), on
//! both stores: a provider reports it with `PUT /provider/enforcement`
//! (400 naming `level` on a bad one, nothing changed); every offer of that
//! provider then carries it as `enforcement` — at once on the feed (a
//! re-stamp is an upsert), in `GET /offer/{id}` and `GET /offers`, on
//! offers written later — and only that provider's; `?enforcement=` finds
//! them; `PUT /provider/peering` keeps it; a restart keeps it.

use e2e::buying::put;
use e2e::catalog::{provider, simple_offer, Backend, Env};
use e2e::catalog_tests;
use e2e::ws::{snapshot_ids, FeedClient};
use e2e::EVENTUALLY;
use serde_json::json;

catalog_tests!(enforcement_is_stamped_filtered_and_kept);

fn enforcement_is_stamped_filtered_and_kept(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));
    let offer = |name: &str| simple_offer(name, "compute", "1", json!({ "cpu": "1" }));
    c.put_offer("a", &offer("A"), &p1);
    c.put_offer("b", &offer("B"), &p2);
    // Never reported: no field.
    assert!(c.get("/offer/a").json.get("enforcement").is_none());

    let mut feed = FeedClient::connect(c.port, "").unwrap();
    let snap = feed.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(snapshot_ids(&snap), ["a", "b"]);

    let report = |level: &str, token: &str| {
        put(
            &c,
            "/provider/enforcement",
            &json!({ "level": level }),
            Some(token),
        )
    };
    let r = report("hard", &p1);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["clusterID"], "cluster-1");
    assert_eq!(r.json["enforcement"], "hard");
    // Re-published: the feed's next event is `a`, stamped.
    let up = feed.expect("upsert", EVENTUALLY).unwrap();
    assert_eq!(up["offer"]["id"], "a", "{up}");
    assert_eq!(up["offer"]["enforcement"], "hard", "{up}");
    assert_eq!(c.get("/offer/a").json["enforcement"], "hard");
    assert!(c.get("/offer/b").json.get("enforcement").is_none());
    assert_eq!(c.list_ids("?enforcement=hard"), ["a"]);
    assert_eq!(c.list_ids("?enforcement=soft"), Vec::<String>::new());

    // Bad input names the field and changes nothing.
    let before = c.all_offers();
    for body in [json!({ "level": "Hard" }), json!({}), json!({ "level": 3 })] {
        let r = put(&c, "/provider/enforcement", &body, Some(&p1));
        assert!(
            r.expect_error(400).starts_with("level"),
            "{body}: {}",
            r.text
        );
    }
    let r = c.get("/offers?enforcement=on");
    assert!(
        r.expect_error(400).starts_with("enforcement:"),
        "{}",
        r.text
    );
    // Only a provider reports its own.
    assert_eq!(
        put(
            &c,
            "/provider/enforcement",
            &json!({ "level": "off" }),
            None
        )
        .status,
        401
    );
    assert_eq!(c.all_offers(), before, "a refused report changes nothing");

    // Registering its peering keeps the level; a new offer is stamped.
    let r = put(
        &c,
        "/provider/peering",
        &json!({ "resourceSliceClass": "gold" }),
        Some(&p1),
    );
    assert_eq!(r.json["enforcement"], "hard", "{}", r.text);
    let written = c.put_offer("c", &offer("C"), &p1);
    assert_eq!(written["enforcement"], "hard");

    // A change re-stamps both of its offers.
    assert_eq!(report("off", &p1).status, 200);
    assert_eq!(c.list_ids("?enforcement=off"), ["a", "c"]);
    drop(feed);

    // Kept across a restart.
    drop(c);
    let c = env.start();
    assert_eq!(c.list_ids("?enforcement=off"), ["a", "c"]);
    assert_eq!(c.get("/offer/c").json["enforcement"], "off");
}
