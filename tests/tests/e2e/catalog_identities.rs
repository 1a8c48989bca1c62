//! Issue 29, finding 6: provider cluster IDs and consumer subjects are one
//! namespace of identities. A provider cannot sign up under a subject a
//! consumer token was issued for (nor the reverse), with a 409 naming the
//! clash, on both stores; racing claims of one subject end with one holder.
//! Issue 29, low: a consumer subject padded with white space or holding a
//! bidirectional control character (U+202E …) is refused (400); a consumer
//! may list `GET /reservations?consumer=<its own subject>` (others: 403).

use e2e::buying::{admin, consumer, post, start};
use e2e::catalog::{provider, Backend, Env};
use e2e::catalog_tests;
use serde_json::json;

catalog_tests!(
    provider_cannot_take_a_consumer_subject,
    subjects_that_look_like_others_are_refused,
    a_consumer_may_name_itself_when_listing
);

fn provider_cannot_take_a_consumer_subject(backend: Backend) {
    let env = Env::new(backend);
    let c = start(&env, &[]);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    // Sign-up as `alice`: refused, nothing registered.
    let mut creds = provider(1);
    creds["clusterID"] = json!("alice");
    let msg = post(&c, "/authenticate", &creds, None).expect_error(409);
    assert!(msg.contains("alice") && msg.contains("consumer"), "{msg}");
    // The consumer keeps getting tokens, and its first one still works.
    consumer(&c, &admin, "alice");
    let r = e2e::buying::get(&c, "/reservations", Some(&alice));
    assert_eq!(r.status, 200, "{}", r.text);

    // The reverse, already refused, still is, with the provider's name.
    c.login(&provider(2));
    let msg = post(
        &c,
        "/consumer-tokens",
        &json!({ "subject": "cluster-2" }),
        Some(&admin),
    )
    .expect_error(409);
    assert!(
        msg.contains("cluster-2") && msg.contains("provider"),
        "{msg}"
    );

    // Racing claims of one fresh subject: exactly one kind holds it.
    let subject = "contested";
    let (p, k) = std::thread::scope(|s| {
        let p = s.spawn(|| {
            let mut creds = provider(3);
            creds["clusterID"] = json!(subject);
            post(&c, "/authenticate", &creds, None).status
        });
        let k = s.spawn(|| {
            post(
                &c,
                "/consumer-tokens",
                &json!({ "subject": subject }),
                Some(&admin),
            )
            .status
        });
        (p.join().unwrap(), k.join().unwrap())
    });
    let mut statuses = [p, k];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "provider {p}, consumer {k}");
}

fn subjects_that_look_like_others_are_refused(backend: Backend) {
    let env = Env::new(backend);
    let c = start(&env, &[]);
    let admin = admin(&c);
    for (subject, says) in [
        (" alice", "white space"),
        ("alice ", "white space"),
        ("ali\u{202E}ecila", "U+202E"),
        ("\u{2066}bob", "U+2066"),
        ("bob\u{200F}", "U+200F"),
    ] {
        let msg = post(
            &c,
            "/consumer-tokens",
            &json!({ "subject": subject }),
            Some(&admin),
        )
        .expect_error(400);
        assert!(msg.contains(says), "{subject:?}: {msg}");
    }
    // Inner spaces and ordinary non-ASCII stay allowed.
    consumer(&c, &admin, "alice smith");
    consumer(&c, &admin, "zoë");
}

fn a_consumer_may_name_itself_when_listing(backend: Backend) {
    let env = Env::new(backend);
    let c = start(&env, &[]);
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let r = e2e::buying::get(&c, "/reservations?consumer=alice", Some(&alice));
    assert_eq!(r.status, 200, "{}", r.text);
    e2e::buying::get(&c, "/reservations?consumer=bob", Some(&alice)).expect_error(403);
}
