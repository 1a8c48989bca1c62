//! The list/watch protocol over raw HTTP, as the resource monitor's
//! source speaks it: selectors, pages from consistent snapshots, 410s,
//! held and ended watches — and the status codes of writes.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use kube_test_server::{node, pod, Fault, Kind, KubeApiServer};
use serde_json::{json, Value};

mod common;
use common::{answer, as_admin};

/// A client as the tests' own user unless a request names another.
fn client(kube: &KubeApiServer, timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder().no_proxy().timeout(timeout);
    as_admin(builder, kube).build().unwrap()
}

async fn get(kube: &KubeApiServer, path: &str) -> (u16, Value) {
    answer(client(kube, Duration::from_secs(10)).get(format!("{}{path}", kube.url()))).await
}

async fn send(
    kube: &KubeApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let request = client(kube, Duration::from_secs(10))
        .request(method, format!("{}{path}", kube.url()))
        .header("content-type", content_type)
        .body(body.to_string());
    answer(request).await
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Follow `continue` from `first` to the end: every name, and the
/// resourceVersion of every page.
async fn follow(kube: &KubeApiServer, query: &str, first: Value) -> (Vec<String>, Vec<String>) {
    let mut page = first;
    let (mut all, mut rvs) = (Vec::new(), Vec::new());
    loop {
        all.extend(names(&page));
        rvs.push(
            page["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        let Some(token) = page["metadata"]["continue"].as_str() else {
            return (all, rvs);
        };
        let (code, next) = get(kube, &format!("/api/v1/pods?{query}&continue={token}")).await;
        assert_eq!(code, 200, "{next}");
        page = next;
    }
}

/// An open watch response, read line by line.
struct Events {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Events {
    async fn open(kube: &KubeApiServer, path: &str) -> Self {
        let response = client(kube, Duration::from_secs(30))
            .get(format!("{}{path}", kube.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next event; `None` when the stream ends. Panics if nothing
    /// comes within 10 s.
    async fn next(&mut self) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Err(_) => panic!("no watch event within 10 s"),
                Ok(chunk) => match chunk.unwrap() {
                    Some(bytes) => self.buffer.extend_from_slice(&bytes),
                    None => {
                        assert!(self.buffer.is_empty(), "a partial line");
                        return None;
                    }
                },
            }
        }
    }

    /// The next event's type and object name.
    async fn next_named(&mut self) -> (String, String) {
        let event = self.next().await.expect("an event, not the end");
        (
            event["type"].as_str().unwrap().to_string(),
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn lists_page_from_a_consistent_snapshot() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    for i in 0..5 {
        kube.apply(
            Kind::Pod,
            pod(&format!("p{i}"), "n1", "Running", json!({}), "1", "1Gi"),
        );
    }
    let at_first = kube.resource_version().to_string();
    // No limit: everything at once, whatever the cap.
    kube.set_max_page(Some(2));
    let (code, all) = get(&kube, "/api/v1/pods").await;
    assert_eq!(code, 200);
    assert_eq!(names(&all).len(), 5);
    assert!(all["metadata"]["continue"].is_null());

    let (code, first) = get(&kube, "/api/v1/pods?limit=500").await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["kind"], "PodList");
    assert_eq!(first["apiVersion"], "v1");
    assert_eq!(names(&first), ["p0", "p1"], "capped at 2");
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    // The world changes between pages; the list does not.
    kube.apply(
        Kind::Pod,
        pod("p2", "n1", "Succeeded", json!({}), "1", "1Gi"),
    );
    kube.delete(Kind::Pod, "default/p3");
    kube.apply(Kind::Pod, pod("p9", "n1", "Running", json!({}), "1", "1Gi"));
    let (listed, rvs) = follow(&kube, "limit=500", first).await;
    assert_eq!(listed, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(
        rvs,
        [at_first.clone(), at_first.clone(), at_first],
        "every page carries the snapshot's"
    );
    assert_eq!(kube.pages(Kind::Pod), 4);
    assert_eq!(kube.lists(Kind::Pod), 2);

    // Under a selector a fresh list sees the changes, without a count.
    let now = kube.resource_version().to_string();
    let query = "limit=2&fieldSelector=status.phase%3DRunning";
    let (code, first) = get(&kube, &format!("/api/v1/pods?{query}")).await;
    assert_eq!(code, 200, "{first}");
    assert!(first["metadata"]["continue"].is_string());
    assert!(first["metadata"]["remainingItemCount"].is_null());
    let (listed, rvs) = follow(&kube, query, first).await;
    assert_eq!(listed, ["p0", "p1", "p4", "p9"]);
    assert!(rvs.iter().all(|rv| *rv == now), "{rvs:?}");

    // Namespaced lists see their namespace only.
    let (_, other) = get(&kube, "/api/v1/namespaces/kube-system/pods").await;
    assert!(names(&other).is_empty());
    let (_, here) = get(&kube, "/api/v1/namespaces/default/pods").await;
    assert_eq!(names(&here).len(), 5);

    // A token older than a compaction, or one never issued: 410.
    let (_, first) = get(&kube, "/api/v1/pods?limit=1").await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    kube.apply(
        Kind::Pod,
        pod("p10", "n1", "Running", json!({}), "1", "1Gi"),
    );
    kube.compact();
    for token in [token.as_str(), "bogus", "99-00"] {
        let (code, body) = get(&kube, &format!("/api/v1/pods?limit=1&continue={token}")).await;
        assert_eq!(code, 410, "{body}");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["status"], "Failure");
        assert_eq!(body["reason"], "Expired");
        assert_eq!(body["code"], 410);
    }
    assert_eq!(kube.gone(Kind::Pod), 3);
}

#[tokio::test]
async fn watches_under_selectors_see_objects_join_and_leave() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let shadow = json!({"liqo.io/shadowPod": "true"});
    kube.apply(Kind::Pod, pod("a", "n1", "Running", json!({}), "1", "1Gi"));
    kube.apply(
        Kind::Pod,
        pod("s", "n1", "Running", shadow.clone(), "1", "1Gi"),
    );
    let selectors =
        "labelSelector=liqo.io%2FshadowPod%21%3Dtrue&fieldSelector=status.phase%3DRunning";
    let (code, list) = get(&kube, &format!("/api/v1/pods?{selectors}")).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["a"]);
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v1/pods?watch=true&resourceVersion={rv}&{selectors}");
    let mut live = Events::open(&kube, &path).await;

    kube.apply(Kind::Pod, pod("b", "n1", "Pending", json!({}), "1", "1Gi"));
    kube.apply(Kind::Pod, pod("b", "n1", "Running", json!({}), "1", "1Gi"));
    kube.apply(Kind::Pod, pod("b", "n1", "Running", json!({}), "2", "1Gi"));
    kube.apply(
        Kind::Pod,
        pod("b", "n1", "Succeeded", json!({}), "2", "1Gi"),
    );
    kube.delete(Kind::Pod, "default/b");
    kube.apply(Kind::Pod, pod("s", "n1", "Running", shadow, "2", "1Gi"));
    kube.apply(Kind::Pod, pod("s", "n1", "Running", json!({}), "2", "1Gi"));
    kube.delete(Kind::Pod, "default/a");
    let expected = [
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("DELETED", "b"),
        ("ADDED", "s"),
        ("DELETED", "a"),
    ];
    // The same story live and replayed from history.
    let mut replay = Events::open(&kube, &path).await;
    for events in [&mut live, &mut replay] {
        for (kind, name) in expected {
            assert_eq!(events.next_named().await, (kind.into(), name.into()));
        }
    }
    // The DELETED of a pod that finished carries its new state.
    let mut again = Events::open(&kube, &path).await;
    let left = loop {
        let event = again.next().await.unwrap();
        if event["type"] == "DELETED" {
            break event;
        }
    };
    assert_eq!(left["object"]["status"]["phase"], "Succeeded");

    // Without a resourceVersion: what matches now, as ADDED.
    let mut fresh = Events::open(&kube, &format!("/api/v1/pods?watch=true&{selectors}")).await;
    assert_eq!(fresh.next_named().await, ("ADDED".into(), "s".into()));
    kube.apply(Kind::Pod, pod("c", "n1", "Running", json!({}), "1", "1Gi"));
    assert_eq!(fresh.next_named().await, ("ADDED".into(), "c".into()));

    // Streaming lists: the present, then a bookmark marking its end.
    let mut streaming = Events::open(
        &kube,
        "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    )
    .await;
    let mut kinds = Vec::new();
    loop {
        let event = streaming.next().await.unwrap();
        kinds.push(event["type"].as_str().unwrap().to_string());
        if event["type"] == "BOOKMARK" {
            assert_eq!(
                event["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
    }
    assert_eq!(kinds, ["ADDED", "ADDED", "BOOKMARK"]);

    let (code, body) = get(&kube, "/api/v1/pods?watch=true&fieldSelector=spec.foo%3Dx").await;
    assert_eq!(code, 400);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "reason": "BadRequest", "code": 400,
               "message": "field label not supported: spec.foo"})
    );
    let seen = kube.requests(Kind::Pod);
    assert!(seen.iter().any(|r| r.watch
        && r.label_selector.as_deref() == Some("liqo.io/shadowPod!=true")
        && r.field_selector.as_deref() == Some("status.phase=Running")
        && r.resource_version.as_deref() == Some(rv.as_str())));
    assert!(kube.requests(Kind::Node).is_empty());
}

#[tokio::test]
async fn compacted_history_is_410_and_watches_can_be_held_and_ended() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    kube.apply(Kind::Node, node("n1", true, false, "1", "1Gi"));
    let old = kube.resource_version();
    let mut open = Events::open(
        &kube,
        &format!("/api/v1/nodes?watch=true&resourceVersion={old}"),
    )
    .await;
    kube.end_watches();
    assert!(open.next().await.is_none(), "ended");

    kube.hold_watches(true);
    let url = format!(
        "{}/api/v1/nodes?watch=true&resourceVersion={old}",
        kube.url()
    );
    let held_client = client(&kube, Duration::from_secs(30));
    let held = tokio::spawn(async move {
        let response = held_client.get(url).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    eventually("the watch waits", || kube.waiting_watches(Kind::Node) == 1).await;
    kube.apply(Kind::Node, node("n2", true, false, "1", "1Gi"));
    kube.compact();
    let compacted = kube.resource_version();
    assert!(!held.is_finished(), "answered while held");
    kube.hold_watches(false);
    let (code, body) = held.await.unwrap();
    assert_eq!(code, 200, "the real server answers 410 inside the stream");
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": "Expired", "code": 410,
            "message": format!("too old resource version: {old} ({compacted})")}})]
    );
    assert_eq!(kube.gone(Kind::Node), 1);
    assert_eq!(kube.waiting_watches(Kind::Node), 0);

    // From the compaction point on, watching works again.
    let mut current = Events::open(
        &kube,
        &format!("/api/v1/nodes?watch=true&resourceVersion={compacted}"),
    )
    .await;
    kube.apply(Kind::Node, node("n3", true, false, "1", "1Gi"));
    assert_eq!(current.next_named().await, ("ADDED".into(), "n3".into()));
    assert_eq!(kube.gone(Kind::Node), 1);
    assert_eq!(kube.watches(Kind::Node), 3);
}

#[tokio::test]
async fn writes_answer_with_the_real_status_codes() {
    let kube = KubeApiServer::start().await.unwrap();
    let slices = "/apis/authentication.liqo.io/v1beta1/namespaces/default/resourceslices";
    let slice = json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                       "metadata": {"name": "s1"}, "spec": {"resources": {"cpu": "2"}}});
    let body = slice.to_string();
    let create = || send(&kube, "POST", slices, "application/json", &body);
    let (code, created) = create().await;
    assert_eq!(code, 201, "{created}");
    let (code, again) = create().await;
    assert_eq!(
        (code, again["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    let (code, missing) = get(&kube, &format!("{slices}/nope")).await;
    assert_eq!((code, missing["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(
        missing["message"],
        "resourceslices.authentication.liqo.io \"nope\" not found"
    );
    // Strategic merge on a custom resource, or no patch type at all: 415.
    for content_type in ["application/strategic-merge-patch+json", "application/json"] {
        let (code, body) = send(&kube, "PATCH", &format!("{slices}/s1"), content_type, "{}").await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (415, Some("UnsupportedMediaType")),
            "{content_type}"
        );
    }
    // ...but built-ins take it.
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Running", json!({}), "1", "1Gi"),
    );
    let (code, patched) = send(
        &kube,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/strategic-merge-patch+json",
        r#"{"metadata": {"labels": {"a": "b"}}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["a"], "b");
    // Stale resourceVersion: 409 Conflict.
    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, body) = send(
        &kube,
        "PUT",
        &format!("{slices}/s1"),
        "application/json",
        &stale.to_string(),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    // Schema: 422 with causes.
    let mut bad = created.clone();
    bad["spec"]["resources"]["cpu"] = json!("two");
    let (code, body) = send(
        &kube,
        "PUT",
        &format!("{slices}/s1"),
        "application/json",
        &bad.to_string(),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(body["details"]["causes"][0]["field"], "spec.resources.cpu");
    // Unknown resources, wrong scope, unserved subresources: 404; wrong
    // method: 405.
    for path in [
        "/apis/authentication.liqo.io/v1beta1/resourceslices/s1",
        "/api/v1/pods/web",
        "/apis/nope.io/v1/things",
        "/api/v1/namespaces/default/nodes",
        "/apis/offloading.liqo.io/v1beta1/namespaces/default/quotas/q/status",
    ] {
        let (code, _) = get(&kube, path).await;
        assert_eq!(code, 404, "{path}");
    }
    let (code, body) = send(&kube, "PUT", slices, "application/json", "{}").await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    // Dry runs are refused, not carried out.
    let (code, _) = send(
        &kube,
        "POST",
        &format!("{slices}?dryRun=All"),
        "application/json",
        &slice.to_string(),
    )
    .await;
    assert_eq!(code, 400);
    // Injected faults, then served again; all of it in the request log.
    kube.inject(Fault::new(500).verb("get").resource("resourceslices"));
    let (code, body) = get(&kube, &format!("{slices}/s1")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (500, Some("InternalError"))
    );
    let (code, _) = get(&kube, &format!("{slices}/s1")).await;
    assert_eq!(code, 200);
    let rbac = kube.rbac_requests();
    let has = |verb: &str, resource: &str| {
        rbac.iter()
            .any(|r| r.verb == verb && r.resource == resource)
    };
    assert!(
        has("create", "resourceslices") && has("update", "resourceslices") && has("patch", "pods")
    );
    let failed = kube.audit().into_iter().filter(|r| r.code == 500).count();
    assert_eq!(failed, 1);
}

/// Send a write; its status code, `Warning` headers and JSON body.
async fn write(
    kube: &KubeApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Vec<String>, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let response = client(kube, Duration::from_secs(10))
        .request(method, format!("{}{path}", kube.url()))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    (code, warnings, response.json().await.unwrap())
}

/// `fieldValidation` as Kubernetes v1.31.0 takes it
/// (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/{rest,create,update,patch}.go;
/// apiextensions-apiserver/pkg/apiserver/customresource_handler.go for
/// custom resources): unknown fields dropped with a `Warning` by default,
/// dropped silently under `Ignore`, refused under `Strict` — 400 for a
/// create or update, 422 on `patch` for a patch; duplicate keys likewise.
#[tokio::test]
async fn unknown_and_duplicate_fields_follow_field_validation() {
    let kube = KubeApiServer::start().await.unwrap();
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let cm = |name: &str| {
        format!(
            r#"{{"metadata": {{"name": "{name}", "colour": "red"}}, "data": {{"a": "1"}}, "spec": {{"foo": 1}}}}"#
        )
    };
    // No fieldValidation (kube-rs sends none): Warn.
    let (code, warnings, made) = write(&kube, "POST", cms, json, &cm("warned")).await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"metadata.colour\"""#,
            r#"299 - "unknown field \"spec\"""#
        ]
    );
    assert_eq!(made["metadata"].get("colour"), None);
    assert_eq!(made.get("spec"), None);
    assert_eq!(made["data"]["a"], "1");
    let stored = kube
        .get(Kind::ConfigMap, Some("default"), "warned")
        .unwrap();
    assert_eq!(stored.get("spec"), None);

    let (code, warnings, made) = write(
        &kube,
        "POST",
        &format!("{cms}?fieldValidation=Ignore"),
        json,
        &cm("ignored"),
    )
    .await;
    assert_eq!((code, warnings.len(), made.get("spec")), (201, 0, None));

    let (code, warnings, refused) = write(
        &kube,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        json,
        &cm("strict"),
    )
    .await;
    assert_eq!((code, warnings.len()), (400, 0));
    assert_eq!(
        refused,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"metadata.colour\", unknown field \"spec\"",
               "reason": "BadRequest", "code": 400})
    );
    assert!(kube
        .get(Kind::ConfigMap, Some("default"), "strict")
        .is_none());

    // A key given twice: the decoder's duplicate field.
    let twice = r#"{"metadata": {"name": "twice"}, "data": {"a": "1", "a": "2"}}"#;
    let (code, warnings, _) = write(&kube, "POST", cms, json, twice).await;
    assert_eq!(code, 201);
    assert_eq!(warnings, [r#"299 - "duplicate field \"data.a\"""#]);

    // An update: 400 under Strict, nothing changed.
    let mut update = kube
        .get(Kind::ConfigMap, Some("default"), "warned")
        .unwrap();
    update["data"]["b"] = json!("2");
    update["bogus"] = json!(true);
    let (code, _, refused) = write(
        &kube,
        "PUT",
        &format!("{cms}/warned?fieldValidation=Strict"),
        json,
        &update.to_string(),
    )
    .await;
    assert_eq!(code, 400, "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .ends_with("strict decoding error: unknown field \"bogus\""));
    let (code, _, refused) = write(
        &kube,
        "PUT",
        &format!("{cms}/warned?fieldValidation=Loose"),
        json,
        &update.to_string(),
    )
    .await;
    assert_eq!((code, refused["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        kube.get(Kind::ConfigMap, Some("default"), "warned")
            .unwrap()["data"],
        json!({"a": "1"})
    );

    // A merge patch: the patched object is decoded; 422 on `patch`.
    let merge = "application/merge-patch+json";
    let (code, _, refused) = write(
        &kube,
        "PATCH",
        &format!("{cms}/warned?fieldValidation=Strict"),
        merge,
        r#"{"data": {"b": "2"}, "extra": 1}"#,
    )
    .await;
    assert_eq!((code, refused["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(refused["details"]["causes"][0]["field"], "patch");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .ends_with(": strict decoding error: unknown field \"extra\""));
    let (code, warnings, patched) = write(
        &kube,
        "PATCH",
        &format!("{cms}/warned"),
        merge,
        r#"{"data": {"b": "2"}, "extra": 1}"#,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(warnings, [r#"299 - "unknown field \"extra\"""#]);
    assert_eq!(
        (patched.get("extra"), &patched["data"]),
        (None, &json!({"a": "1", "b": "2"}))
    );

    // Server-side apply: a built-in kind's unknown field is refused by the
    // field manager whatever fieldValidation says (a 500 of no reason).
    let apply = "application/apply-patch+yaml";
    let config = r#"{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": "default"}, "data": {"a": "1"}, "spec": {"foo": 1}}"#;
    let (code, _, refused) = write(
        &kube,
        "PATCH",
        &format!("{cms}/applied?fieldManager=t&fieldValidation=Ignore"),
        apply,
        config,
    )
    .await;
    assert_eq!(
        refused,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "failed to create typed patch object (default/applied; /v1, Kind=ConfigMap): .spec: field not declared in schema",
               "code": 500})
    );
    assert_eq!(code, 500);
    let known = config.replace(r#", "spec": {"foo": 1}"#, "");
    let (code, _, made) = write(
        &kube,
        "PATCH",
        &format!("{cms}/applied?fieldManager=t"),
        apply,
        &known,
    )
    .await;
    assert_eq!((code, &made["data"]), (201, &json!({"a": "1"})));

    // A custom resource: what its structural schema prunes is unknown.
    let slices = "/apis/authentication.liqo.io/v1beta1/namespaces/default/resourceslices";
    let slice = |name: &str| {
        format!(
            r#"{{"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                "metadata": {{"name": "{name}"}}, "spec": {{"class": "default", "foo": 1}}}}"#
        )
    };
    let (code, refused_slice) = {
        let (code, _, body) = write(
            &kube,
            "POST",
            &format!("{slices}?fieldValidation=Strict"),
            json,
            &slice("s1"),
        )
        .await;
        (code, body)
    };
    assert_eq!(code, 400);
    assert_eq!(
        refused_slice["message"],
        "ResourceSlice in version \"v1beta1\" cannot be handled as a ResourceSlice: strict decoding error: unknown field \"spec.foo\""
    );
    let (code, warnings, made) = write(&kube, "POST", slices, json, &slice("s2")).await;
    assert_eq!(code, 201);
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.foo\"""#]);
    assert_eq!(made["spec"], json!({"class": "default"}));
}

/// `pods/binding` as Kubernetes v1.31.0's `BindingREST` serves it
/// (pkg/registry/core/pod/storage/storage.go): a scheduler allowed to
/// create `pods/binding` binds a pod once (201 `Success`; `nodeName`,
/// annotations, `PodScheduled`), a second binding is a 409 on
/// `pods/binding`; a user without that permission gets the 403.
#[tokio::test]
async fn a_pod_is_bound_once_through_its_binding_subresource() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.load_rbac(&[
        json!({"kind": "ClusterRole", "metadata": {"name": "binder"},
            "rules": [{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "binder"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "binder"},
            "subjects": [{"kind": "User", "name": "scheduler"}]}),
    ]);
    let mut unbound = pod("p", "", "Pending", json!({}), "100m", "64Mi");
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    kube.apply(Kind::Pod, unbound);
    let bind = |token: String, node: &'static str| {
        let url = format!("{}/api/v1/namespaces/default/pods/p/binding", kube.url());
        let client = client(&kube, Duration::from_secs(10));
        async move {
            answer(client.post(url).bearer_auth(token).json(
                &json!({"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": "p", "annotations": {"scheduled-by": "test"}},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}}),
            ))
            .await
        }
    };
    let (code, refused) = bind(kube.token_for("someone"), "n1").await;
    assert_eq!(code, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"p\" is forbidden: User \"someone\" cannot create resource \"pods/binding\" in API group \"\" in the namespace \"default\""
    );
    let (code, status) = bind(kube.token_for("scheduler"), "n1").await;
    assert_eq!(
        (code, status),
        (
            201,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        )
    );
    let bound = kube.get(Kind::Pod, Some("default"), "p").unwrap();
    assert_eq!(bound["spec"]["nodeName"], "n1");
    assert_eq!(bound["metadata"]["annotations"]["scheduled-by"], "test");
    assert_eq!(
        (
            &bound["status"]["conditions"][0]["type"],
            &bound["status"]["conditions"][0]["status"]
        ),
        (&json!("PodScheduled"), &json!("True"))
    );
    let (code, conflict) = bind(kube.token_for("scheduler"), "n2").await;
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
    );
    assert_eq!(
        kube.get(Kind::Pod, Some("default"), "p").unwrap()["spec"]["nodeName"],
        "n1"
    );
}
