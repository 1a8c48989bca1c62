//! Several catalog processes on one database. With MongoDB they share it and
//! stay correct under concurrent writes (ownership, versions, one claim per
//! cluster ID, shared token key); the embedded store is single-process and
//! a second process on its data directory refuses to start. With MongoDB
//! gone, writes answer 503 and the catalog recovers by itself.

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Catalog, Env};
use e2e::catalog_tests;
use e2e::contracts::wait_for;
use serde_json::json;

catalog_tests!(two_processes_on_one_database);

fn two_processes_on_one_database(backend: Backend) {
    let env = Env::new(backend);
    let a = env.start();
    if backend == Backend::Embedded {
        let err = env
            .try_start(&[])
            .err()
            .expect("a second process on the same data directory must refuse to start");
        assert!(err.to_string().contains("exited"), "{err}");
        // The first one is unaffected.
        let token = a.login(&provider(1));
        a.put_offer("x", &thesis_offer(), &token);
        return;
    }
    let b = env.start();

    // A token from one process works on the other (shared key), and the
    // provider registered through A is known to B.
    let t1 = a.login(&provider(1));
    let created = b.put_offer("shared", &thesis_offer(), &t1);
    // Each process reads from memory kept current by the change streams:
    // another process's write is seen once its change event arrives.
    wait_for("A to read B's write", || {
        (a.get("/offer/shared").json == created).then_some(())
    });
    let t1b = b.login(&provider(1));
    let mut wrong = provider(1);
    wrong["token"] = json!("nope");
    b.post("/authenticate", &wrong, None).expect_error(401);

    // Ownership holds across processes.
    let t2 = b.login(&provider(2));
    a.post("/offer/shared", &thesis_offer(), Some(&t2))
        .expect_error(403);
    b.delete("/offer/shared", Some(&t2)).expect_error(403);

    // Concurrent replacements through both processes: every write gets its
    // own version, none is lost.
    let writes_each = 15;
    let run = |c: &Catalog, token: &str, tag: &str| -> Vec<u64> {
        (0..writes_each)
            .map(|i| {
                let body = simple_offer(&format!("{tag}-{i}"), "compute", "1", json!({"cpu": "1"}));
                let r = c.post("/offer/shared", &body, Some(token));
                assert_eq!(r.status, 200, "{}", r.text);
                r.json["version"].as_u64().unwrap()
            })
            .collect()
    };
    let (va, vb) = std::thread::scope(|s| {
        let ha = s.spawn(|| run(&a, &t1, "a"));
        let hb = s.spawn(|| run(&b, &t1b, "b"));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    let mut all: Vec<u64> = va.iter().chain(&vb).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        2 * writes_each,
        "versions handed out twice: {va:?} {vb:?}"
    );
    let last = wait_for("A to read the last write", || {
        let r = a.get("/offer/shared").json;
        (r["version"].as_u64() == Some(1 + 2 * writes_each as u64)).then_some(r)
    });
    wait_for("B to read the last write", || {
        (b.get("/offer/shared").json == last).then_some(())
    });

    // Two first authentications of one cluster ID with different secrets,
    // one per process, at once: exactly one claims it.
    let mut c5a = provider(5);
    c5a["token"] = json!("secret-a");
    let mut c5b = provider(5);
    c5b["token"] = json!("secret-b");
    let statuses = std::thread::scope(|s| {
        let ha = s.spawn(|| a.post("/authenticate", &c5a, None).status);
        let hb = s.spawn(|| b.post("/authenticate", &c5b, None).status);
        [ha.join().unwrap(), hb.join().unwrap()]
    });
    assert!(
        statuses.contains(&200) && statuses.contains(&401),
        "{statuses:?}"
    );

    // Deletion through one is seen by the other.
    assert_eq!(b.delete("/offer/shared", Some(&t1)).status, 204);
    b.get("/offer/shared").expect_error(404);
    wait_for("A to see the deletion", || {
        (a.get("/offer/shared").status == 404).then_some(())
    });
}

#[test]
fn mongo_outage_answers_503_and_recovers() {
    let mut env = Env::new(Backend::Mongo);
    let c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("before", &thesis_offer(), &token);
    let before = c.all_offers();

    env.mongo.as_mut().unwrap().stop();
    let r = c.post("/offer/during", &thesis_offer(), Some(&token));
    let message = r.expect_error(503);
    assert!(message.contains("MongoDB"), "{message}");
    assert_eq!(r.header("retry-after"), Some("1"));
    c.delete("/offer/before", Some(&token)).expect_error(503);
    c.get("/readyz").expect_error(503);
    assert_eq!(
        c.get("/healthz").status,
        200,
        "alive while the database is away"
    );

    env.mongo
        .as_mut()
        .unwrap()
        .restart()
        .expect("restart SecantusDB");
    c.wait_for_status("/readyz", 200, e2e::EVENTUALLY)
        .expect("ready again");
    assert_eq!(c.all_offers(), before, "the refused writes changed nothing");
    let r = c.post("/offer/after", &thesis_offer(), Some(&token));
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(c.list_ids(""), ["after", "before"]);
}
