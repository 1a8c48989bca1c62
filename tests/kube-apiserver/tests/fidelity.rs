//! Where the server behaves as a real one on the points clients get wrong
//! against fakes: `resourceVersion` on lists (unset, `0`, `NotOlderThan`,
//! `Exact`, expired, too large) and watches (too large), BOOKMARKs sent
//! periodically and only on request, 429/503 with `Retry-After`,
//! connections closed mid-response, and HTTPS with a generated CA, bearer
//! tokens and client certificates.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::{Client, Config};
use kube_test_server::{node, Fault, Kind, KubeApiServer};
use serde_json::{json, Value};

mod common;
use common::{answer, as_admin};

/// A client builder without credentials.
fn anonymous() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
}

/// A client builder as the tests' own user.
fn builder(kube: &KubeApiServer) -> reqwest::ClientBuilder {
    as_admin(anonymous(), kube)
}

async fn get_with(client: &reqwest::Client, kube: &KubeApiServer, path: &str) -> (u16, Value) {
    answer(client.get(format!("{}{path}", kube.url()))).await
}

async fn get(kube: &KubeApiServer, path: &str) -> (u16, Value) {
    get_with(&builder(kube).build().unwrap(), kube, path).await
}

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// Every event line of a watch, until it ends (or 20 s pass).
async fn events(kube: &KubeApiServer, path: &str) -> Vec<Value> {
    let text = builder(kube)
        .build()
        .unwrap()
        .get(format!("{}{path}", kube.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn lists_read_the_resource_version_asked_for() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.apply(Kind::Node, node("a", true, false, "1", "1Gi"));
    let at_a = kube.resource_version();
    kube.apply(Kind::Node, node("b", true, false, "1", "1Gi"));
    kube.delete(Kind::Node, "a");
    let now = kube.resource_version();

    // Unset and "0": the most recent state.
    for query in ["", "?resourceVersion=0", "?resourceVersion=&limit=5"] {
        let (code, list) = get(&kube, &format!("/api/v1/nodes{query}")).await;
        assert_eq!(code, 200, "{query}: {list}");
        assert_eq!(names(&list), ["b"], "{query}");
        assert_eq!(list["metadata"]["resourceVersion"], now.to_string());
    }
    // Not older than a past one: the most recent too.
    for query in [
        format!("resourceVersion={at_a}"),
        format!("resourceVersion={at_a}&resourceVersionMatch=NotOlderThan"),
    ] {
        let (code, list) = get(&kube, &format!("/api/v1/nodes?{query}")).await;
        assert_eq!((code, names(&list)), (200, vec!["b"]), "{query}");
    }
    // Exact: the state then, with that resourceVersion.
    let (code, list) = get(
        &kube,
        &format!("/api/v1/nodes?resourceVersion={at_a}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, names(&list)), (200, vec!["a"]), "{list}");
    assert_eq!(list["metadata"]["resourceVersion"], at_a.to_string());

    // ...until that history is compacted: 410 Expired.
    kube.compact();
    let (code, status) = get(
        &kube,
        &format!("/api/v1/nodes?resourceVersion={at_a}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (410, Some("Expired")));
    assert_eq!(
        status["message"],
        "The resourceVersion for the provided list is too old."
    );
    let (code, list) = get(
        &kube,
        &format!("/api/v1/nodes?resourceVersion={now}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, names(&list)), (200, vec!["b"]));

    // Newer than the server: it waits, then answers a 504 Timeout.
    kube.set_fresh_wait(Duration::from_millis(200));
    let future = now + 5;
    for matching in [
        "",
        "&resourceVersionMatch=NotOlderThan",
        "&resourceVersionMatch=Exact",
    ] {
        let (code, status) = get(
            &kube,
            &format!("/api/v1/nodes?resourceVersion={future}{matching}"),
        )
        .await;
        assert_eq!(code, 504, "{matching}: {status}");
        assert_eq!(
            status,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "code": 504, "reason": "Timeout",
                "message": format!("Timeout: Too large resource version: {future}, current: {now}"),
                "details": {
                    "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
                    "retryAfterSeconds": 1,
                },
            })
        );
    }
    // ...and serves it if the server gets there while it waits.
    kube.set_fresh_wait(Duration::from_secs(10));
    let next = now + 1;
    let before = kube.requests(Kind::Node).len();
    let late = {
        let url = format!("{}/api/v1/nodes?resourceVersion={next}", kube.url());
        let client = builder(&kube).build().unwrap();
        tokio::spawn(async move { client.get(url).send().await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while kube.requests(Kind::Node).len() == before {
        assert!(Instant::now() < deadline, "the list never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kube.apply(Kind::Node, node("c", true, false, "1", "1Gi"));
    let list: Value = late.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(names(&list), ["b", "c"]);
}

#[tokio::test]
async fn list_options_a_real_server_refuses() {
    let kube = KubeApiServer::start().await.unwrap();
    let invalid = [
        (
            "resourceVersionMatch=Exact",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Newest",
            "resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
        ),
    ];
    for (query, text) in invalid {
        let (code, status) = get(&kube, &format!("/api/v1/nodes?{query}")).await;
        assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")));
        assert_eq!(
            status["message"],
            format!("ListOptions.meta.k8s.io \"\" is invalid: {text}"),
            "{query}"
        );
        assert_eq!(status["details"]["kind"], "ListOptions");
    }
    let (code, status) = get(&kube, "/api/v1/nodes?resourceVersion=3&continue=1-00").await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "specifying resource version is not allowed when using continue"
    );
}

/// A watch from a resourceVersion the server has not reached: what the
/// watch cache answers after waiting for it — one ERROR event in a 200
/// stream, holding the 504.
#[tokio::test]
async fn a_watch_from_the_future_times_out_like_the_watch_cache() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.apply(Kind::Node, node("a", true, false, "1", "1Gi"));
    kube.set_fresh_wait(Duration::from_millis(200));
    let now = kube.resource_version();
    let future = now + 100;
    let events = events(
        &kube,
        &format!("/api/v1/nodes?watch=true&resourceVersion={future}"),
    )
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        events[0]["object"],
        kube_test_server::ApiError::too_large_resource_version(future, now).to_status()
    );
    assert_eq!(events[0]["object"]["code"], 504);
    assert_eq!(events[0]["object"]["reason"], "Timeout");
}

/// BOOKMARKs come every interval, only to watches that asked, never at
/// the start, and carry the resourceVersion the stream has got to —
/// changes to other resources included.
#[tokio::test]
async fn bookmarks_are_periodic_and_only_on_request() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.set_bookmark_interval(Duration::from_millis(300));
    kube.apply(Kind::Node, node("a", true, false, "1", "1Gi"));
    let start = kube.resource_version();
    let path = |bookmarks: bool| {
        format!(
            "/api/v1/nodes?watch=true&resourceVersion={start}&timeoutSeconds=2&allowWatchBookmarks={bookmarks}"
        )
    };
    let plain = path(false);
    let (with, without) = tokio::join!(
        async {
            let at = Instant::now();
            let events = events(&kube, &path(true)).await;
            (at.elapsed(), events)
        },
        events(&kube, &plain),
    );
    let (waited, with) = with;
    assert!(waited >= Duration::from_millis(1900), "{waited:?}");
    assert!(without.is_empty(), "{without:?}");
    // Two seconds at one per 300 ms: at most six (the seventh would be at
    // 2.1 s), none at once.
    assert!((4..=6).contains(&with.len()), "{with:?}");
    for event in &with {
        assert_eq!(event["type"], "BOOKMARK");
        assert_eq!(event["object"]["kind"], "Node");
        assert_eq!(
            event["object"]["metadata"]["resourceVersion"],
            start.to_string()
        );
    }

    // A change to pods moves the nodes watch's bookmarks on.
    let watch = {
        let url = format!("{}{}", kube.url(), path(true));
        let client = builder(&kube).build().unwrap();
        tokio::spawn(async move { client.get(url).send().await.unwrap().text().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    kube.apply(Kind::Namespace, json!({"metadata": {"name": "elsewhere"}}));
    let moved = kube.resource_version().to_string();
    let text = watch.await.unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "BOOKMARK");
    assert_eq!(last["object"]["metadata"]["resourceVersion"], moved);
}

#[tokio::test]
async fn throttling_and_unavailability_say_when_to_retry() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.inject(Fault::new(429));
    kube.inject(Fault::new(503).retry_after(7));
    kube.inject(Fault::new(500));
    let client = builder(&kube).build().unwrap();
    let url = format!("{}/api/v1/nodes", kube.url());
    for (code, retry_after) in [(429, Some("1")), (503, Some("7")), (500, None)] {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status().as_u16(), code);
        let header = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(header.as_deref(), retry_after, "{code}");
        let status: Value = response.json().await.unwrap();
        assert_eq!(
            status["details"]["retryAfterSeconds"],
            retry_after.map_or(Value::Null, |s| json!(s.parse::<u64>().unwrap())),
            "{code}"
        );
    }
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
}

/// A reset fault cuts the response after its first bytes; reset watches
/// cut open streams: the client sees a broken body, not an end.
#[tokio::test]
async fn connections_reset_mid_response_and_mid_watch() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.inject(Fault::reset());
    let client = builder(&kube).build().unwrap();
    let url = format!("{}/api/v1/nodes", kube.url());
    // Cut before or after the headers reached the client: either way a
    // broken response, never a whole one.
    let broken = match client.get(&url).send().await {
        Err(_) => true,
        Ok(response) => response.bytes().await.is_err(),
    };
    assert!(broken, "the response ended cleanly");
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);

    let mut watch = client
        .get(format!("{url}?watch=true"))
        .send()
        .await
        .unwrap();
    kube.apply(Kind::Node, node("a", true, false, "1", "1Gi"));
    let first = watch.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("ADDED"));
    kube.reset_watches();
    let cut = loop {
        match tokio::time::timeout(Duration::from_secs(10), watch.chunk())
            .await
            .expect("the watch was not cut")
        {
            Ok(Some(_)) => continue,
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(cut, "the watch ended cleanly instead of being cut");
}

async fn kube_client(path: &std::path::Path) -> kube::Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config)
}

/// Over HTTPS: the kubeconfig trusts the server's CA and carries a bearer
/// token or a client certificate (user = its CN); a client trusting
/// another CA never gets to send a request, and a bad token is a 401.
#[tokio::test]
async fn https_with_tokens_and_client_certificates() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    assert!(kube.url().starts_with("https://127.0.0.1:"));
    let dir = tempfile::tempdir().unwrap();
    // Both users may read Leases in `default`, and nothing else (RBAC is
    // enforced for users with credentials).
    kube.load_rbac(&[
        serde_json::json!({"kind": "Role", "metadata": {"name": "leases", "namespace": "default"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}),
        serde_json::json!({"kind": "RoleBinding", "metadata": {"name": "leases", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
            "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "liqo"},
                         {"kind": "User", "name": "jane"}]}),
    ]);

    let by_token = dir.path().join("token");
    kube.write_kubeconfig_as(&by_token, "system:serviceaccount:liqo:a")
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(kube_client(&by_token).await.unwrap(), "default");
    assert!(leases.get_opt("x").await.unwrap().is_none());

    let by_cert = dir.path().join("cert");
    kube.write_kubeconfig_with_client_cert(&by_cert, "jane")
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(kube_client(&by_cert).await.unwrap(), "default");
    assert!(leases.get_opt("y").await.unwrap().is_none());
    let elsewhere: Api<Lease> =
        Api::namespaced(kube_client(&by_cert).await.unwrap(), "kube-system");
    match elsewhere.get_opt("y").await {
        Err(kube::Error::Api(e)) => assert_eq!(
            (e.code, e.message.as_str()),
            (403, "leases.coordination.k8s.io \"y\" is forbidden: User \"jane\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"")
        ),
        other => panic!("not refused: {other:?}"),
    }

    let users: Vec<Option<String>> = kube
        .audit()
        .into_iter()
        .filter(|r| r.resource.is_some())
        .map(|r| r.user)
        .collect();
    assert_eq!(
        users,
        [
            Some("system:serviceaccount:liqo:a".into()),
            Some("jane".into()),
            Some("jane".into())
        ]
    );

    // Trusting another CA: the handshake fails, nothing reaches the API.
    let wrong_ca = dir.path().join("wrong-ca");
    let other = kube_test_server::tls::unrelated_ca_pem().unwrap();
    kube.write_kubeconfig_trusting(&wrong_ca, "someone", &other)
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(kube_client(&wrong_ca).await.unwrap(), "default");
    let error = leases.get_opt("z").await.expect_err("an untrusted server");
    assert!(!matches!(error, kube::Error::Api(_)), "{error:?}");
    assert_eq!(kube.audit().len(), 3, "a request got through");

    // Plain HTTP to the HTTPS port gets nowhere either.
    let plain = kube.url().replace("https://", "http://");
    assert!(builder(&kube)
        .build()
        .unwrap()
        .get(format!("{plain}/api/v1/nodes"))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .is_err());

    // The right CA and a token the server never issued: 401.
    let ca = reqwest::Certificate::from_pem(kube.ca_pem().unwrap().as_bytes()).unwrap();
    let trusting = builder(&kube).add_root_certificate(ca).build().unwrap();
    let response = trusting
        .get(format!("{}/api/v1/nodes", kube.url()))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let (code, _) = get_with(&trusting, &kube, "/api/v1/nodes").await;
    assert_eq!(code, 200, "the tests' own user over HTTPS");
}

/// Writes by a user RBAC holds pass the API server's admission as a real
/// one's do: a binding to a role the writer does not hold is refused
/// (escalation check), and so is an owner reference with
/// `blockOwnerDeletion` to an owner whose finalizers the writer may not
/// update (OwnerReferencesPermissionEnforcement); the same writes within
/// the writer's permissions are stored.
#[tokio::test]
async fn writes_pass_the_escalation_and_owner_reference_checks() {
    let kube = KubeApiServer::start().await.unwrap();
    let user = "system:serviceaccount:default:writer";
    kube.load_rbac(&[
        json!({"kind": "ClusterRole", "metadata": {"name": "writer"},
            "rules": [{"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["create"]},
                      {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["create"]}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "secrets-only"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "admin"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "writer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "writer"},
            "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "default"}]}),
    ]);
    let token = kube.token_for(user);
    let client = builder(&kube).build().unwrap();
    let post = |path: &str, body: Value| {
        client
            .post(format!("{}{path}", kube.url()))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let binding = |role: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("to-{role}"), "namespace": "default"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "User", "name": "someone", "apiGroup": "rbac.authorization.k8s.io"}]})
    };
    let path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let r = post(path, binding("admin")).await.unwrap();
    assert_eq!(r.status(), 403);
    let status: Value = r.json().await.unwrap();
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "rolebindings.rbac.authorization.k8s.io \"to-admin\" is forbidden: user \
             \"system:serviceaccount:default:writer\" (groups=[\"system:serviceaccounts\" \
             \"system:serviceaccounts:default\" \"system:authenticated\"]) is attempting to grant \
             RBAC permissions not currently held:"
        ),
        "{status}"
    );
    assert!(kube
        .get(
            ("rbac.authorization.k8s.io", "rolebindings"),
            Some("default"),
            "to-admin"
        )
        .is_none());
    assert_eq!(
        post(path, binding("secrets-only")).await.unwrap().status(),
        201
    );

    let owned = |block: bool| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": format!("owned-{block}"), "namespace": "default",
                            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                                 "uid": "u-1", "controller": true, "blockOwnerDeletion": block}]}})
    };
    let path = "/api/v1/namespaces/default/secrets";
    let r = post(path, owned(true)).await.unwrap();
    assert_eq!(r.status(), 403);
    let status: Value = r.json().await.unwrap();
    assert_eq!(
        status["message"],
        "secrets \"owned-true\" is forbidden: cannot set blockOwnerDeletion if an ownerReference \
         refers to a resource you can't set finalizers on: , <nil>"
    );
    assert_eq!(post(path, owned(false)).await.unwrap().status(), 201);
}

/// A namespace's own path is in that namespace for RBAC (requestinfo.go):
/// a RoleBinding in `team` allowing `get namespaces` lets its user read
/// namespace `team`, and no other.
#[tokio::test]
async fn a_namespace_is_read_under_a_role_binding_in_itself() {
    let kube = KubeApiServer::start().await.unwrap();
    for ns in ["team", "other"] {
        kube.create(Kind::Namespace, json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    kube.load_rbac(&[
        json!({"kind": "Role", "metadata": {"name": "self", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "self", "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "self"},
            "subjects": [{"kind": "User", "name": "tim"}]}),
    ]);
    let token = kube.token_for("tim");
    let client = builder(&kube).build().unwrap();
    let read = |ns: &str| {
        client
            .get(format!("{}/api/v1/namespaces/{ns}", kube.url()))
            .bearer_auth(&token)
            .send()
    };
    assert_eq!(read("team").await.unwrap().status(), 200);
    let refused = read("other").await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        body["message"],
        "namespaces \"other\" is forbidden: User \"tim\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"other\""
    );
}

/// The RBAC verb of a GET, as `NewRequestInfo` makes it
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`):
/// `list` or `watch` only for a path naming no object, so a GET of a named
/// object with `watch=true` is a `get`, answered with the object; `watch`
/// is true for any value but `0` and `false` (`Convert_Slice_string_To_bool`).
#[tokio::test]
async fn a_named_get_with_watch_is_a_get() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.apply(
        Kind::ConfigMap,
        json!({"metadata": {"name": "c", "namespace": "default"}}),
    );
    kube.load_rbac(&[
        json!({"kind": "Role", "metadata": {"name": "get", "namespace": "default"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "get", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "get"},
            "subjects": [{"kind": "User", "name": "reader"}]}),
    ]);
    let token = kube.token_for("reader");
    let client = builder(&kube).build().unwrap();
    let read = |query: &str| {
        client
            .get(format!(
                "{}/api/v1/namespaces/default/configmaps{query}",
                kube.url()
            ))
            .bearer_auth(&token)
            .send()
    };
    let named = read("/c?watch=true").await.unwrap();
    assert_eq!(named.status(), 200);
    let object: Value = named.json().await.unwrap();
    assert_eq!(
        (&object["kind"], &object["metadata"]["name"]),
        (&json!("ConfigMap"), &json!("c"))
    );
    for query in ["?watch=true", "?watch=True", "?watch="] {
        let collection = read(query).await.unwrap();
        assert_eq!(collection.status(), 403, "{query}");
        let status: Value = collection.json().await.unwrap();
        assert_eq!(
            status["message"],
            "configmaps is forbidden: User \"reader\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"default\"",
            "{query}"
        );
    }
    let verbs: Vec<String> = kube
        .audit()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some("reader"))
        .map(|r| r.verb)
        .collect();
    assert_eq!(verbs, ["get", "watch", "watch", "watch"]);
}
