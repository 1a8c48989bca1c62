//! The server's answers held against real API server answers recorded in
//! Kubernetes' own repositories at tag v1.31.0 (the published staging
//! repositories' `v0.31.0`), stored under `golden/` and listed with their
//! sources in `golden/SOURCES.md`. Nothing under `golden/` is produced by
//! this server.
//!
//! Each test makes the operation over HTTP and compares the answer with
//! its golden file: the same keys at every level and the same values, except
//! the values that differ between any two answers (`uid`,
//! `resourceVersion`, timestamps: only their JSON type and format must
//! match). Where the operation cannot be the recorded one (another
//! resource, another verb), the golden text is rewritten first by
//! substitutions written out in the test, each of which must match.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
use std::time::Duration;

use kube_test_server::{Kind, KubeApiServer};
use reqwest::Method;
use serde_json::{json, Map, Value};

mod common;
use common::answer;

const GET: Method = Method::GET;
const POST: Method = Method::POST;
const PUT: Method = Method::PUT;
const PATCH: Method = Method::PATCH;

/// Values that differ between any two answers of a real server.
const VARYING: &[&str] = &["uid", "resourceVersion", "creationTimestamp"];

fn golden_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A golden answer with `substitutions` made in its text, each of which
/// must occur exactly once (so a golden file edited by hand is noticed).
fn golden(name: &str, substitutions: &[(&str, &str)]) -> Value {
    let mut text = golden_text(name);
    for (from, to) in substitutions {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{name}: {from:?} should occur once"
        );
        text = text.replace(from, to);
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// `method path` with a JSON `body`, as `token`'s user if any.
async fn call(
    kube: &KubeApiServer,
    method: Method,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut request = client().request(method, format!("{}{path}", kube.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    answer(request).await
}

async fn get(kube: &KubeApiServer, path: &str) -> (u16, Value) {
    call(kube, GET, path, None, None).await
}

/// `2024-01-01T01:01:01Z` (`metav1.Time`) or `…01.000001Z`
/// (`metav1.MicroTime`): the format a timestamp is written in, if any.
fn time_format(value: &str) -> Option<&'static str> {
    let b = value.as_bytes();
    let date_time = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && value.ends_with('Z');
    match (date_time, b.len()) {
        (true, 20) => Some("metav1.Time"),
        (true, 27) if b[19] == b'.' => Some("metav1.MicroTime"),
        _ => None,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether two values of a field that varies between answers are written
/// alike: the same JSON type and, for timestamps, the same format.
fn written_alike(golden: &Value, actual: &Value) -> bool {
    type_name(golden) == type_name(actual)
        && golden.as_str().map(time_format) == actual.as_str().map(time_format)
}

/// Every way `actual` differs from `golden`: keys missing or extra at any
/// level, arrays of another length, other values — except under the keys
/// of [`VARYING`], which need only be [`written_alike`].
fn differences(golden: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_exact(golden, actual, "", &mut out);
    out
}

fn walk_exact(golden: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (golden, actual) {
        (Value::Object(g), Value::Object(a)) => {
            for key in g.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{key}: missing"));
            }
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match g.get(key) {
                    None => out.push(format!("{here}: not in the real answer ({value})")),
                    Some(want) if VARYING.contains(&key.as_str()) => {
                        if !written_alike(want, value) {
                            out.push(format!("{here}: {value} is not written as {want}"));
                        }
                    }
                    Some(want) => walk_exact(want, value, &here, out),
                }
            }
        }
        (Value::Array(g), Value::Array(a)) if g.len() == a.len() => {
            for (i, (want, got)) in g.iter().zip(a).enumerate() {
                walk_exact(want, got, &format!("{path}[{i}]"), out);
            }
        }
        _ if golden == actual => {}
        _ => out.push(format!(
            "{path}: {actual} where the real answer has {golden}"
        )),
    }
}

/// Every way `actual` is shaped unlike a kind's serialisation fixture (all
/// fields set): a key the kind does not have, or a value of another JSON
/// type or timestamp format. A fixture's map (`labels`, `data`…) has one
/// key `<field>Key`; an empty fixture object (`fieldsV1`) takes anything.
fn shape_differences(fixture: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_shape(fixture, actual, "", &mut out);
    out
}

fn walk_shape(fixture: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (fixture, actual) {
        (Value::Object(f), _) if f.is_empty() => {}
        (Value::Object(f), Value::Object(a)) => {
            let map_value = match f.iter().collect::<Vec<_>>().as_slice() {
                [(key, value)] if key.ends_with("Key") => Some(*value),
                _ => None,
            };
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match map_value.or_else(|| f.get(key)) {
                    None => out.push(format!("{here}: the kind has no such field ({value})")),
                    Some(want) => walk_shape(want, value, &here, out),
                }
            }
        }
        (Value::Array(f), Value::Array(a)) if !f.is_empty() => {
            for (i, got) in a.iter().enumerate() {
                walk_shape(&f[0], got, &format!("{path}[{i}]"), out);
            }
        }
        _ if written_alike(fixture, actual) => {}
        _ => out.push(format!("{path}: {actual} is not written as {fixture}")),
    }
}

/// An answer with `code` and no [`differences`] from `want`.
#[track_caller]
fn assert_answer(what: &str, want: &Value, code: u16, (got, body): (u16, Value)) {
    assert_eq!(got, code, "{what}: {body}");
    assert_same(what, differences(want, &body), &body);
}

#[track_caller]
fn assert_same(what: &str, diffs: Vec<String>, actual: &Value) {
    assert!(
        diffs.is_empty(),
        "{what} differs from the real answer:\n  {}\nthe answer: {actual}",
        diffs.join("\n  ")
    );
}

/// A GET of an object that does not exist: the answer recorded by
/// kubectl's edit tests (`GET /api/v1/namespaces/default/services/missing`).
#[tokio::test]
async fn a_missing_object_is_the_real_404() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let want = golden("get-not-found.json", &[]);
    let answer = get(&kube, "/api/v1/namespaces/default/services/missing").await;
    assert_answer("GET of a missing Service", &want, 404, answer);
}

/// A request RBAC denies, named and cluster-scoped, and unnamed in a
/// namespace of a named API group: `Forbidden`'s answers in
/// responsewriters' own tests (there for `get` of `pod`, here for the
/// resources and verbs a controller uses).
#[tokio::test]
async fn a_denied_request_is_the_real_403() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let token = kube.token_for("NAME");

    let want = golden(
        "forbidden-cluster-scope.json",
        &[
            (r#"pod \"mypod\" is"#, r#"namespaces \"mypod\" is"#),
            (r#"resource \"pod\""#, r#"resource \"namespaces\""#),
            (r#""kind":"pod""#, r#""kind":"namespaces""#),
        ],
    );
    let answer = call(&kube, GET, "/api/v1/namespaces/mypod", None, Some(&token)).await;
    assert_answer("a denied named get", &want, 403, answer);

    let want = golden(
        "forbidden-namespaced.json",
        &[
            ("pod.v2 is", "leases.coordination.k8s.io is"),
            (
                r#"cannot get resource \"pod/quota\" in API group \"v2\""#,
                r#"cannot list resource \"leases\" in API group \"coordination.k8s.io\""#,
            ),
            (
                r#""group":"v2","kind":"pod""#,
                r#""group":"coordination.k8s.io","kind":"leases""#,
            ),
        ],
    );
    let path = "/apis/coordination.k8s.io/v1/namespaces/test/leases";
    let answer = call(&kube, GET, path, None, Some(&token)).await;
    assert_answer("a denied list", &want, 403, answer);
}

/// `<Kind> "<name>" is invalid: ` and the causes' texts (`<field>:
/// <message>`), one bare or several in brackets.
fn invalid_message(status: &Value) -> String {
    let details = &status["details"];
    let causes: Vec<String> = details["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    let joined = match causes.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!(
        "{} {:?} is invalid: {joined}",
        details["kind"].as_str().unwrap(),
        details["name"].as_str().unwrap()
    )
}

/// The keys of an object at every level, arrays read through their
/// elements: what two answers of different causes still share.
fn keys(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), keys(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(keys).collect()),
        _ => Value::Null,
    }
}

/// A write refused for two fields: the 422 recorded by kubectl's edit
/// tests for a PATCH of a Service; here an update of a Secret (this server
/// validates the kinds the product writes, not Services), so the causes
/// differ but not the shape, the reasons' vocabulary or how the message is
/// made of the causes.
#[tokio::test]
async fn a_refused_update_is_the_real_422() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let want = golden("update-invalid.json", &[]);
    // The rule the test holds the server to is the golden answer's own.
    assert_eq!(want["message"].as_str().unwrap(), invalid_message(&want));

    kube.apply(
        Kind::Secret,
        json!({ "metadata": { "name": "svc1", "namespace": "default" }, "type": "Opaque" }),
    );
    let (code, body) = call(
        &kube,
        PUT,
        "/api/v1/namespaces/default/secrets/svc1",
        Some(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "svc1", "namespace": "default" },
            "type": "example.com/other",
            "data": { "a b": "eA==" },
        })),
        None,
    )
    .await;
    assert_eq!(code, want["code"], "{body}");
    assert_same(
        "a refused update's keys",
        differences(&keys(&want), &keys(&body)),
        &body,
    );
    for key in ["kind", "apiVersion", "metadata", "status", "reason", "code"] {
        assert_eq!(body[key], want[key], "{key}: {body}");
    }
    assert_eq!(body["details"]["kind"], "Secret", "{body}");
    assert_eq!(body["details"]["name"], "svc1", "{body}");
    assert_eq!(body["message"].as_str().unwrap(), invalid_message(&body));
    let reasons = ["FieldValueInvalid", "FieldValueNotSupported"];
    for cause in body["details"]["causes"].as_array().unwrap() {
        assert!(
            reasons.contains(&cause["reason"].as_str().unwrap()),
            "{cause}"
        );
    }
}

/// `selfLink`, which the recordings of 2017 carry and Kubernetes stopped
/// setting in v1.20 (KEP-1164; the field is never set from v1.24 on).
fn without_self_links(value: &mut Value) {
    match value {
        Value::Object(m) => {
            m.remove("selfLink");
            m.values_mut().for_each(without_self_links);
        }
        Value::Array(a) => a.iter_mut().for_each(without_self_links),
        _ => {}
    }
}

/// A ConfigMap read back, and a list of ConfigMaps: the answers recorded by
/// kubectl's edit tests (`GET …/configmaps/cm1`, `GET …/configmaps`).
#[tokio::test]
async fn an_object_and_a_list_are_the_real_ones() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    kube.apply(
        Kind::Namespace,
        json!({ "metadata": { "name": "edit-test" } }),
    );
    let mut want = golden("get-configmap.json", &[]);
    without_self_links(&mut want);
    let (code, _) = call(
        &kube,
        POST,
        "/api/v1/namespaces/edit-test/configmaps",
        Some(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "cm1" }, "data": want["data"],
        })),
        None,
    )
    .await;
    assert_eq!(code, 201);
    let (code, body) = get(&kube, "/api/v1/namespaces/edit-test/configmaps/cm1").await;
    assert_answer("a ConfigMap", &want, 200, (code, body.clone()));

    let mut want = golden("list-configmaps.json", &[]);
    without_self_links(&mut want);
    let mut cm = body;
    cm["data"] = want["items"][0]["data"].clone();
    let (code, _) = call(
        &kube,
        PUT,
        "/api/v1/namespaces/edit-test/configmaps/cm1",
        Some(cm),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let answer = get(&kube, "/api/v1/namespaces/edit-test/configmaps").await;
    assert_answer("a ConfigMapList", &want, 200, answer);
}

/// A Lease, a Namespace and a Secret as the server writes them back:
/// every field one of the kind's fields in Kubernetes' serialisation
/// fixtures (`k8s.io/api` testdata), with the same JSON type and timestamp
/// format.
#[tokio::test]
async fn objects_are_shaped_as_their_kinds() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let cases = [
        (
            "coordination.k8s.io.v1.Lease.json",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": "leader", "labels": { "app": "x" } },
                "spec": {
                    "holderIdentity": "a", "leaseDurationSeconds": 15,
                    "acquireTime": "2024-05-01T10:00:00.000000Z",
                    "renewTime": "2024-05-01T10:00:05.123456Z", "leaseTransitions": 0,
                },
            }),
        ),
        (
            "core.v1.Namespace.json",
            "/api/v1/namespaces",
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "team-a" } }),
        ),
        (
            "core.v1.Secret.json",
            "/api/v1/namespaces/default/secrets",
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": "kubeconfig", "annotations": { "a": "b" } },
                "data": { "kubeconfig": "eA==" },
            }),
        ),
    ];
    for (fixture, path, object) in cases {
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let (code, created) = call(&kube, POST, path, Some(object), None).await;
        assert_eq!(code, 201, "{created}");
        let (code, body) = get(&kube, &format!("{path}/{name}")).await;
        assert_eq!(code, 200, "{body}");
        let want = golden(fixture, &[]);
        assert_same(fixture, shape_differences(&want, &body), &body);
        assert_same(fixture, shape_differences(&want, &created), &created);
    }
}

/// `foos "bar"` of `TestAPIStatus`'s answers as the Secret `bar`.
const AS_SECRET: [(&str, &str); 2] = [
    (r#"foos \"bar\""#, r#"secrets \"bar\""#),
    (r#""kind":"foos""#, r#""kind":"secrets""#),
];

/// A create of a name that exists, and an update from a stale
/// `resourceVersion`: `NewAlreadyExists` and `NewConflict` as
/// `TestAPIStatus` expects them, the latter with the registry's
/// `OptimisticLockErrorMsg` for its cause.
#[tokio::test]
async fn a_taken_name_and_a_stale_update_are_the_real_409s() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let secret = |rv: Option<&str>, value: &str| {
        let mut s = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "bar", "namespace": "default" },
            "data": { "k": value },
        });
        if let Some(rv) = rv {
            s["metadata"]["resourceVersion"] = json!(rv);
        }
        s
    };
    let path = "/api/v1/namespaces/default/secrets";
    let (code, created) = call(&kube, POST, path, Some(secret(None, "eA==")), None).await;
    assert_eq!(code, 201, "{created}");
    let first_rv = created["metadata"]["resourceVersion"].as_str().unwrap();

    let want = golden("create-already-exists.json", &AS_SECRET);
    let answer = call(&kube, POST, path, Some(secret(None, "eA==")), None).await;
    assert_answer("a create of a taken name", &want, 409, answer);

    let path = format!("{path}/bar");
    let (code, _) = call(
        &kube,
        PUT,
        &path,
        Some(secret(Some(first_rv), "eQ==")),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let mut substitutions = AS_SECRET.to_vec();
    substitutions.push((
        r#": failure""#,
        r#": the object has been modified; please apply your changes to the latest version and try again""#,
    ));
    let want = golden("update-conflict.json", &substitutions);
    let answer = call(
        &kube,
        PUT,
        &path,
        Some(secret(Some(first_rv), "eg==")),
        None,
    )
    .await;
    assert_answer("an update from a stale resourceVersion", &want, 409, answer);
}

/// A watch from a `resourceVersion` compacted away: HTTP 200 and one
/// `ERROR` event holding `NewResourceExpired` with the watch cache's
/// message, as the cacher's own test expects.
#[tokio::test]
async fn a_watch_from_a_compacted_version_is_the_real_410_event() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let old = kube.resource_version();
    kube.apply(
        Kind::ConfigMap,
        json!({ "metadata": { "name": "a", "namespace": "default" } }),
    );
    kube.compact();
    let response = client()
        .get(format!(
            "{}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}",
            kube.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let [event] = lines.as_slice() else {
        panic!("one event, then the end: {text}")
    };
    // The cache's "too old resource version: <asked> (<oldest kept - 1>)".
    let message = event["object"]["message"].as_str().unwrap_or_default();
    let expected = format!("too old resource version: {old} (");
    assert!(
        message.starts_with(&expected) && message.ends_with(')'),
        "{message}"
    );
    let want = golden(
        "watch-expired.json",
        &[(
            r#""status":"Failure","#,
            &format!(r#""status":"Failure","message":{},"#, json!(message)),
        )],
    );
    assert_same(
        "a watch from a compacted resourceVersion",
        differences(&want, event),
        event,
    );
}

/// A PATCH in a format that is not a patch (`application/json`, as `call`
/// sends): 415 naming the built-in kinds' patch types, as the apiserver's
/// patch handler answers before it looks for the object.
#[tokio::test]
async fn a_body_that_is_no_patch_is_the_real_415() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let want = golden("patch-unsupported-media-type.json", &[]);
    let path = "/api/v1/namespaces/default/configmaps/cm1";
    let answer = call(&kube, PATCH, path, Some(json!({ "data": {} })), None).await;
    assert_answer("a PATCH of application/json", &want, 415, answer);
}
