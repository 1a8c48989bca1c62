//! Support for the buying tests (reservations, purchases, OSB, OIDC): start
//! a catalog with an administrator secret, get admin and consumer tokens,
//! publish a provider's offer, and send any method with any headers.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::catalog::{provider, Catalog, Env, Resp};

/// The administrator secret the buying tests start catalogs with.
pub const ADMIN_SECRET: &str = "admin-secret-for-the-e2e-tests";

/// The flags every buying test passes (plus its own).
pub fn buying_flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--admin-secret",
        ADMIN_SECRET,
        "--reservation-sweep-interval",
        "200ms",
    ];
    flags.extend_from_slice(extra);
    flags
}

/// Start a catalog on `env` with [`buying_flags`].
pub fn start(env: &Env, extra: &[&str]) -> Catalog {
    env.start_with(&buying_flags(extra))
}

/// An HTTP client for requests the catalog helper does not cover.
pub fn client() -> reqwest::blocking::Client {
    crate::http::blocking_client(Duration::from_secs(30))
}

/// `method path` with an optional JSON body and bearer token.
pub fn call(
    c: &Catalog,
    method: Method,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> Resp {
    let mut req = client().request(method, c.url(path));
    if let Some(b) = body {
        req = req.json(b);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    c.send(req).expect("HTTP request")
}

pub fn get(c: &Catalog, path: &str, token: Option<&str>) -> Resp {
    call(c, Method::GET, path, None, token)
}

pub fn post(c: &Catalog, path: &str, body: &Value, token: Option<&str>) -> Resp {
    call(c, Method::POST, path, Some(body), token)
}

pub fn put(c: &Catalog, path: &str, body: &Value, token: Option<&str>) -> Resp {
    call(c, Method::PUT, path, Some(body), token)
}

pub fn delete(c: &Catalog, path: &str, token: Option<&str>) -> Resp {
    call(c, Method::DELETE, path, None, token)
}

/// An admin token, from the administrator secret.
#[track_caller]
pub fn admin(c: &Catalog) -> String {
    let r = post(
        c,
        "/authenticate/admin",
        &json!({ "secret": ADMIN_SECRET }),
        None,
    );
    assert_eq!(r.status, 200, "admin login: {}", r.text);
    r.json["token"].as_str().expect("token").to_string()
}

/// A consumer token for `subject`, issued by an admin.
#[track_caller]
pub fn consumer(c: &Catalog, admin: &str, subject: &str) -> String {
    let r = post(
        c,
        "/consumer-tokens",
        &json!({ "subject": subject }),
        Some(admin),
    );
    assert_eq!(r.status, 200, "consumer token: {}", r.text);
    r.json["token"].as_str().expect("token").to_string()
}

/// Provider `n` logs in and publishes offer `offer_id` with plans `small`
/// (cost 1.5) and `large` (cost 4); returns the provider's token.
#[track_caller]
pub fn publish(c: &Catalog, n: u32, offer_id: &str) -> String {
    let token = c.login(&provider(n));
    c.put_offer(offer_id, &offer(), &token);
    token
}

/// The offer [`publish`] writes.
pub fn offer() -> Value {
    json!({ "name": "Compute for rent", "type": "compute", "description": "Spare cluster capacity.",
        "plans": {
            "small": { "name": "small", "cost": "1.5", "resources": { "cpu": "2", "memory": "4Gi" } },
            "large": { "name": "large", "cost": "4", "resources": { "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1" } } } })
}

/// Cap plan `plan` of `offer_id` at `cap` units, as its provider.
#[track_caller]
pub fn cap(
    c: &Catalog,
    provider_token: &str,
    offer_id: &str,
    plan: &str,
    cap: Option<u32>,
) -> Value {
    let r = put(
        c,
        &format!("/offer/{offer_id}/plans/{plan}/capacity"),
        &json!({ "maxPurchases": cap }),
        Some(provider_token),
    );
    assert_eq!(r.status, 200, "set cap: {}", r.text);
    r.json
}

/// Reserve `plan` of `offer_id`; the raw answer.
pub fn reserve(
    c: &Catalog,
    token: &str,
    offer_id: &str,
    plan: &str,
    ttl_seconds: Option<u64>,
) -> Resp {
    let mut body = json!({ "offerID": offer_id, "planID": plan });
    if let Some(t) = ttl_seconds {
        body["ttlSeconds"] = json!(t);
    }
    post(c, "/reservations", &body, Some(token))
}

/// The peering secret of test provider `n` (see [`provider`]).
pub fn peering_token(n: u32) -> String {
    provider(n)["token"].as_str().expect("token").to_string()
}
