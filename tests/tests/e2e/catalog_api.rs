//! The catalog's provider REST API against the real binary, on both stores:
//! authentication, the offer lifecycle, every list filter, the error cases
//! (each leaving the data unchanged), and the operability endpoints.

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Env};
use e2e::catalog_tests;
use serde_json::{json, Value};

catalog_tests!(
    authenticate,
    rotate_credentials,
    offer_lifecycle,
    list_filters,
    list_pages,
    errors_change_nothing,
    operability_endpoints
);

fn authenticate(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();

    let r = c.post("/authenticate", &provider(1), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let token = r.json["token"].as_str().expect("token");
    assert_eq!(token.split('.').count(), 3, "a JWT");
    assert!(r.json["expiresAt"].is_string(), "{}", r.text);
    assert!(
        !r.text.contains("secret-token-of-provider-1"),
        "the secret must not come back"
    );

    // Same credentials again: fine, another token.
    assert_eq!(c.post("/authenticate", &provider(1), None).status, 200);

    // Claimed cluster ID with a different secret, name or auth URL: 401.
    for (field, value) in [
        ("token", "guess"),
        ("clusterName", "impostor"),
        ("authURL", "https://evil.example"),
    ] {
        let mut creds = provider(1);
        creds[field] = json!(value);
        c.post("/authenticate", &creds, None).expect_error(401);
    }
    // ... and the real provider still gets in.
    let token = c.login(&provider(1));
    assert_eq!(
        c.put_offer("o1", &thesis_offer(), &token)["clusterID"],
        "cluster-1"
    );

    // Bad bodies name the field.
    let mut creds = provider(2);
    creds.as_object_mut().unwrap().remove("token");
    let r = c.post("/authenticate", &creds, None);
    assert!(r.expect_error(400).starts_with("token:"), "{}", r.text);
    assert_eq!(r.json["field"], "token");
    let mut creds = provider(2);
    creds["role"] = json!("admin");
    assert!(c
        .post("/authenticate", &creds, None)
        .expect_error(400)
        .contains("role"));
    // The refused attempts registered nothing: cluster-2 can still claim its ID.
    c.login(&provider(2));
}

fn rotate_credentials(backend: Backend) {
    let env = Env::new(backend);
    let mut c = env.start();
    let old_token = c.login(&provider(1));
    c.put_offer("o1", &thesis_offer(), &old_token);
    let rotation = |current: &Value, new_token: &str| {
        let mut body = current.clone();
        body["newToken"] = json!(new_token);
        body
    };

    // Wrong current credentials, a missing or unchanged new token, an
    // unknown field: refused, nothing changed.
    let mut wrong = provider(1);
    wrong["token"] = json!("guess");
    c.post(
        "/authenticate/rotate",
        &rotation(&wrong, "new-secret"),
        None,
    )
    .expect_error(401);
    c.post("/authenticate/rotate", &rotation(&provider(9), "x"), None)
        .expect_error(401);
    let r = c.post("/authenticate/rotate", &provider(1), None);
    assert_eq!(r.expect_error(400), "newToken: is required", "{}", r.text);
    let same = rotation(&provider(1), "secret-token-of-provider-1");
    assert_eq!(
        c.post("/authenticate/rotate", &same, None).json["field"],
        "newToken"
    );
    let mut bad_url = rotation(&provider(1), "new-secret");
    bad_url["newAuthURL"] = json!("ftp://x");
    assert_eq!(
        c.post("/authenticate/rotate", &bad_url, None).json["field"],
        "newAuthURL"
    );
    assert_eq!(c.post("/authenticate", &provider(1), None).status, 200);
    c.put_offer("o1", &thesis_offer(), &old_token);

    // Rotate the secret and move the auth URL.
    let mut body = rotation(&provider(1), "new-secret");
    body["newAuthURL"] = json!("https://moved.example:6443");
    let r = c.post("/authenticate/rotate", &body, None);
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        !r.text.contains("new-secret"),
        "the secret must not come back"
    );
    let new_token = r.json["token"].as_str().expect("token").to_string();

    // Tokens from before are retired at once; the new one works.
    let refused = c.post("/offer/o1", &thesis_offer(), Some(&old_token));
    assert!(
        refused.expect_error(401).contains("rotated"),
        "{}",
        refused.text
    );
    c.delete("/offer/o1", Some(&old_token)).expect_error(401);
    assert_eq!(c.put_offer("o1", &thesis_offer(), &new_token)["version"], 3);

    // Only the new credentials authenticate, also after a restart.
    c.child.kill();
    let c = env.start();
    c.post("/authenticate", &provider(1), None)
        .expect_error(401);
    let mut new_creds = provider(1);
    new_creds["token"] = json!("new-secret");
    new_creds["authURL"] = json!("https://moved.example:6443");
    let fresh = c.login(&new_creds);
    assert_eq!(c.delete("/offer/o1", Some(&fresh)).status, 204);
    assert_eq!(
        c.post("/offer/o2", &thesis_offer(), Some(&new_token))
            .status,
        201
    );
    // The old credentials cannot rotate back.
    c.post(
        "/authenticate/rotate",
        &rotation(&provider(1), "again"),
        None,
    )
    .expect_error(401);
}

fn offer_lifecycle(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let token = c.login(&provider(1));

    // Create: 201, Location, server fields, both plan spellings canonical.
    let r = c.post("/offer/storage-1", &thesis_offer(), Some(&token));
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.header("location"), Some("/offer/storage-1"));
    let created = r.json;
    assert_eq!(created["id"], "storage-1");
    assert_eq!(created["clusterID"], "cluster-1");
    assert_eq!(created["clusterName"], "provider 1");
    assert_eq!(created["version"], 1);
    assert_eq!(created["createdAt"], created["updatedAt"]);
    assert_eq!(created["plans"]["basic"]["name"], "plan-basic");
    assert_eq!(created["plans"]["medium"]["name"], "plan-medium");
    assert_eq!(created["plans"]["medium"]["planID"], "medium");
    assert!(
        created["plans"]["medium"].get("planName").is_none(),
        "output uses `name` only"
    );
    assert_eq!(created["plans"]["basic"]["cost"], "1.0");
    assert_eq!(
        created["plans"]["basic"]["resources"]["cpu"], "1",
        "canonical Kubernetes form of 1000m"
    );
    assert_eq!(created["plans"]["basic"]["resources"]["memory"], "2G");
    assert!(
        !serde_json::to_string(&created)
            .unwrap()
            .contains("secret-token"),
        "no secret in offers"
    );

    // Read back: identical.
    let got = c.get("/offer/storage-1");
    assert_eq!(got.status, 200);
    assert_eq!(got.json, created);

    // Replace: 200, version 2, createdAt kept, content replaced.
    let mut changed = thesis_offer();
    changed["name"] = json!("Storage, now cheaper");
    changed["plans"]["basic"]["cost"] = json!(0.75);
    changed["plans"]["basic"]["resources"]["nvidia.com/gpu"] = json!("1");
    let r = c.post("/offer/storage-1", &changed, Some(&token));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["version"], 2);
    assert_eq!(r.json["createdAt"], created["createdAt"]);
    assert_eq!(r.json["name"], "Storage, now cheaper");
    assert_eq!(r.json["plans"]["basic"]["cost"], "0.75");
    assert_eq!(r.json["plans"]["basic"]["resources"]["nvidia.com/gpu"], "1");
    assert_eq!(c.get("/offer/storage-1").json, r.json);

    // A GET body posted back is accepted; with a stale version it is refused.
    let current = c.get("/offer/storage-1").json;
    let r = c.post("/offer/storage-1", &current, Some(&token));
    assert_eq!(
        (r.status, r.json["version"].clone()),
        (200, json!(3)),
        "{}",
        r.text
    );
    c.post("/offer/storage-1", &current, Some(&token))
        .expect_error(409);
    assert_eq!(c.get("/offer/storage-1").json["version"], 3);

    // A second offer, listed with the first in id order.
    c.put_offer(
        "compute-1",
        &simple_offer("Compute", "compute", "0.1", json!({"cpu": "4"})),
        &token,
    );
    assert_eq!(c.list_ids(""), ["compute-1", "storage-1"]);

    // Delete: 204, then 404 for get and delete.
    let r = c.delete("/offer/storage-1", Some(&token));
    assert_eq!(r.status, 204, "{}", r.text);
    assert!(r.text.is_empty());
    c.get("/offer/storage-1").expect_error(404);
    c.delete("/offer/storage-1", Some(&token)).expect_error(404);
    assert_eq!(c.list_ids(""), ["compute-1"]);

    // Re-created, the id's version keeps counting (readers can order copies).
    let r = c.post("/offer/storage-1", &thesis_offer(), Some(&token));
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.json["version"].as_u64().unwrap() > 3, "{}", r.text);
}

fn list_pages(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));
    for (id, t, owner) in [
        ("a", "compute", &p1),
        ("b", "storage", &p2),
        ("c", "compute", &p2),
        ("d", "compute", &p1),
        ("e", "storage", &p1),
        ("f", "compute", &p2),
    ] {
        let offer = simple_offer(id, t, "1", json!({ "cpu": "1" }));
        c.put_offer(id, &offer, owner);
    }
    let ids = |r: &e2e::catalog::Resp| -> Vec<String> {
        r.json
            .as_array()
            .unwrap_or_else(|| panic!("an array: {}", r.text))
            .iter()
            .map(|o| o["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // Follow `Link: <...>; rel="next"` from the first page to the end.
    let walk = |first: &str| -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut next = Some(first.to_string());
        while let Some(path) = next.take() {
            let r = c.get(&path);
            assert_eq!(r.status, 200, "{path}: {}", r.text);
            pages.push(ids(&r));
            next = r.header("link").map(|link| {
                assert!(link.ends_with(">; rel=\"next\""), "{link}");
                link.trim_start_matches('<')
                    .split('>')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            });
            assert!(pages.len() < 10, "paging does not end: {pages:?}");
        }
        pages
    };
    assert_eq!(
        walk("/offers?limit=4"),
        vec![vec!["a", "b", "c", "d"], vec!["e", "f"]]
    );
    // Filters carry over to every page; a full last page ends with an empty one.
    assert_eq!(
        walk("/offers?type=compute&limit=2"),
        vec![vec!["a", "c"], vec!["d", "f"], Vec::<&str>::new()]
    );
    assert_eq!(ids(&c.get("/offers?after=c")), ["d", "e", "f"]);
    // Without `limit`, everything, and no link (the thesis's plain list).
    let all = c.get("/offers");
    assert_eq!(ids(&all).len(), 6);
    assert_eq!(all.header("link"), None);
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=two", "limit"),
        ("limit=1&limit=2", "limit"),
        ("after=a%20b", "after"),
    ] {
        let r = c.get(&format!("/offers?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.text);
        assert_eq!(r.json["field"], field, "{query}: {}", r.text);
    }
}

fn list_filters(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));

    c.put_offer("storage", &thesis_offer(), &p1); // plans: 1.0/2G/1cpu, 2.0/4G/2cpu
    c.put_offer("gpu", &json!({ "name": "GPU", "type": "gpu", "plans": {
        "t4":   { "name": "t4",   "cost": "0.35", "resources": { "cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1" } },
        "a100": { "name": "a100", "cost": "2.5",  "resources": { "cpu": "12", "memory": "85Gi", "nvidia.com/gpu": "8" } } } }), &p2);
    c.put_offer(
        "small",
        &simple_offer(
            "Small",
            "compute",
            "0.05",
            json!({ "cpu": "500m", "memory": "4Gi" }),
        ),
        &p2,
    );
    c.put_offer(
        "exact",
        &simple_offer(
            "Exact",
            "compute",
            "1.10",
            json!({ "cpu": "2", "memory": "4G" }),
        ),
        &p1,
    );

    assert_eq!(c.list_ids(""), ["exact", "gpu", "small", "storage"]);
    // type
    assert_eq!(c.list_ids("?type=compute"), ["exact", "small"]);
    assert_eq!(c.list_ids("?type=nothing"), Vec::<String>::new());
    // provider, by cluster ID or cluster name
    assert_eq!(c.list_ids("?provider=cluster-1"), ["exact", "storage"]);
    assert_eq!(c.list_ids("?provider=provider%202"), ["gpu", "small"]);
    // maxCost: some plan at most, compared exactly (1.10 == 1.1)
    assert_eq!(c.list_ids("?maxCost=0.05"), ["small"]);
    assert_eq!(c.list_ids("?maxCost=0.049999999"), Vec::<String>::new());
    assert_eq!(
        c.list_ids("?maxCost=1.1"),
        ["exact", "gpu", "small", "storage"]
    );
    assert_eq!(c.list_ids("?maxCost=1.0999"), ["gpu", "small", "storage"]);
    assert_eq!(c.list_ids("?maxCost=0.3"), ["small"]);
    // min.<resource> as Kubernetes quantities: 4Gi > 4G
    assert_eq!(
        c.list_ids("?min.memory=4G"),
        ["exact", "gpu", "small", "storage"]
    );
    assert_eq!(c.list_ids("?min.memory=4Gi"), ["gpu", "small"]);
    assert_eq!(c.list_ids("?min.memory=4000000001"), ["gpu", "small"]);
    assert_eq!(c.list_ids("?min.cpu=2000m"), ["exact", "gpu", "storage"]);
    assert_eq!(
        c.list_ids("?min.cpu=0.5"),
        ["exact", "gpu", "small", "storage"]
    );
    assert_eq!(c.list_ids("?min.cpu=501m"), ["exact", "gpu", "storage"]);
    assert_eq!(c.list_ids("?min.storage=300G"), ["storage"]);
    assert_eq!(c.list_ids("?min.nvidia.com%2Fgpu=2"), ["gpu"]);
    assert_eq!(c.list_ids("?min.nvidia.com/gpu=9"), Vec::<String>::new());
    // plan-level conditions hold for one and the same plan
    assert_eq!(c.list_ids("?maxCost=1&min.memory=4G"), ["gpu", "small"]);
    assert_eq!(c.list_ids("?maxCost=2&min.storage=300G"), ["storage"]);
    assert_eq!(
        c.list_ids("?maxCost=1.5&min.storage=300G"),
        Vec::<String>::new()
    );
    assert_eq!(c.list_ids("?min.cpu=12&min.nvidia.com/gpu=8"), ["gpu"]);
    assert_eq!(c.list_ids("?min.cpu=12&maxCost=1"), Vec::<String>::new());
    // all combined
    assert_eq!(
        c.list_ids("?type=compute&provider=cluster-2&maxCost=0.05&min.memory=4Gi"),
        ["small"]
    );
    assert_eq!(
        c.list_ids("?type=compute&provider=cluster-1&maxCost=0.05"),
        Vec::<String>::new()
    );

    // Bad filters: 400 naming the parameter.
    for (query, field) in [
        ("?maxCost=cheap", "maxCost"),
        ("?maxCost=-1", "maxCost"),
        ("?min.memory=4 Gi", "min.memory"),
        ("?colour=red", "colour"),
        ("?type=a&type=b", "type"),
    ] {
        let r = c.get(&format!("/offers{query}"));
        r.expect_error(400);
        assert_eq!(r.json["field"], field, "{query}: {}", r.text);
        assert!(
            r.json["message"].as_str().unwrap().starts_with(field),
            "{}",
            r.text
        );
    }
}

fn errors_change_nothing(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start_with(&["--max-body-bytes", "4096"]);
    let p1 = c.login(&provider(1));
    let p2 = c.login(&provider(2));
    c.put_offer("mine", &thesis_offer(), &p1);
    c.put_offer(
        "theirs",
        &simple_offer("Theirs", "compute", "1", json!({"cpu": "1"})),
        &p2,
    );
    let before = c.all_offers();
    let unchanged = |what: &str| assert_eq!(c.all_offers(), before, "data changed after {what}");

    // 401: no token, malformed header, forged or foreign-key tokens.
    let r = c.post("/offer/mine", &json!({}), None);
    r.expect_error(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    c.post("/offer/new", &thesis_offer(), Some("not-a-jwt"))
        .expect_error(401);
    let mut forged = p1.clone();
    forged.pop();
    forged.push(if p1.ends_with('A') { 'B' } else { 'A' });
    c.post("/offer/mine", &thesis_offer(), Some(&forged))
        .expect_error(401);
    c.delete("/offer/mine", Some(&forged)).expect_error(401);
    c.delete("/offer/mine", None).expect_error(401);
    let other = Env::new(Backend::Embedded);
    let foreign = other.start().login(&provider(1)); // same provider, another catalog's key
    c.post("/offer/mine", &thesis_offer(), Some(&foreign))
        .expect_error(401);
    unchanged("401s");

    // 403: another provider's offer.
    let mut hijack = thesis_offer();
    hijack["name"] = json!("hijacked");
    assert!(c
        .post("/offer/theirs", &hijack, Some(&p1))
        .expect_error(403)
        .contains("another provider"));
    c.delete("/offer/theirs", Some(&p1)).expect_error(403);
    unchanged("403s");

    // 404
    c.get("/offer/nope").expect_error(404);
    c.delete("/offer/nope", Some(&p1)).expect_error(404);
    unchanged("404s");

    // 400: each names the field; nothing stored.
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            set(
                thesis_offer(),
                &["plans", "basic", "resources", "memory"],
                json!("2 G"),
            ),
            "plans.basic.resources.memory",
            "quantities must match",
        ),
        (
            set(thesis_offer(), &["plans", "basic", "cost"], json!("-1")),
            "plans.basic.cost",
            "negative",
        ),
        (
            set(thesis_offer(), &["plans", "medium", "cost"], json!("two")),
            "plans.medium.cost",
            "decimal",
        ),
        (
            set(thesis_offer(), &["colour"], json!("red")),
            "colour",
            "unknown field",
        ),
        (
            set(thesis_offer(), &["plans", "basic", "price"], json!(1)),
            "plans.basic.price",
            "unknown field",
        ),
        (
            set(thesis_offer(), &["plans"], json!({})),
            "plans",
            "at least one plan",
        ),
        (set(thesis_offer(), &["name"], json!("")), "name", "empty"),
        (
            set(thesis_offer(), &["id"], json!("other")),
            "id",
            "does not match",
        ),
        (
            set(thesis_offer(), &["clusterID"], json!("cluster-2")),
            "clusterID",
            "does not match",
        ),
        (
            remove(thesis_offer(), &["plans", "basic"], "name"),
            "plans.basic.name",
            "required",
        ),
        (
            remove(thesis_offer(), &["plans", "basic"], "cost"),
            "plans.basic.cost",
            "required",
        ),
        (remove(thesis_offer(), &[], "type"), "type", "required"),
    ];
    for (body, field, words) in &cases {
        for id in ["mine", "brand-new"] {
            let r = c.post(&format!("/offer/{id}"), body, Some(&p1));
            let message = r.expect_error(400);
            assert_eq!(r.json["field"], *field, "{}", r.text);
            assert!(
                message.starts_with(field) && message.contains(words),
                "{field}: {message}"
            );
        }
    }
    c.post_raw("/offer/mine", b"{\"name\": ".to_vec(), Some(&p1))
        .expect_error(400);
    c.post("/offer/bad%20id", &thesis_offer(), Some(&p1))
        .expect_error(400);
    unchanged("400s");

    // 413: a body over the configured limit, on both write endpoints.
    let mut huge = thesis_offer();
    huge["description"] = json!("x".repeat(8 * 1024));
    let r = c.post("/offer/mine", &huge, Some(&p1));
    assert!(r.expect_error(413).contains("4096"), "{}", r.text);
    c.post("/offer/brand-new", &huge, Some(&p1))
        .expect_error(413);
    let mut big_creds = provider(3);
    big_creds["token"] = json!("t".repeat(8 * 1024));
    c.post("/authenticate", &big_creds, None).expect_error(413);
    unchanged("413s");
    // cluster-3 was not registered by the refused call.
    c.login(&provider(3));

    // Wrong method: JSON 405.
    let r = c
        .send(
            e2e::http::blocking_client(std::time::Duration::from_secs(30))
                .put(c.url("/offer/mine")),
        )
        .unwrap();
    r.expect_error(405);
    unchanged("405");
}

fn operability_endpoints(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    assert_eq!(c.get("/healthz").status, 200);
    let ready = c.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert_eq!(
        ready.json["store"],
        if backend == Backend::Mongo {
            "mongodb"
        } else {
            "embedded"
        }
    );

    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);
    c.get("/offer/missing").expect_error(404);

    // The offer and provider counts follow the store's changes (issue 46:
    // a scrape no longer counts them in the store), so they show a moment
    // after the write.
    let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
    let m = loop {
        let m = c.get("/metrics");
        assert_eq!(m.status, 200);
        let counted =
            m.text.contains("\ncatalog_offers 1\n") && m.text.contains("\ncatalog_providers 1\n");
        if counted || std::time::Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        m.text.contains(
            r#"catalog_http_requests_total{route="/offer/{id}",method="POST",status="201"} 1"#
        ),
        "{}",
        m.text
    );
    assert!(
        m.text
            .contains(r#"route="/offer/{id}",method="GET",status="404"} 1"#),
        "{}",
        m.text
    );
    assert!(
        m.text
            .contains("catalog_http_request_duration_seconds_bucket"),
        "{}",
        m.text
    );
    assert!(m.text.contains("catalog_offers 1"), "{}", m.text);
    assert!(m.text.contains("catalog_providers 1"), "{}", m.text);

    let api = c.get("/openapi.json");
    assert_eq!(api.status, 200);
    for path in [
        "/authenticate",
        "/offers",
        "/offer/{id}",
        "/healthz",
        "/readyz",
        "/metrics",
        "/subscribe",
    ] {
        assert!(
            api.json["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    assert!(api.json["paths"]["/offer/{id}"]["post"]["responses"]["403"].is_object());
    assert!(api.json["paths"]["/subscribe"]["get"]["responses"]["101"].is_object());
    assert!(api.json["components"]["schemas"]["Offer"].is_object());

    // The web UI is served at / (API routes win; unknown paths are JSON 404s).
    let index = c.get("/");
    assert_eq!(index.status, 200);
    assert!(index
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    assert!(
        index.text.to_lowercase().contains("<html"),
        "{}",
        index.text
    );
    c.get("/no/such/page.html").expect_error(404);
}

fn set(mut v: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut v;
    for (i, key) in path.iter().enumerate() {
        if i + 1 == path.len() {
            at[*key] = value;
            break;
        }
        at = &mut at[*key];
    }
    v
}

fn remove(mut v: Value, path: &[&str], key: &str) -> Value {
    let mut at = &mut v;
    for k in path {
        at = &mut at[*k];
    }
    at.as_object_mut().expect("object").remove(key);
    v
}

/// `catalog --help` documents every flag with its environment variable.
#[test]
fn help_documents_every_flag_with_its_environment_variable() {
    let out = e2e::Spawn::new("catalog")
        .arg("--help")
        .output()
        .expect("catalog --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, env) in [
        ("--listen", "CATALOG_LISTEN"),
        ("--data-dir", "CATALOG_DATA_DIR"),
        ("--mongodb-uri", "CATALOG_MONGODB_URI"),
        ("--mongodb-database", "CATALOG_MONGODB_DATABASE"),
        ("--mongodb-timeout", "CATALOG_MONGODB_TIMEOUT"),
        ("--jwt-key-file", "CATALOG_JWT_KEY_FILE"),
        ("--jwt-key", "CATALOG_JWT_KEY"),
        ("--jwt-issuer", "CATALOG_JWT_ISSUER"),
        ("--jwt-audience", "CATALOG_JWT_AUDIENCE"),
        ("--token-ttl", "CATALOG_TOKEN_TTL"),
        ("--max-body-bytes", "CATALOG_MAX_BODY_BYTES"),
        ("--auth-rate-limit", "CATALOG_AUTH_RATE_LIMIT"),
        ("--max-connections", "CATALOG_MAX_CONNECTIONS"),
        ("--workers", "CATALOG_WORKERS"),
        ("--shutdown-timeout", "CATALOG_SHUTDOWN_TIMEOUT"),
        ("--demo", "CATALOG_DEMO"),
        ("--log-level", "CATALOG_LOG_LEVEL"),
        ("--log-format", "CATALOG_LOG_FORMAT"),
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
        assert!(
            help.contains(&format!("[env: {env}")),
            "--help lacks {env}:\n{help}"
        );
    }
    assert!(
        help.contains("127.0.0.1:8080") && help.contains("./catalog-data"),
        "{help}"
    );

    let bad = e2e::Spawn::new("catalog")
        .args(["--listen", "nowhere"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--listen"));
}

/// `--demo` seeds a provider with offers once and prints its credentials
/// once. Issue 41 (a low item): it binds its port first and seeds after —
/// the address comes before the demo's lines on stdout, and `/readyz` says
/// 200 only once the offers are there (503 before); it used to hash the
/// demo provider's secret and write its offers before listening.
#[test]
fn demo_seeds_a_provider_on_first_start_only() {
    let env = Env::new(Backend::Embedded);
    let out = env.data_dir.path().join("stdout.txt");
    let mut c = env
        .try_start_logged(&["--demo"], Some(&out))
        .expect("start with --demo");
    c.wait_for_status("/readyz", 200, e2e::EVENTUALLY)
        .expect("ready once the demo is seeded");
    let printed = std::fs::read_to_string(&out).unwrap();
    let at = |needle: &str| {
        printed
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} on stdout:\n{printed}"))
    };
    assert!(
        at("catalog listening on") < at("demo provider created"),
        "the port is bound before the demo is seeded:\n{printed}"
    );
    let offers = c.all_offers();
    assert!(offers.as_array().unwrap().len() >= 3, "{offers}");
    assert!(
        offers
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["clusterID"] == "demo-provider"),
        "{offers}"
    );
    // Beside the capacity, one service whose page a newcomer can walk
    // through: a plan of each hosting it offers, each with the schema its
    // form is made from (issue 45).
    let services: Vec<&Value> = offers
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "service")
        .collect();
    assert_eq!(services.len(), 1, "{offers}");
    let plans: Vec<&Value> = match &services[0]["plans"] {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        other => panic!("plans: {other}"),
    };
    let mut hosting: Vec<&str> = plans.iter().filter_map(|p| p["hosting"].as_str()).collect();
    hosting.sort();
    assert_eq!(hosting, ["Local", "Remote"], "{}", services[0]);
    assert!(
        plans.iter().all(
            |p| p["schemas"]["service_instance"]["create"]["parameters"]["required"].is_array()
        ),
        "{}",
        services[0]
    );
    assert!(c
        .child
        .terminate(std::time::Duration::from_secs(15))
        .unwrap()
        .success());
    let printed = std::fs::read_to_string(&out).unwrap();
    assert!(
        printed.contains("catalog listening on http://127.0.0.1:"),
        "{printed}"
    );
    let line = printed
        .lines()
        .find(|l| l.contains("\"clusterID\""))
        .unwrap_or_else(|| panic!("{printed}"));
    let creds: Value = serde_json::from_str(line.trim()).unwrap();

    std::fs::remove_file(&out).unwrap();
    let c = env
        .try_start_logged(&["--demo"], Some(&out))
        .expect("restart with --demo");
    c.wait_for_status("/readyz", 200, e2e::EVENTUALLY)
        .expect("ready once the demo is checked");
    assert_eq!(
        c.all_offers(),
        offers,
        "a restart with --demo changes nothing"
    );
    let token = c.login(&creds);
    c.put_offer("demo-general", &thesis_offer(), &token);
    let printed = std::fs::read_to_string(&out).unwrap();
    assert!(
        !printed.contains("\"token\""),
        "credentials are printed only when created: {printed}"
    );
}
