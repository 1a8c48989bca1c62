//! OpenID Connect against an issuer that behaves like real ones: https with
//! a private CA (`--oidc-ca-file`), keys published without `alg`, `aud` as
//! an array, `nbf`, a discovery document naming another issuer or differing
//! by a trailing slash, the discovery document fetched once and cached, and
//! keys older than `--oidc-keys-max-age` fetched again (retiring the ones the
//! issuer dropped). Fetches are counted at the issuer, exactly.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::buying::{self, get};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::oidc_issuer::{self, Issuer, Options, TestKey};
use serde_json::{json, Value};

const AUDIENCE: &str = "liqo-catalog-e2e";

fn flags<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut f = vec!["--oidc-issuer", url, "--oidc-audience", AUDIENCE];
    f.extend_from_slice(extra);
    buying::buying_flags(&f)
}

fn start(env: &Env, issuer: &Issuer, extra: &[&str]) -> Catalog {
    let url = issuer.url();
    env.start_with(&flags(&url, extra))
}

fn status_of(c: &Catalog, token: &str) -> u16 {
    get(c, "/reservations", Some(token)).status
}

#[test]
fn an_https_issuer_is_trusted_through_the_ca_file_only() {
    let issuer = Issuer::start_https();
    assert!(issuer.url().starts_with("https://127.0.0.1:"));
    let key = TestKey::rsa("rsa-a.pem", "rsa-a");
    issuer.publish(&[&key]);
    let token = key.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));

    // Not told about the test CA: the certificate is not trusted, nothing
    // is fetched, the token cannot be checked (503, retry later).
    let env = Env::new(Backend::Embedded);
    let untrusting = start(&env, &issuer, &[]);
    let r = get(&untrusting, "/reservations", Some(&token));
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(issuer.discovery_fetches(), 0, "no TLS session, no request");
    drop(untrusting);

    let ca = oidc_issuer::ca_file();
    let ca = ca.display().to_string();
    let c = start(&env, &issuer, &["--oidc-ca-file", &ca]);
    assert_eq!(status_of(&c, &token), 200);
    assert_eq!((issuer.discovery_fetches(), issuer.jwks_fetches()), (1, 1));

    // A CA file that is missing or holds no certificate: refused at start.
    let empty = env.data_dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let url = issuer.url();
    let spare = tempfile::tempdir().unwrap();
    let spare = spare.path().display().to_string();
    for (file, says) in [
        ("/nonexistent/ca.pem".to_string(), "--oidc-ca-file"),
        (empty.display().to_string(), "no PEM certificate"),
    ] {
        let out = e2e::Spawn::new("catalog")
            .args(["--listen", "127.0.0.1:0", "--data-dir", spare.as_str()])
            .args(["--oidc-issuer", &url, "--oidc-audience", AUDIENCE])
            .args(["--oidc-ca-file", &file])
            .output()
            .expect("run catalog");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{file}: started");
        assert!(stderr.contains(says), "{file}: {stderr}");
    }
}

#[test]
fn keys_without_alg_verify_tokens_whose_alg_fits_the_key_type() {
    let issuer = Issuer::start();
    let rsa = TestKey::rsa("rsa-a.pem", "rsa-a").without_alg();
    let ec = TestKey::ec("ec-a.pem", "ec-a").without_alg();
    assert!(rsa.jwk.get("alg").is_none() && ec.jwk.get("alg").is_none());
    issuer.publish(&[&rsa, &ec]);
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    let claims = issuer.claims(AUDIENCE, "alice", &["consumer"], 300);
    assert_eq!(
        status_of(&c, &rsa.sign(&claims)),
        200,
        "RS256 on an RSA key"
    );
    assert_eq!(
        status_of(&c, &ec.sign(&claims)),
        200,
        "ES256 on a P-256 key"
    );
    // ES256 under the RSA key's kid (and RS256 under the EC key's): the
    // algorithm does not fit the key type.
    assert_eq!(status_of(&c, &ec.sign_as("rsa-a", &claims)), 401);
    assert_eq!(status_of(&c, &rsa.sign_as("ec-a", &claims)), 401);
}

#[test]
fn aud_arrays_must_contain_the_audience() {
    let issuer = Issuer::start();
    let key = TestKey::ec("ec-a.pem", "ec-a");
    issuer.publish(&[&key]);
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    let with_aud = |aud: Value| {
        let mut claims = issuer.claims(AUDIENCE, "alice", &["consumer"], 300);
        claims["aud"] = aud;
        key.sign(&claims)
    };
    for (aud, status) in [
        (json!([AUDIENCE]), 200),
        (json!(["another-api", AUDIENCE]), 200),
        (json!(["another-api", "yet-another"]), 401),
        (json!([]), 401),
        (json!([format!("{AUDIENCE}-not")]), 401),
    ] {
        assert_eq!(status_of(&c, &with_aud(aud.clone())), status, "aud {aud}");
    }
}

#[test]
fn nbf_is_checked_with_the_leeway() {
    let issuer = Issuer::start();
    let key = TestKey::rsa("rsa-a.pem", "rsa-a");
    issuer.publish(&[&key]);
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    let with_nbf = |offset: i64| {
        let mut claims = issuer.claims(AUDIENCE, "alice", &["consumer"], 600);
        claims["nbf"] = json!(oidc_issuer::now() + offset);
        key.sign(&claims)
    };
    // The leeway is 30 s: 10 s early is clock skew, 2 min is not valid yet.
    for (offset, status) in [(-60, 200), (10, 200), (120, 401), (3600, 401)] {
        assert_eq!(
            status_of(&c, &with_nbf(offset)),
            status,
            "nbf now{offset:+}"
        );
    }
}

#[test]
fn the_discovery_issuer_must_be_identical() {
    let issuer = Issuer::start();
    let key = TestKey::rsa("rsa-a.pem", "rsa-a");
    issuer.publish(&[&key]);
    let token = key.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    let env = Env::new(Backend::Embedded);
    let log = env.data_dir.path().join("catalog.log");
    let url = issuer.url();
    let c = env.start_with_logs(&flags(&url, &[]), &log);

    // Another issuer, then the same one with a trailing slash: neither is
    // identical, so no key is taken from them (OpenID Connect Discovery
    // 1.0 §4.3), with an error in the log saying why.
    let elsewhere = "https://elsewhere.example";
    let slashed = format!("{url}/");
    for named in [elsewhere, slashed.as_str()] {
        issuer.set_discovery_issuer(Some(named));
        let r = get(&c, "/reservations", Some(&token));
        assert_eq!(r.status, 503, "discovery names {named}: {}", r.text);
        let needle = format!("names issuer \"{named}\"");
        let text = e2e::wait_for_log(&log, &needle, Duration::from_secs(20));
        let line = text.lines().find(|l| l.contains(&needle)).unwrap();
        assert!(line.contains("ERROR"), "{line}");
        assert!(line.contains("must be identical"), "{line}");
    }
    assert_eq!(
        issuer.jwks_fetches(),
        0,
        "no keys from a mismatching issuer"
    );

    // Once the document names the issuer again, its keys are used.
    issuer.set_discovery_issuer(None);
    assert_eq!(status_of(&c, &token), 200);
}

#[test]
fn an_issuer_with_a_trailing_slash_is_matched_exactly() {
    let issuer = Issuer::start_with(Options {
        trailing_slash: true,
        ..Options::default()
    });
    assert!(issuer.url().ends_with('/'));
    let key = TestKey::rsa("rsa-a.pem", "rsa-a");
    issuer.publish(&[&key]);
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    // Discovery at <issuer without slash>/.well-known/…, `iss` with it.
    let token = key.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    assert_eq!(status_of(&c, &token), 200);
    assert_eq!(issuer.discovery_fetches(), 1);
    // A token naming the issuer without the slash is another issuer's.
    let mut claims = issuer.claims(AUDIENCE, "alice", &["consumer"], 300);
    claims["iss"] = json!(issuer.url().trim_end_matches('/'));
    assert_eq!(status_of(&c, &key.sign(&claims)), 401);

    // Configured without the slash, against an issuer that names itself
    // with one: refused, not silently equated.
    drop(c);
    let unslashed = issuer.url().trim_end_matches('/').to_string();
    let c = env.start_with(&flags(&unslashed, &[]));
    assert_eq!(get(&c, "/reservations", Some(&token)).status, 503);
}

/// `--oidc-refresh-interval` of the caching part: short, so a key that
/// appears is fetched after one short sleep.
const REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// `--oidc-keys-max-age` where the cache must hold: nextest ends any test
/// after 3 minutes (`.config/nextest.toml`), so no run that can pass comes
/// near it, however slow the machine.
const HOLDING_MAX_AGE: &str = "1h";

/// `--oidc-keys-max-age` where the keys must expire: the test waits it out
/// once; only the check that a refetched set is cached again must fit in
/// it (three requests), and it is taken again until one does.
const EXPIRING_MAX_AGE: Duration = Duration::from_secs(2);

#[test]
fn discovery_is_cached_and_keys_older_than_max_age_are_fetched_again() {
    let a = TestKey::rsa("rsa-a.pem", "key-1");
    let b = TestKey::rsa("rsa-b.pem", "key-2");
    let claims = |issuer: &Issuer| issuer.claims(AUDIENCE, "alice", &["consumer"], 600);

    // Cached: the keys never grow older than the maximum age here, so
    // every "nothing fetched" below holds however long the steps take.
    let issuer = Issuer::start();
    issuer.publish(&[&a]);
    let env = Env::new(Backend::Embedded);
    let refresh = edge::duration::format(REFRESH_INTERVAL);
    let c = start(
        &env,
        &issuer,
        &[
            "--oidc-refresh-interval",
            &refresh,
            "--oidc-keys-max-age",
            HOLDING_MAX_AGE,
        ],
    );
    let counts = || (issuer.discovery_fetches(), issuer.jwks_fetches());
    let token_a = a.sign(&claims(&issuer));
    let token_b = b.sign(&claims(&issuer));
    assert_eq!(status_of(&c, &token_a), 200);
    assert_eq!(status_of(&c, &token_a), 200);
    assert_eq!(counts(), (1, 1), "one discovery, one JWKS");

    // A new key appears: its first token refetches the JWKS only, not the
    // discovery document. The last fetch started before the last answer,
    // so after one refresh interval more a refetch is allowed.
    issuer.publish(&[&a, &b]);
    std::thread::sleep(REFRESH_INTERVAL);
    assert_eq!(status_of(&c, &token_b), 200);
    assert_eq!(counts(), (1, 2), "JWKS refetched, discovery cached");

    // The issuer drops key-1; while the cached keys are younger than the
    // maximum age, key-1 still verifies and nothing is fetched.
    issuer.publish(&[&b]);
    assert_eq!(status_of(&c, &token_a), 200);
    assert_eq!(counts(), (1, 2));
    drop(c);

    // Expired: past the maximum age the keys (and the discovery document)
    // are read again, once: key-1 is retired, key-2 verifies from the new
    // set, and that set is cached in turn.
    let issuer = Issuer::start();
    issuer.publish(&[&a]);
    let env = Env::new(Backend::Embedded);
    let max_age = edge::duration::format(EXPIRING_MAX_AGE);
    let c = start(&env, &issuer, &["--oidc-keys-max-age", &max_age]);
    let counts = || (issuer.discovery_fetches(), issuer.jwks_fetches());
    let token_a = a.sign(&claims(&issuer));
    let token_b = b.sign(&claims(&issuer));
    assert_eq!(status_of(&c, &token_a), 200);
    // The keys were fetched before this answer: from a max age after it,
    // they are older than the max age, however long anything took.
    let fetched_by = Instant::now();
    assert_eq!(counts(), (1, 1));
    issuer.publish(&[&b]);
    std::thread::sleep(EXPIRING_MAX_AGE.saturating_sub(fetched_by.elapsed()));
    let mut refetch_asked = Instant::now();
    assert_eq!(status_of(&c, &token_a), 401, "retired after max age");
    let mut fetched = (2, 2);
    assert_eq!(counts(), fetched, "discovery and JWKS read again, once");
    // Cached again: nothing more within the maximum age of that refetch.
    // The refetch ended after `refetch_asked`, so two requests answered
    // within a max age of it are within a max age of the refetch; if this
    // machine was slower than that, a refetch would be right, and the
    // check is taken again past the next expiry.
    for _ in 0..5 {
        assert_eq!(status_of(&c, &token_b), 200);
        assert_eq!(status_of(&c, &token_b), 200);
        if refetch_asked.elapsed() < EXPIRING_MAX_AGE {
            assert_eq!(counts(), fetched, "nothing more within the maximum age");
            return;
        }
        // Whatever was fetched meanwhile ended by now: a max age from now,
        // the set is older than the max age again.
        std::thread::sleep(EXPIRING_MAX_AGE);
        let before = counts();
        refetch_asked = Instant::now();
        assert_eq!(status_of(&c, &token_b), 200);
        fetched = counts();
        assert_eq!(
            fetched,
            (before.0 + 1, before.1 + 1),
            "discovery and JWKS read again, once, past the max age"
        );
    }
    panic!(
        "five times, two requests took longer than the maximum age ({EXPIRING_MAX_AGE:?}): \
         whether a refetched set is cached could not be told"
    );
}
