//! `GET /offers` as sent: an `ETag` that changes with the list, 304 on a
//! matching `If-None-Match`, and the body compressed with gzip or br when
//! the client accepts it, decoding to the very JSON sent uncompressed.

use std::io::Read;

use e2e::catalog::{provider, simple_offer, Backend, Catalog, Env};
use e2e::catalog_tests;
use reqwest::blocking::Response;
use serde_json::{json, Value};

catalog_tests!(offer_lists_carry_an_etag_and_compress);

fn get(c: &Catalog, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = reqwest::blocking::Client::new().get(c.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().expect("GET")
}

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn offer(i: usize) -> Value {
    simple_offer(
        &format!("offer {i}"),
        "compute",
        "1",
        json!({"cpu": "2", "memory": "4Gi"}),
    )
}

fn offer_lists_carry_an_etag_and_compress(backend: Backend) {
    let env = Env::new(backend);
    let c = env.start();
    let token = c.login(&provider(1));
    for i in 0..8 {
        c.put_offer(&format!("o{i}"), &offer(i), &token);
    }

    let plain = get(&c, "/offers", &[]);
    assert_eq!(plain.status(), 200);
    assert_eq!(header(&plain, "content-encoding"), None);
    let etag = header(&plain, "etag").expect("an ETag");
    let json: Value = serde_json::from_slice(&plain.bytes().unwrap()).unwrap();
    assert_eq!(json.as_array().map(Vec::len), Some(8));

    // Unchanged: 304 without a body, for the tag alone or in a list.
    let same = get(&c, "/offers", &[("if-none-match", &etag)]);
    assert_eq!(same.status(), 304);
    assert_eq!(header(&same, "etag").as_deref(), Some(etag.as_str()));
    assert!(same.bytes().unwrap().is_empty());
    let listed = format!("\"nope\", {etag}");
    assert_eq!(
        get(&c, "/offers", &[("if-none-match", &listed)]).status(),
        304
    );
    // Another query is another list, with another tag.
    let filtered = get(&c, "/offers?type=gpu", &[("if-none-match", &etag)]);
    assert_eq!(filtered.status(), 200);
    assert_ne!(header(&filtered, "etag").as_deref(), Some(etag.as_str()));

    // Compressed as accepted, decoding to the same JSON.
    let gz = get(&c, "/offers", &[("accept-encoding", "gzip")]);
    assert_eq!(gz.status(), 200);
    assert_eq!(header(&gz, "content-encoding").as_deref(), Some("gzip"));
    assert_eq!(header(&gz, "etag").as_deref(), Some(etag.as_str()));
    let mut body = Vec::new();
    flate2::read::GzDecoder::new(&gz.bytes().unwrap()[..])
        .read_to_end(&mut body)
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json);

    let br = get(&c, "/offers", &[("accept-encoding", "gzip, deflate, br")]);
    assert_eq!(br.status(), 200);
    assert_eq!(header(&br, "content-encoding").as_deref(), Some("br"));
    let mut body = Vec::new();
    brotli::Decompressor::new(&br.bytes().unwrap()[..], 4096)
        .read_to_end(&mut body)
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json);
    let refused = get(&c, "/offers", &[("accept-encoding", "br;q=0, gzip;q=0")]);
    assert_eq!(refused.status(), 200);
    assert_eq!(header(&refused, "content-encoding"), None);
    assert_eq!(refused.json::<Value>().unwrap(), json);

    // A write changes the list, and so its tag: the old one no longer
    // matches, at once (the writing process reads its own writes).
    c.put_offer("o0", &offer(99), &token);
    let changed = get(&c, "/offers", &[("if-none-match", &etag)]);
    assert_eq!(changed.status(), 200);
    let new_tag = header(&changed, "etag").expect("an ETag");
    assert_ne!(new_tag, etag);
    let json: Value = serde_json::from_slice(&changed.bytes().unwrap()).unwrap();
    assert_eq!(json[0]["name"], "offer 99");
    assert_eq!(c.delete("/offer/o1", Some(&token)).status, 204);
    let after_delete = get(&c, "/offers", &[("if-none-match", &new_tag)]);
    assert_eq!(after_delete.status(), 200);
    assert_ne!(header(&after_delete, "etag"), Some(new_tag));
}
