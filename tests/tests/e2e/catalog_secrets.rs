//! "Never logged" and "no plaintext secret in stored data", checked on both
//! stores: the buying, OSB and rotation flows run against a catalog logging
//! at `trace`, then every secret the flows used (providers' secrets before
//! and after rotation, the administrator secret, the OSB password, every
//! token the catalog issued, the peering credentials handed to buyers) is
//! searched for in the log, in the raw bytes of every file of the data
//! directory (redb), and in every MongoDB document (raw BSON and JSON).
//! Identifiers that are meant to be logged and stored (the cluster ID) are
//! found by the same search, so it cannot pass by looking at nothing.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use e2e::buying::{self, admin, consumer, post, reserve, ADMIN_SECRET};
use e2e::catalog::{provider, Backend, Env};
use e2e::catalog_tests;
use e2e::osb_client::{Auth, Platform};
use serde_json::json;

catalog_tests!(no_secret_in_logs_or_stored_data);

const OSB_USER: &str = "platform";
const OSB_PASSWORD: &str = "osb-password-never-logged-7f3a";
const ROTATED: &str = "rotated-peering-secret-never-logged-91c2";

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
}

fn no_secret_in_logs_or_stored_data(backend: Backend) {
    let env = Env::new(backend);
    let log = env.data_dir.path().join("trace.log");
    let flags = buying::buying_flags(&["--osb-username", OSB_USER, "--osb-password", OSB_PASSWORD]);
    let mut c = env.start_with_log_filter(&flags, "trace", &log);
    let mut issued = Vec::new();

    // Providers: register, publish, rotate the secret.
    let old_secret = provider(1)["token"].as_str().unwrap().to_string();
    let first = c.login(&provider(1));
    c.put_offer("shop", &buying::offer(), &first);
    let mut body = provider(1);
    body["newToken"] = json!(ROTATED);
    let r = c.post("/authenticate/rotate", &body, None);
    assert_eq!(r.status, 200, "{}", r.text);
    let rotated = r.json["token"].as_str().unwrap().to_string();
    let mut creds = provider(1);
    creds["token"] = json!(ROTATED);
    let again = c.login(&creds);
    c.put_offer("shop", &buying::offer(), &again);
    // A failed login with a guessed secret is not logged either.
    let mut guess = provider(1);
    guess["token"] = json!("guessed-secret-never-logged-55d0");
    c.post("/authenticate", &guess, None).expect_error(401);

    // Buying: admin, consumer, reservation, purchase with credentials.
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let r = reserve(&c, &alice, "shop", "small", None);
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json["id"].as_str().unwrap();
    let r = post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&alice),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json["peering"]["token"], ROTATED,
        "the buyer gets the secret"
    );

    // OSB: provision, bind (credentials carry the peering token), unbind.
    let p = Platform::new(
        &c.url(""),
        Auth::Basic(OSB_USER.into(), OSB_PASSWORD.into()),
    );
    let catalog = p.catalog();
    let sid = catalog["services"][0]["id"].as_str().unwrap().to_string();
    let pid = catalog["services"][0]["plans"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(p.provision("inst-1", &sid, &pid, None, false).status, 201);
    let b = p.bind("inst-1", "bind-1", &sid, &pid, "app-guid");
    assert_eq!(b.status, 201, "{}", b.text);
    assert_eq!(b.json["credentials"]["token"], ROTATED, "{}", b.text);
    let wrong = Platform::new(&c.url(""), Auth::Basic(OSB_USER.into(), "x".repeat(20)));
    assert_eq!(wrong.fetch_instance("inst-1").status, 401);

    issued.extend([first, rotated, again, admin, alice]);
    // Let the last log lines out, then stop the catalog cleanly.
    let status = c.child.terminate(Duration::from_secs(20)).unwrap();
    assert!(status.success(), "{status}");

    let logged = std::fs::read(&log).unwrap();
    assert!(
        contains(&logged, "TRACE"),
        "the catalog logged at trace level"
    );
    let mut places = vec![("the trace log".to_string(), logged)];
    files_under(env.data_dir.path(), &mut places);
    places.retain(|(name, _)| !name.ends_with("jwt-signing.key"));
    if let Some(mongo) = &env.mongo {
        let e2e::mongo::Dump { docs, raw } = mongo.dump("catalog_e2e").unwrap();
        assert!(!docs.is_empty());
        places.push(("MongoDB (raw BSON)".into(), raw));
        places.push(("MongoDB (JSON)".into(), serde_json::to_vec(&docs).unwrap()));
    }
    // The search works: what is meant to be there is found everywhere.
    for (name, bytes) in &places {
        if name.ends_with("trace.log") || name.starts_with("MongoDB") || name.ends_with(".redb") {
            assert!(contains(bytes, "cluster-1"), "{name}: cluster-1 not found");
        }
    }
    let mut secrets = vec![
        ("the provider's first secret", old_secret),
        ("the rotated secret", ROTATED.to_string()),
        (
            "a guessed secret",
            "guessed-secret-never-logged-55d0".into(),
        ),
        ("the admin secret", ADMIN_SECRET.to_string()),
        ("the OSB password", OSB_PASSWORD.to_string()),
    ];
    for t in &issued {
        // A whole token, and its signature alone.
        secrets.push(("an issued token", t.clone()));
        secrets.push((
            "a token's signature",
            t.rsplit('.').next().unwrap().to_string(),
        ));
    }
    for (name, bytes) in &places {
        for (what, secret) in &secrets {
            assert!(
                !contains(bytes, secret),
                "{what} ({secret}) found in {name}"
            );
        }
    }
}
