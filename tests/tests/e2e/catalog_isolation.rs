//! Each provider's tenant-isolation level on its offers (issue 43), on both
//! stores, as its enforcement level is (`catalog_enforcement`): a provider
//! reports it with `PUT /provider/isolation` (400 naming `level` on a bad
//! one, 401 without a token, 403 for a consumer or a disabled provider,
//! nothing changed); every offer of that provider then carries it as
//! `isolation` — at once on the feed (a re-stamp is an upsert), in `GET
//! /offer/{id}` and `GET /offers`, on offers written later — and only that
//! provider's; `?isolation=` finds them; it and the enforcement level keep
//! each other; `PUT /provider/peering` keeps it; a restart keeps it.

use e2e::buying::{self, admin, consumer, get, put};
use e2e::catalog::{provider, simple_offer, Backend, Env};
use e2e::catalog_tests;
use e2e::ws::{snapshot_ids, FeedClient};
use e2e::EVENTUALLY;
use serde_json::json;

catalog_tests!(isolation_is_stamped_filtered_and_kept);

fn isolation_is_stamped_filtered_and_kept(backend: Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));
    let offer = |name: &str| simple_offer(name, "compute", "1", json!({ "cpu": "1" }));
    c.put_offer("a", &offer("A"), &p1);
    c.put_offer("b", &offer("B"), &p2);
    // Never reported: no field.
    assert!(c.get("/offer/a").json.get("isolation").is_none());

    let mut feed = FeedClient::connect(c.port, "").unwrap();
    let snap = feed.expect("snapshot", EVENTUALLY).unwrap();
    assert_eq!(snapshot_ids(&snap), ["a", "b"]);

    let report = |route: &str, level: &str, token: &str| {
        put(&c, route, &json!({ "level": level }), Some(token))
    };
    let r = report("/provider/isolation", "enforced", &p1);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["clusterID"], "cluster-1");
    assert_eq!(r.json["isolation"], "enforced");
    assert!(r.json.get("enforcement").is_none(), "{}", r.text);
    // Re-published: the feed's next event is `a`, stamped.
    let up = feed.expect("upsert", EVENTUALLY).unwrap();
    assert_eq!(up["offer"]["id"], "a", "{up}");
    assert_eq!(up["offer"]["isolation"], "enforced", "{up}");
    assert_eq!(c.get("/offer/a").json["isolation"], "enforced");
    assert!(c.get("/offer/b").json.get("isolation").is_none());
    assert_eq!(c.list_ids("?isolation=enforced"), ["a"]);
    assert_eq!(c.list_ids("?isolation=failed"), Vec::<String>::new());

    // The enforcement level and the isolation level keep each other, and
    // both filters hold together.
    assert_eq!(report("/provider/enforcement", "hard", &p1).status, 200);
    let up = feed.expect("upsert", EVENTUALLY).unwrap();
    assert_eq!(up["offer"]["enforcement"], "hard", "{up}");
    assert_eq!(up["offer"]["isolation"], "enforced", "{up}");
    assert_eq!(c.list_ids("?enforcement=hard&isolation=enforced"), ["a"]);
    assert_eq!(
        c.list_ids("?enforcement=hard&isolation=unverified"),
        Vec::<String>::new()
    );

    // Bad input names the field and changes nothing; only a provider
    // reports its own, and not while disabled.
    let before = c.all_offers();
    for body in [
        json!({ "level": "Enforced" }),
        json!({ "level": "hard" }),
        json!({}),
        json!({ "level": 3 }),
    ] {
        let r = put(&c, "/provider/isolation", &body, Some(&p1));
        assert!(
            r.expect_error(400).starts_with("level"),
            "{body}: {}",
            r.text
        );
    }
    let r = c.get("/offers?isolation=on");
    assert!(r.expect_error(400).starts_with("isolation:"), "{}", r.text);
    let off = json!({ "level": "off" });
    assert_eq!(put(&c, "/provider/isolation", &off, None).status, 401);
    let admin = admin(&c);
    let buyer = consumer(&c, &admin, "alice");
    assert_eq!(
        put(&c, "/provider/isolation", &off, Some(&buyer)).status,
        403
    );
    let disable = |disabled: bool| {
        let body = json!({ "disabled": disabled });
        let r = put(&c, "/admin/providers/cluster-1", &body, Some(&admin));
        assert_eq!(r.status, 200, "{}", r.text);
    };
    disable(true);
    let message = put(&c, "/provider/isolation", &off, Some(&p1)).expect_error(403);
    assert!(message.contains("cluster-1 is disabled"), "{message}");
    disable(false);
    assert_eq!(c.all_offers(), before, "a refused report changes nothing");

    // Registering its peering keeps the level; a new offer is stamped.
    let r = put(
        &c,
        "/provider/peering",
        &json!({ "resourceSliceClass": "gold" }),
        Some(&p1),
    );
    assert_eq!(r.json["isolation"], "enforced", "{}", r.text);
    assert_eq!(r.json["enforcement"], "hard", "{}", r.text);
    let written = c.put_offer("c", &offer("C"), &p1);
    assert_eq!(written["isolation"], "enforced");

    // A change re-stamps both of its offers.
    assert_eq!(report("/provider/isolation", "failed", &p1).status, 200);
    assert_eq!(c.list_ids("?isolation=failed"), ["a", "c"]);
    drop(feed);

    // Kept across a restart, with the enforcement level.
    drop(c);
    let c = env.start();
    assert_eq!(c.list_ids("?isolation=failed"), ["a", "c"]);
    assert_eq!(c.get("/offer/c").json["isolation"], "failed");
    assert_eq!(c.get("/offer/c").json["enforcement"], "hard");
    let r = get(&c, "/provider/peering", Some(&c.login(&provider(1))));
    assert_eq!(r.json["isolation"], "failed", "{}", r.text);
}
