//! OpenID Connect identities against the real catalog: tokens signed by a
//! test issuer on loopback (`e2e::oidc_issuer`), RS256 and ES256, checked
//! for expiry, audience, issuer, key and algorithm; roles from a
//! configurable claim; rotated keys picked up, retired keys refused, and
//! refetches rate-limited.

use std::time::Duration;

use e2e::buying::{self, get, post, publish, reserve};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::oidc_issuer::{Issuer, TestKey};
use serde_json::json;

const AUDIENCE: &str = "liqo-catalog-e2e";

fn start(env: &Env, issuer: &Issuer, extra: &[&str]) -> Catalog {
    let url = issuer.url();
    let mut flags = vec![
        "--oidc-issuer",
        url.as_str(),
        "--oidc-audience",
        AUDIENCE,
        "--oidc-refresh-interval",
        "500ms",
    ];
    flags.extend_from_slice(extra);
    buying::start(env, &flags)
}

fn status_of(c: &Catalog, token: &str) -> u16 {
    get(c, "/reservations", Some(token)).status
}

#[test]
fn tokens_are_verified() {
    let issuer = Issuer::start();
    let rsa = TestKey::rsa("rsa-a.pem", "rsa-a");
    let ec = TestKey::ec("ec-a.pem", "ec-a");
    issuer.publish(&[&rsa, &ec]);
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    publish(&c, 1, "shop");

    // Valid RS256 and ES256 consumer tokens: they buy as their `sub`.
    let alice = rsa.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    let r = reserve(&c, &alice, "shop", "small", None);
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["consumer"], "alice");
    let id = r.json["id"].as_str().unwrap().to_string();
    let bob = ec.sign(&issuer.claims(AUDIENCE, "bob", &["consumer"], 300));
    assert_eq!(status_of(&c, &bob), 200);
    assert_eq!(
        get(&c, &format!("/reservations/{id}"), Some(&bob)).status,
        404,
        "not bob's"
    );
    let contract = post(
        &c,
        &format!("/reservations/{id}/purchase"),
        &json!({}),
        Some(&alice),
    );
    assert_eq!(contract.status, 201, "{}", contract.text);

    // Refused: expired, another audience, another issuer, a key the issuer
    // does not publish, a forged kid, no roles for buying.
    let mut wrong_issuer = issuer.claims(AUDIENCE, "alice", &["consumer"], 300);
    wrong_issuer["iss"] = json!("https://elsewhere.example");
    let mut no_exp = issuer.claims(AUDIENCE, "alice", &["consumer"], 300);
    no_exp.as_object_mut().unwrap().remove("exp");
    let unknown = TestKey::rsa("rsa-unknown.pem", "rsa-unknown");
    let cases = [
        (
            "expired",
            rsa.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], -600)),
        ),
        (
            "wrong audience",
            rsa.sign(&issuer.claims("someone-else", "alice", &["consumer"], 300)),
        ),
        ("wrong issuer", rsa.sign(&wrong_issuer)),
        ("no exp", rsa.sign(&no_exp)),
        (
            "unknown key",
            unknown.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300)),
        ),
        (
            "key under a published kid",
            unknown.sign_as(
                "rsa-a",
                &issuer.claims(AUDIENCE, "alice", &["consumer"], 300),
            ),
        ),
        (
            "RSA key named as the EC one",
            rsa.sign_as(
                "ec-a",
                &issuer.claims(AUDIENCE, "alice", &["consumer"], 300),
            ),
        ),
    ];
    for (what, token) in cases {
        let r = get(&c, "/reservations", Some(&token));
        assert_eq!(r.status, 401, "{what}: {}", r.text);
    }
    // HS256 signed with the issuer's published "oct" key: algorithm refused.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &issuer.claims(AUDIENCE, "alice", &["admin"], 300),
        &jsonwebtoken::EncodingKey::from_secret(b"secret"),
    )
    .unwrap();
    assert_eq!(status_of(&c, &hs), 401);
    // Valid, but no buying role.
    let nobody = rsa.sign(&issuer.claims(AUDIENCE, "carol", &["auditor"], 300));
    assert_eq!(reserve(&c, &nobody, "shop", "small", None).status, 403);
    // The catalog's own tokens still work beside OIDC.
    let own = buying::consumer(&c, &buying::admin(&c), "dave");
    assert_eq!(status_of(&c, &own), 200);
}

#[test]
fn rotated_keys_are_picked_up_and_refetches_are_rate_limited() {
    let issuer = Issuer::start();
    let a = TestKey::rsa("rsa-a.pem", "key-1");
    let b = TestKey::rsa("rsa-b.pem", "key-2");
    issuer.publish(&[&a]);
    let token_a = a.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    let token_b = b.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    let unknown = TestKey::rsa("rsa-unknown.pem", "nobody");
    let bogus = unknown.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));

    // Rate limit: with a refresh interval longer than the test, unknown
    // kids cause no fetch at all after the first one, however many arrive,
    // one after the other or at once (21 fetches without the limit).
    {
        let env = Env::new(Backend::Embedded);
        let url = issuer.url();
        let c = buying::start(
            &env,
            &[
                "--oidc-issuer",
                &url,
                "--oidc-audience",
                AUDIENCE,
                "--oidc-refresh-interval",
                "1h",
            ],
        );
        assert_eq!(status_of(&c, &token_a), 200);
        assert_eq!(status_of(&c, &token_a), 200);
        assert_eq!(issuer.jwks_fetches(), 1, "keys are cached");
        for _ in 0..10 {
            assert_eq!(status_of(&c, &bogus), 401);
        }
        std::thread::scope(|s| {
            for _ in 0..10 {
                s.spawn(|| assert_eq!(status_of(&c, &bogus), 401));
            }
        });
        assert_eq!(
            issuer.jwks_fetches(),
            1,
            "unknown kids within the refresh interval fetch nothing"
        );
    }

    // Rotation: the issuer now publishes only key-2; once the (short)
    // refresh interval has passed, its first token fetches the new set.
    let env = Env::new(Backend::Embedded);
    let c = start(&env, &issuer, &[]);
    assert_eq!(status_of(&c, &token_a), 200);
    assert_eq!(issuer.jwks_fetches(), 2);
    issuer.publish(&[&b]);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        status_of(&c, &token_b),
        200,
        "the new key is fetched on first sight"
    );
    assert_eq!(issuer.jwks_fetches(), 3);
    assert_eq!(
        status_of(&c, &token_a),
        401,
        "the retired key no longer verifies"
    );
    // At most one more fetch (if the 500 ms interval passed meanwhile).
    assert!(issuer.jwks_fetches() <= 4, "{}", issuer.jwks_fetches());
}

#[test]
fn roles_come_from_the_configured_claim() {
    let issuer = Issuer::start();
    let key = TestKey::ec("ec-a.pem", "ec");
    issuer.publish(&[&key]);
    let env = Env::new(Backend::Embedded);
    let c = start(
        &env,
        &issuer,
        &[
            "--oidc-roles-claim",
            "realm_access.roles",
            "--oidc-role-map",
            "catalog-admins=admin,buyers=consumer",
        ],
    );
    publish(&c, 1, "shop");
    let token = |sub: &str, roles: &[&str]| {
        let mut claims = issuer.claims(AUDIENCE, sub, &[], 300);
        claims["realm_access"] = json!({ "roles": roles });
        key.sign(&claims)
    };
    let buyer = token("erin", &["buyers"]);
    let r = reserve(&c, &buyer, "shop", "large", None);
    assert_eq!(r.status, 201, "{}", r.text);
    // The default `roles` claim is ignored under this configuration.
    let flat = key.sign(&issuer.claims(AUDIENCE, "frank", &["consumer"], 300));
    assert_eq!(reserve(&c, &flat, "shop", "large", None).status, 403);
    // A mapped admin sees every record and administers providers.
    let admin = token("root", &["catalog-admins"]);
    let all = get(&c, "/reservations", Some(&admin));
    assert_eq!(all.json.as_array().map(Vec::len), Some(1), "{}", all.text);
    assert_eq!(get(&c, "/admin/providers", Some(&admin)).status, 200);
    assert_eq!(get(&c, "/admin/providers", Some(&buyer)).status, 403);
}

#[test]
fn an_unreachable_issuer_does_not_stop_the_catalog() {
    let issuer = Issuer::start();
    let url = issuer.url();
    let key = TestKey::rsa("rsa-a.pem", "k");
    let token = key.sign(&issuer.claims(AUDIENCE, "alice", &["consumer"], 300));
    drop(issuer);
    let env = Env::new(Backend::Embedded);
    let c = buying::start(
        &env,
        &[
            "--oidc-issuer",
            &url,
            "--oidc-audience",
            AUDIENCE,
            "--oidc-timeout",
            "1s",
        ],
    );
    // The catalog serves; OIDC tokens get 503 (retry), its own tokens work.
    assert_eq!(get(&c, "/offers", None).status, 200);
    let r = get(&c, "/reservations", Some(&token));
    assert_eq!(r.status, 503, "{}", r.text);
    let own = buying::consumer(&c, &buying::admin(&c), "dave");
    assert_eq!(status_of(&c, &own), 200);
}

#[test]
fn bad_oidc_flags_fail_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().display().to_string();
    for (flags, says) in [
        (
            vec![
                "--oidc-issuer",
                "http://issuer.example",
                "--oidc-audience",
                "a",
            ],
            "https",
        ),
        (
            vec!["--oidc-issuer", "https://issuer.example"],
            "--oidc-audience",
        ),
        (
            vec![
                "--oidc-issuer",
                "https://i.example",
                "--oidc-audience",
                "a",
                "--oidc-role-map",
                "x=root",
            ],
            "role must be",
        ),
        (
            vec![
                "--oidc-issuer",
                "https://i.example",
                "--oidc-audience",
                "a",
                "--oidc-roles-claim",
                "a..b",
            ],
            "empty path",
        ),
    ] {
        let out = e2e::Spawn::new("catalog")
            .args(["--listen", "127.0.0.1:0", "--data-dir", data.as_str()])
            .args(&flags)
            .output()
            .expect("run catalog");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}
