//! Provider labels on offers, on both stores: written in the offer body,
//! validated as Kubernetes labels (400 naming the key, nothing changed),
//! returned with the offer, and filtered with `label.<key>=<value>` in
//! `GET /offers` and on the feed (several combined: all must hold).

use e2e::catalog::{provider, simple_offer, Backend, Env};
use e2e::catalog_tests;
use e2e::ws::{snapshot_ids, FeedClient};
use serde_json::{json, Value};

catalog_tests!(labels_are_kept_and_filtered, bad_labels_change_nothing);

fn labelled(name: &str, cost: &str, labels: Value) -> Value {
    let mut o = simple_offer(
        name,
        "compute",
        cost,
        json!({ "cpu": "2", "memory": "4Gi" }),
    );
    o["labels"] = labels;
    o
}

fn labels_are_kept_and_filtered(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));

    let eu = c.put_offer(
        "eu",
        &labelled(
            "EU",
            "1",
            json!({ "region": "eu-west", "compliance": "gdpr", "topology.kubernetes.io/zone": "" }),
        ),
        &p1,
    );
    assert_eq!(
        eu["labels"],
        json!({ "region": "eu-west", "compliance": "gdpr", "topology.kubernetes.io/zone": "" })
    );
    c.put_offer(
        "us",
        &labelled("US", "1", json!({ "region": "us-east" })),
        &p2,
    );
    c.put_offer(
        "plain",
        &simple_offer("Plain", "compute", "1", json!({ "cpu": "1" })),
        &p2,
    );
    // Returned with every read; `{}` when the provider gave none.
    assert_eq!(
        c.get("/offer/us").json["labels"],
        json!({ "region": "us-east" })
    );
    assert_eq!(c.get("/offer/plain").json["labels"], json!({}));

    assert_eq!(c.list_ids("?label.region=eu-west"), ["eu"]);
    assert_eq!(c.list_ids("?label.region=us-east"), ["us"]);
    assert_eq!(c.list_ids("?label.region=eu"), Vec::<String>::new());
    // Several combined: all must hold.
    assert_eq!(
        c.list_ids("?label.region=eu-west&label.compliance=gdpr"),
        ["eu"]
    );
    assert_eq!(
        c.list_ids("?label.region=eu-west&label.compliance=hipaa"),
        Vec::<String>::new()
    );
    // An empty value matches a label present with an empty value only.
    assert_eq!(c.list_ids("?label.topology.kubernetes.io%2Fzone="), ["eu"]);
    assert_eq!(c.list_ids("?label.compliance="), Vec::<String>::new());
    // With the other filters.
    assert_eq!(
        c.list_ids("?label.region=us-east&provider=cluster-1"),
        Vec::<String>::new()
    );
    assert_eq!(c.list_ids("?label.region=us-east&min.cpu=2"), ["us"]);
    // A bad filter names itself.
    let r = c.get("/offers?label.bad%20key=x");
    assert!(
        r.expect_error(400).starts_with("label.bad key:"),
        "{}",
        r.text
    );
    let r = c.get("/offers?label.region=-x");
    assert!(
        r.expect_error(400).starts_with("label.region:"),
        "{}",
        r.text
    );

    // The feed filters the same way, snapshot and events.
    let mut feed =
        FeedClient::connect(c.port, "?label.region=eu-west&label.compliance=gdpr").unwrap();
    let snap = feed.expect("snapshot", e2e::EVENTUALLY).unwrap();
    assert_eq!(snapshot_ids(&snap), ["eu"]);
    // `us` gains the labels: it enters the filtered feed.
    c.put_offer(
        "us",
        &labelled(
            "US",
            "1",
            json!({ "region": "eu-west", "compliance": "gdpr" }),
        ),
        &p2,
    );
    let up = feed.expect("upsert", e2e::EVENTUALLY).unwrap();
    assert_eq!(up["offer"]["id"], "us");
    assert_eq!(up["offer"]["labels"]["region"], "eu-west");
    assert_eq!(
        c.list_ids("?label.region=eu-west&label.compliance=gdpr"),
        ["eu", "us"]
    );

    // Kept across a restart.
    drop(feed);
    drop(c);
    let c = env.start();
    assert_eq!(c.list_ids("?label.compliance=gdpr"), ["eu", "us"]);
    assert_eq!(
        c.get("/offer/eu").json["labels"]["topology.kubernetes.io/zone"],
        ""
    );
}

fn bad_labels_change_nothing(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let p1 = c.login(&provider(1));
    c.put_offer("o", &labelled("O", "1", json!({ "region": "eu" })), &p1);
    let before = c.all_offers();

    let long_key = "x".repeat(64);
    let long_field = format!("labels.{long_key}");
    for (labels, field) in [
        (json!({ "region": "eu", "bad key": "x" }), "labels.bad key"),
        (json!({ "Example.com/x": "y" }), "labels.Example.com/x"),
        (json!({ "a/b/c": "y" }), "labels.a/b/c"),
        (json!({ "region": "-eu" }), "labels.region"),
        (json!({ "region": "v".repeat(64) }), "labels.region"),
        (json!({ long_key.clone(): "" }), long_field.as_str()),
        (json!({ "region": 1 }), "labels.region"),
    ] {
        let r = c.post("/offer/o", &labelled("O", "2", labels.clone()), Some(&p1));
        let message = r.expect_error(400);
        assert!(
            message.starts_with(&format!("{field}:")),
            "{labels}: {message}"
        );
    }
    let too_many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!(""))).collect();
    let r = c.post(
        "/offer/o",
        &labelled("O", "2", Value::Object(too_many)),
        Some(&p1),
    );
    assert!(r.expect_error(400).starts_with("labels:"), "{}", r.text);
    assert_eq!(c.all_offers(), before, "a refused write changes nothing");
}
